//! Bulk paging (paper 000 §3: aggressive page-out, adaptive page-in) on the
//! real kernel: a forked child holding a pattern in anonymous memory inside
//! a memory cgroup, with a test swap file. Needs root (cgroups, swapon,
//! process_madvise on another process); skips loudly otherwise. Run with
//! `--test-threads=1`: the tests create swap and watch paging counters.

mod common;

use common::*;
use memgang_linux::cgroup::{self, CgroupBackend, GroupPath};
use memgang_linux::counters;
use memgang_linux::paging::{self, PageRecord, Run, ScanMethod};
use memgang_linux::process::{self, Forked};
use memgang_linux::swap::TestSwap;
use memgang_linux::Error;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The job's memory: big enough that bulk paging shows in the timings,
/// small enough for a CI machine.
const MEM: usize = 128 << 20;
const SWAP: u64 = 512 * MIB;
/// Room for the job and its swap cache; the limit is only lowered on
/// purpose, to push the swap cache out.
const POOL_LIMIT: u64 = 384 * MIB;
const SEED: u64 = 0x5eed_1234_abcd_ef01;
/// A child that is verifying 128 MiB from swap is slow but not this slow.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);
const PROBE_ENV: &str = "MEMGANG_TEST_PAGING_PROBE_PID";

fn page() -> u64 {
    paging::page_size()
}

fn backend(test: &str) -> Option<Arc<dyn CgroupBackend>> {
    memory_backend(
        test,
        "needs root (cgroups, swapon, process_madvise on another process)",
    )
}

#[inline(always)]
fn pattern(i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ SEED
}

/// A test's swap file and its pool (a memory cgroup of [`POOL_LIMIT`]),
/// with the jobs forked into it; torn down on drop, also when the test
/// panics. Fields drop in order: the processes die before their swap goes.
struct Bed {
    guard: Cleanup,
    pool: GroupPath,
    _swap: TestSwap,
}

impl Bed {
    fn new(backend: &Arc<dyn CgroupBackend>, name: &str, swap: u64) -> Bed {
        let swap = TestSwap::new(swap).expect("creating the test swap");
        let pool = test_group(name);
        let mut guard = Cleanup::new(backend.clone());
        guard.groups = vec![pool.clone()];
        backend.create(&pool).unwrap();
        backend.set_memory_limit(&pool, Some(POOL_LIMIT)).unwrap();
        Bed {
            guard,
            pool,
            _swap: swap,
        }
    }

    /// [`fork_job`] into the pool, killed with it.
    fn fork(&mut self, bytes: usize, hole: usize, huge: Thp) -> Job {
        let job = fork_job(self.guard.backend.as_ref(), &self.pool, bytes, hole, huge);
        self.guard.children.push(job.pid);
        job
    }
}

/// A forked job: `bytes` of anonymous memory at `addr` holding
/// [`pattern`]. Commands go down `cmd`: `T` = verify every word and write
/// it back (dirtying the page), answered `O` (intact) or `F` on `res`. Closing `cmd` ends it.
struct Job {
    pid: i32,
    cmd: File,
    res: File,
    addr: u64,
    len: u64,
}

/// Fork the job into `group`. `hole` bytes after its memory are left
/// unmapped (mapped, then unmapped), so a run there is certainly stale.
/// Only async-signal-safe calls (raw syscalls, memory access) in the child.
/// `huge`: the job asks for huge pages (as NumPy does), else it keeps to
/// 4 KiB ones so that runs and fault counts mean pages.
/// What transparent huge pages a test job's memory gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Thp {
    /// `MADV_NOHUGEPAGE`: small pages only.
    Small,
    /// The first half on huge pages (`MADV_HUGEPAGE`, where the kernel
    /// has them); the second half on small pages,
    /// then advised `MADV_HUGEPAGE`, so that the kernel would collapse it
    /// if asked (a heap that grew before its program asked for huge pages).
    HalfHuge,
}

fn fork_job(
    backend: &dyn CgroupBackend,
    group: &GroupPath,
    bytes: usize,
    hole: usize,
    huge: Thp,
) -> Job {
    let procs: Vec<File> = cgroup::open_procs(backend, group).unwrap();
    let proc_fds: Vec<i32> = procs.iter().map(|f| f.as_raw_fd()).collect();
    // SAFETY: the child runs only raw syscalls and accesses to its own
    // mapping, and _exits.
    let Forked { pid, cmd, res } =
        unsafe { process::fork_piped(|cr, rw| job_main(&proc_fds, cr, rw, bytes, hole, huge)) }
            .unwrap();
    drop(procs);
    let mut a = [0u8; 8];
    assert!(recv(&res, &mut a, REPLY_TIMEOUT), "job {pid} did not start");
    Job {
        pid,
        cmd,
        res,
        addr: u64::from_ne_bytes(a),
        len: bytes as u64,
    }
}

unsafe fn job_main(procs: &[i32], cr: i32, rw: i32, bytes: usize, hole: usize, huge: Thp) -> ! {
    for fd in procs {
        if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
            libc::_exit(1);
        }
    }
    let p = libc::mmap(
        std::ptr::null_mut(),
        bytes + hole,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        libc::_exit(2);
    }
    if hole > 0 {
        libc::munmap(p.cast::<u8>().add(bytes).cast(), hole);
    }
    libc::madvise(p, bytes, libc::MADV_NOHUGEPAGE);
    let half = p.cast::<u8>().add(bytes / 2).cast();
    if huge == Thp::HalfHuge {
        libc::madvise(p, bytes / 2, libc::MADV_HUGEPAGE);
    }
    let w = p.cast::<u64>();
    let words = bytes / 8;
    for i in 0..words {
        std::ptr::write_volatile(w.add(i), pattern(i));
    }
    if huge == Thp::HalfHuge {
        // On small pages, but allowed huge ones from now on.
        libc::madvise(half, bytes / 2, libc::MADV_HUGEPAGE);
    }
    let a = (p as u64).to_ne_bytes();
    if libc::write(rw, a.as_ptr().cast(), 8) != 8 {
        libc::_exit(3);
    }
    loop {
        let mut c = 0u8;
        let n = libc::read(cr, (&mut c as *mut u8).cast(), 1);
        if n < 0 && *libc::__errno_location() == libc::EINTR {
            continue;
        }
        if n != 1 || c != b'T' {
            libc::_exit(0);
        }
        // Read, check and write back every word: the job dirties its
        // memory as a real one would, so each page-out has to write it.
        let mut ok = true;
        for i in 0..words {
            let v = std::ptr::read_volatile(w.add(i));
            ok &= v == pattern(i);
            std::ptr::write_volatile(w.add(i), v);
        }
        let r = if ok { b'O' } else { b'F' };
        if libc::write(rw, (&r as *const u8).cast(), 1) != 1 {
            libc::_exit(4);
        }
    }
}

/// Read exactly `buf.len()` bytes from `fd`, waiting at most `timeout`.
fn recv(fd: &File, buf: &mut [u8], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, left.as_millis() as i32) };
        if r == 0 {
            return false;
        }
        if r < 0 {
            continue; // EINTR
        }
        // SAFETY: reading into the unfilled tail of buf.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        if n <= 0 {
            return false;
        }
        got += n as usize;
    }
    true
}

impl Job {
    /// Have the job touch and verify all its memory; its answer and how
    /// long the round trip took.
    fn touch(&self) -> (u8, Duration) {
        let t = Instant::now();
        // SAFETY: writing one byte from a live buffer.
        let n = unsafe { libc::write(self.cmd.as_raw_fd(), b"T".as_ptr().cast(), 1) };
        assert_eq!(n, 1, "job {} is gone", self.pid);
        let mut r = [0u8];
        assert!(
            recv(&self.res, &mut r, REPLY_TIMEOUT),
            "job {} did not answer",
            self.pid
        );
        (r[0], t.elapsed())
    }

    fn pages(&self) -> u64 {
        self.len / page()
    }

    /// Pages of `runs` inside the job's memory, and how many runs touch it.
    fn resident(&self, runs: &[Run]) -> (u64, usize) {
        let (lo, hi) = (self.addr, self.addr + self.len);
        let mut pages = 0;
        let mut n = 0;
        for r in runs {
            let (s, e) = (r.start.max(lo), r.end().min(hi));
            if s < e {
                pages += (e - s) / page();
                n += 1;
            }
        }
        (pages, n)
    }

    fn resident_now(&self) -> (u64, usize) {
        let ranges = paging::anon_ranges(self.pid).unwrap();
        self.resident(&paging::resident_runs(self.pid, &ranges).unwrap().0)
    }
}

/// Assert two run lists are equal, naming the first difference only.
/// The PAGEMAP_SCAN ioctl and /proc/PID/pagemap report the same runs of
/// `job`'s mapping, each list ascending, disjoint and merged.
fn assert_scanners_agree(job: &Job, runs: &[Run], read: &[Run]) {
    let inside = |rs: &[Run]| -> Vec<Run> {
        rs.iter()
            .copied()
            .filter(|r| r.start < job.addr + job.len && r.end() > job.addr)
            .collect()
    };
    for (rs, by) in [(runs, "ioctl"), (read, "pagemap")] {
        assert!(
            rs.windows(2).all(|w| w[0].end() < w[1].start),
            "{by}: runs not ascending, disjoint and merged"
        );
    }
    assert_same_runs(&inside(runs), &inside(read), "ioctl and pagemap disagree");
}

fn assert_same_runs(a: &[Run], b: &[Run], what: &str) {
    if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
        panic!(
            "{what}: {} vs {} runs, first difference at #{i}: {:x?} vs {:x?} (before: {:x?})",
            a.len(),
            b.len(),
            a.get(i),
            b.get(i),
            i.checked_sub(1).and_then(|j| a.get(j))
        );
    }
}

/// Major faults of `pid` (field 12 of /proc/<pid>/stat).
fn majflt(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &text[text.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(9).unwrap().parse().unwrap()
}

fn mib_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / MIB as f64 / d.as_secs_f64().max(1e-9)
}

/// Push the paged-out pages out of the swap cache too (squeeze the pool's
/// limit), so that the page-in that follows has to read the swap device,
/// as it would after another job had used the memory.
fn evict_swap_cache(backend: &dyn CgroupBackend, pool: &GroupPath) {
    let before = backend.memory_stat(pool).unwrap().usage_bytes;
    let t = Instant::now();
    let squeezed = backend.set_memory_limit(pool, Some(MIB));
    backend.set_memory_limit(pool, Some(POOL_LIMIT)).unwrap();
    let after = backend.memory_stat(pool).unwrap().usage_bytes;
    eprintln!(
        "  swap cache eviction (waits for the page-out's write-back): pool usage {:.1} -> {:.1} \
         MiB in {:?}{}",
        before as f64 / MIB as f64,
        after as f64 / MIB as f64,
        t.elapsed(),
        squeezed
            .err()
            .map_or(String::new(), |e| format!(" (limit refused: {e})"))
    );
}

#[test]
#[ignore = "needs root: process_madvise on another process, cgroups, swapon (scripts/test runs it as root)"]
fn page_out_and_page_in_move_a_job_in_bulk_and_keep_its_data() {
    let test = "page_out_and_page_in_move_a_job_in_bulk_and_keep_its_data";
    let Some(backend) = backend(test) else {
        return;
    };
    let mut bed = Bed::new(&backend, "paging", SWAP);
    let job = bed.fork(MEM, 0, Thp::Small);
    let pool = bed.pool.clone();
    let pid = job.pid;
    let pages = job.pages();

    for cycle in 1..=3 {
        eprintln!("cycle {cycle}:");
        let ranges = paging::anon_ranges(pid).unwrap();
        assert!(
            ranges
                .iter()
                .any(|r| r.start <= job.addr && job.addr + job.len <= r.end),
            "the job's memory {:#x}+{} is not among its anonymous ranges {ranges:x?}",
            job.addr,
            job.len
        );
        let t = Instant::now();
        let (runs, method) = paging::resident_runs(pid, &ranges).unwrap();
        let scan_time = t.elapsed();
        let (present, nruns) = job.resident(&runs);
        eprintln!(
            "  before page-out: {present}/{pages} pages present in {nruns} run(s) \
             ({} runs, {} pages over {} ranges of the process), scanned by {} in {scan_time:?}",
            runs.len(),
            runs.iter().map(|r| r.pages).sum::<u64>(),
            ranges.len(),
            method.as_str()
        );
        assert!(present * 100 >= pages * 95, "{present}/{pages} present");
        assert!(nruns < 64, "not compact: {nruns} runs for one mapping");
        if cycle == 1 {
            // Both scanners see the same pages of the (idle) job.
            let read = paging::resident_runs_with(pid, &ranges, ScanMethod::PagemapRead).unwrap();
            assert_scanners_agree(&job, &runs, &read);
        }
        let record = PageRecord { pid, runs };

        let anon_before = backend.memory_stat(&pool).unwrap().anon_bytes;
        let out = paging::page_out(pid, &record.runs).unwrap();
        let anon_after = backend.memory_stat(&pool).unwrap().anon_bytes;
        let (_rss, swapped) = counters::process_rss_swap(pid).unwrap();
        let (left, _) = job.resident_now();
        eprintln!(
            "  page_out: {:.1} MiB advised in {} call(s), {:?} = {:.0} MiB/s; pool anon {:.1} -> \
             {:.1} MiB, job swap {:.1} MiB, {left} pages of the mapping still present",
            out.bytes_advised as f64 / MIB as f64,
            out.calls,
            out.duration,
            mib_s(record.bytes(), out.duration),
            anon_before as f64 / MIB as f64,
            anon_after as f64 / MIB as f64,
            swapped as f64 / MIB as f64,
        );
        assert_eq!(out.skipped_ranges, 0, "{out:?}");
        assert!(out.bytes_advised >= record.bytes(), "{out:?}");
        assert!(
            anon_after * 10 < anon_before,
            "anon {anon_before} -> {anon_after}"
        );
        assert!(swapped * 10 >= job.len * 9, "only {swapped} bytes in swap");
        assert!(left * 10 < pages, "{left}/{pages} still present");

        evict_swap_cache(backend.as_ref(), &pool);

        let pin = paging::page_in(pid, &record, true).unwrap();
        let (back, back_runs) = job.resident_now();
        let anon_in = backend.memory_stat(&pool).unwrap().anon_bytes;
        eprintln!(
            "  page_in: {:.1} MiB in {} call(s) by {}, {:?} = {:.0} MiB/s; {back}/{pages} pages \
             present again in {back_runs} run(s), pool anon {:.1} MiB",
            pin.faulted_bytes as f64 / MIB as f64,
            pin.calls,
            pin.method.as_str(),
            pin.duration,
            mib_s(record.bytes(), pin.duration),
            anon_in as f64 / MIB as f64,
        );
        assert_eq!(pin.skipped_runs, 0, "{pin:?}");
        assert!(back * 10 >= pages * 9, "{back}/{pages} back");
        assert!(anon_in * 10 >= anon_before * 9, "anon {anon_in}");

        let m0 = majflt(pid);
        let (answer, took) = job.touch();
        let faults = majflt(pid) - m0;
        eprintln!(
            "  job re-touched and verified its memory in {took:?} with {faults} major faults"
        );
        assert_eq!(answer, b'O', "the job's data changed in cycle {cycle}");
        assert!(faults * 100 < pages, "{faults} major faults after page_in");
    }

    // For comparison: the same switch-in left to demand paging.
    let (record, _) = paging::record(pid).unwrap();
    paging::page_out(pid, &record.runs).unwrap();
    evict_swap_cache(backend.as_ref(), &pool);
    let m0 = majflt(pid);
    let (answer, took) = job.touch();
    eprintln!(
        "demand paging instead: the job faulted its memory back in {took:?} ({:.0} MiB/s) with \
         {} major faults",
        mib_s(record.bytes(), took),
        majflt(pid) - m0
    );
    assert_eq!(answer, b'O');
}

/// The job's memory on huge pages, from /proc/PID/smaps_rollup.
fn anon_huge(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

#[test]
#[ignore = "needs root: process_madvise on another process, cgroups, swapon (scripts/test runs it as root)"]
fn page_in_puts_huge_pages_back() {
    let test = "page_in_puts_huge_pages_back";
    let Some(backend) = backend(test) else {
        return;
    };
    if skip_unless(
        memgang_linux::sysfs::huge_page_size().is_some(),
        test,
        "this kernel has no transparent huge pages",
    ) {
        return;
    }
    let mut bed = Bed::new(&backend, "paging-huge", SWAP);
    let job = bed.fork(128 << 20, 0, Thp::HalfHuge);
    let pool = bed.pool.clone();
    let pid = job.pid;
    let before = anon_huge(pid);
    eprintln!("huge pages before page-out: {} MiB of 128", before / MIB);
    assert!(
        before >= 16 * MIB,
        "the job got no huge pages to begin with ({before} bytes)"
    );
    // The time account reads the cgroup's counter, not smaps: they must
    // agree (the job is the pool's only process).
    let counted = |when: &str, smaps: u64| {
        let cg = backend.memory_stat(&pool).unwrap().anon_huge_bytes;
        eprintln!(
            "  {when}: smaps {} MiB, cgroup {:?} MiB",
            smaps / MIB,
            cg.map(|b| b / MIB)
        );
        let cg = cg.expect("this kernel's memory.stat counts anonymous huge pages");
        assert!(
            cg.abs_diff(smaps) <= 4 * MIB,
            "{when}: the cgroup counts {cg} bytes of huge pages, smaps {smaps}"
        );
    };
    counted("before page-out", before);
    let (record, huge) = paging::record_with_huge(pid).unwrap();
    // Huge pages are told apart by PAGEMAP_SCAN (Linux 6.7+); Debian 12's
    // 6.1 (the VM lane) reads /proc/pid/pagemap, which cannot.
    if skip_unless(
        huge.is_some(),
        test,
        "this kernel has no PAGEMAP_SCAN (Linux 6.7+), which tells huge pages apart",
    ) {
        return;
    }
    let huge = huge.expect("checked above");
    assert_eq!(
        huge.bytes(),
        before,
        "the huge-page record and smaps disagree"
    );
    paging::page_out(pid, &record.runs).unwrap();
    evict_swap_cache(backend.as_ref(), &pool);
    assert!(
        anon_huge(pid) < before / 4,
        "page-out left the huge pages in place"
    );
    counted("after page-out", anon_huge(pid));
    let pin = paging::page_in(pid, &record, true).unwrap();
    let small = anon_huge(pid);
    let t = Instant::now();
    let restored = paging::restore_huge_pages(pid, &huge.runs).unwrap();
    let after = anon_huge(pid);
    eprintln!(
        "page-in in {:?} left {} MiB on huge pages; restoring them: {} MiB collapsed in {:?}, \
         {} MiB on huge pages",
        pin.duration,
        small / MIB,
        restored / MIB,
        t.elapsed(),
        after / MIB,
    );
    assert!(
        after * 10 >= before * 9,
        "huge pages {before} -> {after} bytes"
    );
    counted("after the restore", after);
    // The half that was on small pages stays so: the resident record
    // would have collapsed it too (khugepaged may take up to 16 MiB in a
    // scan of its own meanwhile; the half is 64).
    assert!(
        after <= before + 16 * MIB,
        "blocks that were small pages were collapsed: {before} -> {after} bytes"
    );
    let (answer, _) = job.touch();
    assert_eq!(answer, b'O', "the job's data changed");
}

#[test]
#[ignore = "needs root: process_madvise on another process, cgroups, swapon (scripts/test runs it as root)"]
fn stale_runs_are_passed_over() {
    let test = "stale_runs_are_passed_over";
    let Some(backend) = backend(test) else {
        return;
    };
    let mut bed = Bed::new(&backend, "paging-stale", 128 * MIB);
    let hole = 1 << 20;
    let job = bed.fork(16 << 20, hole, Thp::Small);
    let pid = job.pid;
    let p = page();

    let (mut record, _) = paging::record(pid).unwrap();
    let good_bytes = record.bytes();
    let end = job.addr + job.len;
    // Never mapped (below mmap_min_addr), first so it precedes good runs.
    record.runs.insert(0, Run { start: p, pages: 1 });
    // Entirely in the unmapped hole after the job's memory.
    record.runs.push(Run {
        start: end,
        pages: hole as u64 / p,
    });
    // Half the job's last pages, half the hole.
    record.runs.push(Run {
        start: end - 4 * p,
        pages: 8,
    });

    let out = paging::page_out(pid, &record.runs).unwrap();
    eprintln!("page_out with stale runs: {out:?}");
    assert!(out.skipped_ranges >= 1, "{out:?}");
    assert_eq!(out.skipped_ranges, 3, "{out:?}");
    let (left, _) = job.resident_now();
    assert!(left * 10 < job.pages(), "{left} pages still present");

    // The page-in reads only what is on swap now: the stale runs hold
    // none of it, so they are passed over, not refused.
    let pin = paging::page_in(pid, &record, true).unwrap();
    eprintln!("page_in with stale runs: {pin:?}");
    assert_eq!(pin.skipped_runs, 0, "{pin:?}");
    let out_bytes = (job.pages() - left) * p;
    assert!(pin.bytes >= out_bytes && pin.bytes <= good_bytes, "{pin:?}");
    assert_eq!(pin.faulted_bytes, pin.bytes, "{pin:?}");
    assert_eq!(pin.bytes + pin.resident_bytes, record.bytes(), "{pin:?}");
    let (back, _) = job.resident_now();
    assert!(back * 10 >= job.pages() * 9, "{back}/{} back", job.pages());
    assert_eq!(job.touch().0, b'O');

    // Without fault-in: reads start, nothing is mapped, nothing is wrong.
    paging::page_out(pid, &record.runs).unwrap();
    let pin = paging::page_in(pid, &record, false).unwrap();
    assert_eq!(pin.method, paging::PageInMethod::WillNeed);
    assert_eq!(pin.faulted_bytes, 0);
    assert!(pin.bytes > 0);
    assert_eq!(job.touch().0, b'O');
}

#[test]
#[ignore = "needs root: process_madvise on another process, cgroups, swapon (scripts/test runs it as root)"]
fn exited_processes_are_errors_not_panics() {
    let test = "exited_processes_are_errors_not_panics";
    require_root(test, "needs root for process_madvise");
    // SAFETY: the child only calls _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: async-signal-safe.
        unsafe { libc::_exit(0) };
    }
    // A zombie: the pid exists, the address space does not.
    assert!(eventually(Duration::from_secs(10), || state(pid) == Some('Z')));
    let record = PageRecord {
        pid,
        runs: vec![Run {
            start: 0x10_0000,
            pages: 1,
        }],
    };
    let check = |what: &str, r: Result<(), Error>| {
        let e = r.expect_err(what);
        assert!(paging::is_gone(&e), "{what}: {e}");
        eprintln!("{what}: {e}");
    };
    check(
        "page_out on a zombie",
        paging::page_out(pid, &record.runs).map(drop),
    );
    check(
        "page_in on a zombie",
        paging::page_in(pid, &record, true).map(drop),
    );
    check(
        "anon_ranges on a zombie",
        paging::anon_ranges(pid).map(drop),
    );
    check(
        "resident_runs on a zombie",
        paging::resident_runs(pid, std::slice::from_ref(&(0x10_0000..0x20_0000))).map(drop),
    );
    // SAFETY: reaping our own child.
    assert_eq!(unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) }, pid);
    check(
        "page_out on a reaped pid",
        paging::page_out(pid, &record.runs).map(drop),
    );
    check(
        "page_in on a reaped pid",
        paging::page_in(pid, &record, false).map(drop),
    );
}

/// Kills and reaps a helper process on drop.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs root: process_madvise on another process, cgroups, swapon (scripts/test runs it as root)"]
fn without_rights_the_error_says_what_is_needed() {
    let test = "without_rights_the_error_says_what_is_needed";
    // Second half: this same test, re-run by the first half as `nobody`.
    if let Ok(target) = std::env::var(PROBE_ENV) {
        let pid: i32 = target.parse().unwrap();
        let record = PageRecord {
            pid,
            runs: vec![Run {
                start: 0x10_0000,
                pages: 1,
            }],
        };
        for (what, r) in [
            ("page_out", paging::page_out(pid, &record.runs).map(drop)),
            ("page_in", paging::page_in(pid, &record, true).map(drop)),
        ] {
            match r {
                Err(Error::Permission(m)) => {
                    assert!(m.contains("CAP_SYS_NICE") && m.contains("LRU"), "{m}");
                    eprintln!("PROBE OK {what}: {m}");
                }
                other => panic!("{what} without rights: {other:?}"),
            }
        }
        return;
    }
    require_root(test, "needs root to drop to another user");
    const NOBODY: u32 = 65534;
    // One target the unprivileged caller may not even inspect (root's),
    // one it owns itself (which still needs CAP_SYS_NICE).
    let root_target = Reap(Command::new("sleep").arg("60").spawn().unwrap());
    let own_target = Reap(
        Command::new("sleep")
            .arg("60")
            .uid(NOBODY)
            .gid(NOBODY)
            .spawn()
            .unwrap(),
    );
    for target in [&root_target, &own_target] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                test,
                "--nocapture",
                "--test-threads=1",
                "--include-ignored",
            ])
            .env(PROBE_ENV, target.0.id().to_string())
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!("{}", stderr.trim());
        assert!(
            out.status.success() && stderr.matches("PROBE OK").count() == 2,
            "the probe as uid {NOBODY} failed: {}\n{stdout}\n{stderr}",
            out.status
        );
    }
}

#[test]
#[ignore = "needs root: process_madvise on another process, cgroups, swapon (scripts/test runs it as root)"]
fn fragmented_memory_takes_many_batches_and_scans() {
    let test = "fragmented_memory_takes_many_batches_and_scans";
    let Some(backend) = backend(test) else {
        return;
    };
    let mut bed = Bed::new(&backend, "paging-frag", 128 * MIB);
    let job = bed.fork(64 << 20, 0, Thp::Small);
    let pid = job.pid;

    // Page out every other page: 8192 one-page ranges, more than one
    // process_madvise vector (1024) and one PAGEMAP_SCAN output (4096).
    let odd: Vec<Run> = (0..job.pages() / 2)
        .map(|i| Run {
            start: job.addr + (2 * i + 1) * page(),
            pages: 1,
        })
        .collect();
    let out = paging::page_out(pid, &odd).unwrap();
    eprintln!("page_out of 8192 single pages: {out:?}");
    assert_eq!(out.skipped_ranges, 0);
    // The permission probe and 8 vectors of 1024.
    assert_eq!(out.calls, 9, "{out:?}");

    let ranges = paging::anon_ranges(pid).unwrap();
    let (runs, method) = paging::resident_runs(pid, &ranges).unwrap();
    let read = paging::resident_runs_with(pid, &ranges, ScanMethod::PagemapRead).unwrap();
    let (present, nruns) = job.resident(&runs);
    eprintln!(
        "after: {present} pages in {nruns} runs of the mapping, by {}",
        method.as_str()
    );
    assert!(
        nruns > 4096 && present * 10 <= job.pages() * 6,
        "{nruns} {present}"
    );
    assert_scanners_agree(&job, &runs, &read);
    // What a page-in reads: odd pages only (MADV_PAGEOUT may pass over a
    // few), each its own run.
    let (swapped, _) = paging::swapped_runs(pid, &ranges).unwrap();
    let odd_starts: std::collections::HashSet<u64> = odd.iter().map(|r| r.start).collect();
    assert!(
        swapped
            .iter()
            .all(|r| r.pages == 1 && odd_starts.contains(&r.start)),
        "a swapped run that was not paged out"
    );
    assert!(
        swapped.len() * 10 >= odd.len() * 9,
        "{} of {} paged-out pages seen swapped",
        swapped.len(),
        odd.len()
    );

    let record = PageRecord { pid, runs: odd };
    let pin = paging::page_in(pid, &record, true).unwrap();
    eprintln!("page_in of 8192 single pages: {pin:?}");
    assert_eq!(pin.skipped_runs, 0);
    let (back, _) = job.resident_now();
    assert!(back * 100 >= job.pages() * 99, "{back}/{}", job.pages());
    assert_eq!(job.touch().0, b'O');

    // A record of the whole mapping, half of it resident: the page-in
    // reads the swapped half only and leaves the rest alone.
    paging::page_out(pid, &record.runs).unwrap();
    let whole = PageRecord {
        pid,
        runs: vec![Run {
            start: job.addr,
            pages: job.pages(),
        }],
    };
    let half = record.bytes();
    let pin = paging::page_in(pid, &whole, true).unwrap();
    eprintln!("page_in of a whole mapping, every other page swapped: {pin:?}");
    assert!(pin.bytes <= half && pin.bytes * 10 >= half * 9, "{pin:?}");
    assert!(pin.resident_bytes >= half, "{pin:?}");
    let (back, _) = job.resident_now();
    assert!(back * 100 >= job.pages() * 99, "{back}/{}", job.pages());
    assert_eq!(job.touch().0, b'O');
}
