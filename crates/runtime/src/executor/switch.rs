//! Carrying out a policy's actions, and the switch they form: page-out,
//! make-room and page-in (paper 000 §3, paper 001's overlapped restart),
//! each carried out by the switch engine ([`NodeSwitch`]), timed as one and
//! recorded as a [`Switch`]. What is the executor's own: freezing and
//! thawing, starting jobs, renicing, the switch's samples and record.

use super::jobs::Jobs;
use super::sampling::{allowance_for, Sampling};
use super::Env;
use crate::engine::NodeSwitch;
use crate::mechanisms::{SwitchPoint, SwitchSampler};
use crate::results::{Switch, SwitchSteps};
use anyhow::{Context, Result};
use memgang_core::{Action, JobId, PageOutPlan, State};
use memgang_linux::counters::VmStat;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a node's switch is doing now, for a display on another thread
/// (memgangd's `top`): written by the node's thread at each step of a
/// switch, copied by a reader. Its lock is held only to write or copy a
/// few ids, never while paging, so a reader does not wait for a switch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwitchNow {
    /// When the switch in progress began; None between switches.
    pub since: Option<Instant>,
    /// The jobs it is paging out now, and in (into a job's records or
    /// streamed as room frees).
    pub paging_out: Vec<JobId>,
    pub paging_in: Vec<JobId>,
    /// The jobs it has paged out (and left frozen), and paged in (and
    /// thawed), so far.
    pub paged_out: Vec<JobId>,
    pub paged_in: Vec<JobId>,
}

/// A node's [`SwitchNow`], shared with its readers.
pub type SwitchWatch = Arc<Mutex<SwitchNow>>;

/// Writes a switch's progress into its watch; at its end (or an error
/// that ends it early) the watch reads "no switch" again.
struct Watching<'a>(Option<&'a SwitchWatch>);

impl Watching<'_> {
    fn set(&self, f: impl FnOnce(&mut SwitchNow)) {
        if let Some(w) = self.0 {
            f(&mut w.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// `jobs` paging out (`out`) or in, from now until `f` returns.
    fn paging<T>(&self, out: &[JobId], into: &[JobId], f: impl FnOnce() -> T) -> T {
        self.set(|n| {
            n.paging_out.extend_from_slice(out);
            n.paging_in.extend_from_slice(into);
        });
        let r = f();
        self.set(|n| {
            n.paging_out.retain(|j| !out.contains(j));
            n.paging_in.retain(|j| !into.contains(j));
            n.paged_out.extend_from_slice(out);
            n.paged_in.extend_from_slice(into);
        });
        r
    }
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.set(|n| *n = SwitchNow::default());
    }
}

/// A node's switch state, apart from its jobs and its loop: the switch
/// engine over its pool (which owns the arithmetic and the memory moves),
/// the switches done (the run's record), whether selective page-out was
/// found missing (said once), and what the switch in progress is doing.
pub(super) struct SwitchState {
    pub(super) engine: NodeSwitch,
    pub(super) done: Vec<Switch>,
    pub(super) protect_failed: bool,
    pub(super) watch: SwitchWatch,
}

/// What a node lends [`SwitchState::carry_out`]: its mechanisms, jobs and
/// samples, the policy's view (read-only: the policy hears of the batch
/// once it is carried out) and the node's clock.
pub(super) struct NodeParts<'a> {
    pub(super) env: &'a Env,
    pub(super) jobs: &'a mut Jobs,
    pub(super) sampling: &'a mut Sampling,
    pub(super) state: &'a State,
    pub(super) t0: Instant,
}

/// What the policy is to hear of a batch carried out.
pub(super) struct Carried {
    /// How long the switch took, if the batch was one (`SwitchDone`).
    pub(super) switch: Option<Duration>,
    /// Jobs that could not start (`JobFinished`, once finished unstarted).
    pub(super) failed: Vec<JobId>,
}

/// What a batch has done so far: its switch's record in the making.
#[derive(Default)]
struct Work {
    suspended: Vec<String>,
    resumed: Vec<String>,
    failed: Vec<JobId>,
    paged_out: u64,
    paged_in: u64,
    out_time: Duration,
    in_time: Duration,
    warnings: Vec<String>,
    /// Bytes background writing had paged out before the switch.
    bg_bytes: u64,
    /// Its steps timed, the time account's samples at freezes and thaws
    /// among them: measured, so that every run shows what they cost.
    steps: SwitchSteps,
    /// The node's paging counters before the switch, and its samples.
    vm_before: Option<VmStat>,
    samples: Vec<SwitchPoint>,
}

impl SwitchState {
    /// Carry out one batch of actions in order. Actions that stop or
    /// restart jobs form a switch, timed as one and recorded.
    pub(super) fn carry_out(&mut self, batch: Vec<Action>, node: NodeParts) -> Result<Carried> {
        let NodeParts {
            env,
            jobs,
            sampling,
            state,
            t0,
        } = node;
        let began = Instant::now();
        let at = t0.elapsed();
        let is_switch = batch.iter().any(Action::is_switch);
        let mut w = Work::default();
        let watch = self.watch.clone();
        let watching = Watching(is_switch.then_some(&watch));
        watching.set(|n| n.since = Some(began));
        if is_switch {
            w.warnings.extend(self.check_swap(jobs, &batch));
        }
        let sampler = is_switch.then(|| {
            SwitchSampler::start(
                env.backend.clone(),
                env.counters.clone(),
                self.engine.pool.clone(),
                t0,
                sampling.interval,
            )
        });
        w.vm_before = env.counters.vmstat().ok();
        let incoming: Vec<_> = batch
            .iter()
            .filter_map(|a| match a {
                Action::Resume { job, page_in } => Some((*job, *page_in)),
                _ => None,
            })
            .collect();
        let mut opening = self.engine.open_switch(&incoming, jobs);
        for action in batch {
            let job = action.job();
            let i = job.index();
            match action {
                Action::Start { .. } => {
                    let allowance = allowance_for(&jobs.runs, state, self.engine.pool_memory, job);
                    match jobs.start(env, job, allowance, t0) {
                        Ok(()) => w.resumed.push(jobs.name(job).to_string()),
                        Err(e) => {
                            env.say(format!(
                                "{:>7.1}s  {} could not start: {e:#}",
                                at.as_secs_f64(),
                                jobs.name(job)
                            ));
                            jobs.runs[i].result.error = Some(format!("{e:#}"));
                            w.failed.push(job);
                        }
                    }
                }
                Action::Suspend { page_out, .. } => {
                    watching.paging(&[job], &[], || {
                        self.suspend(env, jobs, job, page_out, t0, &mut w)
                    })?;
                }
                Action::Protect { on, .. } => self.protect(env, jobs, job, on),
                Action::MakeRoom { from, .. } => {
                    // The stopped jobs it takes memory from, in the
                    // policy's order.
                    let victims: Vec<_> = from
                        .iter()
                        .map(|v| {
                            (
                                jobs.runs[v.index()].group.clone(),
                                jobs.name(*v).to_string(),
                            )
                        })
                        .collect();
                    let stream = opening.paged_in.contains(&job);
                    let into = if stream { vec![job] } else { Vec::new() };
                    let (freed, took) = watching.paging(&from, &into, || {
                        self.engine.make_room(
                            &mut jobs.runs[i].mem,
                            &victims,
                            stream,
                            &mut w.warnings,
                            &mut w.steps,
                        )
                    });
                    w.paged_out += freed;
                    w.out_time += took;
                }
                Action::Resume { page_in, .. } => {
                    watching.paging(&[], &[job], || {
                        self.resume(env, jobs, job, page_in.uses_records(), t0, &mut w)
                    })?;
                }
                Action::WriteBack { until, .. } => {
                    let window = until.saturating_sub(t0.elapsed());
                    self.engine.write_back(&mut jobs.runs[i].mem, window);
                }
                // One budget for all the jobs of the set being
                // prefetched (see `NodeSwitch::page_in_early`).
                Action::PageIn { .. } => {
                    self.engine
                        .page_in_early(&mut jobs.runs[i].mem, &mut opening.budget);
                }
                Action::Boost { nice, .. } => renice(env, jobs, job, nice, t0),
                Action::Defer { reason, .. } => {
                    env.say(format!("{} waits: {reason}", jobs.name(job)))
                }
            }
        }
        let failed = std::mem::take(&mut w.failed);
        let switch = is_switch.then(|| {
            w.samples = sampler.map(SwitchSampler::stop).unwrap_or_default();
            self.record(env, sampling, at, began, w)
        });
        Ok(Carried { switch, failed })
    }

    /// A switch done: its warnings said, its samples kept, its record
    /// added; how long it took.
    fn record(
        &mut self,
        env: &Env,
        sampling: &mut Sampling,
        at: Duration,
        began: Instant,
        w: Work,
    ) -> Duration {
        let took = began.elapsed();
        let vm_after = env.counters.vmstat().ok();
        let swapped = |f: fn(&VmStat) -> u64| match (&w.vm_before, &vm_after) {
            (Some(a), Some(b)) => f(b).saturating_sub(f(a)),
            _ => 0,
        };
        for w in &w.warnings {
            env.say(format!("{:>7.1}s  warning: {w}", at.as_secs_f64()));
        }
        for point in w.samples {
            sampling.switch_sample(point);
        }
        self.done.push(Switch {
            at_s: at.as_secs_f64(),
            took_s: took.as_secs_f64(),
            suspended: w.suspended,
            resumed: w.resumed,
            paged_out_bytes: w.paged_out,
            paged_in_bytes: w.paged_in,
            page_out_s: w.out_time.as_secs_f64(),
            page_in_s: w.in_time.as_secs_f64(),
            swap_in_pages: swapped(|v| v.pswpin),
            swap_out_pages: swapped(|v| v.pswpout),
            background_bytes: w.bg_bytes,
            warnings: w.warnings,
            // Counted from the samples once the run is over.
            faults_after: None,
            faults_after_before_exit: None,
            steps: Some(w.steps.close(took.as_secs_f64())),
        });
        took
    }

    /// Freeze a job the policy suspends and page it out by `page_out`.
    fn suspend(
        &self,
        env: &Env,
        jobs: &mut Jobs,
        job: JobId,
        page_out: PageOutPlan,
        t0: Instant,
        w: &mut Work,
    ) -> Result<()> {
        let i = job.index();
        SwitchSteps::time(&mut w.steps.freeze_s, || {
            env.freezer.freeze(&jobs.runs[i].group)
        })
        .with_context(|| format!("suspending job {}", jobs.name(job)))?;
        jobs.stop_interval(job, t0.elapsed());
        // Listed once: the freeze keeps the list as it is until the thaw,
        // for the account and the page-out.
        let pids = SwitchSteps::time(&mut w.steps.sampling_s, || {
            let group = &jobs.runs[i].group;
            let pids = (env.backend).procs_recursive(group).unwrap_or_default();
            let huge = (env.backend)
                .memory_stat(group)
                .ok()
                .and_then(|m| m.anon_huge_bytes);
            jobs.account.frozen(i, &pids, huge);
            pids
        });
        let j = &mut jobs.runs[i];
        let out = self
            .engine
            .suspend(&mut j.mem, &pids, page_out, &mut w.steps);
        j.result.huge_restored_bytes += out.huge_restored;
        w.bg_bytes += out.background;
        w.paged_out += out.paged_out;
        w.out_time += out.took;
        w.warnings.extend(out.warnings);
        w.suspended.push(jobs.name(job).to_string());
        Ok(())
    }

    /// Bring a job's memory back while it is still frozen, so that it
    /// resumes without faulting (`records`: by its page records), then
    /// thaw it.
    fn resume(
        &self,
        env: &Env,
        jobs: &mut Jobs,
        job: JobId,
        records: bool,
        t0: Instant,
        w: &mut Work,
    ) -> Result<()> {
        let i = job.index();
        let done = self
            .engine
            .resume(&mut jobs.runs[i].mem, records, &mut w.steps);
        w.paged_in += done.bytes;
        w.in_time += done.took;
        SwitchSteps::time(&mut w.steps.thaw_s, || {
            env.freezer.thaw(&jobs.runs[i].group)
        })
        .with_context(|| format!("resuming job {}", jobs.name(job)))?;
        jobs.runs[i].running_since = Some(t0.elapsed());
        SwitchSteps::time(&mut w.steps.sampling_s, || jobs.account.thawed(i));
        w.resumed.push(jobs.name(job).to_string());
        Ok(())
    }

    /// Selective page-out: protect a job the policy runs, expose one it
    /// suspends. Without the kernel's support the kernel's LRU decides
    /// alone, as under `lru`; said once.
    fn protect(&mut self, env: &Env, jobs: &Jobs, job: JobId, on: bool) {
        if self.protect_failed {
            return;
        }
        let group = &jobs.runs[job.index()].group;
        if let Err(e) = env.backend.protect(group, on) {
            self.protect_failed = true;
            env.say(format!(
                "warning: selective page-out (so) is not available, the kernel's LRU chooses \
                 what to page out instead: {e}"
            ));
        }
    }

    /// Before a switch: will the swap device hold what must leave memory
    /// for the incoming jobs? A full swap device is said before the switch,
    /// not found out by the OOM killer.
    fn check_swap(&self, jobs: &Jobs, batch: &[Action]) -> Option<String> {
        let incoming = batch
            .iter()
            .filter(|a| matches!(a, Action::Resume { .. } | Action::Start { .. }))
            .map(|a| &jobs.runs[a.job().index()].mem);
        self.engine.check(incoming).map(|w| {
            format!(
                "{w}; the kernel may kill a job (out of memory). Add swap (memgang testbed up \
                 --swap SIZE) or give the pool more memory"
            )
        })
    }
}

fn renice(env: &Env, jobs: &mut Jobs, job: JobId, nice: i32, t0: Instant) {
    let now = t0.elapsed().as_secs_f64();
    let j = &mut jobs.runs[job.index()];
    if let Some(since) = j.boosted_since.take() {
        j.result.boosted_s += now - since;
    }
    if nice < 0 {
        j.boosted_since = Some(now);
    }
    j.result.max_boost = j.result.max_boost.max(nice.unsigned_abs());
    for pid in env.backend.procs_recursive(&j.group).unwrap_or_default() {
        if let Err(e) = memgang_linux::process::set_nice_process(pid, nice) {
            tracing::warn!("renice of pid {pid} to {nice}: {e}");
        }
    }
}
