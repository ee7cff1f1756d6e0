//! Carrying out a policy's actions, and the switch they form: page-out,
//! make-room and page-in (paper 000 §3, paper 001's overlapped restart),
//! each carried out by the switch engine ([`NodeSwitch`]), timed as one and
//! recorded as a [`Switch`]. What is the executor's own: freezing and
//! thawing, starting jobs, renicing, the switch's samples and record.

use super::node::Node;
use crate::engine::NodeSwitch;
use crate::mechanisms::SwitchSampler;
use crate::results::Switch;
use anyhow::{Context, Result};
use memgang_core::{Action, Event, JobId, PageInPlan};
use memgang_linux::cgroup::GroupPath;
use memgang_linux::counters::VmStat;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A node's switch state, apart from its jobs and its loop: the switch
/// engine over its pool (which owns the arithmetic and the memory moves),
/// the switches done (the run's record) and whether selective page-out was
/// found missing (said once).
pub(super) struct SwitchState {
    pub(super) engine: NodeSwitch,
    pub(super) done: Vec<Switch>,
    pub(super) protect_failed: bool,
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
                    self.sw.engine.pool.clone(),
                    self.t0,
                    self.sample_interval,
                )
            });
            let vm_before = self.env.counters.vmstat().ok();
            // Overlapped set switch: the incoming jobs' page-in starts now,
            // beside the page-outs below, in the memory free right now.
            // Prefetches (PageIn) share the same budget.
            let mut budget = self.engine().free_for_page_in();
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
                    let engine = self.engine();
                    engine.page_in_early(&mut self.jobs[job.index()].mem, &mut budget);
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
                        self.env
                            .freezer
                            .freeze(&self.jobs[i].group)
                            .with_context(|| format!("suspending job {}", self.name(job)))?;
                        self.stop_interval(job, self.now());
                        self.account_frozen(i);
                        let engine = self.engine();
                        let j = &mut self.jobs[i];
                        let out = engine.suspend(&mut j.mem, page_out);
                        j.result.huge_restored_bytes += out.huge_restored;
                        bg_bytes += out.background;
                        paged_out += out.paged_out;
                        out_time += out.took;
                        warnings.extend(out.warnings);
                        suspended.push(self.name(job).to_string());
                    }
                    Action::Protect { on, .. } => self.protect(job, on),
                    Action::MakeRoom { from, .. } => {
                        let victims = self.victims(&from);
                        let stream = paged_in_jobs.contains(&job);
                        let engine = self.engine();
                        let (freed, took) = engine.make_room(
                            &mut self.jobs[i].mem,
                            &victims,
                            stream,
                            &mut warnings,
                        );
                        paged_out += freed;
                        out_time += took;
                    }
                    Action::Resume { page_in, .. } => {
                        // Bring its memory back while it is still frozen, so
                        // that it resumes without faulting.
                        let engine = self.engine();
                        let done = engine.resume(&mut self.jobs[i].mem, page_in.uses_records());
                        paged_in += done.bytes;
                        in_time += done.took;
                        self.env
                            .freezer
                            .thaw(&self.jobs[i].group)
                            .with_context(|| format!("resuming job {}", self.name(job)))?;
                        self.jobs[i].running_since = Some(self.now());
                        self.account_thawed(i);
                        resumed.push(self.name(job).to_string());
                    }
                    Action::WriteBack { until, .. } => {
                        let window = until.saturating_sub(self.now());
                        let engine = self.engine();
                        engine.write_back(&mut self.jobs[i].mem, window);
                    }
                    // One budget for all the jobs of the set being
                    // prefetched (see `NodeSwitch::page_in_early`).
                    Action::PageIn { .. } => {
                        let engine = self.engine();
                        engine.page_in_early(&mut self.jobs[i].mem, &mut budget);
                    }
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
                self.sw.done.push(Switch {
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

    /// The switch engine over this node's pool.
    pub(super) fn engine(&self) -> NodeSwitch {
        self.sw.engine.clone()
    }

    /// The stopped jobs a make-room takes memory from, in the policy's
    /// order.
    fn victims(&self, from: &[JobId]) -> Vec<(GroupPath, String)> {
        from.iter()
            .map(|v| {
                (
                    self.jobs[v.index()].group.clone(),
                    self.name(*v).to_string(),
                )
            })
            .collect()
    }

    /// Selective page-out: protect a job the policy runs, expose one it
    /// suspends. Without the kernel's support the kernel's LRU decides
    /// alone, as under `lru`; said once.
    fn protect(&mut self, job: JobId, on: bool) {
        if self.sw.protect_failed {
            return;
        }
        let group = &self.jobs[job.index()].group;
        if let Err(e) = self.env.backend.protect(group, on) {
            self.sw.protect_failed = true;
            self.say(format!(
                "warning: selective page-out (so) is not available, the kernel's LRU chooses \
                 what to page out instead: {e}"
            ));
        }
    }

    /// Before a switch: will the swap device hold what must leave memory
    /// for the incoming jobs? A full swap device is said before the switch,
    /// not found out by the OOM killer.
    fn check_swap(&self, batch: &[Action]) -> Option<String> {
        let incoming = batch
            .iter()
            .filter(|a| matches!(a, Action::Resume { .. } | Action::Start { .. }))
            .map(|a| &self.jobs[a.job().index()].mem);
        self.engine().check(incoming).map(|w| {
            format!(
                "{w}; the kernel may kill a job (out of memory). Add swap (memgang testbed up \
                 --swap SIZE) or give the pool more memory"
            )
        })
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
}

/// The time account's samples at each freeze and thaw (crate::account).
impl Node {
    fn account_frozen(&mut self, i: usize) {
        let pids = (self.env.backend)
            .procs_recursive(&self.jobs[i].group)
            .unwrap_or_default();
        self.account.frozen(i, &pids);
    }

    fn account_thawed(&mut self, i: usize) {
        let pids = (self.env.backend)
            .procs_recursive(&self.jobs[i].group)
            .unwrap_or_default();
        self.account.thawed(i, &pids);
    }
}
