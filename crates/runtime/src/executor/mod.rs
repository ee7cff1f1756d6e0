//! The executor: carries a core policy's actions out on real processes on
//! the real clock, and records what happened.
//!
//! One thread. [`Node`] owns the pool cgroup, the scheduler and the jobs;
//! each [`Node::step`] wakes when a job's first process exits (its pidfd
//! becomes readable), when the scheduler's next timer or arrival is due, or
//! when the next counter sample is; it never busy-waits. [`execute`] runs an
//! experiment to its end with it; a service adds jobs as they come
//! ([`Node::add_job`]) and steps the same node.
//!
//! Modules, by concern:
//! * `node`: the node and its loop (set-up, one iteration, the end);
//! * `switch`: carrying out actions, a switch's page-out, page-in and
//!   make-room, timed as one;
//! * `sampling`: the counters read between switches, the paging trace,
//!   memory pressure, the progress line;
//! * `jobs`: starting, reaping, finishing and cancelling jobs, and tearing
//!   every cgroup down on any exit path.
//!
//! Every kernel call goes through the mechanisms in [`Env`] (traits of
//! `memgang-linux`), so the executor is tested with fakes (`tests`).

mod jobs;
mod node;
mod sampling;
mod switch;
#[cfg(test)]
mod tests;

pub use crate::procs::Launch;
pub use node::{Node, NodeReport, NodeSettings};

use crate::experiment::Experiment;
use crate::results::{JobResult, Machine, RunResult, SCHEMA_VERSION};
use anyhow::Result;
use memgang_linux::cgroup::CgroupBackend;
use memgang_linux::counters::NodeCounters;
use memgang_linux::freeze::Freezer;
use memgang_linux::paging::Paging;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The mechanisms and surroundings a [`Node`] runs with.
#[derive(Clone)]
pub struct Env {
    pub backend: Arc<dyn CgroupBackend>,
    pub freezer: Arc<dyn Freezer>,
    pub paging: Arc<dyn Paging>,
    pub counters: Arc<dyn NodeCounters>,
    pub machine: Machine,
    /// Where jobs' output goes by default (a directory per job).
    pub logs: PathBuf,
    /// Set (by a signal handler) to end [`execute`] early.
    pub stop: Arc<AtomicBool>,
    pub progress: indicatif::ProgressBar,
}

impl Env {
    /// Say `msg` on the progress line, or in a service's log.
    pub(crate) fn say(&self, msg: String) {
        if self.progress.is_hidden() {
            // A service's log: a job's error may quote what a user wrote
            // (its working directory), which must not forge a line.
            tracing::info!("{}", memgang_core::text::printable(&msg));
        } else {
            self.progress.println(msg);
        }
    }
}

/// Run every job of `exp` to its end (or until `env.stop` is set) and
/// return what happened.
pub fn execute(exp: &Experiment, env: &Env) -> Result<RunResult> {
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut node = Node::new(NodeSettings::for_experiment(exp, &env.machine), env.clone())?;
    for j in &exp.jobs {
        node.add_job(j.spec.clone(), Launch::command(&j.command, &j.env))?;
    }
    let interrupted = loop {
        if env.stop.load(Ordering::Relaxed) {
            break true;
        }
        if node.step(None)? {
            break false;
        }
    };
    let report = node.finish();

    let jobs: Vec<JobResult> = report.jobs;
    let first_arrival = jobs
        .iter()
        .map(|j| j.arrival_s)
        .fold(f64::INFINITY, f64::min);
    let last_finish = jobs.iter().filter_map(|j| j.finish_s).fold(0.0, f64::max);
    // An interrupted run lasted until the interruption.
    let last_finish = if interrupted {
        report.end.as_secs_f64()
    } else {
        last_finish
    };
    let makespan_s = (last_finish - first_arrival).max(0.0);
    let completions: Vec<f64> = jobs.iter().filter_map(|j| j.completion_s).collect();
    let fault_rates: Vec<f64> = jobs.iter().filter_map(|j| j.major_faults_per_min).collect();
    let fault_stats = memgang_core::metrics::mean_std(&fault_rates);
    let mut result = RunResult {
        schema: SCHEMA_VERSION,
        memgang_version: env!("CARGO_PKG_VERSION").into(),
        experiment: exp.name.clone(),
        policy: exp.policy.name().into(),
        quantum_s: exp.quantum.as_secs_f64(),
        max_switch_share: exp.max_switch_share,
        switch: exp.switch.to_string(),
        overlap: exp
            .policy
            .uses_overlap()
            .then(|| exp.overlap.name().to_string()),
        dynamic_coscheduling: exp.dynamic_coscheduling,
        pool_memory_bytes: exp.pool_memory,
        machine: env.machine.clone(),
        started_unix_s,
        makespan_s,
        switching_overhead: None,
        batch_makespan_s: None,
        baseline: "none".into(),
        fairness: memgang_core::metrics::fairness(makespan_s, &completions),
        major_faults_per_min_mean: fault_stats.map(|(m, _)| m),
        major_faults_per_min_std: fault_stats.map(|(_, sd)| sd),
        swap_in_pages: report.swap_in_pages,
        swap_out_pages: report.swap_out_pages,
        switch_count: report.switches.len(),
        switch_time_s: report.switches.iter().fold(0.0, |t, s| t + s.took_s),
        interrupted,
        jobs,
        timeline: report.timeline,
        switches: report.switches,
        samples: report.samples,
        account: None,
    };
    result.count_faults_after_switches();
    result.account = crate::account::run_account(&result);
    Ok(result)
}
