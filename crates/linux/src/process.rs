//! The process calls an executor makes on its jobs: reaping a job's first
//! process with its resource use, and CPU niceness.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// Who a job runs as: a service (root) starting another user's job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// Resource limits set before the switch to the user (as a login's:
    /// [`crate::limits`]); empty: the caller's are inherited.
    pub limits: Vec<crate::limits::Limit>,
}

/// Exit status and resource use of a reaped process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// User and system CPU time.
    pub cpu_s: f64,
    /// The system part of it: the kernel's work in the job's context
    /// (page faults, and reclaim of pages when its cgroup is full).
    pub system_s: f64,
    /// Major page faults of the process and the children it reaped.
    pub major_faults: u64,
}

/// This process's own CPU time (user, system, in seconds) and peak
/// resident memory (bytes) so far, all its threads, not its children; None
/// where the kernel would not say.
pub fn own_usage() -> Option<(f64, f64, u64)> {
    use nix::sys::resource::{getrusage, UsageWho};
    let ru = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    // ru_maxrss is in KiB on Linux.
    let rss = u64::try_from(ru.max_rss()).unwrap_or(0) * 1024;
    Some((secs(ru.user_time()), secs(ru.system_time()), rss))
}

/// The state letter of process `pid` in `/proc/<pid>/stat` (`R`, `S`,
/// `D`, `T` when stopped by a signal, `Z`, ...); None once it is gone.
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command's closing parenthesis (the command
    // may hold spaces and parentheses itself).
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Reap our child `pid` if it has exited (never blocks); None while it
/// runs or if it is not our child.
pub fn try_reap(pid: i32) -> Option<Exit> {
    let mut status = 0;
    // SAFETY: wait4 writes into the two local out-parameters only.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    if r != pid {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(Exit {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
        system_s: secs(ru.ru_stime),
        major_faults: ru.ru_majflt as u64,
    })
}

/// Wait for our child `pid` to exit and reap it (blocks); for a child known
/// to have exited or been killed.
pub fn reap(pid: i32) {
    // SAFETY: plain blocking wait on our own child, no out-parameters.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
}

/// Set the CPU niceness of process `pid` (0: the calling thread).
pub fn set_nice(pid: i32, nice: i32) -> Result<()> {
    // SAFETY: setpriority takes plain integers.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, nice) } != 0 {
        return Err(Error::io(
            "setting the niceness (setpriority) of",
            PathBuf::from(format!("/proc/{pid}")),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Set the niceness of every thread of process `pid`: Linux keeps a nice
/// value per thread, and setpriority(PRIO_PROCESS) changes one thread
/// only. Threads that exit meanwhile are skipped.
pub fn set_nice_process(pid: i32, nice: i32) -> Result<()> {
    for tid in threads(pid)? {
        match set_nice(tid, nice) {
            Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {}
            r => r?,
        }
    }
    Ok(())
}

/// The thread ids of process `pid` now (/proc/PID/task).
pub fn threads(pid: i32) -> Result<Vec<i32>> {
    let tasks = format!("/proc/{pid}/task");
    let dir = std::fs::read_dir(&tasks)
        .map_err(|e| Error::io("listing the threads of", PathBuf::from(&tasks), e))?;
    Ok(dir
        .flatten()
        .filter_map(|t| t.file_name().to_str().and_then(|t| t.parse().ok()))
        .collect())
}

/// Where the kernel's OOM killer weighs this process (-1000 to 1000,
/// added to its share of memory; -1000: never). Inherited across fork and
/// exec.
pub const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// This process's `oom_score_adj`.
pub fn oom_score_adj() -> Result<i32> {
    let text = std::fs::read_to_string(OOM_SCORE_ADJ)
        .map_err(|e| Error::io("reading", PathBuf::from(OOM_SCORE_ADJ), e))?;
    text.trim().parse().map_err(|_| {
        Error::io(
            "parsing",
            PathBuf::from(OOM_SCORE_ADJ),
            std::io::Error::new(std::io::ErrorKind::InvalidData, text.trim().to_string()),
        )
    })
}

/// Set this process's `oom_score_adj` (lowering it needs CAP_SYS_RESOURCE).
pub fn set_oom_score_adj(v: i32) -> Result<()> {
    std::fs::write(OOM_SCORE_ADJ, v.to_string())
        .map_err(|e| Error::io("writing", PathBuf::from(OOM_SCORE_ADJ), e))
}

/// What dynamic coscheduling reads of a process: how often its threads
/// went to sleep and woke (voluntary context switches, all threads) and
/// how many of those sleeps were major page faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wakeups {
    pub voluntary_switches: u64,
    pub major_faults: u64,
}

impl Wakeups {
    /// Wake-ups between `earlier` and `self` that were not page faults:
    /// the messages a communicating process waited for (a receive that
    /// blocks, then wakes when the message arrives), over sockets, pipes
    /// or futexes alike. Read/write call counts (/proc/PID/io) miss
    /// send/recv, which sockets are driven with. A receiver that
    /// busy-polls never sleeps: for TCP, `sockets` counts its segments.
    pub fn messages_since(&self, earlier: &Wakeups) -> u64 {
        let switches = self
            .voluntary_switches
            .saturating_sub(earlier.voluntary_switches);
        switches.saturating_sub(self.major_faults.saturating_sub(earlier.major_faults))
    }
}

/// [`Wakeups`] of process `pid` (/proc/PID/task/*/status, /proc/PID/stat).
pub fn wakeups(pid: i32) -> Result<Wakeups> {
    let path = || PathBuf::from(format!("/proc/{pid}"));
    let err = |e: procfs::ProcError| Error::io("reading", path(), std::io::Error::other(e));
    let p = procfs::process::Process::new(pid).map_err(err)?;
    let major_faults = p.stat().map_err(err)?.majflt;
    let mut voluntary_switches = 0;
    // Threads that exit meanwhile are skipped: their count goes with them.
    for task in p.tasks().map_err(err)?.flatten() {
        if let Ok(st) = task.status() {
            voluntary_switches += st.voluntary_ctxt_switches.unwrap_or(0);
        }
    }
    Ok(Wakeups {
        voluntary_switches,
        major_faults,
    })
}

/// A child forked without exec, and the parent's ends of two pipes to it:
/// `cmd` (the parent writes, the child reads) and `res` (the child
/// answers). What the helpers that time or page a process's own memory
/// use (`faults`, the paging benches and tests): they must not exec, since
/// the memory is the child's own, made after the fork.
pub struct Forked {
    pub pid: i32,
    pub cmd: std::fs::File,
    pub res: std::fs::File,
}

/// Fork a child that runs `body(cmd, res)` with the two pipes' child ends
/// (raw descriptors). In the child, before `body`: it dies with its parent
/// (`PR_SET_PDEATHSIG`), and the parent's ends are closed there, so that
/// the parent closing `cmd` ends the child's reads. Both pipes are
/// close-on-exec. The parent reaps the child; `Forked` does not kill it.
///
/// # Safety
/// `body` runs in the forked child of a possibly threaded process: it may
/// only make async-signal-safe calls (raw system calls, no allocation, no
/// locks, no panics), and ends with `_exit` (if it returns, the child
/// `_exit`s with 127).
pub unsafe fn fork_piped(body: impl FnOnce(i32, i32)) -> Result<Forked> {
    use std::os::fd::AsRawFd;
    let pipe = || {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| Error::io("making a pipe to a forked child", "pipe2", e.into()))
    };
    let (cmd_r, cmd_w) = pipe()?;
    let (res_r, res_w) = pipe()?;
    let pid = libc::fork();
    if pid < 0 {
        return Err(Error::io(
            "forking a child",
            "fork",
            std::io::Error::last_os_error(),
        ));
    }
    if pid == 0 {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::close(cmd_w.as_raw_fd());
        libc::close(res_r.as_raw_fd());
        body(cmd_r.as_raw_fd(), res_w.as_raw_fd());
        // A body that returns has nothing more to do here: the parent's
        // state must not run on in the child.
        libc::_exit(127);
    }
    drop((cmd_r, res_w));
    Ok(Forked {
        pid,
        cmd: std::fs::File::from(cmd_w),
        res: std::fs::File::from(res_r),
    })
}

/// Where a command would be found, as seen by the user who will run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The first candidate that is a file the user may execute.
    Found(usize),
    /// The user cannot enter the working directory (its errno).
    NoDir(i32),
    /// No candidate is a file the user can see.
    NotFound,
    /// A file the user can see, but not execute (the first such).
    NotExecutable(usize),
}

/// Look a command up as `user` would, with `user`'s credentials (None:
/// the caller's own): in a forked child that drops to the user, enters
/// `cwd` (which also resolves relative candidates) and checks each of
/// `candidates` in order, as exec would. So a service (root) tells a user
/// only what the user could find out in their own shell, never whether a
/// file they cannot reach exists. A child that does not answer within
/// `timeout` (a hung mount) is killed, and its lookup is an error.
pub fn lookup_as(
    user: Option<&Credentials>,
    cwd: &std::path::Path,
    candidates: &[std::path::PathBuf],
    timeout: std::time::Duration,
) -> Result<Lookup> {
    use std::ffi::CString;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &std::path::Path| {
        CString::new(p.as_os_str().as_bytes()).map_err(|_| {
            Error::io(
                "looking up",
                p.to_path_buf(),
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the path"),
            )
        })
    };
    let dir = c(cwd)?;
    let paths = candidates
        .iter()
        .map(|p| c(p))
        .collect::<Result<Vec<_>>>()?;
    let user = user.cloned();
    // The answer: a tag byte and a little-endian u32 (errno or index).
    // SAFETY: the body makes raw system calls only (setgroups, setgid,
    // setuid, chdir, stat, access, write, _exit) on memory allocated
    // before the fork.
    let child = unsafe {
        fork_piped(move |_cmd, res| {
            let answer = |tag: u8, n: u32| {
                let mut b = [tag, 0, 0, 0, 0];
                b[1..].copy_from_slice(&n.to_le_bytes());
                libc::write(res, b.as_ptr().cast(), b.len());
                libc::_exit(0);
            };
            let errno = || *libc::__errno_location() as u32;
            if let Some(u) = &user {
                if libc::setgroups(u.groups.len(), u.groups.as_ptr()) != 0
                    || libc::setgid(u.gid) != 0
                    || libc::setuid(u.uid) != 0
                {
                    answer(4, errno());
                }
            }
            if libc::chdir(dir.as_ptr()) != 0 {
                answer(1, errno());
            }
            let mut not_exec = None;
            for (i, p) in paths.iter().enumerate() {
                let mut st: libc::stat = std::mem::zeroed();
                if libc::stat(p.as_ptr(), &mut st) != 0
                    || st.st_mode & libc::S_IFMT != libc::S_IFREG
                {
                    continue;
                }
                if libc::access(p.as_ptr(), libc::X_OK) == 0 {
                    answer(0, i as u32);
                }
                not_exec.get_or_insert(i as u32);
            }
            match not_exec {
                Some(i) => answer(3, i),
                None => answer(2, 0),
            }
        })
    }?;
    let Forked { pid, cmd, mut res } = child;
    drop(cmd);
    let fd = res.as_fd();
    let mut pfd = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let ready = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(ms)).unwrap_or(0);
    let mut b = [0u8; 5];
    if ready == 0 || res.read_exact(&mut b).is_err() {
        // SAFETY: kill and reap our own child; a child stuck in the
        // kernel is reaped by a thread of its own, not by the caller.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        std::thread::spawn(move || reap(pid));
        return Err(Error::io(
            "looking up a command in",
            cwd.to_path_buf(),
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {timeout:?} (a hung file system?)"),
            ),
        ));
    }
    reap(pid);
    let n = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
    Ok(match b[0] {
        0 => Lookup::Found(n as usize),
        1 => Lookup::NoDir(n as i32),
        2 => Lookup::NotFound,
        3 => Lookup::NotExecutable(n as usize),
        _ => {
            return Err(Error::io(
                "becoming the user to look a command up in",
                cwd.to_path_buf(),
                std::io::Error::from_raw_os_error(n as i32),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process named with a parenthesis and a space still shows its
    /// state; stopped shows `T`; reaped, it is gone.
    #[test]
    fn a_process_state_is_read_and_a_stop_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("a) b");
        std::os::unix::fs::symlink("/bin/sleep", &odd).unwrap();
        let mut child = std::process::Command::new(&odd).arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        assert!(matches!(state(pid), Some('R' | 'S')), "{:?}", state(pid));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGSTOP).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while state(pid) != Some('T') && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(state(pid), Some('T'));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(state(pid), None);
    }

    /// The child answers each byte with the next one and ends when the
    /// command pipe closes, which it can only see if the parent's ends
    /// were closed in it; a body that returns ends with 127.
    #[test]
    fn a_forked_child_talks_on_its_pipes_and_ends_when_they_close() {
        use std::io::{Read, Write};
        // SAFETY: the body makes raw read/write calls and _exits.
        let Forked {
            pid,
            mut cmd,
            mut res,
        } = unsafe {
            fork_piped(|cmd, res| {
                let mut b = 0u8;
                while libc::read(cmd, (&mut b as *mut u8).cast(), 1) == 1 {
                    let n = b.wrapping_add(1);
                    libc::write(res, (&n as *const u8).cast(), 1);
                }
                libc::_exit(7);
            })
        }
        .unwrap();
        let mut answer = [0u8];
        for b in [1u8, 41] {
            cmd.write_all(&[b]).unwrap();
            res.read_exact(&mut answer).unwrap();
            assert_eq!(answer[0], b + 1);
        }
        drop(cmd);
        let mut status = 0;
        // SAFETY: our child; status is a local.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(
            libc::WEXITSTATUS(status),
            7,
            "the child did not see its command pipe close"
        );
        // Its answer pipe is closed too: the read ends.
        assert_eq!(res.read(&mut answer).unwrap(), 0);

        // SAFETY: the body does nothing.
        let f = unsafe { fork_piped(|_, _| {}) }.unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::waitpid(f.pid, &mut status, 0) }, f.pid);
        assert_eq!(libc::WEXITSTATUS(status), 127);
    }

    #[test]
    fn a_process_waiting_for_messages_wakes_once_per_message() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        // A shell reading lines from a pipe: it sleeps until each arrives.
        let mut child = Command::new("sh")
            .args(["-c", "while read x; do :; done"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut pipe = child.stdin.take().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let before = wakeups(pid).unwrap();
        for _ in 0..50 {
            pipe.write_all(b"x\n").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let after = wakeups(pid).unwrap();
        drop(pipe);
        child.wait().unwrap();
        assert!(after.messages_since(&before) >= 50, "{before:?} {after:?}");
        assert!(wakeups(i32::MAX).is_err());
        let w = |v, m| Wakeups {
            voluntary_switches: v,
            major_faults: m,
        };
        // Sleeps that were page faults are not messages.
        assert_eq!(w(110, 30).messages_since(&w(10, 0)), 70);
        assert_eq!(w(10, 30).messages_since(&w(10, 0)), 0);
    }

    #[test]
    // Reaped by try_reap, which is what is tested, not by Child::wait.
    #[allow(clippy::zombie_processes)]
    fn reaps_a_child_with_its_status() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let exit = reap_when_done(pid);
        assert_eq!((exit.code, exit.signal), (Some(3), None));
        // Reaped already: nothing left.
        assert_eq!(try_reap(pid), None);
    }

    fn reap_when_done(pid: i32) -> Exit {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(exit) = try_reap(pid) {
                return exit;
            }
            assert!(std::time::Instant::now() < deadline, "sh did not exit");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    #[allow(clippy::zombie_processes)]
    fn a_child_that_works_in_the_kernel_shows_system_time() {
        // Copying 2 GiB through a pipe is kernel work (copy to and from
        // the pipe's pages), so the system part is most of the CPU time.
        let child = std::process::Command::new("sh")
            .args(["-c", "head -c 2G /dev/zero | cat > /dev/null; exit 3"])
            .spawn()
            .unwrap();
        let exit = reap_when_done(child.id() as i32);
        assert_eq!(exit.code, Some(3));
        assert!(
            exit.system_s > 0.1 && exit.system_s <= exit.cpu_s,
            "system {} s of {} s",
            exit.system_s,
            exit.cpu_s
        );
    }

    #[test]
    fn lookup_finds_what_exec_would_and_tells_what_it_cannot() {
        use std::path::PathBuf;
        use std::time::Duration;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("plain"), "").unwrap();
        let t = Duration::from_secs(10);
        let cands = |names: &[&str]| names.iter().map(PathBuf::from).collect::<Vec<_>>();
        // Relative candidates resolve in the working directory.
        assert_eq!(
            lookup_as(None, d.path(), &cands(&["missing", "plain", "/bin/sh"]), t).unwrap(),
            Lookup::Found(2)
        );
        assert_eq!(
            lookup_as(None, d.path(), &cands(&["missing", "plain"]), t).unwrap(),
            Lookup::NotExecutable(1)
        );
        assert_eq!(
            lookup_as(None, d.path(), &cands(&["missing", "."]), t).unwrap(),
            Lookup::NotFound
        );
        assert_eq!(
            lookup_as(None, &d.path().join("nodir"), &cands(&["/bin/sh"]), t).unwrap(),
            Lookup::NoDir(libc::ENOENT)
        );
    }

    #[test]
    fn nice_of_this_thread_and_of_no_process() {
        // Raising one's own niceness needs no rights; the harness thread
        // ends with the test.
        set_nice(0, 1).unwrap();
        let e = set_nice(-1, 1).unwrap_err().to_string();
        assert!(e.contains("/proc/-1"), "{e}");
    }
}
