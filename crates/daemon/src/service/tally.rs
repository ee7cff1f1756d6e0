//! What the daemon counts as it runs, for the metrics: counters that only
//! rise within one run (jobs submitted, jobs completed by how they ended),
//! and histograms with fixed buckets (queue waits here; switch durations
//! are counted from the node's record of its switches). The job table
//! keeps a [`Tally`] and counts each change as it becomes durable, so a
//! count is never of something a restart would take back.

use memgang_proto::{JobInfo, JobState};

/// Switch durations, s. A switch pages the outgoing jobs out and the
/// incoming back at about 1 GB/s each way here (docs/realapps.md): a job
/// of a few MiB takes 0.1 s (the freezes and the bookkeeping), 1 GiB one
/// to a few seconds, a full pool of tens of GiB tens of seconds, and a
/// slow swap device or a switch left to the kernel's reclaim (`lru`)
/// minutes. Buckets about 2.5x apart, from 0.1 s to 5 min, tell these
/// apart; beyond 5 min is a switch to look into, whatever its length.
pub const SWITCH_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Queue waits (submission to start), s: a job that fits starts within a
/// second (the node loop's turn); one that waits for memory waits for
/// other jobs to end, minutes to days. Buckets at the units an operator
/// thinks in: 1 s, 10 s, 1 min, 5 min, 15 min, 1 h, 4 h, 12 h, 1 day,
/// 3 days, 1 week (the default `keep_finished_for`).
pub const QUEUE_WAIT_BUCKETS: &[f64] = &[
    1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 43200.0, 86400.0, 259200.0, 604800.0,
];

/// A Prometheus histogram with fixed upper bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative), the last past every bound.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// Count `v` (a negative value, a clock stepped back, as 0).
    pub fn observe(&mut self, v: f64) {
        let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
        let i = self
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Each bucket's upper bound (None: +Inf) and the observations at or
    /// below it, as the text format's `_bucket` series carry them.
    pub fn cumulative(&self) -> Vec<(Option<f64>, u64)> {
        let mut total = 0;
        (self.counts.iter().enumerate())
            .map(|(i, n)| {
                total += n;
                (self.bounds.get(i).copied(), total)
            })
            .collect()
    }
}

/// The final states, in the order of [`Tally::completed`].
pub const FINAL: [JobState; 3] = [JobState::Finished, JobState::Failed, JobState::Cancelled];

/// The counts a job table keeps since the daemon started.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    pub submitted: u64,
    /// Jobs that ended, by [`FINAL`] state.
    pub completed: [u64; 3],
    /// Submission to start of each job that started.
    pub queue_wait: Histogram,
    /// Each switch's duration, counted once: the node lets go of the
    /// switches of forgotten jobs, so the histogram cannot be made anew
    /// from what the node still holds.
    pub switch_seconds: Histogram,
    /// The start (node time, s) of the last switch counted.
    switches_until: f64,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            submitted: 0,
            completed: [0; 3],
            queue_wait: Histogram::new(QUEUE_WAIT_BUCKETS),
            switch_seconds: Histogram::new(SWITCH_BUCKETS),
            switches_until: f64::NEG_INFINITY,
        }
    }
}

impl Tally {
    /// The node's switches (in order of time, some perhaps let go of):
    /// those not counted yet are. Called every turn: a binary search finds
    /// the first new one, rather than a walk of every switch held.
    pub fn switches(&mut self, switches: &[memgang_results::Switch]) {
        let new = switches.partition_point(|s| s.at_s <= self.switches_until);
        for s in &switches[new..] {
            self.switch_seconds.observe(s.took_s);
            self.switches_until = s.at_s;
        }
    }

    /// A job's record as it becomes durable: `before` is what was recorded
    /// (None: the job was just submitted).
    pub fn changed(&mut self, before: Option<&JobInfo>, after: &JobInfo) {
        let Some(before) = before else {
            self.submitted += 1;
            return;
        };
        if before.started_unix_s.is_none() {
            if let Some(start) = after.started_unix_s {
                self.queue_wait.observe(start - after.submitted_unix_s);
            }
        }
        if !before.state.is_final() {
            if let Some(i) = FINAL.iter().position(|s| *s == after.state) {
                self.completed[i] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::tests::rec;

    #[test]
    fn histograms_count_into_their_buckets_cumulatively() {
        let mut h = Histogram::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 3.0, 11.0, -2.0, f64::NAN] {
            h.observe(v);
        }
        assert_eq!(
            h.cumulative(),
            vec![(Some(1.0), 4), (Some(10.0), 5), (None, 6)]
        );
        assert_eq!(h.count(), 6);
        assert_eq!(h.sum(), 15.5);
    }

    #[test]
    fn a_job_counts_once_when_submitted_started_and_ended() {
        let mut t = Tally::default();
        let mut j = rec(1, JobState::Queued).info;
        j.submitted_unix_s = 100.0;
        j.started_unix_s = None;
        t.changed(None, &j);
        let mut started = j.clone();
        started.state = JobState::Running;
        started.started_unix_s = Some(130.0);
        t.changed(Some(&j), &started);
        // Suspended and resumed: no second wait.
        let mut suspended = started.clone();
        suspended.state = JobState::Suspended;
        t.changed(Some(&started), &suspended);
        t.changed(Some(&suspended), &started);
        let mut ended = started.clone();
        ended.state = JobState::Failed;
        t.changed(Some(&started), &ended);
        // An ended job written again (it never changes, but a replay
        // could): not counted twice.
        t.changed(Some(&ended), &ended);
        assert_eq!(t.submitted, 1);
        assert_eq!(t.completed, [0, 1, 0]);
        assert_eq!(t.queue_wait.count(), 1);
        assert_eq!(t.queue_wait.sum(), 30.0);
    }

    #[test]
    fn each_switch_counts_once_also_after_older_ones_are_let_go() {
        let switch = |at_s: f64, took_s: f64| -> memgang_results::Switch {
            serde_json::from_value(serde_json::json!({
                "at_s": at_s, "took_s": took_s, "suspended": [], "resumed": []
            }))
            .unwrap()
        };
        let mut t = Tally::default();
        let held = vec![switch(1.0, 0.5), switch(2.0, 1.5)];
        t.switches(&held);
        t.switches(&held);
        assert_eq!(t.switch_seconds.count(), 2);
        // The first let go of (its job ended), a third one new.
        t.switches(&[switch(2.0, 1.5), switch(3.0, 2.0)]);
        assert_eq!(t.switch_seconds.count(), 3);
        assert_eq!(t.switch_seconds.sum(), 4.0);
        t.switches(&[]);
        assert_eq!(t.switch_seconds.count(), 3);
    }
}
