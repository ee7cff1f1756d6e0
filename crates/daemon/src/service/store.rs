//! The job table shared between the socket's threads and the node loop:
//! every job as journaled, the changes waiting to be, the cancellations
//! asked for, retention; and the error log that a full disk cannot flood.

use super::published::Published;
use super::tally::Tally;
use crate::config::Budgets;
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
    /// What one user's requests may make the daemon hold and spend.
    pub budgets: Budgets,
    /// The node as the loop last published it, for `memgang top`: a lock
    /// of its own, so that a `top` never waits for admission.
    published: Mutex<Option<Published>>,
}

/// How many ended jobs are kept, and how long ([`Shared::forget`]).
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    pub keep_for: Duration,
    pub keep_jobs: usize,
    pub keep_per_user: usize,
    /// Bytes of one user's ended jobs kept ([`record_bytes`]).
    pub user_bytes: u64,
}

/// What a job's record holds of what its user wrote, in bytes: its name,
/// command, working directory, output files, dependencies, environment
/// and reason, and a fixed part for the rest (ids, times, its time
/// account). What the budgets count.
pub fn record_bytes(r: &Record) -> u64 {
    let i = &r.info;
    let strings = i.name.len()
        + i.command.iter().map(|a| a.len() + 1).sum::<usize>()
        + i.cwd.as_os_str().len()
        + i.log_dir.as_os_str().len()
        + i.reason.as_ref().map_or(0, String::len)
        + [&i.queue.stdout, &i.queue.stderr]
            .iter()
            .map(|p| p.as_ref().map_or(0, |p| p.as_os_str().len()))
            .sum::<usize>()
        + i.queue.after.len() * 16
        + r.env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>();
    let fixed = 256 + if i.account.is_some() { 2048 } else { 0 };
    (strings + fixed) as u64
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
    /// Jobs the daemon stopped itself (output past `max_job_output`), with
    /// why: they end failed with it, not `cancelled`.
    pub(super) stopped: BTreeMap<u64, String>,
    pub(super) capacity: Capacity,
    /// The metrics' counts since the daemon started.
    pub(super) tally: Tally,
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
                stopped: BTreeMap::new(),
                capacity,
                tally: Tally::default(),
                woken: false,
            }),
            wake: Condvar::new(),
            state_dir,
            budgets: Budgets::default(),
            published: Mutex::new(None),
        }
    }

    pub fn with_budgets(mut self, budgets: Budgets) -> Shared {
        self.budgets = budgets;
        self
    }

    pub fn set_capacity(&self, cap: Capacity) {
        self.lock().capacity = cap;
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn published(&self) -> MutexGuard<'_, Option<Published>> {
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record `n` new jobs (an array's tasks; else one) durably, with
    /// ids in a row, and return the first id. A submission that could
    /// never fit, or whose `n` jobs would pass their user's budgets, is
    /// refused whole; one that cannot be journaled is refused from the
    /// task that could not be (the tasks before it kept, and said so).
    pub fn submit(
        &self,
        n: usize,
        mut make: impl FnMut(u64, usize, PathBuf) -> Result<Record>,
    ) -> Result<u64> {
        let mut g = self.lock();
        let first = g.next_id;
        for k in 0..n {
            let id = g.next_id;
            let r = match make(id, k, self.state_dir.join("jobs").join(id.to_string())) {
                Ok(r) => r,
                Err(e) if k > 0 => return Err(e.context(kept(first, id))),
                Err(e) => return Err(e),
            };
            if k == 0 {
                // The tasks differ only in their index: the first speaks
                // for all.
                if let Some(msg) = admission::refuse(r.info.memory_bytes, &g.capacity) {
                    anyhow::bail!("{msg}");
                }
                if let Some(msg) = g.over_budget(&r, n, &self.budgets) {
                    anyhow::bail!("{msg}");
                }
            }
            if let Err(e) = g.journal.append(&r) {
                log_limited(
                    "submit",
                    format!("refusing a submission: {}", printable(&format!("{e:#}"))),
                );
                let e = e.context("the job was not submitted: memgangd cannot record it");
                return Err(if k > 0 { e.context(kept(first, id)) } else { e });
            }
            g.next_id += 1;
            g.tally.changed(None, &r.info);
            g.jobs.insert(id, r);
        }
        g.woken = true;
        self.wake.notify_all();
        Ok(first)
    }

    pub fn list(&self, visible: impl Fn(&Record) -> bool) -> Vec<JobInfo> {
        let g = self.lock();
        g.jobs
            .values()
            .filter(|r| visible(r))
            .map(|r| r.info.clone())
            .collect()
    }

    /// One page of the jobs `visible` keeps, in id order, after job
    /// `after`: jobs until their JSON reaches `max_bytes` (at least one),
    /// and the id to ask after next if more are left. What one request
    /// costs the daemon is a page, whatever the number of jobs.
    pub fn list_page(
        &self,
        visible: impl Fn(&Record) -> bool,
        after: Option<u64>,
        max_bytes: u64,
    ) -> (Vec<JobInfo>, Option<u64>) {
        let g = self.lock();
        let from = after.map_or(0, |a| a.saturating_add(1));
        let mut page = Vec::new();
        let mut bytes = 0u64;
        for r in g.jobs.range(from..).map(|(_, r)| r).filter(|r| visible(r)) {
            if bytes >= max_bytes {
                let last = page.last().map(|j: &JobInfo| j.id);
                return (page, last);
            }
            bytes += serde_json::to_vec(&r.info).map_or(0, |v| v.len() as u64);
            page.push(r.info.clone());
        }
        (page, None)
    }

    /// Every job kept, without what its user wrote (name, command,
    /// directories, reason cleared) and with its time account only if it
    /// ended within `recent_s` of `now`: what the metrics count, at a
    /// small fixed size per job.
    pub fn summaries(&self, now: f64, recent_s: f64) -> Vec<JobInfo> {
        let g = self.lock();
        g.jobs
            .values()
            .map(|r| {
                let recent = (r.info.finished_unix_s).is_some_and(|t| now - t <= recent_s);
                r.info.summary(recent)
            })
            .collect()
    }

    /// The metrics' counts so far.
    pub(super) fn tally(&self) -> Tally {
        self.lock().tally.clone()
    }

    /// The node's switches not counted yet counted into the tally.
    pub(super) fn observe_switches(&self, switches: &[memgang_results::Switch]) {
        self.lock().tally.switches(switches);
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

    /// Stop a job for a reason of the daemon's: cancelled, ending failed
    /// with `why`.
    pub(super) fn stop(&self, id: u64, why: String) {
        self.lock().stopped.insert(id, why);
        self.cancel(id);
    }

    /// Why the daemon stopped job `id`, if it did.
    pub(super) fn stopped(&self, id: u64) -> Option<String> {
        self.lock().stopped.get(&id).cloned()
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
        if r.info.state.is_final() {
            // Only a start reads it: an ended job keeps no environment,
            // in memory or in the journal.
            r.env.clear();
        }
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

    /// Remove the allowance files (`allowance/<id>-...`) of the jobs
    /// `gone` says have ended: nothing of a job stays in the state
    /// directory beyond its record and its output.
    pub(super) fn remove_allowances(&self, gone: impl Fn(u64) -> bool) {
        let dir = self.state_dir.join(super::ALLOWANCE_DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let id = name
                .to_str()
                .and_then(|n| n.split_once('-'))
                .and_then(|(id, _)| id.parse::<u64>().ok());
            if id.is_none_or(&gone) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Forget ended jobs beyond the retention (and their output): older
    /// than `keep_for`, beyond the newest `keep_jobs` of all, or beyond
    /// the newest `keep_per_user` or `user_bytes` of their user's; true if
    /// any was forgotten.
    pub(super) fn forget(&self, keep: &Retention, now: f64) -> bool {
        let mut g = self.lock();
        // Newest first (ids are given in order).
        let ended: Vec<(u64, f64, u32, u64)> = g
            .jobs
            .values()
            .rev()
            .filter(|r| r.info.state.is_final())
            .map(|r| {
                let end = r.info.finished_unix_s.unwrap_or(0.0);
                (r.info.id, end, r.info.uid, record_bytes(r))
            })
            .collect();
        let mut per_user: BTreeMap<u32, (usize, u64)> = BTreeMap::new();
        let mut old = Vec::new();
        for (i, &(id, end, uid, bytes)) in ended.iter().enumerate() {
            let (n, b) = per_user.entry(uid).or_default();
            *n += 1;
            *b += bytes;
            if i >= keep.keep_jobs
                || now - end > keep.keep_for.as_secs_f64()
                || *n > keep.keep_per_user
                || *b > keep.user_bytes
            {
                old.push(id);
            }
        }
        for id in &old {
            if let Some(r) = g.jobs.remove(id) {
                g.cancelled.remove(id);
                g.stopped.remove(id);
                // Only what the daemon made: state_dir/jobs/ID.
                if r.info.log_dir == self.state_dir.join("jobs").join(id.to_string()) {
                    let _ = std::fs::remove_dir_all(&r.info.log_dir);
                }
            }
        }
        !old.is_empty()
    }
}

/// What a refusal says of the tasks journaled before it.
fn kept(first: u64, id: u64) -> String {
    format!(
        "jobs {first} to {} of the array were submitted, and run",
        id - 1
    )
}

impl Inner {
    /// Why `n` jobs like `r` (an array's tasks; else one) would pass
    /// their user's budgets, if they would: their jobs in progress, by
    /// number and by bytes ([`record_bytes`]). Root has none.
    fn over_budget(&self, r: &Record, n: usize, b: &Budgets) -> Option<String> {
        use memgang_core::units::format_bytes;
        let uid = r.info.uid;
        if uid == 0 {
            return None;
        }
        let (have, bytes) = self
            .jobs
            .values()
            .filter(|j| j.info.uid == uid && !j.info.state.is_final())
            .fold((0usize, 0u64), |(n, b), j| (n + 1, b + record_bytes(j)));
        if have + n > b.jobs_per_user {
            let these = if n > 1 {
                format!(", and these are {n} more,")
            } else {
                String::new()
            };
            return Some(format!(
                "you have {have} jobs in progress{these} and a user may have at most {} \
                 (max_jobs_per_user); wait for some to end, or cancel some",
                b.jobs_per_user
            ));
        }
        let with = bytes + record_bytes(r) * n as u64;
        (with > b.user_bytes).then(|| {
            format!(
                "your jobs in progress would hold {} of memgangd's memory with this \
                 submission, more than the {} a user may (max_user_bytes: their names, \
                 commands and environments); wait for some to end, or submit with a \
                 smaller environment",
                format_bytes(with),
                format_bytes(b.user_bytes)
            )
        })
    }

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
            let before = self.jobs.get(&id).map(|b| &b.info);
            self.tally.changed(before, &r.info);
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

/// A job the daemon stopped itself ends failed, saying why, not
/// `cancelled`.
pub(super) fn stopped_by_daemon(r: &mut Record, why: Option<String>) {
    if let Some(why) = why {
        (r.info.state, r.info.reason) = (JobState::Failed, Some(why));
    }
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

    fn shared_with(jobs: BTreeMap<u64, Record>, dir: &std::path::Path) -> Shared {
        let (journal, _) = Journal::open(dir).unwrap();
        let cap = Capacity {
            pool_bytes: 1 << 30,
            swap_total_bytes: 0,
            swap_used_elsewhere_bytes: 0,
            swap_reserve_bytes: 0,
        };
        Shared::new(journal, jobs, dir.to_path_buf(), cap)
    }

    /// A list is answered a page at a time, whatever the jobs: each page
    /// holds about the bytes asked (at least one job), and the pages
    /// together every job once.
    #[test]
    fn lists_come_in_pages() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = (1..=50)
            .map(|id| {
                let mut r = crate::journal::tests::rec(id, JobState::Queued);
                r.info.name = "x".repeat(1000);
                (id, r)
            })
            .collect();
        let shared = shared_with(jobs, dir.path());
        let (mut seen, mut after, mut pages) = (Vec::new(), None, 0);
        loop {
            let (page, next) = shared.list_page(|r| r.info.id % 2 == 0, after, 5000);
            assert!(!page.is_empty() && page.len() <= 5, "{}", page.len());
            seen.extend(page.iter().map(|j| j.id));
            pages += 1;
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(seen, (2..=50).step_by(2).collect::<Vec<_>>());
        assert_eq!(pages, 5);
        // A job larger than a page comes alone.
        let (page, next) = shared.list_page(|_| true, None, 1);
        assert_eq!((page.len(), next), (1, Some(1)));
        // The metrics' copies hold nothing a user wrote.
        let s = shared.summaries(0.0, 1.0);
        assert_eq!(s.len(), 50);
        assert!(s.iter().all(|j| j.name.is_empty() && j.command.is_empty()));
    }

    /// A user's jobs in progress are held to a number and to bytes; an
    /// ended job drops its environment; retention keeps each user's
    /// newest ended jobs within their number and bytes.
    #[test]
    fn budgets_hold_each_user() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared_with(BTreeMap::new(), dir.path()).with_budgets(Budgets {
            jobs_per_user: 3,
            user_bytes: 40_000,
            ..Budgets::default()
        });
        let job = |uid: u32, env: usize| {
            move |id, _, log_dir| {
                let mut r = crate::journal::tests::rec(id, JobState::Queued);
                r.info.uid = uid;
                r.info.log_dir = log_dir;
                r.env.insert("X".into(), "y".repeat(env));
                Ok(r)
            }
        };
        for _ in 0..3 {
            shared.submit(1, job(1000, 10)).unwrap();
        }
        let e = shared.submit(1, job(1000, 10)).unwrap_err().to_string();
        assert!(e.contains("max_jobs_per_user"), "{e}");
        // Another user, and root, are not held by the first one's jobs;
        // an array that would pass the number is refused whole.
        shared.submit(1, job(1001, 10)).unwrap();
        let e = shared.submit(3, job(1001, 10)).unwrap_err().to_string();
        assert!(
            e.contains("these are 3 more") && e.contains("max_jobs_per_user"),
            "{e}"
        );
        shared.submit(1, job(0, 100_000)).unwrap();
        let e = shared.submit(1, job(1001, 50_000)).unwrap_err().to_string();
        assert!(e.contains("max_user_bytes"), "{e}");
        // Ended: no environment, in memory or in the journal.
        shared.update(1, |r| finish(r, Some(0), None, false, None));
        let r = shared.get(1).unwrap();
        assert!(r.env.is_empty() && r.info.state.is_final());
        shared.submit(1, job(1000, 10)).unwrap();
        for id in [2, 3] {
            shared.update(id, |r| finish(r, Some(0), None, false, None));
        }
        let keep = Retention {
            keep_for: Duration::from_secs(3600),
            keep_jobs: 100,
            keep_per_user: 2,
            user_bytes: 1 << 20,
        };
        assert!(shared.forget(&keep, unix_now()));
        let ids = |s: &Shared| s.list(|_| true).iter().map(|j| j.id).collect::<Vec<_>>();
        // 1000's newest two ended (2, 3) stay, with every job in progress
        // (6 is 1000's, given after the refusals: a refused job takes no
        // id).
        assert_eq!(ids(&shared), vec![2, 3, 4, 5, 6]);
    }

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
        let keep = |keep_jobs| Retention {
            keep_for: Duration::from_secs(7 * 86_400),
            keep_jobs,
            keep_per_user: 10,
            user_bytes: 1 << 20,
        };
        assert!(!shared.forget(&keep(10), 1.0));
        assert!(shared.forget(&keep(10), 100.0 * day));
        assert_eq!(ids(&shared), vec![2, 3, 4, 5]);
        assert!(!dir.path().join("jobs/1").exists());
        assert!(shared.forget(&keep(2), 100.0 * day));
        assert_eq!(ids(&shared), vec![3, 4, 5]);
        assert!(dir.path().join("jobs/4").exists() && !dir.path().join("jobs/2").exists());
        assert!(shared.forget(&keep(0), 100.0 * day));
        assert_eq!(ids(&shared), vec![3]);
        // Ids are not given again.
        assert_eq!(shared.lock().next_id, 6);
    }
}
