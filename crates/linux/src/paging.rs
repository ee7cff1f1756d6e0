//! Bulk paging at the job switch: the mechanisms behind paper 000 §3.
//!
//! Under plain demand paging a switched-in job faults its working set back
//! one page (plus a small readahead) at a time, and each of those faults may
//! first have to push a page of the switched-out job to swap: page-ins and
//! page-outs interleave and the switch drags on (paper 000, Fig. 1). The
//! paper moves that paging to the switch and does it in bulk:
//!
//! - **Aggressive page-out** (§3.2, Fig. 3): at the switch, page the
//!   outgoing job's resident set out at once, so that the incoming job's
//!   faults find free memory and never wait for a page-out. Here:
//!   [`page_out`], `process_madvise(2)` with `MADV_PAGEOUT` over the job's
//!   anonymous memory, up to [`IOV_BATCH`] ranges per call. Call it on a
//!   stopped (frozen) job, or it touches its pages straight back in.
//! - **Adaptive page-in** (§3.3, Fig. 4): at page-out, *record* which pages
//!   were resident, as runs of contiguous pages (address, count) rather than
//!   single pages, which keeps the record small; at the job's next switch-in,
//!   bring exactly those pages back in bulk instead of waiting for the job
//!   to fault them. Here: [`record`] ([`anon_ranges`] + [`resident_runs`],
//!   the `PAGEMAP_SCAN` ioctl on `/proc/<pid>/pagemap`) gives a
//!   [`PageRecord`], and [`page_in`] issues `MADV_WILLNEED` over its runs
//!   (swap readahead submits all the reads at once) and then, if asked,
//!   makes the pages resident without the job faulting: remote
//!   `MADV_POPULATE_READ` where the kernel allows it, else reading the job's
//!   memory with `process_vm_readv(2)`, which faults swapped-out pages in on
//!   the job's behalf without changing them.
//!
//! Only *how* lives here; when and for which job is the policy's business
//! (`memgang-core`). Everything is best effort against a live process: a run
//! that no longer exists (the job unmapped or shrank) is skipped and counted,
//! never an error that stops the rest. A job that has exited is an error
//! ([`is_gone`] tells it apart), and so is a caller without the rights
//! (`Error::Permission`): memgang then leaves paging to the kernel's LRU.
//!
//! The process is named by pid but every step holds a pidfd
//! ([`PidFd`]): `process_madvise` acts through it, and `/proc/<pid>` files
//! are only trusted if the pidfd shows the process still alive after they
//! were opened, so a recycled pid is never paged.

use crate::error::{Error, Result};
use crate::pidfd::PidFd;
use crate::sysfs::proc_pid_file as proc_file;
use procfs::process::{MMPermissions, MMapPath, MemoryMap, MemoryMaps};
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Ranges per `process_madvise` / `process_vm_readv` call: the kernel's
/// `UIO_MAXIOV`; it refuses longer vectors with EINVAL.
pub const IOV_BATCH: usize = 1024;

/// Bytes per `process_madvise` call at most. The kernel's `import_iovec`
/// silently truncates a vector to `MAX_RW_COUNT` (`INT_MAX` rounded down to
/// a page), so a longer batch would look like a failure half-way.
const MAX_CALL_BYTES: u64 = (i32::MAX as u64) & !0xfff;

/// A range is cut into pieces of at most this size, so that any one piece
/// fits in a call (madvise: below [`MAX_CALL_BYTES`]; readv: exactly what
/// the [`READ_BUF`] × [`IOV_BATCH`] local vector can take).
const MAX_PIECE_BYTES: u64 = (READ_BUF * IOV_BATCH) as u64;

/// The buffer `process_vm_readv` copies into when faulting pages in. Every
/// local iovec points at this same buffer (the data is thrown away), so one
/// call covers up to 1 GiB of the job's memory while we hold only 1 MiB.
const READ_BUF: usize = 1 << 20;

/// How often an interrupted (EINTR/EAGAIN) call is retried before the range
/// it was working on is given up as skipped.
const RETRIES: u32 = 100;

/// `MADV_POPULATE_READ` (Linux 5.14): fault the range in readable, as a read
/// would, without changing it.
const MADV_POPULATE_READ: i32 = 22;
/// `MADV_COLLAPSE` (Linux 6.1): back a range with huge pages again, copying
/// its small ones; `process_madvise` takes it for another process.
const MADV_COLLAPSE: i32 = 25;
/// Adaptive page-in starts reads for this much at a time. `MADV_WILLNEED`
/// charges every page it reads to the job's cgroup at once, locked until
/// its read completes, so reclaim cannot take them back: a whole record at
/// once can fill a pool that still holds the other jobs' pages and bring
/// the OOM killer (seen with `ai` alone in a 256 MiB pool). Two windows in
/// flight are 1/4 of such a pool, and 32 MiB at this machine's 1.4 GB/s is
/// about 23 ms of reading, enough to keep the disk's queue full.
const PAGE_IN_WINDOW: u64 = 32 << 20;

/// Set once `PAGEMAP_SCAN` has been refused: later scans go straight to the
/// pagemap read.
static SCAN_IOCTL_MISSING: AtomicBool = AtomicBool::new(false);

use crate::runs;
mod scan;
pub use crate::runs::{Run, Span};
pub use crate::sysfs::page_size;
use scan::{scan, Pages};

/// Which pages of process `pid` were resident when it was paged out: the
/// adaptive page-in record of paper 000 Fig. 4, one [`Run`] per stretch of
/// contiguous pages (a 1 GiB array touched throughout is one run, not 262144
/// pages).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageRecord {
    pub pid: i32,
    pub runs: Vec<Run>,
}

impl PageRecord {
    /// Pages over all runs.
    pub fn pages(&self) -> u64 {
        self.runs.iter().map(|r| r.pages).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.pages() * page_size()
    }
}

/// How [`resident_runs`] found the resident pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanMethod {
    /// The `PAGEMAP_SCAN` ioctl (Linux 6.7): the kernel returns runs.
    PagemapScan,
    /// Reading `/proc/<pid>/pagemap`, 8 bytes per page.
    PagemapRead,
}

impl ScanMethod {
    pub fn as_str(&self) -> &'static str {
        match self {
            ScanMethod::PagemapScan => "PAGEMAP_SCAN ioctl",
            ScanMethod::PagemapRead => "/proc/pid/pagemap read",
        }
    }
}

/// How [`page_in`] brought pages in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageInMethod {
    /// `MADV_WILLNEED` only (no fault-in asked for): reads started into the
    /// swap cache, the job's first touch maps each page (a minor fault).
    WillNeed,
    /// `MADV_WILLNEED`, then remote `MADV_POPULATE_READ`.
    PopulateRead,
    /// `MADV_WILLNEED`, then reading the job's memory with
    /// `process_vm_readv`, which faults the pages in.
    ProcessVmReadv,
}

impl PageInMethod {
    pub fn as_str(&self) -> &'static str {
        match self {
            PageInMethod::WillNeed => "MADV_WILLNEED",
            PageInMethod::PopulateRead => "MADV_WILLNEED + MADV_POPULATE_READ",
            PageInMethod::ProcessVmReadv => "MADV_WILLNEED + process_vm_readv",
        }
    }
}

/// What [`page_out`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageOutReport {
    /// Length of the ranges the kernel took the advice for (not the pages
    /// actually written: absent or shared pages are passed over).
    pub bytes_advised: u64,
    /// `process_madvise` calls, the permission probe included.
    pub calls: u64,
    /// Ranges refused (unmapped by now, locked, ...) and left alone.
    pub skipped_ranges: u64,
    pub duration: Duration,
}

/// What [`page_in`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct PageInReport {
    /// Length of the runs `MADV_WILLNEED` was taken for.
    pub bytes: u64,
    /// Bytes made resident by the fault-in step (0 without it).
    pub faulted_bytes: u64,
    /// Syscalls over both steps, probes included.
    pub calls: u64,
    pub method: PageInMethod,
    pub duration: Duration,
    /// Swapped runs the kernel refused (unmapped between the scan and the
    /// read), skipped. Recorded runs that no longer exist hold no swapped
    /// pages and are passed over before that.
    pub skipped_runs: u64,
    /// Recorded bytes still resident at page-in, left alone.
    pub resident_bytes: u64,
}

/// The page-out and page-in mechanisms as an executor uses them, behind an
/// interface so that an executor can be tested with a fake that needs no
/// root and no swap. [`Madvise`] is the kernel's.
pub trait Paging: Send + Sync + std::fmt::Debug {
    /// The resident runs of process `pid` (see [`record`]).
    fn record(&self, pid: i32) -> Result<PageRecord>;
    /// Page `runs` of process `pid` out (see [`page_out`]); returns the
    /// bytes advised.
    fn page_out(&self, pid: i32, runs: &[Run]) -> Result<u64>;
    /// Bring `record` back into its process and make it resident (see
    /// [`page_in`] with `fault_in`); returns the bytes made resident.
    fn page_in(&self, record: &PageRecord) -> Result<u64>;
    /// The part of `record` that is on swap now (see [`swapped_runs`]):
    /// what a page-in of it needs memory for. By default all of it.
    fn swapped(&self, record: &PageRecord) -> Result<PageRecord> {
        Ok(record.clone())
    }
    /// Put `record`'s wholly resident huge-page blocks back on huge pages
    /// once it is paged in (see [`restore_huge_pages`]); returns the bytes.
    /// By default none.
    fn restore_huge(&self, _record: &PageRecord) -> Result<u64> {
        Ok(0)
    }
    /// [`record`](Self::record), and the part of it on huge pages now
    /// (see [`record_with_huge`]): `None` if that cannot be known, and then
    /// a restore takes every whole block of the resident record. By default
    /// `None`.
    fn record_with_huge(&self, pid: i32) -> Result<(PageRecord, Option<PageRecord>)> {
        Ok((self.record(pid)?, None))
    }
}

/// [`Paging`] by this module's functions: `PAGEMAP_SCAN`,
/// `process_madvise(2)` and `process_vm_readv(2)` on the live process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Madvise;

impl Paging for Madvise {
    fn record(&self, pid: i32) -> Result<PageRecord> {
        record(pid).map(|(rec, _)| rec)
    }

    fn page_out(&self, pid: i32, runs: &[Run]) -> Result<u64> {
        page_out(pid, runs).map(|r| r.bytes_advised)
    }

    fn page_in(&self, record: &PageRecord) -> Result<u64> {
        page_in(record.pid, record, true).map(|r| r.faulted_bytes)
    }

    fn swapped(&self, record: &PageRecord) -> Result<PageRecord> {
        swapped_part(record.pid, record)
    }

    fn restore_huge(&self, record: &PageRecord) -> Result<u64> {
        restore_huge_pages(record.pid, &record.runs)
    }

    fn record_with_huge(&self, pid: i32) -> Result<(PageRecord, Option<PageRecord>)> {
        record_with_huge(pid)
    }
}

/// True if `e` says the process has exited (and is gone or a zombie).
pub fn is_gone(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::ESRCH))
}

/// The private memory of process `pid` that swap can hold, from
/// `/proc/<pid>/maps`: anonymous mappings (named or not), `[heap]`,
/// `[stack]`, and private writable file mappings (`.data`/`.bss`, whose
/// written pages are anonymous copies). Skipped: shared mappings (files,
/// shared memory: their pages are not the job's alone), `[vdso]`, `[vvar]`,
/// `[vsyscall]` and other kernel pseudo-mappings, read-only file mappings
/// (clean page cache, dropped rather than swapped) and inaccessible
/// (`---p`) reservations and guard pages, which hold no data.
pub fn anon_ranges(pid: i32) -> Result<Vec<Range<u64>>> {
    let fd = open_pidfd(pid, "reading the memory map of")?;
    let path = proc_file(pid, "maps");
    let bytes = std::fs::read(&path)
        .map_err(|e| proc_error(pid, "reading the memory map of", path.clone(), e))?;
    ensure_alive(&fd, "reading the memory map of")?;
    let maps: MemoryMaps = crate::proc::parse(&path, &String::from_utf8_lossy(&bytes))?;
    let mut out: Vec<Range<u64>> = Vec::new();
    for m in maps.iter().filter(|m| swappable(m)) {
        let (start, end) = m.address;
        match out.last_mut() {
            Some(last) if last.end == start => last.end = end,
            _ => out.push(start..end),
        }
    }
    Ok(out)
}

fn swappable(m: &MemoryMap) -> bool {
    let p = m.perms;
    if !p.contains(MMPermissions::PRIVATE)
        || !p.intersects(MMPermissions::READ | MMPermissions::WRITE)
    {
        return false;
    }
    match &m.pathname {
        MMapPath::Anonymous | MMapPath::Heap | MMapPath::Stack | MMapPath::TStack(_) => true,
        MMapPath::Path(_) => p.contains(MMPermissions::WRITE),
        // "[anon:<name>]" from prctl(PR_SET_VMA_ANON_NAME) (procfs strips
        // the brackets); anything else in brackets ([vvar_vclock],
        // [uprobes], ...) belongs to the kernel.
        MMapPath::Other(name) => name.starts_with("anon:"),
        MMapPath::Vdso | MMapPath::Vvar | MMapPath::Vsyscall | MMapPath::Rollup => false,
        MMapPath::Vsys(_) => false,
    }
}

/// The pages of `ranges` of process `pid` that are in RAM and anonymous
/// (file pages and the shared zero page are left out: neither goes to
/// swap), as ascending, merged runs. Uses the `PAGEMAP_SCAN` ioctl, or
/// reads `/proc/<pid>/pagemap` on kernels without it (ENOTTY/EINVAL), and
/// says which.
pub fn resident_runs(pid: i32, ranges: &[Range<u64>]) -> Result<(Vec<Run>, ScanMethod)> {
    scan_any(pid, ranges, Pages::Resident)
}

/// The pages of `ranges` of process `pid` that are mapped by a swap entry
/// (written to swap, or still in the swap cache), as ascending, merged
/// runs: what a page-in has to bring back. Same methods as
/// [`resident_runs`].
pub fn swapped_runs(pid: i32, ranges: &[Range<u64>]) -> Result<(Vec<Run>, ScanMethod)> {
    scan_any(pid, ranges, Pages::Swapped)
}

/// The part of `record` that is on swap now in process `pid`: the runs a
/// page-in reads.
fn swapped_part(pid: i32, record: &PageRecord) -> Result<PageRecord> {
    let ranges: Vec<Range<u64>> = record.runs.iter().map(|r| r.start..r.end()).collect();
    let (runs, _) = swapped_runs(pid, &ranges)?;
    Ok(PageRecord {
        pid: record.pid,
        runs,
    })
}

fn scan_any(pid: i32, ranges: &[Range<u64>], want: Pages) -> Result<(Vec<Run>, ScanMethod)> {
    if !SCAN_IOCTL_MISSING.load(Ordering::Relaxed) {
        match scan(pid, ranges, ScanMethod::PagemapScan, want)? {
            Some(runs) => return Ok((runs, ScanMethod::PagemapScan)),
            None => {
                tracing::info!(
                    "PAGEMAP_SCAN ioctl not available (Linux 6.7+); reading /proc/<pid>/pagemap \
                     instead"
                );
                SCAN_IOCTL_MISSING.store(true, Ordering::Relaxed);
            }
        }
    }
    let runs = scan(pid, ranges, ScanMethod::PagemapRead, want)?.unwrap_or_default();
    Ok((runs, ScanMethod::PagemapRead))
}

/// [`resident_runs`] by the given method only: `Error::Unsupported` if
/// this kernel has no `PAGEMAP_SCAN`. For tests and benchmarks.
pub fn resident_runs_with(pid: i32, ranges: &[Range<u64>], method: ScanMethod) -> Result<Vec<Run>> {
    scan(pid, ranges, method, Pages::Resident)?.ok_or_else(|| {
        Error::Unsupported(format!(
            "scanning the page tables of process {pid}: this kernel has no PAGEMAP_SCAN ioctl \
             (Linux 6.7+)"
        ))
    })
}

/// [`anon_ranges`] and [`resident_runs`]: the record to keep at page-out.
pub fn record(pid: i32) -> Result<(PageRecord, ScanMethod)> {
    let ranges = anon_ranges(pid)?;
    let (runs, method) = resident_runs(pid, &ranges)?;
    Ok((PageRecord { pid, runs }, method))
}

/// [`record`], and the anonymous memory that huge pages map now, as runs
/// of whole huge pages, from one reading of the process's mappings: taken
/// at page-out (which splits them), it is what [`restore_huge_pages`]
/// should put back, and no more. The second is `None` on a kernel without
/// `PAGEMAP_SCAN`: pagemap does not say which pages are huge.
pub fn record_with_huge(pid: i32) -> Result<(PageRecord, Option<PageRecord>)> {
    let ranges = anon_ranges(pid)?;
    let (runs, _) = resident_runs(pid, &ranges)?;
    let huge = if SCAN_IOCTL_MISSING.load(Ordering::Relaxed) {
        None
    } else {
        scan(pid, &ranges, ScanMethod::PagemapScan, Pages::Huge)?
            .map(|runs| PageRecord { pid, runs })
    };
    Ok((PageRecord { pid, runs }, huge))
}

/// Aggressive page-out: `MADV_PAGEOUT` over `spans` of process `pid`
/// (runs from a [`PageRecord`], or ranges from [`anon_ranges`]). The
/// kernel unmaps the pages and starts writing them to swap before the call
/// returns; the write-back completes asynchronously. Ranges that fail
/// (unmapped since) are skipped and counted. Err if the process has exited
/// ([`is_gone`]) or the caller may not do this (`Error::Permission`).
pub fn page_out<S: Span>(pid: i32, spans: &[S]) -> Result<PageOutReport> {
    let t = Instant::now();
    let fd = open_pidfd(pid, "paging out")?;
    let spans: Vec<(u64, u64)> = spans.iter().map(Span::span).collect();
    // The probe makes a dead process or missing rights an error even when
    // there is nothing to page out.
    probe(&fd, libc::MADV_PAGEOUT, "MADV_PAGEOUT")?;
    let mut skipped = vec![false; spans.len()];
    let (bytes, calls) = advise(
        &fd,
        &spans,
        libc::MADV_PAGEOUT,
        "MADV_PAGEOUT",
        &mut skipped,
    )?;
    Ok(PageOutReport {
        bytes_advised: bytes,
        calls: calls + 1,
        skipped_ranges: skipped.iter().filter(|&&s| s).count() as u64,
        duration: t.elapsed(),
    })
}

/// Adaptive page-in of `record` into process `pid`: `MADV_WILLNEED` over
/// the recorded runs, which starts the swap reads of all of them at once;
/// then, with `fault_in`, make them resident so the job does not fault
/// them itself: remote `MADV_POPULATE_READ` if this kernel allows it (most
/// do not: `process_madvise` takes only COLD, PAGEOUT, WILLNEED and
/// COLLAPSE for another process), else `process_vm_readv` over the runs.
/// The latter needs ptrace rights (root) and, for a page still shared
/// copy-on-write with another process, makes the job's own copy of it.
/// Runs unmapped since are skipped and counted.
///
/// Only the recorded pages that are mapped by a swap entry now are read:
/// pages still resident are left alone. Reading them too cost a job its
/// running time (bench/realapps_fit.sh: with nothing paged out, so/ao/ai
/// made the stencil pair 9.5% slower than batch where so/ao made it 5.4%).
pub fn page_in(pid: i32, record: &PageRecord, fault_in: bool) -> Result<PageInReport> {
    let t = Instant::now();
    if record.pid != pid {
        tracing::warn!(
            pid,
            record_pid = record.pid,
            "paging in a record made for another process"
        );
    }
    let fd = open_pidfd(pid, "paging in")?;
    let swapped = swapped_part(pid, record)?;
    let resident_bytes = record.bytes().saturating_sub(swapped.bytes());
    let record = &swapped;
    // Runs cut to windows of at most PAGE_IN_WINDOW; `owner[k]` is the run
    // that piece k came from.
    let pieces = runs::cut(&record.runs, PAGE_IN_WINDOW);
    let windows = runs::batches(&pieces, PAGE_IN_WINDOW);
    let spans: Vec<(u64, u64)> = pieces.iter().map(|&(s, l, _)| (s, l)).collect();
    let owner: Vec<usize> = pieces.iter().map(|p| p.2).collect();
    probe(&fd, libc::MADV_WILLNEED, "MADV_WILLNEED")?;
    let mut calls = 1;
    let mut skipped = vec![false; spans.len()];
    let mut method = PageInMethod::WillNeed;
    if fault_in {
        calls += 1;
        if probe(&fd, MADV_POPULATE_READ, "MADV_POPULATE_READ")? {
            method = PageInMethod::PopulateRead;
        } else {
            method = PageInMethod::ProcessVmReadv;
        }
    }
    let (mut bytes, mut faulted_bytes) = (0, 0);
    // The reads of window k+1 are started before window k is faulted in,
    // so the disk always has a window's worth of work queued while the
    // pool holds at most two windows of pages being read.
    let willneed = |w: &std::ops::Range<usize>, skipped: &mut [bool]| {
        advise(
            &fd,
            &spans[w.clone()],
            libc::MADV_WILLNEED,
            "MADV_WILLNEED",
            &mut skipped[w.clone()],
        )
    };
    if let Some(w) = windows.first() {
        let (b, c) = willneed(w, &mut skipped)?;
        bytes += b;
        calls += c;
    }
    for (k, w) in windows.iter().enumerate() {
        if let Some(next) = windows.get(k + 1) {
            let (b, c) = willneed(next, &mut skipped)?;
            bytes += b;
            calls += c;
        }
        if !fault_in {
            continue;
        }
        let (b, c) = match method {
            PageInMethod::PopulateRead => advise(
                &fd,
                &spans[w.clone()],
                MADV_POPULATE_READ,
                "MADV_POPULATE_READ",
                &mut skipped[w.clone()],
            )?,
            _ => read_through(&fd, &spans[w.clone()], &mut skipped[w.clone()])?,
        };
        faulted_bytes += b;
        calls += c;
    }
    let mut stale: Vec<usize> = owner
        .iter()
        .zip(&skipped)
        .filter_map(|(o, s)| s.then_some(*o))
        .collect();
    stale.dedup();
    Ok(PageInReport {
        bytes,
        faulted_bytes,
        calls,
        method,
        duration: t.elapsed(),
        skipped_runs: stale.len() as u64,
        resident_bytes,
    })
}

/// Put process `pid`'s memory back on huge pages (`MADV_COLLAPSE`) where
/// its record `runs` holds a whole huge-page-aligned block, once that
/// record is resident again: after [`page_in`]. Swap-out splits a huge
/// page and swap-in brings it back as small ones, so a job that asked for
/// huge pages (NumPy does, for its arrays) ran the rest of its life on
/// small ones: SciPy CG alone computed 9% slower on them, NumPy's stencil
/// and gather 4-5% (bench/realapps_fit.sh, THP_ROUNDS=3). Give it the
/// huge-page record of [`record_with_huge`] taken before the page-out, so
/// that only blocks that were huge pages are collapsed; a resident record
/// (a kernel without `PAGEMAP_SCAN`) also collapses wholly resident blocks
/// the job had on small pages, unless it said `MADV_NOHUGEPAGE` (the
/// kernel refuses those). Only whole blocks: one with a page missing would
/// be filled with zero pages, memory the job never had. The kernel copies
/// each block's small pages into a new huge page, which took about as long
/// as the page-in itself here (bench/results/switch-ab-huge-20261126: a
/// switch 0.44 -> 0.71 s for cg when done in it), so an executor does it beside the running job
/// rather than in the switch. A block the kernel will not collapse (no
/// huge page free, a kernel before 6.1) stays on small pages: the job runs
/// slower, not wrong. Returns the bytes of the blocks collapsed; Err only
/// if the process is gone or may not be advised.
pub fn restore_huge_pages(pid: i32, runs: &[Run]) -> Result<u64> {
    let Some(huge) = crate::sysfs::huge_page_size() else {
        return Ok(0);
    };
    let fd = open_pidfd(pid, "restoring huge pages of")?;
    let blocks = runs::whole_blocks(runs, huge);
    let mut done = 0;
    for (start, len, _) in runs::cut(&blocks, MAX_PIECE_BYTES) {
        let iov = [libc::iovec {
            iov_base: start as *mut libc::c_void,
            iov_len: len as usize,
        }];
        match process_madvise(&fd, &iov, MADV_COLLAPSE) {
            Ok(_) => done += len,
            Err(e) => tracing::debug!(
                pid = fd.pid(),
                start = format_args!("{start:#x}"),
                len,
                "MADV_COLLAPSE left a range on small pages: {e}"
            ),
        }
    }
    Ok(done)
}

// --- process_madvise ----------------------------------------------------------

fn process_madvise(fd: &PidFd, iov: &[libc::iovec], advice: i32) -> io::Result<u64> {
    // SAFETY: iov points at iov.len() valid iovecs that outlive the call;
    // the kernel only reads them (the addresses are the target's, never
    // dereferenced here).
    let r = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            fd.as_raw_fd(),
            iov.as_ptr(),
            iov.len(),
            advice,
            0u32,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as u64)
    }
}

/// Whether process_madvise takes `advice` for this process at all, asked
/// with an empty vector. Ok(false): the advice is refused (EINVAL: not one
/// a kernel lets callers give another process). Errors: gone, permission,
/// no process_madvise.
fn probe(fd: &PidFd, advice: i32, name: &'static str) -> Result<bool> {
    let dummy = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }];
    let mut retries = 0;
    loop {
        match process_madvise(fd, &dummy[..0], advice) {
            Ok(_) => return Ok(true),
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) if retries < RETRIES => retries += 1,
                Some(libc::EINVAL) => return Ok(false),
                _ => return Err(madvise_error(fd.pid(), name, e)),
            },
        }
    }
}

/// `advice` over `spans`, batched; returns (bytes advised, calls). A span
/// the kernel refuses is marked in `skipped` and the rest go on.
///
/// process_madvise works through the vector in order and stops at the
/// first range that fails: if it got anywhere it returns the bytes of the
/// ranges done, else the error. So after a short count we resume at the
/// range it stopped on; on its own, that range then reports its error.
fn advise(
    fd: &PidFd,
    spans: &[(u64, u64)],
    advice: i32,
    name: &'static str,
    skipped: &mut [bool],
) -> Result<(u64, u64)> {
    let pieces: Vec<_> = runs::cut(spans, MAX_PIECE_BYTES)
        .into_iter()
        .filter(|p| !skipped[p.2])
        .collect();
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(IOV_BATCH);
    let (mut bytes, mut calls, mut retries) = (0u64, 0u64, 0u32);
    let mut i = 0;
    while i < pieces.len() {
        let batch = &pieces[i..i + runs::batch_len(&pieces, i, MAX_CALL_BYTES, IOV_BATCH)];
        iov.clear();
        iov.extend(batch.iter().map(|&(s, l, _)| libc::iovec {
            iov_base: s as *mut libc::c_void,
            iov_len: l as usize,
        }));
        calls += 1;
        match process_madvise(fd, &iov, advice) {
            Ok(n) => {
                bytes += n;
                let mut left = n;
                let mut done = 0;
                while done < batch.len() && left >= batch[done].1 {
                    left -= batch[done].1;
                    done += 1;
                }
                if done == 0 {
                    // No progress and no error: cannot happen for non-empty
                    // ranges; give the range up rather than loop.
                    skipped[batch[0].2] = true;
                    done = 1;
                }
                i += done;
            }
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) if retries < RETRIES => retries += 1,
                // This range is unmapped (ENOMEM), not advisable (EINVAL:
                // locked, PFN map, ...), or EFAULT/EAGAIN persistently.
                Some(libc::ENOMEM) | Some(libc::EINVAL) | Some(libc::EFAULT)
                | Some(libc::EINTR) | Some(libc::EAGAIN) => {
                    tracing::debug!(
                        pid = fd.pid(),
                        start = format_args!("{:#x}", batch[0].0),
                        len = batch[0].1,
                        "{name} skipped a range: {e}"
                    );
                    skipped[batch[0].2] = true;
                    i += 1;
                    retries = 0;
                }
                _ => return Err(madvise_error(fd.pid(), name, e)),
            },
        }
    }
    Ok((bytes, calls))
}

// --- process_vm_readv -------------------------------------------------------

/// Fault `spans` in by reading them with process_vm_readv into a scratch
/// buffer; returns (bytes read, calls). Reading stops at the first page
/// that cannot be read: the rest of that span is given up (marked in
/// `skipped`) and the next span goes on.
fn read_through(fd: &PidFd, spans: &[(u64, u64)], skipped: &mut [bool]) -> Result<(u64, u64)> {
    let pieces: Vec<_> = runs::cut(spans, MAX_PIECE_BYTES)
        .into_iter()
        .filter(|p| !skipped[p.2])
        .collect();
    let mut buf = vec![0u8; READ_BUF];
    let mut local: Vec<libc::iovec> = Vec::with_capacity(IOV_BATCH);
    let mut remote: Vec<libc::iovec> = Vec::with_capacity(IOV_BATCH);
    let (mut bytes, mut calls, mut retries) = (0u64, 0u64, 0u32);
    let mut i = 0;
    while i < pieces.len() {
        let batch = &pieces[i..i + runs::batch_len(&pieces, i, MAX_PIECE_BYTES, IOV_BATCH)];
        // Skip spans that failed in an earlier batch (a later piece of one).
        if skipped[batch[0].2] {
            i += 1;
            continue;
        }
        let total: u64 = batch.iter().map(|p| p.1).sum();
        remote.clear();
        remote.extend(batch.iter().map(|&(s, l, _)| libc::iovec {
            iov_base: s as *mut libc::c_void,
            iov_len: l as usize,
        }));
        local.clear();
        let n_local = (total as usize).div_ceil(READ_BUF);
        local.extend((0..n_local).map(|_| libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: READ_BUF,
        }));
        calls += 1;
        // SAFETY: every local iovec covers `buf` (READ_BUF bytes, alive
        // across the call; overlapping is fine, the data is discarded);
        // remote iovecs name the target's memory, which the kernel checks.
        let r = unsafe {
            libc::process_vm_readv(
                fd.pid(),
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        if r >= 0 {
            let n = r as u64;
            bytes += n;
            if n >= total {
                i += batch.len();
                continue;
            }
            // Stopped inside piece k: give up the rest of its span.
            let mut left = n;
            let mut k = 0;
            while left >= batch[k].1 {
                left -= batch[k].1;
                k += 1;
            }
            skipped[batch[k].2] = true;
            i += k + 1;
            retries = 0;
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) | Some(libc::EAGAIN) if retries < RETRIES => retries += 1,
            Some(libc::EFAULT) | Some(libc::EINTR) | Some(libc::EAGAIN) => {
                skipped[batch[0].2] = true;
                i += 1;
                retries = 0;
            }
            // The pidfd tells a dead process from a recycled pid: a pid
            // reused by another process after ours died still means gone.
            _ if !fd.is_alive() => return Err(gone(fd.pid(), "paging in")),
            Some(libc::ESRCH) => return Err(gone(fd.pid(), "paging in")),
            Some(libc::EPERM) | Some(libc::EACCES) => {
                return Err(permission(fd.pid(), "process_vm_readv", e))
            }
            _ => {
                return Err(Error::io(
                    "faulting pages in (process_vm_readv) of",
                    proc_file(fd.pid(), ""),
                    e,
                ))
            }
        }
    }
    // A read that succeeded may still have read a recycled pid's memory if
    // ours died in between; harmless (nothing changed) but say gone.
    if !fd.is_alive() {
        return Err(gone(fd.pid(), "paging in"));
    }
    Ok((bytes, calls))
}

// --- errors and /proc ---------------------------------------------------------

fn gone(pid: i32, action: &'static str) -> Error {
    Error::io(
        action,
        proc_file(pid, ""),
        io::Error::from_raw_os_error(libc::ESRCH),
    )
}

fn permission(pid: i32, what: &str, e: io::Error) -> Error {
    Error::Permission(format!(
        "{what} on process {pid}: {e}: bulk paging at the job switch needs root, or \
         CAP_SYS_NICE plus ptrace access to the job's processes; without it memgang falls back \
         to the kernel's LRU paging"
    ))
}

fn madvise_error(pid: i32, name: &'static str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ESRCH) => gone(pid, "process_madvise: the process has exited:"),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            permission(pid, &format!("process_madvise({name})"), e)
        }
        Some(libc::ENOSYS) => Error::Unsupported(format!(
            "process_madvise({name}) on process {pid}: this kernel has no process_madvise \
             (Linux 5.10+); memgang falls back to the kernel's LRU paging"
        )),
        _ => Error::io("process_madvise on", proc_file(pid, ""), e),
    }
}

/// An error on a `/proc/<pid>` file: gone, permission or plain I/O.
fn proc_error(pid: i32, action: &'static str, path: PathBuf, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ESRCH) => gone(pid, action),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            permission(pid, &format!("{action} {}", path.display()), e)
        }
        _ => Error::io(action, path, e),
    }
}

fn open_pidfd(pid: i32, action: &'static str) -> Result<PidFd> {
    PidFd::try_open(pid)?.ok_or_else(|| gone(pid, action))
}

/// A `/proc/<pid>` file opened (or read) before this returns Ok belonged to
/// the process `fd` refers to: its pid cannot have been reused while it
/// was still alive.
fn ensure_alive(fd: &PidFd, action: &'static str) -> Result<()> {
    if fd.is_alive() {
        Ok(())
    } else {
        Err(gone(fd.pid(), action))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_and_batches_respect_kernel_limits() {
        let p = page_size();
        let big = 3 * MAX_PIECE_BYTES + p;
        let ps = runs::cut(
            &[(0x1000_0000, big), (0x90_0000_0000, p / 2)],
            MAX_PIECE_BYTES,
        );
        assert_eq!(ps.len(), 5);
        assert!(ps.iter().all(|x| x.1 <= MAX_PIECE_BYTES && x.1 % p == 0));
        assert_eq!(ps[..4].iter().map(|x| x.1).sum::<u64>(), big);
        assert_eq!(ps[4], (0x90_0000_0000, p, 1));
        // A madvise batch stays under MAX_RW_COUNT: one 1 GiB piece and a
        // bit fit, two do not overflow it.
        assert_eq!(runs::batch_len(&ps, 0, MAX_CALL_BYTES, IOV_BATCH), 1);
        assert_eq!(runs::batch_len(&ps, 0, MAX_PIECE_BYTES, IOV_BATCH), 1);
        let small: Vec<_> = (0..3000).map(|i| (i * 2 * p, p, i as usize)).collect();
        assert_eq!(
            runs::batch_len(&small, 0, MAX_CALL_BYTES, IOV_BATCH),
            IOV_BATCH
        );
        assert_eq!(
            runs::batch_len(&small, 2500, MAX_CALL_BYTES, IOV_BATCH),
            500
        );
    }

    #[test]
    fn maps_filter() {
        let maps: MemoryMaps = crate::proc::parse(
            std::path::Path::new("/proc/1/maps"),
            "\
55d0a0000000-55d0a0001000 r--p 00000000 08:01 123 /usr/bin/job
55d0a0001000-55d0a0002000 r-xp 00001000 08:01 123 /usr/bin/job
55d0a0002000-55d0a0003000 rw-p 00002000 08:01 123 /usr/bin/job
55d0a0003000-55d0a0005000 rw-p 00000000 00:00 0 
55d0a1000000-55d0a1100000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000100000 rw-s 00000000 00:05 77 /dev/shm/x
7f0000100000-7f0000200000 ---p 00000000 00:00 0 
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 [anon:arena]
7f0000300000-7f0000301000 r--p 00000000 00:00 0 [vvar]
7f0000301000-7f0000302000 r--p 00000000 00:00 0 [vvar_vclock]
7f0000302000-7f0000303000 r-xp 00000000 00:00 0 [vdso]
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
",
        )
        .unwrap();
        let kept: Vec<_> = maps
            .iter()
            .filter(|m| swappable(m))
            .map(|m| m.address.0)
            .collect();
        assert_eq!(
            kept,
            vec![
                0x55d0a0002000,
                0x55d0a0003000,
                0x55d0a1000000,
                0x7f0000200000,
                0x7ffc00000000
            ]
        );
    }

    #[test]
    fn gone_is_recognised() {
        assert!(is_gone(&gone(7, "paging out")));
        assert!(!is_gone(&Error::Permission("x".into())));
        let e = permission(
            7,
            "process_madvise(MADV_PAGEOUT)",
            io::Error::from_raw_os_error(1),
        );
        assert!(e.to_string().contains("CAP_SYS_NICE") && e.to_string().contains("LRU"));
    }
}
