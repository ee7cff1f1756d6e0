//! Carrying out a policy's actions, and the switch they form: page-out,
//! make-room and page-in (paper 000 §3, paper 001's overlapped restart),
//! timed as one and recorded as a [`Switch`].

use super::node::Node;
use crate::mechanisms::PageInDone;
use crate::mechanisms::{self, BgWriter, HugeRestore, SwitchSampler};
use crate::memory::GroupMemory;
use crate::results::Switch;
use anyhow::{Context, Result};
use memgang_core::{capacity, room};
use memgang_core::{Action, Event, JobId, PageInPlan, PageOutPlan};
use memgang_linux::counters::VmStat;
use memgang_linux::paging::PageRecord;
use memgang_linux::runs;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A streamed page-in waits until this much is free: one page-in window
/// (linux's `PAGE_IN_WINDOW`), so that each call keeps the disk's queue as
/// full as a bulk page-in does.
const STREAM_CHUNK: u64 = 32 << 20;
/// How often a streamed page-in looks at the pool while it waits: at the
/// page-out's 0.8 GB/s (docs/realapps.md), 2 ms is 1.6 MB, small beside a
/// chunk.
const STREAM_POLL: Duration = Duration::from_millis(2);

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

impl Node {
    /// Carry out actions in order. Actions that stop or restart jobs form a
    /// switch, timed as one; the policy hears of it as `SwitchDone`, and of
    /// jobs that could not start as `JobFinished`, which may bring more
    /// actions.
    pub(super) fn carry_out(&mut self, actions: Vec<Action>) -> Result<()> {
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
                    self.env.counters.clone(),
                    self.pool.clone(),
                    self.t0,
                    self.sample_interval,
                )
            });
            let vm_before = self.env.counters.vmstat().ok();
            // Overlapped set switch: the incoming jobs' page-in starts now,
            // beside the page-outs below, in the memory free right now.
            // Prefetches (PageIn) share the same budget.
            let mut budget = self.free_for_page_in();
            // Jobs this batch brings back from their records: the page-out
            // that makes their room streams their page-in (`MakeRoom`).
            let paged_in_jobs: Vec<JobId> = batch
                .iter()
                .filter_map(|a| match a {
                    Action::Resume { job, page_in } if page_in.uses_records() => Some(*job),
                    _ => None,
                })
                .collect();
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
                    Action::Start { .. } => match self.start(job) {
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
                        // Its huge pages going back must not race its page-out.
                        if let Some(h) = self.jobs[i].huge.take() {
                            self.jobs[i].result.huge_restored_bytes += h.wait();
                        }
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
                        let need = self.shortfall(job);
                        let freed = paged_in_jobs
                            .contains(&job)
                            .then(|| self.start_streamed_page_in(job));
                        let t = Instant::now();
                        paged_out += self.make_room(job, need, &from, &mut warnings);
                        out_time += t.elapsed();
                        if let Some(done) = freed {
                            done.store(true, Ordering::Release);
                        }
                    }
                    Action::Resume { page_in, .. } => {
                        // Bring its memory back while it is still frozen, so
                        // that it resumes without faulting.
                        // Not overlapped with the page-out that made its room:
                        // see `fitting_records`.
                        let early = self.jobs[i].early.take().map(|h| h.join());
                        let done = page_in.uses_records().then(|| {
                            let records = self.fitting_records(job);
                            mechanisms::page_in(self.env.paging.as_ref(), &records)
                        });
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
                        if page_in.uses_records() {
                            self.restore_huge_pages(job);
                        }
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
                        self.jobs[i].bg =
                            Some(BgWriter::start(self.env.paging.clone(), pids, window));
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
                let vm_after = self.env.counters.vmstat().ok();
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
                    // Counted from the samples once the run is over.
                    faults_after: None,
                    faults_after_before_exit: None,
                });
                queue.extend(self.sched.handle(self.now(), Event::SwitchDone { took }));
            }
            for job in failed {
                let now = self.now();
                self.finish_unstarted(job, now);
                queue.extend(self.sched.handle(now, Event::JobFinished(job)));
            }
        }
        Ok(())
    }

    /// The mechanisms a switch moves memory with.
    pub(super) fn memory(&self) -> GroupMemory {
        GroupMemory {
            backend: self.env.backend.clone(),
            paging: self.env.paging.clone(),
            counters: self.env.counters.clone(),
            swap_reserve: self.swap_reserve,
        }
    }

    /// Carry out a page-out plan on a frozen job; returns the bytes paged
    /// out. `bg` is what background writing did in its quantum's last part:
    /// its record, taken before it wrote pages out, is the quantum's working
    /// set.
    fn page_out(
        &mut self,
        job: JobId,
        plan: PageOutPlan,
        bg: Option<Vec<PageRecord>>,
        warnings: &mut Vec<String>,
    ) -> u64 {
        let out = self
            .memory()
            .page_out(&self.jobs[job.index()].group, self.name(job), plan);
        warnings.extend(out.warnings);
        if let Some(records) = out.records {
            let j = &mut self.jobs[job.index()];
            j.huge_records = out.huge;
            j.records = bg.filter(|b| !b.is_empty()).unwrap_or(records);
        }
        out.bytes
    }

    /// Put a resumed job's memory back on huge pages where huge pages
    /// mapped it before its page-out, beside it ([`HugeRestore`]).
    fn restore_huge_pages(&mut self, job: JobId) {
        let j = &mut self.jobs[job.index()];
        if j.huge.is_none() {
            let records = std::mem::take(&mut j.huge_records);
            j.huge = HugeRestore::start(self.env.paging.clone(), records);
        }
    }

    /// The job's records, cut to what the pool can take now (see
    /// [`GroupMemory::fitting_records`]).
    fn fitting_records(&mut self, job: JobId) -> Vec<PageRecord> {
        let records = std::mem::take(&mut self.jobs[job.index()].records);
        let j = &self.jobs[job.index()];
        self.memory().fitting_records(
            records,
            &j.group,
            &j.result.name,
            &self.pool,
            self.pool_memory,
        )
    }

    fn free_for_page_in(&self) -> u64 {
        self.memory().free_for_page_in(&self.pool, self.pool_memory)
    }

    /// Start paging in the first `budget` bytes of a suspended job's
    /// records in a thread (paper 001's overlapped restart and prefetch);
    /// the rest stays recorded for its resume. The job stays frozen.
    fn start_early_page_in(&mut self, job: JobId, budget: &mut u64) {
        let j = &mut self.jobs[job.index()];
        if j.early.is_some() || j.records.is_empty() || *budget == 0 {
            return;
        }
        let (head, tail) = split_records(std::mem::take(&mut j.records), *budget);
        *budget = budget.saturating_sub(head.iter().map(PageRecord::bytes).sum());
        j.records = tail;
        let paging = self.env.paging.clone();
        j.early = Some(std::thread::spawn(move || {
            mechanisms::page_in(paging.as_ref(), &head)
        }));
    }

    /// Page a job's records in while a `MakeRoom` pages others out for
    /// it: a thread brings back as much as the pool has free, again and
    /// again as the page-out frees more, instead of waiting for the whole
    /// page-out first (a switch took their sum: docs/realapps.md). It only
    /// ever takes memory that is free, so it cannot push the outgoing jobs'
    /// pages out or fill the pool (the OOM a one-shot page-in beside the
    /// page-out brought: [`GroupMemory::fitting_records`]). Once the
    /// returned flag is set (the page-out is over) it takes what is free one
    /// last time; what still does not fit is faulted in on demand, as under
    /// `lru`.
    fn start_streamed_page_in(&mut self, job: JobId) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        let memory = self.memory();
        let (pool, pool_memory) = (self.pool.clone(), self.pool_memory);
        let j = &mut self.jobs[job.index()];
        if j.early.is_some() || j.records.is_empty() {
            done.store(true, Ordering::Relaxed);
            return done;
        }
        let records = std::mem::take(&mut j.records);
        let page_out_done = done.clone();
        j.early = Some(std::thread::spawn(move || {
            // Budgeted by what is on swap: a recorded page still resident
            // needs no memory (a process that is gone has nothing to page).
            let mut left: Vec<PageRecord> = records
                .iter()
                .filter_map(|r| memory.paging.swapped(r).ok())
                .filter(|r| !r.runs.is_empty())
                .collect();
            let mut all = PageInDone::default();
            while !left.is_empty() {
                // Read before the pool: what is free after the page-out
                // ended is the last chance.
                let last = page_out_done.load(Ordering::Acquire);
                let free = memory.free_for_page_in(&pool, pool_memory);
                if free < STREAM_CHUNK && !last {
                    std::thread::sleep(STREAM_POLL);
                    continue;
                }
                let (head, tail) = split_records(left, free);
                left = tail;
                if head.is_empty() {
                    break;
                }
                let done = mechanisms::page_in(memory.paging.as_ref(), &head);
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
        let j = &self.jobs[job.index()];
        let ws = room::working_set(j.ws_bytes, j.declared);
        self.memory()
            .shortfall(&j.group, ws, &self.pool, self.pool_memory)
    }

    /// `so/ao`: reclaim the incoming job's shortfall from the suspended
    /// jobs in the policy's order (see [`GroupMemory::make_room`]).
    fn make_room(
        &mut self,
        job: JobId,
        need: u64,
        from: &[JobId],
        warnings: &mut Vec<String>,
    ) -> u64 {
        let victims: Vec<_> = from
            .iter()
            .map(|v| {
                (
                    self.jobs[v.index()].group.clone(),
                    self.name(*v).to_string(),
                )
            })
            .collect();
        self.memory()
            .make_room(need, &victims, self.name(job), warnings)
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
        capacity::check_switch(need, self.swap_room(), self.swap_reserve).map(|w| {
            format!(
                "{w}; the kernel may kill a job (out of memory). Add swap (memgang testbed up \
                 --swap SIZE) or give the pool more memory"
            )
        })
    }

    fn paging_failed(&self, job: JobId, what: &str, e: &memgang_linux::Error) {
        crate::memory::failed(self.name(job), what, e);
    }

    fn renice(&mut self, job: JobId, nice: i32) {
        let now = self.now().as_secs_f64();
        let j = &mut self.jobs[job.index()];
        if let Some(since) = j.boosted_since.take() {
            j.result.boosted_s += now - since;
        }
        if nice < 0 {
            j.boosted_since = Some(now);
        }
        j.result.max_boost = j.result.max_boost.max(nice.unsigned_abs());
        for pid in self
            .env
            .backend
            .procs_recursive(&self.jobs[job.index()].group)
            .unwrap_or_default()
        {
            if let Err(e) = memgang_linux::process::set_nice_process(pid, nice) {
                tracing::warn!("renice of pid {pid} to {nice}: {e}");
            }
        }
    }

    fn swap_room(&self) -> u64 {
        self.memory().swap_room()
    }
}
