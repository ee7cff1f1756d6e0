//! Packing jobs into sets that fit in memory together (paper 001 §IV:
//! hybrid scheduling co-schedules each set and gang-switches between them).
//!
//! The rule:
//! - **Capacity** of a set is the pool's memory less 1/16 of it. The margin
//!   holds what a job's estimate does not count (page tables, the kernel's
//!   per-CPU charge caches, the runtime's page-in of the next set, growth
//!   between two measurements); without it a set that "fits" exactly pages
//!   as soon as one job touches a page more.
//! - **A job's estimate** is the larger of its declared memory and its
//!   measured peak (resident anonymous memory), plus 4 MiB for what every
//!   process has besides its data (stack, libraries, page tables). A job
//!   declared too small is caught by its measured peak and re-packed.
//! - **First fit decreasing**: the largest job first, each into the first
//!   set it fits in, else into a new set. It uses at most 11/9 of the
//!   optimal number of sets (plus one), needs no search, and is stable:
//!   the same jobs give the same sets, so a re-pack moves jobs only when
//!   their sizes changed.
//! - A job is packed whole: all ranks of a multi-rank job are in the same
//!   set (its estimate is the whole job's memory), so they run together.
//! - A job larger than the capacity runs alone, in a set of its own: it
//!   pages even alone, and would make every partner page too.

use crate::model::JobId;

/// Share of the pool kept free as a safety margin: 1/16.
pub const MARGIN_DIVISOR: u64 = 16;
/// Added to each job's estimate for what is not its data.
pub const JOB_OVERHEAD: u64 = 4 << 20;

/// Memory a set may use in a pool of `pool` bytes.
pub fn capacity(pool: u64) -> u64 {
    pool - pool / MARGIN_DIVISOR
}

/// A job's memory estimate from its declared footprint and its measured
/// peak, either of which may be unknown.
pub fn estimate(declared: Option<u64>, measured_peak: Option<u64>) -> u64 {
    declared.unwrap_or(0).max(measured_peak.unwrap_or(0)) + JOB_OVERHEAD
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    pub job: JobId,
    /// The job's estimate (see [`estimate`]).
    pub bytes: u64,
}

/// Whether a job of `bytes` may join a set already holding `used` bytes
/// (`members` jobs): it fits, or the set is empty.
pub fn fits(used: u64, members: usize, bytes: u64, capacity: u64) -> bool {
    members == 0 || used.saturating_add(bytes) <= capacity
}

/// First fit decreasing. Sets come out largest first; each lists its jobs
/// in id order. Ties in size go by job id, so the result is deterministic.
pub fn pack(items: &[Item], capacity: u64) -> Vec<Vec<JobId>> {
    let mut order: Vec<Item> = items.to_vec();
    order.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.job.cmp(&b.job)));
    let mut sets: Vec<(u64, Vec<JobId>)> = Vec::new();
    for item in order {
        match sets
            .iter_mut()
            .find(|(used, jobs)| fits(*used, jobs.len(), item.bytes, capacity))
        {
            Some((used, jobs)) => {
                *used += item.bytes;
                jobs.push(item.job);
            }
            None => sets.push((item.bytes, vec![item.job])),
        }
    }
    sets.into_iter()
        .map(|(_, mut jobs)| {
            jobs.sort();
            jobs
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn items(sizes_mib: &[u64]) -> Vec<Item> {
        sizes_mib
            .iter()
            .enumerate()
            .map(|(i, m)| Item {
                job: JobId(i as u32),
                bytes: m * MIB,
            })
            .collect()
    }

    fn ids(sets: &[Vec<JobId>]) -> Vec<Vec<u32>> {
        sets.iter()
            .map(|s| s.iter().map(|j| j.0).collect())
            .collect()
    }

    #[test]
    fn capacity_keeps_a_sixteenth_free_and_estimates_add_the_overhead() {
        assert_eq!(capacity(1024 * MIB), 960 * MIB);
        assert_eq!(estimate(Some(200 * MIB), None), 204 * MIB);
        assert_eq!(estimate(Some(200 * MIB), Some(300 * MIB)), 304 * MIB);
        assert_eq!(estimate(None, Some(100 * MIB)), 104 * MIB);
        assert_eq!(estimate(None, None), JOB_OVERHEAD);
    }

    #[test]
    fn jobs_that_fit_together_make_one_set() {
        let sets = pack(&items(&[200, 200, 200, 200]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![0, 1, 2, 3]]);
    }

    #[test]
    fn the_margin_is_respected_exactly() {
        // 960 MiB capacity: 480 + 480 fits, 480 + 481 does not.
        let cap = capacity(1024 * MIB);
        assert_eq!(pack(&items(&[480, 480]), cap).len(), 1);
        assert_eq!(pack(&items(&[480, 481]), cap).len(), 2);
    }

    #[test]
    fn first_fit_decreasing_fills_sets_largest_first() {
        // 5 jobs of ~20% of a 1 GiB pool: four fit (4 x 204 = 816 <= 960).
        let sets = pack(&items(&[204; 5]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![0, 1, 2, 3], vec![4]]);
        // 500, 400, 300, 200, 100 MiB into 960: 500+400 leave no room for
        // even the 100, which joins 300+200.
        let sets = pack(&items(&[100, 500, 300, 400, 200]), 960 * MIB);
        assert_eq!(ids(&sets), [vec![1, 3], vec![0, 2, 4]]);
    }

    #[test]
    fn a_multi_rank_job_is_packed_whole() {
        // Job 1 has two ranks of 300 MiB: its estimate is the whole 600 MiB,
        // so it never shares a set with a 400 MiB job.
        let sets = pack(&items(&[400, 600]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![1], vec![0]]);
        assert!(sets
            .iter()
            .all(|s| s.iter().filter(|j| j.0 == 1).count() <= 1));
    }

    #[test]
    fn a_job_larger_than_the_pool_runs_alone() {
        let sets = pack(&items(&[2000, 10, 10]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![0], vec![1, 2]]);
        // Even a tiny job does not join it.
        assert!(!fits(2000 * MIB, 1, MIB, capacity(1024 * MIB)));
        assert!(fits(0, 0, 2000 * MIB, capacity(1024 * MIB)));
    }

    #[test]
    fn packing_is_deterministic_on_ties() {
        let a = pack(&items(&[300, 300, 300, 300]), 960 * MIB);
        let b = pack(&items(&[300, 300, 300, 300]), 960 * MIB);
        assert_eq!(a, b);
        assert_eq!(ids(&a), [vec![0, 1, 2], vec![3]]);
    }
}
