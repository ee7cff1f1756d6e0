//! What each job touched over its last quantum (issue 47): the runtime's
//! measurement behind `memgang_core::room::room_for`. A job's accessed
//! bits are cleared when it resumes (`/proc/PID/clear_refs`, after its
//! page-in, which sets them) and the bytes referenced since are read when
//! it is next suspended (`smaps_rollup`'s `Referenced`, before its
//! page-out): its working set at τ = its quantum (paper 004 §4.2,
//! `memgang wss`'s mechanism). What the suspended jobs of a pool touched
//! is kept here, for the switch that brings another in.

use memgang_core::room::Estimate;
use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_linux::wss;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bytes the processes `pids` referenced since their accessed bits were
/// last cleared; None where they could not be read (said at debug level:
/// the room is then sized as before, by what the job kept).
pub fn referenced(pids: &[i32], name: &str) -> Option<u64> {
    match wss::usage(pids) {
        Ok(u) => Some(u.referenced),
        Err(e) => {
            tracing::debug!("job {name}: reading what it touched: {e}");
            None
        }
    }
}

/// Read what `pids` referenced in a thread, beside the switch's scan of
/// the same page tables; the page-out must wait for it.
pub fn start_reading(pids: &[i32], name: &str) -> JoinHandle<Option<u64>> {
    let (pids, name) = (pids.to_vec(), name.to_string());
    std::thread::spawn(move || referenced(&pids, &name))
}

/// Clear the accessed bits of the processes of `group` (a job about to run
/// a quantum) in a thread: a walk of its page tables that need not hold
/// up its thaw. Its next reading waits for it ([`wait`]).
pub fn start_clearing(
    backend: Arc<dyn CgroupBackend>,
    group: GroupPath,
    name: &str,
) -> JoinHandle<()> {
    let name = name.to_string();
    std::thread::spawn(move || {
        let pids = backend.procs_recursive(&group).unwrap_or_default();
        if let Err(e) = wss::clear(&pids) {
            tracing::debug!("job {name}: clearing its accessed bits: {e}");
        }
    })
}

/// Wait for a thread of this module's, if one is under way.
pub fn wait<T: Default>(h: Option<JoinHandle<T>>) -> T {
    h.and_then(|h| h.join().ok()).unwrap_or_default()
}

/// What each suspended job of a pool is expected to touch when it next
/// runs ([`Estimate::touches`]), by cgroup: set at its suspension, gone at
/// its resume, so it holds only the jobs that hold memory without running.
#[derive(Clone, Debug, Default)]
pub struct Suspended(Arc<Mutex<BTreeMap<GroupPath, u64>>>);

impl Suspended {
    pub fn set(&self, group: &GroupPath, e: Estimate) {
        self.lock().insert(group.clone(), e.touches());
    }

    pub fn resumed(&self, group: &GroupPath) {
        self.lock().remove(group);
    }

    /// What the suspended jobs but `group` are expected to touch, summed.
    pub fn others(&self, group: &GroupPath) -> u64 {
        self.lock()
            .iter()
            .filter(|(g, _)| *g != group)
            .fold(0u64, |s, (_, b)| s.saturating_add(*b))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<GroupPath, u64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
