//! A job's and a run's time account from what was measured (issue 36;
//! docs/results.md): a job's wall time split into its tasks' CPU, run-queue
//! and I/O wait, memgang's frozen and switch times and the rest; a run's
//! makespan into its jobs' parts, switches and idle time. Pure: the
//! readings come from `crate::account`'s tracker, checked by
//! `crate::iowait`.

use crate::results::{BatchJob, JobAccount, RunAccount, RunResult};
use memgang_linux::taskstats::TaskStats;
use std::collections::{BTreeMap, HashMap};

/// A task on a CPU for more than this share of its job's running time
/// counts as busy: a job with more than one busy task is wider than 1.
const BUSY_SHARE: f64 = 0.05;
/// The kernel's counters of a job's tasks grown while it was frozen, and
/// the block-I/O delay no wait can have had, in ns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accrued {
    pub cpu_ns: u64,
    pub cpu_delay_ns: u64,
    pub blkio_ns: u64,
    /// Freeze-thaw pairs sampled.
    pub samples: u32,
    /// Block-I/O delay grown between two readings (running or frozen) by
    /// more than any wait can have lasted, by thread id: not in
    /// `blkio_ns`, and taken out of that thread's exit record
    /// (`crate::iowait`). Only threads the kernel did this to have an entry.
    pub blkio_dropped_ns: BTreeMap<u32, u64>,
    /// The job's time in which growth was dropped: its I/O wait there is
    /// not measured.
    pub untrusted_ns: u64,
}

/// Total length of `a` ∩ `b`, each a list of disjoint intervals.
fn overlap(a: &[(f64, f64)], b: &[(f64, f64)]) -> f64 {
    let mut t = 0.0;
    for &(s0, e0) in a {
        for &(s1, e1) in b {
            t += (e0.min(e1) - s0.max(s1)).max(0.0);
        }
    }
    t
}

/// The stretches of `[start, end]` outside `inside` (sorted, disjoint).
fn complement(start: f64, end: f64, inside: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted = inside.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut out, mut at) = (Vec::new(), start);
    for (s, e) in sorted {
        if s > at {
            out.push((at, s.min(end)));
        }
        at = at.max(e);
    }
    if at < end {
        out.push((at, end));
    }
    out
}

/// A job's account from what was measured (see the module's doc):
/// `wall` its start and end, `tasks` its tasks' exit records, `running`
/// its stretches thawed, `outs` and `ins` the switches that froze and
/// thawed it, `rusage` its user and system CPU seconds, `frozen_grew`
/// what its counters grew by while it was frozen, `no_delays` why there
/// are no records.
#[allow(clippy::too_many_arguments)]
pub fn job_account(
    wall: (f64, f64),
    tasks: &[TaskStats],
    running: &[(f64, f64)],
    outs: &[(f64, f64)],
    ins: &[(f64, f64)],
    rusage: (f64, f64),
    frozen_grew: Accrued,
    no_delays: Option<String>,
) -> JobAccount {
    let wall_s = (wall.1 - wall.0).max(0.0);
    let frozen = complement(wall.0, wall.1, running);
    let frozen_all: f64 = frozen.iter().map(|(s, e)| e - s).sum();
    let switch_out_s = overlap(&frozen, outs);
    let switch_in_s = overlap(&frozen, ins).min(frozen_all - switch_out_s);
    let frozen_s = (frozen_all - switch_out_s - switch_in_s).max(0.0);
    let ns = |f: fn(&TaskStats) -> u64| tasks.iter().map(|t| f(t) as f64 * 1e-9).sum::<f64>();
    let mut a = JobAccount {
        wall_s,
        frozen_s,
        switch_out_s,
        switch_in_s,
        user_cpu_s: rusage.0,
        system_cpu_s: rusage.1,
        tasks: tasks.len() as u32,
        ..JobAccount::default()
    };
    match no_delays {
        Some(why) => {
            a.source = why;
            a.width = 1.0;
            a.cpu_s = rusage.0 + rusage.1;
        }
        None if tasks.is_empty() => {
            a.source = "rusage only: no exit record of the job's processes came".into();
            a.width = 1.0;
            a.cpu_s = rusage.0 + rusage.1;
        }
        None => {
            let running_s = wall_s - frozen_s - switch_out_s - switch_in_s;
            // What the counters grew by while the job was frozen is the
            // freeze's (the module's doc), not its running time's.
            let g = |n: u64| n as f64 * 1e-9;
            let (fz_cpu, fz_rq, fz_io) = (
                g(frozen_grew.cpu_ns),
                g(frozen_grew.cpu_delay_ns),
                g(frozen_grew.blkio_ns),
            );
            let (cpu, rq, io) = (
                (ns(|t| t.cpu_ns) - fz_cpu).max(0.0),
                (ns(|t| t.cpu_delay_ns) - fz_rq).max(0.0),
                (ns(|t| t.blkio_delay_ns) - fz_io).max(0.0),
            );
            let active = cpu + rq + io;
            // One busy task: one to one, so that an over-count shows as a
            // negative `unaccounted` instead of widening the job.
            let busy = tasks
                .iter()
                .filter(|t| t.cpu_ns as f64 * 1e-9 > BUSY_SHARE * running_s)
                .count();
            let w = if busy > 1 && running_s > 0.0 {
                (active / running_s).max(1.0)
            } else {
                1.0
            };
            a.source = "taskstats".into();
            a.width = w;
            a.cpu_s = cpu / w;
            a.run_queue_s = rq / w;
            a.io_wait_s = io / w;
            a.cpu_while_frozen_s = fz_cpu / w;
            a.run_queue_while_frozen_s = fz_rq / w;
            a.io_wait_while_frozen_s = fz_io / w;
            a.frozen_samples = frozen_grew.samples;
            a.io_wait_dropped_s =
                (frozen_grew.blkio_dropped_ns.values()).fold(0.0, |s, &n| s + g(n));
            a.io_wait_untrusted_s = g(frozen_grew.untrusted_ns);
            a.swapin_delay_s = ns(|t| t.swapin_delay_ns) / w;
            a.thrashing_delay_s = ns(|t| t.thrashing_delay_ns) / w;
            a.reclaim_delay_s = ns(|t| t.freepages_delay_ns) / w;
            a.compact_delay_s = ns(|t| t.compact_delay_ns) / w;
        }
    }
    a.unaccounted_s =
        wall_s - a.cpu_s - a.run_queue_s - a.io_wait_s - frozen_s - switch_out_s - switch_in_s;
    a
}

/// The run's account from its jobs' accounts, timeline and switches: each
/// stretch of the makespan is the running jobs' (1/k each of k, split by
/// each job's running parts in proportion), else a switch's, else idle. None when no job has an account.
pub fn run_account(r: &RunResult) -> Option<RunAccount> {
    if r.jobs.iter().all(|j| j.account.is_none()) {
        return None;
    }
    let t0 = r
        .jobs
        .iter()
        .map(|j| j.arrival_s)
        .fold(f64::INFINITY, f64::min);
    let t1 = t0 + r.makespan_s;
    let switches: Vec<(f64, f64)> = r
        .switches
        .iter()
        .map(|s| (s.at_s, s.at_s + s.took_s))
        .collect();
    let mut cuts: Vec<f64> = vec![t0, t1];
    cuts.extend(switches.iter().flat_map(|&(a, b)| [a, b]));
    cuts.extend(r.timeline.iter().flat_map(|i| [i.start_s, i.end_s]));
    cuts.retain(|t| (t0..=t1).contains(t));
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let mut a = RunAccount {
        makespan_s: r.makespan_s,
        ..RunAccount::default()
    };
    let mut share: HashMap<&str, f64> = HashMap::new();
    for w in cuts.windows(2) {
        let (s, e) = (w[0], w[1]);
        let (len, mid) = (e - s, (s + e) / 2.0);
        let running: Vec<&str> = r
            .timeline
            .iter()
            .filter(|i| i.start_s <= mid && mid < i.end_s)
            .map(|i| i.job.as_str())
            .collect();
        // A job thawed while its switch still streams its page-in runs
        // (and waits for its faults) inside the switch: that stretch is
        // the job's, measured by its own counters; the switch's is only
        // what no job ran in.
        if running.is_empty() {
            if switches.iter().any(|&(a, b)| a <= mid && mid < b) {
                a.switch_s += len;
            } else {
                a.idle_s += len;
            }
            continue;
        }
        for job in &running {
            *share.entry(job).or_default() += len / running.len() as f64;
        }
    }
    let mut delays = Vec::new();
    let mut hw = Vec::new();
    for j in &r.jobs {
        let here = share.get(j.name.as_str()).copied().unwrap_or(0.0);
        let Some(acc) = &j.account else {
            a.unaccounted_s += here;
            continue;
        };
        let running_s = acc.wall_s - acc.frozen_s - acc.switch_out_s - acc.switch_in_s;
        let k = if running_s > 0.0 {
            here / running_s
        } else {
            0.0
        };
        a.cpu_s += acc.cpu_s * k;
        a.run_queue_s += acc.run_queue_s * k;
        a.io_wait_s += acc.io_wait_s * k;
        a.unaccounted_s += here - (acc.cpu_s + acc.run_queue_s + acc.io_wait_s) * k;
        a.jobs_frozen_s += acc.frozen_s;
        a.swapin_delay_s += acc.swapin_delay_s;
        a.thrashing_delay_s += acc.thrashing_delay_s;
        a.reclaim_delay_s += acc.reclaim_delay_s;
        a.user_cpu_s += acc.user_cpu_s;
        a.system_cpu_s += acc.system_cpu_s;
        a.records_lost = a.records_lost.max(acc.records_lost);
        delays.push(acc.source.clone());
        hw.push(acc.hw_missing.clone());
    }
    // What the stretches left (none: they tile the makespan).
    a.unaccounted_s += r.makespan_s - a.switch_s - a.idle_s - share.values().sum::<f64>();
    a.delay_accounting = match delays.iter().find(|s| *s != "taskstats") {
        None => "on".into(),
        Some(why) => unavailable(why),
    };
    a.hw_counters = match hw.iter().flatten().next() {
        None => "on".into(),
        Some(why) => unavailable(why),
    };
    Some(a)
}

/// "not available here: <why>", said once where `why` already says it
/// (perf's "not available on this machine (no PMU): ...").
fn unavailable(why: &str) -> String {
    if why.starts_with("not available") {
        why.to_string()
    } else {
        format!("not available here: {why}")
    }
}

/// Fill each job's `batch` and the run's `batch_cpu_s` from the batch
/// reference `b` (jobs matched by name).
pub fn apply_batch(r: &mut RunResult, b: &RunResult) {
    let mut total = 0.0;
    for j in r.jobs.iter_mut() {
        let Some(bj) = b.jobs.iter().find(|x| x.name == j.name) else {
            continue;
        };
        total += bj.cpu_s;
        if let Some(acc) = j.account.as_mut() {
            acc.batch = Some(BatchJob {
                wall_s: match (bj.start_s, bj.finish_s) {
                    (Some(s), Some(f)) => f - s,
                    _ => 0.0,
                },
                cpu_s: bj.cpu_s,
                system_cpu_s: bj.system_cpu_s,
                hw: bj.account.as_ref().and_then(|a| a.hw.clone()),
                sw: bj.account.as_ref().and_then(|a| a.sw.clone()),
                anon_huge_running: bj
                    .account
                    .as_ref()
                    .and_then(|a| a.anon_huge_running.clone()),
            });
        }
    }
    if let Some(acc) = r.account.as_mut() {
        acc.batch_cpu_s = Some(total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_that_says_it_is_not_available_is_not_wrapped_again() {
        let pmu = "not available on this machine (no PMU): the kernel has no cycles counter";
        assert_eq!(unavailable(pmu), pmu);
        assert_eq!(
            unavailable("rusage only: no root"),
            "not available here: rusage only: no root"
        );
    }
}
