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

#[cfg(test)]
mod tests {
    use super::*;

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
