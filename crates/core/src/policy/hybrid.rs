//! `hybrid` (paper 001 §IV): the runnable jobs are packed into sets that
//! fit in the pool together (rule in [`crate::packing`]); the jobs of a set
//! are co-scheduled, and the sets take turns, quantum by quantum, with a
//! set switch that manages memory explicitly: the outgoing set is paged out
//! completely (and its resident pages recorded), the incoming set is paged
//! back in from its records before it runs, so that no job pages inside a
//! quantum. How the page-in overlaps the page-out is the [`Overlap`] policy
//! (paper 001 Fig. 5).
//!
//! Re-packing: a job that arrives joins the first set it fits in, the
//! running set first (so it starts at once), else a new set. When a job
//! finishes, the jobs are packed afresh if that needs fewer sets. When a
//! job's measured peak ([`Event::JobMemory`]) makes its set overflow, the
//! jobs are packed afresh, so a job declared too small is moved out rather
//! than left to thrash. After a fresh packing, the set holding most of the
//! memory of the running jobs runs, and only the difference is switched.
//!
//! With one set there is nothing to switch: every job runs, no timer is
//! set, exactly as under `cosched`. That is `auto`: the same policy under
//! the name a user picks to get co-scheduling while everything fits and
//! hybrid when it does not.

use super::{least_loaded_nodes, Decision, Policy, PolicyKind, Timer};
use crate::action::{Action, PageInPlan, PageOutPlan};
use crate::event::Event;
use crate::model::{JobId, Time};
use crate::packing::{self, Item};
use crate::state::{JobStatus, State};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How a set switch overlaps the incoming set's page-in with the rest
/// (paper 001 Fig. 5, §V-B).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    /// Page out, then page in, then run: never both sets in memory. The
    /// paper's best choice when memory is nearly full.
    #[default]
    Sequential,
    /// The page-in runs concurrently with the page-out, within the memory
    /// the pool has free when the switch begins.
    Overlapped,
    /// The incoming set's page-in starts before the running quantum ends,
    /// at its end less the predicted switch time (the mean of the earlier
    /// switches): greedy rather than exact, as §V-B found better.
    Prefetch,
}

impl Overlap {
    pub const ALL: [Overlap; 3] = [Overlap::Sequential, Overlap::Overlapped, Overlap::Prefetch];

    pub fn name(self) -> &'static str {
        match self {
            Overlap::Sequential => "sequential",
            Overlap::Overlapped => "overlapped",
            Overlap::Prefetch => "prefetch",
        }
    }

    fn page_in(self) -> PageInPlan {
        match self {
            Overlap::Overlapped => PageInPlan::Overlapped,
            // Prefetch has started the page-in already; the resume brings
            // back the rest after the page-out.
            Overlap::Sequential | Overlap::Prefetch => PageInPlan::Recorded,
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Overlap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Overlap::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                format!("unknown overlap policy {s:?}: expected sequential, overlapped or prefetch")
            })
    }
}

#[derive(Debug)]
pub struct Hybrid {
    quantum: Duration,
    overlap: Overlap,
    /// Reported as `auto` (same decisions).
    auto: bool,
    /// The sets, in the order they take turns; each lists its jobs.
    sets: Vec<Vec<JobId>>,
    /// The set running now, if any.
    current: Option<usize>,
    /// Largest resident memory measured per job.
    peaks: BTreeMap<JobId, u64>,
    /// How long earlier set switches took: the prefetch's prediction.
    switch_times: Vec<Duration>,
    /// A set switch was asked for and its `SwitchDone` is due.
    switching: bool,
    /// When the running set's quantum ends (None with a single set).
    quantum_end: Option<Time>,
    /// The timer set now is the prefetch point, not the quantum's end.
    prefetch_armed: bool,
}

impl Hybrid {
    pub fn new(quantum: Duration, overlap: Overlap) -> Self {
        assert!(!quantum.is_zero(), "hybrid scheduling needs a quantum > 0");
        Hybrid {
            quantum,
            overlap,
            auto: false,
            sets: Vec::new(),
            current: None,
            peaks: BTreeMap::new(),
            switch_times: Vec::new(),
            switching: false,
            quantum_end: None,
            prefetch_armed: false,
        }
    }

    pub fn auto(quantum: Duration, overlap: Overlap) -> Self {
        Hybrid {
            auto: true,
            ..Hybrid::new(quantum, overlap)
        }
    }

    /// The sets as packed now (for tests and reports).
    pub fn sets(&self) -> &[Vec<JobId>] {
        &self.sets
    }

    /// The pool is the smallest node's memory: memgang runs one node today,
    /// and a set must fit on every node its jobs use.
    fn capacity(state: &State) -> u64 {
        let pool = state.cluster().nodes.iter().map(|n| n.memory_bytes).min();
        packing::capacity(pool.unwrap_or(0))
    }

    fn estimate(&self, state: &State, job: JobId) -> u64 {
        packing::estimate(
            state.job(job).spec.memory_bytes,
            self.peaks.get(&job).copied(),
        )
    }

    fn used(&self, state: &State, set: usize) -> u64 {
        self.sets[set]
            .iter()
            .map(|j| self.estimate(state, *j))
            .sum()
    }

    /// Put an arrived job into the first set it fits in, the running one
    /// first; returns the set.
    fn place(&mut self, job: JobId, state: &State) -> usize {
        let (cap, bytes) = (Self::capacity(state), self.estimate(state, job));
        let order = self
            .current
            .into_iter()
            .chain((0..self.sets.len()).filter(|s| Some(*s) != self.current));
        for s in order.collect::<Vec<_>>() {
            if packing::fits(self.used(state, s), self.sets[s].len(), bytes, cap) {
                self.sets[s].push(job);
                return s;
            }
        }
        self.sets.push(vec![job]);
        self.sets.len() - 1
    }

    /// Pack every live job afresh.
    fn fresh_packing(&self, state: &State) -> Vec<Vec<JobId>> {
        let items: Vec<Item> = state
            .jobs()
            .iter()
            .filter(|j| {
                matches!(
                    j.status,
                    JobStatus::Queued | JobStatus::Running | JobStatus::Suspended
                )
            })
            .map(|j| Item {
                job: j.id,
                bytes: self.estimate(state, j.id),
            })
            .collect();
        packing::pack(&items, Self::capacity(state))
    }

    /// Take `sets` as the new packing; returns the set to run: the one
    /// with most of the running jobs' memory, so that the fewest pages move.
    fn adopt(&mut self, sets: Vec<Vec<JobId>>, state: &State) -> usize {
        self.sets = sets;
        let running = |s: &Vec<JobId>| -> u64 {
            s.iter()
                .filter(|j| state.job(**j).status == JobStatus::Running)
                .map(|j| self.estimate(state, *j))
                .sum()
        };
        let mut best = 0;
        for (i, s) in self.sets.iter().enumerate() {
            if running(s) > running(&self.sets[best]) {
                best = i;
            }
        }
        best
    }

    /// Make `target` the running set: suspend (page out, recorded) every
    /// running job outside it, start or resume its jobs. Returns whether
    /// this is a set switch (something was suspended or resumed).
    fn switch_to(&mut self, target: usize, state: &State, actions: &mut Vec<Action>) -> bool {
        self.current = Some(target);
        let members = &self.sets[target];
        let mut switched = false;
        for j in state.with_status(JobStatus::Running) {
            if !members.contains(&j.id) {
                actions.push(Action::Suspend {
                    job: j.id,
                    // Paper 001: the outgoing set leaves memory completely,
                    // "equivalent to aggressive page-out".
                    page_out: PageOutPlan::Aggressive { record: true },
                });
                switched = true;
            }
        }
        for &job in members {
            match state.job(job).status {
                JobStatus::Queued => actions.push(Action::Start {
                    job,
                    nodes: least_loaded_nodes(state, job),
                }),
                JobStatus::Suspended => {
                    actions.push(Action::Resume {
                        job,
                        page_in: self.overlap.page_in(),
                    });
                    switched = true;
                }
                _ => {}
            }
        }
        self.switching |= switched;
        switched
    }

    /// The timer after a decision: none with a single set (nothing to
    /// switch to), a fresh quantum when a set was just activated or when a
    /// second set appeared, otherwise the one running.
    fn settle(&mut self, now: Time, activated: bool) -> Timer {
        if self.sets.len() <= 1 {
            self.quantum_end = None;
            self.prefetch_armed = false;
            return Timer::Cancel;
        }
        if activated || self.quantum_end.is_none() {
            return self.next_quantum(now);
        }
        Timer::Keep
    }

    fn predicted_switch(&self) -> Option<Duration> {
        let n = self.switch_times.len() as u32;
        (n > 0).then(|| self.switch_times.iter().sum::<Duration>() / n)
    }

    fn next_quantum(&mut self, now: Time) -> Timer {
        let end = now + self.quantum;
        self.quantum_end = Some(end);
        self.prefetch_armed = false;
        if self.overlap == Overlap::Prefetch && self.sets.len() > 1 {
            if let Some(p) = self.predicted_switch() {
                self.prefetch_armed = true;
                return Timer::At(end.saturating_sub(p).max(now));
            }
        }
        Timer::At(end)
    }

    fn repack(&mut self, sets: Vec<Vec<JobId>>, state: &State, actions: &mut Vec<Action>) -> bool {
        let target = self.adopt(sets, state);
        self.switch_to(target, state, actions)
    }
}

impl Policy for Hybrid {
    fn kind(&self) -> PolicyKind {
        if self.auto {
            PolicyKind::Auto
        } else {
            PolicyKind::Hybrid
        }
    }

    fn on_event(&mut self, event: &Event, state: &State) -> Decision {
        let now = state.now();
        let mut actions = Vec::new();
        let timer = match event {
            Event::JobArrived(job) => {
                let s = self.place(*job, state);
                match self.current {
                    None => {
                        self.switch_to(s, state, &mut actions);
                        self.settle(now, true)
                    }
                    Some(cur) if cur == s => {
                        actions.push(Action::Start {
                            job: *job,
                            nodes: least_loaded_nodes(state, *job),
                        });
                        self.settle(now, false)
                    }
                    Some(_) => self.settle(now, false),
                }
            }
            Event::JobFinished(job) => {
                let Some(r) = self.sets.iter().position(|s| s.contains(job)) else {
                    return Decision::default();
                };
                self.sets[r].retain(|j| j != job);
                if self.sets[r].is_empty() {
                    self.sets.remove(r);
                    self.current = match self.current {
                        Some(c) if c == r => None,
                        Some(c) if c > r => Some(c - 1),
                        c => c,
                    };
                }
                let fresh = self.fresh_packing(state);
                if fresh.len() < self.sets.len() {
                    let switched = self.repack(fresh, state, &mut actions);
                    self.settle(now, switched)
                } else if self.current.is_none() && !self.sets.is_empty() {
                    // The running set emptied: the next one gets a fresh
                    // quantum now rather than waiting out the rest.
                    self.switch_to(r % self.sets.len(), state, &mut actions);
                    self.settle(now, true)
                } else {
                    self.settle(now, false)
                }
            }
            Event::JobMemory {
                job, peak_bytes, ..
            } => {
                let peak = self.peaks.entry(*job).or_default();
                *peak = (*peak).max(*peak_bytes);
                let overflows = self
                    .sets
                    .iter()
                    .position(|s| s.contains(job))
                    .is_some_and(|r| {
                        self.sets[r].len() > 1 && self.used(state, r) > Self::capacity(state)
                    });
                if overflows {
                    let fresh = self.fresh_packing(state);
                    let switched = self.repack(fresh, state, &mut actions);
                    self.settle(now, switched)
                } else {
                    Timer::Keep
                }
            }
            Event::QuantumExpired if self.prefetch_armed => {
                self.prefetch_armed = false;
                if let (Some(cur), Some(end)) = (self.current, self.quantum_end) {
                    let next = (cur + 1) % self.sets.len();
                    for &job in &self.sets[next] {
                        if state.job(job).status == JobStatus::Suspended {
                            actions.push(Action::PageIn { job });
                        }
                    }
                    Timer::At(end)
                } else {
                    Timer::Cancel
                }
            }
            Event::QuantumExpired => match self.current {
                Some(cur) if self.sets.len() > 1 => {
                    self.switch_to((cur + 1) % self.sets.len(), state, &mut actions);
                    self.next_quantum(now)
                }
                _ => self.settle(now, false),
            },
            // A quantum is time to run: it starts when the switch that
            // brought the set in is done.
            Event::SwitchDone { took } if self.switching => {
                self.switching = false;
                self.switch_times.push(*took);
                self.settle(now, true)
            }
            Event::SwitchDone { .. } | Event::MemoryPressure { .. } => Timer::Keep,
        };
        Decision { actions, timer }
    }
}
