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
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
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

/// Job `id`'s row, if the frame lists it.
fn row(frame: &str, id: u64) -> Option<&str> {
    frame
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
}

/// The state column of job `id`'s row, if the frame lists it.
fn state(frame: &str, id: u64) -> Option<String> {
    let row = row(frame, id)?;
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

/// A daemon whose 256M pool runs two jobs of 210M in turns (gang, q = 1 s,
/// ao/ai), with a swap file of its own that holds them.
fn gang_pool() -> (TestSwap, Daemon) {
    let swap = TestSwap::new(768 << 20).unwrap();
    let d = Daemon::new(
        "pool_memory = \"256M\"\nswap_reserve = \"256M\"\npolicy = \"gang\"\n\
         quantum = \"1s\"\nswitch = \"ao/ai\"\n",
    );
    (swap, d)
}

/// One of the jobs that take turns in [`gang_pool`]: 200 MiB touched in
/// order for long enough, declared 210M.
fn submit_pair_job(d: &Daemon, name: &str) -> u64 {
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
    submit(d, name, "210M", &cmd)
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn top_shows_a_gang_pair_taking_turns_and_a_job_waiting_for_memory() {
    require_root("top_shows_a_gang_pair_taking_turns_and_a_job_waiting_for_memory");
    // As in daemon.rs's deferral test: room for two jobs of 210M and a
    // switch's exchange, not three.
    let (_swap, d) = gang_pool();
    let ids: Vec<u64> = ["pair-a", "pair-b", "third"]
        .iter()
        .map(|n| submit_pair_job(&d, n))
        .collect();
    let (a, b, third) = (ids[0], ids[1], ids[2]);
    let mut seen: Vec<(Option<String>, Option<String>)> = Vec::new();
    let (mut next, mut switched, mut paging) = (false, false, false);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    let mut turned_away = false;
    while Instant::now() < deadline {
        let f = top(&d, None);
        // Until admission has turned the third job away (it may take the
        // loop a turn or two to start the pair), jobs are queued with no
        // reason yet (seen in CI): nothing to check in such a frame. If it
        // never comes, the deadline's panic shows the last frame. From
        // then on, every frame gives the third job, and only it, that
        // reason.
        turned_away |= f.contains("waits for memory");
        if !turned_away {
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
        let waiting: Vec<&str> = f
            .lines()
            .filter(|l| l.contains("waits for memory"))
            .collect();
        assert!(
            waiting.len() == 1 && row(&f, third).is_some_and(|r| r.contains("waits for memory")),
            "{f}"
        );
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
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
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
    let out = Command::new(&py)
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

/// A tmux server of the test's own (its socket in the test's directory),
/// killed by its pid when the test ends, passed or not: the pane's shell
/// and whatever runs in it get the hangup.
struct Tmux {
    socket: PathBuf,
    pid: Option<i32>,
}

impl Tmux {
    /// A detached session `top`, 120x40, running `script` with sh.
    fn start(socket: PathBuf, script: &Path) -> Tmux {
        let mut t = Tmux { socket, pid: None };
        let sh = format!("sh {}", script.display());
        let out = t.run(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "120",
            "-y",
            "40",
            &sh,
        ]);
        assert!(out.status.success(), "tmux new-session: {}", text(&out));
        t.pid = t.display("#{pid}").parse().ok();
        assert!(t.pid.is_some(), "tmux gave no server pid");
        t
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux (scripts/lib.sh's ensure_tools installs it)")
    }

    /// A tmux format for the pane, e.g. `#{alternate_on}`.
    fn display(&self, format: &str) -> String {
        let out = self.run(&["display-message", "-p", "-t", "top", format]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// What the pane shows (the alternate screen while one is on).
    fn pane(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", "top"]);
        assert!(out.status.success(), "tmux capture-pane: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Capture the pane until `done` holds of it, for at most `secs`.
    fn until(&self, secs: u64, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let p = self.pane();
            if done(&p) {
                return p;
            }
            assert!(Instant::now() < deadline, "no pane with {what}:\n{p}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let Some(pid) = self.pid.or_else(|| self.display("#{pid}").parse().ok()) else {
            return;
        };
        // SAFETY: kill on the server this test started, by its pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{pid}")).exists() {
            if Instant::now() > deadline {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
#[ignore = "needs root and tmux: cgroups, swap, a terminal (scripts/test runs it as root)"]
fn top_in_a_terminal_shows_a_switching_pair_and_gives_the_terminal_back() {
    require_root("top_in_a_terminal_shows_a_switching_pair_and_gives_the_terminal_back");
    require_installed(&["tmux"], "ensure_tools");
    // Two jobs of 210M in a pool of 256M: they take turns.
    let (_swap, d) = gang_pool();
    let a = submit_pair_job(&d, "pair-a");
    let b = submit_pair_job(&d, "pair-b");
    // The pane's shell: the terminal's settings before and after top,
    // top's exit status, then it stays for the capture.
    let dir = d.dir.path();
    let q = |p: &Path| format!("'{}'", p.display());
    let script = dir.join("pane.sh");
    std::fs::write(
        &script,
        format!(
            "stty -g > {before}\nMEMGANG_SOCKET={sock} {memgang} top\nst=$?\n\
             stty -g > {after}\necho \"top exited $st\"\nexec sleep 600\n",
            before = q(&dir.join("stty.before")),
            after = q(&dir.join("stty.after")),
            sock = q(&d.socket()),
            memgang = q(Path::new(env!("CARGO_BIN_EXE_memgang"))),
        ),
    )
    .unwrap();
    let t = Tmux::start(dir.join("tmux.sock"), &script);
    let pane = t.until(60, "the pair, one of them out", |p| {
        let (sa, sb) = (state(p, a), state(p, b));
        let out = |s: &Option<String>| {
            s.as_deref()
                .is_some_and(|s| s == "frozen" || s == "paging out")
        };
        sa.is_some() && sb.is_some() && (out(&sa) || out(&sb))
    });
    eprintln!("{pane}");
    assert!(
        pane.contains("memgang top: policy gang, quantum 1 s"),
        "{pane}"
    );
    assert_eq!(
        t.display("#{alternate_on} #{cursor_flag}"),
        "1 0",
        "top draws on the alternate screen, cursor hidden"
    );
    let out = t.run(&["send-keys", "-t", "top", "q"]);
    assert!(out.status.success(), "tmux send-keys: {}", text(&out));
    let pane = t.until(10, "top's exit", |p| p.contains("top exited"));
    eprintln!("after q:\n{pane}");
    assert!(pane.contains("top exited 0"), "{pane}");
    assert!(
        !pane.contains("memgang top:") && state(&pane, a).is_none(),
        "top's frame left behind:\n{pane}"
    );
    // The alternate screen left, the cursor shown, the line settings
    // (raw mode off) as before.
    assert_eq!(t.display("#{alternate_on} #{cursor_flag}"), "0 1");
    let stty = |f: &str| {
        std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}\n{pane}"))
    };
    assert_eq!(
        stty("stty.before"),
        stty("stty.after"),
        "the terminal's settings after top"
    );
}
