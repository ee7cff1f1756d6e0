//! The jobs' predicted ends: a binary heap that knows where each job's entry
//! is, so that a new prediction replaces the old one and a suspension takes
//! it out. With a plain heap the old predictions stayed in as stale entries
//! until their time came: a set switch of hundreds of jobs left hundreds
//! behind, and the heap grew with the switches rather than with the jobs
//! running.

use crate::window::IdWindow;
use memgang_core::{JobId, Time};

/// Entries are ordered by (time, sequence number): the sequence number is
/// the engine's, shared with its other events, so ties go as they did with
/// a single heap.
pub(crate) struct FinishQueue {
    heap: Vec<(Time, u64, JobId)>,
    pos: Positions,
}

impl FinishQueue {
    pub(crate) fn new() -> Self {
        FinishQueue {
            heap: Vec::new(),
            pos: Positions::default(),
        }
    }

    pub(crate) fn peek(&self) -> Option<(Time, u64, JobId)> {
        self.heap.first().copied()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Set `job`'s end to `at` (sequence `seq`), replacing any it had.
    pub(crate) fn set(&mut self, job: JobId, at: Time, seq: u64) {
        let key = (at, seq, job);
        match self.pos.get(job) {
            Some(k) => {
                let up = key < self.heap[k];
                self.heap[k] = key;
                if up {
                    self.sift_up(k);
                } else {
                    self.sift_down(k);
                }
            }
            None => {
                self.heap.push(key);
                let k = self.heap.len() - 1;
                self.pos.set(job, k);
                self.sift_up(k);
            }
        }
    }

    /// Take `job`'s end out, if it has one.
    pub(crate) fn remove(&mut self, job: JobId) {
        let Some(k) = self.pos.take(job) else {
            return;
        };
        let last = self.heap.pop().expect("an entry");
        if k < self.heap.len() {
            let up = last < self.heap[k];
            self.heap[k] = last;
            self.pos.set(last.2, k);
            if up {
                self.sift_up(k);
            } else {
                self.sift_down(k);
            }
        }
    }

    /// `job` has ended and will not be given an end again: its place in
    /// the window of ids can go once the jobs before it have gone too.
    pub(crate) fn retire(&mut self, job: JobId) {
        self.remove(job);
        self.pos.retire(job);
    }

    pub(crate) fn pop(&mut self) -> Option<(Time, u64, JobId)> {
        let top = self.peek()?;
        self.remove(top.2);
        Some(top)
    }

    fn sift_up(&mut self, mut k: usize) {
        let item = self.heap[k];
        while k > 0 {
            let parent = (k - 1) / 2;
            if self.heap[parent] <= item {
                break;
            }
            self.heap[k] = self.heap[parent];
            self.pos.set(self.heap[k].2, k);
            k = parent;
        }
        self.heap[k] = item;
        self.pos.set(item.2, k);
    }

    fn sift_down(&mut self, mut k: usize) {
        let item = self.heap[k];
        let n = self.heap.len();
        loop {
            let mut child = 2 * k + 1;
            if child >= n {
                break;
            }
            if child + 1 < n && self.heap[child + 1] < self.heap[child] {
                child += 1;
            }
            if item <= self.heap[child] {
                break;
            }
            self.heap[k] = self.heap[child];
            self.pos.set(self.heap[k].2, k);
            k = child;
        }
        self.heap[k] = item;
        self.pos.set(item.2, k);
    }
}

/// Each job's place in the heap, by id, in an [`IdWindow`]. A sift moves
/// an entry per level and records its place each time: as a hash map
/// insert that was a tenth of an overloaded gang run's instructions. The
/// window is cut only at retired jobs: cut where the running jobs' ids
/// begin, it grew back at the next switch to an older row, by thousands of
/// entries each time (three times slower in all).
#[derive(Default)]
struct Positions(IdWindow);

impl Positions {
    fn get(&self, job: JobId) -> Option<usize> {
        self.0.get(job).map(|p| p as usize)
    }

    fn set(&mut self, job: JobId, k: usize) {
        self.0.set(job, k as u32, false);
    }

    /// Its place, forgotten.
    fn take(&mut self, job: JobId) -> Option<usize> {
        self.0.take(job).map(|p| p as usize)
    }

    fn retire(&mut self, job: JobId) {
        self.0.retire(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::time::Duration;

    fn t(s: u64) -> Time {
        Time::ZERO + Duration::from_secs(s)
    }

    #[test]
    fn pops_in_order_after_replacements_and_removals() {
        let mut q = FinishQueue::new();
        let mut seq = 0;
        let mut expect: HashMap<u32, (Time, u64)> = HashMap::new();
        // A fixed pseudo-random walk of sets and removals over 50 jobs.
        let mut x: u64 = 12345;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let job = (x >> 33) as u32 % 50;
            seq += 1;
            if (x >> 20).is_multiple_of(4) {
                q.remove(JobId(job));
                expect.remove(&job);
            } else {
                let at = t((x >> 40) % 100);
                q.set(JobId(job), at, seq);
                expect.insert(job, (at, seq));
            }
            assert_eq!(q.len(), expect.len());
        }
        let mut want: Vec<(Time, u64, JobId)> = expect
            .into_iter()
            .map(|(j, (at, s))| (at, s, JobId(j)))
            .collect();
        want.sort();
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(got, want);
    }
}
