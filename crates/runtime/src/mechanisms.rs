//! Paper 000's switch mechanisms that are more than one kernel call:
//! background writing during a quantum's last part (a thread beside the
//! executor's loop) and adaptive page-in of a job's records; and the
//! sampler that keeps the paging trace going while a switch runs. The thread
//! only advises the kernel about a job's pages; it owns no cgroup or
//! process, so one left behind by an error ends by itself when the job's
//! processes are gone.

use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_linux::counters::{NodeCounters, VmStat};
use memgang_linux::paging::{self, PageRecord, Paging, Run};
use memgang_linux::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Background writing advises this much at a time: a stop request waits
/// for at most one such call (the kernel only submits the writes), and
/// 2048 pages per call keep the calls few.
const BG_CHUNK_BYTES: u64 = 8 << 20;
/// How often a pacing sleep looks at the stop flag: a switch waits for
/// the writer at most this long.
const BG_STOP_POLL: Duration = Duration::from_millis(20);
/// CPU niceness of the writer: it must not take the CPU from the job it
/// writes for. (Most of this machine's block devices use the `none` I/O
/// scheduler, which ignores I/O priorities, so pacing is what keeps the
/// writes in the background.)
const BG_NICE: i32 = 19;
/// How often the switch sampler looks at its stop flag: the end of a
/// switch waits for it at most this long, small next to a switch.
const SAMPLER_STOP_POLL: Duration = Duration::from_millis(5);

/// What a finished background writer did.
#[derive(Debug, Default)]
pub struct BgReport {
    /// The job's resident pages when writing began: its working set over
    /// the quantum, before the writer took pages out of it.
    pub records: Vec<PageRecord>,
    pub bytes_written: u64,
    pub errors: Vec<Error>,
}

/// Paper 000 §3.4 on Linux: a low-priority thread pages the running job's
/// resident runs out (`MADV_PAGEOUT`) spread evenly over `window`. The
/// kernel writes them to swap; a page the job touches again before it is
/// reclaimed comes back from the swap cache without disk I/O, and one it
/// only reads stays clean there, so the switch frees it without writing.
pub struct BgWriter {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<BgReport>,
}

impl BgWriter {
    pub fn start(paging: Arc<dyn Paging>, pids: Vec<i32>, window: Duration) -> BgWriter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || write_back(paging.as_ref(), &pids, window, &flag));
        BgWriter { stop, handle }
    }

    /// Stop writing (a switch begins) and collect what was done.
    pub fn stop(self) -> BgReport {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_else(|_| BgReport::default())
    }
}

fn write_back(paging: &dyn Paging, pids: &[i32], window: Duration, stop: &AtomicBool) -> BgReport {
    // 0: this thread.
    if let Err(e) = memgang_linux::process::set_nice(0, BG_NICE) {
        tracing::debug!("background writer keeps its priority: {e}");
    }
    let mut report = BgReport::default();
    for &pid in pids {
        match paging.record(pid) {
            Ok(rec) => report.records.push(rec),
            Err(e) => report.errors.push(e),
        }
    }
    let chunks: Vec<(i32, Vec<Run>)> = report
        .records
        .iter()
        .flat_map(|r| chunked(&r.runs, BG_CHUNK_BYTES).map(move |c| (r.pid, c)))
        .collect();
    let total: u64 = report.records.iter().map(PageRecord::bytes).sum();
    let t0 = Instant::now();
    for (pid, chunk) in chunks {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match paging.page_out(pid, &chunk) {
            Ok(advised) => report.bytes_written += advised,
            Err(e) => {
                report.errors.push(e);
                continue;
            }
        }
        // Even pace: by now, this share of the window should have passed.
        let due = window.mul_f64(report.bytes_written as f64 / total.max(1) as f64);
        while t0.elapsed() < due && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(due.saturating_sub(t0.elapsed()).min(BG_STOP_POLL));
        }
    }
    report
}

/// `runs` cut into pieces of at most `bytes` each (whole pages).
fn chunked(runs: &[Run], bytes: u64) -> impl Iterator<Item = Vec<Run>> + '_ {
    let max_pages = (bytes / paging::page_size()).max(1);
    let mut out: Vec<Vec<Run>> = vec![Vec::new()];
    let mut in_chunk = 0;
    for run in runs {
        let mut r = *run;
        while r.pages > 0 {
            if in_chunk == max_pages {
                out.push(Vec::new());
                in_chunk = 0;
            }
            let take = r.pages.min(max_pages - in_chunk);
            out.last_mut().expect("never empty").push(Run {
                start: r.start,
                pages: take,
            });
            in_chunk += take;
            r.start += take * paging::page_size();
            r.pages -= take;
        }
    }
    out.into_iter().filter(|c| !c.is_empty())
}

/// What a page-in did.
#[derive(Debug, Default)]
pub struct PageInDone {
    pub bytes: u64,
    pub took: Duration,
    pub errors: Vec<Error>,
}

/// Adaptive page-in of `records`: the runs come back in bulk and are made
/// resident, so that the job resumes without major faults. A process that
/// exited or changed its mappings since is skipped (stale runs are counted
/// by the linux crate, not errors).
pub fn page_in(paging: &dyn Paging, records: &[PageRecord]) -> PageInDone {
    let t = Instant::now();
    let mut done = PageInDone::default();
    for rec in records {
        match paging.page_in(rec) {
            Ok(bytes) => done.bytes += bytes,
            Err(e) => done.errors.push(e),
        }
    }
    done.took = t.elapsed();
    done
}

/// Huge pages being put back beside a resumed job (`Paging::restore_huge`
/// of what huge pages mapped at its page-out): in the switch this made
/// cg's switches 0.44 -> 0.71 s (bench/results/switch-ab-huge-20261126),
/// while the job gains its speed back only as it runs (NumPy's arrays
/// compute 4-9% slower on small pages: docs/realapps.md). Its next page-out
/// or its end must [`wait`](Self::wait) first: the restore must not race
/// the page-out, and no thread outlives its job. Dropping it waits too.
#[derive(Debug)]
pub struct HugeRestore(Option<JoinHandle<u64>>);

impl HugeRestore {
    /// Start restoring `records` in a thread; nothing to do without them.
    pub fn start(paging: Arc<dyn Paging>, records: Vec<PageRecord>) -> Option<HugeRestore> {
        if records.is_empty() {
            return None;
        }
        Some(HugeRestore(Some(std::thread::spawn(move || {
            let mut bytes = 0;
            for rec in &records {
                match paging.restore_huge(rec) {
                    Ok(b) => bytes += b,
                    Err(e) => tracing::debug!(pid = rec.pid, "restoring huge pages: {e}"),
                }
            }
            bytes
        }))))
    }

    /// Wait until it is done; the bytes it put back on huge pages.
    pub fn wait(mut self) -> u64 {
        self.join()
    }

    fn join(&mut self) -> u64 {
        self.0.take().and_then(|h| h.join().ok()).unwrap_or(0)
    }
}

impl Drop for HugeRestore {
    fn drop(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_runs_exactly_and_respect_the_size() {
        let ps = paging::page_size();
        let runs = [
            Run { start: 0, pages: 5 },
            Run {
                start: 100 * ps,
                pages: 7,
            },
        ];
        let chunks: Vec<Vec<Run>> = chunked(&runs, 4 * ps).collect();
        assert!(chunks
            .iter()
            .all(|c| c.iter().map(|r| r.pages).sum::<u64>() <= 4));
        let pages: Vec<u64> = chunks
            .iter()
            .flatten()
            .flat_map(|r| (0..r.pages).map(move |i| r.start / ps + i))
            .collect();
        let want: Vec<u64> = (0..5).chain(100..107).collect();
        assert_eq!(pages, want);
        assert_eq!(chunked(&[], 4 * ps).count(), 0);
    }
}

/// One reading of the node's swap counters and the pool's usage, taken
/// while a switch was going on.
#[derive(Debug)]
pub struct SwitchPoint {
    /// Since the start of the run.
    pub at: Duration,
    pub vm: VmStat,
    pub pool_usage_bytes: u64,
    pub psi_some_avg10: Option<f64>,
}

/// Samples the paging trace (paper 000 Fig. 6) while a switch runs: the
/// executor's thread is busy paging then and cannot sample itself, yet the
/// switch's bulk paging is what the trace is for.
pub struct SwitchSampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<SwitchPoint>>>,
}

impl SwitchSampler {
    pub fn start(
        backend: Arc<dyn CgroupBackend>,
        counters: Arc<dyn NodeCounters>,
        pool: GroupPath,
        t0: Instant,
        every: Duration,
    ) -> SwitchSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut points = Vec::new();
            let mut next = t0.elapsed() + every;
            loop {
                while t0.elapsed() < next {
                    if flag.load(Ordering::Relaxed) {
                        return points;
                    }
                    std::thread::sleep(next.saturating_sub(t0.elapsed()).min(SAMPLER_STOP_POLL));
                }
                if let Ok(vm) = counters.vmstat() {
                    points.push(SwitchPoint {
                        at: t0.elapsed(),
                        vm,
                        pool_usage_bytes: backend.memory_stat(&pool).map_or(0, |s| s.usage_bytes),
                        psi_some_avg10: counters.memory_pressure().map(|p| p.some_avg10),
                    });
                }
                next += every;
            }
        });
        SwitchSampler {
            stop,
            handle: Some(handle),
        }
    }

    /// The points taken so far, in time order; the thread ends.
    pub fn stop(mut self) -> Vec<SwitchPoint> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// A switch that ends in an error drops its sampler: the thread must not
/// go on sampling for the rest of the process.
impl Drop for SwitchSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
