//! What a node measures between switches: the jobs' memory counters and
//! swap traffic (the paging trace, paper 000 Fig. 6), memory pressure, and
//! the status given to the front end.

use super::jobs::{write_allowance, Runs};
use super::{Env, Status};
use crate::account::Tracker;
use crate::mechanisms::SwitchPoint;
use crate::results::{JobSample, Sample};
use memgang_core::policy::TRAFFIC_PERIOD;
use memgang_core::{Event, JobId, JobStatus, NodeId, State};
use memgang_linux::cgroup::GroupPath;
use memgang_linux::counters::VmStat;
use std::collections::HashMap;
use std::time::Duration;

/// Node memory PSI "some" avg10 (%) from which the node counts as under
/// memory pressure: tasks stalled on memory a tenth of the time is paging
/// that costs the jobs real progress, well above the background reclaim a
/// healthy node shows (0% on this machine when idle).
const PRESSURE_PSI_SOME: f64 = 10.0;
/// A running job's peak resident memory is reported to the policy
/// (`Event::JobMemory`) each time it has grown by this much: fine enough
/// for packing (whose per-job overhead is 4 MiB), coarse enough that a
/// growing job does not send an event every sample.
const MEMORY_REPORT_STEP: u64 = 4 << 20;
/// A job's allowance file is rewritten when its allowance moves by this
/// much: a memadapt panel is MiBs, so a smaller change would shed or map
/// nothing, and a job whose neighbours' memory jitters is not told so
/// every sample.
const ALLOWANCE_STEP: u64 = 4 << 20;

/// Dynamic coscheduling's counts: each process's wake-ups and each TCP
/// socket's data segments received at the last count, and when the next
/// count is due.
#[derive(Default)]
pub(super) struct Traffic {
    pub(super) next: Duration,
    seen: HashMap<i32, memgang_linux::process::Wakeups>,
    segments_seen: HashMap<u64, u32>,
}

/// The node's samples (the paging trace) and what they are taken with:
/// the node's paging counters at its start and at the last sample, when
/// the next is due, whether the node was under memory pressure at the
/// last one.
pub(super) struct Sampling {
    pub(super) samples: Vec<Sample>,
    pub(super) interval: Duration,
    pub(super) vm_start: VmStat,
    pub(super) vm_last: VmStat,
    next: Duration,
    pressured: bool,
    /// The policy's name for the progress line.
    label: String,
}

impl Traffic {
    /// Count each running job's messages over the last period, when a
    /// count is due: a `JobTraffic` event for each.
    pub(super) fn count_if_due(
        &mut self,
        env: &Env,
        jobs: &Runs,
        state: &State,
        now: Duration,
    ) -> Vec<Event> {
        let t = self;
        if now < t.next {
            return Vec::new();
        }
        t.next = (t.next + TRAFFIC_PERIOD).max(now);
        let mut seen = HashMap::new();
        // One dump of every TCP socket per count; without it (sock_diag
        // refused) the wake-ups are counted alone.
        let segments = memgang_linux::sockets::tcp_data_segments_in().unwrap_or_default();
        let mut events = Vec::new();
        for (id, j) in jobs.iter() {
            if j.proc.is_none() || state.job(id).status != JobStatus::Running {
                continue;
            }
            let pids = env.backend.procs_recursive(&j.group).unwrap_or_default();
            let (mut wakeups, mut sockets) = (0, std::collections::HashSet::new());
            for pid in pids {
                let Ok(now) = memgang_linux::process::wakeups(pid) else {
                    continue;
                };
                // A process seen for the first time brings its whole past.
                if let Some(last) = t.seen.get(&pid) {
                    wakeups += now.messages_since(last);
                }
                seen.insert(pid, now);
                sockets.extend(memgang_linux::sockets::socket_inodes(pid).unwrap_or_default());
            }
            // A socket the job's processes share is counted once; one first
            // seen now is not counted yet (its count holds its whole past).
            let received: u64 = sockets
                .iter()
                .filter_map(|inode| {
                    Some(
                        segments
                            .get(inode)?
                            .wrapping_sub(*t.segments_seen.get(inode)?),
                    )
                })
                .map(u64::from)
                .sum();
            // Both count messages: a rank that sleeps for its message wakes
            // (any transport); one that busy-polls a TCP socket only shows
            // its segments. Summing would count a sleeping TCP receiver twice.
            let messages = wakeups.max(received);
            let ranks = state.job(id).spec.ranks.max(1) as u64;
            events.push(Event::JobTraffic {
                job: id,
                messages: messages / ranks,
            });
        }
        t.seen = seen;
        t.segments_seen = segments;
        events
    }
}

impl Sampling {
    pub(super) fn new(interval: Duration, label: String, vm_start: VmStat) -> Sampling {
        Sampling {
            samples: Vec::new(),
            interval,
            vm_start,
            vm_last: vm_start,
            next: Duration::ZERO,
            pressured: false,
            label,
        }
    }

    /// When the next sample is due.
    pub(super) fn next(&self) -> Duration {
        self.next
    }

    /// The sample due at `now` is taken: the next is one interval on.
    pub(super) fn taken(&mut self, now: Duration) {
        self.next = (self.next + self.interval).max(now);
    }

    /// `MemoryPressure` when the node has entered memory pressure since
    /// the last call (edge, not level: one event per episode, not one per
    /// sample), by the last sample's PSI.
    pub(super) fn pressure_began(&mut self) -> Option<Event> {
        let psi = self.samples.last().and_then(|s| s.psi_some_avg10);
        let now_pressured = psi.is_some_and(|p| p >= PRESSURE_PSI_SOME);
        let began = now_pressured && !self.pressured;
        self.pressured = now_pressured;
        began.then(|| Event::MemoryPressure {
            node: NodeId(0),
            some_avg10: psi.unwrap_or_default(),
        })
    }

    /// Read every job's counters; returns a `JobMemory` event for each
    /// running job whose peak has grown by a step since last reported.
    /// `pool` and `pool_memory` are the node's pool and its limit.
    pub(super) fn sample(
        &mut self,
        env: &Env,
        runs: &mut Runs,
        account: &mut Tracker,
        state: &State,
        (pool, pool_memory): (&GroupPath, u64),
        now: Duration,
    ) -> Vec<Event> {
        let mut events = Vec::new();
        let backend = env.backend.as_ref();
        let vm = env.counters.vmstat().unwrap_or(self.vm_last);
        let (d_in, d_out) = (
            vm.pswpin.saturating_sub(self.vm_last.pswpin),
            vm.pswpout.saturating_sub(self.vm_last.pswpout),
        );
        self.vm_last = vm;
        let mut jobs = Vec::new();
        // (job, Δmajor faults, Δswapped bytes) for attributing the node's
        // swap traffic where the cgroup does not count it itself.
        let mut shares: Vec<(JobId, u64, u64)> = Vec::new();
        for id in runs.ids() {
            let (i, j) = (id.index(), &mut runs[id]);
            if j.proc.is_none() {
                continue;
            }
            let Ok(stat) = backend.memory_stat(&j.group) else {
                continue;
            };
            let frozen = env.freezer.is_frozen(&j.group).unwrap_or(false);
            if !frozen {
                let pids = || backend.procs_recursive(&j.group).unwrap_or_default();
                account.running(i, pids, stat.anon_huge_bytes);
            }
            let r = &mut j.result;
            match (
                stat.swap_ins,
                stat.swap_outs,
                j.last.swap_ins,
                j.last.swap_outs,
            ) {
                (Some(si), Some(so), Some(lsi), Some(lso)) => {
                    r.swap_in_pages += si.saturating_sub(lsi);
                    r.swap_out_pages += so.saturating_sub(lso);
                }
                _ => shares.push((
                    id,
                    stat.major_faults.saturating_sub(j.last.major_faults),
                    stat.swap_bytes
                        .unwrap_or(0)
                        .saturating_sub(j.last.swap_bytes.unwrap_or(0)),
                )),
            }
            r.peak_anon_bytes = r.peak_anon_bytes.max(stat.anon_bytes);
            if !frozen && r.peak_anon_bytes >= j.reported_peak + MEMORY_REPORT_STEP {
                j.reported_peak = r.peak_anon_bytes;
                events.push(Event::JobMemory {
                    job: id,
                    peak_bytes: r.peak_anon_bytes,
                    resident_bytes: stat.anon_bytes,
                });
            }
            jobs.push(JobSample {
                job: r.name.clone(),
                state: if frozen { "frozen" } else { "running" }.into(),
                anon_bytes: stat.anon_bytes,
                swap_bytes: stat.swap_bytes,
                major_faults: stat.major_faults,
            });
            j.last = stat;
        }
        let (maj_total, grow_total) = shares.iter().fold((0, 0), |(a, b), s| (a + s.1, b + s.2));
        for (id, maj, grow) in shares {
            let r = &mut runs[id].result;
            r.swap_in_pages += (d_in * maj).checked_div(maj_total).unwrap_or(0);
            r.swap_out_pages += (d_out * grow).checked_div(grow_total).unwrap_or(0);
        }
        let pool_usage_bytes = backend.memory_stat(pool).map_or(0, |s| s.usage_bytes);
        update_allowances(runs, state, pool_memory);
        self.samples.push(Sample {
            t_s: now.as_secs_f64(),
            swap_in: d_in,
            swap_out: d_out,
            pool_usage_bytes,
            psi_some_avg10: env.counters.memory_pressure().map(|p| p.some_avg10),
            in_switch: false,
            jobs,
        });
        events
    }

    /// A trace sample taken while a switch ran: node counters and the
    /// pool only, the jobs' counters are read between switches.
    pub(super) fn switch_sample(&mut self, p: SwitchPoint) {
        self.samples.push(Sample {
            t_s: p.at.as_secs_f64(),
            swap_in: p.vm.pswpin.saturating_sub(self.vm_last.pswpin),
            swap_out: p.vm.pswpout.saturating_sub(self.vm_last.pswpout),
            pool_usage_bytes: p.pool_usage_bytes,
            psi_some_avg10: p.psi_some_avg10,
            in_switch: true,
            jobs: Vec::new(),
        });
        self.vm_last = p.vm;
    }

    /// The node at `now` to [`Env::progress`], if there is one.
    pub(super) fn show_progress(&self, env: &Env, st: &State, now: Duration) {
        let Some(progress) = &env.progress else {
            return;
        };
        let names = |s: JobStatus| st.with_status(s).map(|j| j.spec.name.as_str()).collect();
        let last = self.samples.last();
        let per_s = 1.0 / self.interval.as_secs_f64();
        progress.status(&Status {
            at: now,
            policy: &self.label,
            running: names(JobStatus::Running),
            suspended: names(JobStatus::Suspended),
            finished: st.with_status(JobStatus::Finished).count(),
            jobs: st.jobs().len(),
            pool_bytes: last.map_or(0, |s| s.pool_usage_bytes),
            swap_in_per_s: last.map_or(0.0, |s| s.swap_in as f64 * per_s),
            swap_out_per_s: last.map_or(0.0, |s| s.swap_out as f64 * per_s),
        });
    }
}

/// What running job `job` may keep in memory: the pool less the margin a
/// switch keeps free and what the other running jobs hold (their last
/// sampled resident memory). A suspended job's memory is the policy's to
/// take, so it does not count.
pub(super) fn allowance_for(jobs: &Runs, state: &State, pool_memory: u64, job: JobId) -> u64 {
    let others: u64 = jobs
        .iter()
        .filter(|(id, j)| {
            *id != job && j.proc.is_some() && state.job(*id).status == JobStatus::Running
        })
        .map(|(_, j)| j.last.anon_bytes)
        .sum();
    memgang_core::room::allowance(pool_memory, others, crate::memory::ROOM_MARGIN)
}

/// Rewrite the allowance file of every running job whose allowance moved
/// by a step (at each sample, so after every switch too).
fn update_allowances(jobs: &mut Runs, state: &State, pool_memory: u64) {
    for id in jobs.ids() {
        if jobs[id].proc.is_none() || state.job(id).status != JobStatus::Running {
            continue;
        }
        let bytes = allowance_for(jobs, state, pool_memory, id);
        let Some((path, last)) = &mut jobs[id].allowance else {
            continue;
        };
        if bytes.abs_diff(*last) < ALLOWANCE_STEP {
            continue;
        }
        match write_allowance(path, bytes) {
            Ok(()) => *last = bytes,
            Err(e) => tracing::warn!("writing {}: {e}", path.display()),
        }
    }
}
