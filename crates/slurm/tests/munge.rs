//! The agent's TCP protocol with a real MUNGE: a munged of the test's own
//! (its own key and socket, stopped by its pid), a server on loopback,
//! and requests good, replayed, foreign, of a non-root user, garbage and
//! oversized, and a flood of connections.

use memgang_slurm::auth::{payload, Munge, Signer, Verifier};
use memgang_slurm::net::{exchange, Client, Limits, Server, Stopper};
use memgang_slurm::wire::{Request, Response};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

/// A munged on its own key, stopped (by pid) when dropped.
struct Munged {
    dir: tempfile::TempDir,
}

impl Munged {
    fn start() -> Munged {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut key = vec![0; 1024];
        std::fs::File::open("/dev/urandom")
            .unwrap()
            .read_exact(&mut key)
            .unwrap();
        std::fs::write(d.join("key"), key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join("key"), std::fs::Permissions::from_mode(0o400)).unwrap();
        let out = Command::new("munged")
            .arg("--force")
            .arg(format!("--key-file={}", d.join("key").display()))
            .arg(format!("--socket={}", d.join("socket").display()))
            .arg(format!("--pid-file={}", d.join("pid").display()))
            .arg(format!("--log-file={}", d.join("log").display()))
            .arg(format!("--seed-file={}", d.join("seed").display()))
            .output()
            .expect("munged (Debian's munge package: apt-get install munge)");
        assert!(out.status.success(), "munged: {out:?}");
        let t = Instant::now();
        while !d.join("socket").exists() {
            assert!(t.elapsed() < T, "munged made no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        Munged { dir }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("socket")
    }

    fn service(&self) -> Arc<Munge> {
        Arc::new(Munge::new(Some(self.socket())))
    }

    /// A credential made by the `munge` tool as `uid` (root may name one).
    fn credential_as(&self, uid: u32, payload: &[u8]) -> String {
        let mut child = Command::new("munge")
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--uid={uid}"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(payload).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Munged {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(self.dir.path().join("pid")).unwrap_or_default();
        if let Ok(pid) = pid.trim().parse::<i32>() {
            let pid = Pid::from_raw(pid);
            let _ = kill(pid, Signal::SIGTERM);
            let t = Instant::now();
            while alive(pid) {
                if t.elapsed() > T {
                    eprintln!("munged {pid} still there after SIGTERM: SIGKILL");
                    let _ = kill(pid, Signal::SIGKILL);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Running, not a zombie (munged daemonized: init reaps it, in its time).
fn alive(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

struct Agent {
    addr: String,
    stopper: Stopper,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Agent {
    fn start(m: &Munged) -> Agent {
        let v = Verifier::new(m.service(), "n1", Duration::from_secs(300), 1000);
        let limits = Limits {
            io_timeout: Duration::from_secs(2),
            ..Limits::default()
        };
        let server = Server::bind("127.0.0.1:0", v, limits).unwrap();
        let addr = server.local_addr().to_string();
        let stopper = server.stopper();
        let thread = std::thread::spawn(move || {
            server
                .run(|req| match req {
                    Request::Hello => Response::Hello {
                        node: "n1".into(),
                        pool_bytes: 1,
                    },
                    _ => Response::Ok,
                })
                .unwrap()
        });
        Agent {
            addr,
            stopper,
            thread: Some(thread),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn require_root_and_munge() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root: munged's --uid and a key of its own"
    );
    assert!(
        Path::new("/usr/sbin/munged").exists() || Command::new("munged").arg("-V").output().is_ok(),
        "needs munged: apt-get install munge (scripts/lib.sh ensure_slurm)"
    );
}

fn hello() -> String {
    serde_json::to_string(&Request::Hello).unwrap()
}

#[test]
#[ignore = "needs root and munge (scripts/test runs it as root)"]
fn munge_authenticated_requests_over_tcp() {
    require_root_and_munge();
    let m = Munged::start();
    let agent = Agent::start(&m);
    let client = Client::new(Signer::new(m.service(), Duration::from_secs(60)));

    // Good.
    let r = client.call("n1", &agent.addr, &Request::Hello, T).unwrap();
    assert!(matches!(r, Response::Hello { .. }), "{r:?}");

    // Replayed: the same credential and request again.
    let body = hello();
    let cred = m.credential_as(0, &payload("n1", body.as_bytes()));
    exchange(&agent.addr, &cred, &body, T, T).unwrap();
    let e = exchange(&agent.addr, &cred, &body, T, T).unwrap_err();
    assert!(e.to_string().contains("replayed credential"), "{e:#}");

    // Another request under a good credential.
    let cred = m.credential_as(0, &payload("n1", body.as_bytes()));
    let other = serde_json::to_string(&Request::Check { incoming: vec![] }).unwrap();
    let e = exchange(&agent.addr, &cred, &other, T, T).unwrap_err();
    assert!(e.to_string().contains("made for another request"), "{e:#}");

    // Another cluster's key.
    let foreign = Munged::start();
    let e = Client::new(Signer::new(foreign.service(), Duration::from_secs(60)))
        .call("n1", &agent.addr, &Request::Hello, T)
        .unwrap_err();
    assert!(e.to_string().contains("another MUNGE key"), "{e:#}");

    // Not root.
    let cred = m.credential_as(1000, &payload("n1", body.as_bytes()));
    let e = exchange(&agent.addr, &cred, &body, T, T).unwrap_err();
    assert!(e.to_string().contains("uid 1000"), "{e:#}");

    // Garbage, and more than the request's bound (1 MiB).
    let e = exchange(&agent.addr, "MUNGE:nonsense:", "{}", T, T).unwrap_err();
    assert!(
        e.to_string().contains("not a credential of this cluster"),
        "{e:#}"
    );
    let mut raw = TcpStream::connect(&agent.addr).unwrap();
    raw.set_read_timeout(Some(T)).unwrap();
    raw.write_all(b"MUNGE:x:\n").unwrap();
    // 1 MiB and 64 KiB: the server reads to its bound, refuses, and reads
    // the rest before it closes (so the answer is not lost to a reset).
    let chunk = vec![b'x'; 64 << 10];
    for _ in 0..17 {
        raw.write_all(&chunk).unwrap();
    }
    let mut got = String::new();
    raw.read_to_string(&mut got).unwrap();
    assert!(
        got.contains("the request is longer than 1048576 bytes"),
        "oversized: {got}"
    );

    // The server is still there.
    let r = client.call("n1", &agent.addr, &Request::Hello, T).unwrap();
    assert!(matches!(r, Response::Hello { .. }), "{r:?}");
}

#[test]
#[ignore = "needs root and munge (scripts/test runs it as root)"]
fn without_munged_requests_are_refused_with_the_reason() {
    require_root_and_munge();
    let m = Munged::start();
    let agent = Agent::start(&m);
    let client = Client::new(Signer::new(m.service(), Duration::from_secs(60)));
    let body = hello();
    let cred = m.credential_as(0, &payload("n1", body.as_bytes()));
    drop(m);
    // The agent's munged is gone: it cannot decode, and says so.
    let e = exchange(&agent.addr, &cred, &body, T, T).unwrap_err();
    assert!(e.to_string().contains("MUNGE is not available"), "{e:#}");
    // Nor can the controller encode.
    let e = client
        .call("n1", &agent.addr, &Request::Hello, T)
        .unwrap_err();
    assert!(format!("{e:#}").contains("MUNGE is not available"), "{e:#}");
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The flood test's server timeout for a silent connection.
const FLOOD_TIMEOUT: Duration = Duration::from_secs(1);

#[test]
#[ignore = "needs root and munge (scripts/test runs it as root)"]
fn a_flood_of_connections_is_bounded_and_the_agent_recovers() {
    require_root_and_munge();
    let m = Munged::start();
    let v = Verifier::new(m.service(), "n1", Duration::from_secs(300), 1000);
    let limits = Limits {
        io_timeout: FLOOD_TIMEOUT,
        max_connections: 8,
        ..Limits::default()
    };
    let server = Server::bind("127.0.0.1:0", v, limits).unwrap();
    let addr = server.local_addr().to_string();
    let stopper = server.stopper();
    let before = threads();
    let thread = std::thread::spawn(move || server.run(|_| Response::Ok).unwrap());
    let agent = Agent {
        addr: addr.clone(),
        stopper,
        thread: Some(thread),
    };
    let client = Client::new(Signer::new(m.service(), Duration::from_secs(60)));
    // 200 connections that say nothing: 8 hold a place until their
    // deadline, the others are told "busy" at once.
    let started = std::time::Instant::now();
    let flood: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let mut busy = 0;
    for mut s in flood {
        s.set_read_timeout(Some(T)).unwrap();
        let mut got = String::new();
        let _ = s.read_to_string(&mut got);
        if got.contains("busy") {
            busy += 1;
        } else {
            assert!(got.contains("timed out reading the credential"), "{got}");
        }
        assert!(
            threads() <= before + 1 + 8,
            "{} threads for 8 connections",
            threads() - before
        );
    }
    // A silent connection holds its place for the whole timeout, so each
    // of the 8 places serves at most one per timeout: on a loaded machine
    // where the 200 took longer than one timeout to be answered, places
    // freed meanwhile were given to later ones.
    let timeouts = started.elapsed().as_secs_f64() / FLOOD_TIMEOUT.as_secs_f64();
    let held_at_most = 8 * timeouts.ceil() as usize;
    assert!(
        200 - busy <= held_at_most,
        "{} of 200 held a place in {timeouts:.1} timeouts, at most {held_at_most}",
        200 - busy
    );
    // Once the silent ones are cut off, the controller is served.
    let r = client.call("n1", &agent.addr, &Request::Hello, T).unwrap();
    assert_eq!(r, Response::Ok);
}
