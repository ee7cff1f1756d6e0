//! A switch's memory work on one job's cgroup inside a pool: page-out in
//! bulk (with or without a record), page-out of part, waiting for the
//! writes, making room from suspended jobs and fitting a record's page-in
//! to the pool. The runtime's executor and memgang's Slurm agent both
//! switch with these, so a switch moves memory the same way whoever
//! stopped the job (the cgroup freezer, or Slurm's SIGSTOP).
//!
//! The arithmetic (how much, for whom) is `memgang_core::room`; the kernel
//! calls are `memgang_linux`'s. The caller has stopped the job first.

use memgang_core::capacity::{self, Capacity};
use memgang_core::room;
use memgang_core::units::format_bytes;
use memgang_core::PageOutPlan;
use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_linux::counters::NodeCounters;
use memgang_linux::paging::{self, PageRecord, Paging};
use memgang_linux::runs;
use memgang_results::SwitchSteps;
use std::sync::Arc;

pub use memgang_core::capacity::{ROOM_MARGIN, SWAP_RESERVE};
/// Memory left resident after an aggressive page-out that is reported:
/// page tables, the runtime's own stacks and buffers stay anyway (a few
/// MiB); more than this, and more than a tenth of the job, is memory the
/// kernel would not page out.
const RESIDUAL_REPORTED: u64 = 16 << 20;

/// The mechanisms a switch moves memory with.
#[derive(Clone, Debug)]
pub struct GroupMemory {
    pub backend: Arc<dyn CgroupBackend>,
    pub paging: Arc<dyn Paging>,
    pub counters: Arc<dyn NodeCounters>,
    /// Swap a page-out leaves free: the node's reserve, the one its
    /// admission keeps too ([`memgang_core::capacity::SWAP_RESERVE`]).
    pub swap_reserve: u64,
}

/// What a bulk page-out did.
#[derive(Debug, Default)]
pub struct PagedOut {
    /// Bytes advised out.
    pub bytes: u64,
    /// The resident runs before the page-out, when the plan records.
    pub records: Option<Vec<PageRecord>>,
    /// With `records`: what huge pages mapped before the page-out split
    /// them (`Paging::record_with_huge`), or the resident record where that
    /// cannot be known; what a restore after the page-in puts back.
    pub huge: Vec<PageRecord>,
    pub warnings: Vec<String>,
}

impl GroupMemory {
    /// Swap free for memgang's own page-outs, less the reserve.
    pub fn swap_room(&self) -> u64 {
        self.counters.swap().map_or(0, |s| {
            capacity::swap_room(s.total_bytes, s.used_bytes, self.swap_reserve)
        })
    }

    /// Carry out a page-out plan on the stopped job in `group` with
    /// processes `pids` (`name` for messages). A mechanism that fails (no
    /// rights, a process gone) leaves the job to the kernel's LRU and says
    /// why: the switch goes on. Its scans, advice and drain are timed into
    /// `steps`.
    pub fn page_out(
        &self,
        group: &GroupPath,
        pids: &[i32],
        name: &str,
        plan: PageOutPlan,
        steps: &mut SwitchSteps,
    ) -> PagedOut {
        let (record, evict) = match plan {
            PageOutPlan::Lru => return PagedOut::default(),
            PageOutPlan::Record => (true, false),
            PageOutPlan::Aggressive { record } => (record, true),
        };
        let mut out = PagedOut::default();
        let mut room = self.swap_room();
        let mut records = Vec::new();
        let mut clamped = false;
        let anon = || self.backend.memory_stat(group).map_or(0, |m| m.anon_bytes);
        let before = anon();
        for &pid in pids {
            // Scanned even when not kept: advising only the resident runs
            // makes the bytes count what really left memory, and the scan
            // (a PAGEMAP_SCAN ioctl) is small next to the page-out.
            // With the huge pages, when kept: before the page-out, which
            // splits them.
            let scanned = SwitchSteps::time(&mut steps.scan_s, || {
                if record {
                    self.paging.record_with_huge(pid)
                } else {
                    self.paging.record(pid).map(|rec| (rec, None))
                }
            });
            let (rec, huge) = match scanned {
                Ok(found) => found,
                Err(e) => {
                    failed(name, "recording resident pages", &e);
                    continue;
                }
            };
            if record {
                out.huge.push(huge.unwrap_or_else(|| rec.clone()));
            }
            if evict {
                let runs = runs::truncate(&rec.runs, room);
                if runs.len() < rec.runs.len() || rec.bytes() > room {
                    clamped = true;
                    out.warnings.push(format!(
                        "swap is nearly full ({} free): {} of job {name} stay in memory",
                        format_bytes(room),
                        format_bytes(rec.bytes().saturating_sub(room)),
                    ));
                }
                match SwitchSteps::time(&mut steps.advise_s, || self.paging.page_out(pid, &runs)) {
                    Ok(advised) => {
                        out.bytes += advised;
                        room = room.saturating_sub(advised);
                    }
                    Err(e) => failed(name, "paging out", &e),
                }
            }
            if record {
                records.push(rec);
            }
        }
        if evict {
            SwitchSteps::time(&mut steps.drain_s, || self.drain(group, name));
        }
        // MADV_PAGEOUT leaves locked (mlock) pages and pages shared with
        // other processes where they are: say how much stayed.
        let after = anon();
        if evict && !clamped && after > RESIDUAL_REPORTED.max(before / 10) {
            out.warnings.push(format!(
                "{} of job {name} stayed in memory after page-out: locked (mlock) or shared \
                 pages, which the kernel does not page out on request",
                format_bytes(after),
            ));
        }
        out.records = record.then_some(records);
        out
    }

    /// Page out up to `bytes` of a stopped job's resident memory, in
    /// address order (the record keeps no age; a cgroup reclaim before
    /// this has taken the oldest pages), and wait until it has left the
    /// pool. Returns the drop in the job's usage.
    pub fn page_out_part(
        &self,
        group: &GroupPath,
        name: &str,
        bytes: u64,
        steps: &mut SwitchSteps,
    ) -> u64 {
        let usage = || self.backend.memory_stat(group).map_or(0, |m| m.usage_bytes);
        let before = usage();
        let mut left = bytes.min(self.swap_room());
        for pid in self.backend.procs_recursive(group).unwrap_or_default() {
            if left == 0 {
                break;
            }
            let rec = match SwitchSteps::time(&mut steps.scan_s, || self.paging.record(pid)) {
                Ok(rec) => rec,
                Err(e) => {
                    failed(name, "recording resident pages", &e);
                    continue;
                }
            };
            let runs = runs::truncate(&rec.runs, left);
            match SwitchSteps::time(&mut steps.advise_s, || self.paging.page_out(pid, &runs)) {
                Ok(advised) => left = left.saturating_sub(advised),
                Err(e) => failed(name, "paging out", &e),
            }
        }
        SwitchSteps::time(&mut steps.drain_s, || self.drain(group, name));
        before.saturating_sub(usage())
    }

    /// Wait until what MADV_PAGEOUT handed to the swap device has left the
    /// pool. The advice only unmaps the pages and starts their writes; they
    /// stay charged (swap cache, write-back) until the writes complete and
    /// reclaim frees them. An incoming job sized against the pool's free
    /// memory before then finds the pool full and faults, and a page-in
    /// would push out its own pages. Reclaiming the stopped group waits for
    /// the writes and frees the pages in bulk.
    pub fn drain(&self, group: &GroupPath, name: &str) {
        let Ok(stat) = self.backend.memory_stat(group) else {
            return;
        };
        if let Err(e) = self.backend.reclaim(group, stat.usage_bytes) {
            tracing::debug!("job {name}: waiting for page-out writes: {e}");
        }
    }

    /// Bytes the job in `group` is short of for a working set of `ws`
    /// bytes: `ws` and a margin, less what it has resident and what the
    /// pool has free.
    pub fn shortfall(&self, group: &GroupPath, ws: u64, pool: &GroupPath, pool_memory: u64) -> u64 {
        // A job not started yet has no cgroup: nothing resident.
        let resident = self.backend.memory_stat(group).map_or(0, |m| m.anon_bytes);
        let used = self.backend.memory_stat(pool).map_or(0, |m| m.usage_bytes);
        let free = pool_memory.saturating_sub(used);
        room::shortfall(ws, resident, free, ROOM_MARGIN)
    }

    /// `so/ao` (paper 000 Fig. 3 with Fig. 2's victims): reclaim `need`
    /// bytes from the stopped jobs `victims` (group, name) in order, each
    /// one's oldest pages first (the kernel's LRU inside its cgroup), now
    /// and in bulk. Returns the bytes freed.
    pub fn make_room(
        &self,
        need: u64,
        victims: &[(GroupPath, String)],
        for_job: &str,
        warnings: &mut Vec<String>,
        steps: &mut SwitchSteps,
    ) -> u64 {
        let mut need = need.min(self.swap_room());
        let mut freed = 0;
        for (group, name) in victims {
            if need == 0 {
                break;
            }
            let has = self.backend.memory_stat(group).map_or(0, |m| m.anon_bytes);
            match SwitchSteps::time(&mut steps.reclaim_s, || {
                self.backend.reclaim(group, need.min(has))
            }) {
                Ok(got) => {
                    freed += got;
                    need = need.saturating_sub(got);
                }
                Err(e) => warnings.push(format!(
                    "making room for {for_job} from {name}: {e}; the kernel's LRU pages the rest"
                )),
            }
            // Cgroup reclaim stalls once the pages it took are under
            // write-back, well before the group is out of pages; the rest
            // of the shortfall then goes by MADV_PAGEOUT, which submits
            // the writes in bulk without waiting for each round.
            if need > 0 {
                let got = self.page_out_part(group, name, need, steps);
                freed += got;
                need = need.saturating_sub(got);
            }
        }
        freed
    }

    /// `records` cut to what the pool can take now: its free memory (less
    /// the margin), plus what the job in `group` already holds (resident
    /// or in the swap cache), which its record covers too. The page-out
    /// before this one waited for its writes (`drain`), so the pool's
    /// usage is what will stay. A bulk page-in into a full pool fills it
    /// with pages being read, which reclaim cannot take, faster than
    /// reclaim frees the others: the kernel then kills a job. Seen here
    /// with `ai` alone, and with the page-in overlapped with the `so/ao`
    /// page-out that was making its room, in a 256 MiB pool; so the page-in
    /// comes after the page-out, and what does not fit is faulted in on
    /// demand, as under `lru`.
    pub fn fitting_records(
        &self,
        records: Vec<PageRecord>,
        group: &GroupPath,
        name: &str,
        pool: &GroupPath,
        pool_memory: u64,
    ) -> Vec<PageRecord> {
        // usage, not anon: a page of the job's in the swap cache is charged
        // to it and comes back without I/O.
        let held = self.backend.memory_stat(group).map_or(0, |m| m.usage_bytes);
        let used = self.backend.memory_stat(pool).map_or(0, |m| m.usage_bytes);
        let mut allowed = room::page_in_budget(pool_memory, used, held, ROOM_MARGIN);
        let total: u64 = records.iter().map(PageRecord::bytes).sum();
        if total > allowed {
            tracing::debug!(
                "job {name}: paging in {allowed} of {total} recorded bytes, the rest on demand"
            );
        }
        records
            .into_iter()
            .map(|r| {
                let runs = runs::truncate(&r.runs, allowed);
                allowed = allowed.saturating_sub(runs::bytes(&runs));
                PageRecord { pid: r.pid, runs }
            })
            .filter(|r| !r.runs.is_empty())
            .collect()
    }

    /// Memory the pool has free now, less the margin: what a page-in that
    /// runs beside other paging may fill without pushing anyone out.
    pub fn free_for_page_in(&self, pool: &GroupPath, pool_memory: u64) -> u64 {
        let used = self
            .backend
            .memory_stat(pool)
            .map_or(pool_memory, |m| m.usage_bytes);
        room::page_in_budget(pool_memory, used, 0, ROOM_MARGIN)
    }
}

/// The node's capacity now ([`Capacity`]): the pool, the swap device as
/// `counters` read it, less what the jobs themselves hold in swap
/// (`ours`: theirs to count on) and `reserve`, swap counted whatever the
/// policy ([`Capacity::promised`] is paging prevention's part). Unreadable
/// swap counts as none.
pub fn capacity(counters: &dyn NodeCounters, pool_bytes: u64, ours: u64, reserve: u64) -> Capacity {
    let (total, used) = counters
        .swap()
        .map_or((0, 0), |s| (s.total_bytes, s.used_bytes));
    Capacity::measured(pool_bytes, total, used, ours, reserve)
}

/// A mechanism failed on one process of job `name`: the kernel pages it on
/// demand instead. A process that exited between switches has nothing to
/// page and is not reported.
pub fn failed(name: &str, what: &str, e: &memgang_linux::Error) {
    if !paging::is_gone(e) {
        tracing::warn!("job {name}: {what} failed, the kernel pages it on demand instead: {e}");
    }
}
