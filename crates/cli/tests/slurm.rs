//! memgang on a real Slurm (Debian's 22.05) with munge and Open MPI, on an
//! emulated cluster of two nodes on this machine (scripts/slurm-cluster:
//! each node a network namespace of its own): MPI jobs whose ranks span
//! both nodes take turns with their memory, and a node whose agent is gone
//! keeps its jobs stopped and says why; each with Slurm's select/linear
//! (whole nodes) and select/cons_tres (cores, Slurm's default since 23.02).
//! A job an administrator suspends stays suspended until resumed.

mod common;

use common::slurm::{Cluster, Controller};
use common::*;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const STATE: &str = "/run/memgang-slurm-test";

/// Every test's cluster: its controller is the test's own, with --json;
/// each node's pool (192M) holds one job's rank (120 MiB), not two.
fn up(select: &str) -> Cluster {
    Cluster::up(STATE, "192M", select, Controller::Test)
}

impl Cluster {
    /// Two jobs `a` and `b` of two ranks (one per node), `mib` MiB each,
    /// that synchronise every sweep.
    fn submit_pair(&self, mib: u32, sweeps: u32) {
        for name in ["a", "b"] {
            self.submit(name, mib, sweeps);
        }
    }

    fn controller(&self, json: &Path) -> Child {
        memgang()
            .args(["slurm", "run", "--quantum", "3s", "--munge-socket"])
            .arg(format!("{STATE}/munge/munge.socket"))
            .args(["--switch-timeout", "5s", "--exit-when-idle", "--json"])
            .arg(json)
            .env("SLURM_CONF", self.conf())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Wait until each job has been suspended once (then both have
    /// started and their ranks sit in their pools; killing the agent before
    /// the second job's first start makes that start fail, not a switch),
    /// then SIGKILL node n2's agent: it does not release its pool, the
    /// ranks stay in it.
    fn kill_agent_n2_once_both_ran(&self) {
        let t = Instant::now();
        let mut seen = std::collections::BTreeSet::new();
        while seen.len() < 2 {
            for (name, s) in self.states() {
                if s == "SUSPENDED" {
                    seen.insert(name);
                }
            }
            assert!(t.elapsed() < Duration::from_secs(90), "{:?}", self.states());
            std::thread::sleep(Duration::from_millis(200));
        }
        let pid: i32 = std::fs::read_to_string(format!("{STATE}/agent-n2.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: kill(2) on a pid we read from the agent's own pid file.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }

    /// [`states`](Self::states) once no job is COMPLETING: under
    /// proctrack/cgroup slurmd waits until the job's cgroups are empty,
    /// which may outlast the controller's exit.
    fn settled_states(&self) -> Vec<(String, String)> {
        let t = Instant::now();
        loop {
            let states = self.states();
            if states.iter().all(|(_, s)| s != "COMPLETING")
                || t.elapsed() > Duration::from_secs(60)
            {
                return states;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// `id state` of every job Slurm knows.
    fn states(&self) -> Vec<(String, String)> {
        self.slurm("squeue", &["-h", "-a", "-t", "all", "-o", "%j %T"])
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn checksum(&self, job: &str) -> Option<String> {
        let out = std::fs::read_to_string(self.dir.path().join(format!("{job}.out"))).ok()?;
        out.lines()
            .rev()
            .find_map(|l| l.split("checksum ").nth(1))
            .map(str::to_string)
    }
}

fn wait(child: &mut Child, limit: Duration) -> std::process::Output {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    std::process::Output {
        status: child.wait().unwrap(),
        stdout: Vec::new(),
        stderr: stderr.into_bytes(),
    }
}

#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn mpi_jobs_spanning_nodes_take_turns_with_their_memory() {
    require_root("mpi_jobs_spanning_nodes_take_turns_with_their_memory");
    take_turns("linear");
}

#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn mpi_jobs_take_turns_under_cons_tres() {
    require_root("mpi_jobs_take_turns_under_cons_tres");
    take_turns("cons_tres");
}

fn take_turns(select: &str) {
    // Each node's pool holds one job's rank (120 MiB), not both.
    let c = up(select);
    c.submit_pair(120, 250);
    let json = c.dir.path().join("record.json");
    let mut ctl = c.controller(&json);
    let out = wait(&mut ctl, Duration::from_secs(240));
    assert!(out.status.success(), "controller: {}", text(&out));
    let states = c.settled_states();
    assert_eq!(states.len(), 2, "{states:?}");
    assert!(
        states.iter().all(|(_, s)| s == "COMPLETED"),
        "{states:?}\n{}",
        text(&out)
    );
    // Slurm's JSON says what its text says (squeue --json, which the
    // controller is to read instead).
    std::env::set_var("SLURM_CONF", c.conf());
    let parts = ["memgang", "memgang-run"];
    let mut text = memgang_slurm::slurmctl::jobs(&parts).unwrap();
    let mut from_json: Vec<_> = memgang_slurm::slurm_json::jobs(&parts)
        .unwrap()
        .into_iter()
        .map(|j| j.info)
        .collect();
    text.sort_by_key(|j| j.id);
    from_json.sort_by_key(|j| j.id);
    assert_eq!(from_json, text);
    // The same sweeps give the same checksum, whatever stopped them.
    let (a, b) = (c.checksum("a"), c.checksum("b"));
    assert!(a.is_some() && a == b, "checksums {a:?} {b:?}");

    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let switches = rec["switches"].as_array().unwrap();
    // Both jobs ran at least twice each (q = 3 s, about 5 s of work each).
    let resumes = switches
        .iter()
        .filter(|s| !s["resumed"].as_array().unwrap().is_empty())
        .count();
    assert!(resumes >= 2, "{switches:#?}");
    // On every node, memory moved in bulk both ways, and no node failed.
    for node in ["n1", "n2"] {
        let mut out_bytes = 0;
        let mut in_bytes = 0;
        for s in switches {
            let r = &s["nodes"][node];
            assert!(r.get("Err").is_none(), "node {node}: {r}");
            out_bytes += r["Ok"]["paged_out_bytes"].as_u64().unwrap_or(0);
            in_bytes += r["Ok"]["paged_in_bytes"].as_u64().unwrap_or(0);
        }
        assert!(out_bytes > 50 << 20, "node {node} paged out {out_bytes}");
        assert!(in_bytes > 50 << 20, "node {node} paged in {in_bytes}");
    }
}

#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn a_node_without_its_agent_keeps_the_incoming_job_stopped_and_says_why() {
    require_root("a_node_without_its_agent_keeps_the_incoming_job_stopped_and_says_why");
    agent_lost("linear");
}

#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn a_node_without_its_agent_under_cons_tres() {
    require_root("a_node_without_its_agent_under_cons_tres");
    agent_lost("cons_tres");
}

fn agent_lost(select: &str) {
    let c = up(select);
    c.submit_pair(120, 2000);
    let json = c.dir.path().join("record.json");
    let mut ctl = c.controller(&json);
    c.kill_agent_n2_once_both_ran();
    // The next switches are refused on n2: both jobs end up stopped, and
    // the one the policy wanted to run says why in Slurm's record.
    c.wait_refused("10.77.0.2:6828", Duration::from_secs(30));
    // The controller's exit resumes what it stopped: nothing stays frozen.
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(ctl.id() as i32, libc::SIGTERM) };
    let out = wait(&mut ctl, Duration::from_secs(30));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("10.77.0.2:6828") && said.contains("resuming"),
        "{}",
        text(&out)
    );
    let states = c.states();
    assert!(
        states.iter().all(|(_, s)| s != "SUSPENDED"),
        "left suspended: {states:?}"
    );
    c.slurm("scancel", &["--user=root"]);
}

/// A stand-in for node n2's agent at its address (10.77.0.2:6828, in its
/// network namespace) that reads each request and then answers garbage,
/// or (`slow`) says nothing for longer than the controller waits.
struct Impostor {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    slow: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Impostor {
    fn start() -> Impostor {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let stop = Arc::new(AtomicBool::new(false));
        let slow = Arc::new(AtomicBool::new(false));
        let (s, w) = (stop.clone(), slow.clone());
        let (ready, bound) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            // setns(2) moves this thread only: its sockets are n2's.
            let ns = std::fs::File::open("/run/netns/memgang-n2").unwrap();
            use std::os::fd::AsRawFd;
            // SAFETY: setns(2) on a descriptor we hold open; it changes
            // this thread's network namespace only.
            let r = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            // The killed agent's port is free once the kernel has reaped it.
            let t = Instant::now();
            let l = loop {
                match std::net::TcpListener::bind("10.77.0.2:6828") {
                    Ok(l) => break l,
                    Err(e) if t.elapsed() > Duration::from_secs(10) => {
                        panic!("binding 10.77.0.2:6828 in memgang-n2: {e}")
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            };
            l.set_nonblocking(true).unwrap();
            ready.send(()).unwrap();
            while !s.load(Ordering::SeqCst) {
                let Ok((mut conn, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let slow = w.load(Ordering::SeqCst);
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    conn.set_nonblocking(false).unwrap();
                    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    // The credential line and the request line.
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    while got.iter().filter(|&&b| b == b'\n').count() < 2 {
                        match conn.read(&mut buf) {
                            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                            _ => break,
                        }
                    }
                    if slow {
                        std::thread::sleep(Duration::from_secs(8));
                    } else {
                        let _ = conn.write_all(b"\x00 this is no answer {\n");
                    }
                });
            }
        });
        if bound.recv_timeout(Duration::from_secs(20)).is_err() {
            let e = thread
                .join()
                .err()
                .and_then(|p| p.downcast::<String>().ok());
            panic!("the impostor did not start: {e:?}");
        }
        Impostor {
            stop,
            slow,
            thread: Some(thread),
        }
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A hostile network: requests to an agent without a valid credential, or
/// replayed, are refused and logged; an agent replaced by one that answers
/// garbage, then by one that does not answer in time, keeps the incoming
/// job stopped with the reason in its `AdminComment`.
#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn forged_requests_and_garbage_or_slow_agents_are_refused_over_tcp() {
    use memgang_slurm::auth::{payload, CredentialService, Munge};
    use memgang_slurm::net::exchange;
    require_root("forged_requests_and_garbage_or_slow_agents_are_refused_over_tcp");
    let c = up("linear");
    const T: Duration = Duration::from_secs(10);

    // Node n1's agent, from the host (the controller's side of the bridge).
    let n1 = "10.77.0.1:6828";
    let hello = r#"{"op":"hello"}"#;
    let e = exchange(n1, "MUNGE:forged:", hello, T, T).unwrap_err();
    assert!(
        e.to_string().contains("not a credential of this cluster"),
        "{e:#}"
    );
    let munge = Munge::new(Some(format!("{STATE}/munge/munge.socket").into()));
    let cred = munge
        .encode(&payload("n1", hello.as_bytes()), Duration::from_secs(60))
        .unwrap();
    exchange(n1, &cred, hello, T, T).unwrap();
    let e = exchange(n1, &cred, hello, T, T).unwrap_err();
    assert!(e.to_string().contains("replayed credential"), "{e:#}");
    // Good for n1, not for n2.
    let cred = munge
        .encode(&payload("n1", hello.as_bytes()), Duration::from_secs(60))
        .unwrap();
    let e = exchange("10.77.0.2:6828", &cred, hello, T, T).unwrap_err();
    assert!(
        e.to_string().contains("another request or another node"),
        "{e:#}"
    );
    let log = std::fs::read_to_string(format!("{STATE}/agent-n1.log")).unwrap();
    for why in ["not a credential of this cluster", "replayed credential"] {
        assert!(
            log.lines()
                .any(|l| l.contains("refused a request from 10.77.0.254") && l.contains(why)),
            "agent-n1.log does not say {why:?}:\n{log}"
        );
    }

    c.submit_pair(120, 2000);
    let log = c.dir.path().join("controller.log");
    let mut ctl = memgang()
        .args(["slurm", "run", "--quantum", "3s", "--munge-socket"])
        .arg(format!("{STATE}/munge/munge.socket"))
        .args(["--switch-timeout", "5s", "--exit-when-idle"])
        .env("SLURM_CONF", c.conf())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    c.kill_agent_n2_once_both_ran();
    let impostor = Impostor::start();
    c.wait_refused(
        "the agent at 10.77.0.2:6828 answered something unreadable",
        Duration::from_secs(60),
    );
    impostor
        .slow
        .store(true, std::sync::atomic::Ordering::SeqCst);
    c.wait_refused(
        "no answer from the agent at 10.77.0.2:6828 within 5s",
        Duration::from_secs(60),
    );
    drop(impostor);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(ctl.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while ctl.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = ctl.kill();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("resuming"), "{said}");
    let states = c.states();
    assert!(
        states.iter().all(|(_, s)| s != "SUSPENDED"),
        "left suspended: {states:?}\n{said}"
    );
    c.slurm("scancel", &["--user=root"]);
}

/// An administrator's `scontrol suspend` of a job in the run partition is
/// the administrator's: the controller leaves the job out of the rotation
/// (the other job runs on) and does not resume it, also after its own
/// SIGKILL and restart, until the administrator resumes it; then it
/// rejoins the rotation and both complete.
#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn a_job_an_admin_suspended_stays_suspended_until_the_admin_resumes_it() {
    require_root("a_job_an_admin_suspended_stays_suspended_until_the_admin_resumes_it");
    // The supervised controller (q = 3 s), restarted when it dies.
    let c = Cluster::up(STATE, "192M", "linear", Controller::Supervised);
    // About 10 s of work each alone in memgang's pool, 30 s under Slurm's
    // task/cgroup (below): long enough to outlast the two holds, since b
    // may complete during them.
    c.submit_pair(120, 500);
    let job = |name: &str| c.jobs().into_iter().find(|j| j["JobName"] == name);
    let state = |name: &str| job(name).map(|j| j["JobState"].clone()).unwrap_or_default();
    let id = job("a").unwrap()["JobId"].clone();
    // Just after a's turn began (b stopped, a running), so that the
    // controller's own suspend of a, a quantum later, is far.
    let t = Instant::now();
    while !(state("a") == "RUNNING" && state("b") == "SUSPENDED") {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{:?}\n{}",
            c.jobs(),
            c.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c.slurm("scontrol", &["suspend", &id]);
    let said = format!("job {id} suspended by an administrator");
    // Two quanta and more, with a controller SIGKILLed and restarted
    // between: a stays suspended, b runs (or has completed).
    let hold = |what: &str| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(8) {
            assert_eq!(
                state("a"),
                "SUSPENDED",
                "{what}: {:?}\n{}",
                c.jobs(),
                c.log()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        let b = state("b");
        assert!(
            b == "RUNNING" || b == "COMPLETED",
            "{what}: b is {b}: {:?}\n{}",
            c.jobs(),
            c.log()
        );
    };
    hold("admin-suspended");
    assert_eq!(c.log().matches(&said).count(), 1, "{}", c.log());
    let pid = c.controller_pid().expect("the controller runs");
    // SAFETY: kill(2) on the controller's pid, checked to be `memgang
    // slurm run`.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t = Instant::now();
    while c.controller_pid().is_none_or(|p| p == pid) {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "not restarted: {}",
            c.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    hold("admin-suspended, controller restarted");
    assert_eq!(c.log().matches(&said).count(), 2, "{}", c.log());

    c.slurm("scontrol", &["resume", &id]);
    // Under Slurm's task/cgroup with select/linear a job runs two to three
    // times its time in memgang's own pool (its --mem is its cgroup's
    // limit, and Open MPI's shared pages are charged to it).
    c.wait_completed(
        Duration::from_secs(360),
        &["RUNNING", "SUSPENDED", "COMPLETING", "COMPLETED"],
    );
    // Nothing is left with a comment of the controller's on a job that
    // ran on: each was cleared once its job ran again. A job that ended
    // in the instant the controller stopped it (its SuspendTime is its
    // EndTime) keeps its mark: Slurm refuses to update a finished job
    // (ESLURM_JOB_FINISHED), as CI once met.
    for j in c.jobs() {
        assert_eq!(j["ExitCode"], "0:0", "{j:?}");
        let ended_as_stopped = j.get("SuspendTime") == j.get("EndTime");
        assert!(
            ended_as_stopped || !j["AdminComment"].starts_with("memgang"),
            "{j:?}"
        );
    }
    let a = job("a").unwrap();
    assert!(!a["AdminComment"].starts_with("memgang"), "{a:?}");
    assert!(
        c.log()
            .contains(&format!("job {id} resumed by an administrator")),
        "{}",
        c.log()
    );
}

/// The ranks of a job, by their program (the test's mpi_sweep): pid and
/// `/proc/<pid>/cgroup` (the host's view).
fn ranks(c: &Cluster) -> Vec<(i32, String)> {
    let exe = c.dir.path().join("mpi_sweep");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe))
        .filter_map(|p| {
            Some((
                p,
                std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok()?,
            ))
        })
        .collect()
}

/// Under Slurm's proctrack/cgroup and task/cgroup (each emulated node its
/// own cgroup tree), memgang moves no task: every rank of a running and of
/// a suspended job stays in Slurm's job cgroup in the memory and freezer
/// hierarchies, Slurm's suspend stops them, sstat reports the running
/// job's memory, and scancel leaves no process and no job cgroup behind.
#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn tasks_stay_in_slurms_cgroups_where_slurm_tracks_them() {
    require_root("tasks_stay_in_slurms_cgroups_where_slurm_tracks_them");
    let c = up("cons_tres");
    c.submit_pair(120, 100_000);
    let json = c.dir.path().join("record.json");
    let mut ctl = c.controller(&json);
    let t = Instant::now();
    // Slurm's suspend under proctrack/cgroup: SIGSTOP, or its freezer
    // cgroup FROZEN.
    let stopped_of = |pid: i32, cg: &str| {
        let freezer = cg
            .lines()
            .find_map(|l| l.split(":freezer:").nth(1))
            .unwrap();
        let frozen =
            std::fs::read_to_string(format!("/sys/fs/cgroup/freezer{freezer}/freezer.state"))
                .is_ok_and(|s| s.trim() == "FROZEN");
        memgang_linux::process::state(pid) == Some('T') || frozen
    };
    let pair = || {
        let jobs = c.jobs();
        let of = |s: &str| {
            jobs.iter()
                .find(|j| j["JobState"] == s)
                .map(|j| j["JobId"].clone())
        };
        Some((of("RUNNING")?, of("SUSPENDED")?))
    };
    let (run, held, ranks, stopped) = loop {
        // After a switch: the held job has run and been paged out, and
        // its ranks had started (a job stopped during its launch, as under
        // load in a full run, has its ranks only from its next turn).
        if let Some((r, h)) = pair() {
            if c.slurm("scontrol", &["show", "job", &h])
                .contains("SuspendTime=20")
                && ranks(&c).len() == 4
            {
                std::thread::sleep(Duration::from_secs(1));
                let ranks = ranks(&c);
                let stopped: Vec<bool> = ranks.iter().map(|(p, cg)| stopped_of(*p, cg)).collect();
                // Read again if a switch came in between (q = 3 s).
                if pair() == Some((r.clone(), h.clone())) {
                    break (r, h, ranks, stopped);
                }
            }
        }
        assert!(t.elapsed() < Duration::from_secs(90), "{:?}", c.jobs());
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(ranks.len(), 4, "two ranks of two jobs: {ranks:?}");
    for (i, (pid, cg)) in ranks.iter().enumerate() {
        let job = [&run, &held]
            .into_iter()
            .find(|j| cg.contains(&format!("/uid_0/job_{j}/")))
            .unwrap_or_else(|| panic!("rank {pid} is not in a Slurm job cgroup:\n{cg}"));
        for hierarchy in ["memory", "freezer"] {
            let line = cg
                .lines()
                .find(|l| l.contains(&format!(":{hierarchy}:")))
                .unwrap();
            assert!(
                line.contains("/memgang-slurmnode-n")
                    && line.contains(&format!("/job_{job}/step_")),
                "rank {pid} of job {job}, {hierarchy}: {line}"
            );
        }
        assert_eq!(
            stopped[i],
            job == &held,
            "rank {pid} of job {job} (held {held})"
        );
    }
    let sstat = c.slurm(
        "sstat",
        &["-n", "-P", "-a", "-j", &run, "-o", "JobID,MaxRSS"],
    );
    let most = sstat
        .lines()
        .filter_map(|l| l.split('|').nth(1))
        .filter_map(|r| r.strip_suffix('K')?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    // jobacct_gather/cgroup's sample of a rank of 120 MiB (some of it
    // still on swap after its page-in).
    assert!(most > 32 << 10, "sstat of job {run}: {sstat}");
    c.slurm("scancel", &[&run, &held]);
    let t = Instant::now();
    while !c.states().iter().all(|(_, s)| s == "CANCELLED") || !self::ranks(&c).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{:?} {:?}",
            c.states(),
            self::ranks(&c)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let left: Vec<_> = glob_dirs("/sys/fs/cgroup/memory/memgang-slurmnode-n*/slurm_n*/uid_0/job_*");
    assert!(left.is_empty(), "job cgroups left: {left:?}");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(ctl.id() as i32, libc::SIGTERM) };
    wait(&mut ctl, Duration::from_secs(30));
}

/// Directories matching `pattern` (`*` within one component).
fn glob_dirs(pattern: &str) -> Vec<std::path::PathBuf> {
    let mut found = vec![std::path::PathBuf::from("/")];
    for part in pattern.trim_start_matches('/').split('/') {
        let (pre, post) = part.split_once('*').unwrap_or((part, ""));
        found = found
            .into_iter()
            .flat_map(|d| {
                std::fs::read_dir(&d)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
            })
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                p.is_dir()
                    && if part.contains('*') {
                        n.starts_with(pre) && n.ends_with(post)
                    } else {
                        n == part
                    }
            })
            .collect();
    }
    found
}

/// slurmd restarted on every node while a job is suspended and paged out
/// (as `systemctl restart slurmd` does; its slurmstepd go on): both jobs
/// resume at their turns and complete with the checksum of an
/// undisturbed run.
#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn slurmd_restarted_while_a_job_is_paged_out_loses_nothing() {
    require_root("slurmd_restarted_while_a_job_is_paged_out_loses_nothing");
    let c = up("linear");
    c.submit_pair(120, 400);
    let json = c.dir.path().join("record.json");
    let mut ctl = c.controller(&json);
    let t = Instant::now();
    let paged_out = |job: &str| -> u64 {
        glob_dirs(&format!(
            "/sys/fs/cgroup/memory/memgang-slurmnode-n*/slurm_n*/uid_0/job_{job}"
        ))
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("memory.stat")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("total_swap ")?.parse::<u64>().ok())
        })
        .sum()
    };
    let held = loop {
        let held = c
            .jobs()
            .into_iter()
            .find(|j| j["JobState"] == "SUSPENDED" && paged_out(&j["JobId"]) > 100 << 20);
        if let Some(j) = held {
            break j["JobId"].clone();
        }
        assert!(t.elapsed() < Duration::from_secs(90), "{:?}", c.jobs());
        std::thread::sleep(Duration::from_millis(200));
    };
    for k in ["1", "2"] {
        let out = common::slurm::script(c.state, "restart-slurmd", &[k]);
        assert!(out.status.success(), "restart-slurmd {k}: {}", text(&out));
    }
    eprintln!(
        "slurmd restarted on n1 and n2 with job {held} suspended, {} MiB paged out",
        paged_out(&held) >> 20
    );
    let out = wait(&mut ctl, Duration::from_secs(240));
    assert!(out.status.success(), "controller: {}", text(&out));
    let states = c.settled_states();
    assert!(
        states.iter().all(|(_, s)| s == "COMPLETED"),
        "{states:?}\n{}",
        text(&out)
    );
    let (a, b) = (c.checksum("a"), c.checksum("b"));
    assert!(a.is_some() && a == b, "checksums {a:?} {b:?}");
}
