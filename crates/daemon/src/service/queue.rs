//! The queue's order and limits in the node loop: dependencies (a job
//! waits for its `--after` jobs; one that can never start ends
//! `cancelled` with the reason), arrays' `%N` limits, fair turns between
//! users (the core's [`admission::fair_order`]), and time limits counted
//! on running time only (a frozen job's clock stops).
//!
//! [`admission::fair_order`]: memgang_core::admission::fair_order

use super::store::{unix_now, Inner};
use super::Service;
use crate::journal::Record;
use memgang_proto::{DependencyKind, JobState};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Running time is recorded in the journal this often while a job runs
/// (and at its end): a daemon killed with -9 loses at most this much of
/// a job's count.
const SAVE_USED_EVERY: Duration = Duration::from_secs(30);

/// Why a queued job cannot start yet, or never can.
pub(super) enum Blocked {
    Wait(String),
    Never(String),
}

/// Whether `r`'s dependencies let it start now.
pub(super) fn dependencies(r: &Record, jobs: &BTreeMap<u64, Record>) -> Option<Blocked> {
    let mut waits = Vec::new();
    for d in &r.info.queue.after {
        let state = jobs.get(&d.id).map(|j| j.info.state);
        match (d.kind, state) {
            (_, Some(s)) if !s.is_final() => waits.push(d.id.to_string()),
            (DependencyKind::Afterany, _) | (DependencyKind::Afterok, Some(JobState::Finished)) => {
            }
            (DependencyKind::Afterok, s) => {
                let how = s.map_or("and was forgotten".into(), |s| s.name().to_string());
                return Some(Blocked::Never(format!(
                    "dependency never satisfied: job {} ended {how}, and it waited for afterok:{}",
                    d.id, d.id
                )));
            }
        }
    }
    (!waits.is_empty()).then(|| {
        Blocked::Wait(format!(
            "waits for job(s) {} to end (--after)",
            waits.join(",")
        ))
    })
}

/// Under the lock: the queued jobs that may start now (not cancelled, not
/// waiting for a dependency or for their array's `%N`), as `(id, declared
/// bytes)` in fair turns between users ([`fair_order`]); each job that
/// waits is given why.
///
/// [`fair_order`]: memgang_core::admission::fair_order
pub(super) fn startable(inner: &mut Inner) -> Vec<(u64, u64)> {
    let mut array_running = array_running(&inner.jobs);
    let mut waits: Vec<(u64, String)> = Vec::new();
    let mut startable: Vec<(u64, u32)> = Vec::new();
    for r in inner.jobs.values() {
        let id = r.info.id;
        if r.admitted
            || r.info.state != JobState::Queued
            || inner.cancelled.contains(&id)
            || inner.pending.contains_key(&id)
        {
            continue;
        }
        if let Some(Blocked::Wait(why) | Blocked::Never(why)) = dependencies(r, &inner.jobs) {
            waits.push((id, why));
            continue;
        }
        if let (Some(a), Some(limit)) = (r.info.queue.array_id, r.info.queue.array_limit) {
            let n = array_running.entry(a).or_default();
            if *n >= limit {
                waits.push((
                    id,
                    format!(
                        "waits: array {a} runs {limit} task(s) at once, its limit \
                         (--array ...%{limit})"
                    ),
                ));
                continue;
            }
            // Counted as if it starts: admission may hold it back, but
            // never more than the limit start in one turn.
            *n += 1;
        }
        startable.push((id, r.info.uid));
    }
    for (id, why) in waits {
        if let Some(r) = inner.jobs.get_mut(&id) {
            r.info.reason = Some(why);
        }
    }
    let order = memgang_core::admission::fair_order(
        &startable,
        &running_per_user(&inner.jobs),
        &last_served(&inner.jobs),
    );
    order
        .into_iter()
        .map(|id| (id, inner.jobs[&id].info.memory_bytes))
        .collect()
}

/// Running tasks of each array.
pub(super) fn array_running(jobs: &BTreeMap<u64, Record>) -> BTreeMap<u64, u32> {
    let mut n = BTreeMap::new();
    for r in jobs.values() {
        if let (Some(a), true) = (
            r.info.queue.array_id,
            r.admitted && !r.info.state.is_final(),
        ) {
            *n.entry(a).or_default() += 1;
        }
    }
    n
}

/// Each user's admitted jobs in progress, for [`fair_order`].
///
/// [`fair_order`]: memgang_core::admission::fair_order
pub(super) fn running_per_user(jobs: &BTreeMap<u64, Record>) -> Vec<(u32, usize)> {
    let mut n: BTreeMap<u32, usize> = BTreeMap::new();
    for r in jobs
        .values()
        .filter(|r| r.admitted && !r.info.state.is_final())
    {
        *n.entry(r.info.uid).or_default() += 1;
    }
    n.into_iter().collect()
}

/// Each user's last start (ms since the epoch; a job admitted and not
/// started yet counts as now), for [`fair_order`]'s ties: the user
/// served least recently goes first.
///
/// [`fair_order`]: memgang_core::admission::fair_order
pub(super) fn last_served(jobs: &BTreeMap<u64, Record>) -> Vec<(u32, u64)> {
    let now = unix_now();
    jobs.values()
        .filter(|r| r.admitted)
        .map(|r| {
            let t = r.info.started_unix_s.unwrap_or(now);
            (r.info.uid, (t * 1000.0) as u64)
        })
        .collect()
}

/// Each running job's clock: time counted while the node runs it, never
/// while it is frozen or queued.
#[derive(Default)]
pub(super) struct Clocks {
    used: HashMap<u64, f64>,
    last: Option<Instant>,
    next_save: Option<Instant>,
    /// Stopped at their limit: they end `timeout`.
    pub(super) timed_out: BTreeSet<u64>,
}

impl Service {
    /// Queued jobs whose dependencies can never be met end `cancelled`,
    /// with the reason.
    pub(super) fn drop_unsatisfiable(&self) {
        let never: Vec<(u64, String)> = {
            let g = self.shared.lock();
            g.jobs
                .values()
                .filter(|r| !r.admitted && r.info.state == JobState::Queued)
                .filter_map(|r| match dependencies(r, &g.jobs) {
                    Some(Blocked::Never(why)) => Some((r.info.id, why)),
                    _ => None,
                })
                .collect()
        };
        for (id, why) in never {
            self.shared.update(id, |r| {
                if !r.admitted {
                    r.info.state = JobState::Cancelled;
                    r.info.reason = Some(why);
                    r.info.finished_unix_s = Some(unix_now());
                }
            });
        }
    }

    /// Count running time since the last turn; a job at its limit is
    /// cancelled on the node and marked to end `timeout`. `running` is
    /// each job the node runs now (not frozen), with its node id.
    pub(super) fn tick<J: Copy>(
        &self,
        clocks: &mut Clocks,
        running: &[(u64, J)],
        mut stop: impl FnMut(J),
    ) {
        let now = Instant::now();
        let dt = clocks
            .last
            .map_or(0.0, |l| now.saturating_duration_since(l).as_secs_f64());
        clocks.last = Some(now);
        let save = clocks.next_save.is_none_or(|t| now >= t);
        if save {
            clocks.next_save = Some(now + SAVE_USED_EVERY);
        }
        for &(id, jid) in running {
            let Some(r) = self.shared.get(id) else {
                continue;
            };
            let used = clocks.used.entry(id).or_insert(r.info.queue.used_s);
            *used += dt;
            let used = *used;
            if save {
                self.shared.update(id, |r| r.info.queue.used_s = used);
            }
            if let Some(limit) = r.info.queue.time_limit_s {
                if used >= limit as f64 && clocks.timed_out.insert(id) {
                    tracing::info!("job {id} reached its time limit of {limit} s: stopped");
                    stop(jid);
                }
            }
        }
    }

    /// A job that ended: its last count recorded in its end, and its
    /// state `timeout` if its limit stopped it.
    pub(super) fn end_clock(&self, clocks: &mut Clocks, r: &mut Record) {
        let id = r.info.id;
        if let Some(u) = clocks.used.remove(&id) {
            r.info.queue.used_s = u;
        }
        if clocks.timed_out.remove(&id) && r.info.state == JobState::Cancelled {
            r.info.state = JobState::Timeout;
            r.info.reason = Some(format!(
                "reached its time limit of {} s of running time",
                r.info.queue.time_limit_s.unwrap_or(0)
            ));
        }
    }
}
