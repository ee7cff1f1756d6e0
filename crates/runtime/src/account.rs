//! Where a job's time goes, measured: the time account of each job and of
//! the run (issue 36; the schema and the definitions are in
//! docs/results.md).
//!
//! A job's wall time, from its start to its end, is split into
//! * `cpu`, `run_queue`, `io_wait`: what the kernel's scheduler says of
//!   its tasks (threads of all its processes), from each task's exit
//!   record (taskstats, [`memgang_linux::taskstats::Listener`]): time on a
//!   CPU, runnable but waiting for one, asleep in I/O wait. These three
//!   are disjoint states of a task;
//! * `frozen`, `switch_out`, `switch_in`: memgang's own clock: the time
//!   between its freeze and its thaw, the part of it inside the switch
//!   that froze it (its page-out) and inside the one that thawed it (its
//!   page-in);
//! * `unaccounted`: the rest, i.e. the job's own sleeps and whatever no
//!   counter saw.
//!
//! The kernel's counters run on while a job is frozen: a freeze that
//! catches a task asleep in an I/O wait (a swap-in fault) leaves its wait
//! open, and the kernel adds it, frozen time included, when the thaw
//! wakes the task; a task still on its way into the freezer computes a
//! little after memgang's clock stopped it. So each thread of the job is
//! sampled (taskstats' `TASKSTATS_CMD_GET` by pid) right after each
//! freeze and right after each thaw, and what its counters grew by in
//! between is the frozen time's (`*_while_frozen_s`), taken out of the
//! running parts. A wait open across the freeze is all counted as frozen,
//! its part before the freeze (under a millisecond to a fraction of a
//! second) included.
//!
//! This kernel also adds block-I/O delays no wait can have had (a task
//! blocked by delayed dequeue has its wait's start stamped on another,
//! docs/realapps.md): 24437.82 s to one thread frozen 60 s in all. Each
//! thread's block-I/O delay, CPU and run-queue time are read every
//! [`IO_EVERY`] while the job runs (with its state), at its freeze and at
//! its thaw, and its exit record comes at its end; growth its other states
//! leave no room for is left out of the thread's totals, frozen and
//! running alike, shown as `io_wait_dropped_s`, and the stretch it came in
//! as `io_wait_untrusted_s` (`crate::iowait` has the rule).
//!
//! Beside the time, each job's software perf counters (faults, context
//! switches, migrations, CPU clock) and, where the machine has a PMU, its
//! hardware ones; its anonymous huge pages (its cgroup's counter,
//! [`MemoryStat::anon_huge_bytes`](memgang_linux::cgroup::MemoryStat)) at
//! the end of each quantum (before its page-out) and at every sample while
//! it runs; and the machine's mTHP counters over its life.
//!
//! A job with several tasks can be on several CPUs at once: each per-task
//! sum is divided by its `width`, the mean number of its tasks active at
//! once (on a CPU, queued or in I/O wait) over its running time, at least
//! one. A job with one busy task (on a CPU for more than 5% of its running
//! time) has width 1: a single thread is counted one to one, and a
//! launcher or shell that only waits for its children (mpirun, `sh -c`)
//! does not widen it. For a job wider than 1 the parts are its
//! task-time's shares of its running time, and `unaccounted` is 0 by
//! construction: its threads' own sleeps are not shown.
//!
//! Why exit records, not queries: a task's counters go when it is reaped,
//! and a query on a zombie by its TGID counts nothing of a
//! single-threaded process (taskstats.rs's root test). The listener gets
//! every thread's final counters as it exits, children included; a job's
//! tasks are those of its first process, of the processes its cgroup still
//! held at its end, and, transitively, of every process whose parent was
//! one of them when it exited.

use crate::iowait::{corrected, IoReadings};
use crate::results::{HugeStat, HwCounts, Interval, JobAccount, JobResult, SwCounts, Switch};
pub use crate::tally::{apply_batch, job_account, run_account, Accrued};
use memgang_linux::perf::{Counters, Event};
use memgang_linux::taskstats::{DelayAcct, Listener, Querier, Record, TaskStats};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a finished job's account waits for the exit records of its
/// first process and leftovers: the kernel sends them before the parent
/// can reap, so they are normally there already.
const RECORD_WAIT: Duration = Duration::from_millis(500);
/// How long before its recorded start a job's process may have exited
/// (the start is recorded after the launch returns).
const START_GRACE_S: f64 = 0.5;
/// How often a running job's threads' block-I/O delays are read. The
/// readings only bound each growth (the module's doc); once a second keeps
/// them to one taskstats query per thread per second (a 64-thread job: 64
/// netlink round trips), and a growth dropped while it runs takes with it
/// only the real waits that ended in that second.
const IO_EVERY: Duration = Duration::from_secs(1);
/// Threads of a job read at most per sample, one netlink round trip each:
/// a job that starts tens of thousands of threads must not stretch every
/// switch by as many. Beyond them, a thread's frozen-time counters stay in
/// the running parts and its impossible delays are kept.
const MAX_THREADS: usize = 1024;
/// Records kept at most (about 200 bytes each: 50 MiB), for a node whose
/// jobs run for days with other processes exiting around them; beyond it
/// they count as lost.
const MAX_RECORDS: usize = 1 << 18;

#[derive(Default)]
struct Collected {
    /// Each task's exit record and when it came (s since the node's start).
    records: Vec<(f64, TaskStats)>,
    /// Records the kernel could not deliver, and those over [`MAX_RECORDS`].
    lost: u64,
    overflow: u64,
}

struct Started {
    pid: i32,
    start_s: f64,
    counters: Option<Counters>,
    soft: Option<Counters>,
    /// Each thread's counters at its last freeze, while it is frozen.
    frozen_at: Option<HashMap<u32, TaskStats>>,
    io: IoReadings,
    while_frozen: Accrued,
    /// Huge pages at each quantum's end, and while running.
    huge_quantum_end: HugeAcc,
    huge_running: HugeAcc,
    mthp_start: Mthp,
}

/// A job's counters while it runs, before its account: its software perf
/// counters (None where the kernel refused them) and its huge-page
/// readings so far. An ended job's are its account's ([`Live::from`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    pub sw: Option<SwCounts>,
    pub anon_huge_running: Option<HugeStat>,
    pub anon_huge_quantum_end: Option<HugeStat>,
}

impl From<&JobAccount> for Live {
    fn from(a: &JobAccount) -> Live {
        Live {
            sw: a.sw.clone(),
            anon_huge_running: a.anon_huge_running.clone(),
            anon_huge_quantum_end: a.anon_huge_quantum_end.clone(),
        }
    }
}

/// The machine's mTHP event counters: size -> counter -> value.
type Mthp = BTreeMap<String, BTreeMap<String, u64>>;

/// /sys/kernel/mm/transparent_hugepage/hugepages-*/stats, counters only
/// (`nr_*` are gauges). Empty where the kernel has none.
fn read_mthp() -> Mthp {
    let mut out = Mthp::new();
    let Ok(dir) = std::fs::read_dir("/sys/kernel/mm/transparent_hugepage") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(size) = name.strip_prefix("hugepages-") else {
            continue;
        };
        let Ok(stats) = std::fs::read_dir(e.path().join("stats")) else {
            continue;
        };
        for st in stats.flatten() {
            let key = st.file_name().to_string_lossy().into_owned();
            if key.starts_with("nr_") {
                continue;
            }
            if let Some(v) = std::fs::read_to_string(st.path())
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
            {
                out.entry(size.to_string()).or_default().insert(key, v);
            }
        }
    }
    out
}

/// What grew from `a` to `b`, nonzero only.
fn mthp_delta(a: &Mthp, b: &Mthp) -> Mthp {
    let mut out = Mthp::new();
    for (size, counters) in b {
        for (k, v) in counters {
            let was = a.get(size).and_then(|c| c.get(k)).copied().unwrap_or(0);
            if *v > was {
                out.entry(size.clone())
                    .or_default()
                    .insert(k.clone(), v - was);
            }
        }
    }
    out
}

/// Readings of a job's huge pages, summed as they come: a job that runs
/// for days is read every second, so the readings are not kept.
#[derive(Clone, Copy, Debug, Default)]
struct HugeAcc {
    samples: u32,
    sum: u128,
    min: u64,
    max: u64,
}

impl HugeAcc {
    fn push(&mut self, v: Option<u64>) {
        let Some(v) = v else { return };
        self.min = if self.samples == 0 {
            v
        } else {
            self.min.min(v)
        };
        self.max = self.max.max(v);
        self.sum += u128::from(v);
        self.samples = self.samples.saturating_add(1);
    }

    fn stat(&self) -> Option<HugeStat> {
        (self.samples > 0).then(|| HugeStat {
            samples: self.samples,
            mean_bytes: (self.sum / u128::from(self.samples)) as u64,
            min_bytes: self.min,
            max_bytes: self.max,
        })
    }
}

/// Collects the exit records and hardware counters of a node's jobs.
pub struct Tracker {
    /// The node's start: exit records are stamped in seconds since.
    t0: Instant,
    collected: Arc<Mutex<Collected>>,
    /// The earliest start of a job still running (f64 bits; infinite with
    /// none): records from before it are no job's, and are not kept.
    oldest: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    _delayacct: Option<Arc<DelayAcct>>,
    /// None: exit records come; Some: why not.
    no_delays: Option<String>,
    /// None: counters attach; Some: why not (said once, not tried again).
    no_hw: Option<String>,
    no_sw: Option<String>,
    /// For the freeze and thaw samples; None without taskstats.
    querier: Option<Querier>,
    jobs: HashMap<usize, Started>,
}

impl Tracker {
    /// Turn delay accounting on and listen for exit records from now on;
    /// without root or taskstats the accounts say why and keep what
    /// rusage gives.
    pub fn start(t0: Instant) -> Tracker {
        let delayacct = DelayAcct::shared();
        let listener = Listener::register();
        let collected = Arc::new(Mutex::new(Collected::default()));
        let oldest = Arc::new(AtomicU64::new(f64::INFINITY.to_bits()));
        let stop = Arc::new(AtomicBool::new(false));
        let (no_delays, thread, delayacct) = match (delayacct, listener) {
            (Ok(d), Ok(mut l)) => {
                let (c, s, o) = (collected.clone(), stop.clone(), oldest.clone());
                let thread = std::thread::Builder::new()
                    .name("memgang-taskstats".into())
                    .spawn(move || {
                        while !s.load(Ordering::Relaxed) {
                            let got = l.recv(Duration::from_millis(100));
                            let t = t0.elapsed().as_secs_f64();
                            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                            let from =
                                f64::from_bits(o.load(Ordering::Relaxed)) - 2.0 * START_GRACE_S;
                            c.records.retain(|(at, _)| *at >= from);
                            if t < from {
                                continue;
                            }
                            c.lost = l.lost;
                            match got {
                                Ok(records) => {
                                    for r in records {
                                        if let Record::Pid(stats) = r {
                                            if c.records.len() < MAX_RECORDS {
                                                c.records.push((t, stats));
                                            } else {
                                                c.overflow += 1;
                                            }
                                        }
                                    }
                                }
                                Err(e) => {
                                    tracing::warn!("taskstats: {e}");
                                    std::thread::sleep(Duration::from_millis(100));
                                }
                            }
                        }
                    })
                    .ok();
                (None, thread, Some(d))
            }
            (Err(e), _) => (Some(format!("rusage only: {e}")), None, None),
            (_, Err(e)) => (Some(format!("rusage only: {e}")), None, None),
        };
        if let Some(why) = &no_delays {
            tracing::info!("no delay accounting: {why}");
        }
        let querier = if no_delays.is_none() {
            Querier::open()
                .map_err(|e| tracing::warn!("no freeze and thaw samples: {e}"))
                .ok()
        } else {
            None
        };
        Tracker {
            t0,
            collected,
            oldest,
            stop,
            thread,
            _delayacct: delayacct,
            no_delays,
            no_hw: None,
            no_sw: None,
            querier,
            jobs: HashMap::new(),
        }
    }

    /// A job's first process `pid` started at `start_s`, `others` the rest
    /// of its cgroup's processes now: its counters attach now, to all of
    /// them (see `Counters::attach_tree`).
    pub fn started(&mut self, job: usize, pid: i32, others: &[i32], start_s: f64) {
        let counters = attach(pid, others, &Event::HARDWARE, &mut self.no_hw);
        let soft = attach(pid, others, &Event::SOFTWARE, &mut self.no_sw);
        self.jobs.insert(
            job,
            Started {
                pid,
                start_s,
                counters,
                soft,
                frozen_at: None,
                // Its processes were launched a moment before this call.
                io: IoReadings::new(
                    Instant::now()
                        .checked_sub(Duration::from_secs_f64(START_GRACE_S))
                        .unwrap_or_else(Instant::now),
                ),
                while_frozen: Accrued::default(),
                huge_quantum_end: HugeAcc::default(),
                huge_running: HugeAcc::default(),
                mthp_start: read_mthp(),
            },
        );
        self.update_oldest();
    }

    /// The counters of each thread of processes `pids`; those that could
    /// not be read (gone meanwhile) are left out.
    fn sample(&self, pids: &[i32]) -> HashMap<u32, TaskStats> {
        self.sample_threads(
            pids.iter()
                .flat_map(|&p| memgang_linux::process::threads(p).unwrap_or_default())
                .take(MAX_THREADS)
                .map(|t| t as u32),
        )
    }

    /// The counters of threads `tids`, as [`Tracker::sample`].
    fn sample_threads(&self, tids: impl Iterator<Item = u32>) -> HashMap<u32, TaskStats> {
        let Some(q) = &self.querier else {
            return HashMap::new();
        };
        tids.filter_map(|t| Some((t, q.query(t, false).ok()??)))
            .collect()
    }

    /// Job `job` was just frozen with processes `pids` (its quantum's
    /// end): their counters now, and its huge pages (`huge`, bytes; None
    /// where its cgroup does not count them).
    pub fn frozen(&mut self, job: usize, pids: &[i32], huge: Option<u64>) {
        if !self.jobs.contains_key(&job) {
            return;
        }
        let now = self.sample(pids);
        let s = self.jobs.get_mut(&job).expect("checked");
        // What grew while it ran is its running stretch's: read here only
        // for the growth no wait can have had. No states: frozen threads
        // read as `D`.
        let at = Instant::now();
        s.io.read(at, &now, &HashSet::new());
        s.io.froze(at);
        s.frozen_at = Some(now);
        s.huge_quantum_end.push(huge);
    }

    /// Job `job` was just thawed: what its threads' counters grew by
    /// since its freeze is the frozen time's. The threads are those
    /// sampled at the freeze: a frozen job cannot start any, so no list
    /// is needed again.
    pub fn thawed(&mut self, job: usize) {
        let Some(before) = self.jobs.get_mut(&job).and_then(|s| s.frozen_at.take()) else {
            return;
        };
        let now = self.sample_threads(before.keys().copied());
        let s = self.jobs.get_mut(&job).expect("checked");
        let w = &mut s.while_frozen;
        for (tid, b) in &before {
            let Some(a) = now.get(tid) else { continue };
            w.cpu_ns += a.cpu_ns.saturating_sub(b.cpu_ns);
            w.cpu_delay_ns += a.cpu_delay_ns.saturating_sub(b.cpu_delay_ns);
        }
        let at = Instant::now();
        w.blkio_ns += s.io.read(at, &now, &HashSet::new());
        s.io.thawed(at);
        w.samples += 1;
    }

    /// A running (not frozen) job's sample: its huge pages now (`huge`,
    /// bytes) and, every [`IO_EVERY`], the block-I/O delays of the threads
    /// of its processes (`pids`, listed only then), for the growth no wait
    /// can have had.
    pub fn running(&mut self, job: usize, pids: impl FnOnce() -> Vec<i32>, huge: Option<u64>) {
        let Some(s) = self.jobs.get_mut(&job) else {
            return;
        };
        s.huge_running.push(huge);
        if s.io.read_at().elapsed() < IO_EVERY {
            return;
        }
        let now = self.sample(&pids());
        let at = Instant::now();
        let awake: HashSet<u32> = now
            .keys()
            .copied()
            .filter(|&t| {
                memgang_linux::process::state(t as i32).is_some_and(|c| c != 'D' && c != 'R')
            })
            .collect();
        let s = self.jobs.get_mut(&job).expect("checked");
        s.io.read(at, &now, &awake);
    }

    /// A running job's counters so far (its time account comes at its
    /// end): None for a job not running here.
    pub fn live(&self, job: usize) -> Option<Live> {
        let s = self.jobs.get(&job)?;
        Some(Live {
            sw: s.soft.as_ref().map(sw_counts),
            anon_huge_running: s.huge_running.stat(),
            anon_huge_quantum_end: s.huge_quantum_end.stat(),
        })
    }

    fn update_oldest(&self) {
        let oldest = self
            .jobs
            .values()
            .map(|s| s.start_s)
            .fold(f64::INFINITY, f64::min);
        self.oldest.store(oldest.to_bits(), Ordering::Relaxed);
    }

    /// The account of a job that has ended (its processes gone, its
    /// result's times set): `leftovers` are the processes its cgroup held
    /// at its end; `timeline` and `switches` are the node's so far.
    pub fn finish(
        &mut self,
        job: usize,
        r: &JobResult,
        leftovers: &[i32],
        timeline: &[Interval],
        switches: &[Switch],
    ) -> Option<JobAccount> {
        let started = self.jobs.remove(&job)?;
        let (start, finish) = (r.start_s?, r.finish_s?);
        let hw = started.counters.as_ref().map(|c| {
            let mut h = HwCounts::default();
            for (e, n) in c.read() {
                match e {
                    Event::Cycles => h.cycles = n,
                    Event::Instructions => h.instructions = n,
                    Event::LlcMisses => h.llc_misses = n,
                    Event::DtlbMisses => h.dtlb_misses = n,
                    _ => {}
                }
            }
            h
        });
        let sw = started.soft.as_ref().map(sw_counts);
        let (tasks, lost) = if self.no_delays.is_none() {
            self.take_tasks(started.pid, leftovers, start)
        } else {
            (Vec::new(), 0)
        };
        let mut io = started.io;
        let tasks = corrected(tasks, &mut io, self.t0);
        let mut while_frozen = started.while_frozen;
        while_frozen.untrusted_ns = io.untrusted_ns();
        while_frozen.blkio_dropped_ns = std::mem::take(&mut io.dropped);
        let running: Vec<(f64, f64)> = timeline
            .iter()
            .filter(|i| i.job == r.name)
            .map(|i| (i.start_s, i.end_s))
            .collect();
        let around = |mine: fn(&Switch) -> &Vec<String>| -> Vec<(f64, f64)> {
            switches
                .iter()
                .filter(|s| mine(s).contains(&r.name))
                .map(|s| (s.at_s, s.at_s + s.took_s))
                .collect()
        };
        let (outs, ins) = (around(|s| &s.suspended), around(|s| &s.resumed));
        let user = r.cpu_s - r.system_cpu_s.unwrap_or(0.0);
        let mut a = job_account(
            (start, finish),
            &tasks,
            &running,
            &outs,
            &ins,
            (user, r.system_cpu_s.unwrap_or(0.0)),
            while_frozen,
            self.no_delays.clone(),
        );
        a.hw = hw;
        a.hw_missing = self.no_hw.clone();
        a.sw = sw;
        a.sw_missing = self.no_sw.clone();
        a.anon_huge_quantum_end = started.huge_quantum_end.stat();
        a.anon_huge_running = started.huge_running.stat();
        a.mthp = mthp_delta(&started.mthp_start, &read_mthp());
        a.records_lost = lost;
        // Records older than every job still running are of no use.
        self.update_oldest();
        Some(a)
    }

    /// The exit records of the job whose first process is `pid`: waits
    /// (up to [`RECORD_WAIT`]) for those of `pid` and `leftovers`.
    fn take_tasks(
        &self,
        pid: i32,
        leftovers: &[i32],
        start_s: f64,
    ) -> (Vec<(f64, TaskStats)>, u64) {
        // Its first process was started a moment before it was recorded.
        let start_s = start_s - START_GRACE_S;
        let want: HashSet<u32> = std::iter::once(pid)
            .chain(leftovers.iter().copied())
            .map(|p| p as u32)
            .collect();
        let deadline = Instant::now() + RECORD_WAIT;
        loop {
            let c = self.collected.lock().unwrap_or_else(|e| e.into_inner());
            let have: HashSet<u32> = c
                .records
                .iter()
                .filter(|(t, s)| *t >= start_s && s.pid == s.tgid)
                .map(|(_, s)| s.pid)
                .collect();
            if want.is_subset(&have) || Instant::now() > deadline {
                let tasks = job_tasks(&c.records, &want, start_s);
                return (tasks, c.lost + c.overflow);
            }
            drop(c);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A job's software perf counters as they read now.
fn sw_counts(c: &Counters) -> SwCounts {
    let mut w = SwCounts::default();
    for (e, n) in c.read() {
        match e {
            Event::TaskClock => w.task_clock_ns = n,
            Event::CpuClock => w.cpu_clock_ns = n,
            Event::PageFaults => w.page_faults = n,
            Event::MinorFaults => w.minor_faults = n,
            Event::MajorFaults => w.major_faults = n,
            Event::ContextSwitches => w.context_switches = n,
            Event::CpuMigrations => w.cpu_migrations = n,
            _ => {}
        }
    }
    w
}

/// Counters of `events` on `pid` and `others`, unless the kernel refused
/// them before (`refused`: why, said once and not tried again).
fn attach(
    pid: i32,
    others: &[i32],
    events: &[Event],
    refused: &mut Option<String>,
) -> Option<Counters> {
    if refused.is_some() {
        return None;
    }
    match Counters::attach_tree(pid, others, events) {
        Ok(c) => Some(c),
        Err(why) => {
            tracing::info!("no {} counters: {why}", events[0].name());
            *refused = Some(why);
            None
        }
    }
}

/// The records of a job's tasks: those of the thread groups `seeds`, and
/// of every process whose parent was one of them when it exited, and so on.
/// Records from before the job's start are another process's (a pid used
/// again).
fn job_tasks(
    records: &[(f64, TaskStats)],
    seeds: &HashSet<u32>,
    start_s: f64,
) -> Vec<(f64, TaskStats)> {
    let mine: Vec<&(f64, TaskStats)> = records.iter().filter(|(t, _)| *t >= start_s).collect();
    let mut groups = seeds.clone();
    loop {
        let more: Vec<u32> = mine
            .iter()
            .filter(|(_, s)| !groups.contains(&s.tgid) && groups.contains(&s.ppid))
            .map(|(_, s)| s.tgid)
            .collect();
        if more.is_empty() {
            break;
        }
        groups.extend(more);
    }
    mine.into_iter()
        .filter(|(_, s)| groups.contains(&s.tgid))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(pid: u32, tgid: u32, ppid: u32, life_s: f64, cpu_s: f64, runq_s: f64) -> TaskStats {
        TaskStats {
            pid,
            tgid,
            ppid,
            etime_us: (life_s * 1e6) as u64,
            cpu_ns: (cpu_s * 1e9) as u64,
            cpu_delay_ns: (runq_s * 1e9) as u64,
            ..TaskStats::default()
        }
    }

    #[test]
    fn a_jobs_tasks_are_its_threads_and_its_childrens() {
        let records = vec![
            (0.5, task(9, 9, 1, 1.0, 1.0, 0.0)), // before the job: a reused pid
            (2.0, task(11, 10, 5, 1.0, 1.0, 0.0)), // a thread of the job's 10
            (2.0, task(20, 20, 10, 1.0, 1.0, 0.0)), // its child
            (2.0, task(30, 30, 20, 1.0, 1.0, 0.0)), // its grandchild
            (2.0, task(40, 40, 7, 1.0, 1.0, 0.0)), // someone else's
            (3.0, task(10, 10, 5, 1.0, 1.0, 0.0)),
        ];
        let seeds = HashSet::from([10, 9]);
        let mut pids: Vec<u32> = job_tasks(&records, &seeds, 1.0)
            .iter()
            .map(|(_, t)| t.pid)
            .collect();
        pids.sort();
        assert_eq!(pids, [10, 11, 20, 30]);
    }

    #[test]
    fn huge_page_readings_are_summed_not_kept() {
        let mut h = HugeAcc::default();
        assert_eq!(h.stat(), None);
        h.push(None);
        assert_eq!(
            h.stat(),
            None,
            "a reading the cgroup did not give is no reading"
        );
        for v in [6 << 20, 2 << 20, 4 << 20] {
            h.push(Some(v));
        }
        assert_eq!(
            h.stat(),
            Some(HugeStat {
                samples: 3,
                mean_bytes: 4 << 20,
                min_bytes: 2 << 20,
                max_bytes: 6 << 20,
            })
        );
    }

    #[test]
    fn the_parts_add_up_to_the_wall_time() {
        // One thread from 0 to 10 s: running 0-4 and 6-10, frozen 4-6, of
        // which 4-4.5 in the switch that froze it and 5.5-6 in the one that
        // thawed it. The kernel: 7 s on a CPU, 0.5 s queued, 0.3 s I/O.
        let t = [task(1, 1, 0, 10.0, 7.0, 0.5)];
        let mut t0 = t[0];
        t0.blkio_delay_ns = 300_000_000;
        let a = job_account(
            (0.0, 10.0),
            &[t0],
            &[(0.0, 4.0), (6.0, 10.0)],
            &[(3.9, 4.5)],
            &[(5.5, 6.1)],
            (6.5, 0.5),
            Accrued::default(),
            None,
        );
        assert_eq!(a.source, "taskstats");
        assert!((a.switch_out_s - 0.5).abs() < 1e-9, "{a:?}");
        assert!((a.switch_in_s - 0.5).abs() < 1e-9, "{a:?}");
        assert!((a.frozen_s - 1.0).abs() < 1e-9, "{a:?}");
        assert!((a.unaccounted_s - 0.2).abs() < 1e-6, "{a:?}");
        let sum: f64 = a.parts().iter().map(|p| p.1).sum();
        assert!((sum - a.wall_s).abs() < 1e-9);
        // Two threads computing the whole time count half each; a third
        // that only waits for them (a launcher) does not widen the job.
        let three = [
            task(1, 1, 0, 10.0, 9.0, 1.0),
            task(2, 1, 0, 10.0, 9.0, 1.0),
            task(3, 3, 0, 10.0, 0.0, 0.0),
        ];
        let b = job_account(
            (0.0, 10.0),
            &three,
            &[(0.0, 10.0)],
            &[],
            &[],
            (18.0, 0.0),
            Accrued::default(),
            None,
        );
        assert!((b.width - 2.0).abs() < 1e-9, "{b:?}");
        assert!((b.cpu_s - 9.0).abs() < 1e-9, "{b:?}");
        assert!(b.unaccounted_s.abs() < 1e-9);
        // One busy task whose parts exceed its running time: not widened,
        // the over-count shows.
        let over = [task(1, 1, 0, 10.0, 6.0, 4.1)];
        let o = job_account(
            (0.0, 10.0),
            &over,
            &[(0.0, 10.0)],
            &[],
            &[],
            (6.0, 0.0),
            Accrued::default(),
            None,
        );
        assert_eq!(o.width, 1.0);
        assert!((o.unaccounted_s + 0.1).abs() < 1e-6, "{o:?}");
        // The same task whose counters grew by 1.5 s of I/O wait and 0.1 s
        // of CPU while frozen 4-6 (measured at the freeze and the thaw):
        // that is the freeze's, and the running parts keep the rest.
        let mut t1 = t0;
        t1.blkio_delay_ns += 1_500_000_000;
        t1.cpu_ns += 100_000_000;
        let grew = Accrued {
            cpu_ns: 100_000_000,
            blkio_ns: 1_500_000_000,
            samples: 1,
            ..Accrued::default()
        };
        let f = job_account(
            (0.0, 10.0),
            &[t1],
            &[(0.0, 4.0), (6.0, 10.0)],
            &[(3.9, 4.5)],
            &[(5.5, 6.1)],
            (6.6, 0.5),
            grew,
            None,
        );
        assert!((f.io_wait_s - 0.3).abs() < 1e-6, "{f:?}");
        assert!((f.cpu_s - 7.0).abs() < 1e-6, "{f:?}");
        assert!((f.io_wait_while_frozen_s - 1.5).abs() < 1e-6, "{f:?}");
        assert!((f.cpu_while_frozen_s - 0.1).abs() < 1e-6, "{f:?}");
        assert!((f.unaccounted_s - a.unaccounted_s).abs() < 1e-6, "{f:?}");
        // A thread frozen 4-6 that the kernel gives 24437.8 s of block-I/O
        // delay at the thaw, 6 s after the job started: impossible, so
        // left out of its exit record, frozen and running alike; its real
        // 0.3 s of I/O wait stays (dropping the whole record as longer
        // than its life would lose it).
        let mut end = t0;
        end.blkio_delay_ns += 24_437_800_000_000;
        let now = Instant::now();
        let mut read = IoReadings::new(now);
        read.dropped.insert(1, 24_437_800_000_000);
        let fixed = corrected(vec![(9.0, end)], &mut read, now);
        let odd = Accrued {
            blkio_dropped_ns: read.dropped.clone(),
            samples: 1,
            ..Accrued::default()
        };
        let d = job_account(
            (0.0, 10.0),
            &fixed,
            &[(0.0, 4.0), (6.0, 10.0)],
            &[(3.9, 4.5)],
            &[(5.5, 6.1)],
            (6.5, 0.5),
            odd,
            None,
        );
        assert!((d.io_wait_s - 0.3).abs() < 1e-6, "{d:?}");
        assert_eq!(d.io_wait_while_frozen_s, 0.0, "{d:?}");
        assert!((d.io_wait_dropped_s - 24_437.8).abs() < 1e-3, "{d:?}");
        assert!((d.unaccounted_s - a.unaccounted_s).abs() < 1e-6, "{d:?}");
        // Without records: rusage's CPU, the rest unaccounted.
        let c = job_account(
            (0.0, 10.0),
            &[],
            &[(0.0, 10.0)],
            &[],
            &[],
            (8.0, 1.0),
            Accrued::default(),
            Some("x".into()),
        );
        assert_eq!(
            (c.cpu_s, c.unaccounted_s, c.source.as_str()),
            (9.0, 1.0, "x")
        );
    }
}
