//! Demand faults timed on the fault path: how fast this kernel brings a
//! process's swapped-out pages back as the process touches them, one page
//! at a time, in a random order or in order. This is what a job resumed
//! without a bulk page-in (`lru`) waits for, and what the simulator's
//! demand page-in charges. `memgang calibrate` writes it into the device
//! file: the pages an in-order fault's swap readahead brings, and what such
//! a fault costs against a random one.
//!
//! One forked child per pass maps and fills the memory inside a memory
//! cgroup made for it (`memgang-faults-<pid>-<n>`, removed after). The
//! parent pages it out with [`paging::page_out`] and drains the group with
//! [`CgroupBackend::reclaim`], as memgang does after a switch: the pages
//! leave the swap cache, so the faults read the disk, as after a quantum
//! of another job. Then the child touches one byte per page and times that
//! alone, with room to spare (no reclaim during the faults).
//!
//! [`own_share`] measures what a full pool adds: two such children, each
//! in a group of its own under a pool that holds more than one of them and
//! less than two, take turns, and each resume's faults are counted against
//! what it lacked.

use crate::cgroup::{self, CgroupBackend, GroupPath};
use crate::counters::VmStat;
use crate::error::{Error, Result};
use crate::paging::{self, page_size};
use crate::process::{self, Forked};
use crate::runs;
use crate::swap::xorshift;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The order in which a pass touches its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// A random permutation: the kernel's swap readahead finds nothing to
    /// read ahead and shrinks its window, as for a job touching at random.
    Random,
    /// Ascending addresses, as a job sweeping its arrays: each fault's
    /// readahead brings the pages touched next.
    InOrder,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Random => "random",
            Order::InOrder => "in order",
        }
    }
}

/// One pass: every page of the memory touched once after it was paged out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultPass {
    pub order: Order,
    /// Pages touched.
    pub pages: u64,
    /// Bytes of the memory on swap and out of RAM before the touches.
    pub swapped_bytes: u64,
    /// The child's major faults over the touches (`getrusage`).
    pub major_faults: u64,
    /// Pages read from swap over the touches, node-wide (`pswpin` of
    /// /proc/vmstat): the faults' own and their readahead's, and anyone
    /// else's on a busy node.
    pub pages_read: u64,
    /// Wall time of the touches.
    pub wall: Duration,
    /// The child's CPU time over the touches, user and kernel.
    pub cpu: Duration,
}

impl FaultPass {
    /// Wall seconds per major fault.
    pub fn s_per_fault(&self) -> f64 {
        self.wall.as_secs_f64() / self.major_faults.max(1) as f64
    }

    /// CPU seconds per major fault.
    pub fn cpu_s_per_fault(&self) -> f64 {
        self.cpu.as_secs_f64() / self.major_faults.max(1) as f64
    }

    /// Pages read from swap per major fault (1 with no readahead).
    pub fn pages_per_fault(&self) -> f64 {
        self.pages_read as f64 / self.major_faults.max(1) as f64
    }
}

/// The least share of the memory that must be out of RAM before the
/// touches for the pass to time disk reads: the rest would be minor
/// faults and flatter the rate.
const MIN_OUT_SHARE: f64 = 0.95;

/// Pages out `bytes` of a fresh process's memory and times touching them
/// back in `order` (`seed` picks a random permutation). Needs root, swap
/// with room for `bytes`, and RAM for it.
pub fn measure(
    backend: &dyn CgroupBackend,
    bytes: u64,
    order: Order,
    seed: u64,
) -> Result<FaultPass> {
    let page = page_size();
    let pages = bytes / page;
    if pages == 0 || pages > u64::from(u32::MAX) {
        return Err(Error::Unsupported(format!(
            "timing demand faults over {bytes} bytes: give between one page and {} pages",
            u32::MAX
        )));
    }
    let group = fault_group()?;
    backend.create(&group)?;
    let _remove = RemoveGroup(backend, &group);
    let mut child = Child::fork(pages, order, seed)?;
    // It joins before it allocates: fill() maps and touches its memory.
    cgroup::join(backend, &group, child.pid)?;
    let addr = child.fill()?;
    let region = addr..addr + pages * page;
    paging::page_out(child.pid, std::slice::from_ref(&region))?;
    // The paged-out pages stay in the swap cache, charged, until reclaimed.
    let usage = backend.memory_stat(&group)?.usage_bytes;
    backend.reclaim(&group, usage)?;
    let ranges = [region];
    let resident = runs::bytes(&paging::resident_runs(child.pid, &ranges)?.0);
    let swapped_bytes = (pages * page).saturating_sub(resident);
    if (swapped_bytes as f64) < MIN_OUT_SHARE * (pages * page) as f64 {
        return Err(Error::Unsupported(format!(
            "timing demand faults: only {} of {} MiB left RAM after the page-out and the reclaim \
             of {group}: is there swap with room for it (`swapon --show`)?",
            swapped_bytes >> 20,
            (pages * page) >> 20
        )));
    }
    let before = VmStat::read()?.pswpin;
    let t = child.touch(b't')?;
    let pages_read = VmStat::read()?.pswpin.saturating_sub(before);
    Ok(FaultPass {
        order,
        pages,
        swapped_bytes,
        major_faults: t.major_faults,
        pages_read,
        wall: t.wall,
        cpu: t.cpu,
    })
}

/// One turn of [`own_share`]: a job resumed after the other one ran in
/// its place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Turn {
    /// Its bytes not in RAM when it resumed.
    pub lacked_bytes: u64,
    /// Bytes it faulted in over the turn (its major faults: one page each
    /// at random).
    pub faulted_bytes: u64,
    /// Passes over its memory in the turn.
    pub passes: u32,
    pub wall: Duration,
}

/// How much of what a resumed job faults evicts its own pages, under a
/// pool that holds more than one job and less than two (as memgang's gang
/// `lru` runs them: a group each under the pool).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnShare {
    pub job_bytes: u64,
    pub pool_bytes: u64,
    /// Every turn, the two jobs alternating; the first two settle the pool
    /// (each job's first turn after the fills) and are not counted.
    pub turns: Vec<Turn>,
    /// Measurements made: more than 1 when the pool's OOM killer took a
    /// job and the measurement was made again ([`own_share`]).
    pub attempts: u32,
}

impl OwnShare {
    /// The turns counted.
    pub fn counted(&self) -> &[Turn] {
        self.turns.get(2..).unwrap_or(&[])
    }

    /// What a resume lacked of its job, on average over the counted turns.
    pub fn lack_share(&self) -> f64 {
        let t = self.counted();
        let lacked: u64 = t.iter().map(|t| t.lacked_bytes).sum();
        lacked as f64 / (t.len().max(1) as u64 * self.job_bytes.max(1)) as f64
    }

    /// The share of a resumed job's faults that evicted its own pages:
    /// each fault either shrank what it lacked or took one of its own, so
    /// `1 - lacked / faulted` over the counted turns (the simulator's
    /// `own_evict_share`).
    pub fn share(&self) -> f64 {
        share_of(self.counted().iter())
    }

    /// [`OwnShare::share`] over job `k`'s counted turns alone: 0 is the
    /// job whose group was made first, 1 the other.
    pub fn job_share(&self, k: usize) -> f64 {
        share_of(self.counted().iter().skip(k).step_by(2))
    }

    /// Half the first-made job's share less the other's (the simulator's
    /// `own_evict_split`): the two differ at every pool, the first made
    /// losing more of its own pages (`bench/own_share.sh`).
    pub fn split(&self) -> f64 {
        (self.job_share(0) - self.job_share(1)) / 2.0
    }
}

fn share_of<'a>(turns: impl Iterator<Item = &'a Turn>) -> f64 {
    let (lacked, faulted) = turns.fold((0u64, 0u64), |(l, f), t| {
        (l + t.lacked_bytes, f + t.faulted_bytes)
    });
    if faulted == 0 {
        return 0.0;
    }
    (1.0 - lacked as f64 / faulted as f64).max(0.0)
}

/// The pool over one job in memgang's measured random pairs: two jobs of
/// 700 MiB in a 1 GiB pool, so that a resumed job lacks 54% of itself.
pub const POOL_PER_JOB: f64 = 1024.0 / 700.0;
/// Turns: two to settle, four counted (two per job, whose shares differ:
/// the kernel favours one group; `bench/refill.sh`).
const TURNS: usize = 6;
/// A turn lasts until a pass faults under this share of the job's pages
/// (it has what it needs: the page-in had the time), at most
/// [`MAX_PASSES`] passes.
const SETTLED: f64 = 0.01;
const MAX_PASSES: u32 = 8;

/// Two jobs of `job_bytes` touching their memory at random, each in a
/// memory cgroup of its own under a pool of `pool_bytes` (more than one
/// job, less than two: [`POOL_PER_JOB`] of one in memgang's runs), take
/// turns (the other waits on a pipe, touching nothing, as if frozen); each
/// turn runs passes until the resumed job has what it needs. Per turn:
/// what it lacked at its resume and what it faulted. Needs root and swap
/// with room for a job.
pub fn own_share(
    backend: &dyn CgroupBackend,
    job_bytes: u64,
    pool_bytes: u64,
    seed: u64,
) -> Result<OwnShare> {
    let page = page_size();
    let pages = job_bytes / page;
    if pages < 16 || pages > u64::from(u32::MAX) {
        return Err(Error::Unsupported(format!(
            "measuring a resumed job's own evictions over {job_bytes} bytes: give between 16 \
             pages and {} pages",
            u32::MAX
        )));
    }
    let pool_bytes = pool_bytes / page * page;
    if pool_bytes <= pages * page || pool_bytes >= 2 * pages * page {
        return Err(Error::Unsupported(format!(
            "measuring a resumed job's own evictions: a pool of {pool_bytes} bytes for two jobs \
             of {job_bytes}: give one that holds more than one job and less than two"
        )));
    }
    for attempt in 1.. {
        match own_turns(backend, pages, pool_bytes, seed) {
            Ok(turns) => {
                return Ok(OwnShare {
                    job_bytes: pages * page,
                    pool_bytes,
                    turns,
                    attempts: attempt,
                })
            }
            Err((e, true)) if attempt < ATTEMPTS => {
                // Not eprintln!: a closed stderr (`2>&1 | head`) must not
                // panic a measurement that holds cgroups.
                let _ = writeln!(
                    std::io::stderr(),
                    "memgang: {e}: the pool's OOM killer took a job; measuring again"
                );
            }
            Err((e, killed)) => {
                return Err(if killed {
                    Error::Unsupported(format!(
                        "{e}: the pool's OOM killer took a job in each of {ATTEMPTS} attempts; \
                         give larger jobs"
                    ))
                } else {
                    e
                })
            }
        }
    }
    unreachable!("the attempts loop returns")
}

/// Under cgroup v1 a small pool faulted into at full speed now and then
/// runs out of memory with swap to spare (the kernel logged the charge of
/// a swap-in failing; seen with jobs of 64 and 128 MiB, not in the stored
/// runs at 256 MiB): such an attempt is thrown away whole and made again,
/// at most this many times.
const ATTEMPTS: u32 = 5;

/// One attempt of [`own_share`]: its turns, or the error and whether a
/// job was killed (not by us) before it.
fn own_turns(
    backend: &dyn CgroupBackend,
    pages: u64,
    pool_bytes: u64,
    seed: u64,
) -> std::result::Result<Vec<Turn>, (Error, bool)> {
    let page = page_size();
    let pool = fault_group().map_err(|e| (e, false))?;
    backend.create(&pool).map_err(|e| (e, false))?;
    let _remove = RemoveGroup(backend, &pool);
    let mut jobs: Vec<(Child, std::ops::Range<u64>)> = Vec::new();
    let killed = |jobs: &mut Vec<(Child, std::ops::Range<u64>)>| {
        jobs.iter_mut().any(|(c, _)| c.was_killed(100))
    };
    // Set when a job is found dead (and reaped) after the turns.
    let mut died_late = false;
    let mut run = || -> Result<Vec<Turn>> {
        for (k, name) in ["a", "b"].into_iter().enumerate() {
            let group = pool.join(name)?;
            backend.create(&group)?;
            let mut child = Child::fork(pages, Order::Random, seed.wrapping_add(k as u64))?;
            cgroup::join(backend, &group, child.pid)?;
            let addr = child.fill()?;
            jobs.push((child, addr..addr + pages * page));
        }
        // Limited only now: two processes filling their memory as fast as
        // they can under a full pool can outrun its reclaim (the pool's OOM
        // killer took one, now and then, with small jobs). Lowering the
        // limit reclaims down to it first.
        backend.set_memory_limit(&pool, Some(pool_bytes))?;
        let mut turns = Vec::with_capacity(TURNS);
        for t in 0..TURNS {
            let (child, region) = &mut jobs[t % 2];
            let resident =
                runs::bytes(&paging::resident_runs(child.pid, std::slice::from_ref(region))?.0);
            let mut turn = Turn {
                lacked_bytes: (pages * page).saturating_sub(resident),
                faulted_bytes: 0,
                passes: 0,
                wall: Duration::ZERO,
            };
            while turn.passes < MAX_PASSES {
                let p = child.touch(b'w')?;
                turn.faulted_bytes += p.major_faults * page;
                turn.wall += p.wall;
                turn.passes += 1;
                if (p.major_faults as f64) < SETTLED * pages as f64 {
                    break;
                }
            }
            turns.push(turn);
        }
        // A job killed during the other's last turn gave that turn its
        // memory: the attempt does not count.
        for (c, _) in jobs.iter_mut() {
            if c.was_killed(1) {
                died_late = true;
                return Err(Error::Unsupported(format!(
                    "measuring own evictions: job {} died during the last turn",
                    c.pid
                )));
            }
        }
        Ok(turns)
    };
    let result = run();
    let result = result.map_err(|e| {
        let k = died_late || killed(&mut jobs);
        (e, k)
    });
    // The children go (killed and reaped) before the groups.
    drop(jobs);
    result
}

/// A name no other group of this process has: `memgang-faults-<pid>-<n>`.
fn fault_group() -> Result<GroupPath> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    GroupPath::new(&format!(
        "memgang-faults-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

struct RemoveGroup<'a>(&'a dyn CgroupBackend, &'a GroupPath);

impl Drop for RemoveGroup<'_> {
    fn drop(&mut self) {
        // The child is reaped first (Child's Drop runs before this one, as
        // it was made later), so the group is empty here.
        if let Err(e) = self.0.remove(self.1) {
            let _ = writeln!(
                std::io::stderr(),
                "memgang: cgroup {} was not removed: {e}; run `memgang cleanup`",
                self.1
            );
        }
    }
}

struct Touched {
    wall: Duration,
    cpu: Duration,
    major_faults: u64,
}

/// The forked child and its two pipes: commands in, answers out. Killed
/// and reaped when dropped, on every way out.
struct Child {
    pid: i32,
    cmd: File,
    res: File,
    /// Reaped already (its pid may be another process's by now).
    reaped: bool,
}

/// The child's answers: ready (then the memory's address), or touched
/// (then what it took); anything else is its failure code.
const READY: u8 = b'r';
const TOUCHED: u8 = b't';

impl Child {
    fn fork(pages: u64, order: Order, seed: u64) -> Result<Child> {
        // SAFETY: the child runs only raw syscalls on memory it maps
        // itself, and _exits; nothing of the parent's state is used.
        let Forked { pid, cmd, res } =
            unsafe { process::fork_piped(|cmd, res| child(cmd, res, pages, order, seed))? };
        Ok(Child {
            pid,
            cmd,
            res,
            reaped: false,
        })
    }

    /// Sends `what`, reads the answer's code and then `answer`.
    fn ask(&mut self, what: u8, answer: &mut [u8]) -> Result<()> {
        let mut code = [0u8];
        self.cmd
            .write_all(&[what])
            .and_then(|()| self.res.read_exact(&mut code))
            .map_err(|e| {
                Error::io(
                    "talking to the fault-timing child (did it run out of memory?)",
                    format!("/proc/{}", self.pid),
                    e,
                )
            })?;
        let want = if what == b'g' { READY } else { TOUCHED };
        if code[0] != want {
            return Err(Error::Unsupported(format!(
                "the fault-timing child failed: {}",
                match code[0] {
                    1 => "mmap of its memory",
                    2 => "mlock of its page order (RLIMIT_MEMLOCK?)",
                    _ => "unknown",
                }
            )));
        }
        self.res.read_exact(answer).map_err(|e| {
            Error::io(
                "reading the fault-timing child's answer",
                format!("/proc/{}", self.pid),
                e,
            )
        })
    }

    /// Maps and fills the memory; its address.
    fn fill(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        self.ask(b'g', &mut a)?;
        Ok(u64::from_ne_bytes(a))
    }

    /// One pass: reads in its order (`t`), or updates in a new random
    /// order (`w`).
    fn touch(&mut self, what: u8) -> Result<Touched> {
        let mut a = [0u8; 24];
        self.ask(what, &mut a)?;
        let word = |i: usize| u64::from_ne_bytes(a[i * 8..i * 8 + 8].try_into().unwrap());
        Ok(Touched {
            wall: Duration::from_nanos(word(0)),
            cpu: Duration::from_nanos(word(1)),
            major_faults: word(2),
        })
    }

    /// Whether it has died of SIGKILL, which only the OOM killer sends it
    /// while we hold it (reaps it if so). After a failure its pipe closes
    /// as it dies, a moment before its exit can be reaped: `patience`
    /// polls 10 ms apart wait for that.
    fn was_killed(&mut self, patience: u32) -> bool {
        if self.reaped {
            return false;
        }
        for _ in 0..patience.max(1) {
            let mut status = 0;
            // SAFETY: our own child, not yet reaped; status is a local.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if r == self.pid {
                self.reaped = true;
                return libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: our own child, not yet reaped, so the pid is still its.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn major_faults() -> u64 {
    // SAFETY: an all-zero rusage is valid, and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_majflt as u64
}

/// The child: on `g` (it is in the group by then) maps `pages` and fills
/// them, and its page order (locked in RAM, so that only the memory
/// itself faults), answers its address; on `t` reads one byte per page in
/// that order, on `w` updates one per page in a new random order (as
/// memgang-workload's random pattern: a new permutation every pass, every
/// page dirtied), and answers wall ns, CPU ns and major faults; again for
/// each command, until its command pipe closes or it is killed. Only raw
/// syscalls and its own memory: it was forked from a process that may
/// have threads.
unsafe fn child(cmd: i32, res: i32, pages: u64, order: Order, seed: u64) -> ! {
    let fail = |code: u8| -> ! {
        libc::write(res, [code].as_ptr().cast(), 1);
        libc::_exit(1)
    };
    let mut b = 0u8;
    if libc::read(cmd, (&mut b as *mut u8).cast(), 1) != 1 {
        libc::_exit(1);
    }
    let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
    let n = pages as usize;
    let map = |len: usize| {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    let mem = map(n * page);
    let idx = map(n * 4);
    if mem == libc::MAP_FAILED || idx == libc::MAP_FAILED {
        fail(1);
    }
    if libc::mlock(idx, n * 4) != 0 {
        fail(2);
    }
    // Small pages: a huge page would fault 512 pages at once.
    libc::madvise(mem, n * page, libc::MADV_NOHUGEPAGE);
    // Every word written, and none of them zero: Linux keeps no swap slot
    // for a page of zeros, and reads nothing to fault it back.
    let words = mem.cast::<u64>();
    for i in 0..n * page / 8 {
        std::ptr::write_volatile(
            words.add(i),
            (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        );
    }
    let idx = idx.cast::<u32>();
    for i in 0..n {
        *idx.add(i) = i as u32;
    }
    let mut x = seed | 1;
    // Fisher-Yates.
    let shuffle = |x: &mut u64| {
        for i in (1..n).rev() {
            let j = (xorshift(x) % (i as u64 + 1)) as usize;
            std::ptr::swap(idx.add(i), idx.add(j));
        }
    };
    if order == Order::Random {
        shuffle(&mut x);
    }
    let mut a = [0u8; 9];
    a[0] = READY;
    a[1..].copy_from_slice(&(mem as u64).to_ne_bytes());
    if libc::write(res, a.as_ptr().cast(), a.len()) != a.len() as isize {
        libc::_exit(1);
    }
    let bytes = mem.cast::<u8>();
    while libc::read(cmd, (&mut b as *mut u8).cast(), 1) == 1 {
        let update = b == b'w';
        if update {
            shuffle(&mut x);
        }
        let (f0, w0, c0) = (
            major_faults(),
            now(libc::CLOCK_MONOTONIC),
            now(libc::CLOCK_PROCESS_CPUTIME_ID),
        );
        let mut sum = 0u8;
        for i in 0..n {
            let p = bytes.add(*idx.add(i) as usize * page);
            let v = std::ptr::read_volatile(p);
            if update {
                // Odd, so never zero: the page keeps its swap slot.
                std::ptr::write_volatile(p, v.wrapping_add(2) | 1);
            }
            sum = sum.wrapping_add(v);
        }
        let (w1, c1, f1) = (
            now(libc::CLOCK_MONOTONIC),
            now(libc::CLOCK_PROCESS_CPUTIME_ID),
            major_faults(),
        );
        std::hint::black_box(sum);
        let mut t = [0u8; 25];
        t[0] = TOUCHED;
        for (k, v) in [w1 - w0, c1 - c0, f1 - f0].into_iter().enumerate() {
            t[1 + k * 8..9 + k * 8].copy_from_slice(&v.to_ne_bytes());
        }
        if libc::write(res, t.as_ptr().cast(), t.len()) != t.len() as isize {
            libc::_exit(1);
        }
    }
    libc::_exit(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(lacked_mib: u64, faulted_mib: u64) -> Turn {
        Turn {
            lacked_bytes: lacked_mib << 20,
            faulted_bytes: faulted_mib << 20,
            passes: 1,
            wall: Duration::ZERO,
        }
    }

    /// Two settling turns, then the jobs alternate, the first made first:
    /// each job's share over its own turns, the split half their
    /// difference, the share over all four.
    #[test]
    fn the_shares_are_counted_per_job_from_the_third_turn() {
        let o = OwnShare {
            job_bytes: 256 << 20,
            pool_bytes: 374 << 20,
            turns: vec![
                turn(256, 1),
                turn(256, 1),
                turn(100, 200),
                turn(100, 125),
                turn(100, 200),
                turn(100, 125),
            ],
            attempts: 1,
        };
        let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-12, "{a} {b}");
        close(o.job_share(0), 0.5);
        close(o.job_share(1), 0.2);
        close(o.split(), 0.15);
        close(o.share(), 1.0 - 400.0 / 650.0);
        close(o.lack_share(), 100.0 / 256.0);
        // A job that faulted no more than it lacked evicted none of its own.
        let even = OwnShare {
            turns: vec![turn(1, 1), turn(1, 1), turn(100, 90), turn(100, 200)],
            ..o
        };
        close(even.job_share(0), 0.0);
        close(even.split(), -0.25);
    }
}
