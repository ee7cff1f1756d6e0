//! The capacity model: whether jobs fit in a node's memory, written once
//! for every executor (the one-node executor, memgangd, the Slurm agent,
//! hybrid's packing and the simulator). Pure: the caller measures the pool
//! and the swap device and hands in numbers.
//!
//! A node holds the jobs' memory in its pool (a cgroup's limit) and in
//! swap. Swap is what its device holds, less what processes outside the
//! pool use, less [`SWAP_RESERVE`] (one number for admission and for a
//! switch: see there).
//!
//! **The exchange.** At a switch the outgoing jobs are paged out before
//! (or while) the incoming ones are paged back, and the kernel keeps a
//! swapped-in page's swap slot until the page is written or swap is over
//! half full and the page is faulted; a page-in into a frozen job
//! (`MADV_WILLNEED`) faults nothing, so every page it reads keeps its slot
//! while the switch lasts. Each page of a job is in memory only, in swap
//! only, or in both; the pool holds what is in memory, swap what is in
//! swap. Once the incoming jobs' `R_in` bytes are back, at most
//! `pool - R_in` bytes are in memory only, so swap must hold the rest:
//! `sum - (pool - R_in) <= swap`, that is
//!
//! ```text
//! sum of the jobs + R_in <= pool + usable swap
//! ```
//!
//! `R_in` is at most the pool (a page-in fills no more), at most the
//! usable swap (it was read from there) and at most the jobs but the
//! smallest (some job goes out): [`exchange`]. A set of one job never
//! switches and has none. This is what [`set_may_run`] decides, for
//! admission ([`crate::admission`]) and for `memgang run`'s check of an
//! experiment.
//! Where swap holds less, a switch can only leave the exchange to the
//! kernel's reclaim, which pages both jobs through a full swap device
//! (jobs in D state for minutes) or kills one (CI, 2026-11-27: pool 256M,
//! swap 256M, two jobs of 210M under `ao/ai`).
//!
//! **The rules, by name.** Every question of fit is one function here;
//! the executors ask, none decides by a rule of its own.
//!
//! | rule | the question | asked by |
//! |---|---|---|
//! | [`Holding::of`], [`Capacity::promised`] | what the rules count under a policy (the `parks` decision) | memgangd (`Service::capacity`), `memgang run` (`check_pool`) |
//! | [`set_may_run`] ([`shortage`] says why not) | may these jobs be held at once, a switch's exchange included? | the two below; memgangd's admission for a job alone ([`crate::admission::hold_unfitting`]: could it start on an empty node now?) |
//! | [`job_may_start`] | may a queued job start beside the jobs already promised memory? | [`crate::admission::admit`] (memgangd's node loop) |
//! | [`refuse`] | could a job ever run here, alone? | memgangd at submit |
//! | [`experiment_may_run`] | may an experiment's jobs run under its policy, none waiting for memory? | `memgang run` (`experiment/src/run.rs`, `check_pool`) |
//! | [`check_switch`] with [`swap_room`] | may a switch page out what its incoming jobs need, now? | the switch engine (`runtime/src/engine.rs`): the one-node executor, memgangd, the Slurm agent (`Request::Check`) |
//! | [`set_fits`] with [`set_capacity`], [`set_estimate`] | may a job join a co-scheduled set on a node? | hybrid's packing ([`crate::packing`]): the policy in every executor and the simulator |
//! | [`check_pinned`] | may a switch run a job beside the memory suspended jobs hold locked (mlock)? | the one-node executor's switch (`runtime/src/executor/switch.rs`): memgangd, `memgang run` |
//! | [`less_pinned`] | what may admission promise where admitted jobs hold memory locked? | memgangd's admission (`Service::admit`) |
//!
//! `memgang run` and memgangd judge a set of jobs alike under the
//! switching policies (gang, hybrid, auto), and differ on purpose under
//! two (the table is the test
//! `admission::tests::memgang_run_and_memgangd_judge_alike_but_where_they_mean_to_differ`):
//! - **cosched**: memgangd prevents paging (paper 003 §3), so what it may
//!   promise is the pool alone ([`Capacity::promised`]); `memgang run`
//!   measures the policy, paging included (a cosched run out of core is an
//!   experiment of its own, bench/hybrid.sh), and refuses only what the
//!   node cannot hold, pool and swap.
//! - **batch**: `memgang run` checks each job alone (one runs at a time);
//!   memgangd promises a job its memory from admission, so a job admitted
//!   behind another may wait in memgangd's queue instead of the policy's:
//!   the same order, the same runs.

use crate::policy::PolicyKind;
use crate::units::format_bytes;

/// Swap kept free of the jobs, by admission and by a switch alike: the
/// kernel's own reclaim (other cgroups, the node's other processes, the
/// pages a switch's `MADV_PAGEOUT` has not written yet) must still find
/// slots, or it turns to the OOM killer. One number, so that a set
/// admitted as fitting is never one a switch refuses to page. 64 MiB is
/// two page-in windows (the 32 MiB a streamed page-in reads at once):
/// what a switch has in flight. memgangd's `swap_reserve` sets it for its
/// node; `memgang run` and the Slurm agent keep this.
pub const SWAP_RESERVE: u64 = 64 << 20;

/// Memory made free beyond an incoming job's working-set estimate at a
/// switch: its page tables, the per-CPU charge caches of the memory
/// cgroup (64 pages per CPU) and what the job touches beyond last
/// quantum's working set. About 3% of a 1 GiB pool. Also kept free by a
/// page-in, so that a page-in never fills the pool with pages under read.
pub const ROOM_MARGIN: u64 = 32 << 20;

/// The simulator's margin: its memory is exact bytes, nothing a real
/// process has beside its working set.
pub const EXACT: u64 = 0;

/// Share of the pool a co-scheduled set leaves free (hybrid, paper 001):
/// what a job's estimate does not count (page tables, per-CPU charge
/// caches, the page-in of the next set, growth between two measurements).
/// Larger than [`ROOM_MARGIN`] because a set runs a whole quantum beside
/// itself, where a switch's margin lasts until the job's next quantum.
pub const SET_MARGIN_DIVISOR: u64 = 16;

/// Added to each job's estimate in a set for what is not its data (stack,
/// libraries, page tables).
pub const JOB_OVERHEAD: u64 = 4 << 20;

/// The memory jobs may hold between them, as measured now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// The pool's memory limit.
    pub pool_bytes: u64,
    /// Swap space of the node.
    pub swap_total_bytes: u64,
    /// Swap in use by anything but the admitted jobs (other processes on
    /// the node): not ours to count on.
    pub swap_used_elsewhere_bytes: u64,
    /// Swap kept back for the rest of the node ([`SWAP_RESERVE`], or
    /// configured).
    pub swap_reserve_bytes: u64,
}

/// How a policy holds its jobs' memory: what the rules count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// One job at a time, each to its end (batch).
    OneAtATime,
    /// Every job at once, none suspended (cosched).
    AllAtOnce,
    /// Jobs switched in and out, the suspended ones parked in swap (gang,
    /// hybrid, and auto, which turns hybrid when its jobs do not fit).
    Parked,
}

impl Holding {
    pub fn of(policy: PolicyKind) -> Holding {
        match policy {
            PolicyKind::Batch => Holding::OneAtATime,
            PolicyKind::Cosched => Holding::AllAtOnce,
            PolicyKind::Gang | PolicyKind::Hybrid | PolicyKind::Auto => Holding::Parked,
        }
    }

    /// Whether swap is room that paging prevention may promise: not where
    /// every job runs at once, since what is in swap is then paged, not
    /// parked (paper 003 §3). Batch keeps it: a job larger than the pool
    /// pages even alone, and is refused only beyond pool and swap.
    pub fn parks(self) -> bool {
        self != Holding::AllAtOnce
    }
}

impl Capacity {
    /// From what was measured: the pool, the swap device (`swap_total`,
    /// `swap_used`), the part of its use that is the jobs' own (`ours`)
    /// and the reserve. The node's room, swap counted whatever the
    /// policy; [`Capacity::promised`] is what paging prevention counts.
    pub fn measured(
        pool_bytes: u64,
        swap_total: u64,
        swap_used: u64,
        ours: u64,
        reserve: u64,
    ) -> Capacity {
        Capacity {
            pool_bytes,
            swap_total_bytes: swap_total,
            swap_used_elsewhere_bytes: swap_used.saturating_sub(ours),
            swap_reserve_bytes: reserve,
        }
    }

    /// What paging prevention (memgangd's admission, and its refusal at
    /// submit) may promise to jobs held so: this room where suspended jobs
    /// are parked in swap, the pool alone where none is
    /// ([`Holding::parks`]).
    pub fn promised(self, holding: Holding) -> Capacity {
        if holding.parks() {
            return self;
        }
        Capacity {
            swap_total_bytes: 0,
            swap_used_elsewhere_bytes: 0,
            ..self
        }
    }

    /// Swap the jobs may fill.
    pub fn swap_usable(&self) -> u64 {
        self.swap_total_bytes
            .saturating_sub(self.swap_used_elsewhere_bytes)
            .saturating_sub(self.swap_reserve_bytes)
    }

    /// Everything the admitted jobs may hold at once.
    pub fn total(&self) -> u64 {
        self.pool_bytes.saturating_add(self.swap_usable())
    }

    pub fn describe(&self) -> String {
        format!(
            "pool {} + usable swap {} (swap {} - used elsewhere {} - reserve {})",
            format_bytes(self.pool_bytes),
            format_bytes(self.swap_usable()),
            format_bytes(self.swap_total_bytes),
            format_bytes(self.swap_used_elsewhere_bytes),
            format_bytes(self.swap_reserve_bytes),
        )
    }
}

/// Jobs' declared bytes, as one set: their sum and what its switches'
/// exchange needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Set {
    pub count: usize,
    pub sum: u64,
    pub smallest: u64,
}

impl Set {
    pub fn of(jobs: &[u64]) -> Set {
        jobs.iter().fold(Set::default(), |s, &b| s.with(b))
    }

    /// This set and one more job of `bytes`.
    pub fn with(self, bytes: u64) -> Set {
        Set {
            count: self.count + 1,
            sum: self.sum.saturating_add(bytes),
            smallest: if self.count == 0 {
                bytes
            } else {
                self.smallest.min(bytes)
            },
        }
    }
}

/// The swap a switch among `set` needs beyond the jobs' own bytes: the
/// incoming jobs' pages, read back while their slots stay (module doc).
pub fn exchange(set: Set, cap: &Capacity) -> u64 {
    if set.count < 2 {
        return 0;
    }
    set.sum
        .saturating_sub(set.smallest)
        .min(cap.pool_bytes)
        .min(cap.swap_usable())
}

/// Memory `set` needs of the node: its sum and its exchange.
pub fn need(set: Set, cap: &Capacity) -> u64 {
    set.sum.saturating_add(exchange(set, cap))
}

/// A set may run: the node holds its jobs at once, its switches'
/// exchange included.
pub fn set_may_run(set: Set, cap: &Capacity) -> bool {
    need(set, cap) <= cap.total()
}

/// A job may start: a job of `bytes` joins the jobs already promised
/// memory (`held`) and the set may run.
pub fn job_may_start(held: Set, bytes: u64, cap: &Capacity) -> bool {
    set_may_run(held.with(bytes), cap)
}

/// Why `set` may not run, with the numbers; `None` when it may.
pub fn shortage(set: Set, cap: &Capacity) -> Option<String> {
    (!set_may_run(set, cap)).then(|| {
        format!(
            "{} job(s) of {} in all need {} with a switch's exchange ({} of swap read back \
             while its slots stay), more than {}",
            set.count,
            format_bytes(set.sum),
            format_bytes(need(set, cap)),
            format_bytes(exchange(set, cap)),
            cap.describe()
        )
    })
}

/// A job that could never run here, even alone: against the whole swap
/// device, not what is free now (other processes' swap use comes and
/// goes, the pool and the device do not).
pub fn refuse(job_bytes: u64, cap: &Capacity) -> Option<String> {
    let most = cap
        .pool_bytes
        .saturating_add(cap.swap_total_bytes.saturating_sub(cap.swap_reserve_bytes));
    (job_bytes > most).then(|| {
        format!(
            "the job declares {} but this node can never hold more than {} (pool {} + swap {} - reserve {}); \
             declare less memory with --memory, or ask the administrator for a bigger pool or swap",
            format_bytes(job_bytes),
            format_bytes(most),
            format_bytes(cap.pool_bytes),
            format_bytes(cap.swap_total_bytes),
            format_bytes(cap.swap_reserve_bytes),
        )
    })
}

/// Why an experiment may not run ([`experiment_may_run`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its job at `index`, of `bytes`, cannot be held even alone.
    Alone { index: usize, bytes: u64 },
    /// Its jobs cannot be held as the policy holds them: why, with the
    /// numbers.
    Together(String),
}

/// An experiment may run: its jobs (declared bytes) fit in `room` (the
/// node now, swap counted: [`Capacity::measured`]) as `holding` holds
/// them, none waiting for memory. Each job alone, and: one at a time,
/// nothing more; all at once, their sum (paging as the kernel must, which
/// is what such a run measures); switched, the set with its exchange
/// ([`set_may_run`]). Refused, not serialized: a run that waited for
/// memory would not measure the policy.
pub fn experiment_may_run(jobs: &[u64], room: &Capacity, holding: Holding) -> Result<(), Refusal> {
    // The last of the biggest, as `Iterator::max_by_key` finds it.
    if let Some((index, &bytes)) = jobs.iter().enumerate().max_by_key(|(_, b)| **b) {
        if bytes > room.total() {
            return Err(Refusal::Alone { index, bytes });
        }
    }
    let set = Set::of(jobs);
    let why = match holding {
        Holding::OneAtATime => None,
        Holding::AllAtOnce => (set.sum > room.total()).then(|| {
            format!(
                "its jobs run at once and declare {} in all, more than {}",
                format_bytes(set.sum),
                room.describe()
            )
        }),
        Holding::Parked => shortage(set, room),
    };
    why.map_or(Ok(()), |why| Err(Refusal::Together(why)))
}

/// Swap a switch's own page-outs may fill now: what the device has free
/// less the reserve.
pub fn swap_room(swap_total: u64, swap_used: u64, reserve: u64) -> u64 {
    swap_total.saturating_sub(swap_used).saturating_sub(reserve)
}

/// The check before a switch: the incoming jobs are `short` bytes short
/// of memory (their working sets and [`ROOM_MARGIN`], less what they hold
/// and what the pool has free), which must leave for swap, where `room`
/// bytes are free beyond `reserve`. A full swap device is said before the
/// switch, not found out by the OOM killer.
pub fn check_switch(short: u64, room: u64, reserve: u64) -> Option<String> {
    (short > room).then(|| {
        format!(
            "swap is nearly full: {} free (with {} kept in reserve), but the incoming jobs \
             need about {} more memory than the pool has free",
            format_bytes(room),
            format_bytes(reserve),
            format_bytes(short)
        )
    })
}

/// Locked memory (mlock: a cgroup's `unevictable`) a job must hold before
/// it counts: below this it is the few pages any process locks, not
/// worth holding anyone for.
pub const PINNED_COUNTED: u64 = 16 << 20;

/// Whether a switch may run a job whose working set is `incoming` bytes
/// while the suspended jobs hold `pinned` bytes locked in the pool: no
/// page-out moves those (the kernel leaves locked pages where they are),
/// so they count as resident, and the job would run in `pool - pinned`,
/// thrashing against them. Refused (why, with the numbers) where it and
/// the margin do not fit beside them; the executor keeps it stopped until
/// they do (they end, or run again).
pub fn check_pinned(incoming: u64, pinned: u64, pool: u64) -> Option<String> {
    let need = incoming.saturating_add(ROOM_MARGIN);
    (pinned >= PINNED_COUNTED && need.saturating_add(pinned) > pool).then(|| {
        format!(
            "held: it needs about {} of the {} pool, but suspended jobs hold {} of it locked \
             (mlock), which no page-out moves; it runs once they end or run again",
            format_bytes(need),
            format_bytes(pool),
            format_bytes(pinned)
        )
    })
}

/// What admission may promise where admitted jobs hold memory locked
/// (`pinned[i]`, measured, for the job of `held[i]` declared bytes):
/// locked bytes never leave the pool, so they are out of every job's
/// room, and each job's declared bytes count less its own locked part
/// (counted once, in the pool). Below [`PINNED_COUNTED`] nothing changes.
pub fn less_pinned(cap: Capacity, held: &mut [u64], pinned: &[u64]) -> Capacity {
    let mut locked = 0u64;
    for (h, &p) in held.iter_mut().zip(pinned) {
        if p >= PINNED_COUNTED {
            *h = h.saturating_sub(p);
            locked = locked.saturating_add(p);
        }
    }
    Capacity {
        pool_bytes: cap.pool_bytes.saturating_sub(locked),
        ..cap
    }
}

/// Memory a co-scheduled set may use in a pool of `pool` bytes (hybrid).
pub fn set_capacity(pool: u64) -> u64 {
    pool - pool / SET_MARGIN_DIVISOR
}

/// A job's memory estimate in a set, from its declared footprint and its
/// measured peak, either of which may be unknown.
pub fn set_estimate(declared: Option<u64>, measured_peak: Option<u64>) -> u64 {
    declared.unwrap_or(0).max(measured_peak.unwrap_or(0)) + JOB_OVERHEAD
}

/// Whether a job needing `bytes` on a node may join the jobs of a set
/// already there (`members` of them, `used` bytes): it fits, or the node
/// holds none of the set's jobs yet (a job larger than the node runs alone
/// on it).
pub fn set_fits(used: u64, members: usize, bytes: u64, capacity: u64) -> bool {
    members == 0 || used.saturating_add(bytes) <= capacity
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;

    fn cap(pool: u64, swap: u64) -> Capacity {
        Capacity::measured(pool, swap, 0, 0, 0)
    }

    #[test]
    fn the_ci_oom_setup_admits_one_job_of_210m_at_a_time() {
        // Pool 256M, swap 256M, no reserve: one job fits, two need 420M
        // plus 210M read back while its slots stay: 630M > 512M.
        let c = cap(256 * M, 256 * M);
        assert!(set_may_run(Set::of(&[210 * M]), &c));
        assert_eq!(exchange(Set::of(&[210 * M, 210 * M]), &c), 210 * M);
        assert!(!set_may_run(Set::of(&[210 * M, 210 * M]), &c));
        // The sum alone (the rule before) would have taken them.
        assert!(420 * M <= c.total());
        let why = shortage(Set::of(&[210 * M, 210 * M]), &c).unwrap();
        assert!(why.contains("630M") && why.contains("exchange"), "{why}");
    }

    #[test]
    fn with_swap_for_both_sides_two_fit_and_three_do_not() {
        // Pool 256M, usable swap 512M: 420 + 210 <= 768, but three need
        // 630 + 256 (a page-in fills at most the pool) > 768.
        let c = Capacity::measured(256 * M, 768 * M, 0, 0, 256 * M);
        assert!(set_may_run(Set::of(&[210 * M, 210 * M]), &c));
        let three = Set::of(&[210 * M; 3]);
        assert_eq!(exchange(three, &c), 256 * M);
        assert!(!set_may_run(three, &c));
    }

    #[test]
    fn the_exchange_is_bounded_by_pool_swap_and_all_but_one_job() {
        let c = cap(G, 4 * G);
        // A small partner: the big one comes back only as far as the pool.
        assert_eq!(exchange(Set::of(&[3 * G, M]), &c), G);
        // All but the smallest job.
        assert_eq!(exchange(Set::of(&[100 * M, 200 * M, 300 * M]), &c), 500 * M);
        // What was never in swap cannot come back from it.
        let c = cap(G, 100 * M);
        assert_eq!(exchange(Set::of(&[G, G]), &c), 100 * M);
        // One job never switches; cosched parks nothing.
        assert_eq!(exchange(Set::of(&[G]), &cap(G, G)), 0);
        let c = Capacity::measured(G, 4 * G, 0, 0, 0).promised(Holding::AllAtOnce);
        assert_eq!(exchange(Set::of(&[G / 2, G / 2]), &c), 0);
        assert!(set_may_run(Set::of(&[G / 2, G / 2]), &c));
        assert!(!set_may_run(Set::of(&[G / 2, G / 2 + 1]), &c));
    }

    /// Whether a switch from `out` (in the pool) to `inc` (parked whole in
    /// swap) can end with `inc` back in the pool: some part `m` of `out`
    /// stays in memory only, the rest goes to swap, and `inc`'s pages in
    /// the pool keep their slots.
    fn switch_possible(out: u64, inc: u64, pool: u64, swap: u64) -> bool {
        let back = inc.min(pool);
        (0..=out).any(|m| m + back <= pool && (out - m) + inc <= swap)
    }

    #[test]
    fn the_rule_is_exactly_what_a_switch_between_two_jobs_needs() {
        // Brute force over small nodes and jobs that swap can park whole:
        // a set fits by the rule exactly when a switch either way can be
        // carried out.
        for pool in 1..14u64 {
            for swap in 1..14u64 {
                for a in 1..=swap {
                    for b in 1..=swap {
                        let both =
                            switch_possible(a, b, pool, swap) && switch_possible(b, a, pool, swap);
                        let fit = set_may_run(Set::of(&[a, b]), &cap(pool, swap));
                        assert_eq!(fit, both, "pool {pool} swap {swap} jobs {a} {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn reserve_and_foreign_swap_are_not_usable() {
        let c = Capacity::measured(G, 4 * G, 2 * G, G, G);
        assert_eq!(c.swap_used_elsewhere_bytes, G);
        assert_eq!(c.total(), 3 * G);
        // More foreign swap than the device: nothing usable, no underflow.
        let c = Capacity::measured(G, 4 * G, 9 * G, 0, G);
        assert_eq!(c.total(), G);
    }

    #[test]
    fn a_switch_keeps_the_same_reserve() {
        assert_eq!(swap_room(256 * M, 100 * M, SWAP_RESERVE), 92 * M);
        assert_eq!(swap_room(256 * M, 250 * M, SWAP_RESERVE), 0);
        assert_eq!(check_switch(92 * M, 92 * M, SWAP_RESERVE), None);
        let msg = check_switch(93 * M, 92 * M, SWAP_RESERVE).unwrap();
        assert!(msg.contains("64M kept in reserve"), "{msg}");
    }

    #[test]
    fn refuses_only_what_could_never_fit() {
        let c = Capacity {
            pool_bytes: G,
            swap_total_bytes: 2 * G,
            swap_used_elsewhere_bytes: 2 * G,
            swap_reserve_bytes: G / 2,
        };
        assert_eq!(refuse(G + G + G / 2, &c), None);
        let msg = refuse(G + G + G / 2 + 1, &c).unwrap();
        assert!(msg.contains("--memory"), "{msg}");
    }

    #[test]
    fn locked_memory_counts_as_resident() {
        // 140M locked by a suspended job in a 256M pool: a job of 200M
        // waits, one of 60M (with the 32M margin) runs beside it.
        let why = check_pinned(200 * M, 140 * M, 256 * M).unwrap();
        assert!(why.contains("140M") && why.contains("mlock"), "{why}");
        assert_eq!(check_pinned(60 * M, 140 * M, 256 * M), None);
        // A few locked pages hold no one.
        assert_eq!(check_pinned(250 * M, 8 * M, 256 * M), None);
        // Admission: the locked part leaves the pool, counted once.
        let mut held = [16 * M, 100 * M, 50 * M];
        let c = less_pinned(cap(256 * M, G), &mut held, &[140 * M, 0, 4 * M]);
        assert_eq!(c.pool_bytes, 116 * M);
        assert_eq!(held, [0, 100 * M, 50 * M]);
        assert_eq!(c.swap_total_bytes, G);
    }

    #[test]
    fn a_set_keeps_a_sixteenth_free_and_estimates_add_the_overhead() {
        assert_eq!(set_capacity(16 * M), 15 * M);
        assert_eq!(set_estimate(Some(M), Some(2 * M)), 2 * M + JOB_OVERHEAD);
        assert!(set_fits(0, 0, 100 * G, M));
        assert!(!set_fits(M, 1, 1, M));
    }
}
