//! memgangd end to end, as root, with real cgroups, swap and users: the
//! client verbs, bad input, socket permissions, multi-user isolation,
//! deferral instead of OOM (a switch's exchange counted), SIGTERM and
//! kill -9 recovery. Run serially
//! (--test-threads=1): the tests share the machine's swap.

mod common;

use common::daemon::{memgangd_exe, user, workload, Daemon};
use common::*;
use memgang_linux::swap::TestSwap;
use memgang_results::JobAccount;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

impl Daemon {
    /// A user's job writes no output file: the daemon's directory is
    /// not theirs to write in (tests of output files give a place).
    fn submit(&self, user: Option<(u32, u32)>, memory: &str, cmd: &[&str]) -> u64 {
        let mut args = vec!["submit", "--memory", memory];
        if user.is_some() {
            args.extend(["--output", "/dev/null"]);
        }
        args.push("--");
        args.extend_from_slice(cmd);
        let out = self.cli(user, &args);
        assert!(out.status.success(), "submit failed: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// Raw request line, raw answer.
    fn raw(&self, line: &[u8]) -> Value {
        let mut s = UnixStream::connect(self.socket()).unwrap();
        s.write_all(line).unwrap();
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    }
}

/// Every memgang-pool cgroup left on the machine with a frozen or living task.
fn frozen_groups() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![
        PathBuf::from("/sys/fs/cgroup/freezer"),
        PathBuf::from("/sys/fs/cgroup"),
    ];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
                if p.to_string_lossy().contains("memgang-pool-") {
                    let st = std::fs::read_to_string(p.join("freezer.state"))
                        .or_else(|_| std::fs::read_to_string(p.join("cgroup.freeze")))
                        .unwrap_or_default();
                    if st.trim() == "FROZEN" || st.trim() == "1" {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn verbs_bad_input_and_socket_permissions() {
    require_root("verbs_bad_input_and_socket_permissions");
    let _swap = TestSwap::new(512 << 20).unwrap();
    let d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\nquantum = \"1s\"\n");

    let a = d.submit(
        None,
        "50M",
        &["sh", "-c", "echo hello; sleep 1; echo bye >&2"],
    );
    let out = d.cli(None, &["follow", &a.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    // One file, memgang-ID.out, as sbatch: stderr joins stdout.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\nbye\n");
    let file = d.dir.path().join(format!("memgang-{a}.out"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nbye\n");
    let out = d.cli(None, &["wait", &a.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let b = d.submit(None, "50M", &["sh", "-c", "exit 7"]);
    assert_eq!(
        d.cli(None, &["wait", &b.to_string()]).status.code(),
        Some(7)
    );
    let c = d.submit(None, "50M", &["sleep", "60"]);
    let out = d.cli(None, &["cancel", &c.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    d.cli(None, &["wait", &c.to_string()]);
    assert_eq!(d.job(c)["state"], "cancelled");
    let out = d.cli(None, &["status"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ID USER"),
        "{}",
        text(&out)
    );

    // Bad input: a clear error each, and the daemon keeps serving.
    let e = d.raw(b"this is not json\n");
    assert!(
        e["message"].as_str().unwrap().contains("malformed request"),
        "{e}"
    );
    let e = d.raw(b"{\"op\":\"show\",\"id\":999}\n");
    assert!(e["message"].as_str().unwrap().contains("no job 999"), "{e}");
    let out = d.cli(
        None,
        &["submit", "--memory", "10M", "--", "no-such-command-xyz"],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("command not found"), "{}", text(&out));
    let out = d.cli(None, &["submit", "--memory", "100G", "--", "true"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("can never hold more than"),
        "{}",
        text(&out)
    );
    let out = d.cli(None, &["cancel", "4242"]);
    assert!(text(&out).contains("no job 4242"), "{}", text(&out));
    let mut d = d;
    assert!(d.alive(), "the daemon died on bad input: {}", d.log());

    // Anyone may connect (requests are checked per uid); nobody but root
    // may list the state directory's jobs or read their output.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.socket()), 0o666);
    assert_eq!(mode(&d.dir.path().join("state")), 0o711);
    let log_dir = PathBuf::from(d.job(a)["log_dir"].as_str().unwrap());
    assert_eq!(mode(&log_dir.join("stdout")), 0o600);
    assert_eq!(mode(&d.dir.path().join("state/journal.jsonl")), 0o600);
    // A second daemon on the same state directory refuses to start.
    let out = Command::new(memgangd_exe())
        .arg("--config")
        .arg(d.dir.path().join("memgang.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("another memgangd"), "{}", text(&out));

    // A job that computes: `show --json` carries its time account, whose
    // parts add up to its wall time (docs/results.md), nearly all of it
    // on a CPU or waiting for one; `show` prints it.
    let w = workload();
    let e = d.submit(
        None,
        "50M",
        &[
            &w,
            "--mib",
            "20",
            "--pattern",
            "seq",
            "--iterations",
            "150",
            "--compute",
            "2",
            "--quiet",
        ],
    );
    let out = d.cli(None, &["wait", &e.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let out = d.cli(None, &["show", &e.to_string(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let acct = &j["account"];
    let f = |v: &Value, k: &str| {
        v[k].as_f64()
            .unwrap_or_else(|| panic!("{k} missing in {j:#}"))
    };
    // It reads as the results' account (one definition, memgang-results').
    let a: JobAccount = serde_json::from_value(acct.clone()).unwrap();
    let wall = a.wall_s;
    let parts: f64 = a.parts().iter().map(|(_, v)| v).sum();
    eprintln!("job {e}'s account: {acct}");
    assert_eq!(a.source, "taskstats", "{acct}");
    assert!(wall > 0.5, "{acct}");
    assert!(
        (parts - wall).abs() <= 0.01 * wall,
        "{parts} vs {wall}: {acct}"
    );
    assert!(a.cpu_s + a.run_queue_s >= 0.9 * wall, "{acct}");
    let ran = f(&j, "finished_unix_s") - f(&j, "started_unix_s");
    assert!(
        (ran - wall).abs() < 1.0,
        "{ran} s from start to end: {acct}"
    );
    let out = d.cli(None, &["show", &e.to_string()]);
    let shown = String::from_utf8_lossy(&out.stdout);
    eprintln!("memgang show {e}:\n{shown}");
    assert!(
        shown.contains("time:     wall") && shown.contains("  unaccounted "),
        "{shown}"
    );

    // Metrics beside the socket, with the accounts summed.
    std::thread::sleep(Duration::from_secs(6));
    let prom = std::fs::read_to_string(d.dir.path().join("run/memgang.prom")).unwrap();
    assert!(
        prom.contains("memgang_jobs_completed_total{state=\"finished\"} 2"),
        "{prom}"
    );
    let sample = |series: &str| -> f64 {
        prom.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in {prom}"))
            .parse()
            .unwrap()
    };
    let walls = sample("memgang_job_wall_seconds_total");
    let parts: f64 = a
        .parts()
        .iter()
        .map(|(p, _)| {
            sample(&format!(
                "memgang_job_seconds_total{{part=\"{}\"}}",
                p.replace(' ', "_")
            ))
        })
        .sum();
    assert!(sample("memgang_jobs_accounted_total") >= 2.0, "{prom}");
    assert!(walls >= wall, "{prom}");
    assert!((parts - walls).abs() <= 0.01 * walls, "{prom}");
    sample("memgang_job_stall_seconds_total{kind=\"swapin\"}");
    // And the job that computed has series of its own (root submitted it).
    let who = format!("id=\"{e}\",user=\"root\"");
    let own = sample(&format!("memgang_job_account_wall_seconds{{{who}}}"));
    assert!((own - wall).abs() < 1e-6, "{prom}");
    sample(&format!(
        "memgang_job_perf_events_total{{{who},event=\"minor_faults\"}}"
    ));
    // The command's own work, not only its wrapper's: memgangd's shim
    // forks the command, perhaps before the counters attach (they counted
    // 0.4 ms of a job's 1 s of CPU on the shim alone).
    let clock = sample(&format!("memgang_job_task_clock_seconds_total{{{who}}}"));
    assert!(
        clock >= 0.5 * a.cpu_s,
        "task clock {clock} s of {} s of CPU: {prom}",
        a.cpu_s
    );
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn another_user_cannot_touch_a_job() {
    require_root("another_user_cannot_touch_a_job");
    let _swap = TestSwap::new(512 << 20).unwrap();
    let d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\n");
    let alice = user("memgang-alice");
    let bob = user("memgang-bob");
    // Alice's output goes to a file she makes, in a directory anyone
    // may write (sticky, as /tmp).
    let outdir = d.dir.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    std::fs::set_permissions(&outdir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let out = d.cli(
        Some(alice),
        &[
            "submit",
            "--memory",
            "20M",
            "-o",
            "out/%u-%j.out",
            "--",
            "sh",
            "-c",
            "id -u; echo secret; sleep 60",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.job(id)["state"] != "running" {
        assert!(Instant::now() < deadline, "{}", d.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    // It runs as alice, and its output is hers to read.
    let file = outdir.join(format!("memgang-alice-{id}.out"));
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), alice.0);
    let own = d.cli(Some(alice), &["log", &id.to_string()]);
    assert_eq!(
        String::from_utf8_lossy(&own.stdout),
        format!("{}\nsecret\n", alice.0),
        "{}",
        text(&own)
    );
    assert!(!as_user(bob, &format!("cat {}", file.display()))
        .status
        .success());

    let ids = id.to_string();
    for verb in [
        vec!["cancel", &ids],
        vec!["show", &ids],
        vec!["follow", &ids],
        vec!["log", &ids],
        vec!["wait", &ids],
    ] {
        let out = d.cli(Some(bob), &verb);
        assert!(!out.status.success(), "bob could {verb:?}: {}", text(&out));
        assert!(
            text(&out).contains(&format!("no job {id} of yours")),
            "{}",
            text(&out)
        );
        assert!(!text(&out).contains("secret"));
    }
    let out = d.cli(Some(bob), &["status", "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "[]",
        "{}",
        text(&out)
    );
    // No verb suspends or pages a job on request; the socket refuses one.
    let e = d.raw(format!("{{\"op\":\"suspend\",\"id\":{id}}}\n").as_bytes());
    assert_eq!(e["kind"], "error", "{e}");
    // Behind the daemon's back: bob cannot read the output file, freeze
    // or page the job's cgroup, or signal its processes.
    let log_dir = d.job(id)["log_dir"].as_str().unwrap().to_string();
    let as_bob = |script: &str| as_user(bob, script);
    assert!(!as_bob(&format!("cat {log_dir}/stdout")).status.success());
    let group = std::fs::read_dir("/sys/fs/cgroup/freezer")
        .ok()
        .map(|_| "freezer");
    let pids = memgang_pids_of(id);
    assert!(!pids.is_empty());
    for pid in &pids {
        assert!(
            !as_bob(&format!("kill -STOP {pid}")).status.success(),
            "bob stopped {pid}"
        );
    }
    if let Some(cg) = cgroup_dir_of(pids[0], group.unwrap_or("memory")) {
        for f in [
            "freezer.state",
            "memory.force_empty",
            "cgroup.freeze",
            "memory.reclaim",
        ] {
            if cg.join(f).exists() {
                let out = as_bob(&format!("echo FROZEN > {}/{f}", cg.display()));
                assert!(!out.status.success(), "bob wrote {f}");
            }
        }
    }
    // Alice can cancel her own job.
    let out = d.cli(Some(alice), &["cancel", &ids]);
    assert!(out.status.success(), "{}", text(&out));
}

fn as_user(u: (u32, u32), script: &str) -> std::process::Output {
    Command::new("sh")
        .args(["-c", script])
        .uid(u.0)
        .gid(u.1)
        .output()
        .unwrap()
}

/// Processes in job `id`'s cgroup (its name is job-j<id>).
fn memgang_pids_of(id: u64) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cg = std::fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        if cg.contains(&format!("/job-j{id}\n")) {
            pids.push(pid);
        }
    }
    pids
}

fn cgroup_dir_of(pid: i32, controller: &str) -> Option<PathBuf> {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let line = cg.lines().find(|l| {
        l.split(':')
            .nth(1)
            .is_some_and(|c| c.split(',').any(|c| c == controller))
    })?;
    let path = line.splitn(3, ':').nth(2)?;
    Some(
        Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(path.trim_start_matches('/')),
    )
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn a_job_waits_for_memory_instead_of_an_oom_kill() {
    require_root("a_job_waits_for_memory_instead_of_an_oom_kill");
    // Pool 256M + swap 768M less a reserve of 256M: room for two jobs of
    // 210M with a switch's exchange (420M + 210M read back while its
    // slots stay <= 768M), not three (630M + 256M, a page-in fills at most
    // the pool). `a_switchs_exchange_is_admitted_only_with_swap_for_both_sides`
    // gives swap for one job only.
    let swap = own_swap(768 << 20);
    let reserve = reserve_beside_others(&swap, 256 << 20);
    // Other tests' swap devices, and what they hold: when these change
    // under the test, the node's usable swap is not what the reserve was
    // made for, and the admission order is not checked (said).
    let others = other_swaps(swap.path());
    let unchanged = |at: &str| {
        let now = other_swaps(swap.path());
        if now != others {
            eprintln!("other swap devices changed ({others:?} -> {now:?}) {at}: admission order not checked");
        }
        now == others
    };
    let d = Daemon::new(&format!("pool_memory = \"256M\"\nswap_reserve = \"{reserve}B\"\npolicy = \"gang\"\nquantum = \"1s\"\nswitch = \"ao/ai\"\n"));
    let w = workload();
    // About 4 s each alone: the first two still run when the third is
    // looked at.
    let job = [
        "--mib",
        "200",
        "--pattern",
        "seq",
        "--iterations",
        "20",
        "--compute",
        "4",
    ];
    let mut cmd = vec![w.as_str()];
    cmd.extend_from_slice(&job);
    let ids: Vec<u64> = (0..3).map(|_| d.submit(None, "210M", &cmd)).collect();
    std::thread::sleep(Duration::from_secs(2));
    let third = d.job(ids[2]);
    let check_order = unchanged("in the first 2 s");
    if check_order {
        assert_eq!(third["state"], "queued", "{third}");
        assert!(
            third["reason"]
                .as_str()
                .unwrap()
                .contains("waits for memory"),
            "{third}"
        );
    }
    let jobs = d.wait_all(Duration::from_secs(300));
    for j in &jobs {
        assert_eq!(j["state"], "finished", "{j:#}\n{}", d.log());
        assert_eq!(j["exit_code"], 0);
    }
    // The third started only after one of the first two ended.
    if !check_order || !unchanged("while the jobs ran") {
        return;
    }
    let first_end = jobs[..2]
        .iter()
        .map(|j| j["finished_unix_s"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert!(jobs[2]["started_unix_s"].as_f64().unwrap() >= first_end - 0.5);
    // The first two took turns: each one's time account shows its turns
    // frozen and its switches, and still adds up to its wall time.
    for j in &jobs[..2] {
        let a: JobAccount =
            serde_json::from_value(j["account"].clone()).unwrap_or_else(|e| panic!("{e}: {j:#}"));
        let parts: f64 = a.parts().iter().map(|(_, v)| v).sum();
        eprintln!("job {}: {:?}", j["id"], a.parts());
        assert!((parts - a.wall_s).abs() <= 0.01 * a.wall_s, "{j:#}");
        assert!(a.frozen_s + a.switch_out_s + a.switch_in_s > 0.5, "{j:#}");
    }
}

#[test]
#[ignore = "needs root: cgroups, swap, users (scripts/test runs it as root)"]
fn sigterm_and_kill9_at_random_points_lose_no_job_and_run_none_twice() {
    require_root("sigterm_and_kill9_at_random_points_lose_no_job_and_run_none_twice");
    let _swap = TestSwap::new(1 << 30).unwrap();
    let mut d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\npolicy = \"gang\"\nquantum = \"500ms\"\nswitch = \"so/ao/ai\"\n");
    let marks = d.dir.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let w = workload();
    // A cheap pseudo-random sequence (no rand crate for one test): the
    // kill points vary with the seed printed on failure.
    let seed = std::process::id() as u64;
    let mut x = seed;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ids = Vec::new();
    for round in 0..6 {
        for _ in 0..2 {
            let n = ids.len();
            let script = format!(
                "echo run >> {}/{n}; exec {w} --mib 150 --pattern seq --iterations 8",
                marks.display()
            );
            ids.push(d.submit(None, "160M", &["sh", "-c", &script]));
        }
        std::thread::sleep(Duration::from_millis(300 + next() % 2500));
        if round % 3 == 2 {
            d.signal(libc::SIGTERM);
        } else {
            d.signal(libc::SIGKILL);
        }
        // Nothing is left frozen outside the rotation: the jobs found
        // alive rejoin it, so a frozen job is one the daemon holds in it,
        // suspended or running (its state is written after a switch, so
        // a job being paged out still reads running). That each gets its
        // turns again: every job finishes, below.
        d.start();
        std::thread::sleep(Duration::from_millis(500));
        let frozen = frozen_groups();
        let jobs = d.jobs();
        let again = frozen_groups();
        let stuck: Vec<&PathBuf> = frozen
            .iter()
            .filter(|p| again.contains(p))
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                let id: u64 = name.trim_start_matches("job-j").parse().unwrap();
                jobs.iter()
                    .find(|j| j["id"] == id)
                    .is_none_or(|j| j["state"] != "suspended" && j["state"] != "running")
            })
            .collect();
        assert!(
            stuck.is_empty(),
            "frozen after restart, not in the rotation (seed {seed}): {stuck:?}\n{jobs:#?}"
        );
    }
    let jobs = d.wait_all(Duration::from_secs(600));
    assert_eq!(jobs.len(), ids.len());
    for (n, j) in jobs.iter().enumerate() {
        assert_eq!(j["state"], "finished", "seed {seed}: {j:#}\n{}", d.log());
        let runs = std::fs::read_to_string(marks.join(n.to_string())).unwrap_or_default();
        assert_eq!(
            runs.lines().count(),
            1,
            "seed {seed}: job {} ran {} times",
            j["id"],
            runs.lines().count()
        );
    }
    assert!(frozen_groups().is_empty());
}

/// Swap devices other than `ours` (other tests on the machine): path,
/// size and use.
fn other_swaps(ours: &Path) -> Vec<(PathBuf, u64, u64)> {
    memgang_linux::swap::active()
        .unwrap()
        .into_iter()
        .filter(|a| a.path != ours)
        .map(|a| (a.path, a.size_bytes, a.used_bytes))
        .collect()
}

/// A swap file of `size` for this test, used first: other tests on the
/// machine may have swap devices of their own, and the jobs' pages must go
/// to this one while it has room, not to a device another test turns off
/// under them.
fn own_swap(size: u64) -> TestSwap {
    let swap = TestSwap::new(size).unwrap();
    for (cmd, args) in [("swapoff", vec![]), ("swapon", vec!["-p", "32767"])] {
        let st = Command::new(cmd)
            .args(args)
            .arg(swap.path())
            .status()
            .unwrap();
        assert!(st.success(), "{cmd} {}", swap.path().display());
    }
    swap
}

/// A daemon reserve that leaves the node `ours` as its swap: `reserve`
/// and what other tests' swap devices have free.
fn reserve_beside_others(ours: &TestSwap, reserve: u64) -> u64 {
    reserve
        + other_swaps(ours.path())
            .iter()
            .map(|o| o.1.saturating_sub(o.2))
            .sum::<u64>()
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn a_switchs_exchange_is_admitted_only_with_swap_for_both_sides() {
    require_root("a_switchs_exchange_is_admitted_only_with_swap_for_both_sides");
    // CI's OOM (2026-11-27): pool 256M, swap 256M, no reserve, jobs of
    // 210M under gang ao/ai. Admitted together (420M <= 512M), a switch
    // had to page the outgoing job into a swap still holding the incoming
    // one, and the kernel killed a job or paged both for minutes. With the
    // exchange counted (420M + 210M > 512M) each waits for the one before.
    let swap = own_swap(256 << 20);
    let w = workload();
    // About 1.5 s alone: a pair admitted together switches at q = 1 s.
    let cmd = [
        w.as_str(),
        "--mib",
        "210",
        "--pattern",
        "seq",
        "--iterations",
        "5",
        "--compute",
        "2",
    ];
    let setups = [(2, "ao/ai"), (3, "so/ao/ai"), (2, "so/ao/ai"), (3, "ao/ai")];
    for rep in 0..20 {
        let (n, switch) = setups[rep % setups.len()];
        // Only this test's 256M counts.
        let others = other_swaps(swap.path());
        let reserve = reserve_beside_others(&swap, 0);
        let d = Daemon::new(&format!(
            "pool_memory = \"256M\"\nswap_reserve = \"{reserve}B\"\npolicy = \"gang\"\nquantum = \"1s\"\nswitch = \"{switch}\"\n"
        ));
        for _ in 0..n {
            d.submit(None, "210M", &cmd);
        }
        // Alone, all of them take under 10 s; a switch left to the
        // kernel's reclaim took minutes.
        let jobs = d.wait_all(Duration::from_secs(60));
        let what = format!(
            "rep {rep} ({n} jobs, {switch}; other swap devices {others:?}, now {:?})",
            other_swaps(swap.path())
        );
        // An OOM kill ends a job by SIGKILL. (Cgroup v1 counts it in the
        // job's own group, gone with the job, not in the pool's
        // memory.oom_control.)
        for j in &jobs {
            assert_eq!(j["exit_code"], 0, "{what}: {j:#}\n{}", d.log());
        }
    }
}

/// CAP_SYS_RESOURCE (bit 24) in this process's effective set: needed to
/// lower an oom_score_adj.
fn has_sys_resource() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

fn oom_score_adj(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The kernel's OOM killer picks a job, not memgangd: the daemon lowers
/// its own oom_score_adj at start (the unit's OOMScoreAdjust= aside), and
/// a job, which would inherit it across fork and exec, runs at the
/// default, 0, and as its user cannot lower it again.
#[test]
#[ignore = "needs root: cgroups, users (scripts/test runs it as root)"]
fn a_job_runs_at_oom_score_adj_0_under_a_protected_daemon() {
    require_root("a_job_runs_at_oom_score_adj_0_under_a_protected_daemon");
    assert!(
        oom_score_adj(std::process::id() as i32) >= 0,
        "the test itself must start unprotected"
    );
    let d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\n");
    let daemon = oom_score_adj(d.pid());
    if !has_sys_resource() {
        // Root in a container without CAP_SYS_RESOURCE (as this project's
        // machines): nobody can lower a score here. The daemon says so.
        assert!(
            d.log()
                .contains("cannot protect memgangd from the OOM killer"),
            "{}",
            d.log()
        );
        eprintln!(
            "\n*** SKIPPED the negative oom_score_adj checks: this root lacks CAP_SYS_RESOURCE; \
             scripts/vm checks memgangd's, its holder's and a job's under systemd ***\n"
        );
        return;
    }
    assert!(
        daemon < 0,
        "memgangd's oom_score_adj is {daemon}: {}",
        d.log()
    );
    assert!(d.log().contains("oom_score_adj"), "{}", d.log());
    let nobody = user("nobody");
    let id = d.submit(Some(nobody), "16M", &["sleep", "60"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let pids = loop {
        let pids = memgang_pids_of(id);
        let sleeping = pids.iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        if sleeping {
            break pids;
        }
        assert!(Instant::now() < deadline, "job {id} never ran: {}", d.log());
        std::thread::sleep(Duration::from_millis(100));
    };
    for p in &pids {
        assert_eq!(oom_score_adj(*p), 0, "job {id}'s process {p}");
        // As the job's user it cannot take the daemon's protection back.
        let lower = Command::new("sh")
            .args(["-c", &format!("echo -900 > /proc/{p}/oom_score_adj")])
            .uid(nobody.0)
            .gid(nobody.1)
            .output()
            .unwrap();
        assert!(
            !lower.status.success(),
            "nobody lowered {p}'s oom_score_adj"
        );
    }
    let out = d.cli(None, &["cancel", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
}
