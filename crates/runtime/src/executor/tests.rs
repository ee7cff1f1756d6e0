//! The executor against fake mechanisms: no root, no cgroups, no swap.
//!
//! The jobs are real processes (short `sh` scripts) so that launching,
//! reaping and killing are the real thing; the cgroups, the freezer, the
//! paging and the node's counters are fakes that record what the executor
//! asked for. A fake cgroup's processes are the live processes whose
//! environment names it (`MEMGANG_FAKE_GROUP`, set by the test's
//! launches), which is what lets teardown find and kill them.

use super::*;
use memgang_core::{JobId, JobSpec, PolicyKind, Switching};
use memgang_linux::cgroup::{CgroupVersion, GroupPath, MemoryStat};
use memgang_linux::counters::Psi;
use memgang_linux::testing::{FakeCounters, FakeFreezer, FakePaging, Log, RECORD_PAGES};
use memgang_linux::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

/// Names a fake group in a job's environment.
const GROUP_VAR: &str = "MEMGANG_FAKE_GROUP";
/// Resident memory each fake job group reports.
const JOB_ANON: u64 = 64 << 20;

#[derive(Debug)]
struct FakeCgroups {
    log: Arc<Log>,
    groups: Mutex<BTreeMap<GroupPath, u64>>,
    /// Locked memory a group reports (`unevictable`), set by a test.
    pinned: Mutex<BTreeMap<GroupPath, u64>>,
}

impl FakeCgroups {
    fn live(&self) -> Vec<GroupPath> {
        self.groups.lock().unwrap().keys().cloned().collect()
    }
}

/// Live (not zombie) processes whose environment has `GROUP_VAR` set to
/// `group` or a group below it.
fn processes_of(group: &GroupPath) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // A zombie's environment reads empty: it has left its group.
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let ours = env.split(|b| *b == 0).any(|kv| {
            let kv = String::from_utf8_lossy(kv);
            kv.strip_prefix(GROUP_VAR)
                .and_then(|v| v.strip_prefix('='))
                .is_some_and(|g| {
                    g == group.as_str() || g.starts_with(&format!("{}/", group.as_str()))
                })
        });
        if ours {
            out.push(pid);
        }
    }
    out.sort();
    out
}

impl CgroupBackend for FakeCgroups {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }
    fn describe(&self) -> String {
        "fake".into()
    }
    fn create(&self, group: &GroupPath) -> memgang_linux::Result<()> {
        self.log.push(format!("create {group}"));
        let anon = if group.parent().is_some() {
            JOB_ANON
        } else {
            0
        };
        self.groups.lock().unwrap().insert(group.clone(), anon);
        Ok(())
    }
    fn remove(&self, group: &GroupPath) -> memgang_linux::Result<()> {
        if !processes_of(group).is_empty() {
            return Err(Error::Unsupported(format!("{group} has processes")));
        }
        self.log.push(format!("remove {group}"));
        let mut groups = self.groups.lock().unwrap();
        groups.retain(|g, _| g != group && g.parent().as_ref() != Some(group));
        Ok(())
    }
    fn set_memory_limit(&self, _: &GroupPath, _: Option<u64>) -> memgang_linux::Result<()> {
        Ok(())
    }
    fn memory_limit(&self, _: &GroupPath) -> memgang_linux::Result<Option<u64>> {
        Ok(None)
    }
    fn protect(&self, group: &GroupPath, on: bool) -> memgang_linux::Result<()> {
        self.log.push(format!("protect {group} {on}"));
        Ok(())
    }
    fn reclaim(&self, group: &GroupPath, bytes: u64) -> memgang_linux::Result<u64> {
        self.log.push(format!("reclaim {group} {bytes}"));
        let mut groups = self.groups.lock().unwrap();
        let anon = groups.get_mut(group).ok_or_else(|| gone(group))?;
        let got = bytes.min(*anon);
        *anon -= got;
        Ok(got)
    }
    fn procs_files(&self, _: &GroupPath) -> Vec<std::path::PathBuf> {
        Vec::new()
    }
    fn procs(&self, group: &GroupPath) -> memgang_linux::Result<Vec<i32>> {
        self.procs_recursive(group)
    }
    fn procs_recursive(&self, group: &GroupPath) -> memgang_linux::Result<Vec<i32>> {
        Ok(processes_of(group))
    }
    fn can_freeze(&self) -> bool {
        false
    }
    fn set_frozen(&self, _: &GroupPath, _: bool) -> memgang_linux::Result<()> {
        Err(Error::Unsupported("no freezer".into()))
    }
    fn is_frozen(&self, _: &GroupPath) -> memgang_linux::Result<bool> {
        Ok(false)
    }
    fn memory_stat(&self, group: &GroupPath) -> memgang_linux::Result<MemoryStat> {
        let groups = self.groups.lock().unwrap();
        let usage = if group.parent().is_none() {
            groups
                .iter()
                .filter(|(g, _)| g.parent().as_ref() == Some(group))
                .map(|(_, a)| a)
                .sum()
        } else {
            *groups.get(group).ok_or_else(|| gone(group))?
        };
        Ok(MemoryStat {
            anon_bytes: usage,
            usage_bytes: usage,
            unevictable_bytes: self.pinned.lock().unwrap().get(group).copied(),
            ..MemoryStat::default()
        })
    }
    fn memory_pressure(&self, _: &GroupPath) -> Option<Psi> {
        None
    }
    fn list_groups(&self, _: &str) -> memgang_linux::Result<Vec<GroupPath>> {
        Ok(self.live())
    }
    fn list_children(&self, group: &GroupPath) -> memgang_linux::Result<Vec<GroupPath>> {
        Ok(self
            .live()
            .into_iter()
            .filter(|g| g.parent().as_ref() == Some(group))
            .collect())
    }
    fn exists(&self, group: &GroupPath) -> bool {
        self.groups.lock().unwrap().contains_key(group)
    }
}

fn gone(group: &GroupPath) -> Error {
    Error::io(
        "reading",
        group.as_str(),
        std::io::Error::from(std::io::ErrorKind::NotFound),
    )
}

struct Fakes {
    log: Arc<Log>,
    cgroups: Arc<FakeCgroups>,
    env: Env,
    _logs: tempfile::TempDir,
}

fn fakes() -> Fakes {
    let log = Arc::new(Log::default());
    let cgroups = Arc::new(FakeCgroups {
        log: log.clone(),
        groups: Mutex::new(BTreeMap::new()),
        pinned: Mutex::new(BTreeMap::new()),
    });
    let logs = tempfile::tempdir().unwrap();
    let env = Env {
        backend: cgroups.clone(),
        freezer: Arc::new(FakeFreezer::new(log.clone())),
        paging: Arc::new(FakePaging { log: log.clone() }),
        counters: Arc::new(FakeCounters::default()),
        machine: Machine {
            hostname: "fake".into(),
            kernel: "fake".into(),
            cpus: 1,
            memory_bytes: 1 << 30,
            swap_bytes: 4 << 30,
            cgroup: "fake".into(),
            freezer: "fake".into(),
        },
        logs: logs.path().to_path_buf(),
        stop: Arc::new(AtomicBool::new(false)),
        progress: None,
    };
    Fakes {
        log,
        cgroups,
        env,
        _logs: logs,
    }
}

/// A pool name of its own per test: tests run in parallel in one process.
fn pool_name(test: &str) -> String {
    format!("memgang-test-{}-{test}", std::process::id())
}

/// What the tests run: `sh -c SCRIPT` jobs, each launched into its fake
/// group and declaring 100M, under `policy` and `switch` with a quantum of
/// 100 ms and a sample every 50 ms.
struct Experiment {
    settings: NodeSettings,
    jobs: Vec<(JobSpec, Launch)>,
}

fn experiment(pool: &str, policy: &str, switch: &str, jobs: &[(&str, &str)]) -> Experiment {
    experiment_in(pool, "256M", policy, switch, jobs)
}

fn experiment_in(
    pool: &str,
    pool_memory: &str,
    policy: &str,
    switch: &str,
    jobs: &[(&str, &str)],
) -> Experiment {
    let kind: PolicyKind = policy.parse().unwrap();
    let mut settings = settings(pool, kind);
    settings.pool_memory = memgang_core::units::parse_bytes(pool_memory).unwrap();
    settings.policy = kind.build(Duration::from_millis(100), switch.parse().unwrap());
    let jobs = jobs
        .iter()
        .map(|(name, script)| {
            let spec = JobSpec {
                memory_bytes: Some(100 << 20),
                ..spec(name)
            };
            (spec, launch(pool, name, script))
        })
        .collect();
    Experiment { settings, jobs }
}

fn run(f: &Fakes, exp: Experiment) -> NodeReport {
    let mut node = Node::new(exp.settings, f.env.clone()).unwrap();
    for (spec, launch) in exp.jobs {
        node.add_job(spec, launch).unwrap();
    }
    assert!(!run_to_end(&mut node, &f.env.stop).unwrap());
    node.finish()
}

#[test]
fn batch_runs_jobs_one_after_the_other_and_reports_their_exits() {
    let f = fakes();
    let pool = pool_name("batch");
    let exp = experiment(
        &pool,
        "batch",
        "lru",
        &[("a", "exit 0"), ("b", "echo oops >&2; exit 3")],
    );
    let r = run(&f, exp);
    let (a, b) = (&r.jobs[0], &r.jobs[1]);
    assert_eq!((a.exit_code, b.exit_code), (Some(0), Some(3)));
    assert!(a.ok() && !b.ok());
    assert_eq!(b.stderr_tail.as_deref(), Some("oops"));
    // One at a time: b starts when a has finished.
    assert!(b.start_s.unwrap() >= a.finish_s.unwrap());
    assert_eq!(r.timeline.len(), 2);
    // Batch never suspends, so the mechanisms were never asked to.
    assert_eq!(f.log.count("freeze"), 0);
    assert_eq!(f.log.count("page_out"), 0);
    // Swap traffic is what the node's counters said (10 and 20 per read).
    assert!(r.swap_in_pages > 0 && r.swap_out_pages == 2 * r.swap_in_pages);
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

/// What a front end is told, as the runtime tells it.
#[derive(Default)]
struct Told {
    /// (running, finished, jobs) at each status.
    statuses: Mutex<Vec<(Vec<String>, usize, usize)>>,
    notes: Mutex<Vec<String>>,
}

impl Progress for Told {
    fn status(&self, s: &Status<'_>) {
        let running = s.running.iter().map(|s| s.to_string()).collect();
        (self.statuses.lock().unwrap()).push((running, s.finished, s.jobs));
        assert_eq!(s.policy, "gang");
    }

    fn note(&self, line: &str) {
        self.notes.lock().unwrap().push(line.trim().to_string());
    }
}

#[test]
fn a_front_end_is_told_the_status_at_samples_and_what_happened() {
    let mut f = fakes();
    let told = Arc::new(Told::default());
    f.env.progress = Some(told.clone());
    let pool = pool_name("progress");
    let mut exp = experiment(&pool, "gang", "lru", &[("a", "sleep 0.3"), ("b", "exit 4")]);
    exp.settings.label = "gang".into();
    let r = run(&f, exp);
    assert_eq!(r.jobs[1].exit_code, Some(4));
    let notes = told.notes.lock().unwrap().clone();
    for want in [
        "a started",
        "b started",
        "a finished: ok",
        "b finished: FAILED",
    ] {
        assert!(
            notes.iter().any(|n| n.contains(want)),
            "{want:?} not in {notes:?}"
        );
    }
    let statuses = told.statuses.lock().unwrap().clone();
    // A sample every 50 ms over at least 300 ms; every one counts both
    // jobs, and at some point a runs while b is done.
    assert!(statuses.len() >= 3, "{statuses:?}");
    assert!(statuses.iter().all(|s| s.2 == 2), "{statuses:?}");
    assert!(
        statuses.iter().any(|s| s.0 == ["a"] && s.1 == 1),
        "{statuses:?}"
    );
}

/// Two jobs that each need several quanta of 100 ms, under gang with
/// `switch`, run to their end, which must be a success.
fn gang_of_two(test: &str, pool_memory: &str, switch: &str) -> (Fakes, NodeReport) {
    let f = fakes();
    let pool = pool_name(test);
    let exp = experiment_in(
        &pool,
        pool_memory,
        "gang",
        switch,
        &[("a", "sleep 0.6"), ("b", "sleep 0.6")],
    );
    let r = run(&f, exp);
    assert!(r.jobs.iter().all(|j| j.ok()), "{:?}", r.jobs);
    (f, r)
}

#[test]
fn gang_switches_page_out_the_outgoing_job_and_page_in_the_incoming() {
    let (f, r) = gang_of_two("gang", "256M", "ao/ai");
    assert!(!r.switches.is_empty());
    let log = f.log.lines();
    // Every freeze is of a job group and followed by its page-out; the
    // job's records come back before it is thawed.
    assert!(
        f.log.count("freeze") > 0 && f.log.count("thaw") > 0,
        "{log:?}"
    );
    assert!(f.log.count("page_out") > 0, "{log:?}");
    assert!(f.log.count("page_in") > 0, "{log:?}");
    let first_page_in = log.iter().position(|l| l.starts_with("page_in")).unwrap();
    let next_thaw = log[first_page_in..]
        .iter()
        .position(|l| l.starts_with("thaw"));
    assert!(next_thaw.is_some(), "{log:?}");
    let paged: u64 = r.switches.iter().map(|s| s.paged_out_bytes).sum();
    assert!(paged > 0 && paged.is_multiple_of(RECORD_PAGES * paging_page()));
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

#[test]
fn selective_page_out_makes_room_for_the_shortfall_only() {
    // A pool smaller than the two jobs' JOB_ANON together.
    let (f, r) = gang_of_two("so", "100M", "so/ao");
    let pool = pool_name("so");
    let log = f.log.lines();
    assert!(r.switches.iter().any(|s| s.paged_out_bytes > 0), "{log:?}");
    // so: the job that runs is protected, the one suspended exposed.
    assert!(f.log.count("protect") > 0, "{log:?}");
    // b, declared 100M, lacks 100M + the 32M margin - the 36M free: 96M,
    // more than a's 64M, so all of a is reclaimed first.
    let a = format!("{pool}/job-a");
    let first = log.iter().find(|l| l.starts_with("reclaim")).unwrap();
    assert_eq!(*first, format!("reclaim {a} {}", 64u64 << 20), "{log:?}");
    // Room is only ever made from frozen jobs.
    let mut frozen = BTreeSet::new();
    for l in &log {
        let w: Vec<&str> = l.split(' ').collect();
        match w[0] {
            "freeze" => {
                frozen.insert(w[1]);
            }
            "thaw" => {
                frozen.remove(w[1]);
            }
            "reclaim" => assert!(frozen.contains(w[1]), "{l} while not frozen: {log:?}"),
            _ => {}
        }
    }
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

/// so/ao/ai: the incoming job's page-in runs beside the page-out that
/// makes its room, taking only memory that page-out has freed: its first
/// page-in comes after the first reclaim, and before the job is thawed.
#[test]
fn a_page_in_streams_into_the_room_being_made() {
    // Two jobs of 64M in 100M: nothing free until a's pages go.
    let (f, r) = gang_of_two("stream", "100M", "so/ao/ai");
    let log = f.log.lines();
    assert!(r.switches.iter().any(|s| s.paged_in_bytes > 0), "{log:?}");
    let first_reclaim = log.iter().position(|l| l.starts_with("reclaim")).unwrap();
    let first_page_in = log.iter().position(|l| l.starts_with("page_in")).unwrap();
    assert!(first_reclaim < first_page_in, "{log:?}");
    // The first job to come back (a: b starts, it has no record) is paged
    // in before it is thawed.
    let thaw = log.iter().position(|l| l.starts_with("thaw")).unwrap();
    assert!(first_page_in < thaw, "{log:?}");
    // Each switch's steps and the rest add up to its time.
    for s in &r.switches {
        let steps = s.steps.expect("every switch records its steps");
        let sum = steps.measured_s() + steps.other_s;
        assert!(
            (sum - s.took_s).abs() < 1e-6,
            "{steps:?} against {}",
            s.took_s
        );
    }
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

fn paging_page() -> u64 {
    memgang_linux::paging::page_size()
}

#[test]
fn a_node_runs_to_its_end_and_records_its_samples() {
    let f = fakes();
    let pool = pool_name("to-end");
    let r = run(&f, experiment(&pool, "cosched", "lru", &[("x", "exit 0")]));
    assert_eq!(r.jobs.len(), 1);
    assert!(r.jobs[0].ok());
    assert!(r.end > Duration::ZERO && !r.samples.is_empty());
    assert!(f.cgroups.live().is_empty());
}

fn spec(name: &str) -> JobSpec {
    JobSpec {
        name: name.into(),
        ranks: 1,
        memory_bytes: None,
        arrival: Duration::ZERO,
        placed: None,
    }
}

fn launch(pool: &str, name: &str, script: &str) -> Launch {
    Launch {
        command: vec!["sh".into(), "-c".into(), script.into()],
        env: [(GROUP_VAR.to_string(), format!("{pool}/job-{name}"))].into(),
        ..Launch::default()
    }
}

fn settings(pool: &str, policy: PolicyKind) -> NodeSettings {
    NodeSettings {
        pool: pool.into(),
        pool_memory: 256 << 20,
        cpus: 1,
        policy: policy.build(Duration::from_millis(100), Switching::default()),
        label: policy.name().into(),
        sample_interval: Duration::from_millis(50),
        dynamic_coscheduling: false,
        swap_reserve: memgang_core::capacity::SWAP_RESERVE,
    }
}

/// Step until `done` holds, at most 10 s (a hang fails, it does not
/// block the suite).
fn step_until(node: &mut Node, mut done: impl FnMut(&Node) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done(node) {
        assert!(
            std::time::Instant::now() < deadline,
            "condition not reached"
        );
        node.step(Some(Duration::from_millis(20))).unwrap();
    }
}

fn status(node: &Node, job: JobId) -> memgang_core::JobStatus {
    node.scheduler().state().job(job).status
}

#[test]
fn a_service_adds_jobs_as_they_come_and_cancels_them() {
    use memgang_core::JobStatus::*;
    let f = fakes();
    let pool = pool_name("service");
    let mut node = Node::new(settings(&pool, PolicyKind::Batch), f.env.clone()).unwrap();
    // Nothing to do yet: a step returns at once, and says so.
    assert!(node.step(Some(Duration::ZERO)).unwrap());
    let long = node
        .add_job(spec("long"), launch(&pool, "long", "sleep 30"))
        .unwrap();
    step_until(&mut node, |n| status(n, long) == Running);
    // Batch: a job added now waits for the first.
    let next = node
        .add_job(spec("next"), launch(&pool, "next", "sleep 30"))
        .unwrap();
    let last = node
        .add_job(spec("last"), launch(&pool, "last", "exit 0"))
        .unwrap();
    assert!(node
        .add_job(spec("last"), launch(&pool, "last", "exit 0"))
        .is_err());
    step_until(&mut node, |n| status(n, next) == Queued);
    // Cancelled while queued: it never starts.
    node.cancel(next).unwrap();
    node.cancel(long).unwrap();
    step_until(&mut node, |n| status(n, last) == Finished);
    let r = node.finish();
    assert_eq!(r.jobs[0].signal, Some(libc::SIGKILL));
    assert_eq!(r.jobs[0].error.as_deref(), Some("cancelled"));
    assert_eq!(r.jobs[1].start_s, None);
    assert!(r.jobs[1].error.as_deref().unwrap().contains("cancelled"));
    assert!(r.jobs[2].ok());
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

#[test]
fn dropping_a_node_kills_its_jobs_and_removes_its_groups() {
    let f = fakes();
    let pool = pool_name("drop");
    let group = GroupPath::new(&pool).unwrap();
    let mut node = Node::new(settings(&pool, PolicyKind::Cosched), f.env.clone()).unwrap();
    let job = node
        .add_job(spec("a"), launch(&pool, "a", "sleep 30"))
        .unwrap();
    step_until(&mut node, |n| {
        status(n, job) == memgang_core::JobStatus::Running && !processes_of(&group).is_empty()
    });
    drop(node);
    assert!(processes_of(&group).is_empty());
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

/// A gated first process (memgangd's shim) stops itself; the node attaches
/// the job's counters, then continues it, so the work of what it forks
/// at once is counted by inheritance.
#[test]
fn a_gated_first_process_is_continued_once_its_counters_attach() {
    let f = fakes();
    let pool = pool_name("gate");
    let mut node = Node::new(settings(&pool, PolicyKind::Batch), f.env.clone()).unwrap();
    let mut gated = launch(
        &pool,
        "gated",
        "kill -STOP $$; sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'",
    );
    gated.gate = true;
    let job = node.add_job(spec("gated"), gated).unwrap();
    step_until(&mut node, |n| {
        status(n, job) == memgang_core::JobStatus::Finished
    });
    let r = node.finish();
    assert!(r.jobs[0].ok(), "{:?}", r.jobs[0]);
    let account = r.jobs[0].account.as_ref().unwrap();
    match &account.sw {
        // The child's loop runs for tens of milliseconds.
        Some(sw) => assert!(sw.task_clock_ns > 10_000_000, "{sw:?}"),
        None => eprintln!(
            "SKIPPED the counter check: no software counters here: {:?}",
            account.sw_missing
        ),
    }
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

/// A first process slow to reach its gate (memgangd's shim under an
/// LD_PRELOAD that sleeps) holds no step: the node goes on with its other
/// jobs, and continues it once it has stopped there.
#[test]
fn a_slow_gate_holds_no_step() {
    let f = fakes();
    let pool = pool_name("slow-gate");
    let mut node = Node::new(settings(&pool, PolicyKind::Cosched), f.env.clone()).unwrap();
    let mut slow = launch(&pool, "slow", "sleep 2; kill -STOP $$; exit 0");
    slow.gate = true;
    let slow = node.add_job(spec("slow"), slow).unwrap();
    let quick = node
        .add_job(spec("quick"), launch(&pool, "quick", "exit 0"))
        .unwrap();
    let t = std::time::Instant::now();
    step_until(&mut node, |n| {
        status(n, quick) == memgang_core::JobStatus::Finished
    });
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "the other job waited {:?} for a gate",
        t.elapsed()
    );
    step_until(&mut node, |n| {
        status(n, slow) == memgang_core::JobStatus::Finished
    });
    let r = node.finish();
    assert!(r.jobs[0].ok() && r.jobs[1].ok(), "{:?}", r.jobs);
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

/// A service forgets each job once it has recorded its end: the node
/// then holds nothing of it (its run, its state in the scheduler), and
/// a job that has not ended cannot be forgotten.
#[test]
fn a_forgotten_job_leaves_nothing_on_the_node() {
    let f = fakes();
    let pool = pool_name("forget");
    let mut node = Node::new(settings(&pool, PolicyKind::Cosched), f.env.clone()).unwrap();
    let long = node
        .add_job(spec("long"), launch(&pool, "long", "sleep 30"))
        .unwrap();
    for round in 0..5 {
        let ids: Vec<JobId> = (0..20)
            .map(|k| {
                let name = format!("r{round}-{k}");
                node.add_job(spec(&name), launch(&pool, &name, "exit 0"))
                    .unwrap()
            })
            .collect();
        step_until(&mut node, |n| {
            ids.iter()
                .all(|j| n.result(*j).is_some_and(|r| r.finish_s.is_some()))
        });
        for j in ids {
            node.forget(j).unwrap();
            assert!(node.result(j).is_none());
        }
        assert_eq!(node.job_count(), 1);
        assert_eq!(node.scheduler().state().jobs().len(), 1);
    }
    assert!(node.forget(long).is_err(), "a running job was forgotten");
    node.cancel(long).unwrap();
    step_until(&mut node, |n| {
        status(n, long) == memgang_core::JobStatus::Finished
    });
    node.forget(long).unwrap();
    node.keep_samples(2);
    let r = node.finish();
    // The two kept and the last one, at the node's end.
    assert!(
        r.jobs.is_empty() && r.samples.len() <= 3,
        "{}",
        r.samples.len()
    );
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

/// A job that fails to start (here: a NUL in its command, which no
/// exec takes) leaves no cgroup behind, at once, not at the node's end.
#[test]
fn a_job_that_fails_to_start_leaves_no_group() {
    let f = fakes();
    let pool = pool_name("nostart");
    let mut node = Node::new(settings(&pool, PolicyKind::Cosched), f.env.clone()).unwrap();
    let mut ids = Vec::new();
    for k in 0..20 {
        let name = format!("bad{k}");
        let mut l = launch(&pool, &name, "exit 0");
        l.command = vec!["sh\0x".into()];
        ids.push(node.add_job(spec(&name), l).unwrap());
    }
    step_until(&mut node, |n| {
        ids.iter()
            .all(|j| n.result(*j).is_some_and(|r| r.finish_s.is_some()))
    });
    for j in &ids {
        let r = node.result(*j).unwrap();
        assert!(r.start_s.is_none() && r.error.is_some(), "{r:?}");
    }
    assert_eq!(
        f.cgroups.live(),
        vec![GroupPath::new(&pool).unwrap()],
        "groups left by jobs that never started"
    );
    drop(node);
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}

/// A job whose memory is locked stays in the pool while suspended: the
/// switch to a job that does not fit beside it holds that job stopped
/// (it would thrash) instead of running it, says why, and runs it once
/// the locked memory is gone.
#[test]
fn a_switch_into_locked_memory_is_held_until_it_is_gone() {
    let f = fakes();
    let pool = pool_name("pinned");
    let mut node = Node::new(settings(&pool, PolicyKind::Gang), f.env.clone()).unwrap();
    let a_group = GroupPath::new(&format!("{pool}/job-a")).unwrap();
    let b_group = GroupPath::new(&format!("{pool}/job-b")).unwrap();
    f.cgroups
        .pinned
        .lock()
        .unwrap()
        .insert(a_group.clone(), 200 << 20);
    let a = node
        .add_job(spec("a"), launch(&pool, "a", "sleep 1"))
        .unwrap();
    let b_spec = JobSpec {
        memory_bytes: Some(100 << 20),
        ..spec("b")
    };
    let b = node.add_job(b_spec, launch(&pool, "b", "sleep 2")).unwrap();
    step_until(&mut node, |n| n.held(b).is_some());
    let why = node.held(b).unwrap().to_string();
    assert!(why.contains("200M") && why.contains("locked"), "{why}");
    assert_eq!(node.pinned(a), 200 << 20);
    step_until(&mut node, |n| {
        status(n, b) == memgang_core::JobStatus::Finished
    });
    let log = f.log.lines();
    let at = |what: &str| log.iter().position(|l| *l == what);
    let gone = at(&format!("remove {a_group}")).expect("a's group removed");
    let ran = log
        .iter()
        .position(|l| *l == format!("thaw {b_group}"))
        .expect("b thawed");
    assert!(ran > gone, "b ran beside a's locked memory: {log:?}");
    assert!(at(&format!("freeze {b_group}")).is_some(), "{log:?}");
    let r = node.finish();
    assert!(r.jobs.iter().all(|j| j.ok()), "{:?}", r.jobs);
}

/// Paging that notes, at each call, what the node's switch watch says.
#[derive(Debug)]
struct WatchedPaging {
    inner: FakePaging,
    watch: std::sync::OnceLock<SwitchWatch>,
    seen: Mutex<Vec<SwitchNow>>,
}

impl memgang_linux::paging::Paging for WatchedPaging {
    fn record(&self, pid: i32) -> memgang_linux::Result<memgang_linux::paging::PageRecord> {
        self.inner.record(pid)
    }
    fn page_out(&self, pid: i32, runs: &[memgang_linux::runs::Run]) -> memgang_linux::Result<u64> {
        self.note();
        self.inner.page_out(pid, runs)
    }
    fn page_in(&self, record: &memgang_linux::paging::PageRecord) -> memgang_linux::Result<u64> {
        self.note();
        self.inner.page_in(record)
    }
}

impl WatchedPaging {
    fn note(&self) {
        if let Some(w) = self.watch.get() {
            let now = w.lock().unwrap().clone();
            self.seen.lock().unwrap().push(now);
        }
    }
}

/// What a display reads while a gang pair switches: the switch and the
/// jobs it pages out and in while it pages them, nothing between
/// switches; each job's last sampled memory and its share of the turns.
#[test]
fn a_reader_sees_what_a_switch_pages_and_each_jobs_share() {
    let mut f = fakes();
    let paging = Arc::new(WatchedPaging {
        inner: FakePaging { log: f.log.clone() },
        watch: std::sync::OnceLock::new(),
        seen: Mutex::new(Vec::new()),
    });
    f.env.paging = paging.clone();
    let pool = pool_name("watch");
    let exp = experiment(
        &pool,
        "gang",
        "ao/ai",
        &[("a", "sleep 0.6"), ("b", "sleep 0.6")],
    );
    let mut node = Node::new(exp.settings, f.env.clone()).unwrap();
    paging.watch.set(node.switch_watch()).unwrap();
    let ids: Vec<JobId> = (exp.jobs.into_iter())
        .map(|(spec, launch)| node.add_job(spec, launch).unwrap())
        .collect();
    step_until(&mut node, |n| n.switches().len() >= 3);
    for &j in &ids {
        let share = node.run_share(j).unwrap();
        // Two jobs taking turns of 100 ms: about half each.
        assert!((0.2..=0.8).contains(&share), "{share}");
        // What the last sample read (the fake's make-room takes it away).
        assert!(node.memory(j).is_some_and(|m| m.0 <= JOB_ANON));
    }
    assert_eq!(*node.switch_watch().lock().unwrap(), SwitchNow::default());
    let seen = paging.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for s in &seen {
        assert!(s.since.is_some(), "{seen:?}");
        assert_eq!(s.paging_out.len() + s.paging_in.len(), 1, "{seen:?}");
    }
    assert!(seen.iter().any(|s| s.paging_out.len() == 1), "{seen:?}");
    // A job comes back after the other went out.
    assert!(
        seen.iter()
            .any(|s| s.paging_in.len() == 1 && s.paged_out.len() == 1),
        "{seen:?}"
    );
    step_until(&mut node, |n| {
        ids.iter()
            .all(|j| status(n, *j) == memgang_core::JobStatus::Finished)
    });
    node.finish();
    assert!(f.cgroups.live().is_empty(), "{:?}", f.cgroups.live());
}
