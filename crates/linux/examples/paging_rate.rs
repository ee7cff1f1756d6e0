//! How fast this kernel pages a lone process out and in, by page size:
//! the ceiling under memgang's switches (issue 12), with nothing else
//! running. A child maps MIB of anonymous memory on small pages
//! (`MADV_NOHUGEPAGE`), on huge pages (`MADV_HUGEPAGE`), or on small pages
//! collapsed to huge ones just before the page-out (`MADV_COLLAPSE`, timed
//! apart); the parent pages it out and in with memgang's own calls
//! (`paging::record`, `page_out`, `page_in`) and prints wall and CPU time
//! per step, one line per round. Run as root by `bench/paging_rate.sh`,
//! which prints the disk's bandwidth beside it.
//!
//!   paging_rate [MIB] [ROUNDS] [KINDS]     (defaults 512, 3, "small huge collapsed")
//!   paging_rate pids GROUP PID...          (page out running processes in GROUP)

use memgang_linux::cgroup::{self, CgroupBackend, GroupPath};
use memgang_linux::paging;
use memgang_linux::process::{self, Forked};
use memgang_linux::swap::TestSwap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Small,
    Huge,
    Collapsed,
}

/// The child: waits for `g` (it is in the cgroup by then), maps and fills
/// `bytes`, answers `r`, and lives until its command pipe closes. Only raw
/// syscalls and its own memory: it was forked.
unsafe fn child(cmd: i32, res: i32, bytes: usize, kind: Kind) -> ! {
    let mut b = 0u8;
    if libc::read(cmd, (&mut b as *mut u8).cast(), 1) != 1 {
        libc::_exit(1);
    }
    let p = libc::mmap(
        std::ptr::null_mut(),
        bytes,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        libc::_exit(2);
    }
    // Collapsed: small pages first, then allowed huge ones (a heap that
    // grew before its program asked), so that MADV_COLLAPSE may act.
    let advice = if kind == Kind::Huge {
        libc::MADV_HUGEPAGE
    } else {
        libc::MADV_NOHUGEPAGE
    };
    libc::madvise(p, bytes, advice);
    let w = p.cast::<u64>();
    for i in 0..bytes / 8 {
        std::ptr::write_volatile(w.add(i), (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    if kind == Kind::Collapsed {
        libc::madvise(p, bytes, libc::MADV_HUGEPAGE);
    }
    if libc::write(res, b"r".as_ptr().cast(), 1) != 1 {
        libc::_exit(3);
    }
    while libc::read(cmd, (&mut b as *mut u8).cast(), 1) != 0 {}
    libc::_exit(0);
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn anon_huge(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// Times `f`: (wall, this thread's CPU).
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration, Duration) {
    let (t, c) = (Instant::now(), thread_cpu());
    let v = f();
    (v, t.elapsed(), thread_cpu() - c)
}

/// Paging time over the disk's limit for the bytes (out at the write
/// rate, in at the read rate), with DISK_BPS="READ,WRITE" (bytes/s, the
/// bench passes `memgang testbed bandwidth`'s); "-" without it.
fn vs_disk(out_bytes: u64, in_bytes: u64, took: Duration) -> String {
    let bps: Option<Vec<f64>> = std::env::var("DISK_BPS")
        .ok()
        .and_then(|v| v.split(',').map(|x| x.trim().parse().ok()).collect());
    match bps.as_deref() {
        Some(&[read, write]) => {
            let limit = out_bytes as f64 / write + in_bytes as f64 / read;
            format!("{:.2}", took.as_secs_f64() / limit)
        }
        _ => "-".into(),
    }
}

fn rate(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9)
}

fn round(backend: &dyn CgroupBackend, group: &GroupPath, mib: u64, kind: Kind, name: &str, n: u32) {
    let bytes = mib * MIB;
    // SAFETY: the child runs only raw syscalls on its own memory and _exits.
    let Forked {
        pid,
        mut cmd,
        mut res,
    } = unsafe { process::fork_piped(|cmd, res| child(cmd, res, bytes as usize, kind)) }
        .expect("fork");
    cgroup::join(backend, group, pid)
        .unwrap_or_else(|e| panic!("moving the child into its group: {e}"));
    cmd.write_all(b"g").unwrap();
    let mut answer = [0u8];
    res.read_exact(&mut answer)
        .expect("the child did not fill its memory");
    assert_eq!(&answer, b"r", "the child did not fill its memory");
    let (collapse_s, collapse_cpu) = if kind == Kind::Collapsed {
        let (runs, _) = paging::record(pid).unwrap();
        let (_, w, c) = timed(|| paging::restore_huge_pages(pid, &runs.runs).unwrap());
        (w, c)
    } else {
        Default::default()
    };
    let huge = anon_huge(pid);
    let record = paging::record(pid).unwrap().0;
    let (out, out_s, out_cpu) = timed(|| paging::page_out(pid, &record.runs).unwrap());
    // The pages stay charged (swap cache, write-back) until reclaimed:
    // drain the group as memgang does after a page-out, which also makes
    // the page-in read the disk, as after a real quantum.
    let usage = backend.memory_stat(group).map_or(0, |m| m.usage_bytes);
    let (_, drain_s, _) = timed(|| backend.reclaim(group, usage));
    let swapped = paging::swapped_runs(
        pid,
        &record
            .runs
            .iter()
            .map(|r| r.start..r.end())
            .collect::<Vec<_>>(),
    )
    .map(|(runs, _)| runs.iter().map(|r| r.bytes()).sum::<u64>())
    .unwrap_or(0);
    let (inn, in_s, in_cpu) = timed(|| paging::page_in(pid, &record, true).unwrap());
    drop(cmd);
    // SAFETY: reaps our own child.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    println!(
        "{name:<10} {n:>5} {:>6} {:>7} {:>9.3} {:>8.3} {:>9.3} {:>8.0} {:>8.3} {:>9.3} {:>8} {:>9.3} {:>8.0} {:>8.3} {:>7}",
        mib,
        huge / MIB,
        collapse_s.as_secs_f64(),
        collapse_cpu.as_secs_f64(),
        out_s.as_secs_f64(),
        rate(out.bytes_advised, out_s),
        out_cpu.as_secs_f64(),
        drain_s.as_secs_f64(),
        swapped / MIB,
        in_s.as_secs_f64(),
        rate(inn.bytes, in_s),
        in_cpu.as_secs_f64(),
        vs_disk(out.bytes_advised, inn.bytes, out_s + drain_s + in_s),
    );
}

/// `pids GROUP PID...`: page out processes that run already (a real
/// program, stopped by the caller, in memory cgroup GROUP) on the swap
/// there is, then drain the group as memgang does after a page-out
/// (reclaim it until the writes have left), then page them back in. One
/// process after the other, or with PARALLEL=1 one thread per process, as
/// memgang tried and dropped (docs/realapps.md), to tell the kernel's
/// limit from the switch's. Prints one row (per-process detail on stderr).
fn page_out_pids(mut args: impl Iterator<Item = String>) {
    let backend: Box<dyn CgroupBackend> =
        cgroup::detect().expect("a cgroup memory hierarchy (run as root)");
    let group = GroupPath::new(&args.next().expect("GROUP: the processes' memory cgroup"))
        .expect("GROUP: a cgroup name");
    let pids: Vec<i32> = args
        .map(|p| p.parse().expect("PID: a process id"))
        .collect();
    let parallel = std::env::var("PARALLEL").is_ok_and(|v| !v.is_empty() && v != "0");
    // Runs `f` on every process, in threads or in turn; (results, wall).
    let each = |f: &(dyn Fn(i32) -> (u64, String) + Sync)| {
        let t = Instant::now();
        let got: Vec<(u64, String)> = if parallel {
            std::thread::scope(|s| {
                let hs: Vec<_> = pids.iter().map(|&p| s.spawn(move || f(p))).collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            })
        } else {
            pids.iter().map(|&p| f(p)).collect()
        };
        for (_, line) in &got {
            eprintln!("{line}");
        }
        (got.iter().map(|g| g.0).sum::<u64>(), t.elapsed())
    };
    let records: Vec<_> = pids.iter().map(|&p| paging::record(p).unwrap().0).collect();
    let (out_bytes, out_s) = each(&|pid| {
        let rec = records.iter().find(|r| r.pid == pid).unwrap();
        let (out, d, cpu) = timed(|| paging::page_out(pid, &rec.runs).unwrap());
        let line = format!(
            "  page-out {pid}: {} runs, {} MiB in {:.3} s ({:.3} s CPU)",
            rec.runs.len(),
            rec.bytes() / MIB,
            d.as_secs_f64(),
            cpu.as_secs_f64()
        );
        (out.bytes_advised, line)
    });
    let before = backend.memory_stat(&group).map_or(0, |m| m.usage_bytes);
    let (_, drain_s, _) = timed(|| backend.reclaim(&group, before));
    // LIMITED=1: the page-in in a group with room for what comes back and
    // a margin (memgang's ROOM_MARGIN, 32 MiB), no more, as in a pool
    // that holds one job: its charges then reclaim within the group.
    let limited = std::env::var("LIMITED").is_ok_and(|v| !v.is_empty() && v != "0");
    if limited {
        let room = backend.memory_stat(&group).map_or(0, |m| m.usage_bytes)
            + records.iter().map(|r| r.bytes()).sum::<u64>()
            + 32 * MIB;
        backend.set_memory_limit(&group, Some(room)).unwrap();
    }
    let (in_bytes, in_s) = each(&|pid| {
        let rec = records.iter().find(|r| r.pid == pid).unwrap();
        let (inn, d, cpu) = timed(|| paging::page_in(pid, rec, true).unwrap());
        let line = format!(
            "  page-in {pid}: {} MiB in {:.3} s ({:.3} s CPU)",
            inn.bytes / MIB,
            d.as_secs_f64(),
            cpu.as_secs_f64()
        );
        (inn.bytes, line)
    });
    if limited {
        backend.set_memory_limit(&group, None).unwrap();
    }
    println!(
        "{:<10} {:>7} {:>7.3} {:>8.0} {:>8.3} {:>7} {:>7.3} {:>8.0} {:>8.3} {:>7}",
        match (parallel, limited) {
            (true, false) => "parallel",
            (true, true) => "par_limit",
            (false, false) => "in_turn",
            (false, true) => "turn_limit",
        },
        out_bytes / MIB,
        out_s.as_secs_f64(),
        rate(out_bytes, out_s),
        drain_s.as_secs_f64(),
        in_bytes / MIB,
        in_s.as_secs_f64(),
        rate(in_bytes, in_s),
        (out_s + drain_s + in_s).as_secs_f64(),
        vs_disk(out_bytes, in_bytes, out_s + drain_s + in_s),
    );
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("pids") {
        return page_out_pids(args.skip(1));
    }
    let mib: u64 = args
        .next()
        .map_or(512, |a| a.parse().expect("MIB: a number of MiB"));
    let rounds: u32 = args
        .next()
        .map_or(3, |a| a.parse().expect("ROUNDS: a number"));
    let kinds = args.next().unwrap_or_else(|| "small huge collapsed".into());
    let kinds: Vec<(Kind, &str)> = kinds
        .split_whitespace()
        .map(|k| match k {
            "small" => (Kind::Small, "small"),
            "huge" => (Kind::Huge, "huge"),
            "collapsed" => (Kind::Collapsed, "collapsed"),
            _ => panic!("unknown kind {k:?}: small, huge or collapsed"),
        })
        .collect();
    let backend: Box<dyn CgroupBackend> =
        cgroup::detect().expect("a cgroup memory hierarchy (run as root)");
    let _swap = TestSwap::new(2 * mib * MIB + 256 * MIB).expect("a swap file (run as root)");
    let group = GroupPath::new(&format!("memgang-bench-rate-{}", std::process::id())).unwrap();
    backend.create(&group).unwrap();
    // Removed on every way out of the rounds, a panic included.
    struct Remove<'a>(&'a dyn CgroupBackend, &'a GroupPath);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            for pid in self.0.procs(self.1).unwrap_or_default() {
                // SAFETY: kills the bench's own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
            if let Err(e) = self.0.remove(self.1) {
                eprintln!("removing {}: {e}", self.1);
            }
        }
    }
    let _remove = Remove(backend.as_ref(), &group);
    println!(
        "{:<10} {:>5} {:>6} {:>7} {:>9} {:>8} {:>9} {:>8} {:>8} {:>9} {:>8} {:>9} {:>8} {:>8} {:>7}",
        "pages",
        "round",
        "MiB",
        "huge_MiB",
        "collapse_s",
        "coll_cpu",
        "out_s",
        "out_MB/s",
        "out_cpu",
        "drain_s",
        "in_MiB",
        "in_s",
        "in_MB/s",
        "in_cpu",
        "vs_disk"
    );
    for n in 1..=rounds {
        for &(kind, name) in &kinds {
            round(backend.as_ref(), &group, mib, kind, name, n);
        }
    }
}
