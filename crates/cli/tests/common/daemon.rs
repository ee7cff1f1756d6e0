//! A memgangd for a test: its own state directory, socket and
//! configuration, started, stopped and restarted by the test, stopped (its
//! jobs cancelled first) when the test ends, passed or not. The verbs go through `memgang`, as root or as a user.

use super::{memgang, text};
use serde_json::Value;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The memgangd the tests run: the one built beside `memgang`, or
/// `$MEMGANG_TEST_MEMGANGD` (e.g. an older build, to see a test fail on
/// the code it was written against).
pub fn memgangd_exe() -> PathBuf {
    if let Some(exe) = std::env::var_os("MEMGANG_TEST_MEMGANGD") {
        return PathBuf::from(exe);
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_memgang")).with_file_name("memgangd");
    assert!(
        exe.exists(),
        "{} is missing: build the whole workspace first (cargo build --workspace)",
        exe.display()
    );
    exe
}

/// `config` without the lines of the keys in `$MEMGANG_TEST_DROP_KEYS`
/// (comma-separated): keys an older memgangd refuses, so that a test run
/// against it meets the old behaviour rather than its config check.
fn known_keys(config: &str) -> String {
    let drop = std::env::var("MEMGANG_TEST_DROP_KEYS").unwrap_or_default();
    let drop: Vec<&str> = drop.split(',').filter(|k| !k.is_empty()).collect();
    config
        .lines()
        .filter(|l| !drop.contains(&l.split('=').next().unwrap_or("").trim()))
        .map(|l| format!("{l}\n"))
        .collect()
}

pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
    /// Its configuration beside `state_dir` and `socket`, written at each
    /// start: a test may change it between a stop and a start.
    pub config: String,
    /// Resource limits it starts with (`libc::RLIMIT_*`, soft = hard),
    /// beyond the test's own.
    pub rlimits: Vec<(u32, u64)>,
    /// Its socket, if not `run/memgang.sock` in its directory.
    pub socket_at: Option<PathBuf>,
}

/// How long a verb may take before the test calls the daemon stuck.
const VERB_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a start may take: a restart reads the journal back.
const START_TIMEOUT: Duration = Duration::from_secs(20);

impl Daemon {
    pub fn new(config: &str) -> Daemon {
        Daemon::with_nofile(config, None)
    }

    /// A daemon whose descriptor limit is `nofile` (systemd's default is
    /// 1,024).
    pub fn with_nofile(config: &str, nofile: Option<u64>) -> Daemon {
        let mut d = Daemon::unstarted(config);
        d.rlimits.extend(nofile.map(|n| (libc::RLIMIT_NOFILE, n)));
        d.start();
        d
    }

    /// A daemon not started yet: a test may prepare its state directory
    /// ([`Daemon::state`], e.g. mount a small tmpfs there) first.
    pub fn unstarted(config: &str) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        // Other users' jobs run from here and their clients reach the socket.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Daemon {
            dir,
            child: None,
            config: config.to_string(),
            rlimits: Vec::new(),
            socket_at: None,
        }
    }

    /// Its `state_dir`.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn socket(&self) -> PathBuf {
        (self.socket_at.clone()).unwrap_or_else(|| self.dir.path().join("run/memgang.sock"))
    }

    pub fn start(&mut self) {
        let text = format!(
            "state_dir = \"{}\"\nsocket = \"{}\"\n{}",
            self.state().display(),
            self.socket().display(),
            known_keys(&self.config)
        );
        std::fs::write(self.dir.path().join("memgang.toml"), text).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.log"))
            .unwrap();
        // A socket left by a daemon killed with -9 must not pass for this
        // one's.
        let _ = std::fs::remove_file(self.socket());
        let mut cmd = Command::new(memgangd_exe());
        cmd.arg("--config")
            .arg(self.dir.path().join("memgang.toml"))
            .stderr(log);
        if !self.rlimits.is_empty() {
            let limits = self.rlimits.clone();
            // SAFETY: setrlimit is async-signal-safe; the list was
            // allocated before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    for &(resource, n) in &limits {
                        let lim = libc::rlimit {
                            rlim_cur: n,
                            rlim_max: n,
                        };
                        if libc::setrlimit(resource as _, &lim) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + START_TIMEOUT;
        while UnixStream::connect(self.socket()).is_err() {
            if let Some(st) = child.try_wait().unwrap() {
                panic!("memgangd exited ({st}): {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "memgangd did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child = Some(child);
    }

    /// SIGTERM, and wait for it to exit (nothing if it is not running).
    pub fn stop(&mut self) {
        if self.child.is_some() {
            self.signal(libc::SIGTERM);
        }
    }

    /// The pool the daemon said it made or took over last.
    pub fn pool(&self) -> String {
        let log = self.log();
        let line = log
            .lines()
            .rev()
            .find_map(|l| l.split_once("memgangd: pool ").map(|(_, r)| r))
            .unwrap_or_else(|| panic!("no pool in the log: {log}"));
        line.split_whitespace().next().unwrap().to_string()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("daemon running").id() as i32
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    pub fn signal(&mut self, sig: i32) {
        let mut c = self.child.take().expect("daemon running");
        // SAFETY: kill on our own child.
        unsafe { libc::kill(c.id() as i32, sig) };
        c.wait().unwrap();
    }

    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// `memgang VERB...` against this daemon, as `user` (None: root).
    pub fn cli(&self, user: Option<(u32, u32)>, args: &[&str]) -> Output {
        self.cli_within(user, args, VERB_TIMEOUT)
    }

    /// [`Daemon::cli`], killed after `timeout`.
    pub fn cli_within(&self, user: Option<(u32, u32)>, args: &[&str], timeout: Duration) -> Output {
        let mut c = memgang();
        // No COLUMNS: the status table is as wide as a pipe's (80).
        c.args(args)
            .env("MEMGANG_SOCKET", self.socket())
            .env_remove("COLUMNS")
            .current_dir(self.dir.path());
        if let Some((uid, gid)) = user {
            c.uid(uid).gid(gid).env("HOME", "/");
        }
        output_within(c, timeout)
    }

    pub fn jobs(&self) -> Vec<Value> {
        let out = self.cli(None, &["status", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
    }

    pub fn job(&self, id: u64) -> Value {
        self.jobs().into_iter().find(|j| j["id"] == id).unwrap()
    }

    /// Wait until every job has ended; all of them.
    pub fn wait_all(&self, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let jobs = self.jobs();
            if jobs.iter().all(is_final) {
                return jobs;
            }
            assert!(
                Instant::now() < deadline,
                "jobs did not end: {jobs:#?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_none() {
            return;
        }
        // Nothing left running: cancel what did not end, then stop. No
        // assertion here: a test that failed is unwinding already.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let out = self.cli_within(None, &["status", "--json"], Duration::from_secs(10));
            let Ok(jobs) = serde_json::from_slice::<Vec<Value>>(&out.stdout) else {
                break;
            };
            let open: Vec<String> = jobs
                .iter()
                .filter(|j| !is_final(j))
                .map(|j| j["id"].to_string())
                .collect();
            if open.is_empty() {
                break;
            }
            for id in open {
                self.cli_within(None, &["cancel", &id], Duration::from_secs(10));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.stop();
    }
}

pub fn is_final(j: &Value) -> bool {
    ["finished", "failed", "cancelled", "timeout"].contains(&j["state"].as_str().unwrap_or(""))
}

/// Run `c` to its end, or kill it after `timeout` (its output so far, and
/// a status that is not success).
pub fn output_within(mut c: Command, timeout: Duration) -> Output {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + timeout;
    let (status, killed) = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break (st, false);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break (child.wait().unwrap(), true);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = err.join().unwrap();
    if killed {
        stderr.extend_from_slice(format!("\n(killed after {timeout:?})").as_bytes());
    }
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr,
    }
}

/// The workload next to memgang: on the PATH jobs are submitted with.
pub fn workload() -> String {
    PathBuf::from(env!("CARGO_BIN_EXE_memgang"))
        .with_file_name("memgang-workload")
        .display()
        .to_string()
}

/// A test user (created if missing): uid, gid.
pub fn user(name: &str) -> (u32, u32) {
    let _ = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ])
        .output();
    let out = Command::new("id").args(["-u", name]).output().unwrap();
    assert!(
        out.status.success(),
        "useradd {name} failed (is the passwd package installed?)"
    );
    let uid = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let out = Command::new("id").args(["-g", name]).output().unwrap();
    (
        uid,
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap(),
    )
}
