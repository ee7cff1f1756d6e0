//! Working-set measurement of a process tree (paper 004 §4.2: the pages a
//! program touches within a window τ).
//!
//! Mechanism: `/proc/<pid>/clear_refs` (`1`) clears the accessed bits of a
//! process's pages; `/proc/<pid>/smaps_rollup`'s `Referenced` then counts
//! the bytes touched since. One accessed bit per page means windows cannot
//! overlap: a caller measures one τ at a time (memgang wss takes the τs in
//! turn). Page idle tracking (per-page sets, so windows of several τ at
//! once) needs CONFIG_IDLE_PAGE_TRACKING, which this kernel lacks, and
//! DAMON's sysfs admits no second kdamond while one runs (this machine runs
//! one for the host's proactive reclaim).

use crate::error::{Error, Result};
use procfs::process::SmapsRollup;

/// What a process tree holds and touched, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Touched since the last `clear` (accessed bit or PG_referenced set).
    pub referenced: u64,
    /// Mapped and present: every page ever touched and still resident.
    pub rss: u64,
    /// Swapped out: touched once, evicted since.
    pub swap: u64,
}

impl Usage {
    /// Pages touched since the program began, as far as the kernel still
    /// knows them: resident or in swap (freed memory is forgotten).
    pub fn touched(&self) -> u64 {
        self.rss + self.swap
    }
}

use crate::sysfs::proc_pid_file as proc_path;

/// `pid` and all its descendants that are still alive (children of every
/// thread), parents first.
pub fn tree(pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        i += 1;
        let Ok(tasks) = std::fs::read_dir(proc_path(p, "task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            out.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// Clears the accessed bits of every process in `pids`: the next
/// [`usage`] counts what they touch from now on. A process that exited
/// meanwhile is skipped.
pub fn clear(pids: &[i32]) -> Result<()> {
    for &pid in pids {
        let path = proc_path(pid, "clear_refs");
        match std::fs::write(&path, "1") {
            Ok(()) => {}
            Err(e)
                if e.raw_os_error() == Some(libc::ESRCH)
                    || e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::Permission(format!(
                    "writing {}: {e}: measuring another user's process needs root",
                    path.display()
                )))
            }
            Err(e) => return Err(Error::io("writing", path, e)),
        }
    }
    Ok(())
}

/// The sum of `pids`' usage; processes that exited count nothing.
pub fn usage(pids: &[i32]) -> Result<Usage> {
    let mut total = Usage::default();
    for &pid in pids {
        let path = proc_path(pid, "smaps_rollup");
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e)
                if e.raw_os_error() == Some(libc::ESRCH)
                    || e.kind() == std::io::ErrorKind::NotFound =>
            {
                continue
            }
            Err(e) => return Err(Error::io("reading", path, e)),
        };
        // A process between exit and reaping has an empty rollup.
        if text.is_empty() {
            continue;
        }
        let r: SmapsRollup = crate::proc::parse_bytes(&path, &text)?;
        let get = |k: &str| {
            r.memory_map_rollup
                .0
                .iter()
                .map(|m| m.extension.map.get(k).copied().unwrap_or(0))
                .sum::<u64>()
        };
        total.referenced += get("Referenced");
        total.rss += get("Rss");
        total.swap += get("Swap");
    }
    Ok(total)
}
