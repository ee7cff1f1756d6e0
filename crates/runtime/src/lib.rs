//! memgang-runtime: the executor on one real Linux node. A [`Node`]
//! (executor) holds a memory pool (a cgroup with a memory limit, one child
//! cgroup per job) and a memgang-core policy, and carries the policy's
//! actions out on real processes on the real clock; the switch engine
//! ([`engine::NodeSwitch`]) moves the jobs' memory at a switch, for the
//! executor and the Slurm agent alike. What happened is recorded in
//! memgang-results' types.
//!
//! The runtime holds no scheduling logic: it carries out the actions the
//! core's [`Scheduler`](memgang_core::Scheduler) returns with the mechanisms
//! of `memgang-linux`, and reports back what the processes did. Experiment
//! files, the batch baseline and `memgang run` are memgang-experiment's.

pub mod account;
pub mod engine;
pub mod executor;
mod iowait;
mod mechanisms;
pub mod memory;
mod procs;
mod tally;
pub mod touched;

pub use executor::Node;
pub use mechanisms::{page_in, HugeRestore, PageInDone};
pub use memgang_results::SwitchSteps;
pub use procs::kill_group;
// The executor's record types; `account` names them as `crate::results`.
use memgang_results as results;

use anyhow::Result;
use memgang_linux::cgroup;
use memgang_linux::counters::SwapStatus;

/// This machine as results describe it.
pub fn machine(backend: &dyn cgroup::CgroupBackend, signals: bool) -> results::Machine {
    let uts = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref()
            .map(|u| f(u).to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    results::Machine {
        hostname: field(|u| u.nodename()),
        kernel: field(|u| u.release()),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        memory_bytes: memgang_linux::counters::memory_total().unwrap_or(0),
        swap_bytes: SwapStatus::read().map_or(0, |s| s.total_bytes),
        cgroup: backend.describe(),
        freezer: if signals || !backend.can_freeze() {
            "signals"
        } else {
            "cgroup-freezer"
        }
        .into(),
    }
}

/// Kill every process of a cgroup (thawing it first) and remove it: for
/// cleaning up after a memgang that was killed.
pub fn teardown_group(
    backend: &dyn cgroup::CgroupBackend,
    group: &cgroup::GroupPath,
) -> Result<()> {
    procs::kill_and_remove(backend, group, None)
}
