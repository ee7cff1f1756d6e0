//! Fakes of the mechanisms' traits for tests without root (feature
//! `testing`): a freezer, paging and node counters that record what they
//! were asked in a shared [`Log`] and answer fixed numbers. The runtime's
//! executor tests and the Slurm agent's use them.

use crate::cgroup::GroupPath;
use crate::counters::{NodeCounters, Psi, SwapStatus, VmStat};
use crate::freeze::Freezer;
use crate::paging::{PageRecord, Paging, Run};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A fake process's resident pages, in one run.
pub const RECORD_PAGES: u64 = 100;

/// What the fakes were asked to do, in order.
#[derive(Debug, Default)]
pub struct Log(Mutex<Vec<String>>);

impl Log {
    pub fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    pub fn count(&self, prefix: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }
}

/// Freezes by name: `freeze <group>`, `thaw <group>` in the log.
#[derive(Debug)]
pub struct FakeFreezer {
    pub log: Arc<Log>,
    pub frozen: Mutex<BTreeSet<GroupPath>>,
}

impl FakeFreezer {
    pub fn new(log: Arc<Log>) -> FakeFreezer {
        FakeFreezer {
            log,
            frozen: Mutex::new(BTreeSet::new()),
        }
    }
}

impl Freezer for FakeFreezer {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn freeze(&self, group: &GroupPath) -> crate::error::Result<()> {
        self.log.push(format!("freeze {group}"));
        self.frozen.lock().unwrap().insert(group.clone());
        Ok(())
    }
    fn thaw(&self, group: &GroupPath) -> crate::error::Result<()> {
        self.log.push(format!("thaw {group}"));
        self.frozen.lock().unwrap().remove(group);
        Ok(())
    }
    fn is_frozen(&self, group: &GroupPath) -> crate::error::Result<bool> {
        Ok(self.frozen.lock().unwrap().contains(group))
    }
}

/// Every process has [`RECORD_PAGES`] resident in one run; page-outs and
/// page-ins succeed whole: `page_out <pid> <bytes>`, `page_in <pid>
/// <bytes>` in the log.
#[derive(Debug)]
pub struct FakePaging {
    pub log: Arc<Log>,
}

impl Paging for FakePaging {
    fn record(&self, pid: i32) -> crate::error::Result<PageRecord> {
        Ok(PageRecord {
            pid,
            runs: vec![Run {
                start: 1 << 30,
                pages: RECORD_PAGES,
            }],
        })
    }
    fn page_out(&self, pid: i32, runs: &[Run]) -> crate::error::Result<u64> {
        let bytes = runs.iter().map(Run::bytes).sum();
        self.log.push(format!("page_out {pid} {bytes}"));
        Ok(bytes)
    }
    fn page_in(&self, record: &PageRecord) -> crate::error::Result<u64> {
        self.log
            .push(format!("page_in {} {}", record.pid, record.bytes()));
        Ok(record.bytes())
    }
}

/// Swap traffic that grows with every reading, and a swap device of
/// `swap_total` bytes, none used.
#[derive(Debug)]
pub struct FakeCounters {
    reads: AtomicU64,
    pub swap_total: u64,
}

impl FakeCounters {
    pub fn with_swap(swap_total: u64) -> FakeCounters {
        FakeCounters {
            reads: AtomicU64::new(0),
            swap_total,
        }
    }
}

impl Default for FakeCounters {
    /// Plenty of swap: 4 GiB.
    fn default() -> FakeCounters {
        FakeCounters::with_swap(4 << 30)
    }
}

impl NodeCounters for FakeCounters {
    fn vmstat(&self) -> crate::error::Result<VmStat> {
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        Ok(VmStat {
            pswpin: n * 10,
            pswpout: n * 20,
            pgmajfault: n,
        })
    }
    fn memory_pressure(&self) -> Option<Psi> {
        None
    }
    fn swap(&self) -> crate::error::Result<SwapStatus> {
        Ok(SwapStatus {
            total_bytes: self.swap_total,
            used_bytes: 0,
        })
    }
}
