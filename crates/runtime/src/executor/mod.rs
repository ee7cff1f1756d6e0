//! The executor: carries a core policy's actions out on real processes on
//! the real clock, and records what happened.
//!
//! One thread. [`Node`] owns the pool cgroup, the scheduler and the jobs;
//! each [`Node::step`] wakes when a job's first process exits (its pidfd
//! becomes readable), when the scheduler's next timer or arrival is due, or
//! when the next counter sample is; it never busy-waits. [`run_to_end`]
//! steps it until its jobs are done (memgang-experiment's `execute` runs an
//! experiment so); a service adds jobs as they come ([`Node::add_job`]) and
//! steps the same node.
//!
//! Modules, by concern, each owning its state and taking explicitly what
//! it needs (none names `Node`):
//! * `jobs`: `Jobs`: starting, reaping, finishing and cancelling jobs, and
//!   tearing every cgroup down on any exit path;
//! * `sampling`: `Sampling` and `Traffic`: the counters read between
//!   switches, the paging trace, memory pressure, the [`Status`] given to
//!   [`Progress`], dynamic coscheduling's counts;
//! * `switch`: `SwitchState`: carrying out a batch of actions, a switch's
//!   page-out, page-in and make-room, timed as one;
//! * `node`: the node and its loop (set-up, one iteration, the end), which
//!   composes the three.
//!
//! Every kernel call goes through the mechanisms in [`Env`] (traits of
//! `memgang-linux`), so the executor is tested with fakes (`tests`).

mod jobs;
mod node;
mod sampling;
mod switch;
#[cfg(test)]
mod tests;

pub use crate::procs::Launch;
pub use node::{Node, NodeReport, NodeSettings};
pub use switch::SwitchTotals;
pub use switch::{SwitchNow, SwitchWatch};

use crate::results::Machine;
use anyhow::Result;
use memgang_linux::cgroup::CgroupBackend;
use memgang_linux::counters::NodeCounters;
use memgang_linux::freeze::Freezer;
use memgang_linux::paging::Paging;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The mechanisms and surroundings a [`Node`] runs with.
#[derive(Clone)]
pub struct Env {
    pub backend: Arc<dyn CgroupBackend>,
    pub freezer: Arc<dyn Freezer>,
    pub paging: Arc<dyn Paging>,
    pub counters: Arc<dyn NodeCounters>,
    pub machine: Machine,
    /// Where jobs' output goes by default (a directory per job).
    pub logs: PathBuf,
    /// Set (by a signal handler) to end [`run_to_end`] early.
    pub stop: Arc<AtomicBool>,
    /// Who is shown the run as it goes (`memgang run` draws a status line
    /// on a terminal); None: what happens goes to the log.
    pub progress: Option<Arc<dyn Progress>>,
}

/// What a front end is told while a node runs: the runtime draws nothing
/// itself (the cli draws a status line with indicatif).
pub trait Progress: Send + Sync {
    /// The node at a sample (every sample interval).
    fn status(&self, status: &Status<'_>);
    /// Something that happened: a job started or ended, a warning.
    fn note(&self, line: &str);
}

/// The node at a sample, for [`Progress::status`].
#[derive(Clone, Debug, PartialEq)]
pub struct Status<'a> {
    /// Since the node started.
    pub at: Duration,
    /// The policy's name (with its switch or overlap).
    pub policy: &'a str,
    pub running: Vec<&'a str>,
    pub suspended: Vec<&'a str>,
    pub finished: usize,
    pub jobs: usize,
    /// The pool's memory in use at the last sample.
    pub pool_bytes: u64,
    /// Pages swapped in and out per second over the last sample interval.
    pub swap_in_per_s: f64,
    pub swap_out_per_s: f64,
}

impl Env {
    /// Tell `msg` to [`Env::progress`], or else to the log.
    pub(crate) fn say(&self, msg: String) {
        match &self.progress {
            Some(p) => p.note(&msg),
            // A service's log: a job's error may quote what a user wrote
            // (its working directory), which must not forge a line.
            None => tracing::info!("{}", memgang_core::text::printable(&msg)),
        }
    }
}

/// Step `node` until every job has finished (false) or `stop` is set
/// (true: interrupted).
pub fn run_to_end(node: &mut Node, stop: &AtomicBool) -> Result<bool> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(true);
        }
        if node.step(None)? {
            return Ok(false);
        }
    }
}
