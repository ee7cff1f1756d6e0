//! memgangd as a shared server's queue, end to end as root with real
//! users: output files made as the user (and a symlink to root's file
//! refused as the user), `--time` on running time, `--after`, `--array`
//! with its limit, `cancel` of several jobs, fair turns between users, and
//! the hostile inputs (another user's ids, absurd limits, huge arrays).
//! Run serially (--test-threads=1).

mod common;

use common::daemon::{is_final, user, Daemon};
use common::*;
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

const CONFIG: &str = "pool_memory = \"256M\"\nswap_reserve = \"0\"\nquantum = \"1s\"\n";

/// `memgang ARGS` as `user`: Ok(stdout) or Err(all it said).
fn cli(d: &Daemon, user: Option<(u32, u32)>, args: &[&str]) -> Result<String, String> {
    let out = d.cli(user, args);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(text(&out))
    }
}

fn submit(d: &Daemon, user: Option<(u32, u32)>, args: &[&str]) -> u64 {
    let mut a = vec!["submit", "--memory", "20M"];
    a.extend_from_slice(args);
    let out = cli(d, user, &a).unwrap_or_else(|e| panic!("submit {args:?}: {e}"));
    out.trim().parse().unwrap()
}

fn refused(d: &Daemon, user: Option<(u32, u32)>, args: &[&str], says: &str) {
    let mut a = vec!["submit", "--memory", "20M"];
    a.extend_from_slice(args);
    match cli(d, user, &a) {
        Ok(o) => panic!("{args:?} was taken: {o}"),
        Err(e) => assert!(e.contains(says), "{args:?}: {e}"),
    }
}

fn wait_end(d: &Daemon, id: u64, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let j = d.job(id);
        if is_final(&j) {
            return j;
        }
        assert!(Instant::now() < deadline, "job {id}: {j}\n{}", d.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How many of `jobs` have started and not ended.
fn started(jobs: &[Value]) -> usize {
    let on = |j: &&Value| matches!(j["state"].as_str(), Some("running" | "suspended"));
    jobs.iter().filter(on).count()
}

/// A directory anyone may write in (sticky, as /tmp), in the daemon's.
fn shared_dir(d: &Daemon) -> std::path::PathBuf {
    let p = d.dir.path().join("out");
    let _ = std::fs::create_dir(&p);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o1777)).unwrap();
    p
}

#[test]
#[ignore = "needs root: cgroups, users (scripts/test runs it as root)"]
fn output_files_are_made_by_the_job_as_its_user() {
    require_root("output_files_are_made_by_the_job_as_its_user");
    let d = Daemon::new(CONFIG);
    let alice = user("memgang-alice");
    let bob = user("memgang-bob");
    let out = shared_dir(&d);
    let id = submit(
        &d,
        Some(alice),
        &[
            "-J",
            "hi",
            "-o",
            "out/%x-%u-%j.txt",
            "-e",
            "out/%j.err",
            "--",
            "sh",
            "-c",
            "echo one; echo two; echo oops >&2",
        ],
    );
    let j = wait_end(&d, id, Duration::from_secs(30));
    assert_eq!(j["state"], "finished", "{j}");
    let file = out.join(format!("hi-memgang-alice-{id}.txt"));
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!((meta.uid(), meta.gid()), alice, "{}", file.display());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\n");
    let err = out.join(format!("{id}.err"));
    assert_eq!(std::fs::read_to_string(&err).unwrap(), "oops\n");
    let ids = id.to_string();
    assert_eq!(cli(&d, Some(alice), &["log", &ids]).unwrap(), "one\ntwo\n");
    assert_eq!(
        cli(&d, Some(alice), &["log", &ids, "--lines", "1"]).unwrap(),
        "two\n"
    );
    assert_eq!(
        cli(&d, Some(alice), &["follow", &ids]).unwrap(),
        "one\ntwo\n"
    );
    let e = cli(&d, Some(bob), &["log", &ids]).unwrap_err();
    assert!(e.contains(&format!("no job {id} of yours")), "{e}");

    // Hostile: alice points her output through a symlink at root's file.
    // The job opens it as alice, so it fails, and root's file is intact.
    let mine = d.dir.path().join("alice");
    std::fs::create_dir(&mine).unwrap();
    std::os::unix::fs::chown(&mine, Some(alice.0), Some(alice.1)).unwrap();
    let roots = d.dir.path().join("roots-file");
    std::fs::write(&roots, "root's\n").unwrap();
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&roots, mine.join("evil.out")).unwrap();
    let id = submit(
        &d,
        Some(alice),
        &["-o", "alice/evil.out", "--", "echo", "pwned"],
    );
    let j = wait_end(&d, id, Duration::from_secs(30));
    assert_eq!(j["state"], "failed", "{j}");
    let why = j["reason"].as_str().unwrap();
    assert!(
        why.contains("cannot write the output file") && why.contains("evil.out"),
        "{why}"
    );
    assert_eq!(std::fs::read_to_string(&roots).unwrap(), "root's\n");
    // A directory she cannot write: the same, with the path.
    let id = submit(
        &d,
        Some(alice),
        &["-o", "/proc/nowhere/x.out", "--", "true"],
    );
    let j = wait_end(&d, id, Duration::from_secs(30));
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains("/proc/nowhere/x.out"),
        "{j}"
    );
    // Patterns memgang does not know are refused at submit.
    refused(
        &d,
        Some(alice),
        &["-o", "x-%q", "--", "true"],
        "%q is not a pattern",
    );
    refused(&d, Some(alice), &["-o", "x-%a", "--", "true"], "no array");
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn a_time_limit_counts_running_time_only() {
    require_root("a_time_limit_counts_running_time_only");
    let d = Daemon::new(CONFIG);
    let id = submit(&d, None, &["--time", "2s", "--", "sleep", "60"]);
    let t = Instant::now();
    let j = wait_end(&d, id, Duration::from_secs(20));
    assert_eq!(j["state"], "timeout", "{j}");
    assert!(
        j["reason"].as_str().unwrap().contains("time limit of 2 s"),
        "{j}"
    );
    assert!(j["used_s"].as_f64().unwrap() >= 2.0, "{j}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let out = cli(&d, None, &["status", "-t", "TO"]).unwrap();
    assert!(out.contains("timeout"), "{out}");
    // Absurd limits: refused with what to write.
    refused(&d, None, &["--time", "0", "--", "true"], "no time at all");
    refused(
        &d,
        None,
        &["--time", "9999999999999999:00:00", "--", "true"],
        "too long",
    );
    refused(
        &d,
        None,
        &["--time", "100000000", "--", "true"],
        "more than a year",
    );
}

/// Two jobs that do not fit the pool together take turns (gang, 1 s
/// quanta): each reaches its 3 s limit of running time after about 6 s.
#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn frozen_time_is_not_the_jobs() {
    require_root("frozen_time_is_not_the_jobs");
    let _swap = memgang_linux::swap::TestSwap::new(512 << 20).unwrap();
    let d = Daemon::new(&format!("policy = \"gang\"\n{CONFIG}"));
    let args = [
        "submit", "--memory", "200M", "--time", "3s", "--", "sleep", "60",
    ];
    let ids: Vec<u64> = (0..2)
        .map(|_| cli(&d, None, &args).unwrap().trim().parse().unwrap())
        .collect();
    for id in ids {
        let j = wait_end(&d, id, Duration::from_secs(60));
        assert_eq!(j["state"], "timeout", "{j}");
        let used = j["used_s"].as_f64().unwrap();
        let wall = j["finished_unix_s"].as_f64().unwrap() - j["started_unix_s"].as_f64().unwrap();
        assert!((3.0..4.5).contains(&used), "used {used} s: {j}");
        assert!(
            wall > used + 1.0,
            "{wall} s from start to end, {used} s running: {j}"
        );
    }
}

#[test]
#[ignore = "needs root: cgroups, users (scripts/test runs it as root)"]
fn dependencies_wait_and_the_impossible_ones_end() {
    require_root("dependencies_wait_and_the_impossible_ones_end");
    let d = Daemon::new(CONFIG);
    let out = shared_dir(&d);
    let o = format!("{}/%j.out", out.display());
    let first = submit(&d, None, &["-o", &o, "--", "sh", "-c", "sleep 2; exit 3"]);
    let f = first.to_string();
    let ok = submit(&d, None, &["-o", &o, "--after", &f, "--", "true"]);
    let any = submit(
        &d,
        None,
        &["-o", &o, "--after", &format!("afterany:{f}"), "--", "true"],
    );
    std::thread::sleep(Duration::from_millis(800));
    let j = d.job(any);
    assert_eq!(j["state"], "queued", "{j}");
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("waits for job(s) {f}")),
        "{j}"
    );
    let j = wait_end(&d, ok, Duration::from_secs(30));
    assert_eq!(j["state"], "cancelled", "{j}");
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains("dependency never satisfied"),
        "{j}"
    );
    let j = wait_end(&d, any, Duration::from_secs(30));
    assert_eq!(j["state"], "finished", "{j}");
    assert!(j["started_unix_s"].as_f64() >= d.job(first)["finished_unix_s"].as_f64());
    // afterok on a job already failed; on no job; on another user's.
    refused(&d, None, &["--after", &f, "--", "true"], "can never be met");
    refused(
        &d,
        None,
        &["--after", "999999", "--", "true"],
        "no job 999999 of yours",
    );
    let bob = user("memgang-bob");
    let o = format!("{}/bob-%j.out", out.display());
    refused(
        &d,
        Some(bob),
        &["-o", &o, "--after", &any.to_string(), "--", "true"],
        "of yours",
    );
    // A cycle cannot be written: a job waits only for jobs older than it.
    refused(
        &d,
        None,
        &["--after", "afterok:0", "--", "true"],
        "no job 0",
    );
}

#[test]
#[ignore = "needs root: cgroups (scripts/test runs it as root)"]
fn an_array_runs_its_tasks_at_most_n_at_once() {
    require_root("an_array_runs_its_tasks_at_most_n_at_once");
    let d = Daemon::new(&format!("policy = \"cosched\"\n{CONFIG}"));
    let a = submit(
        &d,
        None,
        &[
            "--array",
            "1-6%2",
            "--",
            "sh",
            "-c",
            "echo task $MEMGANG_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID; sleep 1",
        ],
    );
    let ids: Vec<u64> = (a..a + 6).collect();
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let jobs: Vec<Value> = ids.iter().map(|&i| d.job(i)).collect();
        most = most.max(started(&jobs));
        if jobs.iter().all(is_final) {
            break;
        }
        assert!(Instant::now() < deadline, "{jobs:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!((1..=2).contains(&most), "{most} tasks ran at once");
    for (k, id) in ids.iter().enumerate() {
        let j = d.job(*id);
        assert_eq!(j["state"], "finished", "{j}");
        assert_eq!(j["array_id"], a);
        let file = d.dir.path().join(format!("memgang-{a}_{}.out", k + 1));
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("task {} of {a}\n", k + 1)
        );
    }
    // Huge or empty arrays are refused before anything is queued.
    refused(
        &d,
        None,
        &["--array", "1-100000", "--", "true"],
        "more than 1000",
    );
    refused(&d, None, &["--array", "1-3%0", "--", "true"], "%1 or more");
    refused(&d, None, &["--array", "9-1", "--", "true"], "empty range");
}

#[test]
#[ignore = "needs root: cgroups, users (scripts/test runs it as root)"]
fn cancel_takes_several_and_users_get_fair_turns() {
    require_root("cancel_takes_several_and_users_get_fair_turns");
    // One job at a time: 200M each in a 256M pool, under cosched (which
    // promises no swap): admission, in fair turns, is the queue's order.
    let d = Daemon::new(&format!("policy = \"cosched\"\n{CONFIG}"));
    let alice = user("memgang-alice");
    let bob = user("memgang-bob");
    let out = shared_dir(&d);
    let o = format!("{}/%u-%j.out", out.display());
    let big = |who, cmd: &str| {
        let out = cli(
            &d,
            who,
            &[
                "submit", "--memory", "200M", "-o", &o, "--", "sh", "-c", cmd,
            ],
        )
        .unwrap();
        out.trim().parse::<u64>().unwrap()
    };
    let blocker = big(None, "sleep 8");
    let alices: Vec<u64> = (0..20).map(|_| big(Some(alice), "sleep 0.1")).collect();
    let bobs = big(Some(bob), "sleep 0.1");
    let start = |id: u64| {
        wait_end(&d, id, Duration::from_secs(120))["started_unix_s"]
            .as_f64()
            .unwrap()
    };
    let b = start(bobs);
    let before = alices.iter().filter(|&&a| start(a) < b).count();
    assert!(start(blocker) < b);
    // Bob's one job takes the second turn after the blocker, not the 21st.
    assert!(
        before <= 1,
        "{before} of alice's 20 jobs started before bob's one"
    );

    // cancel: several ids, -t, and never another user's.
    let ids: Vec<u64> = (0..3).map(|_| big(Some(alice), "sleep 60")).collect();
    let own = big(Some(bob), "sleep 60");
    let e = cli(&d, Some(bob), &["cancel", &ids[0].to_string()]).unwrap_err();
    assert!(e.contains(&format!("no job {} of yours", ids[0])), "{e}");
    let e = cli(&d, Some(bob), &["cancel", "-u", "memgang-alice"]).unwrap_err();
    assert!(e.contains("no job of yours"), "{e}");
    let said = cli(
        &d,
        Some(alice),
        &["cancel", &ids[0].to_string(), &ids[1].to_string()],
    )
    .unwrap();
    assert_eq!(
        said,
        format!("cancelled {}\ncancelled {}\n", ids[0], ids[1])
    );
    cli(&d, Some(alice), &["cancel", "-t", "PD,R"]).unwrap();
    for id in &ids {
        assert_eq!(
            wait_end(&d, *id, Duration::from_secs(30))["state"],
            "cancelled"
        );
    }
    assert!(!is_final(&d.job(own)), "bob's job was cancelled");
    cli(&d, None, &["cancel", "-u", "memgang-bob"]).unwrap();
    assert_eq!(
        wait_end(&d, own, Duration::from_secs(30))["state"],
        "cancelled"
    );
}

/// A `kill -9` of memgangd while an array (`%1`), a job waiting on it and
/// a job with a time limit are in progress: after the restart the array
/// still runs one task at a time, the dependency still waits for the
/// last task, and the limit still ends its job `timeout`.
#[test]
#[ignore = "needs root: cgroups (scripts/test runs it as root)"]
fn limits_dependencies_and_arrays_survive_kill_9() {
    require_root("limits_dependencies_and_arrays_survive_kill_9");
    let mut d = Daemon::new(&format!("policy = \"cosched\"\n{CONFIG}"));
    let a = submit(&d, None, &["--array", "1-4%1", "--", "sleep", "1"]);
    let tasks: Vec<u64> = (a..a + 4).collect();
    let last = tasks[3].to_string();
    let dep = submit(&d, None, &["--after", &last, "--", "true"]);
    let timed = submit(&d, None, &["--time", "3s", "--", "sleep", "60"]);
    std::thread::sleep(Duration::from_millis(1500));
    d.signal(libc::SIGKILL);
    d.start();
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let jobs: Vec<Value> = tasks.iter().map(|&i| d.job(i)).collect();
        most = most.max(started(&jobs));
        let dj = d.job(dep);
        if !is_final(&jobs[3]) {
            assert!(
                !matches!(dj["state"].as_str(), Some("running" | "finished")),
                "the dependent job ran before task {last} ended: {dj}"
            );
        }
        if jobs.iter().all(is_final) && is_final(&dj) {
            break;
        }
        assert!(Instant::now() < deadline, "{jobs:?} {dj}\n{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(most, 1, "{most} tasks of a %1 array ran at once");
    for id in &tasks {
        assert_eq!(d.job(*id)["state"], "finished", "{}", d.job(*id));
    }
    let dj = d.job(dep);
    assert_eq!(dj["state"], "finished", "{dj}");
    assert!(dj["started_unix_s"].as_f64() >= d.job(tasks[3])["finished_unix_s"].as_f64());
    let j = wait_end(&d, timed, Duration::from_secs(30));
    assert_eq!(j["state"], "timeout", "{j}\n{}", d.log());
}
