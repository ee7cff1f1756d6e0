//! memgang-experiment: `memgang run`'s side of memgang. An experiment file
//! (TOML: the jobs, the policy, the pool) is parsed and checked
//! ([`experiment`]), checked against this node's memory and swap, run on
//! memgang-runtime's executor ([`execute`], [`run`]) and written as a
//! memgang-results [`RunResult`]; the batch reference that gives the
//! switching overhead is run once and cached ([`baseline`]).
//!
//! The executor knows nothing of experiment files: a service (memgangd)
//! drives the same `Node` with jobs that come over a socket.

pub mod baseline;
pub mod experiment;
mod run;

pub use baseline::Baseline;
pub use experiment::{Experiment, Overrides};
pub use memgang_results::RunResult;
pub use run::{execute, run, RunOptions};
