//! Runs the real binary: exit codes, multi-rank barrier, and that a dying
//! rank (or a dying rank 0) brings the job down instead of hanging it.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_memgang-workload");

fn run(args: &str) -> Output {
    Command::new(BIN)
        .args(args.split_whitespace())
        .output()
        .expect("spawn memgang-workload")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Pids whose parent is `ppid`, from /proc/*/stat (works without
/// CONFIG_PROC_CHILDREN).
fn children_of(ppid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, ...
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let parent: u32 = rest.split(' ').nth(1).unwrap().parse().unwrap();
        if parent == ppid {
            out.push(pid);
        }
    }
    out
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for("job to exit", timeout, || child.try_wait().unwrap())
    }));
    match res {
        Ok(s) => s,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            std::panic::resume_unwind(e)
        }
    }
}

fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie has already released its memory; whoever inherited it
        // reaps it eventually.
        Ok(s) => s[s.rfind(')').unwrap() + 2..].starts_with('Z'),
    }
}

/// A job that runs long enough to be interfered with.
fn spawn_long_job(ranks: u32) -> Child {
    Command::new(BIN)
        .args(["--mib", "16", "--pattern", "seq", "--iterations", "1000000"])
        .args(["--ranks", &ranks.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memgang-workload")
}

#[test]
fn multi_rank_stencil_ok() {
    let o = run("--mib 8 --ranks 2 --pattern stencil --iterations 3");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("memgang-workload: ok ranks=2 mib=8 pattern=stencil iterations=3"));
    assert!(out.contains("checked_words=1048576"), "{out}");
}

#[test]
fn every_pattern_ok_with_uneven_split_and_compute() {
    for p in ["seq", "random", "stencil"] {
        let o = run(&format!(
            "--mib 3 --ranks 3 --pattern {p} --iterations 2 --compute 1 --seed 9 --quiet"
        ));
        assert_eq!(o.status.code(), Some(0), "{p}: {}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
    let o = run("--mib 1 --pattern seq --iterations 0");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn corruption_is_detected() {
    for ranks in [1, 2] {
        let o = run(&format!(
            "--mib 8 --ranks {ranks} --pattern random --iterations 2 --corrupt-for-test"
        ));
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let err = stderr(&o);
        let last = ranks - 1;
        assert!(
            err.contains(&format!("rank {last}: data corruption: page ")),
            "{err}"
        );
        assert!(err.contains("expected 0x"), "{err}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn bad_arguments() {
    for args in [
        "--mib 8 --ranks 0 --pattern seq --iterations 1",
        "--mib 0 --pattern seq --iterations 1",
        "--mib 1 --ranks 257 --pattern seq --iterations 1",
        "--mib 8 --pattern zigzag --iterations 1",
        "--mib 8 --pattern seq",
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        assert!(stderr(&o).contains("error:"), "{args}");
    }
    assert!(
        stderr(&run("--mib 1 --ranks 257 --pattern seq --iterations 1"))
            .contains("every rank needs at least one page")
    );
}

#[test]
fn mmap_failure_is_exit_1() {
    let o = run("--mib 1000000000 --pattern seq --iterations 1");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot map"), "{}", stderr(&o));
}

#[test]
fn killed_rank_fails_the_job_promptly() {
    let mut job = spawn_long_job(3);
    let pid = job.id();
    let kids = wait_for("child ranks", Duration::from_secs(5), || {
        let k = children_of(pid);
        (k.len() == 2).then_some(k)
    });
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: plain kill(2) on a pid we just saw as our grandchild.
    unsafe { libc::kill(kids[1], libc::SIGKILL) };
    let status = wait_exit(&mut job, Duration::from_secs(5));
    let mut err = String::new();
    std::io::Read::read_to_string(job.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(4), "{err}");
    assert!(err.contains("barrier broken: rank "), "{err}");
    assert!(err.contains("was killed by signal 9"), "{err}");
    // Rank 0 reaped its ranks rather than leaving them behind.
    for k in kids {
        assert!(is_gone(k), "rank pid {k} survived");
    }
}

#[test]
fn ranks_die_with_rank_0() {
    let mut job = spawn_long_job(2);
    let pid = job.id();
    let kid = wait_for("child rank", Duration::from_secs(5), || {
        children_of(pid).first().copied()
    });
    job.kill().unwrap();
    job.wait().unwrap();
    wait_for("orphaned rank to die", Duration::from_secs(5), || {
        is_gone(kid).then_some(())
    });
}

#[test]
fn stopped_rank_holds_the_others_at_the_barrier() {
    let mut job = spawn_long_job(2);
    let pid = job.id();
    let kid = wait_for("child rank", Duration::from_secs(5), || {
        children_of(pid).first().copied()
    });
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: plain kill(2) on our grandchild.
    unsafe { libc::kill(kid, libc::SIGSTOP) };
    let cpu = || -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split(' ').collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap() // utime + stime
    };
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu();
    std::thread::sleep(Duration::from_millis(500));
    let after = cpu();
    // SAFETY: as above.
    unsafe { libc::kill(kid, libc::SIGCONT) };
    let _ = job.kill();
    let _ = job.wait();
    // Rank 0 is blocked in poll(), not spinning: at most a tick or two.
    assert!(
        after - before <= 2,
        "rank 0 used {} ticks while waiting",
        after - before
    );
}
