//! Carrying out a policy's actions, and the switch they form: page-out,
//! make-room and page-in (paper 000 §3, paper 001's overlapped restart),
//! carried out in order by the switch engine's loop
//! ([`NodeSwitch::carry_out`]), timed as one and recorded as a [`Switch`].
//! What is the executor's own ([`Host`]): freezing and thawing, starting
//! jobs, renicing, the switch's check, samples and record.

use super::jobs::Jobs;
use super::sampling::{allowance_for, Sampling};
use super::Env;
use crate::engine::{JobMemory, Memories, Moved, NodeSwitch, Suspended, SwitchHost};
use crate::mechanisms::SwitchSampler;
use crate::results::{Switch, SwitchSteps};
use anyhow::{Context, Result};
use memgang_core::{Action, JobId, NodeStep, PageInPlan, State};
use memgang_linux::counters::VmStat;
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

impl SwitchState {
    /// Carry out one batch of actions in order, through the switch
    /// engine's loop. Actions that stop or restart jobs form a switch,
    /// timed as one and recorded.
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
        let mut warnings = Vec::new();
        if is_switch {
            warnings.extend(self.check_swap(jobs, &batch));
        }
        // The time account's samples at freezes and thaws, inside the
        // switch: measured, so that every run shows what they cost.
        let sampler = is_switch.then(|| {
            SwitchSampler::start(
                env.backend.clone(),
                env.counters.clone(),
                self.engine.pool.clone(),
                t0,
                sampling.interval,
            )
        });
        let vm_before = env.counters.vmstat().ok();
        let mut host = Host {
            env,
            jobs,
            state,
            t0,
            at,
            pool_memory: self.engine.pool_memory,
            protect_failed: &mut self.protect_failed,
            suspended: Vec::new(),
            resumed: Vec::new(),
            failed: Vec::new(),
        };
        let mut moved = self.engine.carry_out(batch, &mut host)?;
        let Host {
            suspended,
            resumed,
            failed,
            ..
        } = host;
        let switch = is_switch.then(|| {
            let took = began.elapsed();
            let vm = (vm_before, env.counters.vmstat().ok());
            warnings.append(&mut moved.warnings);
            moved.warnings = warnings;
            for w in &moved.warnings {
                env.say(format!("{:>7.1}s  warning: {w}", at.as_secs_f64()));
            }
            for point in sampler.map(SwitchSampler::stop).unwrap_or_default() {
                sampling.switch_sample(point);
            }
            self.record(at, took, vm, moved, suspended, resumed);
            took
        });
        Ok(Carried { switch, failed })
    }

    /// A switch's record, made of what its steps moved and of the node's
    /// swap counters before and after it.
    fn record(
        &mut self,
        at: Duration,
        took: Duration,
        (vm_before, vm_after): (Option<VmStat>, Option<VmStat>),
        moved: Moved,
        suspended: Vec<String>,
        resumed: Vec<String>,
    ) {
        let swapped = |f: fn(&VmStat) -> u64| match (&vm_before, &vm_after) {
            (Some(a), Some(b)) => f(b).saturating_sub(f(a)),
            _ => 0,
        };
        self.done.push(Switch {
            at_s: at.as_secs_f64(),
            took_s: took.as_secs_f64(),
            suspended,
            resumed,
            paged_out_bytes: moved.paged_out,
            paged_in_bytes: moved.paged_in,
            page_out_s: moved.page_out.as_secs_f64(),
            page_in_s: moved.page_in.as_secs_f64(),
            swap_in_pages: swapped(|v| v.pswpin),
            swap_out_pages: swapped(|v| v.pswpout),
            background_bytes: moved.background,
            warnings: moved.warnings,
            // Counted from the samples once the run is over.
            faults_after: None,
            faults_after_before_exit: None,
            steps: Some(moved.steps.close(took.as_secs_f64())),
        });
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

/// What the executor lends the switch engine's loop for one batch: its
/// jobs (their memory, freezing and thawing them, starting and renicing
/// them) and the names of the jobs the switch stopped and let run, for its
/// record.
struct Host<'a> {
    env: &'a Env,
    jobs: &'a mut Jobs,
    state: &'a State,
    t0: Instant,
    /// When the batch began, on the node's clock.
    at: Duration,
    pool_memory: u64,
    protect_failed: &'a mut bool,
    suspended: Vec<String>,
    resumed: Vec<String>,
    failed: Vec<JobId>,
}

impl Memories<JobId> for Host<'_> {
    fn memory(&mut self, job: &JobId) -> Option<&mut JobMemory> {
        self.jobs.memory(job)
    }
}

impl SwitchHost<JobId> for Host<'_> {
    type Item = Action;

    fn page_in(action: &Action) -> Option<(JobId, PageInPlan)> {
        match action {
            Action::Resume { job, page_in } => Some((*job, *page_in)),
            _ => None,
        }
    }

    fn step(&mut self, action: Action) -> Result<Option<NodeStep<JobId>>> {
        let (env, t0) = (self.env, self.t0);
        match action {
            Action::Start { job, .. } => self.start(job),
            Action::Boost { job, nice } => renice(env, self.jobs, job, nice, t0),
            Action::Defer { job, reason, .. } => {
                env.say(format!("{} waits: {reason}", self.jobs.name(job)))
            }
            memory => return Ok(memory.node_step(t0.elapsed())),
        }
        Ok(None)
    }

    /// Freeze it; its pids listed once: the freeze keeps the list as it
    /// is until the thaw, for the account and the page-out.
    fn stop(&mut self, job: &JobId, steps: &mut SwitchSteps) -> Result<Vec<i32>> {
        let (env, i) = (self.env, job.index());
        SwitchSteps::time(&mut steps.freeze_s, || {
            env.freezer.freeze(&self.jobs.runs[i].group)
        })
        .with_context(|| format!("suspending job {}", self.jobs.name(*job)))?;
        self.jobs.stop_interval(*job, self.t0.elapsed());
        let jobs = &mut *self.jobs;
        Ok(SwitchSteps::time(&mut steps.sampling_s, || {
            let group = &jobs.runs[i].group;
            let pids = (env.backend).procs_recursive(group).unwrap_or_default();
            let huge = (env.backend)
                .memory_stat(group)
                .ok()
                .and_then(|m| m.anon_huge_bytes);
            jobs.account.frozen(i, &pids, huge);
            pids
        }))
    }

    fn stopped(&mut self, job: &JobId, out: &Suspended) {
        self.jobs.runs[job.index()].result.huge_restored_bytes += out.huge_restored;
        self.suspended.push(self.jobs.name(*job).to_string());
    }

    /// Thaw it, its memory back.
    fn resume(&mut self, job: &JobId, steps: &mut SwitchSteps) -> Result<()> {
        let (env, i) = (self.env, job.index());
        SwitchSteps::time(&mut steps.thaw_s, || {
            env.freezer.thaw(&self.jobs.runs[i].group)
        })
        .with_context(|| format!("resuming job {}", self.jobs.name(*job)))?;
        self.jobs.runs[i].running_since = Some(self.t0.elapsed());
        SwitchSteps::time(&mut steps.sampling_s, || self.jobs.account.thawed(i));
        self.resumed.push(self.jobs.name(*job).to_string());
        Ok(())
    }

    /// Selective page-out: protect a job the policy runs, expose one it
    /// suspends. Without the kernel's support the kernel's LRU decides
    /// alone, as under `lru`; said once (not a switch's warning).
    fn protect(&mut self, job: &JobId, on: bool) -> Option<String> {
        if *self.protect_failed {
            return None;
        }
        let group = &self.jobs.runs[job.index()].group;
        if let Err(e) = self.env.backend.protect(group, on) {
            *self.protect_failed = true;
            self.env.say(format!(
                "warning: selective page-out (so) is not available, the kernel's LRU chooses \
                 what to page out instead: {e}"
            ));
        }
        None
    }
}

impl Host<'_> {
    /// Start a job; one that cannot start is said and finishes unstarted.
    fn start(&mut self, job: JobId) {
        let (env, jobs) = (self.env, &mut *self.jobs);
        let allowance = allowance_for(&jobs.runs, self.state, self.pool_memory, job);
        match jobs.start(env, job, allowance, self.t0) {
            Ok(()) => self.resumed.push(jobs.name(job).to_string()),
            Err(e) => {
                env.say(format!(
                    "{:>7.1}s  {} could not start: {e:#}",
                    self.at.as_secs_f64(),
                    jobs.name(job)
                ));
                jobs.runs[job.index()].result.error = Some(format!("{e:#}"));
                self.failed.push(job);
            }
        }
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
