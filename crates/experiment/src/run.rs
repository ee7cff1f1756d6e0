//! Running an experiment on this node: checked against the node's memory
//! and swap, its jobs added to one executor `Node` and stepped to their
//! end, the result assembled, the batch reference run or read.

use crate::baseline::{self, Baseline};
use crate::experiment::Experiment;
use anyhow::{bail, Context, Result};
use memgang_core::capacity::{self, Holding, Refusal};
use memgang_core::PolicyKind;
use memgang_linux::cgroup;
use memgang_linux::counters::NodeCounters;
use memgang_results::{JobResult, Machine, RunResult, SCHEMA_VERSION};
use memgang_runtime::account;
use memgang_runtime::executor::{self, Env, Launch, Node, NodeReport, NodeSettings, Progress};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct RunOptions {
    /// Where each job's stdout and stderr go (a directory per job).
    pub logs: Option<PathBuf>,
    pub baseline: Baseline,
    /// Who is shown the run as it goes (`memgang run`'s status line on a
    /// terminal); None: notes go to the log.
    pub progress: Option<Arc<dyn Progress>>,
    /// Stop jobs with SIGSTOP/SIGCONT even where a cgroup freezer exists.
    pub signals: bool,
}

/// Run `exp`, with its batch reference as `opts.baseline` says. SIGINT,
/// SIGTERM and SIGHUP end the run cleanly: jobs killed, cgroups removed, and
/// a result marked `interrupted` returned.
pub fn run(exp: &Experiment, opts: &RunOptions) -> Result<RunResult> {
    require_root()?;
    let backend: Arc<dyn cgroup::CgroupBackend> =
        Arc::from(cgroup::detect().context("finding a cgroup hierarchy with a memory controller")?);
    check_pool(exp, &memgang_linux::counters::ProcCounters)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut registered = Vec::new();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        registered.push(
            signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?,
        );
    }
    let logs = opts.logs.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("memgang-logs-{}", std::process::id()))
    });
    let env = Env {
        freezer: memgang_linux::freeze::choose(backend.clone(), opts.signals),
        paging: Arc::new(memgang_linux::paging::Madvise),
        counters: Arc::new(memgang_linux::counters::ProcCounters),
        machine: memgang_runtime::machine(backend.as_ref(), opts.signals),
        backend,
        logs,
        stop: stop.clone(),
        progress: opts.progress.clone(),
    };
    let result = run_with_baseline(exp, opts, &env);
    for id in registered {
        signal_hook::low_level::unregister(id);
    }
    result
}

fn run_with_baseline(exp: &Experiment, opts: &RunOptions, env: &Env) -> Result<RunResult> {
    if exp.policy == PolicyKind::Batch {
        let mut r = execute(exp, env)?;
        let m = r.makespan_s;
        baseline::apply(&mut r, m, "self".into());
        let own = r.clone();
        account::apply_batch(&mut r, &own);
        if opts.baseline != Baseline::None && baseline::usable(&r) {
            if let Err(e) = baseline::store(exp, &r) {
                tracing::warn!("could not cache the batch reference: {e:#}");
            }
        }
        return Ok(r);
    }
    let reference = match &opts.baseline {
        Baseline::None => None,
        Baseline::File(path) => {
            let b = baseline::load(path)?;
            if !baseline::usable(&b) {
                bail!("{} is not a complete batch run: use a result of `memgang run --policy batch` in which every job succeeded", path.display());
            }
            Some((b, format!("file {}", path.display())))
        }
        Baseline::Auto | Baseline::Run => {
            let hit = if opts.baseline == Baseline::Auto {
                baseline::cached(exp, &env.machine)
            } else {
                None
            };
            match hit {
                Some((path, b)) => Some((b, format!("cache {}", path.display()))),
                None => {
                    if let Some(p) = &env.progress {
                        p.note("running the batch reference first (cached for the next runs of these jobs)");
                    }
                    tracing::info!("running the batch reference of {}", exp.name);
                    let b = execute(&exp.with_policy(PolicyKind::Batch), env)?;
                    if b.interrupted {
                        return Ok(b);
                    }
                    if baseline::usable(&b) {
                        if let Err(e) = baseline::store(exp, &b) {
                            tracing::warn!("could not cache the batch reference: {e:#}");
                        }
                        Some((b, "run".to_string()))
                    } else {
                        tracing::warn!(
                            "the batch reference run had failed jobs: no switching overhead"
                        );
                        None
                    }
                }
            }
        }
    };
    let mut r = execute(exp, env)?;
    if let Some((b, how)) = reference {
        baseline::apply(&mut r, b.makespan_s, how);
        account::apply_batch(&mut r, &b);
    }
    Ok(r)
}

fn require_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "memgang run needs root: it creates cgroups, sets memory limits and freezes jobs. \
             Run it with sudo. Without root you can still use `memgang report`, `memgang-workload` \
             and `memgang run --check` to validate an experiment file."
        );
    }
    Ok(())
}

/// Refuse an experiment whose declared jobs the node cannot hold under its
/// policy, by the capacity model's rule for an experiment
/// ([`capacity::experiment_may_run`]: each job alone in the pool and the
/// usable swap, and all of them as the policy holds them). Refused, not
/// serialized: the policy, not `memgang run`, decides when jobs run. Jobs
/// that declare no memory are not counted.
fn check_pool(exp: &Experiment, counters: &dyn NodeCounters) -> Result<()> {
    let declared: Vec<(&str, u64)> = exp
        .jobs
        .iter()
        .filter_map(|j| Some((j.spec.name.as_str(), j.spec.memory_bytes?)))
        .collect();
    let room =
        memgang_runtime::memory::capacity(counters, exp.pool_memory, 0, capacity::SWAP_RESERVE);
    let fmt = memgang_core::units::format_bytes;
    let fix =
        "Raise pool_memory, add swap with `memgang testbed up --swap SIZE`, or declare less memory";
    let bytes: Vec<u64> = declared.iter().map(|d| d.1).collect();
    match capacity::experiment_may_run(&bytes, &room, Holding::of(exp.policy)) {
        Ok(()) => {}
        Err(Refusal::Alone { index, bytes }) => bail!(
            "experiment {:?}: job {:?} declares {} but the node holds at most {}, so it cannot run. {fix}.",
            exp.name,
            declared[index].0,
            fmt(bytes),
            room.describe()
        ),
        Err(Refusal::Together(why)) => bail!(
            "experiment {:?} cannot run as it is under {}: {why}. {fix}, run fewer jobs at once \
             (or under policy batch).",
            exp.name,
            exp.policy
        ),
    }
    if let Some(&(name, big)) = declared.iter().max_by_key(|d| d.1) {
        if big > exp.pool_memory {
            tracing::warn!(
                "job {name:?} declares {}, more than the pool's {}: it will page even when alone",
                fmt(big),
                fmt(exp.pool_memory)
            );
        }
    }
    Ok(())
}

/// The node an experiment runs on: this process's pool, the machine's CPUs
/// or the widest job's ranks, the experiment's policy.
pub(crate) fn settings(exp: &Experiment, machine: &Machine) -> NodeSettings {
    NodeSettings {
        pool: format!("memgang-{}", std::process::id()),
        pool_memory: exp.pool_memory,
        cpus: machine
            .cpus
            .max(exp.jobs.iter().map(|j| j.spec.ranks).max().unwrap_or(1)),
        policy: exp
            .policy
            .build_with(exp.quantum(), exp.switch, exp.overlap),
        label: exp.policy.to_string(),
        sample_interval: exp.sample_interval,
        dynamic_coscheduling: exp.dynamic_coscheduling,
        swap_reserve: memgang_core::capacity::SWAP_RESERVE,
    }
}

/// Run every job of `exp` to its end (or until `env.stop` is set) and
/// return what happened.
pub fn execute(exp: &Experiment, env: &Env) -> Result<RunResult> {
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut node = Node::new(settings(exp, &env.machine), env.clone())?;
    for j in &exp.jobs {
        node.add_job(j.spec.clone(), Launch::command(&j.command, &j.env))?;
    }
    let interrupted = executor::run_to_end(&mut node, &env.stop)?;
    Ok(result(
        exp,
        &env.machine,
        node.finish(),
        interrupted,
        started_unix_s,
    ))
}

/// The run's result from what its node recorded.
fn result(
    exp: &Experiment,
    machine: &Machine,
    report: NodeReport,
    interrupted: bool,
    started_unix_s: u64,
) -> RunResult {
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
        machine: machine.clone(),
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
        switch_sampling_s: report
            .switches
            .iter()
            .filter_map(|s| s.steps.as_ref())
            .fold(0.0, |t, s| t + s.sampling_s),
        interrupted,
        jobs,
        timeline: report.timeline,
        switches: report.switches,
        samples: report.samples,
        account: None,
        executor: memgang_linux::process::own_usage().map(|(user, system, rss)| {
            memgang_results::ExecutorUsage {
                user_cpu_s: user,
                system_cpu_s: system,
                max_rss_bytes: rss,
            }
        }),
    };
    result.count_faults_after_switches();
    result.account = account::run_account(&result);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Overrides;
    use memgang_linux::testing::FakeCounters;

    fn exp(policy: &str, jobs: usize) -> Experiment {
        let mut text = format!("policy = \"{policy}\"\npool_memory = \"256M\"\n");
        for i in 0..jobs {
            text += &format!("[[job]]\nname = \"j{i}\"\ncommand = [\"true\"]\nmemory = \"210M\"\n");
        }
        Experiment::parse(&text, "exp.toml", &Overrides::default()).unwrap()
    }

    #[test]
    fn an_experiment_is_refused_when_its_switches_could_not_exchange_the_jobs() {
        // Pool 256M, swap 320M less the 64M reserve: one job of 210M fits,
        // two under gang need 420M + 210M read back at a switch > 512M.
        let swap = FakeCounters::with_swap(320 << 20);
        check_pool(&exp("gang", 1), &swap).unwrap();
        let err = check_pool(&exp("gang", 2), &swap).unwrap_err().to_string();
        assert!(
            err.contains("exp") && err.contains("exchange") && err.contains("--swap"),
            "{err}"
        );
        // One at a time, or all at once without a switch, they fit.
        check_pool(&exp("batch", 2), &swap).unwrap();
        check_pool(&exp("cosched", 2), &swap).unwrap();
        // With swap for both sides of the exchange, gang takes them.
        check_pool(&exp("gang", 2), &FakeCounters::with_swap(640 << 20)).unwrap();
        // A job larger than pool and swap together never runs.
        let mut small = exp("batch", 1);
        small.pool_memory = 128 << 20;
        let err = check_pool(&small, &FakeCounters::with_swap(0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot run"), "{err}");
    }

    /// The check adds only its messages to the capacity model's rule for
    /// an experiment (whose table against memgangd's admission is core's
    /// `memgang_run_and_memgangd_judge_alike_but_where_they_mean_to_differ`).
    #[test]
    fn the_check_is_the_capacity_models_rule_for_an_experiment() {
        let swap = FakeCounters::with_swap(320 << 20);
        let room = memgang_runtime::memory::capacity(&swap, 256 << 20, 0, capacity::SWAP_RESERVE);
        for policy in PolicyKind::ALL {
            for jobs in 1..4 {
                let rule = capacity::experiment_may_run(
                    &vec![210 << 20; jobs],
                    &room,
                    Holding::of(policy),
                );
                let check = check_pool(&exp(policy.name(), jobs), &swap);
                assert_eq!(check.is_ok(), rule.is_ok(), "{policy}, {jobs} job(s)");
            }
        }
        let err = check_pool(&exp("cosched", 3), &swap)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("run at once") && err.contains("cosched"),
            "{err}"
        );
    }

    #[test]
    fn a_run_result_is_made_from_what_the_node_recorded() {
        let job = JobResult {
            name: "j0".into(),
            start_s: Some(0.5),
            finish_s: Some(2.0),
            completion_s: Some(2.0),
            exit_code: Some(0),
            ..JobResult::default()
        };
        let report = |end_s: f64| NodeReport {
            jobs: vec![job.clone()],
            timeline: Vec::new(),
            switches: Vec::new(),
            samples: Vec::new(),
            swap_in_pages: 3,
            swap_out_pages: 4,
            end: std::time::Duration::from_secs_f64(end_s),
        };
        let machine = Machine {
            hostname: "t".into(),
            kernel: "t".into(),
            cpus: 1,
            memory_bytes: 0,
            swap_bytes: 0,
            cgroup: "t".into(),
            freezer: "t".into(),
        };
        let r = result(&exp("cosched", 1), &machine, report(2.5), false, 7);
        assert_eq!((r.schema, r.policy.as_str()), (SCHEMA_VERSION, "cosched"));
        assert_eq!((r.makespan_s, r.started_unix_s), (2.0, 7));
        assert_eq!((r.swap_in_pages, r.swap_out_pages), (3, 4));
        assert!(r.jobs[0].ok() && !r.interrupted);
        // An interrupted run lasted until the interruption.
        let r = result(&exp("cosched", 1), &machine, report(2.5), true, 7);
        assert_eq!(r.makespan_s, 2.5);
        assert!(r.interrupted);
    }
}
