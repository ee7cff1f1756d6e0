//! The scheduler: feeds events to a policy and keeps the [`State`] in step
//! with the actions it returns. Executors (the runtime, the simulator) only
//! carry the actions out and report back what happened, so neither of them
//! holds scheduling logic of its own.

use crate::action::Action;
use crate::event::Event;
use crate::model::JobId;
use crate::model::{Cluster, JobSpec, Time};
use crate::policy::{Policy, Timer};
use crate::state::{JobState, JobStatus, State};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug)]
pub struct Scheduler {
    state: State,
    policy: Box<dyn Policy>,
    timer: Option<Time>,
    /// Jobs still `Waiting`, earliest arrival (then lowest id) on top.
    arrivals: BinaryHeap<Reverse<(Time, JobId)>>,
}

impl Scheduler {
    /// Panics on a job that [`JobSpec::check`] refuses (a caller's bug:
    /// [`submit`](Self::submit) says why instead).
    pub fn new(cluster: Cluster, jobs: Vec<JobSpec>, policy: Box<dyn Policy>) -> Self {
        for spec in &jobs {
            if let Err(e) = spec.check(&cluster) {
                panic!("{e}");
            }
        }
        let mut state = State::new(cluster, jobs);
        if policy.reads_node_load() {
            state.keep_node_load();
        }
        let arrivals = state
            .jobs()
            .iter()
            .map(|j| Reverse((j.spec.arrival, j.id)))
            .collect();
        Scheduler {
            state,
            policy,
            timer: None,
            arrivals,
        }
    }

    /// Add a job while the run goes on (a trace read as it is replayed). It
    /// arrives at `spec.arrival`, or at the next [`advance`](Self::advance)
    /// if that is already past. Ids continue the submission order. A job
    /// the cluster cannot take as specified ([`JobSpec::check`]: nodes it
    /// is placed on that are not the cluster's, or not as many as its
    /// ranks take) is refused, with why.
    pub fn submit(&mut self, spec: JobSpec) -> Result<JobId, String> {
        spec.check(&self.state.cluster)?;
        let arrival = spec.arrival;
        let id = self.state.push(spec);
        self.arrivals.push(Reverse((arrival, id)));
        Ok(id)
    }

    /// Forget a finished job, so that the state holds only the jobs alive;
    /// returns its last state. Policies hear nothing: they have dropped it
    /// when it finished. Panics if the job has not finished.
    pub fn retire(&mut self, job: JobId) -> JobState {
        self.state.remove(job)
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// When the executor must call [`advance`](Self::advance) next at the
    /// latest: the policy's timer or the next arrival. `None` when nothing is
    /// pending but job completions.
    pub fn next_wakeup(&self) -> Option<Time> {
        let arrival = self.arrivals.peek().map(|Reverse((at, _))| *at);
        match (self.timer, arrival) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Move the clock to `now`, delivering every arrival and the timer that
    /// are due, in time order (arrivals first on a tie, so a job that arrives
    /// at the end of a quantum takes part in the switch).
    pub fn advance(&mut self, now: Time) -> Vec<Action> {
        let mut out = Vec::new();
        loop {
            let next_arrival = self
                .arrivals
                .peek()
                .map(|Reverse(a)| *a)
                .filter(|(at, _)| *at <= now);
            let timer = self.timer.filter(|t| *t <= now);
            match (next_arrival, timer) {
                (Some((at, job)), t) if t.is_none_or(|t| at <= t) => {
                    self.arrivals.pop();
                    self.state.job_mut(job).status = JobStatus::Queued;
                    out.extend(self.deliver(at, Event::JobArrived(job)));
                }
                (_, Some(t)) => {
                    self.timer = None;
                    out.extend(self.deliver(t, Event::QuantumExpired));
                }
                _ => break,
            }
        }
        self.state.now = self.state.now.max(now);
        out
    }

    /// Deliver an event that the executor observed at `now`.
    pub fn handle(&mut self, now: Time, event: Event) -> Vec<Action> {
        if let Event::JobFinished(job) = event {
            let j = self.state.job_mut(job);
            assert!(
                matches!(j.status, JobStatus::Running | JobStatus::Suspended),
                "job {} finished while {:?}",
                j.spec.name,
                j.status
            );
            j.finished_at = Some(now);
            self.state.set_status(job, JobStatus::Finished);
            self.state.unfinished -= 1;
        }
        self.deliver(now, event)
    }

    pub fn all_finished(&self) -> bool {
        self.state.all_finished()
    }

    fn deliver(&mut self, at: Time, event: Event) -> Vec<Action> {
        self.state.now = self.state.now.max(at);
        let decision = self.policy.on_event(&event, &self.state);
        match decision.timer {
            Timer::Keep => {}
            Timer::At(t) => self.timer = Some(t),
            Timer::Cancel => self.timer = None,
        }
        for action in &decision.actions {
            self.apply(action);
        }
        decision.actions
    }

    /// A policy asking for something impossible is a bug in the policy, not
    /// a condition an executor could handle: fail loudly.
    fn apply(&mut self, action: &Action) {
        let now = self.state.now;
        let j = self.state.job_mut(action.job());
        let bad = |j: &crate::state::JobState| -> ! {
            panic!(
                "policy asked for {action:?} while job {} is {:?}",
                j.spec.name, j.status
            )
        };
        match action {
            Action::Start { nodes, .. } => {
                if j.status != JobStatus::Queued {
                    bad(j)
                }
                // A job placed by its spec runs there already.
                if let Some(placed) = j.spec.placed.as_ref().filter(|p| *p != nodes) {
                    panic!(
                        "policy asked for {action:?} while job {} is placed on {placed:?}",
                        j.spec.name
                    )
                }
                j.nodes = nodes.clone();
                j.started_at = Some(now);
                self.state.set_status(action.job(), JobStatus::Running);
            }
            Action::Suspend { .. } => {
                if j.status != JobStatus::Running {
                    bad(j)
                }
                self.state.set_status(action.job(), JobStatus::Suspended);
            }
            Action::Resume { .. } => {
                if j.status != JobStatus::Suspended {
                    bad(j)
                }
                self.state.set_status(action.job(), JobStatus::Running);
            }
            // Protection is set on a job about to resume (before its pages
            // come back) or just started, and cleared once it is suspended.
            Action::Protect { on: true, .. } => {
                if !matches!(j.status, JobStatus::Running | JobStatus::Suspended) {
                    bad(j)
                }
            }
            Action::Protect { on: false, .. } => {
                if j.status != JobStatus::Suspended {
                    bad(j)
                }
            }
            Action::MakeRoom { from, .. } => {
                if !matches!(j.status, JobStatus::Queued | JobStatus::Suspended) {
                    bad(j)
                }
                for v in from {
                    let v = self.state.job(*v);
                    if v.status != JobStatus::Suspended {
                        bad(v)
                    }
                }
            }
            Action::PageIn { .. } => {
                if j.status != JobStatus::Suspended {
                    bad(j)
                }
            }
            Action::WriteBack { .. } | Action::Boost { .. } => {
                if j.status != JobStatus::Running {
                    bad(j)
                }
            }
            Action::Defer { .. } => {
                if j.status != JobStatus::Queued {
                    bad(j)
                }
            }
        }
    }
}
