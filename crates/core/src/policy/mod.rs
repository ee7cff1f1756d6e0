//! Scheduling policies. Each one is a deterministic state machine over
//! events; see the module of each policy for its rule.

mod batch;
mod cosched;
mod dynamic;
mod gang;
mod hybrid;

pub use batch::Batch;
pub use cosched::Cosched;
pub use dynamic::{boost, DynamicCosched, MAX_BOOST, TRAFFIC_PERIOD};
pub use gang::Gang;
pub use hybrid::{Hybrid, Overlap};

use crate::action::Action;
use crate::event::Event;
use crate::model::{JobId, NodeId, Time};
use crate::quantum::Quantum;
use crate::state::State;
use crate::switching::Switching;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a policy wants from its timer after an event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timer {
    /// Leave the timer as it is (set or not).
    #[default]
    Keep,
    /// Deliver [`Event::QuantumExpired`] at this time (replaces any other).
    At(Time),
    Cancel,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Carried out in order: a switch lists its suspends before its resumes,
    /// so memory is released before it is claimed.
    pub actions: Vec<Action>,
    pub timer: Timer,
}

/// A scheduling policy: events and a read-only view in, actions out.
///
/// Implementations keep their own bookkeeping (a queue, a matrix) but must
/// not perform I/O or read a clock: `state.now()` is the time.
pub trait Policy: Send + fmt::Debug {
    fn kind(&self) -> PolicyKind;
    fn on_event(&mut self, event: &Event, state: &State) -> Decision;
    /// Whether it asks the state which nodes are idle or least loaded at
    /// most events: the state then keeps running counts per node, a cost
    /// at every start, suspension and resumption that the others, which
    /// place jobs by their own books, need not pay (it showed in a profile
    /// of an overloaded gang run in `memgang sim`).
    fn reads_node_load(&self) -> bool {
        false
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    Batch,
    Cosched,
    Gang,
    /// Sets that fit in memory, co-scheduled, gang-switched (paper 001).
    Hybrid,
    /// `cosched` while everything fits in memory, `hybrid` when not.
    Auto,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::Batch,
        PolicyKind::Cosched,
        PolicyKind::Gang,
        PolicyKind::Hybrid,
        PolicyKind::Auto,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Batch => "batch",
            PolicyKind::Cosched => "cosched",
            PolicyKind::Gang => "gang",
            PolicyKind::Hybrid => "hybrid",
            PolicyKind::Auto => "auto",
        }
    }

    /// Whether the policy switches sets of jobs with an [`Overlap`] policy.
    pub fn uses_overlap(self) -> bool {
        matches!(self, PolicyKind::Hybrid | PolicyKind::Auto)
    }

    /// The policy with its settings; `switching` applies to `gang`, and
    /// `hybrid`/`auto` switch with [`Overlap::Sequential`].
    pub fn build(self, quantum: impl Into<Quantum>, switching: Switching) -> Box<dyn Policy> {
        self.build_with(quantum, switching, Overlap::default())
    }

    /// As [`build`](Self::build), with the set-switch overlap of `hybrid`
    /// and `auto` (ignored by the others).
    pub fn build_with(
        self,
        quantum: impl Into<Quantum>,
        switching: Switching,
        overlap: Overlap,
    ) -> Box<dyn Policy> {
        match self {
            PolicyKind::Batch => Box::new(Batch::default()),
            PolicyKind::Cosched => Box::new(Cosched),
            PolicyKind::Gang => Box::new(Gang::new(quantum, switching)),
            PolicyKind::Hybrid => Box::new(Hybrid::new(quantum, overlap)),
            PolicyKind::Auto => Box::new(Hybrid::auto(quantum, overlap)),
        }
    }
}

/// The `need` nodes hosting the fewest running jobs (ties by id): where a
/// co-scheduled job goes.
pub(crate) fn least_loaded_nodes(state: &State, job: JobId) -> Vec<NodeId> {
    let load = state.running_per_node();
    let key = |n: &NodeId| (load[n.0 as usize], *n);
    let mut nodes: Vec<_> = state.cluster().nodes.iter().map(|n| n.id).collect();
    let need = state.cluster().nodes_needed(state.job(job).spec.ranks) as usize;
    // The `need` smallest, then only those sorted: a pass over the nodes
    // rather than a sort of them all, at every arrival.
    if need < nodes.len() {
        nodes.select_nth_unstable_by_key(need, key);
        nodes.truncate(need);
    }
    nodes.sort_unstable_by_key(key);
    nodes
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!("unknown policy {s:?}: expected one of batch, cosched, gang, hybrid, auto")
            })
    }
}
