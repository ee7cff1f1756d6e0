//! cgroup v1 on the real kernel: limits, membership, freezer, memory
//! accounting and teardown. Needs root and a v1 memory hierarchy; skips
//! loudly otherwise.

mod common;

use common::*;
use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_linux::freeze;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

fn backend(test: &str) -> Option<Arc<dyn CgroupBackend>> {
    v1_backend(test, "needs root to create cgroups")
}

#[test]
fn v1_pool_job_limits_membership_freeze_and_stats() {
    let Some(backend) = backend("v1_pool_job_limits_membership_freeze_and_stats") else {
        return;
    };
    let pool = test_group("v1");
    let job = pool.join("job-a").unwrap();
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![pool.clone(), job.clone()];

    backend.create(&pool).unwrap();
    backend.create(&pool).unwrap(); // idempotent
    backend.set_memory_limit(&pool, Some(64 * MIB)).unwrap();
    assert_eq!(backend.memory_limit(&pool).unwrap(), Some(64 * MIB));
    backend.create(&job).unwrap();
    assert_eq!(
        backend.memory_limit(&job).unwrap(),
        None,
        "a new group is unlimited"
    );
    backend.set_memory_limit(&job, Some(48 * MIB)).unwrap();
    backend.set_memory_limit(&job, None).unwrap();
    assert_eq!(backend.memory_limit(&job).unwrap(), None);

    // A process that touches 32 MiB, and a CPU burner.
    let alloc = fork_allocator(backend.as_ref(), &job, 32 * MIB as usize);
    guard.children.push(alloc);
    let burner = spawn_in(
        backend.as_ref(),
        &job,
        Command::new("sh").args(["-c", "while :; do :; done"]),
    );
    guard.children.push(burner);

    assert!(
        eventually(Duration::from_secs(10), || backend
            .memory_stat(&job)
            .is_ok_and(|s| s.anon_bytes >= 30 * MIB)),
        "allocator's memory never showed up: {:?}",
        backend.memory_stat(&job)
    );
    let stat = backend.memory_stat(&job).unwrap();
    assert!(stat.usage_bytes >= stat.anon_bytes, "{stat:?}");
    assert!(stat.usage_bytes <= 64 * MIB, "{stat:?}");
    let pool_stat = backend.memory_stat(&pool).unwrap();
    assert!(
        pool_stat.anon_bytes >= 30 * MIB,
        "pool figures include the job: {pool_stat:?}"
    );
    let (rss, _swap) = memgang_linux::counters::process_rss_swap(alloc).unwrap();
    assert!(rss >= 30 * MIB, "rss {rss}");

    let mut procs = backend.procs(&job).unwrap();
    procs.sort();
    let mut expect = vec![alloc, burner];
    expect.sort();
    assert_eq!(procs, expect);
    assert!(backend.procs(&pool).unwrap().is_empty());
    assert_eq!(backend.procs_recursive(&pool).unwrap(), expect);

    // Cgroup freezer through the Freezer interface.
    assert!(backend.can_freeze());
    let freezer = freeze::choose(backend.clone(), false);
    assert_eq!(freezer.name(), "cgroup-freezer");
    freezer.freeze(&job).unwrap();
    assert!(backend.is_frozen(&job).unwrap());
    for &pid in &expect {
        let s = state(pid).unwrap();
        assert_ne!(s, 'R', "pid {pid} runs while frozen");
    }
    let before = cpu_ticks(burner);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cpu_ticks(burner), before, "a frozen process used CPU");
    freezer.thaw(&job).unwrap();
    assert!(!backend.is_frozen(&job).unwrap());
    assert!(
        eventually(Duration::from_secs(5), || cpu_ticks(burner) > before),
        "thawed burner never ran"
    );

    // Leftover listing, as `memgang cleanup` uses it.
    assert_eq!(
        backend.list_groups(pool.as_str()).unwrap(),
        vec![pool.clone()]
    );
    assert_eq!(backend.list_children(&pool).unwrap(), vec![job.clone()]);

    // Removing a group with processes fails and says why.
    let e = backend.remove(&pool).unwrap_err().to_string();
    assert!(e.contains("job-a") && e.contains("still in it"), "{e}");

    guard.kill_all();
    assert!(backend.procs_recursive(&pool).unwrap().is_empty());
    backend.remove(&pool).unwrap();
    assert!(!backend.exists(&pool) && !backend.exists(&job));
    backend.remove(&pool).unwrap(); // already gone: fine
}

#[test]
fn v1_limit_is_enforced() {
    let Some(backend) = backend("v1_limit_is_enforced") else {
        return;
    };
    let have_swap =
        memgang_linux::counters::SwapStatus::read().is_ok_and(|s| s.total_bytes > s.used_bytes);
    if skip_unless(
        !have_swap,
        "v1_limit_is_enforced",
        "swap is on; the group would swap instead of hitting OOM",
    ) {
        return;
    }
    let pool = test_group("v1-oom");
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![pool.clone()];
    backend.create(&pool).unwrap();
    backend.set_memory_limit(&pool, Some(16 * MIB)).unwrap();
    let pid = fork_allocator(backend.as_ref(), &pool, 64 * MIB as usize);
    guard.children.push(pid);
    let mut status = 0;
    // SAFETY: blocking wait on our own child, which the OOM killer ends.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
        "status {status:#x}"
    );
    guard.children.clear();
}

#[test]
fn v1_group_names_are_checked() {
    // No kernel needed: a bad name never reaches the file system.
    assert!(GroupPath::new("memgang-x/../../etc").is_err());
}
