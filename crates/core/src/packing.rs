//! Packing jobs into sets that fit in memory together (paper 001 §IV:
//! hybrid scheduling co-schedules each set and gang-switches between them).
//!
//! A set is a placement of jobs on nodes: each job is on the nodes it
//! spans, and on every node the jobs of the set placed there fit in that
//! node's memory together. On one node (memgang's runtime today) that is
//! a set of jobs whose memory fits in the pool.
//!
//! The rule (its numbers and the fit itself are the capacity model's:
//! [`crate::capacity`]'s `set_*`):
//! - **Capacity** of a node in a set is its memory (the pool) less 1/16 of
//!   it. The margin holds what a job's estimate does not count (page
//!   tables, the kernel's per-CPU charge caches, the runtime's page-in of
//!   the next set, growth between two measurements); without it a set that
//!   "fits" exactly pages as soon as one job touches a page more.
//! - **A job's estimate** is the larger of its declared memory and its
//!   measured peak (resident anonymous memory), plus 4 MiB for what every
//!   process has besides its data (stack, libraries, page tables). A job
//!   declared too small is caught by its measured peak and re-packed. A job
//!   spanning `need` nodes holds estimate / `need` on each (rounded up).
//! - **A job is placed whole**: all its ranks are in the same set, on
//!   `need` distinct nodes that each have room for its share, so they run
//!   together. A job already started stays on its nodes (its memory is
//!   there), and so does one placed by its spec (it runs there already:
//!   taken back by a restarted controller); any other queued one goes to
//!   the nodes with room that hold the fewest jobs of the set (ties by
//!   node id), so that co-scheduled jobs share CPUs as little as the
//!   memory allows.
//! - **First fit decreasing**, generalised from one pool to nodes: the
//!   largest share per node first (then the widest job, then by id), each
//!   into the first set where it can be placed, else into a new set. On one
//!   node this is classic first fit decreasing: at most 11/9 of the optimal
//!   number of sets (plus one), no search, and stable: the same jobs give
//!   the same sets, so a re-pack moves jobs only when their sizes changed.
//!   On many nodes each node is a bin of its own and a job needs room in
//!   `need` of them; taking the biggest shares first keeps the argument
//!   that small jobs fill the gaps the big ones leave, node by node, and
//!   the cost stays one scan of the nodes per set tried.
//! - A job larger than a node's capacity runs alone **on that node** (in a
//!   set, no other job is placed there): it pages even alone, and would
//!   make every partner page too. Elsewhere in the cluster its set goes on
//!   filling; on one node it is a set of its own.

use crate::model::{JobId, NodeId};
use std::cell::RefCell;

pub use crate::capacity::{
    set_capacity as capacity, set_estimate as estimate, set_fits as fits, JOB_OVERHEAD,
    SET_MARGIN_DIVISOR as MARGIN_DIVISOR,
};

/// A job to pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub job: JobId,
    /// The whole job's estimate (see [`estimate`]).
    pub bytes: u64,
    /// Nodes it spans (at least 1).
    pub need: usize,
    /// The nodes it runs on, once started or placed by its spec
    /// (`JobSpec::placed`): it does not move.
    pub pinned: Option<Vec<NodeId>>,
}

impl Item {
    /// What it holds on each of its nodes.
    pub fn per_node(&self) -> u64 {
        let need = self.pinned.as_ref().map_or(self.need, Vec::len).max(1);
        self.bytes.div_ceil(need as u64)
    }
}

/// A job of a set, where it is placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub job: JobId,
    pub nodes: Vec<NodeId>,
    /// Bytes it holds on each of its nodes.
    pub per_node: u64,
}

/// Jobs placed on nodes, with what each node holds for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    jobs: Vec<Placed>,
    used: Vec<u64>,
    count: Vec<u32>,
    /// `levels[c]`: the nodes holding `c` of the set's jobs, as a bitset,
    /// so that finding the least loaded nodes with room takes the nodes
    /// level by level, lowest first, and stops at `need`: no sort of the
    /// cluster's nodes for each job placed.
    levels: Vec<Vec<u64>>,
    /// Sum over its jobs and their nodes of min(share, capacity): a set
    /// never holds more than the capacity of a node, by this measure, so
    /// that k sets can hold the jobs only if the sum is at most k times
    /// the cluster's capacity (see [`Set::clamped`]).
    clamped: u64,
    /// Built when the set turns a job away, dropped when it changes (see
    /// [`RoomIndex`]).
    free: RoomIndex,
}

/// A max tree over a set's nodes of the room each has for one more job
/// (`u64::MAX` on a node holding none of the set's jobs), leaves from
/// `len / 2` on: a set that cannot take a job is told so by counting the
/// nodes with room up to `need`, pruning full subtrees, rather than by a
/// scan of every node at every level. With many sets (an overloaded
/// cluster) an arrival tries most of them, and most have not changed since
/// they last turned one away. Built only then, after a scan that failed
/// (it costs about that scan): a set that keeps taking jobs never pays for
/// it. Not part of a set's value: sets are equal whatever their caches.
#[derive(Clone, Debug, Default)]
struct RoomIndex(RefCell<Option<Vec<u64>>>);

impl PartialEq for RoomIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RoomIndex {}

impl Set {
    /// An empty set over `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        let mut all = vec![u64::MAX; nodes.div_ceil(64)];
        if !nodes.is_multiple_of(64) {
            *all.last_mut().expect("nodes > 0") = (1u64 << (nodes % 64)) - 1;
        }
        Set {
            jobs: Vec::new(),
            used: vec![0; nodes],
            count: vec![0; nodes],
            levels: vec![all],
            clamped: 0,
            free: RoomIndex::default(),
        }
    }

    /// The room index of the set as it is now.
    fn build_index(&self, caps: &[u64]) {
        let nodes = self.used.len();
        let leaves = nodes.next_power_of_two();
        let mut free = vec![0; 2 * leaves];
        for n in 0..nodes {
            free[leaves + n] = if self.count[n] == 0 {
                u64::MAX
            } else {
                caps[n].saturating_sub(self.used[n])
            };
        }
        for k in (1..leaves).rev() {
            free[k] = free[2 * k].max(free[2 * k + 1]);
        }
        *self.free.0.borrow_mut() = Some(free);
    }

    /// Whether at least `need` nodes may have room for `bytes` more, by the
    /// index if there is one (`None` if not): never false when they do
    /// ([`Set::room`] then decides).
    fn enough_room(&self, bytes: u64, need: usize) -> Option<bool> {
        let index = self.free.0.borrow();
        let free = index.as_ref()?;
        let mut found = 0;
        // Depth first, left child on top: at most one pending right child
        // per level, so 64 levels is more than any cluster's tree.
        let mut stack = [0usize; 65];
        let (mut top, leaves) = (1, free.len() / 2);
        stack[0] = 1;
        while top > 0 {
            top -= 1;
            let k = stack[top];
            if free[k] < bytes {
                continue;
            }
            if k >= leaves {
                found += 1;
                if found >= need {
                    return Some(true);
                }
            } else {
                stack[top] = 2 * k + 1;
                stack[top + 1] = 2 * k;
                top += 2;
            }
        }
        Some(false)
    }

    /// Move node `n` from its level to the next one up or down.
    fn relevel(&mut self, n: usize, up: bool) {
        let (w, bit) = (n / 64, 1u64 << (n % 64));
        let c = self.count[n] as usize;
        self.levels[c][w] &= !bit;
        let c = if up { c + 1 } else { c - 1 };
        if self.levels.len() <= c {
            self.levels.push(vec![0; self.levels[0].len()]);
        }
        self.levels[c][w] |= bit;
        self.count[n] = c as u32;
    }

    /// Its jobs, in the order they joined (in id order after [`pack`]).
    pub fn jobs(&self) -> &[Placed] {
        &self.jobs
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Bytes the set's jobs hold on `node`.
    pub fn used(&self, node: NodeId) -> u64 {
        self.used[node.0 as usize]
    }

    /// A lower bound's ingredient: each job's share on each of its nodes,
    /// capped at that node's capacity, summed. Jobs that `k` sets hold
    /// together sum to at most `k` times the nodes' total capacity.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    fn fits_on(&self, n: usize, bytes: u64, caps: &[u64]) -> bool {
        fits(self.used[n], self.count[n] as usize, bytes, caps[n])
    }

    /// The nodes `item` would take in this set, if it can be placed: its
    /// own if started, else the `need` nodes with room holding fewest of
    /// the set's jobs (ties by id), in id order. One scan of the nodes.
    pub fn room(&self, item: &Item, caps: &[u64]) -> Option<Vec<NodeId>> {
        let bytes = item.per_node();
        if let Some(nodes) = &item.pinned {
            return nodes
                .iter()
                .all(|n| self.fits_on(n.0 as usize, bytes, caps))
                .then(|| nodes.clone());
        }
        let need = item.need.max(1);
        if self.enough_room(bytes, need) == Some(false) {
            return None;
        }
        let mut nodes = Vec::with_capacity(need);
        for level in &self.levels {
            for (w, word) in level.iter().enumerate() {
                let mut bits = *word;
                while bits != 0 {
                    let n = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if self.fits_on(n, bytes, caps) {
                        nodes.push(NodeId(n as u32));
                        if nodes.len() == need {
                            nodes.sort_unstable();
                            return Some(nodes);
                        }
                    }
                }
            }
        }
        if self.free.0.borrow().is_none() {
            self.build_index(caps);
        }
        None
    }

    /// Put `job` on `nodes`, holding `per_node` bytes on each.
    pub fn add(&mut self, job: JobId, nodes: Vec<NodeId>, per_node: u64, caps: &[u64]) {
        *self.free.0.get_mut() = None;
        for n in &nodes {
            let n = n.0 as usize;
            self.used[n] += per_node;
            self.relevel(n, true);
            self.clamped += per_node.min(caps[n]);
        }
        self.jobs.push(Placed {
            job,
            nodes,
            per_node,
        });
    }

    /// Place `item` if it can be; returns its nodes.
    pub fn place(&mut self, item: &Item, caps: &[u64]) -> Option<&[NodeId]> {
        let nodes = self.room(item, caps)?;
        self.add(item.job, nodes, item.per_node(), caps);
        self.jobs.last().map(|p| p.nodes.as_slice())
    }

    /// Take `job` out; returns where it was.
    pub fn remove(&mut self, job: JobId, caps: &[u64]) -> Option<Placed> {
        let k = self.jobs.iter().position(|p| p.job == job)?;
        let p = self.jobs.remove(k);
        *self.free.0.get_mut() = None;
        for n in &p.nodes {
            let n = n.0 as usize;
            self.used[n] -= p.per_node;
            self.relevel(n, false);
            self.clamped -= p.per_node.min(caps[n]);
        }
        Some(p)
    }

    /// Change what `job` holds per node (its estimate changed); returns
    /// whether one of its nodes now holds more than fits (with partners).
    pub fn resize(&mut self, job: JobId, per_node: u64, caps: &[u64]) -> bool {
        let Some(k) = self.jobs.iter().position(|p| p.job == job) else {
            return false;
        };
        let old = std::mem::replace(&mut self.jobs[k].per_node, per_node);
        *self.free.0.get_mut() = None;
        let nodes = std::mem::take(&mut self.jobs[k].nodes);
        let mut over = false;
        for n in &nodes {
            let n = n.0 as usize;
            self.used[n] = self.used[n] - old + per_node;
            self.clamped = self.clamped - old.min(caps[n]) + per_node.min(caps[n]);
            over |= self.count[n] > 1 && self.used[n] > caps[n];
        }
        self.jobs[k].nodes = nodes;
        over
    }
}

/// First fit decreasing over nodes (the rule above). Sets come out in the
/// order they were opened; each lists its jobs in id order. Ties go by job
/// id, so the result is deterministic. `caps` is each node's capacity.
pub fn pack(items: &[Item], caps: &[u64]) -> Vec<Set> {
    let mut order: Vec<&Item> = items.iter().collect();
    order.sort_by(|a, b| {
        b.per_node()
            .cmp(&a.per_node())
            .then(b.need.cmp(&a.need))
            .then(a.job.cmp(&b.job))
    });
    let mut sets: Vec<Set> = Vec::new();
    for item in order {
        if !sets.iter_mut().any(|s| s.place(item, caps).is_some()) {
            let mut set = Set::new(caps.len());
            set.place(item, caps)
                .expect("an empty set takes any job that spans at most the cluster");
            sets.push(set);
        }
    }
    for set in &mut sets {
        set.jobs.sort_by_key(|p| p.job);
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn one(job: u32, mib: u64) -> Item {
        Item {
            job: JobId(job),
            bytes: mib * MIB,
            need: 1,
            pinned: None,
        }
    }

    fn items(sizes_mib: &[u64]) -> Vec<Item> {
        sizes_mib
            .iter()
            .enumerate()
            .map(|(i, m)| one(i as u32, *m))
            .collect()
    }

    fn ids(sets: &[Set]) -> Vec<Vec<u32>> {
        sets.iter()
            .map(|s| s.jobs().iter().map(|p| p.job.0).collect())
            .collect()
    }

    /// First fit decreasing into one pool of `capacity` bytes.
    fn pack1(items: &[Item], capacity: u64) -> Vec<Set> {
        pack(items, &[capacity])
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
        let sets = pack1(&items(&[200, 200, 200, 200]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![0, 1, 2, 3]]);
    }

    #[test]
    fn the_margin_is_respected_exactly() {
        // 960 MiB capacity: 480 + 480 fits, 480 + 481 does not.
        let cap = capacity(1024 * MIB);
        assert_eq!(pack1(&items(&[480, 480]), cap).len(), 1);
        assert_eq!(pack1(&items(&[480, 481]), cap).len(), 2);
    }

    #[test]
    fn first_fit_decreasing_fills_sets_largest_first() {
        // 5 jobs of ~20% of a 1 GiB pool: four fit (4 x 204 = 816 <= 960).
        let sets = pack1(&items(&[204; 5]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![0, 1, 2, 3], vec![4]]);
        // 500, 400, 300, 200, 100 MiB into 960: 500+400 leave no room for
        // even the 100, which joins 300+200.
        let sets = pack1(&items(&[100, 500, 300, 400, 200]), 960 * MIB);
        assert_eq!(ids(&sets), [vec![1, 3], vec![0, 2, 4]]);
    }

    #[test]
    fn a_multi_rank_job_is_packed_whole() {
        // Job 1 has two ranks of 300 MiB on one node: its estimate is the
        // whole 600 MiB, so it never shares a set with a 400 MiB job.
        let sets = pack1(&items(&[400, 600]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![1], vec![0]]);
    }

    #[test]
    fn a_job_larger_than_the_pool_runs_alone() {
        let sets = pack1(&items(&[2000, 10, 10]), capacity(1024 * MIB));
        assert_eq!(ids(&sets), [vec![0], vec![1, 2]]);
        // Even a tiny job does not join it.
        assert!(!fits(2000 * MIB, 1, MIB, capacity(1024 * MIB)));
        assert!(fits(0, 0, 2000 * MIB, capacity(1024 * MIB)));
    }

    #[test]
    fn packing_is_deterministic_on_ties() {
        let a = pack1(&items(&[300, 300, 300, 300]), 960 * MIB);
        let b = pack1(&items(&[300, 300, 300, 300]), 960 * MIB);
        assert_eq!(a, b);
        assert_eq!(ids(&a), [vec![0, 1, 2], vec![3]]);
    }

    // Two nodes of 1 GiB: 960 MiB each in a set.

    fn two() -> Vec<u64> {
        vec![capacity(GIB); 2]
    }

    #[test]
    fn a_set_uses_the_memory_of_both_nodes() {
        // Four 400 MiB jobs: one node holds two, so one set holds all four
        // (one node would need two sets).
        let sets = pack(&items(&[400, 400, 400, 400]), &two());
        assert_eq!(ids(&sets), [vec![0, 1, 2, 3]]);
        let s = &sets[0];
        assert_eq!(s.used(NodeId(0)), 800 * MIB);
        assert_eq!(s.used(NodeId(1)), 800 * MIB);
        // Spread: the second job goes to the node holding fewer.
        let nodes: Vec<u32> = s.jobs().iter().map(|p| p.nodes[0].0).collect();
        assert_eq!(nodes, [0, 1, 0, 1]);
        assert_eq!(pack1(&items(&[400, 400, 400, 400]), capacity(GIB)).len(), 2);
    }

    #[test]
    fn a_two_node_job_takes_room_on_both() {
        // Job 0 spans both nodes with 1200 MiB: 600 on each. A 400 MiB job
        // then fits on neither node beside it; a 300 MiB one does.
        let wide = Item {
            job: JobId(0),
            bytes: 1200 * MIB,
            need: 2,
            pinned: None,
        };
        let mut set = Set::new(2);
        let nodes = set.place(&wide, &two()).map(<[NodeId]>::to_vec);
        assert_eq!(nodes, Some(vec![NodeId(0), NodeId(1)]));
        assert_eq!(set.used(NodeId(0)), 600 * MIB);
        assert_eq!(set.used(NodeId(1)), 600 * MIB);
        assert!(set.room(&one(1, 400), &two()).is_none());
        assert_eq!(set.room(&one(2, 300), &two()), Some(vec![NodeId(0)]));
        // Packed with them: the wide job and the 300 in one set, the 400
        // in the next.
        let sets = pack(&[wide, one(1, 400), one(2, 300)], &two());
        assert_eq!(ids(&sets), [vec![0, 2], vec![1]]);
        // Removed, it frees both nodes.
        let mut set = sets[0].clone();
        let p = set.remove(JobId(0), &two()).expect("placed");
        assert_eq!(p.nodes, [NodeId(0), NodeId(1)]);
        assert_eq!(set.used(NodeId(0)) + set.used(NodeId(1)), 300 * MIB);
    }

    #[test]
    fn a_started_job_stays_on_its_nodes() {
        // Job 0 runs on node 1; job 1 (700) is there too in another set.
        // Packed afresh, job 0 is placed on node 1 again, and job 1 (not
        // started) goes to node 0, beside nothing.
        let started = Item {
            pinned: Some(vec![NodeId(1)]),
            ..one(0, 500)
        };
        let sets = pack(&[started.clone(), one(1, 700)], &two());
        assert_eq!(ids(&sets), [vec![0, 1]]);
        assert_eq!(sets[0].jobs()[0].nodes, [NodeId(1)]);
        assert_eq!(sets[0].jobs()[1].nodes, [NodeId(0)]);
        // Two started on the same node that do not fit together: two sets.
        let other = Item {
            pinned: Some(vec![NodeId(1)]),
            ..one(1, 700)
        };
        assert_eq!(pack(&[started, other], &two()).len(), 2);
    }

    #[test]
    fn a_job_larger_than_a_node_is_alone_on_it_not_in_the_set() {
        // 2000 MiB on one node: nothing joins it there, but the other node
        // of the same set still takes jobs.
        let sets = pack(&items(&[2000, 10, 10]), &two());
        assert_eq!(ids(&sets), [vec![0, 1, 2]]);
        let s = &sets[0];
        assert_eq!(s.used(NodeId(0)), 2000 * MIB);
        assert_eq!(s.used(NodeId(1)), 20 * MIB);
    }

    #[test]
    fn the_room_index_never_turns_away_a_job_that_fits() {
        // Random sets over 37 nodes of varied capacity; the index's answer
        // against a count of the nodes where the job fits.
        let caps: Vec<u64> = (0..37).map(|n| (500 + 37 * n as u64 % 700) * MIB).collect();
        let mut x: u64 = 7;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for round in 0..200 {
            let mut set = Set::new(caps.len());
            for j in 0..next(40) {
                let item = Item {
                    job: JobId(j as u32),
                    bytes: (1 + next(600)) * MIB,
                    need: 1 + next(6) as usize,
                    pinned: None,
                };
                set.place(&item, &caps);
                if next(3) == 0 && j > 0 {
                    set.remove(JobId(next(j) as u32), &caps);
                }
            }
            let bytes = (1 + next(900)) * MIB;
            let fitting = (0..caps.len())
                .filter(|n| set.fits_on(*n, bytes, &caps))
                .count();
            assert_eq!(
                set.enough_room(bytes, 1),
                None,
                "no index before a job is turned away"
            );
            set.build_index(&caps);
            for need in 1..=caps.len() {
                assert_eq!(
                    set.enough_room(bytes, need),
                    Some(fitting >= need),
                    "round {round}: {fitting} nodes fit, need {need}"
                );
            }
            // A job turned away builds it; a change drops it.
            let mut set = set.clone();
            *set.free.0.get_mut() = None;
            let wide = Item {
                job: JobId(1000),
                bytes: u64::MAX / 2,
                need: caps.len(),
                pinned: None,
            };
            if set.room(&wide, &caps).is_none() {
                assert!(set.enough_room(1, 1).is_some());
                if let Some(p) = set.jobs().first().cloned() {
                    set.remove(p.job, &caps);
                    assert_eq!(set.enough_room(1, 1), None);
                }
            }
        }
    }

    #[test]
    fn resizing_a_job_reports_an_overflow() {
        let caps = [capacity(GIB)];
        let mut sets = pack1(&items(&[300, 300]), caps[0]);
        assert!(!sets[0].resize(JobId(1), 400 * MIB, &caps));
        assert_eq!(sets[0].used(NodeId(0)), 700 * MIB);
        assert!(sets[0].resize(JobId(1), 800 * MIB, &caps));
        // Alone it never overflows: it runs alone.
        let mut alone = pack1(&items(&[300]), caps[0]);
        assert!(!alone[0].resize(JobId(0), 2000 * MIB, &caps));
    }
}
