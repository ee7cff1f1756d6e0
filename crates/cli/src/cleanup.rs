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

pub fn list() -> Result<()> {
    let backend = cgroup::detect()?;
    for g in backend.list_groups("memgang")? {
        println!(
            "cgroup {} ({})",
            g.as_str(),
            if owner_alive(&g) {
                "in use"
            } else {
                "stale: `memgang cleanup` removes it"
            }
        );
    }
    Ok(())
}

pub fn run() -> Result<()> {
    let backend = cgroup::detect()?;
    for pool in stale(backend.as_ref())? {
        let jobs = backend.list_children(&pool)?;
        for job in jobs {
            memgang_runtime::teardown_group(backend.as_ref(), &job)?;
        }
        memgang_runtime::teardown_group(backend.as_ref(), &pool)?;
        println!("removed stale {}", pool.as_str());
    }
    Ok(())
}
