//! memgang-core: the model (cluster, nodes, jobs, time) and the scheduling
//! policies, as pure code.
//!
//! A policy receives an [`Event`] and a read-only view of the [`State`] and
//! returns [`Action`]s. Nothing here performs I/O, reads a clock or spawns a
//! thread: time is a value handed in by the caller. That is what lets the
//! runtime (real processes, real clock) and the simulator (simulated clock)
//! execute the very same policy code.
//!
//! The [`Scheduler`] is the one place that feeds events to a policy and keeps
//! the state in step with the actions it returned; executors only carry the
//! actions out and report what happened.

pub mod action;
pub mod admission;
pub mod capacity;
pub mod event;
pub mod metrics;
pub mod model;
pub mod packing;
pub mod policy;
pub mod quantum;
pub mod room;
pub mod scheduler;
pub mod state;
pub mod step;
pub mod switching;
pub mod text;
pub mod units;
pub mod wss;

pub use action::{Action, PageInPlan, PageOutPlan};
pub use event::Event;
pub use model::{Cluster, JobId, JobSpec, Node, NodeId, Time};
pub use policy::{Decision, Overlap, Policy, PolicyKind, Timer};
pub use quantum::Quantum;
pub use scheduler::Scheduler;
pub use state::{JobState, JobStatus, State};
pub use step::NodeStep;
pub use switching::Switching;
