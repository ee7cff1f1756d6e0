//! `memgang top` against a real memgangd, as root: a gang pair taking
//! turns and a job waiting for memory, each in its state; and as a hostile
//! user would try it: another user's jobs, a flood of jobs. One frame each
//! time (`--once`, as into a pipe: 80 columns, 40 lines, no colour).

mod common;

use common::daemon::{user, workload, Daemon};
use common::*;
use memgang_linux::swap::TestSwap;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// One frame as `user` (None: root), checked to fit a pipe's 80x40.
fn top(d: &Daemon, user: Option<(u32, u32)>) -> String {
    let out = d.cli(user, &["top", "--once"]);
    assert!(out.status.success(), "{}", text(&out));
    let frame = String::from_utf8(out.stdout).unwrap();
    assert!(frame.lines().count() <= 40, "{frame}");
    assert!(
        frame.lines().all(|l| l.chars().count() <= 80),
        "wider than 80 columns:\n{frame}"
    );
    assert!(!frame.contains('\x1b'), "colour into a pipe:\n{frame}");
    frame
}

/// The state column of job `id`'s row, if the frame lists it.
fn state(frame: &str, id: u64) -> Option<String> {
    let row = frame
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&id.to_string()))?;
    // ID USER NAME: fixed columns, then the state (one or two words).
    let rest: String = row.chars().skip(31).collect();
    ["paging out", "paging in", "running", "frozen", "queued"]
        .into_iter()
        .find(|s| rest.starts_with(s))
        .map(String::from)
}

fn submit(d: &Daemon, name: &str, memory: &str, cmd: &[&str]) -> u64 {
    let mut args = vec!["submit", "--name", name, "--memory", memory, "--"];
    args.extend_from_slice(cmd);
    let out = d.cli(None, &args);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn top_shows_a_gang_pair_taking_turns_and_a_job_waiting_for_memory() {
    require_root("top_shows_a_gang_pair_taking_turns_and_a_job_waiting_for_memory");
    // As in daemon.rs's deferral test: room for two jobs of 210M and a
    // switch's exchange, not three.
    let _swap = TestSwap::new(768 << 20).unwrap();
    let d = Daemon::new(
        "pool_memory = \"256M\"\nswap_reserve = \"256M\"\npolicy = \"gang\"\n\
         quantum = \"1s\"\nswitch = \"ao/ai\"\n",
    );
    let w = workload();
    let cmd = [
        w.as_str(),
        "--mib",
        "200",
        "--pattern",
        "seq",
        "--iterations",
        "1000",
        "--compute",
        "4",
    ];
    let ids: Vec<u64> = ["pair-a", "pair-b", "third"]
        .iter()
        .map(|n| submit(&d, n, "210M", &cmd))
        .collect();
    let (a, b, third) = (ids[0], ids[1], ids[2]);
    let mut seen: Vec<(Option<String>, Option<String>)> = Vec::new();
    let (mut next, mut switched, mut paging) = (false, false, false);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        let f = top(&d, None);
        // Until admission has turned the third job away (it may take the
        // loop a turn or two to start the pair), jobs are queued with no
        // reason yet (seen in CI): nothing to check in such a frame. If it
        // never comes, the deadline's panic shows the last frame.
        if !f.contains("waits for memory") {
            last = f;
            std::thread::sleep(Duration::from_millis(150));
            continue;
        }
        let pair = (state(&f, a), state(&f, b));
        paging |= [&pair.0, &pair.1]
            .iter()
            .any(|s| s.as_deref().is_some_and(|s| s.starts_with("paging")));
        next |= f.contains("next switch in");
        switched |= f.contains(&format!("out [{a}] in [{b}]"))
            || f.contains(&format!("out [{b}] in [{a}]"));
        assert_eq!(state(&f, third).as_deref(), Some("queued"), "{f}");
        assert!(f.contains("waits for memory"), "{f}");
        assert!(f.contains("policy gang, quantum 1 s"), "{f}");
        seen.push(pair);
        last = f;
        let turns = |x: &str, y: &str| {
            seen.iter()
                .any(|p| p.0.as_deref() == Some(x) && p.1.as_deref() == Some(y))
        };
        if turns("running", "frozen") && turns("frozen", "running") && next && switched {
            eprintln!("{last}\nframes: {}; paging seen: {paging}", seen.len());
            metrics_follow_conventions(&d);
            return;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    panic!(
        "no frames with the pair in turn (next switch {next}, a switch listed {switched}): \
         {seen:?}\nlast frame:\n{last}\n{}",
        d.log()
    );
}

/// The running daemon's metrics file, twice 6 s apart (it is rewritten
/// every 5 s), through the Prometheus client's parser: conventions kept,
/// no counter lower the second time (docs/daemon.md, Metrics).
fn metrics_follow_conventions(d: &Daemon) {
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let py = std::env::var_os("MEMGANG_PYTHON")
        .map_or_else(|| repo.join(".venv/bin/python"), Into::into);
    let file = d.socket().with_file_name("memgang.prom");
    let copy = |i: u32| {
        let to = d.dir.path().join(format!("{i}.prom"));
        std::fs::copy(&file, &to).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        to
    };
    let first = copy(0);
    std::thread::sleep(Duration::from_secs(6));
    let later = copy(1);
    let check = repo.join("crates/daemon/tests/prometheus_conventions.py");
    let out = std::process::Command::new(&py)
        .arg(check)
        .args([first, later])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/lib.sh's ensure_python_env)", py.display()));
    assert!(out.status.success(), "{}", text(&out));
    let metrics = std::fs::read_to_string(&file).unwrap();
    assert!(metrics.contains("memgang_switches_total"), "{metrics}");
}

/// A submission over the socket, without a client process per job.
fn submit_raw(d: &Daemon, name: &str, memory: u64) -> Value {
    let req = json!({
        "op": "submit", "command": ["sleep", "600"], "memory_bytes": memory,
        "ranks": 1, "cwd": "/", "env": {}, "name": name,
    });
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap()
}

#[test]
#[ignore = "needs root: cgroups, users (scripts/test runs it as root)"]
fn top_shows_a_user_only_their_jobs_and_stays_bounded_under_a_flood() {
    require_root("top_shows_a_user_only_their_jobs_and_stays_bounded_under_a_flood");
    let d = Daemon::new("pool_memory = \"256M\"\nswap_reserve = \"0\"\npolicy = \"gang\"\n");
    // Their output to /dev/null: the test's directory is not theirs to
    // write in (a job's output files are made as its user).
    let alice = user("memgang-alice");
    let bob = user("memgang-bob");
    let secret = d.cli(
        Some(alice),
        &[
            "submit",
            "-o",
            "/dev/null",
            "--name",
            "alice-secret",
            "--memory",
            "20M",
            "--",
            "sleep",
            "600",
        ],
    );
    assert!(secret.status.success(), "{}", text(&secret));
    let alices: u64 = String::from_utf8_lossy(&secret.stdout)
        .trim()
        .parse()
        .unwrap();
    let own = d.cli(
        Some(bob),
        &[
            "submit",
            "-o",
            "/dev/null",
            "--name",
            "bobs-own",
            "--memory",
            "20M",
            "--",
            "sleep",
            "600",
        ],
    );
    assert!(own.status.success(), "{}", text(&own));
    let bobs: u64 = String::from_utf8_lossy(&own.stdout).trim().parse().unwrap();
    // A flood of root's: two of 100M run, the rest wait for memory.
    let flood = 300;
    for i in 0..flood {
        let r = submit_raw(&d, &format!("flood-{i}"), 100 << 20);
        assert_eq!(r["kind"], "submitted", "{r}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let f = loop {
        let f = top(&d, Some(bob));
        if state(&f, bobs).is_some_and(|s| s != "queued") || Instant::now() > deadline {
            break f;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("bob's frame:\n{f}");
    assert!(f.contains("bobs-own"), "{f}");
    assert!(!f.contains("alice-secret") && !f.contains("flood-"), "{f}");
    assert!(state(&f, alices).is_none(), "{f}");
    // The others as counts: alice's one and root's flood.
    let others = f
        .lines()
        .find_map(|l| l.split_once("other users': ").map(|x| x.1.to_string()))
        .unwrap_or_else(|| panic!("no other users' line:\n{f}"));
    let counted: u32 = others
        .split(", ")
        .map(|c| c.split(' ').next().unwrap().parse::<u32>().unwrap())
        .sum();
    assert_eq!(counted, flood + 1, "{f}");
    // Root sees every job, 40 lines at most, the rest counted.
    let f = top(&d, None);
    eprintln!("root's frame:\n{f}");
    let more = f
        .lines()
        .find_map(|l| l.strip_prefix("… "))
        .unwrap_or_else(|| panic!("no count of the jobs left out:\n{f}"));
    let listed = (1..=flood as u64 + 2)
        .filter(|id| state(&f, *id).is_some())
        .count();
    let left: usize = more.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(listed + left, flood as usize + 2, "{f}");
    // The answer itself is bounded: at most 100 jobs, the rest counted.
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.write_all(b"{\"op\":\"top\"}\n").unwrap();
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).unwrap();
    let v: Value = serde_json::from_str(&answer).unwrap();
    let jobs = v["view"]["jobs"].as_array().unwrap().len();
    let counted: u64 = v["view"]["more"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["jobs"].as_u64().unwrap())
        .sum();
    assert_eq!((jobs, jobs as u64 + counted), (100, flood as u64 + 2));
    assert!(answer.len() < 64 << 10, "{} bytes", answer.len());
}
