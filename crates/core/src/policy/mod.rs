//! Scheduling policies. Each one is a deterministic state machine over
//! events; see the module of each policy for its rule.

mod batch;
mod cosched;
mod gang;

pub use batch::Batch;
pub use cosched::Cosched;
pub use gang::Gang;

use crate::action::Action;
use crate::event::Event;
use crate::model::Time;
use crate::state::State;
use crate::switching::Switching;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    Batch,
    Cosched,
    Gang,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 3] = [PolicyKind::Batch, PolicyKind::Cosched, PolicyKind::Gang];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Batch => "batch",
            PolicyKind::Cosched => "cosched",
            PolicyKind::Gang => "gang",
        }
    }

    /// The policy with its settings; `switching` applies to policies that
    /// suspend jobs.
    pub fn build(self, quantum: Duration, switching: Switching) -> Box<dyn Policy> {
        match self {
            PolicyKind::Batch => Box::new(Batch::default()),
            PolicyKind::Cosched => Box::new(Cosched),
            PolicyKind::Gang => Box::new(Gang::new(quantum, switching)),
        }
    }
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
            .ok_or_else(|| format!("unknown policy {s:?}: expected one of batch, cosched, gang"))
    }
}
