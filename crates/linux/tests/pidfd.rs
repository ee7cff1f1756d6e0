//! PidFd on real processes: signals reach the process while it lives and
//! report "gone" (not an error) after it is reaped.

use memgang_linux::pidfd::PidFd;
use std::process::Command;
use std::time::Duration;

#[test]
fn pidfd_lifecycle() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id() as i32;
    let fd = PidFd::open(pid).unwrap();
    assert_eq!(fd.pid(), pid);
    assert!(fd.is_alive());
    assert!(fd.send_signal(0).unwrap());
    assert!(!fd.wait_exit(Duration::from_millis(20)));

    assert!(fd.send_signal(libc::SIGKILL).unwrap());
    assert!(
        fd.wait_exit(Duration::from_secs(5)),
        "the pidfd never became readable"
    );
    assert!(!fd.is_alive(), "an exited (zombie) process is not alive");
    let status = child.wait().unwrap();
    assert!(!status.success());

    // Reaped: the handle still refers to that process, which is gone.
    assert!(!fd.send_signal(0).unwrap());
    assert!(!fd.send_signal(libc::SIGKILL).unwrap());
    assert!(!fd.is_alive());
}

#[test]
fn pidfd_open_of_a_missing_process() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    child.wait().unwrap();
    // The pid is free now; it is only reused after pid_max wraps around, so
    // this cannot meet another process in practice.
    assert!(PidFd::try_open(pid).unwrap().is_none());
    let e = PidFd::open(pid).unwrap_err().to_string();
    assert!(e.contains(&format!("/proc/{pid}")), "{e}");
    assert!(PidFd::try_open(0).is_err());
    assert!(PidFd::try_open(-5).is_err());
}

#[test]
fn pidfd_is_pollable() {
    use std::os::fd::AsRawFd;
    let mut child = Command::new("sleep").arg("0.05").spawn().unwrap();
    let fd = PidFd::open(child.id() as i32).unwrap();
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, 5000) };
    assert_eq!(r, 1, "poll on the pidfd did not report the exit");
    child.wait().unwrap();
}
