//! The switch engine: one node's switch steps on its jobs' memory, written
//! once for every executor. The one-node executor (and memgangd through
//! it) and memgang's Slurm agent both switch with [`NodeSwitch`]; they
//! differ only in how a job is stopped (the cgroup freezer, or Slurm's
//! SIGSTOP) and in what they report.
//!
//! It owns, per job ([`JobMemory`]): the page records taken at its
//! page-out, the working-set estimate, background writing, a page-in
//! started early and the huge-page restore after its resume. Its steps:
//! the switch's opening ([`NodeSwitch::open_switch`]: the page-in budget,
//! the early page-ins), page-out ([`NodeSwitch::suspend`]), make-room with a streamed page-in
//! ([`NodeSwitch::make_room`]), early page-in ([`NodeSwitch::page_in_early`])
//! and page-in at resume ([`NodeSwitch::resume`]), and the check before a
//! switch ([`NodeSwitch::check`], the capacity model's
//! [`capacity::check_switch`]). The kernel calls are [`GroupMemory`]'s;
//! the arithmetic is `memgang_core::room` and `memgang_core::capacity`.
//!
//! One loop carries a switch's steps out ([`NodeSwitch::carry_out`]): each
//! a core [`NodeStep`], in order. What differs between executors is their
//! [`SwitchHost`]: how a job stops before its page-out and runs again
//! after its page-in, and what they do with what is no memory step.

use crate::mechanisms::{self, BgReport, BgWriter, HugeRestore, PageInDone};
use crate::memory::{self, GroupMemory};
use crate::touched;
use anyhow::Result;
use memgang_core::{capacity, room, NodeStep, PageInPlan, PageOutPlan};
use memgang_linux::cgroup::GroupPath;
use memgang_linux::paging::PageRecord;
use memgang_linux::runs;
use memgang_results::SwitchSteps;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A streamed page-in waits until this much is free: one page-in window
/// (linux's `PAGE_IN_WINDOW`), so that each call keeps the disk's queue as
/// full as a bulk page-in does.
const STREAM_CHUNK: u64 = 32 << 20;
/// How often a streamed page-in looks at the pool while it waits: at the
/// page-out's 0.8 GB/s (docs/realapps.md), 2 ms is 1.6 MB, small beside a
/// chunk.
const STREAM_POLL: Duration = Duration::from_millis(2);

/// One job's memory as the switch engine keeps it between switches.
pub struct JobMemory {
    pub group: GroupPath,
    /// For messages.
    pub name: String,
    /// Declared memory: the working-set estimate before its first quantum.
    pub declared: Option<u64>,
    /// Resident runs of each of its processes at its last page-out.
    records: Vec<PageRecord>,
    /// Working-set estimate: the larger of its resident anonymous memory
    /// and its record when it was last suspended, i.e. what it kept in
    /// memory over its last quantum (paper 000 §3.2). None before its
    /// first suspension.
    ws_bytes: Option<u64>,
    /// What it referenced over its last quantum, read at its suspension
    /// (`crate::touched`); None where not measured.
    touched: Option<u64>,
    /// Clearing its accessed bits after its last resume.
    clearing: Option<JoinHandle<()>>,
    /// Background writer of its pages while in its quantum's last part.
    bg: Option<BgWriter>,
    /// A page-in of part of its records started before it resumes
    /// (overlapped with a page-out, or a prefetch); its resume waits for it.
    early: Option<JoinHandle<PageInDone>>,
    /// What huge pages mapped at its last page-out: where to put them back
    /// once it runs again (`Paging::restore_huge`).
    huge_records: Vec<PageRecord>,
    /// Putting its huge pages back, beside it, after its resume; a switch
    /// or its end waits for it.
    huge: Option<HugeRestore>,
}

impl JobMemory {
    pub fn new(group: GroupPath, name: &str, declared: Option<u64>) -> JobMemory {
        JobMemory {
            group,
            name: name.to_string(),
            declared,
            records: Vec::new(),
            ws_bytes: None,
            touched: None,
            clearing: None,
            bg: None,
            early: None,
            huge_records: Vec::new(),
            huge: None,
        }
    }

    /// The memory it is expected to want when it next runs.
    pub fn working_set(&self) -> u64 {
        room::working_set(self.ws_bytes, self.declared)
    }

    /// What is known of its memory for the room a switch makes for it.
    pub fn estimate(&self) -> room::Estimate {
        room::Estimate {
            touched: self.touched,
            kept: self.ws_bytes,
            declared: self.declared,
        }
    }

    /// Wait for its huge pages going back; the bytes put back.
    pub fn wait_huge(&mut self) -> u64 {
        self.huge.take().map_or(0, HugeRestore::wait)
    }

    /// Stop its background writing and wait for its paging threads:
    /// nothing of it runs on after its end or the node's release. Returns
    /// the bytes put back on huge pages.
    pub fn stop_paging(&mut self) -> u64 {
        if let Some(bg) = self.bg.take() {
            bg.stop();
        }
        if let Some(early) = self.early.take() {
            let _ = early.join();
        }
        touched::wait(self.clearing.take());
        self.wait_huge()
    }
}

/// What [`NodeSwitch::suspend`] did.
#[derive(Debug, Default)]
pub struct Suspended {
    pub paged_out: u64,
    pub took: Duration,
    /// Bytes background writing had advised out in the quantum's last
    /// part.
    pub background: u64,
    /// Bytes put back on huge pages after its last resume.
    pub huge_restored: u64,
    pub warnings: Vec<String>,
}

/// Where a switch finds an incoming job's memory by its key: the
/// executor's jobs by `JobId`, the Slurm agent's by Slurm job.
pub trait Memories<K> {
    fn memory(&mut self, job: &K) -> Option<&mut JobMemory>;
}

impl<K: Ord> Memories<K> for BTreeMap<K, JobMemory> {
    fn memory(&mut self, job: &K) -> Option<&mut JobMemory> {
        self.get_mut(job)
    }
}

/// How a switch opened ([`NodeSwitch::open_switch`]).
#[derive(Debug)]
pub struct Opening<K> {
    /// Memory left for page-ins started early: the prefetches of the
    /// switch ([`NodeSwitch::page_in_early`]) take from it.
    pub budget: u64,
    /// The incoming jobs brought back from their records: the make-room
    /// for each streams its page-in (`make_room`'s `stream`).
    pub paged_in: Vec<K>,
}

/// What a switch's loop ([`NodeSwitch::carry_out`]) asks of the executor
/// that runs it: its jobs' memory by key, how a job stops before its
/// page-out and runs again after its page-in, and the items of its own that
/// move no memory. The one-node executor freezes and thaws; the Slurm
/// agent's jobs were stopped by Slurm before its switch and are resumed by
/// the controller after it.
pub trait SwitchHost<K>: Memories<K> {
    /// What the executor's switch lists: the one-node executor's actions,
    /// the agent's steps.
    type Item;
    /// The page-in `item` asks for, seen before the switch opens
    /// ([`NodeSwitch::open_switch`]).
    fn page_in(item: &Self::Item) -> Option<(K, PageInPlan)>;
    /// `item` as a step on memory, made when the loop reaches it; None
    /// once the executor carried it out itself (a start, a renice).
    fn step(&mut self, item: Self::Item) -> Result<Option<NodeStep<K>>>;
    /// A job the node holds nothing of yet, for a make-room before its
    /// processes came (the Slurm agent's start); None: the step is skipped.
    fn fresh(&self, _job: &K) -> Option<JobMemory> {
        None
    }
    /// Before its page-out: the job stops; its processes, which a stopped
    /// job keeps as listed.
    fn stop(&mut self, job: &K, steps: &mut SwitchSteps) -> Result<Vec<i32>>;
    /// After its page-out.
    fn stopped(&mut self, _job: &K, _out: &Suspended) {}
    /// After its page-in: it may run again.
    fn resume(&mut self, _job: &K, _steps: &mut SwitchSteps) -> Result<()> {
        Ok(())
    }
    /// Selective page-out on or off; a warning for the switch's record.
    fn protect(&mut self, job: &K, on: bool) -> Option<String>;
    /// A step begins (`done` false) or has ended: for a display of the
    /// switch in progress (memgangd's `top`, through the executor's
    /// `SwitchWatch`).
    fn watch(&mut self, _step: &NodeStep<K>, _done: bool) {}
}

/// What a switch's steps moved on one node, and where their time went:
/// what the executor's switch record and the agent's report are made of.
#[derive(Debug, Default)]
pub struct Moved {
    pub paged_out: u64,
    pub paged_in: u64,
    pub page_out: Duration,
    pub page_in: Duration,
    /// Bytes background writing had advised out before the page-outs.
    pub background: u64,
    pub warnings: Vec<String>,
    /// Not closed: the executor closes it with the switch's length.
    pub steps: SwitchSteps,
}

/// One node's pool and the mechanisms its switches move memory with.
#[derive(Clone, Debug)]
pub struct NodeSwitch {
    pub memory: GroupMemory,
    pub pool: GroupPath,
    pub pool_memory: u64,
    /// What the pool's suspended jobs are expected to touch.
    pub suspended: touched::Suspended,
}

impl NodeSwitch {
    /// Bytes `job` is short of: the working set a switch makes room for
    /// (`room::room_for`: what it will touch when it fits beside what the
    /// suspended jobs will, else what it kept) and the margin, less what it
    /// has resident and what the pool has free.
    pub fn shortfall(&self, job: &JobMemory) -> u64 {
        let others = self.suspended.others(&job.group);
        let ws = room::room_for(
            job.estimate(),
            others,
            self.pool_memory,
            memory::ROOM_MARGIN,
        );
        self.memory
            .shortfall(&job.group, ws, &self.pool, self.pool_memory)
    }

    /// Before a switch: will swap hold what must leave memory for the
    /// `incoming` jobs?
    pub fn check<'a>(&self, incoming: impl IntoIterator<Item = &'a JobMemory>) -> Option<String> {
        let need: u64 = incoming.into_iter().map(|j| self.shortfall(j)).sum();
        capacity::check_switch(need, self.memory.swap_room(), self.memory.swap_reserve)
    }

    /// Memory the pool has free now, less the margin.
    pub fn free_for_page_in(&self) -> u64 {
        self.memory.free_for_page_in(&self.pool, self.pool_memory)
    }

    /// Open a switch that brings back the `incoming` jobs (each with its
    /// page-in plan), found in `jobs`: the page-in budget is the memory the
    /// pool has free now, and an overlapped set switch's page-ins start at
    /// once, in that order, beside the page-outs to come (paper 001), from
    /// that budget. Every executor opens its switches here.
    pub fn open_switch<K: Copy>(
        &self,
        incoming: &[(K, PageInPlan)],
        jobs: &mut impl Memories<K>,
    ) -> Opening<K> {
        let mut budget = self.free_for_page_in();
        for (job, plan) in incoming {
            if *plan == PageInPlan::Overlapped {
                if let Some(j) = jobs.memory(job) {
                    self.page_in_early(j, &mut budget);
                }
            }
        }
        let paged_in = incoming
            .iter()
            .filter(|(_, plan)| plan.uses_records())
            .map(|(job, _)| *job)
            .collect();
        Opening { budget, paged_in }
    }

    /// Page a stopped job out by `plan`, after ending its background
    /// writing and waiting for its huge pages to go back; keep its records
    /// (background writing's, taken before it wrote pages out, where there
    /// are some) and its working-set estimate. `pids` are its processes,
    /// listed by the caller once it stopped the job: a stopped job cannot
    /// fork, so one list serves the caller's own samples of it too. Its
    /// steps are timed into `steps`.
    pub fn suspend(
        &self,
        job: &mut JobMemory,
        pids: &[i32],
        plan: PageOutPlan,
        steps: &mut SwitchSteps,
    ) -> Suspended {
        let mut out = Suspended {
            huge_restored: SwitchSteps::time(&mut steps.huge_wait_s, || job.wait_huge()),
            ..Suspended::default()
        };
        let bg = job.bg.take().map(|w| {
            let report = w.stop();
            out.background = report.bytes_written;
            bg_done(&job.name, report)
        });
        let anon = self
            .memory
            .backend
            .memory_stat(&job.group)
            .ok()
            .map(|m| m.anon_bytes);
        // What it touched this quantum, read beside the page-out's scan and
        // before the page-out takes it.
        SwitchSteps::time(&mut steps.wss_s, || touched::wait(job.clearing.take()));
        let reading = (plan != PageOutPlan::Lru).then(|| touched::start_reading(pids, &job.name));
        let t = Instant::now();
        let paged = self
            .memory
            .page_out(&job.group, pids, &job.name, plan, steps);
        out.took = t.elapsed();
        job.touched = SwitchSteps::time(&mut steps.wss_s, || touched::wait(reading));
        out.paged_out = paged.bytes;
        out.warnings = paged.warnings;
        if let Some(records) = paged.records {
            job.huge_records = paged.huge;
            job.records = bg.filter(|b| !b.is_empty()).unwrap_or(records);
        }
        // A record is the better estimate where the job's pages were no
        // longer mapped (after background writing): not counted in anon.
        let recorded: u64 = job.records.iter().map(PageRecord::bytes).sum();
        job.ws_bytes = anon.map(|a| a.max(recorded));
        self.suspended.set(&job.group, job.estimate());
        out
    }

    /// Page the running job's resident runs out in the background over
    /// `window` (paper 000 §3.4); its next [`suspend`](Self::suspend)
    /// ends it.
    pub fn write_back(&self, job: &mut JobMemory, window: Duration) {
        let pids = self
            .memory
            .backend
            .procs_recursive(&job.group)
            .unwrap_or_default();
        if let Some(old) = job.bg.take() {
            old.stop();
        }
        job.bg = Some(BgWriter::start(self.memory.paging.clone(), pids, window));
    }

    /// `so/ao`: free what `job` is short of from the stopped `victims`
    /// (group, name), in order. With `stream`, the job's records are paged
    /// in beside the page-out as memory frees ([`Self::stream_page_in`]).
    /// Returns the bytes freed and how long the page-out took.
    pub fn make_room(
        &self,
        job: &mut JobMemory,
        victims: &[(GroupPath, String)],
        stream: bool,
        warnings: &mut Vec<String>,
        steps: &mut SwitchSteps,
    ) -> (u64, Duration) {
        let need = self.shortfall(job);
        let done = stream.then(|| self.stream_page_in(job));
        let t = Instant::now();
        let freed = self
            .memory
            .make_room(need, victims, &job.name, warnings, steps);
        let took = t.elapsed();
        if let Some(done) = done {
            done.store(true, Ordering::Release);
        }
        (freed, took)
    }

    /// Start paging in the first `budget` bytes of a stopped job's records
    /// in a thread (paper 001's overlapped restart and prefetch); the rest
    /// stays recorded for its resume. One budget for the jobs of a set:
    /// each taking all the free memory filled the pool with up to the
    /// set's size and pushed the running set out (bench/hybrid.sh, n = 7).
    pub fn page_in_early(&self, job: &mut JobMemory, budget: &mut u64) {
        if job.early.is_some() || job.records.is_empty() || *budget == 0 {
            return;
        }
        let (head, tail) = split_records(std::mem::take(&mut job.records), *budget);
        *budget = budget.saturating_sub(head.iter().map(PageRecord::bytes).sum());
        job.records = tail;
        let paging = self.memory.paging.clone();
        job.early = Some(std::thread::spawn(move || {
            mechanisms::page_in(paging.as_ref(), &head)
        }));
    }

    /// Page a job's records in while a make-room pages others out for it:
    /// a thread brings back as much as the pool has free, again and again
    /// as the page-out frees more, instead of waiting for the whole
    /// page-out first (a switch took their sum: docs/realapps.md). It only
    /// ever takes memory that is free, so it cannot push the outgoing jobs'
    /// pages out or fill the pool (the OOM a one-shot page-in beside the
    /// page-out brought: [`GroupMemory::fitting_records`]). Once the
    /// returned flag is set (the page-out is over) it takes what is free one
    /// last time; what still does not fit is faulted in on demand, as under
    /// `lru`.
    fn stream_page_in(&self, job: &mut JobMemory) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        if job.early.is_some() || job.records.is_empty() {
            done.store(true, Ordering::Relaxed);
            return done;
        }
        let records = std::mem::take(&mut job.records);
        let page_out_done = done.clone();
        let this = self.clone();
        job.early = Some(std::thread::spawn(move || {
            // Budgeted by what is on swap: a recorded page still resident
            // needs no memory (a process that is gone has nothing to page).
            let mut left: Vec<PageRecord> = records
                .iter()
                .filter_map(|r| this.memory.paging.swapped(r).ok())
                .filter(|r| !r.runs.is_empty())
                .collect();
            let mut all = PageInDone::default();
            while !left.is_empty() {
                // Read before the pool: what is free after the page-out
                // ended is the last chance.
                let last = page_out_done.load(Ordering::Acquire);
                let free = this.free_for_page_in();
                if free < STREAM_CHUNK && !last {
                    std::thread::sleep(STREAM_POLL);
                    continue;
                }
                let (head, tail) = split_records(left, free);
                left = tail;
                if head.is_empty() {
                    break;
                }
                let done = mechanisms::page_in(this.memory.paging.as_ref(), &head);
                all.bytes += done.bytes;
                all.took += done.took;
                all.errors.extend(done.errors);
                if last {
                    break;
                }
            }
            all
        }));
        done
    }

    /// Bring a stopped job's memory back before it runs: wait for a
    /// page-in started early, then (`records`) page in what is left of its
    /// records, cut to what the pool can take now
    /// ([`GroupMemory::fitting_records`]; not overlapped with the page-out
    /// that made its room), and start putting its huge pages back. Failures
    /// are said here; the kernel pages the rest on demand. The waits are
    /// timed into `steps`.
    pub fn resume(
        &self,
        job: &mut JobMemory,
        records: bool,
        steps: &mut SwitchSteps,
    ) -> PageInDone {
        let early = SwitchSteps::time(&mut steps.stream_wait_s, || {
            job.early.take().map(|h| h.join())
        });
        let now = SwitchSteps::time(&mut steps.page_in_s, || {
            records.then(|| {
                let taken = std::mem::take(&mut job.records);
                let fit = self.memory.fitting_records(
                    taken,
                    &job.group,
                    &job.name,
                    &self.pool,
                    self.pool_memory,
                );
                mechanisms::page_in(self.memory.paging.as_ref(), &fit)
            })
        });
        let mut all = PageInDone::default();
        for done in early.into_iter().flatten().chain(now) {
            all.bytes += done.bytes;
            all.took += done.took;
            for e in &done.errors {
                memory::failed(&job.name, "paging in", e);
            }
            all.errors.extend(done.errors);
        }
        // Its accessed bits from now on are its next quantum's (the
        // page-in set them).
        self.suspended.resumed(&job.group);
        if records {
            let (backend, group) = (self.memory.backend.clone(), job.group.clone());
            job.clearing = Some(touched::start_clearing(backend, group, &job.name));
        }
        if records && job.huge.is_none() {
            let huge = std::mem::take(&mut job.huge_records);
            job.huge = HugeRestore::start(self.memory.paging.clone(), huge);
        }
        all
    }
}

/// The switch's loop, written once for every executor.
impl NodeSwitch {
    /// Carry a switch's `items` out in order on `host`'s jobs: opened by
    /// [`open_switch`](Self::open_switch) with the page-ins they ask for,
    /// each item made a step as it is reached (or carried out by the host
    /// itself) and the step carried out by the engine, the host stopping a
    /// job before its page-out and letting it go after its page-in. A host's
    /// error (a job that cannot be frozen or thawed) ends the switch.
    pub fn carry_out<K: Copy + PartialEq, H: SwitchHost<K>>(
        &self,
        items: Vec<H::Item>,
        host: &mut H,
    ) -> Result<Moved> {
        let incoming: Vec<(K, PageInPlan)> = items.iter().filter_map(H::page_in).collect();
        let mut opening = self.open_switch(&incoming, host);
        let mut moved = Moved::default();
        for item in items {
            let Some(step) = host.step(item)? else {
                continue;
            };
            let watched = step.clone();
            host.watch(&watched, false);
            match step {
                NodeStep::PageOut { job, plan } => {
                    self.page_out_step(job, plan, host, &mut moved)?
                }
                NodeStep::Protect { job, on } => moved.warnings.extend(host.protect(&job, on)),
                NodeStep::MakeRoom {
                    job,
                    declared,
                    from,
                } => {
                    let stream = opening.paged_in.contains(&job);
                    self.make_room_step(job, declared, &from, stream, host, &mut moved);
                }
                NodeStep::PageIn { job, plan } => self.page_in_step(job, plan, host, &mut moved)?,
                // One budget for all the jobs of the set being prefetched
                // (see `page_in_early`).
                NodeStep::Prefetch { job } => {
                    if let Some(j) = host.memory(&job) {
                        self.page_in_early(j, &mut opening.budget);
                    }
                }
                NodeStep::WriteBack { job, window } => {
                    if let Some(j) = host.memory(&job) {
                        self.write_back(j, window);
                    }
                }
            }
            host.watch(&watched, true);
        }
        Ok(moved)
    }

    /// `PageOut`: the host stops the job, the engine pages it out.
    fn page_out_step<K, H: SwitchHost<K>>(
        &self,
        job: K,
        plan: PageOutPlan,
        host: &mut H,
        moved: &mut Moved,
    ) -> Result<()> {
        if host.memory(&job).is_none() {
            return Ok(());
        }
        let pids = host.stop(&job, &mut moved.steps)?;
        let j = host.memory(&job).expect("held a moment ago");
        let out = self.suspend(j, &pids, plan, &mut moved.steps);
        host.stopped(&job, &out);
        moved.background += out.background;
        moved.paged_out += out.paged_out;
        moved.page_out += out.took;
        moved.warnings.extend(out.warnings);
        Ok(())
    }

    /// `MakeRoom`: free what `job` is short of from the stopped jobs
    /// `from` the host holds, in order; `stream`: its page-in streams
    /// beside.
    fn make_room_step<K, H: SwitchHost<K>>(
        &self,
        job: K,
        declared: Option<u64>,
        from: &[K],
        stream: bool,
        host: &mut H,
        moved: &mut Moved,
    ) {
        let victims: Vec<(GroupPath, String)> = from
            .iter()
            .filter_map(|v| host.memory(v).map(|j| (j.group.clone(), j.name.clone())))
            .collect();
        let mut fresh = match host.memory(&job) {
            Some(_) => None,
            None => host.fresh(&job),
        };
        let j = match fresh.as_mut() {
            Some(j) => j,
            None => match host.memory(&job) {
                Some(j) => j,
                None => return,
            },
        };
        if declared.is_some() {
            j.declared = declared;
        }
        let (freed, took) =
            self.make_room(j, &victims, stream, &mut moved.warnings, &mut moved.steps);
        moved.paged_out += freed;
        moved.page_out += took;
    }

    /// `PageIn`: the engine brings the job's memory back while it is still
    /// stopped, so that it runs without faulting; then the host lets it go.
    fn page_in_step<K, H: SwitchHost<K>>(
        &self,
        job: K,
        plan: PageInPlan,
        host: &mut H,
        moved: &mut Moved,
    ) -> Result<()> {
        let Some(j) = host.memory(&job) else {
            return Ok(());
        };
        let done = self.resume(j, plan.uses_records(), &mut moved.steps);
        moved.paged_in += done.bytes;
        moved.page_in += done.took;
        host.resume(&job, &mut moved.steps)
    }
}

/// What background writing did, said when it had trouble.
fn bg_done(name: &str, report: BgReport) -> Vec<PageRecord> {
    for e in &report.errors {
        memory::failed(name, "background writing", e);
    }
    tracing::debug!(
        "job {name}: background writing advised {} bytes",
        report.bytes_written
    );
    report.records
}

/// The first `bytes` of `records` (in their order) and the rest.
fn split_records(records: Vec<PageRecord>, bytes: u64) -> (Vec<PageRecord>, Vec<PageRecord>) {
    let mut budget = bytes;
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    for rec in records {
        let (h, t) = runs::split_at(&rec.runs, budget);
        budget = budget.saturating_sub(runs::bytes(&h));
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
    (head, tail)
}
