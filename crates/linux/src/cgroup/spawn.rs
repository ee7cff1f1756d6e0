//! Starting a job's processes inside its cgroup from their first
//! instruction, optionally as another user.

use super::{CgroupBackend, GroupPath};
use crate::error::Result;
use crate::sysfs::io_error;

/// Spawn `cmd` as a member of `group` from its first instruction: the
/// child writes "0" (itself) into the group's `cgroup.procs` files between
/// fork and exec, so every page it touches is charged to the group and
/// nothing it forks can escape. The outer error is about the group (its
/// files could not be opened); the inner one is spawn's own, so a caller can
/// tell "command not found" apart.
pub fn spawn_into(
    backend: &dyn CgroupBackend,
    group: &GroupPath,
    cmd: &mut std::process::Command,
) -> Result<std::io::Result<std::process::Child>> {
    spawn_into_as(backend, group, cmd, None, None)
}

pub use crate::process::Credentials;

/// [`spawn_into`], then, when `user` is given, drop to that user in the
/// child: its resource limits set, then setgroups, setgid, setuid, in
/// that order (each needs the
/// privilege the next one gives up), after joining the group, whose files
/// were opened as root, and before exec. A failure to drop aborts the
/// spawn: the job never runs as root by mistake.
///
/// `cwd` is entered after the drop, as the user (std's `current_dir`
/// would enter it before, as root: a user could then run a job in a
/// directory they cannot reach themselves). Give the working directory
/// here, never with `cmd.current_dir` when `user` is given. The command
/// is looked up (PATH) by exec, as the user, too.
pub fn spawn_into_as(
    backend: &dyn CgroupBackend,
    group: &GroupPath,
    cmd: &mut std::process::Command,
    user: Option<&Credentials>,
    cwd: Option<&std::path::Path>,
) -> Result<std::io::Result<std::process::Child>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let cwd = match cwd {
        Some(d) => Some(
            std::ffi::CString::new(d.as_os_str().as_bytes()).map_err(|_| {
                io_error(
                    "entering",
                    d,
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the path"),
                )
            })?,
        ),
        None => None,
    };
    let files = open_procs(backend, group)?;
    let fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
    let user = user.cloned();
    // A service protected from the OOM killer (memgangd: negative
    // oom_score_adj) must not hand that to its jobs, which inherit it
    // across fork and exec: the child goes back to the default, 0, before
    // it drops to its user (as root, the kernel then also forbids the user
    // to lower it again).
    let reset_oom = crate::process::oom_score_adj().is_ok_and(|v| v < 0);
    // SAFETY: the closure only calls open(2), write(2), close(2),
    // getrlimit(2), setrlimit(2), setgroups(2), setgid(2), setuid(2) and
    // chdir(2), async-signal-safe, on descriptors that stay open until
    // spawn() returns (`files`) and memory allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if reset_oom {
                let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
            }
            if let Some(c) = &user {
                // Before the drop: raising a hard limit needs root (and
                // CAP_SYS_RESOURCE: where the service lacks it, a limit
                // is at most the service's own hard one).
                for l in &c.limits {
                    let mut r = libc::rlimit {
                        rlim_cur: l.soft,
                        rlim_max: l.hard,
                    };
                    if libc::setrlimit(l.resource as _, &r) != 0 {
                        let mut own: libc::rlimit = std::mem::zeroed();
                        libc::getrlimit(l.resource as _, &mut own);
                        r.rlim_max = r.rlim_max.min(own.rlim_max);
                        r.rlim_cur = r.rlim_cur.min(r.rlim_max);
                        if libc::setrlimit(l.resource as _, &r) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                if libc::setgroups(c.groups.len(), c.groups.as_ptr()) != 0
                    || libc::setgid(c.gid) != 0
                    || libc::setuid(c.uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(d) = &cwd {
                if libc::chdir(d.as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    drop(files);
    Ok(child)
}

/// The group's `cgroup.procs` files, open for writing: opened before a
/// fork, so that the child can join by writing "0" to each (async-signal
/// safe, no path lookup) before it runs anything of its own.
pub fn open_procs(backend: &dyn CgroupBackend, group: &GroupPath) -> Result<Vec<std::fs::File>> {
    backend
        .procs_files(group)
        .iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| io_error("opening for writing", p, e))
        })
        .collect()
}

/// Move a running process (all its threads) into `group` in every
/// hierarchy the backend uses. What it allocated before stays charged
/// where it was (v2 never moves charges, v1 only with
/// `memory.move_charge_at_immigrate`), so a process about to allocate
/// belongs in [`spawn_into`]; this is for one that exists already (a job
/// adopted from Slurm, the daemon itself, a child forked without exec
/// that joins before it allocates).
pub fn join(backend: &dyn CgroupBackend, group: &GroupPath, pid: i32) -> Result<()> {
    for file in backend.procs_files(group) {
        std::fs::write(&file, pid.to_string())
            .map_err(|e| io_error("moving a process into", &file, e))?;
    }
    Ok(())
}
