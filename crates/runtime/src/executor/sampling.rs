//! What a node measures between switches: the jobs' memory counters and
//! swap traffic (the paging trace, paper 000 Fig. 6), memory pressure, and
//! the progress line.

use super::node::Node;
use crate::mechanisms::SwitchPoint;
use crate::results::{JobSample, Sample};
use anyhow::Result;
use memgang_core::policy::TRAFFIC_PERIOD;
use memgang_core::{Event, JobId, JobStatus, NodeId};
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
pub(crate) struct Traffic {
    pub(super) next: Duration,
    seen: HashMap<i32, memgang_linux::process::Wakeups>,
    segments_seen: HashMap<u64, u32>,
}

impl Node {
    /// Count each running job's messages over the last period and tell the
    /// policy, when dynamic coscheduling is on and a count is due.
    pub(super) fn traffic_if_due(&mut self) -> Result<()> {
        let now = self.now();
        let Some(t) = self.traffic.as_mut() else {
            return Ok(());
        };
        if now < t.next {
            return Ok(());
        }
        t.next = (t.next + TRAFFIC_PERIOD).max(now);
        let mut seen = HashMap::new();
        // One dump of every TCP socket per count; without it (sock_diag
        // refused) the wake-ups are counted alone.
        let segments = memgang_linux::sockets::tcp_data_segments_in().unwrap_or_default();
        let mut events = Vec::new();
        for (i, j) in self.jobs.iter().enumerate() {
            let id = JobId(i as u32);
            if j.proc.is_none() || self.sched.state().job(id).status != JobStatus::Running {
                continue;
            }
            let pids = self
                .env
                .backend
                .procs_recursive(&j.group)
                .unwrap_or_default();
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
            let ranks = self.sched.state().job(id).spec.ranks.max(1) as u64;
            events.push(Event::JobTraffic {
                job: id,
                messages: messages / ranks,
            });
        }
        t.seen = seen;
        t.segments_seen = segments;
        for event in events {
            let actions = self.sched.handle(now, event);
            self.carry_out(actions)?;
        }
        Ok(())
    }

    /// Take the sample that is due, if one is: the jobs' counters (and the
    /// events they bring), and the node's memory pressure.
    pub(super) fn sample_if_due(&mut self) -> Result<()> {
        let now = self.now();
        if now < self.next_sample {
            return Ok(());
        }
        for event in self.sample(now) {
            let actions = self.sched.handle(self.now(), event);
            self.carry_out(actions)?;
        }
        self.show_progress();
        // Tell the policy when the node enters memory pressure (edge, not
        // level: one event per episode, not one per sample).
        let psi = self.samples.last().and_then(|s| s.psi_some_avg10);
        let now_pressured = psi.is_some_and(|p| p >= PRESSURE_PSI_SOME);
        if now_pressured && !self.pressured {
            let event = Event::MemoryPressure {
                node: NodeId(0),
                some_avg10: psi.unwrap_or_default(),
            };
            let actions = self.sched.handle(now, event);
            self.carry_out(actions)?;
        }
        self.pressured = now_pressured;
        self.next_sample = (self.next_sample + self.sample_interval).max(now);
        Ok(())
    }

    /// Read every job's counters; returns a `JobMemory` event for each
    /// running job whose peak has grown by a step since last reported.
    pub(super) fn sample(&mut self, now: std::time::Duration) -> Vec<Event> {
        let mut events = Vec::new();
        let backend = self.env.backend.as_ref();
        let vm = self.env.counters.vmstat().unwrap_or(self.vm_last);
        let (d_in, d_out) = (
            vm.pswpin.saturating_sub(self.vm_last.pswpin),
            vm.pswpout.saturating_sub(self.vm_last.pswpout),
        );
        self.vm_last = vm;
        let mut jobs = Vec::new();
        // (index, Δmajor faults, Δswapped bytes) for attributing the node's
        // swap traffic where the cgroup does not count it itself.
        let mut shares: Vec<(usize, u64, u64)> = Vec::new();
        for (i, j) in self.jobs.iter_mut().enumerate() {
            if j.proc.is_none() {
                continue;
            }
            let Ok(stat) = backend.memory_stat(&j.group) else {
                continue;
            };
            let frozen = self.env.freezer.is_frozen(&j.group).unwrap_or(false);
            if !frozen && self.account.huge_due(i, now.as_secs_f64()) {
                let pids = backend.procs_recursive(&j.group).unwrap_or_default();
                self.account.huge_running(i, &pids, now.as_secs_f64());
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
                    i,
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
                    job: JobId(i as u32),
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
        for (i, maj, grow) in shares {
            let r = &mut self.jobs[i].result;
            r.swap_in_pages += (d_in * maj).checked_div(maj_total).unwrap_or(0);
            r.swap_out_pages += (d_out * grow).checked_div(grow_total).unwrap_or(0);
        }
        let pool_usage_bytes = backend
            .memory_stat(&self.sw.engine.pool)
            .map_or(0, |s| s.usage_bytes);
        self.update_allowances();
        self.samples.push(Sample {
            t_s: now.as_secs_f64(),
            swap_in: d_in,
            swap_out: d_out,
            pool_usage_bytes,
            psi_some_avg10: self.env.counters.memory_pressure().map(|p| p.some_avg10),
            in_switch: false,
            jobs,
        });
        events
    }

    /// What running job `job` may keep in memory: the pool less the
    /// margin a switch keeps free and what the other running jobs hold
    /// (their last sampled resident memory). A suspended job's memory is
    /// the policy's to take, so it does not count.
    pub(super) fn allowance_for(&self, job: JobId) -> u64 {
        let others: u64 = self
            .jobs
            .iter()
            .enumerate()
            .filter(|(i, j)| {
                *i != job.index()
                    && j.proc.is_some()
                    && self.sched.state().job(JobId(*i as u32)).status == JobStatus::Running
            })
            .map(|(_, j)| j.last.anon_bytes)
            .sum();
        memgang_core::room::allowance(
            self.sw.engine.pool_memory,
            others,
            crate::memory::ROOM_MARGIN,
        )
    }

    /// Rewrite the allowance file of every running job whose allowance
    /// moved by a step (at each sample, so after every switch too).
    fn update_allowances(&mut self) {
        for i in 0..self.jobs.len() {
            let id = JobId(i as u32);
            if self.jobs[i].proc.is_none()
                || self.sched.state().job(id).status != JobStatus::Running
            {
                continue;
            }
            let bytes = self.allowance_for(id);
            let Some((path, last)) = &mut self.jobs[i].allowance else {
                continue;
            };
            if bytes.abs_diff(*last) < ALLOWANCE_STEP {
                continue;
            }
            match super::jobs::write_allowance(path, bytes) {
                Ok(()) => *last = bytes,
                Err(e) => tracing::warn!("writing {}: {e}", path.display()),
            }
        }
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

    fn show_progress(&self) {
        if self.env.progress.is_hidden() {
            return;
        }
        let st = self.sched.state();
        let names = |s: JobStatus| {
            st.with_status(s)
                .map(|j| j.spec.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let done = st.with_status(JobStatus::Finished).count();
        let last = self.samples.last();
        let per_s = 1.0 / self.sample_interval.as_secs_f64();
        self.env.progress.set_message(format!(
            "{:.1}s {} | running {} | suspended {} | done {done}/{} | pool {} | swap in {:.0}/s out {:.0}/s pages",
            self.now().as_secs_f64(),
            self.label,
            none_if_empty(names(JobStatus::Running)),
            none_if_empty(names(JobStatus::Suspended)),
            st.jobs().len(),
            memgang_core::units::format_bytes(last.map_or(0, |s| s.pool_usage_bytes)),
            last.map_or(0.0, |s| s.swap_in as f64 * per_s),
            last.map_or(0.0, |s| s.swap_out as f64 * per_s),
        ));
    }
}

fn none_if_empty(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}
