//! Which block-I/O delay a job's threads can have waited (issues 36 and
//! 47): each thread's taskstats readings checked against what its other
//! states leave room for, growth that does not fit left out and the
//! stretch it came in said to be untrusted.
//!
//! This kernel adds block-I/O delay no wait can have had: a task blocked
//! by delayed dequeue has its wait's start stamped on another task
//! (`delayacct_blkio_start()` stamps `current`, docs/realapps.md), so at
//! its wake it adds the time since its own last stamp: since boot (24437.82
//! s to one thread frozen 60 s in all), since its previous wait, or since
//! another task's block, running time and frozen time included. A growth
//! within the time since the thread was last seen out of a wait, as the
//! first bound had it, still counted the thread's running and frozen time
//! a second time: a sparse-solver pair's job held 10.92 s of I/O wait
//! beside 5,166.58 s dropped, unaccounted -10.49 s of 85.6 s (issue 47).
//!
//! The rule: a thread is in one state at a time (on a CPU, queued, in an
//! I/O wait, asleep otherwise, frozen), so the waits that end after a
//! moment it was seen out of one (its *anchor*: a reading that found it
//! awake, not in `D`, or the reading before one that found its CPU time
//! grown, or the reading before its birth) fit, with the CPU and run-queue
//! time it had since, in the time since: `waits + cpu + run queue <= now -
//! anchor` (a tick of slack: the CPU time is brought up to date at ticks).
//! A wait that ends while the job runs also fits in its running time, the
//! frozen time since the anchor left out: a wait open across a freeze ends
//! while the job is frozen (its I/O takes milliseconds, a freeze seconds),
//! and the thaw's reading counts it as the freeze's (`while frozen`). A
//! growth that does not fit is left out whole (`dropped`, with the real
//! waits that ended beside it), and the stretch from the anchor to the
//! reading is counted as untrusted: the record says how long the job's
//! I/O wait was not measured instead of counting it. A thread never read
//! (born and gone between two readings) is bounded by its life the same
//! way. So a thread's kept I/O wait, CPU and run-queue time never exceed
//! its running time by more than a tick per anchor: the account's
//! `unaccounted` cannot go negative by a double count
//! (`crates/runtime/src/iowait.rs`'s property test replays adversarial
//! readings).

use memgang_linux::taskstats::TaskStats;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// A thread's CPU time is brought up to date at a scheduler tick or a
/// switch, so a run seen in one reading may have ended up to a tick
/// before the previous one: 10 ms, a tick at HZ = 100, the coarsest.
pub(crate) const TICK_NS: u64 = 10_000_000;
/// Threads gone kept at most per job (about 80 bytes each), for the check
/// of their exit records: a job that starts threads by the million must
/// not grow it without bound; beyond it, exit records go unchecked but for
/// their life's bound.
const MAX_GONE: usize = 1 << 16;

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A moment a thread was out of an I/O wait, its counters then, and the
/// delay kept since: every wait that ends later began after it.
#[derive(Clone, Copy, Debug)]
struct Anchor {
    at: Instant,
    cpu_ns: u64,
    rq_ns: u64,
    /// The job's frozen time up to `at`.
    frozen_ns: u64,
    /// Block-I/O delay kept since `at`: in all, and at running readings.
    kept_ns: u64,
    kept_running_ns: u64,
}

/// A thread's counters as last read, its anchor, and its whole life's
/// budget: the moment it was born by (the reading before it was first
/// seen), the job's running time then, and the delay kept since.
#[derive(Clone, Copy, Debug)]
struct Thread {
    blkio_ns: u64,
    cpu_ns: u64,
    rq_ns: u64,
    anchor: Anchor,
    born: Instant,
    born_running_ns: u64,
    kept_ns: u64,
    kept_running_ns: u64,
}

/// Each thread's block-I/O delay, CPU and run-queue time as last read, to
/// tell growth no wait can have had (the module's doc).
pub(crate) struct IoReadings {
    last: HashMap<u32, Thread>,
    /// Threads gone since their last reading, up to [`MAX_GONE`]: what
    /// their exit records add after it is checked the same way.
    gone: HashMap<u32, Thread>,
    /// When the job started, when `last` was read, and the job's frozen
    /// time then.
    start: Instant,
    read_at: Instant,
    read_frozen_ns: u64,
    /// The job's frozen time in stretches ended, and the start of the
    /// freeze it is in.
    frozen_ns: u64,
    frozen_since: Option<Instant>,
    /// Delay left out, by thread id.
    pub(crate) dropped: BTreeMap<u32, u64>,
    /// The stretches in which a growth was left out, in the job's running
    /// time (a freeze holds no running wait) and merged: how long, and the
    /// end of the last (ns of running time since the start).
    untrusted_ns: u64,
    untrusted_until: u64,
}

impl IoReadings {
    /// A job whose threads were all born after `start`.
    pub(crate) fn new(start: Instant) -> IoReadings {
        IoReadings {
            last: HashMap::new(),
            gone: HashMap::new(),
            start,
            read_at: start,
            read_frozen_ns: 0,
            frozen_ns: 0,
            frozen_since: None,
            dropped: BTreeMap::new(),
            untrusted_ns: 0,
            untrusted_until: 0,
        }
    }

    /// When the last reading was taken.
    pub(crate) fn read_at(&self) -> Instant {
        self.read_at
    }

    /// How long, in all, the job's block-I/O delays could not be trusted.
    pub(crate) fn untrusted_ns(&self) -> u64 {
        self.untrusted_ns
    }

    fn frozen_at(&self, now: Instant) -> u64 {
        self.frozen_ns
            + self
                .frozen_since
                .map_or(0, |f| ns(now.saturating_duration_since(f)))
    }

    /// The job was frozen at `at` (after its freeze's reading).
    pub(crate) fn froze(&mut self, at: Instant) {
        self.frozen_since.get_or_insert(at);
    }

    /// The job was thawed at `at` (after its thaw's reading).
    pub(crate) fn thawed(&mut self, at: Instant) {
        self.frozen_ns = self.frozen_at(at);
        self.frozen_since = None;
    }

    /// What the delays of `threads` (read at `now`) grew by since their
    /// last reading and can have been waits, summed; the rest goes to
    /// `dropped`. A reading while the job is frozen (its thaw's) counts
    /// the waits that ended in the freeze. `awake` are the threads seen
    /// asleep but not in an I/O wait (neither `D` nor `R`: a runnable
    /// thread's run-queue wait under way is not in its counter yet) right
    /// after this reading. A thread not read before was born since the last reading;
    /// threads not in `threads` are gone.
    pub(crate) fn read(
        &mut self,
        now: Instant,
        threads: &HashMap<u32, TaskStats>,
        awake: &HashSet<u32>,
    ) -> u64 {
        let frozen = self.frozen_since.is_some();
        let frozen_now = self.frozen_at(now);
        let mut kept = 0;
        let mut last = HashMap::with_capacity(threads.len());
        for (&tid, t) in threads {
            let mut th = self.was(tid, t).unwrap_or_else(|| self.born());
            match self.check(&th, t, now, frozen) {
                Ok(g) => {
                    kept += g;
                    th.kept_ns += g;
                    th.anchor.kept_ns += g;
                    if !frozen {
                        th.kept_running_ns += g;
                        th.anchor.kept_running_ns += g;
                    }
                }
                Err(g) => {
                    let from = self.running_at(th.anchor.at, th.anchor.frozen_ns);
                    self.drop_growth(tid, t, g, from, now);
                }
            }
            if awake.contains(&tid) {
                th.anchor = Anchor {
                    at: now,
                    cpu_ns: t.cpu_ns,
                    rq_ns: t.cpu_delay_ns,
                    frozen_ns: frozen_now,
                    kept_ns: 0,
                    kept_running_ns: 0,
                };
            } else if t.cpu_ns > th.cpu_ns {
                // It ran after the last reading: out of any wait then. Its
                // run-queue time counts from now: run_delay grows only when
                // a wait for a CPU ends, so what it held at the last reading
                // lacked a wait then under way, which began before it.
                th.anchor = Anchor {
                    at: self.read_at,
                    cpu_ns: th.cpu_ns,
                    rq_ns: t.cpu_delay_ns,
                    frozen_ns: self.read_frozen_ns,
                    kept_ns: 0,
                    kept_running_ns: 0,
                };
            }
            th.blkio_ns = t.blkio_delay_ns;
            th.cpu_ns = t.cpu_ns;
            th.rq_ns = t.cpu_delay_ns;
            last.insert(tid, th);
        }
        for (tid, w) in std::mem::replace(&mut self.last, last) {
            if !self.last.contains_key(&tid) && self.gone.len() < MAX_GONE {
                self.gone.insert(tid, w);
            }
        }
        for tid in self.last.keys() {
            self.gone.remove(tid);
        }
        self.read_at = now;
        self.read_frozen_ns = frozen_now;
        kept
    }

    /// A thread born since the last reading: nothing counted yet.
    fn born(&self) -> Thread {
        Thread {
            blkio_ns: 0,
            cpu_ns: 0,
            rq_ns: 0,
            anchor: Anchor {
                at: self.read_at,
                cpu_ns: 0,
                rq_ns: 0,
                frozen_ns: self.read_frozen_ns,
                kept_ns: 0,
                kept_running_ns: 0,
            },
            born: self.read_at,
            born_running_ns: self.running_at(self.read_at, self.read_frozen_ns),
            kept_ns: 0,
            kept_running_ns: 0,
        }
    }

    /// The job's running time by `now`, its frozen time by then `frozen`.
    fn running_at(&self, now: Instant, frozen: u64) -> u64 {
        ns(now.saturating_duration_since(self.start)).saturating_sub(frozen)
    }

    /// Whether thread `th`'s delay growth up to `t` (read at `now`;
    /// `frozen`: read while the job is frozen) fits what its anchor and its
    /// life leave room for: Ok(growth) to keep, or Err(growth) to drop.
    fn check(&self, th: &Thread, t: &TaskStats, now: Instant, frozen: bool) -> Result<u64, u64> {
        let grew = t.blkio_delay_ns.saturating_sub(th.blkio_ns);
        if grew == 0 {
            return Ok(0);
        }
        let frozen_now = self.frozen_at(now);
        // Since the anchor: the waits that ended since it began after it.
        let a = th.anchor;
        let window = ns(now.saturating_duration_since(a.at));
        let busy = t.cpu_ns.saturating_sub(a.cpu_ns) + t.cpu_delay_ns.saturating_sub(a.rq_ns);
        let room = window.saturating_sub(busy) + TICK_NS;
        let running_room = room.saturating_sub(frozen_now.saturating_sub(a.frozen_ns));
        let near = a.kept_ns + grew <= room && (frozen || a.kept_running_ns + grew <= running_room);
        // Since its birth: every wait, CPU and run-queue time it had.
        let busy = t.cpu_ns + t.cpu_delay_ns;
        let life = ns(now.saturating_duration_since(th.born)) + TICK_NS;
        let running = self
            .running_at(now, frozen_now)
            .saturating_sub(th.born_running_ns)
            + TICK_NS;
        let whole = th.kept_ns + grew + busy <= life
            && (frozen || th.kept_running_ns + grew + busy <= running);
        if near && whole {
            Ok(grew)
        } else {
            Err(grew)
        }
    }

    /// Thread `tid`'s last reading, unless `t` is another thread of the
    /// same id (its counters are lower: the id was used again).
    fn was(&self, tid: u32, t: &TaskStats) -> Option<Thread> {
        let w = self.last.get(&tid).or_else(|| self.gone.get(&tid))?;
        (t.blkio_delay_ns >= w.blkio_ns && t.cpu_ns >= w.cpu_ns && t.cpu_delay_ns >= w.rq_ns)
            .then_some(*w)
    }

    /// Thread `tid`'s growth `grew`, read at `now`, is no wait's: the
    /// job's running time from `from` (ns since its start) is untrusted.
    fn drop_growth(&mut self, tid: u32, t: &TaskStats, grew: u64, from: u64, now: Instant) {
        let to = self.running_at(now, self.frozen_at(now));
        tracing::debug!(
            "taskstats: thread {tid} ({}) gained {} s of block-I/O delay in {} s of running beside \
             {} s on a CPU or queued in all: dropped",
            t.comm(),
            grew as f64 * 1e-9,
            to.saturating_sub(from) as f64 * 1e-9,
            (t.cpu_ns + t.cpu_delay_ns) as f64 * 1e-9,
        );
        *self.dropped.entry(tid).or_default() += grew;
        self.untrusted_ns += to.saturating_sub(from.max(self.untrusted_until));
        self.untrusted_until = self.untrusted_until.max(to);
    }

    /// Thread `t`'s exit record, received at `at` while the job ran: what
    /// it adds after the thread's last reading is checked as a reading's
    /// growth; a thread never read, by its life (born `etime` before).
    pub(crate) fn exited(&mut self, t: &TaskStats, at: Instant) {
        if let Some(th) = self.was(t.pid, t) {
            if let Err(g) = self.check(&th, t, at, false) {
                let from = self.running_at(th.anchor.at, th.anchor.frozen_ns);
                self.drop_growth(t.pid, t, g, from, at);
            }
            return;
        }
        let life = t.etime_us.saturating_mul(1000);
        let busy = t.cpu_ns.saturating_add(t.cpu_delay_ns);
        let left = t
            .blkio_delay_ns
            .saturating_sub(self.dropped.get(&t.pid).copied().unwrap_or(0));
        if left > life.saturating_sub(busy) + TICK_NS {
            let from = self.running_at(at, self.frozen_at(at)).saturating_sub(life);
            self.drop_growth(t.pid, t, left, from, at);
        }
    }
}

/// Exit records (each with when it came, in seconds since `t0`), their
/// growth since their thread's last reading in `io` first checked (what no
/// wait can have been goes to its `dropped`), less the block-I/O delay
/// dropped (by thread id), each then [`sane`].
pub(crate) fn corrected(
    tasks: Vec<(f64, TaskStats)>,
    io: &mut IoReadings,
    t0: Instant,
) -> Vec<TaskStats> {
    tasks
        .into_iter()
        .map(|(at, mut t)| {
            io.exited(&t, t0 + Duration::from_secs_f64(at.max(0.0)));
            let d = io.dropped.get(&t.pid).copied().unwrap_or(0);
            t.blkio_delay_ns = t.blkio_delay_ns.saturating_sub(d);
            sane(&t)
        })
        .collect()
}

/// A delay longer than the task's life is the kernel's artifact of a task
/// that went to sleep before delay accounting was switched on and woke
/// after (its start stamp 0: the delay is the time since boot): dropped.
pub(crate) fn sane(s: &TaskStats) -> TaskStats {
    let life = s.etime_us.saturating_mul(1000);
    let mut t = *s;
    for d in [
        &mut t.cpu_delay_ns,
        &mut t.blkio_delay_ns,
        &mut t.swapin_delay_ns,
        &mut t.freepages_delay_ns,
        &mut t.thrashing_delay_ns,
        &mut t.compact_delay_ns,
        &mut t.wpcopy_delay_ns,
        &mut t.irq_delay_ns,
    ] {
        if *d > life + TICK_NS {
            tracing::warn!(
                "taskstats: task {} ({}) has a delay of {} s in a life of {} s: left out",
                s.pid,
                s.comm(),
                *d as f64 * 1e-9,
                life as f64 * 1e-9
            );
            *d = 0;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::{job_account, Accrued};

    const S: u64 = 1_000_000_000;

    fn thread(tid: u32, cpu_ns: u64, rq_ns: u64, blkio_ns: u64) -> TaskStats {
        TaskStats {
            pid: tid,
            tgid: tid,
            etime_us: 100_000_000,
            cpu_ns,
            cpu_delay_ns: rq_ns,
            blkio_delay_ns: blkio_ns,
            ..TaskStats::default()
        }
    }

    fn one(t: TaskStats) -> HashMap<u32, TaskStats> {
        HashMap::from([(t.pid, t)])
    }

    #[test]
    fn a_wait_fits_beside_the_threads_cpu_time_or_is_dropped() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let none = HashSet::new();
        let d = |tenths: u64| tenths * S / 100;
        let mut r = IoReadings::new(t0);
        // Born since the start: 0.5 s on a CPU and 0.3 s of waits in 1 s.
        assert_eq!(
            r.read(at(1000), &one(thread(7, d(50), 0, d(30))), &none),
            d(30)
        );
        // 1.5 s on a CPU by 2 s: 0.25 s more of waits would make 2.05 s of
        // states in 2 s. Dropped, and its life so far untrusted (the old
        // bound, the time since it was last out of a wait, kept it).
        assert_eq!(
            r.read(at(2000), &one(thread(7, d(150), 0, d(55))), &none),
            0
        );
        assert_eq!(r.dropped, BTreeMap::from([(7, d(25))]));
        assert_eq!(r.untrusted_ns(), 2 * S);
        // Not run since: the waits that end now began after 1 s (it ran
        // after that reading), and fit 2 s less its 1 s on a CPU since.
        assert_eq!(
            r.read(at(3000), &one(thread(7, d(150), 0, d(155))), &none),
            S
        );
        // 0.3 s more by 3.2 s does not: 1.3 s of waits in 2.2 s less 1 s.
        assert_eq!(
            r.read(at(3200), &one(thread(7, d(150), 0, d(185))), &none),
            0
        );
        assert_eq!(r.dropped[&7], d(55));
        assert_eq!(r.untrusted_ns(), 32 * S / 10);
        // Run-queue time is a state too: seen asleep (not D, not R) at 4 s,
        // 0.5 s of waits and 0.6 s queued by 5 s do not fit.
        let asleep = HashSet::from([7]);
        assert_eq!(
            r.read(at(4000), &one(thread(7, d(150), 0, d(185))), &asleep),
            0
        );
        assert_eq!(
            r.read(at(5000), &one(thread(7, d(150), d(60), d(235))), &none),
            0
        );
        assert_eq!(r.dropped[&7], d(105));
        // Another thread with a gone one's id (its counters lower) starts
        // afresh: born since the last reading.
        assert_eq!(r.read(at(5500), &HashMap::new(), &none), 0);
        assert_eq!(r.read(at(6000), &one(thread(7, 0, 0, d(25))), &none), d(25));
    }

    #[test]
    fn growth_after_a_thaw_that_needs_the_frozen_time_is_dropped() {
        // The sparse-solver pair of issue 47: a thread computing, frozen 10
        // s, is given at its next wake the time since its last wait's start,
        // the freeze included. Counted, it made unaccounted negative.
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let none = HashSet::new();
        let mut r = IoReadings::new(t0);
        let (mut cpu, mut io) = (0, 0);
        for s in 1..=4 {
            cpu += 9 * S / 10;
            io += S / 20;
            assert_eq!(
                r.read(at(s * 1000), &one(thread(1, cpu, 0, io)), &none),
                S / 20
            );
        }
        r.froze(at(4000));
        // A wait open across the freeze ends in it: the freeze's.
        io += 3 * S / 10;
        assert_eq!(
            r.read(at(14_000), &one(thread(1, cpu, 0, io)), &none),
            3 * S / 10
        );
        r.thawed(at(14_000));
        // 10.5 s since its last stamp, beside 0.9 s of CPU in 1 s: dropped,
        // and the running time from 3 s (its anchor) to 15 s untrusted, the
        // freeze left out: 2 s.
        cpu += 9 * S / 10;
        io += 105 * S / 10;
        assert_eq!(r.read(at(15_000), &one(thread(1, cpu, 0, io)), &none), 0);
        assert_eq!(r.dropped[&1], 105 * S / 10);
        assert_eq!(r.untrusted_ns(), 2 * S);
        // A real 50 ms wait in the next second stays.
        cpu += 9 * S / 10;
        io += S / 20;
        assert_eq!(
            r.read(at(16_000), &one(thread(1, cpu, 0, io)), &none),
            S / 20
        );
        assert_eq!(r.untrusted_ns(), 2 * S);
    }

    #[test]
    fn exit_records_are_checked_after_the_last_reading_or_by_their_life() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut r = IoReadings::new(t0);
        r.read(at(1000), &one(thread(8, S / 2, 0, 0)), &HashSet::from([8]));
        // Gone by 2 s: its record adds 30 s after its reading, no wait's;
        // a second thread never read lived 1 s with 0.8 s on a CPU and 0.5
        // s of waits: no room either; a third's 0.1 s fits.
        r.read(at(2000), &HashMap::new(), &HashSet::new());
        let mut never = thread(9, 8 * S / 10, 0, S / 2);
        never.etime_us = 1_000_000;
        let mut fits = thread(10, 8 * S / 10, 0, S / 10);
        fits.etime_us = 1_000_000;
        let tasks = vec![
            (2.0, thread(8, S / 2, 0, 30 * S)),
            (2.0, never),
            (2.0, fits),
        ];
        let fixed = corrected(tasks, &mut r, t0);
        let io: Vec<u64> = fixed.iter().map(|t| t.blkio_delay_ns).collect();
        assert_eq!(io, [0, 0, S / 10]);
        assert_eq!(r.dropped, BTreeMap::from([(8, 30 * S), (9, S / 2)]));
    }

    /// What a thread does while its job runs, for the replay below.
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        Cpu,
        Queue,
        Io,
        Sleep,
        /// Asleep in `D` but in no I/O wait (a lock).
        Locked,
    }

    /// How the kernel stamps the start of an I/O wait: at its block, not at
    /// all (delayed dequeue stamped `current` instead: the last stamp
    /// stays), or never since boot.
    #[derive(Clone, Copy, Debug)]
    enum Stamp {
        Proper,
        Kept,
        Boot,
    }

    #[derive(Clone, Copy, Debug)]
    struct Seg {
        kind: Kind,
        ms: u64,
        stamp: Stamp,
        /// The thread's stamp set at this stretch's start though it is not
        /// waiting (another task's block stamped `current`).
        spurious: bool,
    }

    /// One thread's job replayed millisecond by millisecond: the kernel's
    /// counters as this kernel keeps them (the stale starts included), the
    /// readings the tracker takes (every second while the job runs, at each
    /// freeze and thaw, the exit record), and the truth.
    struct Replay {
        account: crate::results::JobAccount,
        /// Seconds asleep outside I/O waits while running, and of waits that
        /// were open at a freeze, before it (the freeze's, by the rule).
        sleep_s: f64,
        open_s: f64,
        /// Checks, each allowed a tick of slack.
        checks: u64,
        stale: bool,
    }

    const MS: u64 = 1_000_000;

    /// The thread as this kernel counts it, millisecond by millisecond.
    struct Kernel<'a> {
        segs: &'a [Seg],
        /// The stretch under way, and the milliseconds left of it.
        i: usize,
        left: u64,
        cpu: u64,
        rq: u64,
        blkio: u64,
        /// A wait for a CPU under way (counted when it ends), in ms.
        queued: u64,
        /// The wait's start stamp, in ms since the job's start (boot: long
        /// before), and when the wait under way really began.
        stamp: i64,
        wait_began: u64,
        /// Milliseconds asleep outside I/O waits while running.
        sleep: u64,
        stale: bool,
    }

    impl Kernel<'_> {
        fn seg(&self) -> Seg {
            self.segs[self.i % self.segs.len()]
        }

        /// The next stretch begins at `t`.
        fn begin(&mut self, t: u64) {
            let seg = self.seg();
            self.left = seg.ms;
            if seg.spurious {
                self.stamp = t as i64;
                self.stale = true;
            }
            if let Kind::Io = seg.kind {
                self.wait_began = t;
                match seg.stamp {
                    Stamp::Proper => self.stamp = t as i64,
                    Stamp::Kept => self.stale = true,
                    Stamp::Boot => {
                        self.stamp = -100_000_000;
                        self.stale = true;
                    }
                }
            }
        }

        /// The stretch under way ends at `t`: a wait for a CPU is counted,
        /// an I/O wait adds the time since its stamp.
        fn end(&mut self, t: u64) {
            match self.seg().kind {
                Kind::Queue => {
                    self.rq += self.queued * MS;
                    self.queued = 0;
                }
                Kind::Io => self.blkio += (t as i64 - self.stamp).max(0) as u64 * MS,
                _ => {}
            }
        }

        /// One millisecond of running from `t`.
        fn step(&mut self, t: u64) {
            match self.seg().kind {
                Kind::Cpu => self.cpu += MS,
                Kind::Queue => self.queued += 1,
                Kind::Io => {}
                Kind::Sleep | Kind::Locked => self.sleep += 1,
            }
            self.left -= 1;
            if self.left == 0 {
                self.end(t + 1);
                self.i += 1;
                self.begin(t + 1);
            }
        }

        /// Its counters as a reading at `t` finds them: the CPU time is
        /// brought up to date at a 4 ms tick and when it stops running, so
        /// read on a CPU it lacks what ran since the later of the two.
        fn read(&self, t: u64) -> TaskStats {
            let seg = self.seg();
            let lag = match seg.kind {
                Kind::Cpu => (t % 4).min(seg.ms - self.left),
                _ => 0,
            };
            thread(1, self.cpu - lag * MS, self.rq, self.blkio)
        }

        /// Its counters once it stopped running (frozen): up to date.
        fn stopped(&self) -> TaskStats {
            thread(1, self.cpu, self.rq, self.blkio)
        }

        /// Asleep but in no `D` state nor runnable: what the tracker counts
        /// as awake.
        fn awake(&self) -> HashSet<u32> {
            match self.seg().kind {
                Kind::Sleep => HashSet::from([1]),
                _ => HashSet::new(),
            }
        }
    }

    /// The job of one thread of `segs` (in turn, again and again) running
    /// `stretches` (ms running, ms frozen; the last one's freeze unused),
    /// a wait open at a freeze ending `io_done_ms` into it.
    fn replay(stretches: &[(u64, u64)], segs: &[Seg], io_done_ms: u64) -> Replay {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut io = IoReadings::new(t0);
        let mut k = Kernel {
            segs,
            i: 0,
            left: 0,
            cpu: 0,
            rq: 0,
            blkio: 0,
            queued: 0,
            stamp: -100_000_000,
            wait_began: 0,
            sleep: 0,
            stale: false,
        };
        k.begin(0);
        let (mut t, mut last_read, mut open, mut checks) = (0u64, 0u64, 0u64, 0u64);
        let mut frozen_grew = Accrued::default();
        let mut running = Vec::new();
        for (n, &(run_ms, frozen_ms)) in stretches.iter().enumerate() {
            let end = t + run_ms;
            running.push((t as f64 / 1e3, end as f64 / 1e3));
            while t < end {
                k.step(t);
                t += 1;
                if t - last_read >= 1000 && t < end {
                    io.read(at(t), &one(k.read(t)), &k.awake());
                    checks += 1;
                    last_read = t;
                }
            }
            if n + 1 == stretches.len() {
                break;
            }
            // The freeze: a queued thread gets its CPU to freeze; a wait
            // under way ends inside the freeze, the frozen time included.
            let open_wait = matches!(k.seg().kind, Kind::Io);
            if open_wait {
                open += t - k.wait_began;
            } else {
                k.end(t);
            }
            io.read(at(t), &one(k.stopped()), &HashSet::new());
            io.froze(at(t));
            if open_wait {
                k.end(t + io_done_ms.min(frozen_ms - 1));
            }
            t += frozen_ms;
            frozen_grew.blkio_ns += io.read(at(t), &one(k.stopped()), &HashSet::new());
            io.thawed(at(t));
            frozen_grew.samples += 1;
            checks += 2;
            last_read = t;
            k.i += 1;
            k.begin(t);
        }
        // The end: a wait or queue under way is the exit's.
        k.end(t);
        let mut exit = k.stopped();
        exit.etime_us = t * 1000;
        let tasks = corrected(vec![(t as f64 / 1e3, exit)], &mut io, t0);
        checks += 1;
        frozen_grew.untrusted_ns = io.untrusted_ns();
        frozen_grew.blkio_dropped_ns = std::mem::take(&mut io.dropped);
        let account = job_account(
            (0.0, t as f64 / 1e3),
            &tasks,
            &running,
            &[],
            &[],
            (k.cpu as f64 * 1e-9, 0.0),
            frozen_grew,
            None,
        );
        Replay {
            account,
            sleep_s: k.sleep as f64 / 1e3,
            open_s: open as f64 / 1e3,
            checks,
            stale: k.stale,
        }
    }

    fn seg() -> impl proptest::strategy::Strategy<Value = Seg> {
        use proptest::prelude::*;
        let kind = prop_oneof![
            4 => Just(Kind::Cpu),
            1 => Just(Kind::Queue),
            3 => Just(Kind::Io),
            1 => Just(Kind::Sleep),
            1 => Just(Kind::Locked),
        ];
        let stamp =
            prop_oneof![6 => Just(Stamp::Proper), 3 => Just(Stamp::Kept), 1 => Just(Stamp::Boot)];
        (kind, 1u64..1500, stamp, proptest::bool::weighted(0.1)).prop_map(
            |(kind, ms, stamp, spurious)| {
                // A wait for a CPU under a second: the readings' run-queue time
                // counts from the reading after an anchor.
                let ms = if let Kind::Queue = kind {
                    ms.min(300)
                } else {
                    ms
                };
                Seg {
                    kind,
                    ms,
                    stamp,
                    spurious,
                }
            },
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Whatever the kernel adds, a thread's account never counts a
        /// moment twice (unaccounted >= minus a tick per check), and what
        /// it leaves unaccounted beyond the thread's own sleeps is in the
        /// stretches the record says were untrusted.
        #[test]
        fn the_account_adds_up_whatever_the_kernel_adds(
            stretches in proptest::collection::vec((300u64..12_000, 200u64..12_000), 1..6),
            segs in proptest::collection::vec(seg(), 1..200),
            io_done_ms in 1u64..200,
        ) {
            let r = replay(&stretches, &segs, io_done_ms);
            let a = &r.account;
            let slack = r.checks as f64 * TICK_NS as f64 * 1e-9 + 1e-6;
            proptest::prop_assert!(a.unaccounted_s >= -slack, "{a:?} slack {slack}");
            proptest::prop_assert!(
                a.unaccounted_s <= r.sleep_s + r.open_s + a.io_wait_untrusted_s + slack,
                "{a:?}: sleep {} open {} slack {slack}", r.sleep_s, r.open_s
            );
            if !r.stale {
                proptest::prop_assert!(a.io_wait_dropped_s == 0.0, "an honest kernel's wait dropped: {a:?}");
            }
        }
    }
}
