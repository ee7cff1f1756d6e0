//! The SIGSTOP/SIGCONT freezer on real processes that keep forking, in a
//! real cgroup (whichever backend this machine has). Needs root.

mod common;

use common::*;
use memgang_linux::cgroup::{self, CgroupBackend};
use memgang_linux::freeze::{Freezer, SignalFreezer};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// Parent pid, field 4 of /proc/<pid>/stat.
fn parent(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
#[ignore = "needs root: creates cgroups (scripts/test runs it as root)"]
fn signal_freezer_stops_a_forking_tree_and_resumes_it() {
    let test = "signal_freezer_stops_a_forking_tree_and_resumes_it";
    require_root(test, "needs root to create cgroups");
    let backend: Arc<dyn CgroupBackend> = match cgroup::detect() {
        Ok(b) => Arc::from(b),
        Err(e) => {
            skip_unless(false, test, &format!("no cgroup backend: {e}"));
            return;
        }
    };
    let pool = test_group("sig");
    let job = pool.join("job-a").unwrap();
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![pool.clone(), job.clone()];
    backend.create(&job).unwrap();

    // Two long children and a loop that forks a new process all the time:
    // a scan that missed a fresh child would leave it running.
    let sh = spawn_in(
        backend.as_ref(),
        &job,
        Command::new("sh").args(["-c", "sleep 30 & sleep 30 & while :; do /bin/true; done"]),
    );
    guard.children.push(sh);
    assert!(
        eventually(Duration::from_secs(5), || backend
            .procs_recursive(&pool)
            .is_ok_and(|p| p.len() >= 3)),
        "children never appeared"
    );

    let freezer = SignalFreezer::new(backend.clone());
    assert_eq!(freezer.name(), "signals");
    for round in 0..3 {
        // Freezing the pool reaches the job's processes (recursive).
        freezer.freeze(&pool).unwrap();
        let pids = backend.procs_recursive(&pool).unwrap();
        assert!(pids.len() >= 3, "round {round}: {pids:?}");
        for &pid in &pids {
            match state(pid) {
                Some('T') => {}
                // dash starts commands with vfork(2): a parent whose child
                // was stopped before exec waits in 'D' (and would stop as
                // soon as it returned to user space).
                Some('D') => assert!(
                    pids.iter().any(|&c| parent(c) == Some(pid) && state(c) == Some('T')),
                    "round {round}: pid {pid} in D without a stopped vfork child (members {pids:?})"
                ),
                s => panic!("round {round}: pid {pid} not stopped: {s:?} (members {pids:?})"),
            }
        }
        assert!(freezer.is_frozen(&pool).unwrap(), "round {round}");
        // Still stable a little later: nothing escaped and forked on.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            backend.procs_recursive(&pool).unwrap(),
            pids,
            "round {round}: group changed while stopped"
        );

        freezer.thaw(&pool).unwrap();
        assert!(
            eventually(Duration::from_secs(2), || {
                backend
                    .procs_recursive(&pool)
                    .unwrap()
                    .iter()
                    .all(|&p| state(p) != Some('T'))
            }),
            "round {round}: a process stayed stopped after thaw"
        );
        assert!(!freezer.is_frozen(&pool).unwrap(), "round {round}");
    }
}
