//! memgang-sim: a discrete-event simulator of a cluster that runs
//! memgang's own policies on a simulated clock.
//!
//! The [`Simulator`] drives the core's [`memgang_core::Scheduler`], the very
//! object the runtime drives, with the policy built by
//! [`memgang_core::PolicyKind::build`]: no scheduling logic lives here. What
//! lives here is what a real node would do with the actions: the paging
//! model ([`paging`]), and jobs streamed in from a trace or a generator
//! ([`workload`]) and forgotten when they end, so that memory grows with
//! the jobs alive at once, not with the trace.
//!
//! Runs are deterministic: events at the same instant are ordered by kind
//! (ends and switch completions, then arrivals, then the quantum timer) and
//! then by when they were scheduled, and the only randomness is the
//! workload generator's, seeded.

pub mod engine;
pub mod paging;
pub mod paper004;
mod queue;
pub mod report;
mod rng;
mod table;
mod window;
pub mod workload;

pub use engine::{Config, Simulator, BSLD_BOUND_S};
pub use paging::{Access, Device, DeviceFile, FaultPolicy, PagingModel};
pub use report::{JobRecord, Report};
pub use workload::{
    Arrivals, BadLines, Generator, GeneratorSpec, Swf, SwfHeader, TraceJob, Workload, WorkloadError,
};
