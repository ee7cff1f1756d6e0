//! Carrying out a policy's actions, and the switch they form: page-out,
//! make-room and page-in (paper 000 §3, paper 001's overlapped restart),
//! each carried out by the switch engine ([`NodeSwitch`]), timed as one and
//! recorded as a [`Switch`]. What is the executor's own: freezing and
//! thawing, starting jobs, renicing, the switch's samples and record.

use super::jobs::Jobs;
use super::sampling::{allowance_for, Sampling};
use super::Env;
use crate::engine::NodeSwitch;
use crate::mechanisms::SwitchSampler;
use crate::results::{Switch, SwitchSteps};
use anyhow::{Context, Result};
use memgang_core::{Action, JobId, State};
use memgang_linux::counters::VmStat;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A node's switch state, apart from its jobs and its loop: the switch
/// engine over its pool (which owns the arithmetic and the memory moves),
/// the switches done (the run's record) and whether selective page-out was
/// found missing (said once).
pub(super) struct SwitchState {
    pub(super) engine: NodeSwitch,
    pub(super) done: Vec<Switch>,
    /// Every switch so far counted, also those a service has let go of
    /// with the jobs they moved ([`super::Node::forget`]).
    pub(super) totals: SwitchTotals,
    pub(super) protect_failed: bool,
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

/// What a batch of actions did, gathered as it is carried out: the
/// switch's record, and the jobs that could not start.
#[derive(Default)]
struct Done {
    suspended: Vec<String>,
    resumed: Vec<String>,
    failed: Vec<JobId>,
    paged_out: u64,
    paged_in: u64,
    out_time: Duration,
    in_time: Duration,
    warnings: Vec<String>,
    bg_bytes: u64,
    steps: SwitchSteps,
}

impl SwitchState {
    /// Carry out one batch of actions in order. Actions that stop or
    /// restart jobs form a switch, timed as one and recorded. A job the
    /// switch would run into memory suspended jobs hold locked is kept
    /// stopped instead ([`memgang_core::capacity::check_pinned`]; `Jobs::release_held`
    /// runs it once it fits).
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
        let mut d = Done::default();
        if is_switch {
            d.warnings.extend(self.check_swap(jobs, &batch));
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
        let incoming: Vec<_> = batch
            .iter()
            .filter_map(|a| match a {
                Action::Resume { job, page_in } if !holds.contains_key(job) => {
                    Some((*job, *page_in))
                }
                _ => None,
            })
            .collect();
        let mut opening = self.engine.open_switch(&incoming, jobs);
        for action in batch {
            let held = holds.get(&action.job()).cloned();
            self.act(action, held, &mut d, (env, jobs, state, t0), &mut opening)?;
        }
        let switch = is_switch.then(|| {
            let took = began.elapsed();
            let vm_after = env.counters.vmstat().ok();
            let swapped = |f: fn(&VmStat) -> u64| match (&vm_before, &vm_after) {
                (Some(a), Some(b)) => f(b).saturating_sub(f(a)),
                _ => 0,
            };
            for w in &d.warnings {
                env.say(format!("{:>7.1}s  warning: {w}", at.as_secs_f64()));
            }
            for point in sampler.map(SwitchSampler::stop).unwrap_or_default() {
                sampling.switch_sample(point);
            }
            self.totals.count += 1;
            self.totals.seconds += took.as_secs_f64();
            self.totals.paged_out_bytes += d.paged_out;
            self.totals.paged_in_bytes += d.paged_in;
            self.done.push(Switch {
                at_s: at.as_secs_f64(),
                took_s: took.as_secs_f64(),
                suspended: d.suspended,
                resumed: d.resumed,
                paged_out_bytes: d.paged_out,
                paged_in_bytes: d.paged_in,
                page_out_s: d.out_time.as_secs_f64(),
                page_in_s: d.in_time.as_secs_f64(),
                swap_in_pages: swapped(|v| v.pswpin),
                swap_out_pages: swapped(|v| v.pswpout),
                background_bytes: d.bg_bytes,
                warnings: d.warnings,
                // Counted from the samples once the run is over.
                faults_after: None,
                faults_after_before_exit: None,
                steps: Some(d.steps.close(took.as_secs_f64())),
            });
            took
        });
        Ok(Carried {
            switch,
            failed: d.failed,
        })
    }

    /// Carry out one action of a batch; `held`: why its job, which the
    /// switch would run, is kept stopped instead.
    fn act(
        &mut self,
        action: Action,
        held: Option<String>,
        d: &mut Done,
        (env, jobs, state, t0): (&Env, &mut Jobs, &State, Instant),
        opening: &mut crate::engine::Opening<JobId>,
    ) -> Result<()> {
        let job = action.job();
        let i = job.index();
        match action {
            Action::Start { .. } => {
                let allowance = allowance_for(&jobs.runs, state, self.engine.pool_memory, job);
                match jobs.start(env, job, allowance, t0) {
                    Ok(()) => {
                        if let Some(why) = held {
                            jobs.hold_started(env, job, why.clone())?;
                            d.warnings.push(format!("job {}: {why}", jobs.name(job)));
                        }
                        d.resumed.push(jobs.name(job).to_string());
                    }
                    Err(e) => {
                        env.say(format!(
                            "{:>7.1}s  {} could not start: {e:#}",
                            t0.elapsed().as_secs_f64(),
                            jobs.name(job)
                        ));
                        jobs.runs[job].result.error = Some(format!("{e:#}"));
                        d.failed.push(job);
                    }
                }
            }
            Action::Suspend { page_out, .. } => {
                // Stopped already if it was held: the policy stops it now.
                jobs.runs[job].held = None;
                SwitchSteps::time(&mut d.steps.freeze_s, || {
                    env.freezer.freeze(&jobs.runs[job].group)
                })
                .with_context(|| format!("suspending job {}", jobs.name(job)))?;
                jobs.stop_interval(job, t0.elapsed());
                // Listed once: the freeze keeps the list as it is
                // until the thaw, for the account and the page-out.
                let pids = SwitchSteps::time(&mut d.steps.sampling_s, || {
                    let group = &jobs.runs[job].group;
                    let pids = (env.backend).procs_recursive(group).unwrap_or_default();
                    let huge = (env.backend)
                        .memory_stat(group)
                        .ok()
                        .and_then(|m| m.anon_huge_bytes);
                    jobs.account.frozen(i, &pids, huge);
                    pids
                });
                let j = &mut jobs.runs[job];
                let out = self
                    .engine
                    .suspend(&mut j.mem, &pids, page_out, &mut d.steps);
                j.result.huge_restored_bytes += out.huge_restored;
                d.bg_bytes += out.background;
                d.paged_out += out.paged_out;
                d.out_time += out.took;
                d.warnings.extend(out.warnings);
                d.suspended.push(jobs.name(job).to_string());
            }
            Action::Protect { on, .. } => self.protect(env, jobs, job, on),
            // A held job gets no room: it does not run.
            Action::MakeRoom { .. } if held.is_some() => {}
            Action::MakeRoom { from, .. } => {
                // The stopped jobs it takes memory from, in the
                // policy's order.
                let victims: Vec<_> = from
                    .iter()
                    .map(|v| (jobs.runs[*v].group.clone(), jobs.name(*v).to_string()))
                    .collect();
                let stream = opening.paged_in.contains(&job);
                let (freed, took) = self.engine.make_room(
                    &mut jobs.runs[job].mem,
                    &victims,
                    stream,
                    &mut d.warnings,
                    &mut d.steps,
                );
                d.paged_out += freed;
                d.out_time += took;
            }
            Action::Resume { .. } if held.is_some() => {
                let why = held.unwrap_or_default();
                d.warnings.push(format!("job {}: {why}", jobs.name(job)));
                jobs.runs[job].held = Some(why);
            }
            Action::Resume { page_in, .. } => {
                // Bring its memory back while it is still frozen, so
                // that it resumes without faulting.
                let done = self.engine.resume(
                    &mut jobs.runs[job].mem,
                    page_in.uses_records(),
                    &mut d.steps,
                );
                d.paged_in += done.bytes;
                d.in_time += done.took;
                SwitchSteps::time(&mut d.steps.thaw_s, || {
                    env.freezer.thaw(&jobs.runs[job].group)
                })
                .with_context(|| format!("resuming job {}", jobs.name(job)))?;
                jobs.runs[job].running_since = Some(t0.elapsed());
                SwitchSteps::time(&mut d.steps.sampling_s, || jobs.account.thawed(i));
                d.resumed.push(jobs.name(job).to_string());
            }
            Action::WriteBack { until, .. } => {
                let window = until.saturating_sub(t0.elapsed());
                self.engine.write_back(&mut jobs.runs[job].mem, window);
            }
            // One budget for all the jobs of the set being
            // prefetched (see `NodeSwitch::page_in_early`).
            Action::PageIn { .. } => {
                self.engine
                    .page_in_early(&mut jobs.runs[job].mem, &mut opening.budget);
            }
            Action::Boost { nice, .. } => renice(env, jobs, job, nice, t0),
            Action::Defer { reason, .. } => env.say(format!("{} waits: {reason}", jobs.name(job))),
        }
        Ok(())
    }

    /// Selective page-out: protect a job the policy runs, expose one it
    /// suspends. Without the kernel's support the kernel's LRU decides
    /// alone, as under `lru`; said once.
    fn protect(&mut self, env: &Env, jobs: &Jobs, job: JobId, on: bool) {
        if self.protect_failed {
            return;
        }
        let group = &jobs.runs[job].group;
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
            .map(|a| &jobs.runs[a.job()].mem);
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
