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
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a node's switch is doing now, for a display on another thread
/// (memgangd's `top`): written by the node's thread at each step of the
/// switch engine's loop ([`SwitchHost::watch`]), copied by a reader. Its
/// lock is held only to write or copy a few ids, never while paging, so a
/// reader does not wait for a switch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwitchNow {
    /// When the switch in progress began; None between switches.
    pub since: Option<Instant>,
    /// The jobs it is paging out now (a page-out, or a make-room taking
    /// their memory), and in.
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
struct Watching(Option<SwitchWatch>);

impl Watching {
    fn set(&self, f: impl FnOnce(&mut SwitchNow)) {
        if let Some(w) = &self.0 {
            f(&mut w.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// A step of the engine's loop begins (`done` false) or ends.
    fn step(&self, step: &NodeStep<JobId>, done: bool) {
        let (out, into): (&[JobId], &[JobId]) = match step {
            NodeStep::PageOut { job, .. } => (std::slice::from_ref(job), &[]),
            NodeStep::MakeRoom { from, .. } => (from, &[]),
            NodeStep::PageIn { job, .. } => (&[], std::slice::from_ref(job)),
            _ => return,
        };
        self.set(|n| {
            if done {
                n.paging_out.retain(|j| !out.contains(j));
                n.paging_in.retain(|j| !into.contains(j));
                n.paged_out.extend_from_slice(out);
                n.paged_in.extend_from_slice(into);
            } else {
                n.paging_out.extend_from_slice(out);
                n.paging_in.extend_from_slice(into);
            }
        });
    }
}

impl Drop for Watching {
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
    /// Every switch so far counted, also those a service has let go of
    /// with the jobs they moved ([`super::Node::forget`]).
    pub(super) totals: SwitchTotals,
    pub(super) protect_failed: bool,
    pub(super) watch: SwitchWatch,
}

/// The switches of a node's life, summed: what stays of them once their
/// jobs are forgotten.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SwitchTotals {
    pub count: u64,
    pub seconds: f64,
    pub paged_out_bytes: u64,
    pub paged_in_bytes: u64,
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
    /// timed as one and recorded. A job the switch would run into memory
    /// suspended jobs hold locked is kept stopped instead
    /// ([`memgang_core::capacity::check_pinned`]; `Jobs::release_held`
    /// runs it once it fits): it gets no room and is not resumed.
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
        let holds: HashMap<JobId, String> = batch
            .iter()
            .filter(|a| matches!(a, Action::Resume { .. } | Action::Start { .. }))
            .filter_map(|a| Some((a.job(), jobs.hold(a.job(), state, self.engine.pool_memory)?)))
            .collect();
        let batch = hold_back(batch, &holds, jobs, &mut warnings);
        let watching = Watching(is_switch.then(|| self.watch.clone()));
        watching.set(|n| n.since = Some(began));
        let mut host = Host {
            env,
            jobs,
            state,
            t0,
            at,
            pool_memory: self.engine.pool_memory,
            protect_failed: &mut self.protect_failed,
            holds: &holds,
            warnings: Vec::new(),
            suspended: Vec::new(),
            resumed: Vec::new(),
            failed: Vec::new(),
            watching,
        };
        let mut moved = self.engine.carry_out(batch, &mut host)?;
        let Host {
            suspended,
            resumed,
            failed,
            warnings: held_started,
            watching,
            ..
        } = host;
        warnings.extend(held_started);
        // The switch is over for the node's readers.
        drop(watching);
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
        self.totals.count += 1;
        self.totals.seconds += took.as_secs_f64();
        self.totals.paged_out_bytes += moved.paged_out;
        self.totals.paged_in_bytes += moved.paged_in;
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
            .map(|a| &jobs.runs[a.job()].mem);
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
    /// Jobs the batch would run that are kept stopped, with why.
    holds: &'a HashMap<JobId, String>,
    /// Jobs started and held at once, said in the switch's warnings.
    warnings: Vec<String>,
    suspended: Vec<String>,
    resumed: Vec<String>,
    failed: Vec<JobId>,
    /// The switch's progress, for the node's readers.
    watching: Watching,
}

impl Memories<JobId> for Host<'_> {
    /// None also for a job that failed to start earlier in this batch: it
    /// ends unstarted once the batch is over ([`Jobs::memory`]).
    fn memory(&mut self, job: &JobId) -> Option<&mut JobMemory> {
        if self.failed.contains(job) {
            return None;
        }
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
            Action::Start { job, .. } => self.start(job)?,
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
        // Stopped already if it was held: the policy stops it now.
        self.jobs.runs[*job].held = None;
        SwitchSteps::time(&mut steps.freeze_s, || {
            env.freezer.freeze(&self.jobs.runs[*job].group)
        })
        .with_context(|| format!("suspending job {}", self.jobs.name(*job)))?;
        self.jobs.stop_interval(*job, self.t0.elapsed());
        let jobs = &mut *self.jobs;
        Ok(SwitchSteps::time(&mut steps.sampling_s, || {
            let group = &jobs.runs[*job].group;
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
        self.jobs.runs[*job].result.huge_restored_bytes += out.huge_restored;
        self.suspended.push(self.jobs.name(*job).to_string());
    }

    /// Thaw it, its memory back.
    fn resume(&mut self, job: &JobId, steps: &mut SwitchSteps) -> Result<()> {
        let (env, i) = (self.env, job.index());
        SwitchSteps::time(&mut steps.thaw_s, || {
            env.freezer.thaw(&self.jobs.runs[*job].group)
        })
        .with_context(|| format!("resuming job {}", self.jobs.name(*job)))?;
        self.jobs.runs[*job].running_since = Some(self.t0.elapsed());
        SwitchSteps::time(&mut steps.sampling_s, || self.jobs.account.thawed(i));
        self.resumed.push(self.jobs.name(*job).to_string());
        Ok(())
    }

    fn watch(&mut self, step: &NodeStep<JobId>, done: bool) {
        self.watching.step(step, done);
    }

    /// Selective page-out: protect a job the policy runs, expose one it
    /// suspends. Without the kernel's support the kernel's LRU decides
    /// alone, as under `lru`; said once (not a switch's warning).
    fn protect(&mut self, job: &JobId, on: bool) -> Option<String> {
        if *self.protect_failed {
            return None;
        }
        let group = &self.jobs.runs[*job].group;
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
    /// Start a job; one that cannot start is said and finishes unstarted;
    /// one to be held is stopped at once.
    fn start(&mut self, job: JobId) -> Result<()> {
        let (env, jobs) = (self.env, &mut *self.jobs);
        let allowance = allowance_for(&jobs.runs, self.state, self.pool_memory, job);
        match jobs.start(env, job, allowance, self.t0) {
            Ok(()) => {
                if let Some(why) = self.holds.get(&job) {
                    jobs.hold_started(env, job, why.clone())?;
                    self.warnings.push(format!("job {}: {why}", jobs.name(job)));
                }
                self.resumed.push(jobs.name(job).to_string());
            }
            Err(e) => {
                env.say(format!(
                    "{:>7.1}s  {} could not start: {e:#}",
                    self.at.as_secs_f64(),
                    jobs.name(job)
                ));
                jobs.runs[job].result.error = Some(format!("{e:#}"));
                self.failed.push(job);
            }
        }
        Ok(())
    }
}

/// The batch without the steps that would run a held job: no room made
/// for it, no resume (it stays frozen, and says why); its start stays
/// (`Host::start` holds it at once).
fn hold_back(
    batch: Vec<Action>,
    holds: &HashMap<JobId, String>,
    jobs: &mut Jobs,
    warnings: &mut Vec<String>,
) -> Vec<Action> {
    batch
        .into_iter()
        .filter(|a| match a {
            Action::MakeRoom { job, .. } => !holds.contains_key(job),
            Action::Resume { job, .. } => match holds.get(job) {
                Some(why) => {
                    warnings.push(format!("job {}: {why}", jobs.name(*job)));
                    jobs.runs[*job].held = Some(why.clone());
                    false
                }
                None => true,
            },
            _ => true,
        })
        .collect()
}

fn renice(env: &Env, jobs: &mut Jobs, job: JobId, nice: i32, t0: Instant) {
    let now = t0.elapsed().as_secs_f64();
    let j = &mut jobs.runs[job];
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
