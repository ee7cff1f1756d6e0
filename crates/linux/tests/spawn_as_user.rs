//! A service (root) starts a job as another user: the job is in its cgroup
//! and runs with that user's uid, gid and groups only. Needs root.

mod common;

use common::*;
use memgang_linux::cgroup::{self, spawn_into_as, CgroupBackend, Credentials};
use std::process::Command;
use std::sync::Arc;

#[test]
#[ignore = "needs root: creates cgroups and drops to another uid (scripts/test runs it as root)"]
/// The pid goes to [`Cleanup`], which reaps it.
#[allow(clippy::zombie_processes)]
fn a_job_joins_its_cgroup_then_runs_as_the_user() {
    let test = "a_job_joins_its_cgroup_then_runs_as_the_user";
    require_root(test, "needs root to create cgroups and change uid");
    let backend: Arc<dyn CgroupBackend> = Arc::from(cgroup::detect().unwrap());
    let job = test_group("asuser").join("job-a").unwrap();
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![job.parent().unwrap(), job.clone()];
    backend.create(&job).unwrap();

    // nobody's uid on Debian; groups chosen so that none is root's.
    let user = Credentials {
        uid: 65534,
        gid: 65534,
        groups: vec![65534, 4242],
        // A login's locked-memory limit, whatever the caller's.
        limits: vec![memgang_linux::limits::Limit {
            resource: libc::RLIMIT_MEMLOCK,
            soft: 64 << 10,
            hard: 64 << 10,
        }],
    };
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "id -u; id -g; id -G; ulimit -l; sleep 5"])
        .stdout(out.reopen().unwrap());
    let child = spawn_into_as(backend.as_ref(), &job, &mut cmd, Some(&user), None)
        .unwrap()
        .unwrap();
    let pid = child.id() as i32;
    guard.children.push(pid);
    assert!(backend.procs(&job).unwrap().contains(&pid));
    assert!(eventually(std::time::Duration::from_secs(5), || {
        std::fs::read_to_string(out.path()).is_ok_and(|t| t.lines().count() >= 4)
    }));
    let text = std::fs::read_to_string(out.path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "65534");
    assert_eq!(lines[1], "65534");
    let mut groups: Vec<&str> = lines[2].split_whitespace().collect();
    groups.sort();
    assert_eq!(
        groups,
        vec!["4242", "65534"],
        "root's groups leaked: {text}"
    );
    assert_eq!(lines[3], "64", "the locked-memory limit in KiB: {text}");
    // As nobody the job cannot move itself out of its cgroup.
    let status = std::fs::metadata(format!("/proc/{pid}/status")).unwrap();
    assert!(std::os::unix::fs::MetadataExt::uid(&status) == 65534);

    // The working directory is entered as the user: root's private
    // directory is out of the job's reach (std's current_dir would enter
    // it as root, before the switch).
    let private = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut cmd = Command::new("true");
    let e = spawn_into_as(
        backend.as_ref(),
        &job,
        &mut cmd,
        Some(&user),
        Some(private.path()),
    )
    .unwrap()
    .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    // Root's own spawn enters it.
    let mut cmd = Command::new("pwd");
    let out = tempfile::NamedTempFile::new().unwrap();
    cmd.stdout(out.reopen().unwrap());
    let mut child = spawn_into_as(backend.as_ref(), &job, &mut cmd, None, Some(private.path()))
        .unwrap()
        .unwrap();
    child.wait().unwrap();
    assert_eq!(
        std::fs::read_to_string(out.path()).unwrap().trim(),
        private.path().to_str().unwrap()
    );
}
