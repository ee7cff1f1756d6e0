//! `hybrid` (paper 001 §IV): the runnable jobs are packed into sets that
//! fit in the pool together (rule in [`crate::packing`]); the jobs of a set
//! are co-scheduled, and the sets take turns, quantum by quantum, with a
//! set switch that manages memory explicitly: the outgoing set is paged out
//! completely (and its resident pages recorded), the incoming set is paged
//! back in from its records before it runs, so that no job pages inside a
//! quantum. How the page-in overlaps the page-out is the [`Overlap`] policy
//! (paper 001 Fig. 5).
//!
//! Sets are placements on nodes ([`crate::packing`]): on a cluster a set
//! uses every node's memory, and a job's `Start` gives the nodes it was
//! placed on in its set. A job placed by its spec
//! ([`JobSpec::placed`](crate::JobSpec::placed)) is on those nodes in every
//! set it joins, as a started job is on its own.
//!
//! Re-packing: a job that arrives joins the first set it can be placed in,
//! the running set first (so it starts at once), else a new set. When a
//! job finishes, the sets are compacted if that needs fewer of them: with
//! up to [`FRESH_LIMIT`] jobs alive by packing them all afresh (first fit
//! decreasing), with more by moving the jobs of the smallest set into the
//! others, so that a job's end costs a scan of one set, not a sort of every
//! job alive; either is tried only when the jobs' memory could fit in one
//! set fewer at all (a sum kept as the sets change). When a job's measured
//! peak ([`Event::JobMemory`]) makes a node of its set overflow, the jobs
//! are packed afresh, so a job declared too small is moved out rather than
//! left to thrash. After a re-packing, the set holding most of the memory
//! of the running jobs runs, and only the difference is switched.
//!
//! With one set there is nothing to switch: every job runs, no timer is
//! set, exactly as under `cosched`. That is `auto`: the same policy under
//! the name a user picks to get co-scheduling while everything fits and
//! hybrid when it does not.

use super::{Decision, Policy, PolicyKind, Timer};
use crate::action::{Action, PageInPlan, PageOutPlan};
use crate::event::Event;
use crate::model::{JobId, Time};
use crate::packing::{self, Item, Set};
use crate::quantum::Quantum;
use crate::state::{JobStatus, State};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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

/// Up to this many jobs alive, a job's end tries a fresh packing of all of
/// them (first fit decreasing, the best sets); with more, it tries to empty
/// the smallest set into the others, which costs that set's jobs only.
/// memgang's runtime runs a handful of jobs on one node: there every end
/// tries the fresh packing, as before sets were placed on nodes.
pub const FRESH_LIMIT: usize = 32;

#[derive(Debug)]
pub struct Hybrid {
    quantum: Quantum,
    overlap: Overlap,
    /// Reported as `auto` (same decisions).
    auto: bool,
    /// The sets, in the order they take turns.
    sets: Vec<Set>,
    /// Each set's id, increasing along `sets`: ids do not move when a set
    /// before them goes, so that a set's end costs a search of the ids,
    /// not a re-index of every job alive.
    ids: Vec<u64>,
    next_id: u64,
    /// Which set each job alive is in, by id.
    set_of: HashMap<JobId, u64>,
    /// The jobs running now, as this policy's own actions left them: a
    /// switch suspends these, not a scan of every set for them.
    running: BTreeSet<JobId>,
    /// Each node's capacity (the cluster's, read at the first event).
    caps: Vec<u64>,
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
    pub fn new(quantum: impl Into<Quantum>, overlap: Overlap) -> Self {
        let quantum = quantum.into();
        assert!(
            !quantum.length.is_zero(),
            "hybrid scheduling needs a quantum > 0"
        );
        Hybrid {
            quantum,
            overlap,
            auto: false,
            sets: Vec::new(),
            ids: Vec::new(),
            next_id: 0,
            set_of: HashMap::new(),
            running: BTreeSet::new(),
            caps: Vec::new(),
            current: None,
            peaks: BTreeMap::new(),
            switch_times: Vec::new(),
            switching: false,
            quantum_end: None,
            prefetch_armed: false,
        }
    }

    pub fn auto(quantum: impl Into<Quantum>, overlap: Overlap) -> Self {
        Hybrid {
            auto: true,
            ..Hybrid::new(quantum, overlap)
        }
    }

    /// The sets as packed now, each its jobs (for tests and reports).
    pub fn sets(&self) -> Vec<Vec<JobId>> {
        self.sets
            .iter()
            .map(|s| s.jobs().iter().map(|p| p.job).collect())
            .collect()
    }

    fn estimate(&self, state: &State, job: JobId) -> u64 {
        packing::estimate(
            state.job(job).spec.memory_bytes,
            self.peaks.get(&job).copied(),
        )
    }

    /// The job as the packing sees it: its estimate, the nodes it spans (a
    /// job wider than the cluster gets all of it), and its nodes once
    /// started, or before if its spec places it.
    fn item(&self, state: &State, job: JobId) -> Item {
        let j = state.job(job);
        let all = state.cluster().nodes.len();
        let pinned = matches!(j.status, JobStatus::Running | JobStatus::Suspended)
            .then(|| j.nodes.clone())
            .filter(|n| !n.is_empty())
            .or_else(|| j.spec.placed.clone());
        Item {
            job,
            bytes: self.estimate(state, job),
            need: (state.cluster().nodes_needed(j.spec.ranks) as usize).clamp(1, all.max(1)),
            pinned,
        }
    }

    /// The set `job` is in, by position.
    fn set_index(&self, job: JobId) -> Option<usize> {
        let id = self.set_of.get(&job)?;
        self.ids.binary_search(id).ok()
    }

    /// A set opened after all the others.
    fn push_set(&mut self, set: Set) {
        self.sets.push(set);
        self.ids.push(self.next_id);
        self.next_id += 1;
    }

    fn remove_set(&mut self, s: usize) {
        self.sets.remove(s);
        self.ids.remove(s);
    }

    /// Put an arrived job into the first set it can be placed in, the
    /// running one first; returns the set.
    fn place(&mut self, job: JobId, state: &State) -> usize {
        let item = self.item(state, job);
        let order = self
            .current
            .into_iter()
            .chain((0..self.sets.len()).filter(|s| Some(*s) != self.current));
        for s in order.collect::<Vec<_>>() {
            if self.sets[s].place(&item, &self.caps).is_some() {
                self.set_of.insert(job, self.ids[s]);
                return s;
            }
        }
        let mut set = Set::new(self.caps.len());
        set.place(&item, &self.caps)
            .expect("an empty set takes any job");
        self.push_set(set);
        self.set_of.insert(job, self.next_id - 1);
        self.sets.len() - 1
    }

    /// Whether the jobs' memory could fit in one set fewer at all: if not,
    /// no re-packing can save a set, and none is tried.
    fn could_shrink(&self) -> bool {
        let k = self.sets.len() as u64;
        if k < 2 {
            return false;
        }
        let total: u64 = self.caps.iter().sum();
        let held: u64 = self.sets.iter().map(Set::clamped).sum();
        held <= (k - 1).saturating_mul(total)
    }

    /// Pack every live job afresh.
    fn fresh_packing(&self, state: &State) -> Vec<Set> {
        let items: Vec<Item> = self
            .sets
            .iter()
            .flat_map(|s| s.jobs())
            .map(|p| self.item(state, p.job))
            .collect();
        packing::pack(&items, &self.caps)
    }

    /// Fewer sets after a job's end, if the rule finds them (see the
    /// module's doc); they are taken, and the set to run is returned.
    fn compact(&mut self, state: &State) -> Option<usize> {
        if !self.could_shrink() {
            return None;
        }
        if self.set_of.len() <= FRESH_LIMIT {
            let fresh = self.fresh_packing(state);
            return (fresh.len() < self.sets.len()).then(|| self.adopt(fresh, state));
        }
        // Empty the smallest set (the newest on a tie) into the others,
        // each job into the first set with room, or change nothing.
        let (small, _) = self
            .sets
            .iter()
            .enumerate()
            .min_by_key(|(i, s)| (s.len(), std::cmp::Reverse(*i)))?;
        let jobs: Vec<JobId> = self.sets[small].jobs().iter().map(|p| p.job).collect();
        let mut moved: Vec<(JobId, usize)> = Vec::new();
        for &job in &jobs {
            let item = self.item(state, job);
            let to = (0..self.sets.len())
                .filter(|s| *s != small)
                .find(|s| self.sets[*s].room(&item, &self.caps).is_some());
            match to {
                Some(to) => {
                    self.sets[to].place(&item, &self.caps);
                    moved.push((job, to));
                }
                None => {
                    for (j, to) in moved {
                        self.sets[to].remove(j, &self.caps);
                    }
                    return None;
                }
            }
        }
        for (job, to) in moved {
            self.set_of.insert(job, self.ids[to]);
        }
        self.remove_set(small);
        Some(self.most_running(state))
    }

    /// Take `sets` as the new packing; returns the set to run (see
    /// [`Hybrid::most_running`]).
    fn adopt(&mut self, sets: Vec<Set>, state: &State) -> usize {
        self.sets = sets;
        self.ids = (self.next_id..self.next_id + self.sets.len() as u64).collect();
        self.next_id += self.sets.len() as u64;
        self.set_of.clear();
        for (set, id) in self.sets.iter().zip(&self.ids) {
            for p in set.jobs() {
                self.set_of.insert(p.job, *id);
            }
        }
        self.most_running(state)
    }

    /// The set with most of the running jobs' memory (the first of those),
    /// so that the fewest pages move.
    fn most_running(&self, state: &State) -> usize {
        let mut held = vec![0u64; self.sets.len()];
        for job in &self.running {
            let s = self.set_index(*job).expect("a running job is in a set");
            held[s] += self.estimate(state, *job);
        }
        let mut best = (0, 0);
        for (i, r) in held.into_iter().enumerate() {
            if r > best.1 {
                best = (i, r);
            }
        }
        best.0
    }

    /// Make `target` the running set: suspend (page out, recorded) every
    /// running job outside it, start or resume its jobs. Returns whether
    /// this is a set switch (something was suspended or resumed).
    fn switch_to(&mut self, target: usize, state: &State, actions: &mut Vec<Action>) -> bool {
        self.current = Some(target);
        let target_id = self.ids[target];
        let outgoing: Vec<JobId> = self
            .running
            .iter()
            .copied()
            .filter(|j| self.set_of.get(j) != Some(&target_id))
            .collect();
        let mut switched = !outgoing.is_empty();
        for job in outgoing {
            self.running.remove(&job);
            actions.push(Action::Suspend {
                job,
                // Paper 001: the outgoing set leaves memory completely,
                // "equivalent to aggressive page-out".
                page_out: PageOutPlan::Aggressive { record: true },
            });
        }
        for p in self.sets[target].jobs() {
            match state.job(p.job).status {
                JobStatus::Queued => {
                    self.running.insert(p.job);
                    actions.push(Action::Start {
                        job: p.job,
                        nodes: p.nodes.clone(),
                    })
                }
                JobStatus::Suspended => {
                    self.running.insert(p.job);
                    actions.push(Action::Resume {
                        job: p.job,
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
        self.settle_after(now, activated, None)
    }

    /// [`Hybrid::settle`] when the switch that brought the set in is done
    /// and took `after` (`Some`): the fresh quantum pays for it.
    fn settle_after(&mut self, now: Time, activated: bool, after: Option<Duration>) -> Timer {
        if self.sets.len() <= 1 {
            self.quantum_end = None;
            self.prefetch_armed = false;
            return Timer::Cancel;
        }
        if activated || self.quantum_end.is_none() {
            return self.next_quantum(now, after);
        }
        Timer::Keep
    }

    fn predicted_switch(&self) -> Option<Duration> {
        let n = self.switch_times.len() as u32;
        (n > 0).then(|| self.switch_times.iter().sum::<Duration>() / n)
    }

    /// A fresh quantum from `now`: long enough to pay for the switch that
    /// just brought its set in (`after`, if asked to), else the set length
    /// (a provisional one while a switch is under way: its end sets the
    /// real one).
    fn next_quantum(&mut self, now: Time, after: Option<Duration>) -> Timer {
        let length = after.map_or(self.quantum.length, |took| self.quantum.after(took));
        let end = now + length;
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
        if self.caps.len() != state.cluster().nodes.len() {
            self.caps = state
                .cluster()
                .nodes
                .iter()
                .map(|n| packing::capacity(n.memory_bytes))
                .collect();
        }
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
                        let nodes = self.sets[s]
                            .jobs()
                            .last()
                            .map(|p| p.nodes.clone())
                            .unwrap_or_default();
                        self.running.insert(*job);
                        actions.push(Action::Start { job: *job, nodes });
                        self.settle(now, false)
                    }
                    Some(_) => self.settle(now, false),
                }
            }
            Event::JobFinished(job) => {
                self.running.remove(job);
                // Nothing of a job stays once it is gone (a service runs
                // jobs without end).
                self.peaks.remove(job);
                let Some(r) = self.set_index(*job) else {
                    return Decision::default();
                };
                self.set_of.remove(job);
                self.sets[r].remove(*job, &self.caps);
                if self.sets[r].is_empty() {
                    self.remove_set(r);
                    self.current = match self.current {
                        Some(c) if c == r => None,
                        Some(c) if c > r => Some(c - 1),
                        c => c,
                    };
                }
                if let Some(target) = self.compact(state) {
                    let switched = self.switch_to(target, state, &mut actions);
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
                let Some(r) = self.set_index(*job) else {
                    return Decision::default();
                };
                let per_node = self.item(state, *job).per_node();
                if self.sets[r].resize(*job, per_node, &self.caps) {
                    let fresh = self.fresh_packing(state);
                    let target = self.adopt(fresh, state);
                    let switched = self.switch_to(target, state, &mut actions);
                    self.settle(now, switched)
                } else {
                    Timer::Keep
                }
            }
            Event::QuantumExpired if self.prefetch_armed => {
                self.prefetch_armed = false;
                if let (Some(cur), Some(end)) = (self.current, self.quantum_end) {
                    let next = (cur + 1) % self.sets.len();
                    for p in self.sets[next].jobs() {
                        if state.job(p.job).status == JobStatus::Suspended {
                            actions.push(Action::PageIn { job: p.job });
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
                    self.next_quantum(now, None)
                }
                _ => self.settle(now, false),
            },
            // A quantum is time to run: it starts when the switch that
            // brought the set in is done.
            Event::SwitchDone { took } if self.switching => {
                self.switching = false;
                self.switch_times.push(*took);
                self.settle_after(now, true, Some(*took))
            }
            Event::SwitchDone { .. } | Event::MemoryPressure { .. } | Event::JobTraffic { .. } => {
                Timer::Keep
            }
        };
        Decision { actions, timer }
    }
}
