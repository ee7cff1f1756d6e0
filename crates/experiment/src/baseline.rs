//! The batch reference for the switching overhead (paper 000 §4.1).
//!
//! The overhead of a time-shared run is measured against a batch run of
//! the same jobs on the same machine and pool. By default memgang keeps the
//! batch result of every experiment it ran in a cache keyed by what decides
//! the batch time (jobs, pool size, memgang version, machine); a run whose
//! reference is not cached runs the batch experiment first.

use crate::experiment::Experiment;
use anyhow::{Context, Result};
use memgang_results::{Machine, RunResult};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq)]
pub enum Baseline {
    /// The cached batch result if there is one, else a batch run now.
    #[default]
    Auto,
    /// Always run the batch experiment now (and refresh the cache).
    Run,
    /// No reference: the overhead is reported as null.
    None,
    /// The batch result in this JSON file.
    File(PathBuf),
}

impl std::str::FromStr for Baseline {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Baseline::Auto,
            "run" => Baseline::Run,
            "none" => Baseline::None,
            path => Baseline::File(path.into()),
        })
    }
}

/// Where cached references live: $MEMGANG_CACHE, else the XDG cache dir.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MEMGANG_CACHE") {
        return d.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"));
    base.join("memgang").join("baseline")
}

/// The cache key: everything that decides how long the batch run takes.
pub fn key(exp: &Experiment, machine: &Machine) -> String {
    let jobs: Vec<_> = exp
        .jobs
        .iter()
        .map(|j| {
            (
                &j.spec.name,
                &j.command,
                j.spec.ranks,
                j.spec.arrival.as_nanos() as u64,
                &j.env,
            )
        })
        .collect();
    let material = serde_json::json!({
        "memgang": env!("CARGO_PKG_VERSION"),
        "jobs": jobs,
        "pool_memory": exp.pool_memory,
        "host": [&machine.hostname, &machine.kernel, machine.cpus, machine.memory_bytes, machine.swap_bytes],
    });
    let digest = Sha256::digest(material.to_string().as_bytes());
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

pub fn cached(exp: &Experiment, machine: &Machine) -> Option<(PathBuf, RunResult)> {
    let path = cache_dir().join(format!("{}.json", key(exp, machine)));
    let result = load(&path).ok()?;
    Some((path, result))
}

pub fn store(exp: &Experiment, result: &RunResult) -> Result<PathBuf> {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{}.json", key(exp, &result.machine)));
    std::fs::write(&path, serde_json::to_vec_pretty(result)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

pub fn load(path: &Path) -> Result<RunResult> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&text)
        .with_context(|| format!("{} is not a memgang result file", path.display()))
}

/// Fill in the overhead of `result` from a batch reference.
pub fn apply(result: &mut RunResult, batch_makespan_s: f64, how: String) {
    result.batch_makespan_s = Some(batch_makespan_s);
    result.switching_overhead =
        memgang_core::metrics::switching_overhead(result.makespan_s, batch_makespan_s);
    result.baseline = how;
}

/// A batch result is a valid reference only if every job completed.
pub fn usable(batch: &RunResult) -> bool {
    batch.policy == "batch" && !batch.interrupted && batch.jobs.iter().all(|j| j.ok())
}
