//! The cgroup v2 backend on this kernel's cgroup2 mount. On a hybrid host
//! (v1 controllers + /sys/fs/cgroup/unified) that mount has no memory
//! controller, but its freezer (cgroup.freeze) works, so group management
//! and freezing run for real here; the memory paths are covered by the
//! fake-tree tests. Needs root; skips loudly otherwise.

mod common;

use common::*;
use memgang_linux::cgroup::v2::V2;
use memgang_linux::cgroup::CgroupBackend;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

#[test]
#[ignore = "needs root: creates cgroups (scripts/test runs it as root)"]
fn v2_create_freeze_thaw_remove_with_a_real_process() {
    let test = "v2_create_freeze_thaw_remove_with_a_real_process";
    require_root(test, "needs root to create cgroups");
    let Some(root) = v2_mount() else {
        skip_unless(false, test, "no cgroup2 mount");
        return;
    };
    let v2 = V2::new(&root);
    if skip_unless(
        v2.can_freeze(),
        test,
        "this kernel's cgroup2 has no cgroup.freeze (Linux < 5.2)",
    ) {
        return;
    }
    let backend: Arc<dyn CgroupBackend> = Arc::new(v2);
    let pool = test_group("v2");
    let job = pool.join("job-a").unwrap();
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![pool.clone(), job.clone()];

    backend.create(&job).unwrap();
    assert!(backend.exists(&pool) && backend.exists(&job));
    let sleeper = spawn_in(backend.as_ref(), &job, Command::new("sleep").arg("30"));
    guard.children.push(sleeper);
    let burner = spawn_in(
        backend.as_ref(),
        &job,
        Command::new("sh").args(["-c", "while :; do :; done"]),
    );
    guard.children.push(burner);
    let mut expect = vec![sleeper, burner];
    expect.sort();
    assert_eq!(backend.procs_recursive(&pool).unwrap(), expect);
    assert!(backend.procs(&pool).unwrap().is_empty());

    backend.set_frozen(&job, true).unwrap();
    assert!(backend.is_frozen(&job).unwrap());
    let events = std::fs::read_to_string(job.under(&root).join("cgroup.events")).unwrap();
    assert!(events.contains("frozen 1"), "{events}");
    let before = cpu_ticks(burner);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cpu_ticks(burner), before, "a frozen process used CPU");
    assert_ne!(state(burner), Some('R'));

    backend.set_frozen(&job, false).unwrap();
    assert!(!backend.is_frozen(&job).unwrap());
    assert!(
        eventually(Duration::from_secs(5), || cpu_ticks(burner) > before),
        "thawed burner never ran"
    );

    // PSI exists per group in v2 whatever the controllers (if the kernel
    // has PSI at all).
    if std::path::Path::new("/proc/pressure/memory").exists() {
        assert!(backend.memory_pressure(&job).is_some());
    }
    if !memgang_linux::cgroup::v2::has_controller(&root, "memory") {
        let e = backend.memory_stat(&job).unwrap_err().to_string();
        assert!(e.contains("memory controller is not enabled"), "{e}");
    }

    let e = backend.remove(&pool).unwrap_err().to_string();
    assert!(e.contains("still in it"), "{e}");
    guard.kill_all();
    backend.remove(&pool).unwrap();
    assert!(!backend.exists(&pool));
    backend.remove(&pool).unwrap();
}
