//! The metrics: what the node loop gathers for the Prometheus text
//! (`exposition`), written to the metrics file for node_exporter and kept
//! for the HTTP listener; which jobs have series of their own.

use super::exposition::{metrics_text, Accounted, JobSeries, MetricsInput};
use super::store::unix_now;
use super::Service;
use memgang_core::admission::Capacity;
use memgang_core::JobId;
use memgang_linux::counters::{Psi, SwapStatus, VmStat};
use memgang_linux::paging::page_size;
use memgang_proto::JobInfo;
use memgang_results::JobAccount;
use memgang_runtime::account::Live;
use memgang_runtime::executor::Node;
use std::collections::HashMap;
use std::path::Path;

/// An ended job keeps its own metrics series this long after its end:
/// several scrapes at any usual interval (15 s to 5 min) record its final
/// values, and a node that runs thousands of short jobs does not export
/// a series set per job it keeps (`keep_finished_jobs`, 10,000 by
/// default). `memgang show ID` has them for as long as the job is kept.
const RECENT_FOR_S: f64 = 15.0 * 60.0;
/// And at most this many ended jobs, the newest, have their own series:
/// about 20 series each, a few thousand series in all.
const RECENT_JOBS: usize = 200;

impl Service {
    /// The metrics rendered for the HTTP listener and written to the
    /// metrics file, if either is configured.
    pub(super) fn write_metrics(
        &self,
        node: &Node,
        map: &HashMap<u64, JobId>,
        cap: Capacity,
        vm_start: Option<VmStat>,
        accounted: &Accounted,
    ) {
        if self.cfg.metrics_file.is_none() && self.cfg.metrics_listen.is_none() {
            return;
        }
        // Small copies: the metrics count jobs and read accounts only.
        let jobs = self.shared.summaries(unix_now(), RECENT_FOR_S);
        let per_job = job_series(&jobs, unix_now(), |id| node.live(*map.get(&id)?));
        let pool = self.env.backend.memory_stat(node.pool()).ok();
        // Summed over the node's life: the switches of forgotten jobs
        // are let go of.
        let totals = node.switch_totals();
        let vm = VmStat::read().ok();
        let tally = self.shared.tally();
        let text = metrics_text(&MetricsInput {
            jobs: &jobs,
            tally: &tally,
            switches: totals.count as usize,
            switch_seconds: &tally.switch_seconds,
            paged_out: totals.paged_out_bytes,
            paged_in: totals.paged_in_bytes,
            swapped: vm.zip(vm_start).map(|(v, s)| {
                (
                    v.pswpin.saturating_sub(s.pswpin) * page_size(),
                    v.pswpout.saturating_sub(s.pswpout) * page_size(),
                )
            }),
            pool_limit: self.cfg.pool_memory,
            pool_usage: pool.map(|p| p.usage_bytes),
            cap,
            swap_used: SwapStatus::read().ok().map(|s| s.used_bytes),
            psi: Psi::node_memory(),
            accounted,
            per_job: &per_job,
        });
        if let Ok(mut latest) = self.metrics.lock() {
            latest.clone_from(&text);
        }
        if let Some(path) = &self.cfg.metrics_file {
            write_file(path, &text);
        }
    }
}

/// World-readable (node_exporter runs as its own user; the daemon's umask
/// is 077), and renamed into place so a reader never sees half a file.
/// The temporary name does not end in .prom, which the textfile collector
/// would read. The directory may be another user's (node_exporter's
/// textfile directory is its own): both names are made in it through no
/// link ([`memgang_linux::files::Dir::replace`]), so a link planted there
/// is replaced, never written through.
fn write_file(path: &Path, text: &str) {
    if let Err(e) = memgang_linux::files::replace(path, text.as_bytes(), 0o644) {
        tracing::warn!("writing metrics {}: {e}", path.display());
    }
}

/// The jobs that have series of their own: those running here (`live`:
/// their counters so far, by id; None for a job not on this node, e.g.
/// adopted from an earlier daemon) and the newest [`RECENT_JOBS`] that
/// ended within [`RECENT_FOR_S`] of `now` with an account, from the jobs
/// the daemon keeps.
pub fn job_series(
    jobs: &[JobInfo],
    now: f64,
    live: impl Fn(u64) -> Option<Live>,
) -> Vec<JobSeries> {
    let mut ended: Vec<&JobInfo> = jobs
        .iter()
        .filter(|j| j.account.is_some())
        .filter(|j| j.finished_unix_s.is_some_and(|t| now - t <= RECENT_FOR_S))
        .collect();
    let end = |j: &JobInfo| j.finished_unix_s.unwrap_or(0.0);
    ended.sort_by(|a, b| end(b).total_cmp(&end(a)));
    ended.truncate(RECENT_JOBS);
    let mut names = HashMap::new();
    let mut user =
        |uid: u32| -> String { names.entry(uid).or_insert_with(|| user_name(uid)).clone() };
    let mut out: Vec<JobSeries> = ended
        .into_iter()
        .filter_map(|j| {
            // An account of another version's shape is left out here;
            // `memgang show` prints it as it is.
            let a: JobAccount = serde_json::from_value(j.account.clone()?).ok()?;
            Some(JobSeries {
                id: j.id,
                user: user(j.uid),
                counters: Live::from(&a),
                account: Some(a),
            })
        })
        .collect();
    for j in jobs.iter().filter(|j| !j.state.is_final()) {
        if let Some(counters) = live(j.id) {
            out.push(JobSeries {
                id: j.id,
                user: user(j.uid),
                account: None,
                counters,
            });
        }
    }
    out.sort_by_key(|s| s.id);
    out
}

/// The login name of `uid`, or the number where it has none.
fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgang_proto::JobState;

    #[test]
    fn running_and_recently_ended_jobs_have_series_of_their_own() {
        use crate::journal::tests::rec;
        let now = 100_000.0;
        let ended = |id: u64, ago: f64| {
            let mut r = rec(id, JobState::Finished).info;
            r.finished_unix_s = Some(now - ago);
            r.account = serde_json::to_value(JobAccount::default()).ok();
            r
        };
        let mut jobs: Vec<JobInfo> = (0..RECENT_JOBS as u64 + 10)
            .map(|id| ended(id, id as f64))
            .collect();
        jobs.push(ended(9_000, RECENT_FOR_S + 1.0));
        let mut no_account = ended(9_001, 0.0);
        no_account.account = None;
        jobs.push(no_account);
        jobs.push(rec(9_002, JobState::Running).info);
        jobs.push(rec(9_003, JobState::Running).info);
        jobs.push(rec(9_004, JobState::Queued).info);
        // 9003 runs on no node of ours (adopted), 9004 waits: no counters.
        let live = |id: u64| (id == 9_002).then(Live::default);
        let ids: Vec<u64> = job_series(&jobs, now, live).iter().map(|s| s.id).collect();
        let want: Vec<u64> = (0..RECENT_JOBS as u64).chain([9_002]).collect();
        assert_eq!(ids, want);
    }
}
