//! Launching a job as a process tree inside its cgroup, and tearing a
//! cgroup down so that nothing is left behind.

use anyhow::{Context, Result};
use memgang_linux::cgroup::{spawn_into_as, CgroupBackend, Credentials, GroupPath};
use memgang_linux::freeze::signal_group;
use memgang_linux::pidfd::PidFd;
use memgang_linux::process;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long teardown keeps killing a group before giving up on it. Killed
/// processes leave in milliseconds; a process still there after this is in
/// uninterruptible sleep (e.g. a stuck NFS read) and retrying will not help.
const KILL_DEADLINE: Duration = Duration::from_secs(10);
const KILL_POLL: Duration = Duration::from_millis(10);

/// What a job's first process is started with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Launch {
    /// Program and arguments; the program is looked up on PATH, with
    /// memgang's own directory first.
    pub command: Vec<String>,
    /// Variables added to memgang's environment.
    pub env: BTreeMap<String, String>,
    /// Working directory; None: memgang's own.
    pub cwd: Option<PathBuf>,
    /// User, group and supplementary groups to run as, for a service
    /// that runs other users' jobs: the job joins its cgroup, then drops
    /// root (see [`launch`]). With a user, `env` is the job's whole
    /// environment, not an addition to memgang's.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub groups: Vec<u32>,
    /// With a user: the resource limits it runs with (a login's, see
    /// `memgang_linux::limits`); empty: memgang's own.
    pub limits: Vec<memgang_linux::limits::Limit>,
    /// Where its stdout and stderr go; None: `<Env::logs>/<job name>`.
    pub log_dir: Option<PathBuf>,
    /// Its allowance file (`$MEMGANG_ALLOWANCE_FILE`); None: `allowance`
    /// in its log directory. A service that keeps the log directory from
    /// its user (0700) names one the job can reach and no one else can
    /// find.
    pub allowance: Option<PathBuf>,
    /// A file opened read-write as the first process's standard input
    /// (None: /dev/null), by memgang, before the switch to `uid`: how a
    /// service's shim records how the command ended in a file that the
    /// job, as its user, can neither open nor replace.
    pub status: Option<PathBuf>,
    /// The first process stops itself (SIGSTOP) before it starts the
    /// command, and the executor continues it once the job's counters are
    /// attached: memgangd's shim, which forks the command at once, so
    /// that counters attached to it inherit into the command rather than
    /// race its fork.
    pub gate: bool,
}

impl Launch {
    /// `command` with `env`, as an experiment file gives it.
    pub fn command(command: &[String], env: &BTreeMap<String, String>) -> Launch {
        Launch {
            command: command.to_vec(),
            env: env.clone(),
            ..Launch::default()
        }
    }
}

pub struct Launched {
    pub pid: i32,
    pub pidfd: PidFd,
}

/// Start a job's first process as `launch` says, with its stdout/stderr in
/// `log_dir`, already a member of `group` when it execs (see
/// [`spawn_into`]).
pub fn launch(
    backend: &dyn CgroupBackend,
    group: &GroupPath,
    launch: &Launch,
    log_dir: &Path,
) -> Result<Launched> {
    let command = &launch.command;
    let Some(program) = command.first() else {
        anyhow::bail!("the job has an empty command");
    };
    let user = match (launch.uid, launch.gid) {
        (None, None) => None,
        (Some(uid), Some(gid)) => Some(Credentials {
            uid,
            gid,
            groups: launch.groups.clone(),
            limits: launch.limits.clone(),
        }),
        _ => anyhow::bail!("a job run as another user needs both its uid and its gid"),
    };
    std::fs::create_dir_all(log_dir)
        .with_context(|| format!("creating log directory {}", log_dir.display()))?;
    // Never through a link: a directory of memgang's own, but a file a
    // link replaced would be written as root.
    let create = |name: &str| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(log_dir.join(name))
            .with_context(|| format!("creating the job's {name} log in {}", log_dir.display()))
    };
    let stdout = create("stdout")?;
    let stderr = create("stderr")?;

    let mut cmd = Command::new(program);
    cmd.args(&command[1..]);
    if user.is_some() {
        // Another user's job sees the environment it was submitted with.
        cmd.env_clear().envs(&launch.env);
    } else {
        cmd.envs(&launch.env).env("PATH", search_path());
    }
    use std::os::unix::fs::OpenOptionsExt;
    let stdin = match &launch.status {
        Some(p) => Stdio::from(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(p)
                .with_context(|| format!("opening the job's status file {}", p.display()))?,
        ),
        None => Stdio::null(),
    };
    cmd.stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        // Its own process group: a Ctrl-C at the terminal reaches memgang,
        // which then stops the jobs in order, not the jobs behind its back.
        .process_group(0);
    let cwd = launch.cwd.as_deref();
    let child = spawn_into_as(backend, group, &mut cmd, user.as_ref(), cwd)?;
    let child = match (child, &user) {
        (Ok(c), _) => c,
        // As another user: the error as the user met it (entering the
        // directory or exec, as them), with no look by root at paths the
        // user may not see.
        (Err(e), Some(u)) => anyhow::bail!(
            "cannot start {program:?} as uid {} in {}: {e}",
            u.uid,
            cwd.map_or_else(|| "/".into(), |d| d.display().to_string())
        ),
        (Err(e), None) => {
            return Err(match e.kind() {
                std::io::ErrorKind::NotFound if cwd.is_some_and(|d| !d.is_dir()) => {
                    anyhow::anyhow!(
                        "working directory {} does not exist",
                        cwd.map_or_else(String::new, |d| d.display().to_string())
                    )
                }
                std::io::ErrorKind::NotFound => {
                    anyhow::anyhow!(
                        "command not found: {program:?} (not on PATH, nor next to memgang)"
                    )
                }
                std::io::ErrorKind::PermissionDenied => {
                    anyhow::anyhow!("command {program:?} is not executable: {e}")
                }
                _ => anyhow::anyhow!("cannot start {program:?}: {e}"),
            })
        }
    };
    let pid = child.id() as i32;
    // Our unreaped child: its pid cannot be reused until we wait for it.
    let pidfd = match PidFd::open(pid) {
        Ok(p) => p,
        Err(e) => {
            // Not watched, not left behind: killed and reaped here.
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            return Err(e).context("pidfd_open on the job's first process");
        }
    };
    Ok(Launched { pid, pidfd })
}

/// PATH for jobs: memgang's own directory first, so that tools installed
/// next to it (memgang-workload) are found without installing them.
fn search_path() -> std::ffi::OsString {
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        dirs.push(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

/// Kill every process of `group` without waiting: thaw it (a frozen task
/// cannot act on SIGKILL under cgroup v1), then SIGKILL and SIGCONT (for
/// the signal freezer) each process in it. Both signals are sent even if
/// the first fails; the first failure is returned. Every kill of a job's
/// processes (cancelling, teardown, memgangd's) goes through here.
pub fn kill_group(backend: &dyn CgroupBackend, group: &GroupPath) -> Result<()> {
    if backend.can_freeze() {
        let _ = backend.set_frozen(group, false);
    }
    let mut first = Ok(());
    for sig in [libc::SIGKILL, libc::SIGCONT] {
        if let Err(e) = signal_group(backend, group, sig) {
            first = first.and(Err(e));
        }
    }
    first.with_context(|| format!("signalling cgroup {}", group.as_str()))
}

/// Kill a job without waiting: every process in its group
/// ([`kill_group`]), and its first process through its pidfd, in case it
/// is in no group the backend lists. Reap it afterwards.
pub fn kill(backend: &dyn CgroupBackend, group: &GroupPath, first: &PidFd) -> Result<()> {
    kill_group(backend, group)?;
    first
        .send_signal(libc::SIGKILL)
        .context("killing the job's first process")?;
    Ok(())
}

/// Kill every process of `group` ([`kill_group`], until none is left),
/// reap `child` if given, and remove the group. Safe to call on a group
/// that is already gone.
pub fn kill_and_remove(
    backend: &dyn CgroupBackend,
    group: &GroupPath,
    child: Option<i32>,
) -> Result<()> {
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        if let Some(pid) = child {
            let _ = process::try_reap(pid);
        }
        let pids = backend.procs_recursive(group).unwrap_or_default();
        if pids.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "processes {pids:?} of cgroup {} did not die within {KILL_DEADLINE:?}",
                group.as_str()
            );
        }
        if let Err(e) = kill_group(backend, group) {
            tracing::warn!("{e:#}");
        }
        std::thread::sleep(KILL_POLL);
    }
    if let Some(pid) = child {
        // The group is empty, so the child has exited: reap it for good.
        process::reap(pid);
    }
    backend
        .remove(group)
        .with_context(|| format!("removing cgroup {}", group.as_str()))?;
    Ok(())
}
