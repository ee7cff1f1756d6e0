//! The job table shared between the socket's threads and the node loop:
//! every job as journaled, the changes waiting to be, the cancellations
//! asked for, retention; and the error log that a full disk cannot flood.

use crate::journal::{Journal, Record};
use anyhow::Result;
use memgang_core::admission::{self, Capacity};
use memgang_core::text::printable;
use memgang_proto::{JobInfo, JobState};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub struct Shared {
    inner: Mutex<Inner>,
    wake: Condvar,
    pub state_dir: PathBuf,
}

/// Under [`Shared::lock`]: the node loop's admission works on it whole.
pub(super) struct Inner {
    /// Every job as last journaled: what clients are answered.
    pub(super) jobs: BTreeMap<u64, Record>,
    /// Changes that could not be journaled yet (a full disk): tried again
    /// every turn of the loop, and shown to no one until they are durable,
    /// so an answer is never taken back by a restart.
    pub(super) pending: BTreeMap<u64, Record>,
    next_id: u64,
    pub(super) journal: Journal,
    pub(super) cancels: Vec<u64>,
    /// Every cancellation asked for, so that a job killed or never
    /// started because of one ends `cancelled` whatever the node says.
    pub(super) cancelled: BTreeSet<u64>,
    pub(super) capacity: Capacity,
    woken: bool,
}

impl Shared {
    pub fn new(
        journal: Journal,
        jobs: BTreeMap<u64, Record>,
        state_dir: PathBuf,
        capacity: Capacity,
    ) -> Shared {
        let next_id = jobs
            .keys()
            .next_back()
            .map_or(1, |id| id + 1)
            .max(journal.next_id);
        Shared {
            inner: Mutex::new(Inner {
                jobs,
                pending: BTreeMap::new(),
                next_id,
                journal,
                cancels: Vec::new(),
                cancelled: BTreeSet::new(),
                capacity,
                woken: false,
            }),
            wake: Condvar::new(),
            state_dir,
        }
    }

    pub fn set_capacity(&self, cap: Capacity) {
        self.lock().capacity = cap;
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record a new job durably and return its id; a job that could never
    /// fit, or that cannot be journaled, is refused.
    pub fn submit(&self, make: impl FnOnce(u64, PathBuf) -> Record) -> Result<u64> {
        let mut g = self.lock();
        let id = g.next_id;
        let r = make(id, self.state_dir.join("jobs").join(id.to_string()));
        if let Some(msg) = admission::refuse(r.info.memory_bytes, &g.capacity) {
            anyhow::bail!("{msg}");
        }
        if let Err(e) = g.journal.append(&r) {
            log_limited(
                "submit",
                format!("refusing a submission: {}", printable(&format!("{e:#}"))),
            );
            return Err(e.context("the job was not submitted: memgangd cannot record it"));
        }
        g.next_id += 1;
        g.jobs.insert(id, r);
        g.woken = true;
        self.wake.notify_all();
        Ok(id)
    }

    pub fn list(&self, visible: impl Fn(&Record) -> bool) -> Vec<JobInfo> {
        let g = self.lock();
        g.jobs
            .values()
            .filter(|r| visible(r))
            .map(|r| r.info.clone())
            .collect()
    }

    pub fn get(&self, id: u64) -> Option<Record> {
        self.lock().jobs.get(&id).cloned()
    }

    pub fn cancel(&self, id: u64) {
        let mut g = self.lock();
        g.cancels.push(id);
        g.cancelled.insert(id);
        g.woken = true;
        self.wake.notify_all();
    }

    pub(super) fn cancel_asked(&self, id: u64) -> bool {
        self.lock().cancelled.contains(&id)
    }

    pub(super) fn idle_wait(&self, d: Duration) {
        let g = self.lock();
        let (mut g, _) = self
            .wake
            .wait_timeout_while(g, d, |g| !g.woken)
            .unwrap_or_else(|p| p.into_inner());
        g.woken = false;
    }

    /// Change a job and journal it if anything changed; the change is
    /// seen only once journaled (until then it waits in `pending`). An
    /// ended job never changes again.
    pub(super) fn update(&self, id: u64, f: impl FnOnce(&mut Record)) {
        let mut g = self.lock();
        let inner = &mut *g;
        let Some(cur) = inner.pending.get(&id).or_else(|| inner.jobs.get(&id)) else {
            return;
        };
        if cur.info.state.is_final() {
            return;
        }
        let mut r = cur.clone();
        f(&mut r);
        if Some(&r) == inner.jobs.get(&id) {
            inner.pending.remove(&id);
            return;
        }
        if Some(&r) == inner.pending.get(&id) {
            return;
        }
        inner.pending.insert(id, r);
        inner.flush();
    }

    /// Journal what waits, in order; what still cannot be written waits on.
    pub(super) fn flush(&self) {
        self.lock().flush();
    }

    /// Rewrite the journal if it has grown enough, or if jobs were
    /// forgotten.
    pub(super) fn compact(&self, forgot: bool) {
        let mut g = self.lock();
        let inner = &mut *g;
        if let Err(e) = inner.journal.maybe_compact(inner.jobs.values(), forgot) {
            log_limited(
                "compact",
                format!("compacting the journal: {}", printable(&format!("{e:#}"))),
            );
        }
    }

    /// Forget ended jobs beyond the retention (and their output); true if
    /// any was forgotten.
    pub(super) fn forget(&self, keep_for: Duration, keep_jobs: usize, now: f64) -> bool {
        let mut g = self.lock();
        let ended: Vec<(u64, f64)> = g
            .jobs
            .values()
            .filter(|r| r.info.state.is_final())
            .map(|r| (r.info.id, r.info.finished_unix_s.unwrap_or(0.0)))
            .collect();
        let surplus = ended.len().saturating_sub(keep_jobs);
        let old: Vec<u64> = ended
            .iter()
            .enumerate()
            .filter(|(i, (_, end))| *i < surplus || now - end > keep_for.as_secs_f64())
            .map(|(_, (id, _))| *id)
            .collect();
        for id in &old {
            if let Some(r) = g.jobs.remove(id) {
                g.cancelled.remove(id);
                // Only what the daemon made: state_dir/jobs/ID.
                if r.info.log_dir == self.state_dir.join("jobs").join(id.to_string()) {
                    let _ = std::fs::remove_dir_all(&r.info.log_dir);
                }
            }
        }
        !old.is_empty()
    }
}

impl Inner {
    fn flush(&mut self) {
        while let Some((&id, r)) = self.pending.first_key_value() {
            if let Err(e) = self.journal.append(r) {
                log_limited(
                    "journal",
                    format!(
                        "{} (job {id} and {} more changes wait to be recorded)",
                        printable(&format!("{e:#}")),
                        self.pending.len() - 1
                    ),
                );
                return;
            }
            let r = self.pending.remove(&id).expect("first entry");
            self.jobs.insert(id, r);
        }
    }
}

/// An ended job's record: its state and reason from how it ended.
pub(super) fn finish(
    r: &mut Record,
    code: Option<i32>,
    signal: Option<i32>,
    cancelled: bool,
    error: Option<String>,
) {
    r.info.exit_code = code;
    r.info.signal = signal;
    r.info.finished_unix_s = Some(unix_now());
    (r.info.state, r.info.reason) = if cancelled {
        (JobState::Cancelled, Some("cancelled".into()))
    } else if code == Some(0) {
        (JobState::Finished, None)
    } else if let Some(c) = code {
        (
            JobState::Failed,
            Some(error.unwrap_or_else(|| format!("exit code {c}"))),
        )
    } else if let Some(s) = signal {
        (JobState::Failed, Some(format!("killed by signal {s}")))
    } else {
        (JobState::Failed, error.or(Some("ended".into())))
    };
}

/// How often one kind of error is logged at most: a full disk fails every
/// turn of the loop (5 a second), and the log must not fill the disk too.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Log `msg` as an error unless one of its `kind` was logged in the last
/// [`LOG_EVERY`]; the next says how many were left out.
pub(super) fn log_limited(kind: &'static str, msg: String) {
    static LAST: Mutex<BTreeMap<&'static str, (Instant, u64)>> = Mutex::new(BTreeMap::new());
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    match last.get_mut(kind) {
        Some((at, left_out)) if now.duration_since(*at) < LOG_EVERY => *left_out += 1,
        entry => {
            let left_out = entry.map_or(0, |(_, n)| *n);
            if left_out > 0 {
                tracing::error!("{msg} ({left_out} more like it in the last minute not logged)");
            } else {
                tracing::error!("{msg}");
            }
            last.insert(kind, (now, 0));
        }
    }
}

/// True if the error chain holds a full file system (ENOSPC, EDQUOT): the
/// state directory's trouble, not the job's.
pub(super) fn disk_full(text: &str) -> bool {
    text.contains("No space left on device") || text.contains("Disk quota exceeded")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Retention by age and by count; what is forgotten loses its
    /// output, the rest and the jobs in progress stay.
    #[test]
    fn retention_forgets_old_and_surplus_ended_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = Journal::open(dir.path()).unwrap();
        let mut jobs = BTreeMap::new();
        let day = 86_400.0;
        for (id, state, ended_days_ago) in [
            (1, JobState::Finished, Some(9.0)),
            (2, JobState::Failed, Some(3.0)),
            (3, JobState::Running, None),
            (4, JobState::Cancelled, Some(2.0)),
            (5, JobState::Finished, Some(1.0)),
        ] {
            let mut r = crate::journal::tests::rec(id, state);
            r.info.finished_unix_s = ended_days_ago.map(|d: f64| 100.0 * day - d * day);
            r.info.log_dir = dir.path().join("jobs").join(id.to_string());
            std::fs::create_dir_all(&r.info.log_dir).unwrap();
            jobs.insert(id, r);
        }
        let cap = Capacity {
            pool_bytes: 1,
            swap_total_bytes: 0,
            swap_used_elsewhere_bytes: 0,
            swap_reserve_bytes: 0,
        };
        let shared = Shared::new(journal, jobs, dir.path().to_path_buf(), cap);
        let ids = |s: &Shared| s.list(|_| true).iter().map(|j| j.id).collect::<Vec<_>>();
        let week = Duration::from_secs(7 * 86_400);
        assert!(!shared.forget(week, 10, 1.0));
        assert!(shared.forget(week, 10, 100.0 * day));
        assert_eq!(ids(&shared), vec![2, 3, 4, 5]);
        assert!(!dir.path().join("jobs/1").exists());
        assert!(shared.forget(week, 2, 100.0 * day));
        assert_eq!(ids(&shared), vec![3, 4, 5]);
        assert!(dir.path().join("jobs/4").exists() && !dir.path().join("jobs/2").exists());
        assert!(shared.forget(week, 0, 100.0 * day));
        assert_eq!(ids(&shared), vec![3]);
        // Ids are not given again.
        assert_eq!(shared.lock().next_id, 6);
    }
}
