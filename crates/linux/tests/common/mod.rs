//! Helpers for the tests that use the real kernel: finding the hierarchies,
//! skipping loudly when they cannot run, starting processes inside a group,
//! and a guard that leaves nothing behind, pass or fail.
#![allow(dead_code)] // each test binary uses a different part of this

use memgang_linux::cgroup::{self, CgroupBackend, GroupPath, Hierarchy};
use memgang_linux::pidfd::PidFd;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MIB: u64 = 1 << 20;

/// If `cond` does not hold: fail the test, or, where `MEMGANG_ALLOW_SKIPS`
/// is set, print a skip notice that stands out in `cargo test` output and
/// return true. A test that returns early reads as passed, so a skip must
/// be asked for: on a machine that lacks a kernel feature on purpose.
pub fn skip_unless(cond: bool, test: &str, reason: &str) -> bool {
    if cond {
        return false;
    }
    assert!(
        std::env::var_os("MEMGANG_ALLOW_SKIPS").is_some(),
        "{test} cannot run: {reason}. Run it where it can (scripts/test as root on a \
         machine with the feature), or set MEMGANG_ALLOW_SKIPS=1 to skip it"
    );
    eprintln!("\n!!!!! SKIPPED {test}: {reason} (MEMGANG_ALLOW_SKIPS is set) !!!!!\n");
    true
}

/// Fails the test unless it runs as root. Root tests are `#[ignore]`d so
/// that a run without root lists them as ignored, never as passed;
/// `scripts/test` runs them as root with `--include-ignored`.
pub fn require_root(test: &str, needs: &str) {
    assert!(
        is_root(),
        "{test}: {needs}: run it as root, as scripts/test does"
    );
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no failure modes.
    unsafe { libc::geteuid() == 0 }
}

fn mounts() -> Vec<cgroup::Mount> {
    cgroup::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// This machine's v1 memory (+freezer) hierarchies, if mounted.
pub fn v1_roots() -> Option<(PathBuf, Option<PathBuf>)> {
    match cgroup::choose_hierarchy(&mounts(), Some("v1"), &|_| false) {
        Ok(Hierarchy::V1 {
            memory_root,
            freezer_root,
        }) => Some((memory_root, freezer_root)),
        _ => None,
    }
}

/// A cgroup2 mount of this machine (with or without memory controller).
/// The machine's cgroup v1 backend, or `None` after saying loudly why the
/// test is skipped. `needs` says what root is needed for.
pub fn v1_backend(test: &str, needs: &str) -> Option<std::sync::Arc<dyn CgroupBackend>> {
    require_root(test, needs);
    let roots = v1_roots();
    if skip_unless(
        roots.is_some(),
        test,
        "no cgroup v1 memory hierarchy mounted",
    ) {
        return None;
    }
    let (memory, freezer) = roots?;
    Some(std::sync::Arc::new(cgroup::v1::V1::new(memory, freezer)))
}

/// The machine's memory backend as memgang picks it ([`cgroup::detect`]):
/// v1 where a v1 memory hierarchy is mounted (this project's host), else
/// cgroup v2 with its memory controller (the VM lane, scripts/vm). `None`
/// after saying loudly why the test is skipped.
pub fn memory_backend(test: &str, needs: &str) -> Option<std::sync::Arc<dyn CgroupBackend>> {
    require_root(test, needs);
    let backend = cgroup::detect();
    if skip_unless(
        backend.is_ok(),
        test,
        "no cgroup hierarchy with a memory controller",
    ) {
        return None;
    }
    backend.ok().map(std::sync::Arc::from)
}

pub fn v2_mount() -> Option<PathBuf> {
    mounts()
        .into_iter()
        .find(|m| m.fstype == "cgroup2")
        .map(|m| m.mount_point)
}

/// A name unique to this test process: `memgang-test-<what>-<pid>`.
pub fn test_group(what: &str) -> GroupPath {
    GroupPath::new(&format!("memgang-test-{what}-{}", std::process::id())).unwrap()
}

fn open_procs(backend: &dyn CgroupBackend, group: &GroupPath) -> Vec<File> {
    memgang_linux::cgroup::open_procs(backend, group).unwrap_or_else(|e| panic!("{e}"))
}

/// Start `cmd` inside `group` the way the runtime does: the child writes
/// "0" to the group's cgroup.procs files between fork and exec. The caller
/// registers the pid with a [`Cleanup`], which reaps it with waitpid.
#[allow(clippy::zombie_processes)]
pub fn spawn_in(backend: &dyn CgroupBackend, group: &GroupPath, cmd: &mut Command) -> i32 {
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    // SAFETY: prctl(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // Die with the test if it dies without cleaning up.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = memgang_linux::cgroup::spawn_into(backend, group, cmd)
        .expect("opening the group's cgroup.procs")
        .expect("spawning a test process");
    child.id() as i32
}

/// Fork a child that joins `group`, touches `bytes` of anonymous memory and
/// then sleeps. Only async-signal-safe calls run in the child.
pub fn fork_allocator(backend: &dyn CgroupBackend, group: &GroupPath, bytes: usize) -> i32 {
    let files = open_procs(backend, group);
    let fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
    // SAFETY: the child only calls prctl, write, mmap, pause and _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            for fd in &fds {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    libc::_exit(1);
                }
            }
            let p = libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                libc::_exit(2);
            }
            let mut i = 0;
            while i < bytes {
                std::ptr::write_volatile(p.cast::<u8>().add(i), 1);
                i += 4096;
            }
            loop {
                libc::pause();
            }
        }
    }
    drop(files);
    pid
}

/// /proc/<pid>/stat state letter, or None if the process is gone.
pub fn state(pid: i32) -> Option<char> {
    memgang_linux::counters::process_state(pid).ok()
}

/// utime + stime of a process in clock ticks (fields 14 and 15).
pub fn cpu_ticks(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &text[text.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): field n is f[n - 3].
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Poll `cond` every 10 ms for up to `timeout`.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tears down test groups on drop, also when the test panics: thaws them,
/// SIGCONT + SIGKILLs every process in them, reaps our children, removes
/// the groups. Register groups outermost first.
pub struct Cleanup {
    pub backend: Arc<dyn CgroupBackend>,
    pub groups: Vec<GroupPath>,
    pub children: Vec<i32>,
}

impl Cleanup {
    pub fn new(backend: Arc<dyn CgroupBackend>) -> Self {
        Cleanup {
            backend,
            groups: Vec::new(),
            children: Vec::new(),
        }
    }

    pub fn kill_all(&self) {
        for g in self.groups.iter().rev() {
            if self.backend.can_freeze() && self.backend.exists(g) {
                let _ = self.backend.set_frozen(g, false);
            }
        }
        let done = eventually(Duration::from_secs(10), || {
            let mut pids = Vec::new();
            for g in &self.groups {
                pids.extend(self.backend.procs_recursive(g).unwrap_or_default());
            }
            for &pid in &pids {
                if let Ok(Some(fd)) = PidFd::try_open(pid) {
                    let _ = fd.send_signal(libc::SIGKILL);
                    let _ = fd.send_signal(libc::SIGCONT);
                }
            }
            for &c in &self.children {
                // SAFETY: non-blocking wait on our own child.
                unsafe { libc::waitpid(c, std::ptr::null_mut(), libc::WNOHANG) };
            }
            pids.is_empty()
        });
        if !done {
            eprintln!("cleanup: processes still in {:?}", self.groups);
        }
        for &c in &self.children {
            if let Ok(Some(fd)) = PidFd::try_open(c) {
                let _ = fd.send_signal(libc::SIGKILL);
            }
            // SAFETY: blocking wait on our own (killed) child.
            unsafe { libc::waitpid(c, std::ptr::null_mut(), 0) };
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.kill_all();
        for g in self.groups.iter().rev() {
            if let Err(e) = self.backend.remove(g) {
                eprintln!("cleanup: removing {g}: {e}");
            }
        }
    }
}
