//! The executor: carries a core policy's actions out on real processes on
//! the real clock, and records what happened.
//!
//! One thread. The loop wakes when a job's first process exits (its pidfd
//! becomes readable), when the scheduler's next timer or arrival is due, or
//! when the next counter sample is; it never busy-waits.

use crate::experiment::Experiment;
use crate::mechanisms::{self, BgWriter, SwitchPoint, SwitchSampler};
use crate::procs::{self, Exit, Launched};
use crate::results::{
    Interval, JobResult, JobSample, Machine, RunResult, Sample, Switch, SCHEMA_VERSION,
};
use anyhow::{Context, Result};
use memgang_core::{
    Action, Cluster, Event, JobId, JobStatus, NodeId, PageInPlan, PageOutPlan, Scheduler,
};
use memgang_linux::cgroup::{CgroupBackend, GroupPath, MemoryStat};
use memgang_linux::counters::{Psi, SwapStatus, VmStat};
use memgang_linux::freeze::Freezer;
use memgang_linux::paging::{self, PageRecord, Run as PageRun};
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lines of a failed job's stderr kept in the results: enough for an error
/// message and a short backtrace, small enough for a table.
const STDERR_TAIL_LINES: usize = 10;
/// Node memory PSI "some" avg10 (%) from which the node counts as under
/// memory pressure: tasks stalled on memory a tenth of the time is paging
/// that costs the jobs real progress, well above the background reclaim a
/// healthy node shows (0% on this machine when idle).
const PRESSURE_PSI_SOME: f64 = 10.0;
/// Memory made free beyond an incoming job's working-set estimate: its
/// page tables, the per-CPU charge caches of the memory cgroup (64 pages
/// per CPU) and what the job touches beyond last quantum's working set.
/// About 3% of a 1 GiB pool.
const ROOM_MARGIN: u64 = 32 << 20;
/// Swap left free when memgang pages out itself, so that the kernel's own
/// reclaim (other cgroups, other jobs) still finds room and does not turn
/// to the OOM killer.
const SWAP_RESERVE: u64 = 64 << 20;
/// Memory left resident after an aggressive page-out that is reported:
/// page tables, the runtime's own stacks and buffers stay anyway (a few
/// MiB); more than this, and more than a tenth of the job, is memory the
/// kernel would not page out.
const RESIDUAL_REPORTED: u64 = 16 << 20;
/// A running job's peak resident memory is reported to the policy
/// (`Event::JobMemory`) each time it has grown by this much: fine enough
/// for packing (whose per-job overhead is 4 MiB), coarse enough that a
/// growing job does not send an event every sample.
const MEMORY_REPORT_STEP: u64 = 4 << 20;

pub struct Env {
    pub backend: Arc<dyn CgroupBackend>,
    pub freezer: Box<dyn Freezer>,
    pub machine: Machine,
    pub logs: PathBuf,
    pub stop: Arc<AtomicBool>,
    pub progress: indicatif::ProgressBar,
}

struct JobRun {
    group: GroupPath,
    /// Resident runs of each of its processes at its last page-out.
    records: Vec<PageRecord>,
    /// Working-set estimate: its resident anonymous memory when it was
    /// last suspended, i.e. what it kept in memory over its last quantum
    /// (paper 000 §3.2). None before its first suspension.
    ws_bytes: Option<u64>,
    /// Background writer of its pages while in its quantum's last part.
    bg: Option<BgWriter>,
    /// A page-in of part of its records started before it resumes
    /// (overlapped with a page-out, or a prefetch); its resume waits for it.
    early: Option<JoinHandle<mechanisms::PageInDone>>,
    /// Peak resident memory last reported to the policy.
    reported_peak: u64,
    proc: Option<Launched>,
    running_since: Option<Duration>,
    last: MemoryStat,
    result: JobResult,
}

/// Tears down every cgroup of the run, whatever way the run ends (return,
/// error or panic): no process, frozen task or cgroup outlives memgang.
struct Teardown<'a> {
    backend: &'a dyn CgroupBackend,
    pool: GroupPath,
    jobs: Vec<(GroupPath, Option<i32>)>,
}

impl Drop for Teardown<'_> {
    fn drop(&mut self) {
        for (group, pid) in self.jobs.drain(..) {
            if let Err(e) = procs::kill_and_remove(self.backend, &group, pid) {
                tracing::error!("cleanup: {e:#}");
            }
        }
        if let Err(e) = self.backend.remove(&self.pool) {
            tracing::error!("cleanup: removing pool cgroup {}: {e}", self.pool.as_str());
        }
    }
}

pub fn execute(exp: &Experiment, env: &Env) -> Result<RunResult> {
    let backend = env.backend.as_ref();
    let pool = GroupPath::new(&format!("memgang-{}", std::process::id()))?;
    backend
        .create(&pool)
        .with_context(|| format!("creating the pool cgroup {}", pool.as_str()))?;
    let mut teardown = Teardown {
        backend,
        pool: pool.clone(),
        jobs: Vec::new(),
    };
    backend
        .set_memory_limit(&pool, Some(exp.pool_memory))
        .with_context(|| {
            format!(
                "setting the pool's memory limit to {} bytes",
                exp.pool_memory
            )
        })?;

    // The node as the policy sees it: its CPUs (ranks beyond them share
    // them) and the pool's memory.
    let cpus = env
        .machine
        .cpus
        .max(exp.jobs.iter().map(|j| j.spec.ranks).max().unwrap_or(1));
    let cluster = Cluster::uniform(1, cpus, exp.pool_memory);
    let mut sched = Scheduler::new(
        cluster,
        exp.specs(),
        exp.policy.build_with(exp.quantum, exp.switch, exp.overlap),
    );
    let mut run = Run {
        exp,
        pool: pool.clone(),
        env,
        t0: Instant::now(),
        jobs: exp
            .jobs
            .iter()
            .map(|j| {
                Ok(JobRun {
                    group: pool.join(&format!("job-{}", j.spec.name))?,
                    records: Vec::new(),
                    ws_bytes: None,
                    bg: None,
                    early: None,
                    reported_peak: 0,
                    proc: None,
                    running_since: None,
                    last: MemoryStat::default(),
                    result: JobResult {
                        name: j.spec.name.clone(),
                        command: j.command.clone(),
                        ranks: j.spec.ranks,
                        declared_memory_bytes: j.spec.memory_bytes,
                        arrival_s: j.spec.arrival.as_secs_f64(),
                        ..JobResult::default()
                    },
                })
            })
            .collect::<Result<_>>()?,
        timeline: Vec::new(),
        switches: Vec::new(),
        samples: Vec::new(),
        vm_start: VmStat::read().context("reading /proc/vmstat")?,
        vm_last: VmStat::default(),
        protect_failed: false,
    };
    run.vm_last = run.vm_start;
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);

    let mut next_sample = Duration::ZERO;
    let mut interrupted = false;
    let mut pressured = false;
    loop {
        if env.stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let now = run.now();
        let actions = sched.advance(now);
        run.execute(&mut sched, actions, &mut teardown)?;
        run.reap(&mut sched, &mut teardown)?;
        if sched.all_finished() {
            break;
        }
        let now = run.now();
        if now >= next_sample {
            for event in run.sample(now) {
                let actions = sched.handle(run.now(), event);
                run.execute(&mut sched, actions, &mut teardown)?;
            }
            run.show_progress(&sched);
            // Tell the policy when the node enters memory pressure (edge,
            // not level: one event per episode, not one per sample).
            let psi = run.samples.last().and_then(|s| s.psi_some_avg10);
            let now_pressured = psi.is_some_and(|p| p >= PRESSURE_PSI_SOME);
            if now_pressured && !pressured {
                let event = Event::MemoryPressure {
                    node: NodeId(0),
                    some_avg10: psi.unwrap_or_default(),
                };
                let actions = sched.handle(now, event);
                run.execute(&mut sched, actions, &mut teardown)?;
            }
            pressured = now_pressured;
            next_sample = (next_sample + exp.sample_interval).max(now);
        }
        let wake = sched
            .next_wakeup()
            .map_or(next_sample, |w| w.min(next_sample));
        run.wait_for_exit(wake.saturating_sub(run.now()));
    }
    let end = run.now();
    // The run is over: what the jobs measured is of no use to the policy.
    let _ = run.sample(end);
    // Close what is still open: interrupted jobs end now.
    for (i, j) in run.jobs.iter_mut().enumerate() {
        if let Some(since) = j.running_since.take() {
            run.timeline.push(Interval {
                job: exp.jobs[i].spec.name.clone(),
                start_s: since.as_secs_f64(),
                end_s: end.as_secs_f64(),
            });
        }
        if j.proc.is_some() {
            j.result.error = Some("stopped: memgang was interrupted".into());
            j.result.major_faults = j.last.major_faults;
            // Its rate until then: a run stopped because it thrashed is
            // what Fig. 8's statistics are about.
            j.result.major_faults_per_min = j
                .result
                .start_s
                .map(|start| end.as_secs_f64() - start)
                .filter(|d| *d > 0.0)
                .map(|d| j.last.major_faults as f64 * 60.0 / d);
        }
    }
    drop(teardown);
    let vm_end = VmStat::read().unwrap_or(run.vm_last);

    let jobs: Vec<JobResult> = run.jobs.into_iter().map(|j| j.result).collect();
    let first_arrival = jobs
        .iter()
        .map(|j| j.arrival_s)
        .fold(f64::INFINITY, f64::min);
    let last_finish = jobs.iter().filter_map(|j| j.finish_s).fold(0.0, f64::max);
    // An interrupted run lasted until the interruption.
    let last_finish = if interrupted {
        end.as_secs_f64()
    } else {
        last_finish
    };
    let makespan_s = (last_finish - first_arrival).max(0.0);
    let completions: Vec<f64> = jobs.iter().filter_map(|j| j.completion_s).collect();
    let fault_rates: Vec<f64> = jobs.iter().filter_map(|j| j.major_faults_per_min).collect();
    let fault_stats = memgang_core::metrics::mean_std(&fault_rates);
    Ok(RunResult {
        schema: SCHEMA_VERSION,
        memgang_version: env!("CARGO_PKG_VERSION").into(),
        experiment: exp.name.clone(),
        policy: exp.policy.name().into(),
        quantum_s: exp.quantum.as_secs_f64(),
        switch: exp.switch.to_string(),
        overlap: exp
            .policy
            .uses_overlap()
            .then(|| exp.overlap.name().to_string()),
        pool_memory_bytes: exp.pool_memory,
        machine: env.machine.clone(),
        started_unix_s,
        makespan_s,
        switching_overhead: None,
        batch_makespan_s: None,
        baseline: "none".into(),
        fairness: memgang_core::metrics::fairness(makespan_s, &completions),
        major_faults_per_min_mean: fault_stats.map(|(m, _)| m),
        major_faults_per_min_std: fault_stats.map(|(_, sd)| sd),
        swap_in_pages: vm_end.pswpin.saturating_sub(run.vm_start.pswpin),
        swap_out_pages: vm_end.pswpout.saturating_sub(run.vm_start.pswpout),
        switch_count: run.switches.len(),
        switch_time_s: run.switches.iter().fold(0.0, |t, s| t + s.took_s),
        interrupted,
        jobs,
        timeline: run.timeline,
        switches: run.switches,
        samples: run.samples,
    })
}

struct Run<'a> {
    exp: &'a Experiment,
    pool: GroupPath,
    env: &'a Env,
    t0: Instant,
    jobs: Vec<JobRun>,
    timeline: Vec<Interval>,
    switches: Vec<Switch>,
    samples: Vec<Sample>,
    vm_start: VmStat,
    vm_last: VmStat,
    /// Selective page-out could not be set up once: said once, not per
    /// switch.
    protect_failed: bool,
}

impl Run<'_> {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    fn name(&self, job: JobId) -> &str {
        &self.exp.jobs[job.index()].spec.name
    }

    fn say(&self, msg: String) {
        if self.env.progress.is_hidden() {
            tracing::info!("{msg}");
        } else {
            self.env.progress.println(msg);
        }
    }

    /// Carry out actions in order. Actions that stop or restart jobs form a
    /// switch, timed as one; the policy hears of it as `SwitchDone`, and of
    /// jobs that could not start as `JobFinished`, which may bring more
    /// actions.
    fn execute(
        &mut self,
        sched: &mut Scheduler,
        actions: Vec<Action>,
        teardown: &mut Teardown,
    ) -> Result<()> {
        let mut queue: VecDeque<Action> = actions.into();
        while !queue.is_empty() {
            let batch: Vec<Action> = queue.drain(..).collect();
            let began = Instant::now();
            let at = self.now();
            let is_switch = batch.iter().any(Action::is_switch);
            let (mut suspended, mut resumed, mut failed) = (Vec::new(), Vec::new(), Vec::new());
            let (mut paged_out, mut paged_in) = (0u64, 0u64);
            let (mut out_time, mut in_time) = (Duration::ZERO, Duration::ZERO);
            let mut warnings = Vec::new();
            let mut bg_bytes = 0;
            if is_switch {
                warnings.extend(self.check_swap(&batch));
            }
            let sampler = is_switch.then(|| {
                SwitchSampler::start(
                    self.env.backend.clone(),
                    self.pool.clone(),
                    self.t0,
                    self.exp.sample_interval,
                )
            });
            let vm_before = VmStat::read().ok();
            // Overlapped set switch: the incoming jobs' page-in starts now,
            // beside the page-outs below, in the memory free right now.
            // Prefetches (PageIn) share the same budget.
            let mut budget = self.free_for_page_in();
            for action in &batch {
                if let Action::Resume {
                    job,
                    page_in: PageInPlan::Overlapped,
                } = action
                {
                    self.start_early_page_in(*job, &mut budget);
                }
            }
            for action in batch {
                let job = action.job();
                let i = job.index();
                match action {
                    Action::Start { .. } => match self.start(job, teardown) {
                        Ok(()) => resumed.push(self.name(job).to_string()),
                        Err(e) => {
                            self.say(format!(
                                "{:>7.1}s  {} could not start: {e:#}",
                                at.as_secs_f64(),
                                self.name(job)
                            ));
                            self.jobs[i].result.error = Some(format!("{e:#}"));
                            failed.push(job);
                        }
                    },
                    Action::Suspend { page_out, .. } => {
                        // Background writing ends when the switch begins.
                        let bg = self.jobs[i].bg.take().map(|w| {
                            let report = w.stop();
                            bg_bytes += report.bytes_written;
                            self.bg_done(job, report)
                        });
                        self.env
                            .freezer
                            .freeze(&self.jobs[i].group)
                            .with_context(|| format!("suspending job {}", self.name(job)))?;
                        self.stop_interval(job, self.now());
                        let anon = self
                            .env
                            .backend
                            .memory_stat(&self.jobs[i].group)
                            .ok()
                            .map(|m| m.anon_bytes);
                        let t = Instant::now();
                        let out = self.page_out(job, page_out, bg, &mut warnings);
                        paged_out += out;
                        out_time += t.elapsed();
                        // A record (taken before background writing, if
                        // any) is the better estimate: after writing, the
                        // pages are no longer mapped, so not counted.
                        let j = &mut self.jobs[i];
                        let recorded: u64 = j.records.iter().map(PageRecord::bytes).sum();
                        j.ws_bytes = anon.map(|a| a.max(recorded));
                        suspended.push(self.name(job).to_string());
                    }
                    Action::Protect { on, .. } => self.protect(job, on),
                    Action::MakeRoom { from, .. } => {
                        let t = Instant::now();
                        paged_out += self.make_room(job, &from, &mut warnings);
                        out_time += t.elapsed();
                    }
                    Action::Resume { page_in, .. } => {
                        // Bring its memory back while it is still frozen, so
                        // that it resumes without faulting.
                        // Not overlapped with the page-out that made its room:
                        // see `fitting_records`.
                        let early = self.jobs[i].early.take().map(|h| h.join());
                        let done = page_in
                            .uses_records()
                            .then(|| mechanisms::page_in(&self.fitting_records(job)));
                        for done in early.into_iter().flatten().chain(done) {
                            paged_in += done.bytes;
                            in_time += done.took;
                            for e in &done.errors {
                                self.paging_failed(job, "paging in", e);
                            }
                        }
                        self.env
                            .freezer
                            .thaw(&self.jobs[i].group)
                            .with_context(|| format!("resuming job {}", self.name(job)))?;
                        self.jobs[i].running_since = Some(self.now());
                        resumed.push(self.name(job).to_string());
                    }
                    Action::WriteBack { until, .. } => {
                        let pids = self
                            .env
                            .backend
                            .procs_recursive(&self.jobs[i].group)
                            .unwrap_or_default();
                        let window = until.saturating_sub(self.now());
                        self.jobs[i].bg = Some(BgWriter::start(pids, window));
                    }
                    // One budget for all the jobs of the set being
                    // prefetched: each taking all the free memory filled
                    // the pool with up to the set's size and pushed the
                    // running set out (bench/hybrid.sh, n = 7: thousands
                    // of major faults per job inside quanta).
                    Action::PageIn { .. } => self.start_early_page_in(job, &mut budget),
                    Action::Boost { nice, .. } => self.renice(job, nice),
                    Action::Defer { reason, .. } => {
                        self.say(format!("{} waits: {reason}", self.name(job)))
                    }
                }
            }
            if is_switch {
                let took = began.elapsed();
                let vm_after = VmStat::read().ok();
                let swapped = |f: fn(&VmStat) -> u64| match (&vm_before, &vm_after) {
                    (Some(a), Some(b)) => f(b).saturating_sub(f(a)),
                    _ => 0,
                };
                for w in &warnings {
                    self.say(format!("{:>7.1}s  warning: {w}", at.as_secs_f64()));
                }
                for point in sampler.map(SwitchSampler::stop).unwrap_or_default() {
                    self.switch_sample(point);
                }
                self.switches.push(Switch {
                    at_s: at.as_secs_f64(),
                    took_s: took.as_secs_f64(),
                    suspended,
                    resumed,
                    paged_out_bytes: paged_out,
                    paged_in_bytes: paged_in,
                    page_out_s: out_time.as_secs_f64(),
                    page_in_s: in_time.as_secs_f64(),
                    swap_in_pages: swapped(|v| v.pswpin),
                    swap_out_pages: swapped(|v| v.pswpout),
                    background_bytes: bg_bytes,
                    warnings,
                });
                queue.extend(sched.handle(self.now(), Event::SwitchDone { took }));
            }
            for job in failed {
                let now = self.now();
                let r = &mut self.jobs[job.index()].result;
                r.finish_s = Some(now.as_secs_f64());
                r.completion_s = Some(now.as_secs_f64() - r.arrival_s);
                queue.extend(sched.handle(now, Event::JobFinished(job)));
            }
        }
        Ok(())
    }

    fn start(&mut self, job: JobId, teardown: &mut Teardown) -> Result<()> {
        let def = &self.exp.jobs[job.index()];
        let group = self.jobs[job.index()].group.clone();
        self.env
            .backend
            .create(&group)
            .with_context(|| format!("creating cgroup {}", group.as_str()))?;
        teardown.jobs.push((group.clone(), None));
        let log_dir = self.env.logs.join(&def.spec.name);
        let launched = procs::launch(
            self.env.backend.as_ref(),
            &group,
            &def.command,
            &def.env,
            &log_dir,
        )?;
        if let Some(entry) = teardown.jobs.iter_mut().find(|(g, _)| *g == group) {
            entry.1 = Some(launched.pid);
        }
        let now = self.now();
        let j = &mut self.jobs[job.index()];
        j.proc = Some(launched);
        j.running_since = Some(now);
        j.result.start_s = Some(now.as_secs_f64());
        j.result.log_dir = Some(log_dir.display().to_string());
        self.say(format!(
            "{:>7.1}s  {} started",
            now.as_secs_f64(),
            def.spec.name
        ));
        Ok(())
    }

    /// Carry out a page-out plan on a frozen job; returns the bytes paged
    /// out. `bg` is what background writing did in its quantum's last part:
    /// its record, taken before it wrote pages out, is the quantum's working
    /// set. A mechanism that fails (no rights, a process gone) leaves the
    /// job to the kernel's LRU and says why: the switch itself goes on.
    fn page_out(
        &mut self,
        job: JobId,
        plan: PageOutPlan,
        bg: Option<Vec<PageRecord>>,
        warnings: &mut Vec<String>,
    ) -> u64 {
        let (record, evict) = match plan {
            PageOutPlan::Lru => return 0,
            PageOutPlan::Record => (true, false),
            PageOutPlan::Aggressive { record } => (record, true),
        };
        let pids = self
            .env
            .backend
            .procs_recursive(&self.jobs[job.index()].group)
            .unwrap_or_default();
        let mut room = swap_room();
        let mut records = Vec::new();
        let mut bytes = 0;
        let mut clamped = false;
        let anon = |run: &Self| {
            run.env
                .backend
                .memory_stat(&run.jobs[job.index()].group)
                .map_or(0, |m| m.anon_bytes)
        };
        let before = anon(self);
        for pid in pids {
            // Scanned even when not kept: advising only the resident runs
            // makes `paged_out_bytes` count what really left memory, and the
            // scan (a PAGEMAP_SCAN ioctl) is small next to the page-out.
            let rec = match paging::record(pid) {
                Ok((rec, _)) => rec,
                Err(e) => {
                    self.paging_failed(job, "recording resident pages", &e);
                    continue;
                }
            };
            if evict {
                let runs = truncate_runs(&rec.runs, room);
                if runs.len() < rec.runs.len() || rec.bytes() > room {
                    clamped = true;
                    warnings.push(format!(
                        "swap is nearly full ({} free): {} of job {} stay in memory",
                        memgang_core::units::format_bytes(room),
                        memgang_core::units::format_bytes(rec.bytes().saturating_sub(room)),
                        self.name(job)
                    ));
                }
                match paging::page_out(pid, &runs) {
                    Ok(report) => {
                        bytes += report.bytes_advised;
                        room = room.saturating_sub(report.bytes_advised);
                    }
                    Err(e) => self.paging_failed(job, "paging out", &e),
                }
            }
            if record {
                records.push(rec);
            }
        }
        if evict {
            self.drain(job);
        }
        // MADV_PAGEOUT leaves locked (mlock) pages and pages shared with
        // other processes where they are: say how much stayed.
        let after = anon(self);
        if evict && !clamped && after > RESIDUAL_REPORTED.max(before / 10) {
            warnings.push(format!(
                "{} of job {} stayed in memory after page-out: locked (mlock) or shared pages, \
                 which the kernel does not page out on request",
                memgang_core::units::format_bytes(after),
                self.name(job)
            ));
        }
        if record {
            self.jobs[job.index()].records = bg.filter(|b| !b.is_empty()).unwrap_or(records);
        }
        bytes
    }

    /// The job's records, cut to what the pool can take now: its free
    /// memory (less the margin), plus what the job already holds (resident
    /// or in the swap cache), which its record covers too. The page-out
    /// before this one waited for its writes (`drain`), so the pool's
    /// usage is what will stay. A bulk page-in into a full pool fills
    /// it with pages being read, which reclaim cannot take, faster than
    /// reclaim frees the others: the kernel then kills a job. Seen here
    /// with `ai` alone, and with the page-in overlapped with the `so/ao`
    /// page-out that was making its room, in a 256 MiB pool; so the page-in
    /// comes after the page-out, and what does not fit is faulted in on
    /// demand, as under `lru`.
    fn fitting_records(&mut self, job: JobId) -> Vec<PageRecord> {
        let backend = self.env.backend.as_ref();
        let j = &mut self.jobs[job.index()];
        let records = std::mem::take(&mut j.records);
        // usage, not anon: a page of the job's in the swap cache is charged
        // to it and comes back without I/O.
        let held = backend.memory_stat(&j.group).map_or(0, |m| m.usage_bytes);
        let used = backend.memory_stat(&self.pool).map_or(0, |m| m.usage_bytes);
        let mut allowed = self
            .exp
            .pool_memory
            .saturating_sub(used)
            .saturating_sub(ROOM_MARGIN)
            + held;
        let total: u64 = records.iter().map(PageRecord::bytes).sum();
        if total > allowed {
            tracing::debug!(
                "job {}: paging in {allowed} of {total} recorded bytes, the rest on demand",
                self.name(job)
            );
        }
        records
            .into_iter()
            .map(|r| {
                let runs = truncate_runs(&r.runs, allowed);
                allowed = allowed.saturating_sub(runs.iter().map(PageRun::bytes).sum());
                PageRecord { pid: r.pid, runs }
            })
            .filter(|r| !r.runs.is_empty())
            .collect()
    }

    /// Memory the pool has free now, less the margin: what a page-in that
    /// runs beside other paging may fill without pushing anyone out.
    fn free_for_page_in(&self) -> u64 {
        let used = self
            .env
            .backend
            .memory_stat(&self.pool)
            .map_or(self.exp.pool_memory, |m| m.usage_bytes);
        self.exp
            .pool_memory
            .saturating_sub(used)
            .saturating_sub(ROOM_MARGIN)
    }

    /// Start paging in the first `budget` bytes of a suspended job's
    /// records in a thread (paper 001's overlapped restart and prefetch);
    /// the rest stays recorded for its resume. The job stays frozen.
    fn start_early_page_in(&mut self, job: JobId, budget: &mut u64) {
        let j = &mut self.jobs[job.index()];
        if j.early.is_some() || j.records.is_empty() || *budget == 0 {
            return;
        }
        let mut head = Vec::new();
        let mut tail = Vec::new();
        for rec in std::mem::take(&mut j.records) {
            let (h, t) = split_runs(&rec.runs, *budget);
            *budget = budget.saturating_sub(h.iter().map(PageRun::bytes).sum());
            if !h.is_empty() {
                head.push(PageRecord {
                    pid: rec.pid,
                    runs: h,
                });
            }
            if !t.is_empty() {
                tail.push(PageRecord {
                    pid: rec.pid,
                    runs: t,
                });
            }
        }
        j.records = tail;
        j.early = Some(std::thread::spawn(move || mechanisms::page_in(&head)));
    }

    /// What background writing did, said when it had trouble.
    fn bg_done(&self, job: JobId, report: mechanisms::BgReport) -> Vec<PageRecord> {
        for e in &report.errors {
            self.paging_failed(job, "background writing", e);
        }
        tracing::debug!(
            "job {}: background writing advised {} bytes",
            self.name(job),
            report.bytes_written
        );
        report.records
    }

    /// Selective page-out: protect a job the policy runs, expose one it
    /// suspends. Without the kernel's support the kernel's LRU decides
    /// alone, as under `lru`; said once.
    fn protect(&mut self, job: JobId, on: bool) {
        if self.protect_failed {
            return;
        }
        let group = &self.jobs[job.index()].group;
        if let Err(e) = self.env.backend.protect(group, on) {
            self.protect_failed = true;
            self.say(format!(
                "warning: selective page-out (so) is not available, the kernel's LRU chooses \
                 what to page out instead: {e}"
            ));
        }
    }

    /// Bytes `job` is short of: its working-set estimate (declared memory
    /// before its first quantum) and a margin, less what it has resident
    /// and what the pool has free.
    fn shortfall(&self, job: JobId) -> u64 {
        let backend = self.env.backend.as_ref();
        let j = &self.jobs[job.index()];
        let ws = j
            .ws_bytes
            .or(self.exp.jobs[job.index()].spec.memory_bytes)
            .unwrap_or(0);
        // A job not started yet has no cgroup: nothing resident.
        let resident = backend.memory_stat(&j.group).map_or(0, |m| m.anon_bytes);
        let used = backend.memory_stat(&self.pool).map_or(0, |m| m.usage_bytes);
        let free = self.exp.pool_memory.saturating_sub(used);
        (ws + ROOM_MARGIN).saturating_sub(resident + free)
    }

    /// `so/ao` (paper 000 Fig. 3 with Fig. 2's victims): reclaim the
    /// incoming job's shortfall from the suspended jobs in the policy's
    /// order, each one's oldest pages first (the kernel's LRU inside its
    /// cgroup), now and in bulk. Returns the bytes freed.
    fn make_room(&mut self, job: JobId, from: &[JobId], warnings: &mut Vec<String>) -> u64 {
        let backend = self.env.backend.clone();
        let mut need = self.shortfall(job).min(swap_room());
        let mut freed = 0;
        for victim in from {
            if need == 0 {
                break;
            }
            let group = &self.jobs[victim.index()].group;
            let has = backend.memory_stat(group).map_or(0, |m| m.anon_bytes);
            match backend.reclaim(group, need.min(has)) {
                Ok(got) => {
                    freed += got;
                    need = need.saturating_sub(got);
                }
                Err(e) => warnings.push(format!(
                    "making room for {} from {}: {e}; the kernel's LRU pages the rest",
                    self.name(job),
                    self.name(*victim)
                )),
            }
            // Cgroup reclaim stalls once the pages it took are under
            // write-back, well before the group is out of pages; the rest
            // of the shortfall then goes by MADV_PAGEOUT, which submits
            // the writes in bulk without waiting for each round.
            if need > 0 {
                let got = self.page_out_part(*victim, need);
                freed += got;
                need = need.saturating_sub(got);
            }
        }
        freed
    }

    /// Page out up to `bytes` of a frozen job's resident memory, in address
    /// order (the record keeps no age; the cgroup reclaim before this has
    /// already taken the oldest pages), and wait until it has left the
    /// pool. Returns the drop in the job's usage.
    fn page_out_part(&mut self, job: JobId, bytes: u64) -> u64 {
        let group = self.jobs[job.index()].group.clone();
        let backend = self.env.backend.clone();
        let usage = |b: &dyn CgroupBackend| b.memory_stat(&group).map_or(0, |m| m.usage_bytes);
        let before = usage(backend.as_ref());
        let mut left = bytes.min(swap_room());
        for pid in backend.procs_recursive(&group).unwrap_or_default() {
            if left == 0 {
                break;
            }
            let rec = match paging::record(pid) {
                Ok((rec, _)) => rec,
                Err(e) => {
                    self.paging_failed(job, "recording resident pages", &e);
                    continue;
                }
            };
            let runs = truncate_runs(&rec.runs, left);
            match paging::page_out(pid, &runs) {
                Ok(report) => left = left.saturating_sub(report.bytes_advised),
                Err(e) => self.paging_failed(job, "paging out", &e),
            }
        }
        self.drain(job);
        before.saturating_sub(usage(backend.as_ref()))
    }

    /// Wait until what MADV_PAGEOUT handed to the swap device has left the
    /// pool. The advice only unmaps the pages and starts their writes; they
    /// stay charged (swap cache, write-back) until the writes complete and
    /// reclaim frees them. An incoming job sized against the pool's free
    /// memory before then finds the pool full and faults, and a page-in
    /// would push out its own pages. Reclaiming the frozen group waits for
    /// the writes and frees the pages in bulk.
    fn drain(&self, job: JobId) {
        let group = &self.jobs[job.index()].group;
        let backend = self.env.backend.as_ref();
        let Ok(stat) = backend.memory_stat(group) else {
            return;
        };
        if let Err(e) = backend.reclaim(group, stat.usage_bytes) {
            tracing::debug!("job {}: waiting for page-out writes: {e}", self.name(job));
        }
    }

    /// Before a switch: will the swap device hold what must leave memory
    /// for the incoming jobs? A full swap device is said before the switch,
    /// not found out by the OOM killer.
    fn check_swap(&self, batch: &[Action]) -> Option<String> {
        let need: u64 = batch
            .iter()
            .filter(|a| matches!(a, Action::Resume { .. } | Action::Start { .. }))
            .map(|a| self.shortfall(a.job()))
            .sum();
        let room = swap_room();
        (need > room).then(|| {
            format!(
                "swap is nearly full: {} free (with {} kept in reserve), but the incoming jobs \
                 need about {} more memory than the pool has free; the kernel may kill a job \
                 (out of memory). Add swap (memgang testbed up --swap SIZE) or give the pool more memory",
                memgang_core::units::format_bytes(room),
                memgang_core::units::format_bytes(SWAP_RESERVE),
                memgang_core::units::format_bytes(need)
            )
        })
    }

    fn paging_failed(&self, job: JobId, what: &str, e: &memgang_linux::Error) {
        // A process that exited between switches has nothing to page.
        if !paging::is_gone(e) {
            tracing::warn!(
                "job {}: {what} failed, the kernel pages it on demand instead: {e}",
                self.name(job)
            );
        }
    }

    fn stop_interval(&mut self, job: JobId, now: Duration) {
        if let Some(since) = self.jobs[job.index()].running_since.take() {
            let name = self.name(job).to_string();
            self.timeline.push(Interval {
                job: name,
                start_s: since.as_secs_f64(),
                end_s: now.as_secs_f64(),
            });
        }
    }

    fn renice(&self, job: JobId, nice: i32) {
        for pid in self
            .env
            .backend
            .procs_recursive(&self.jobs[job.index()].group)
            .unwrap_or_default()
        {
            // SAFETY: setpriority takes plain integers.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, nice) } != 0 {
                tracing::warn!(
                    "renice of pid {pid} to {nice}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }

    /// Collect every job whose first process has exited.
    fn reap(&mut self, sched: &mut Scheduler, teardown: &mut Teardown) -> Result<()> {
        for i in 0..self.jobs.len() {
            let Some(p) = &self.jobs[i].proc else {
                continue;
            };
            if p.pidfd.is_alive() {
                continue;
            }
            let Some(exit) = procs::try_reap(p.pid) else {
                continue;
            };
            let now = self.now();
            let job = JobId(i as u32);
            self.finish(job, exit, now, teardown);
            let actions = sched.handle(now, Event::JobFinished(job));
            self.execute(sched, actions, teardown)?;
        }
        Ok(())
    }

    fn finish(&mut self, job: JobId, exit: Exit, now: Duration, teardown: &mut Teardown) {
        self.stop_interval(job, now);
        let backend = self.env.backend.as_ref();
        let j = &mut self.jobs[job.index()];
        j.proc = None;
        if let Some(bg) = j.bg.take() {
            bg.stop();
        }
        if let Some(early) = j.early.take() {
            let _ = early.join();
        }
        // Read the cgroup's counters before it goes: they include processes
        // the job did not reap itself.
        if let Ok(stat) = backend.memory_stat(&j.group) {
            j.last = stat;
        }
        // Daemons or orphans the job left behind go with it.
        if let Err(e) = procs::kill_and_remove(backend, &j.group, None) {
            tracing::error!("{e:#}");
        } else {
            teardown.jobs.retain(|(g, _)| *g != j.group);
        }
        let r = &mut j.result;
        r.finish_s = Some(now.as_secs_f64());
        r.completion_s = Some(now.as_secs_f64() - r.arrival_s);
        r.exit_code = exit.code;
        r.signal = exit.signal;
        r.cpu_s = exit.cpu_s;
        r.major_faults = j.last.major_faults.max(exit.major_faults);
        r.major_faults_per_min = r
            .start_s
            .map(|start| now.as_secs_f64() - start)
            .filter(|d| *d > 0.0)
            .map(|d| r.major_faults as f64 * 60.0 / d);
        if !r.ok() {
            r.stderr_tail = r
                .log_dir
                .as_ref()
                .and_then(|d| tail(&PathBuf::from(d).join("stderr")));
        }
        let status = match (exit.code, exit.signal) {
            (Some(0), _) => "ok".to_string(),
            (Some(c), _) => format!("FAILED with exit code {c}"),
            (_, Some(s)) => format!("KILLED by signal {s}"),
            _ => "ended".to_string(),
        };
        let name = r.name.clone();
        self.say(format!(
            "{:>7.1}s  {name} finished: {status}",
            now.as_secs_f64()
        ));
    }

    /// Sleep until a job's first process exits or `timeout` passes.
    fn wait_for_exit(&self, timeout: Duration) {
        let mut fds: Vec<libc::pollfd> = self
            .jobs
            .iter()
            .filter_map(|j| j.proc.as_ref())
            .map(|p| libc::pollfd {
                fd: p.pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: fds is a valid array of pollfd for its length. EINTR (a
        // signal) just ends the wait early, which is what we want.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }

    /// Read every job's counters; returns a `JobMemory` event for each
    /// running job whose peak has grown by a step since last reported.
    fn sample(&mut self, now: Duration) -> Vec<Event> {
        let mut events = Vec::new();
        let backend = self.env.backend.as_ref();
        let vm = VmStat::read().unwrap_or(self.vm_last);
        let (d_in, d_out) = (
            vm.pswpin.saturating_sub(self.vm_last.pswpin),
            vm.pswpout.saturating_sub(self.vm_last.pswpout),
        );
        self.vm_last = vm;
        let mut jobs = Vec::new();
        // (index, Δmajor faults, Δswapped bytes) for attributing the node's
        // swap traffic where the cgroup does not count it itself.
        let mut shares: Vec<(usize, u64, u64)> = Vec::new();
        for (i, j) in self.jobs.iter_mut().enumerate() {
            let Some(p) = &j.proc else { continue };
            let Ok(stat) = backend.memory_stat(&j.group) else {
                continue;
            };
            let frozen = if self.env.freezer.name() == "signals" {
                process_stopped(p.pid)
            } else {
                backend.is_frozen(&j.group).unwrap_or(false)
            };
            let r = &mut j.result;
            match (
                stat.swap_ins,
                stat.swap_outs,
                j.last.swap_ins,
                j.last.swap_outs,
            ) {
                (Some(si), Some(so), Some(lsi), Some(lso)) => {
                    r.swap_in_pages += si.saturating_sub(lsi);
                    r.swap_out_pages += so.saturating_sub(lso);
                }
                _ => shares.push((
                    i,
                    stat.major_faults.saturating_sub(j.last.major_faults),
                    stat.swap_bytes
                        .unwrap_or(0)
                        .saturating_sub(j.last.swap_bytes.unwrap_or(0)),
                )),
            }
            r.peak_anon_bytes = r.peak_anon_bytes.max(stat.anon_bytes);
            if !frozen && r.peak_anon_bytes >= j.reported_peak + MEMORY_REPORT_STEP {
                j.reported_peak = r.peak_anon_bytes;
                events.push(Event::JobMemory {
                    job: JobId(i as u32),
                    peak_bytes: r.peak_anon_bytes,
                    resident_bytes: stat.anon_bytes,
                });
            }
            jobs.push(JobSample {
                job: r.name.clone(),
                state: if frozen { "frozen" } else { "running" }.into(),
                anon_bytes: stat.anon_bytes,
                swap_bytes: stat.swap_bytes,
                major_faults: stat.major_faults,
            });
            j.last = stat;
        }
        let (maj_total, grow_total) = shares.iter().fold((0, 0), |(a, b), s| (a + s.1, b + s.2));
        for (i, maj, grow) in shares {
            let r = &mut self.jobs[i].result;
            r.swap_in_pages += (d_in * maj).checked_div(maj_total).unwrap_or(0);
            r.swap_out_pages += (d_out * grow).checked_div(grow_total).unwrap_or(0);
        }
        let pool_usage_bytes = backend.memory_stat(&self.pool).map_or(0, |s| s.usage_bytes);
        self.samples.push(Sample {
            t_s: now.as_secs_f64(),
            swap_in: d_in,
            swap_out: d_out,
            pool_usage_bytes,
            psi_some_avg10: Psi::node_memory().map(|p| p.some_avg10),
            in_switch: false,
            jobs,
        });
        events
    }

    /// A trace sample taken while a switch ran: node counters and the
    /// pool only, the jobs' counters are read between switches.
    fn switch_sample(&mut self, p: SwitchPoint) {
        self.samples.push(Sample {
            t_s: p.at.as_secs_f64(),
            swap_in: p.vm.pswpin.saturating_sub(self.vm_last.pswpin),
            swap_out: p.vm.pswpout.saturating_sub(self.vm_last.pswpout),
            pool_usage_bytes: p.pool_usage_bytes,
            psi_some_avg10: p.psi_some_avg10,
            in_switch: true,
            jobs: Vec::new(),
        });
        self.vm_last = p.vm;
    }

    fn show_progress(&self, sched: &Scheduler) {
        let st = sched.state();
        let names = |s: JobStatus| {
            st.with_status(s)
                .map(|j| j.spec.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let done = st.with_status(JobStatus::Finished).count();
        let last = self.samples.last();
        let per_s = 1.0 / self.exp.sample_interval.as_secs_f64();
        self.env.progress.set_message(format!(
            "{:.1}s {} | running {} | suspended {} | done {done}/{} | pool {} | swap in {:.0}/s out {:.0}/s pages",
            self.now().as_secs_f64(),
            self.exp.policy,
            none_if_empty(names(JobStatus::Running)),
            none_if_empty(names(JobStatus::Suspended)),
            st.jobs().len(),
            memgang_core::units::format_bytes(last.map_or(0, |s| s.pool_usage_bytes)),
            last.map_or(0.0, |s| s.swap_in as f64 * per_s),
            last.map_or(0.0, |s| s.swap_out as f64 * per_s),
        ));
    }
}

fn none_if_empty(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

/// Whether a process is stopped by a signal (state T in /proc/PID/stat).
fn process_stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

fn tail(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
    (!tail.is_empty()).then_some(tail)
}

/// Swap free for memgang's own page-outs, less the reserve.
fn swap_room() -> u64 {
    SwapStatus::read().map_or(0, |s| {
        s.total_bytes
            .saturating_sub(s.used_bytes)
            .saturating_sub(SWAP_RESERVE)
    })
}

/// `runs` cut after their first `bytes` (at a page): what comes before and
/// what comes after.
fn split_runs(runs: &[PageRun], bytes: u64) -> (Vec<PageRun>, Vec<PageRun>) {
    let head = truncate_runs(runs, bytes);
    let mut skip: u64 = head.iter().map(|r| r.pages).sum();
    let mut tail = Vec::new();
    for r in runs {
        let drop = r.pages.min(skip);
        skip -= drop;
        if drop < r.pages {
            tail.push(PageRun {
                start: r.start + drop * paging::page_size(),
                pages: r.pages - drop,
            });
        }
    }
    (head, tail)
}

/// The first `bytes` of `runs`, cut at a page.
fn truncate_runs(runs: &[PageRun], bytes: u64) -> Vec<PageRun> {
    let mut left = bytes / paging::page_size();
    let mut out = Vec::new();
    for r in runs {
        if left == 0 {
            break;
        }
        let pages = r.pages.min(left);
        out.push(PageRun {
            start: r.start,
            pages,
        });
        left -= pages;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_runs_cuts_at_a_page_and_loses_nothing() {
        let ps = paging::page_size();
        let runs = [
            PageRun { start: 0, pages: 3 },
            PageRun {
                start: 10 * ps,
                pages: 4,
            },
        ];
        let (head, tail) = split_runs(&runs, 5 * ps);
        assert_eq!(
            head,
            [
                PageRun { start: 0, pages: 3 },
                PageRun {
                    start: 10 * ps,
                    pages: 2
                }
            ]
        );
        assert_eq!(
            tail,
            [PageRun {
                start: 12 * ps,
                pages: 2
            }]
        );
        let (head, tail) = split_runs(&runs, 0);
        assert!(head.is_empty());
        assert_eq!(tail, runs);
        let (head, tail) = split_runs(&runs, 100 * ps);
        assert_eq!(head, runs);
        assert!(tail.is_empty());
    }
}
