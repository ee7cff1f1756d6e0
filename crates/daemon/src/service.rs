//! The service, in rooms: the job table shared between the socket's
//! threads and the node loop (`store`), admission (paging prevention,
//! `admission`), the node loop that drives the executor's [`Node`]
//! (`node`), recovery of a previous daemon's jobs from their cgroups
//! (`recovery`), and the metrics (`metrics` gathers them, `exposition`
//! writes the text, `tally` counts as jobs change), `memgang top`'s view
//! (`top`). Here: the [`Service`]
//! they share, its pools and its capacity.
//!
//! [`Node`]: memgang_runtime::executor::Node

mod admission;
mod exposition;
mod metrics;
mod node;
mod published;
mod queue;
mod recovery;
mod store;
mod tally;
mod top;

pub use store::{unix_now, Shared};

/// Where each job's allowance file is, in the state directory: 0711, so
/// that a job passes through to its own file, whose name (its id and 128
/// random bits) only its environment holds; no one lists the directory.
pub const ALLOWANCE_DIR: &str = "allowance";

use crate::config::Config;
use memgang_core::admission::Capacity;
use memgang_core::capacity::Holding;
use memgang_linux::cgroup::GroupPath;
use memgang_runtime::executor::{Env, NodeSettings};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use store::log_limited;

/// The mechanisms the node loop works with.
pub struct Service {
    pub cfg: Config,
    pub shared: Arc<Shared>,
    pub env: Env,
    /// The cgroup the pools go in: the daemon's own.
    pub parent: Option<GroupPath>,
    /// The metrics text last rendered, for the HTTP listener.
    pub metrics: crate::http::Latest,
}

/// The daemon's own cgroup from /proc/self/cgroup text: the v2 line
/// (`0::/path`) or the v1 memory line (`N:...memory...:/path`). None at
/// the root or if the path is not one memgang can name.
pub fn own_cgroup(text: &str, v2: bool) -> Option<GroupPath> {
    let path = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        let ours = if v2 {
            id == "0" && ctrl.is_empty()
        } else {
            ctrl.split(',').any(|c| c == "memory")
        };
        ours.then_some(path)
    })?;
    let rel = path.trim_matches('/');
    (!rel.is_empty())
        .then(|| GroupPath::new(rel).ok())
        .flatten()
}

impl Service {
    fn new_pool_name(&self) -> String {
        // Unique per start (a restarted daemon may get the same pid while
        // an old pool still holds adopted jobs).
        let leaf = format!(
            "memgang-pool-{}-{}",
            std::process::id(),
            (unix_now() * 1000.0) as u64
        );
        match &self.parent {
            Some(p) => format!("{}/{leaf}", p.as_str()),
            None => leaf,
        }
    }

    /// What admission may promise now: the pools and swap, less what
    /// others use of it, cut to what the policy may promise
    /// ([`Capacity::promised`]).
    fn capacity(&self, pools: &[GroupPath]) -> Capacity {
        let ours: u64 = pools
            .iter()
            .filter_map(|p| self.env.backend.memory_stat(p).ok()?.swap_bytes)
            .sum();
        memgang_runtime::memory::capacity(
            self.env.counters.as_ref(),
            self.cfg.pool_memory,
            ours,
            self.cfg.swap_reserve,
        )
        .promised(Holding::of(self.cfg.policy))
    }

    /// A capacity for refusing submissions before the loop has measured.
    pub fn initial_capacity(&self) -> Capacity {
        self.capacity(&[])
    }

    fn node_settings(&self, pool: String) -> NodeSettings {
        NodeSettings {
            pool,
            pool_memory: self.cfg.pool_memory,
            cpus: self.env.machine.cpus,
            policy: self.cfg.policy.build_with(
                self.cfg.quantum(),
                self.cfg.switch,
                self.cfg.overlap(),
            ),
            label: self.cfg.policy.to_string(),
            sample_interval: Duration::from_secs(1),
            dynamic_coscheduling: self.cfg.dynamic_coscheduling,
            swap_reserve: self.cfg.swap_reserve,
        }
    }

    /// Every pool always has its limit: one removed from under the daemon
    /// (by hand, or by another daemon before pools were owned) is made
    /// again with it before a job goes in.
    fn keep_pool(&self, pool: &GroupPath) {
        let backend = self.env.backend.as_ref();
        if backend.exists(pool) {
            return;
        }
        let made = backend
            .create(pool)
            .and_then(|()| backend.set_memory_limit(pool, Some(self.cfg.pool_memory)));
        match made {
            Ok(()) => tracing::warn!(
                "the pool {} was removed from under memgangd; made again with its limit",
                pool.as_str()
            ),
            Err(e) => log_limited(
                "pool",
                format!("making the pool {} again: {e}", pool.as_str()),
            ),
        }
    }

    /// The pools this daemon made, one a line in `state_dir/pools`,
    /// changed by `f` and written back (atomically).
    fn own_pools(&self, f: impl FnOnce(&mut BTreeSet<String>)) -> BTreeSet<String> {
        let path = self.shared.state_dir.join("pools");
        let mut pools: BTreeSet<String> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
            .collect();
        let before = pools.clone();
        f(&mut pools);
        if pools != before {
            let text: String = pools.iter().map(|p| format!("{p}\n")).collect();
            let write = memgang_linux::files::Dir::open(&self.shared.state_dir)
                .and_then(|d| d.replace("pools", "pools.new", text.as_bytes(), 0o600, true));
            if let Err(e) = write {
                log_limited(
                    "pools",
                    format!("recording memgangd's pools in {}: {e}", path.display()),
                );
            }
        }
        pools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cgroup_reads_v2_and_v1_lines() {
        let v2 = "0::/system.slice/memgangd.service\n";
        assert_eq!(
            own_cgroup(v2, true).unwrap().as_str(),
            "system.slice/memgangd.service"
        );
        assert!(own_cgroup("0::/\n", true).is_none());
        let v1 = "12:freezer:/a\n4:memory:/system.slice/memgangd.service\n0::/x\n";
        assert_eq!(
            own_cgroup(v1, false).unwrap().as_str(),
            "system.slice/memgangd.service"
        );
        // A name memgang cannot use: at the root instead.
        assert!(own_cgroup("0::/user.slice/user@0.service\n", true).is_none());
    }
}
