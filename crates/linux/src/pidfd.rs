//! Process handles that cannot hit a recycled pid.
//!
//! A pid is only a number: once its process exits and is reaped, the kernel
//! may give it to an unrelated process, and `kill(pid, ...)` would then
//! stop or kill that one. A pidfd (pidfd_open(2), Linux 5.3) refers to one
//! process for good: signals sent through it reach that process or fail
//! with ESRCH. It also becomes readable when the process exits, which is how
//! the runtime waits for jobs in poll(2).

use crate::error::{Error, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

/// An open pidfd and the pid it was opened for.
#[derive(Debug)]
pub struct PidFd {
    fd: OwnedFd,
    pid: i32,
}

fn proc_path(pid: i32) -> PathBuf {
    crate::sysfs::proc_pid_file(pid, "")
}

fn no_pidfds(syscall: &str) -> Error {
    Error::Unsupported(format!(
        "{syscall}: this kernel has no pidfds (memgang needs Linux 5.3 or later)"
    ))
}

impl PidFd {
    /// Open a handle on process `pid`. A process that does not exist (any
    /// more) is an error here; use [`try_open`](Self::try_open) where that is
    /// a normal outcome.
    pub fn open(pid: i32) -> Result<Self> {
        Self::try_open(pid)?.ok_or_else(|| {
            Error::io(
                "pidfd_open of",
                proc_path(pid),
                std::io::Error::from_raw_os_error(libc::ESRCH),
            )
        })
    }

    /// Like [`open`](Self::open), but a process that is gone is `Ok(None)`.
    pub fn try_open(pid: i32) -> Result<Option<Self>> {
        if pid <= 0 {
            // pidfd_open would say EINVAL; say what was wrong instead.
            return Err(Error::io(
                "pidfd_open of",
                proc_path(pid),
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a process id"),
            ));
        }
        // SAFETY: plain syscall with integer arguments; on success it
        // returns a new descriptor that nothing else owns.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ESRCH) => Ok(None),
                Some(libc::ENOSYS) => Err(no_pidfds("pidfd_open")),
                _ => Err(crate::sysfs::io_error("pidfd_open of", proc_path(pid), e)),
            };
        }
        // SAFETY: r is a fresh descriptor returned by pidfd_open, owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(r as RawFd) };
        Ok(Some(PidFd { fd, pid }))
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Send `sig` (0 only checks). Ok(true): delivered; Ok(false): the
    /// process has exited (ESRCH), which callers treat as a normal outcome.
    pub fn send_signal(&self, sig: i32) -> Result<bool> {
        // SAFETY: integer arguments and a null siginfo (the kernel then fills
        // in what kill(2) would).
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if r == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ESRCH) => Ok(false),
            Some(libc::ENOSYS) => Err(no_pidfds("pidfd_send_signal")),
            _ => Err(crate::sysfs::io_error(
                "sending a signal (pidfd_send_signal) to",
                proc_path(self.pid),
                e,
            )),
        }
    }

    /// False once the process has exited (the pidfd polls readable then,
    /// zombie or reaped). Never blocks.
    pub fn is_alive(&self) -> bool {
        !self.wait_exit(Duration::ZERO)
    }

    /// Wait up to `timeout` for the process to exit; true if it has.
    pub fn wait_exit(&self, timeout: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        loop {
            // SAFETY: one valid pollfd that lives across the call.
            let r = unsafe { libc::poll(&mut p, 1, ms) };
            if r >= 0 {
                return r > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                // Cannot tell: say "not exited", the safe answer for callers
                // that would otherwise reap or forget the process.
                return false;
            }
        }
    }
}

/// Wait up to `timeout` until one of `fds`' processes has exited (or a
/// signal arrives, which ends the wait early). With no fds, sleeps.
pub fn wait_any(fds: &[&PidFd], timeout: Duration) {
    let mut polls: Vec<libc::pollfd> = fds
        .iter()
        .map(|p| libc::pollfd {
            fd: p.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `polls` is a valid array of pollfd for its length. EINTR (a
    // signal) just ends the wait early, which is what callers want.
    unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, ms) };
}

impl AsFd for PidFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for PidFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
