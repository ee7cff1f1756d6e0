//! Leftovers of a memgang that could not clean up (SIGKILL, power loss):
//! pool cgroups named `memgang-<pid>` whose process is gone.

use anyhow::Result;
use memgang_linux::cgroup::{self, CgroupBackend, GroupPath};

fn owner_alive(group: &GroupPath) -> bool {
    match group
        .as_str()
        .strip_prefix("memgang-")
        .and_then(|p| p.parse::<i32>().ok())
    {
        // SAFETY: kill with signal 0 only checks that the process exists.
        Some(pid) => (unsafe { libc::kill(pid, 0) }) == 0,
        // Not one of ours by name: never touch it.
        None => true,
    }
}

fn stale(backend: &dyn CgroupBackend) -> Result<Vec<GroupPath>> {
    Ok(backend
        .list_groups("memgang-")?
        .into_iter()
        .filter(|g| !owner_alive(g))
        .collect())
}

/// memgang's cgroups on this machine, each with whether its memgang lives.
pub fn list() -> Result<Vec<(String, bool)>> {
    let backend = cgroup::detect()?;
    Ok(backend
        .list_groups("memgang")?
        .into_iter()
        .map(|g| {
            let alive = owner_alive(&g);
            (g.as_str().to_string(), alive)
        })
        .collect())
}

/// Removes the pools (and their jobs) of memgangs that are gone; returns
/// the pools removed.
pub fn run() -> Result<Vec<String>> {
    let backend = cgroup::detect()?;
    let mut removed = Vec::new();
    for pool in stale(backend.as_ref())? {
        let jobs = backend.list_children(&pool)?;
        for job in jobs {
            memgang_runtime::teardown_group(backend.as_ref(), &job)?;
        }
        memgang_runtime::teardown_group(backend.as_ref(), &pool)?;
        removed.push(pool.as_str().to_string());
    }
    Ok(removed)
}
