//! memgang-runtime: runs an experiment's jobs on this node under a
//! memgang-core policy, on the real clock, inside a memory pool (a cgroup
//! with a memory limit, one child cgroup per job), and records what
//! happened as a [`RunResult`].
//!
//! The runtime holds no scheduling logic: it carries out the actions the
//! core's [`Scheduler`](memgang_core::Scheduler) returns with the mechanisms
//! of `memgang-linux`, and reports back what the processes did.

pub mod account;
pub mod baseline;
pub mod executor;
pub mod experiment;
mod mechanisms;
pub mod memory;
mod procs;
pub mod results;

pub use baseline::Baseline;
pub use experiment::{Experiment, Overrides};
pub use mechanisms::{page_in, HugeRestore, PageInDone};
pub use results::RunResult;

use anyhow::{bail, Context, Result};
use memgang_core::PolicyKind;
use memgang_linux::cgroup;
use memgang_linux::counters::SwapStatus;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Where each job's stdout and stderr go (a directory per job).
    pub logs: Option<PathBuf>,
    pub baseline: Baseline,
    /// Show a live status line (when stderr is a terminal).
    pub live: bool,
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
    check_pool(exp)?;
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
    let progress = if opts.live {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.enable_steady_tick(std::time::Duration::from_millis(250));
        pb
    } else {
        indicatif::ProgressBar::hidden()
    };
    let env = executor::Env {
        freezer: memgang_linux::freeze::choose(backend.clone(), opts.signals),
        paging: Arc::new(memgang_linux::paging::Madvise),
        counters: Arc::new(memgang_linux::counters::ProcCounters),
        machine: machine(backend.as_ref(), opts.signals),
        backend,
        logs,
        stop: stop.clone(),
        progress,
    };
    let result = run_with_baseline(exp, opts, &env);
    env.progress.finish_and_clear();
    for id in registered {
        signal_hook::low_level::unregister(id);
    }
    result
}

fn run_with_baseline(
    exp: &Experiment,
    opts: &RunOptions,
    env: &executor::Env,
) -> Result<RunResult> {
    if exp.policy == PolicyKind::Batch {
        let mut r = executor::execute(exp, env)?;
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
                    env.progress.println("running the batch reference first (cached for the next runs of these jobs)");
                    tracing::info!("running the batch reference of {}", exp.name);
                    let b = executor::execute(&exp.with_policy(PolicyKind::Batch), env)?;
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
    let mut r = executor::execute(exp, env)?;
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

/// A job larger than the pool can only run if swap holds the rest.
fn check_pool(exp: &Experiment) -> Result<()> {
    let Some(big) = exp
        .jobs
        .iter()
        .filter(|j| j.spec.memory_bytes.is_some())
        .max_by_key(|j| j.spec.memory_bytes)
    else {
        return Ok(());
    };
    let need = big.spec.memory_bytes.unwrap_or(0);
    if need <= exp.pool_memory {
        return Ok(());
    }
    let swap = SwapStatus::read().context("reading swap status from /proc/meminfo")?;
    let free = swap.total_bytes.saturating_sub(swap.used_bytes);
    let fmt = memgang_core::units::format_bytes;
    if need - exp.pool_memory > free {
        bail!(
            "job {:?} declares {} but the pool has {} and free swap is {}: it cannot run. \
             Raise pool_memory, or add swap with `memgang testbed up --swap SIZE`.",
            big.spec.name,
            fmt(need),
            fmt(exp.pool_memory),
            fmt(free)
        );
    }
    tracing::warn!(
        "job {:?} declares {}, more than the pool's {}: it will page even when alone",
        big.spec.name,
        fmt(need),
        fmt(exp.pool_memory)
    );
    Ok(())
}

/// This machine as results describe it.
pub fn machine(backend: &dyn cgroup::CgroupBackend, signals: bool) -> results::Machine {
    let uts = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref()
            .map(|u| f(u).to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    results::Machine {
        hostname: field(|u| u.nodename()),
        kernel: field(|u| u.release()),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        memory_bytes: memgang_linux::counters::memory_total().unwrap_or(0),
        swap_bytes: SwapStatus::read().map_or(0, |s| s.total_bytes),
        cgroup: backend.describe(),
        freezer: if signals || !backend.can_freeze() {
            "signals"
        } else {
            "cgroup-freezer"
        }
        .into(),
    }
}

/// Kill every process of a cgroup (thawing it first) and remove it: for
/// cleaning up after a memgang that was killed.
pub fn teardown_group(
    backend: &dyn cgroup::CgroupBackend,
    group: &cgroup::GroupPath,
) -> Result<()> {
    procs::kill_and_remove(backend, group, None)
}
