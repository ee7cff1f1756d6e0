//! memgangd against hostile but unprivileged users (issue 33), as root,
//! with two real test users (`memgang-t-a`, `memgang-t-b`, created and
//! removed here): a private home, a job that scribbles on its own files,
//! a flood of connections, bytes that are not text. Every test checks
//! every job it submitted ends, and how. Run serially (--test-threads=1).
//!
//! Requests as a user go through perl (perl-base, essential on Debian):
//! the socket learns the caller from the connecting process, so the
//! client must really run as that user.

mod common;
mod users;

use common::daemon::Daemon;
use common::*;
use memgang_linux::swap::TestSwap;
use serde_json::json;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use users::{wait_state, Reap, Users};

/// A's home: 0700, with a world-readable directory and file inside (as
/// with a umask of 022), and a file that is not executable.
fn private_home(root: &Path, a: (u32, u32)) -> PathBuf {
    let home = root.join("home-a");
    let public = home.join("pub");
    std::fs::create_dir_all(&public).unwrap();
    std::fs::write(public.join("secret"), "A-SECRET\n").unwrap();
    std::fs::write(public.join("tool"), "#!/bin/sh\necho tool\n").unwrap();
    for (p, mode) in [
        (&home, 0o700),
        (&public, 0o755),
        (&public.join("secret"), 0o644),
        (&public.join("tool"), 0o644),
    ] {
        std::os::unix::fs::chown(p, Some(a.0), Some(a.1)).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    public
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn a_job_reaches_only_what_its_user_can() {
    require_root("a_job_reaches_only_what_its_user_can");
    let users = Users::new();
    let _swap = TestSwap::new(256 << 20).unwrap();
    let d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\n");
    let public = private_home(d.dir.path(), users.a);
    let home = public.parent().unwrap();

    // A works in her own directory.
    let own = d.submit(users.a, &public, &["cat", "secret"]).unwrap();
    // B names a world-readable directory inside A's private home.
    let b_reads = d.submit(users.b, &public, &["cat", "secret"]);
    // B learns nothing about files he cannot see: an existing file that
    // is not executable and a missing one read alike, and so do an
    // existing and a missing working directory.
    let exists = d.submit(
        users.b,
        Path::new("/"),
        &[public.join("tool").to_str().unwrap()],
    );
    let missing = d.submit(
        users.b,
        Path::new("/"),
        &[public.join("none").to_str().unwrap()],
    );
    let dir_exists = d.submit(users.b, &public, &["true"]);
    let dir_missing = d.submit(users.b, &home.join("none"), &["true"]);
    // Where B may go, B's job runs.
    let b_own = d
        .submit(users.b, d.dir.path(), &["sh", "-c", "id -u"])
        .unwrap();

    let jobs = d.wait_all(Duration::from_secs(60));
    let mut leaked = Vec::new();
    for id in [&b_reads, &exists, &missing, &dir_exists, &dir_missing]
        .into_iter()
        .filter_map(|r| r.as_ref().ok())
    {
        leaked.push((id, d.job(*id)["state"].clone(), d.output(*id)));
    }
    assert_eq!(d.job(own)["state"], "finished", "{jobs:#?}");
    assert_eq!(d.job(own)["exit_code"], 0);
    assert_eq!(d.output(own), "A-SECRET\n");
    assert_eq!(d.job(b_own)["state"], "finished", "{jobs:#?}");
    assert_eq!(d.job(b_own)["exit_code"], 0);
    assert_eq!(d.output(b_own), format!("{}\n", users.b.0));
    assert!(
        leaked.iter().all(|(_, _, out)| !out.contains("A-SECRET")),
        "B read A's file: {leaked:?}"
    );
    let b_reads = b_reads.expect_err("B's job in A's private home was accepted");
    assert!(!b_reads.contains("A-SECRET"), "{b_reads}");
    assert!(b_reads.contains(public.to_str().unwrap()), "{b_reads}");
    let exists = exists.expect_err("B's command in A's home was accepted");
    let missing = missing.expect_err("B's missing command was accepted");
    assert_eq!(exists.replace("tool", "X"), missing.replace("none", "X"));
    let dir_exists = dir_exists.expect_err("B's cwd in A's home was accepted");
    let dir_missing = dir_missing.expect_err("B's missing cwd was accepted");
    assert_eq!(
        dir_exists.replace(public.to_str().unwrap(), "X"),
        dir_missing.replace(home.join("none").to_str().unwrap(), "X")
    );
    // What B is told is what B's own shell would say.
    assert!(exists.contains("command not found"), "{exists}");
    assert!(dir_exists.contains("cannot enter"), "{dir_exists}");
    // Only the jobs of A and B that were accepted exist.
    assert_eq!(jobs.len(), 2, "{jobs:#?}");
}

/// VmHWM of `pid`: its peak resident memory, bytes.
fn peak_rss(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap();
    kb << 10
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn a_job_that_scribbles_on_its_files_neither_forges_its_end_nor_bloats_the_daemon() {
    require_root("a_job_that_scribbles_on_its_files_neither_forges_its_end_nor_bloats_the_daemon");
    let users = Users::new();
    let _swap = TestSwap::new(256 << 20).unwrap();
    let mut d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\n");
    let cwd = d.dir.path().to_path_buf();
    // The job's files are next to its allowance file.
    let dir = "d=$(dirname \"$MEMGANG_ALLOWANCE\")";
    // 200 MB into every file of its log directory it can name, then exit 3.
    let scribble = format!(
        "{dir}; for f in status allowance stdout; do head -c 200M /dev/zero > \"$d/$f\" 2>/dev/null; done; \
         head -c 200M /dev/zero >&2; exit 3"
    );
    let big = d.submit(users.a, &cwd, &["sh", "-c", &scribble]).unwrap();
    // Writes "exit 0" as its status, then kills the process that records it.
    let forge = format!("{dir}; printf 'exit 0\\n' > \"$d/status\"; kill -9 $PPID; exit 5");
    let forged = d.submit(users.a, &cwd, &["sh", "-c", &forge]).unwrap();
    // A command killed by a signal: the shim ends by the same signal.
    let term = d
        .submit(users.a, &cwd, &["sh", "-c", "kill -TERM $$"])
        .unwrap();
    let jobs = d.wait_all(Duration::from_secs(120));
    let j = d.job(term);
    assert_eq!(
        (&j["state"], &j["exit_code"], &j["signal"]),
        (&json!("failed"), &json!(null), &json!(15)),
        "{j:#}"
    );
    let j = d.job(big);
    assert_eq!(
        (&j["state"], &j["exit_code"]),
        (&json!("failed"), &json!(3)),
        "{j:#}"
    );
    let j = d.job(forged);
    assert_eq!(j["state"], "failed", "{j:#}\n{}", d.log());
    assert_eq!(
        (&j["exit_code"], &j["signal"]),
        (&json!(null), &json!(9)),
        "{j:#}"
    );
    // The record is root's alone.
    let status = PathBuf::from(d.job(big)["log_dir"].as_str().unwrap()).join("status");
    let m = std::fs::metadata(&status).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (m.uid(), m.mode() & 0o777),
        (0, 0o600),
        "{}",
        status.display()
    );
    let peak = peak_rss(d.pid());
    eprintln!("memgangd's peak resident memory: {} MiB", peak >> 20);
    assert!(
        peak < 100 << 20,
        "memgangd peaked at {} MiB reading what jobs wrote",
        peak >> 20
    );
    assert_eq!(jobs.len(), 3);

    // After a restart the daemon is not the parent: what it reads of the
    // job's status is what the job's shim recorded, not what the job wrote.
    let late = format!("sleep 3; {dir}; printf 'exit 0\\n' > \"$d/status\"; exit 4");
    let adopted = d.submit(users.a, &cwd, &["sh", "-c", &late]).unwrap();
    wait_state(&d, adopted, "running");
    d.signal(libc::SIGKILL);
    d.start();
    d.wait_all(Duration::from_secs(60));
    let j = d.job(adopted);
    assert_eq!(
        (&j["state"], &j["exit_code"]),
        (&json!("failed"), &json!(4)),
        "{j:#}\n{}",
        d.log()
    );
}

/// Threads and CPU seconds (user + system) of `pid`.
fn threads_and_cpu(pid: i32) -> (u64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime: fields 14 and 15, the 12th and 13th after the name.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    (
        threads,
        ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64,
    )
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn a_flood_of_connections_leaves_root_served_and_the_daemon_idle() {
    require_root("a_flood_of_connections_leaves_root_served_and_the_daemon_idle");
    let users = Users::new();
    let _swap = TestSwap::new(256 << 20).unwrap();
    // systemd's default descriptor limit.
    let mut d = Daemon::with_nofile("pool_memory = \"256M\"\nswap_reserve = \"0\"\n", Some(1024));
    // Each user opens 600 connections, sends nothing and holds them 20 s.
    let flood = r#"my @s; for (1..600) { my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or next; push @s, $s }
                   print scalar(@s), "\n"; STDOUT->flush; sleep 20;"#;
    let mut flooders = Reap(
        [users.a, users.b]
            .into_iter()
            .map(|(uid, gid)| {
                Command::new("perl")
                    .args(["-MIO::Socket::UNIX", "-MIO::Handle", "-e", flood])
                    .arg(d.socket())
                    .uid(uid)
                    .gid(gid)
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    // A slow client: one byte every 2 s, never a whole line.
    let mut slow = UnixStream::connect(d.socket()).unwrap();
    let slow_start = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let pid = d.pid();
    let (threads, cpu0) = threads_and_cpu(pid);
    std::thread::sleep(Duration::from_secs(2));
    let (_, cpu1) = threads_and_cpu(pid);
    // Root is served: a job submitted, run and listed within seconds.
    let t = Instant::now();
    let out = d.cli_within(
        None,
        &["submit", "--memory", "10M", "--", "true"],
        Duration::from_secs(15),
    );
    let submit_s = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "root's submit during the flood: {}\n{}",
        text(&out),
        d.log()
    );
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // A flooding user's own request: answered (or refused) promptly.
    let answer = d.raw(Some(users.a), &json!({"op": "list"}));
    assert!(
        ["jobs", "error"].contains(&answer["kind"].as_str().unwrap()),
        "{answer}"
    );
    assert!(threads <= 32, "{threads} threads during the flood");
    assert!(
        cpu1 - cpu0 < 0.5,
        "memgangd used {:.2} CPU s in 2 s of flood",
        cpu1 - cpu0
    );
    assert!(submit_s < 10.0, "root waited {submit_s:.1} s");

    let closed_after = loop {
        let elapsed = slow_start.elapsed();
        assert!(
            elapsed < Duration::from_secs(30),
            "a client sending a byte every 2 s held its connection {elapsed:?}"
        );
        if slow.write_all(b" ").is_err() {
            break elapsed;
        }
        slow.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 256];
        match slow.read(&mut b) {
            // Closed, or answered (an error): either ends it.
            Ok(_) => break slow_start.elapsed(),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break slow_start.elapsed(),
        }
    };
    assert!(closed_after < Duration::from_secs(20), "{closed_after:?}");
    eprintln!(
        "during the flood: {threads} threads, {:.2} CPU s in 2 s, root's submit {submit_s:.2} s; \
         a client sending a byte every 2 s closed after {:.1} s",
        cpu1 - cpu0,
        closed_after.as_secs_f64()
    );
    for f in &mut flooders.0 {
        let mut n = String::new();
        f.stdout.take().unwrap().read_to_string(&mut n).unwrap();
        f.wait().unwrap();
        eprintln!("a flooder held {} connections", n.trim());
    }
    assert_eq!(d.jobs().iter().filter(|j| j["id"] == id).count(), 1);
    let jobs = d.wait_all(Duration::from_secs(30));
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (&jobs[0]["state"], &jobs[0]["exit_code"]),
        (&json!("finished"), &json!(0))
    );
    // The connections are gone with their clients.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        open_fds(pid) < 100,
        "{} descriptors open after the flood",
        open_fds(pid)
    );
    // An oversized request is refused, the daemon keeps serving.
    let mut s = UnixStream::connect(d.socket()).unwrap();
    let _ = s.write_all(&vec![b'x'; 2 << 20]);
    assert!(d.alive(), "{}", d.log());
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn follow_passes_a_jobs_bytes_exactly() {
    require_root("follow_passes_a_jobs_bytes_exactly");
    let users = Users::new();
    let _swap = TestSwap::new(256 << 20).unwrap();
    let d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\n");
    // 400,001 bytes of `é` and an `x` (a two-byte character across each
    // 256 KiB chunk boundary), then bytes that are no text at all.
    let mut bytes = "é".repeat(200_000).into_bytes();
    bytes.push(b'x');
    let mut x = 0x9e37_79b9_u32;
    bytes.extend((0..300_000).map(|_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x as u8
    }));
    let file = d.dir.path().join("bytes");
    std::fs::write(&file, &bytes).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let f = file.to_str().unwrap();
    let id = d
        .submit(
            users.a,
            d.dir.path(),
            &["sh", "-c", &format!("cat {f}; cat {f} >&2")],
        )
        .unwrap();
    let out = d.cli_within(
        Some(users.a),
        &["follow", &id.to_string()],
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), bytes.len());
    assert!(out.stdout == bytes, "stdout differs");
    assert!(
        out.stderr == bytes,
        "stderr differs ({} bytes)",
        out.stderr.len()
    );
    let jobs = d.wait_all(Duration::from_secs(30));
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (&jobs[0]["state"], &jobs[0]["exit_code"]),
        (&json!("finished"), &json!(0))
    );
}
