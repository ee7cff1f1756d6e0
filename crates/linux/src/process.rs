//! The process calls an executor makes on its jobs: reaping a job's first
//! process with its resource use, and CPU niceness.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// Exit status and resource use of a reaped process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// User and system CPU time.
    pub cpu_s: f64,
    /// Major page faults of the process and the children it reaped.
    pub major_faults: u64,
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
    let tasks = format!("/proc/{pid}/task");
    let dir = std::fs::read_dir(&tasks)
        .map_err(|e| Error::io("listing the threads of", PathBuf::from(&tasks), e))?;
    for tid in dir.flatten() {
        if let Some(tid) = tid.file_name().to_str().and_then(|t| t.parse().ok()) {
            match set_nice(tid, nice) {
                Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {}
                r => r?,
            }
        }
    }
    Ok(())
}

/// Read and write system calls process `pid` has made (`syscr + syscw` of
/// /proc/PID/io, all its threads, living and exited): the message count of
/// dynamic coscheduling. Sockets, pipes and files alike: a compute job
/// makes none per 100 ms, a rank waiting on its peers makes one per
/// message; counting socket bytes alone (sock_diag per socket inode, or
/// eBPF) would exclude pipes and cost a netlink dump per sample.
pub fn io_calls(pid: i32) -> Result<u64> {
    let io = procfs::process::Process::new(pid)
        .and_then(|p| p.io())
        .map_err(|e| {
            Error::io(
                "reading",
                PathBuf::from(format!("/proc/{pid}/io")),
                std::io::Error::other(e),
            )
        })?;
    Ok(io.syscr + io.syscw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_calls_count_a_process_reads_and_writes() {
        use std::io::Write;
        let me = std::process::id() as i32;
        let before = io_calls(me).unwrap();
        let mut f = tempfile::tempfile().unwrap();
        for _ in 0..50 {
            f.write_all(b"x").unwrap();
        }
        assert!(io_calls(me).unwrap() >= before + 50);
        assert!(io_calls(i32::MAX).is_err());
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
        reap_when_done(pid);
        // Reaped already: nothing left.
        assert_eq!(try_reap(pid), None);
    }

    fn reap_when_done(pid: i32) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(exit) = try_reap(pid) {
                assert_eq!((exit.code, exit.signal), (Some(3), None));
                return;
            }
            assert!(std::time::Instant::now() < deadline, "sh did not exit");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
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
