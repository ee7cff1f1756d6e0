//! `memgang top`'s answer. The node loop publishes the node each turn
//! ([`Service::publish`]: each job's activity, memory and share of turns,
//! the next switch, the last switches); a request joins it with the job
//! table and with the switch in progress, read from the executor's watch
//! (the loop itself is inside the switch then), and keeps to what the
//! caller may see: as `status`, their own jobs, every job for root, and
//! the others' as counts only.

use super::published::{OnNode, Published, Switched};
use super::{unix_now, Service, Shared};
use memgang_core::{JobId, JobStatus};
use memgang_linux::counters::SwapStatus;
use memgang_proto::top::{Activity, Count, JobView, NodeView, SwitchView, MAX_JOBS, MAX_NAME};
use memgang_proto::JobState;
use memgang_runtime::executor::Node;
use std::collections::HashMap;

/// The last switches a view carries.
const SWITCHES: usize = 5;

/// The daemon's id of a job the node knows as `j<id>`.
fn daemon_id(name: &str) -> Option<u64> {
    name.strip_prefix('j')?.parse().ok()
}

impl Service {
    /// The node now, for `memgang top`; each turn, after the sync.
    pub(super) fn publish(&self, node: &Node, map: &HashMap<u64, JobId>) {
        let now = unix_now();
        let clock = node.elapsed();
        let on_clock = |t: std::time::Duration| now - (clock.as_secs_f64() - t.as_secs_f64());
        let state = node.scheduler().state();
        let mut jobs = HashMap::new();
        let mut waiting = false;
        for (&id, &jid) in map {
            let activity = match state.job(jid).status {
                JobStatus::Running => Activity::Running,
                JobStatus::Suspended => Activity::Frozen,
                JobStatus::Waiting | JobStatus::Queued => Activity::Queued,
                JobStatus::Finished => continue,
            };
            waiting |= activity != Activity::Running;
            let mem = node.memory(jid);
            jobs.insert(
                id,
                OnNode {
                    activity,
                    resident: mem.map(|m| m.0),
                    swapped: mem.and_then(|m| m.1),
                    run_share: node.run_share(jid),
                },
            );
        }
        let done = node.switches();
        let ids = |names: &[String]| names.iter().filter_map(|n| daemon_id(n)).collect();
        let switches = done[done.len().saturating_sub(SWITCHES)..]
            .iter()
            .map(|s| Switched {
                at_unix_s: on_clock(std::time::Duration::from_secs_f64(s.at_s)),
                took_s: s.took_s,
                out: ids(&s.suspended),
                into: ids(&s.resumed),
                paged_out: s.paged_out_bytes,
                paged_in: s.paged_in_bytes,
            })
            .collect();
        let published = Published {
            policy: self.cfg.policy.to_string(),
            quantum_s: self.cfg.quantum.as_secs_f64(),
            pool_limit: self.cfg.pool_memory,
            pool_usage: self
                .env
                .backend
                .memory_stat(node.pool())
                .ok()
                .map(|m| m.usage_bytes),
            next_switch_unix_s: waiting
                .then(|| node.scheduler().next_wakeup().map(on_clock))
                .flatten(),
            switches,
            jobs,
            ids: map.iter().map(|(&id, &jid)| (jid, id)).collect(),
            watch: node.switch_watch(),
        };
        *self.shared.published() = Some(published);
    }
}

impl Shared {
    /// `memgang top`'s answer for `uid`.
    pub fn top(&self, uid: u32) -> NodeView {
        let now = unix_now();
        let (records, cap) = {
            let g = self.lock();
            let jobs: Vec<_> = g
                .jobs
                .values()
                .filter(|r| !r.info.state.is_final())
                .map(|r| r.info.clone())
                .collect();
            (jobs, g.capacity)
        };
        let p = self.published();
        let watch = p
            .as_ref()
            .map(|p| p.watch.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .unwrap_or_default();
        let by_node = |ids: &[JobId]| -> Vec<u64> {
            let map = p.as_ref().map(|p| &p.ids);
            ids.iter().filter_map(|j| map?.get(j).copied()).collect()
        };
        let (paging_out, paging_in) = (by_node(&watch.paging_out), by_node(&watch.paging_in));
        let (paged_out, paged_in) = (by_node(&watch.paged_out), by_node(&watch.paged_in));
        let visible = |owner: u32| uid == 0 || owner == uid;
        let mut mine = Vec::new();
        let mut others = Vec::new();
        for j in &records {
            let on = p.as_ref().and_then(|p| p.jobs.get(&j.id));
            let mut activity = match (on, j.state) {
                (Some(on), _) => on.activity,
                (None, JobState::Running) => Activity::Running,
                (None, JobState::Suspended) => Activity::Frozen,
                (None, _) => Activity::Queued,
            };
            // The switch in progress, fresher than the loop's turn.
            if paging_out.contains(&j.id) {
                activity = Activity::PagingOut;
            } else if paging_in.contains(&j.id) {
                activity = Activity::PagingIn;
            } else if paged_in.contains(&j.id) {
                activity = Activity::Running;
            } else if paged_out.contains(&j.id) {
                activity = Activity::Frozen;
            }
            if !visible(j.uid) {
                others.push(activity);
                continue;
            }
            mine.push(JobView {
                id: j.id,
                uid: j.uid,
                name: j.name.chars().take(MAX_NAME).collect(),
                activity,
                reason: (activity == Activity::Queued)
                    .then(|| j.reason.clone())
                    .flatten(),
                memory_bytes: j.memory_bytes,
                resident_bytes: on.and_then(|o| o.resident),
                swapped_bytes: on.and_then(|o| o.swapped),
                run_share: on.and_then(|o| o.run_share),
                started_unix_s: j.started_unix_s,
            });
        }
        mine.sort_by_key(|j| (j.activity, j.id));
        let more = Count::of(mine.iter().skip(MAX_JOBS).map(|j| j.activity));
        mine.truncate(MAX_JOBS);
        let swap = SwapStatus::read().ok();
        let switches = p.as_ref().map_or_else(Vec::new, |p| {
            p.switches
                .iter()
                .map(|s| switch_view(s, &records, uid))
                .collect()
        });
        NodeView {
            at_unix_s: now,
            policy: p.as_ref().map_or_else(String::new, |p| p.policy.clone()),
            quantum_s: p.as_ref().map_or(0.0, |p| p.quantum_s),
            pool_limit_bytes: p.as_ref().map_or(cap.pool_bytes, |p| p.pool_limit),
            pool_usage_bytes: p.as_ref().and_then(|p| p.pool_usage),
            swap_total_bytes: swap
                .as_ref()
                .map_or(cap.swap_total_bytes, |s| s.total_bytes),
            swap_used_bytes: swap.map(|s| s.used_bytes),
            swap_usable_bytes: cap.swap_usable(),
            switching_since_unix_s: watch.since.map(|s| now - s.elapsed().as_secs_f64()),
            next_switch_unix_s: p.as_ref().and_then(|p| p.next_switch_unix_s),
            switches,
            jobs: mine,
            others: Count::of(others),
            more,
        }
    }
}

/// A switch as `uid` may see it: their jobs in progress by id, the
/// others counted (root: every job by id).
fn switch_view(s: &Switched, records: &[memgang_proto::JobInfo], uid: u32) -> SwitchView {
    let seen = |id: &u64| uid == 0 || records.iter().any(|r| r.id == *id && r.uid == uid);
    let keep = |ids: &[u64]| -> Vec<u64> { ids.iter().copied().filter(|i| seen(i)).collect() };
    let (out, into) = (keep(&s.out), keep(&s.into));
    SwitchView {
        at_unix_s: s.at_unix_s,
        took_s: s.took_s,
        others: (s.out.len() + s.into.len() - out.len() - into.len()) as u32,
        out,
        into,
        paged_out_bytes: s.paged_out,
        paged_in_bytes: s.paged_in,
    }
}
