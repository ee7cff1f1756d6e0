//! Kernel files (cgroup, /proc, /sys): reading, writing and parsing them
//! with errors that name the file, waiting for the kernel to change one,
//! and the page size. The lowest layer of this crate: it imports only
//! `error`.

use crate::error::{Error, Result};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// First and longest sleep between two checks of a freezer state. Starting
/// at 1 ms makes the common case (frozen almost at once) cost about 1 ms;
/// doubling up to 50 ms keeps a slow freeze from burning CPU in reads.
const POLL_FIRST: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(50);

/// Wrap an I/O error naming the file and the action. Permission problems
/// become [`Error::Permission`] with the remedy, since that is by far their
/// most common cause on a cgroup tree.
pub(crate) fn io_error(action: &'static str, path: impl Into<PathBuf>, e: std::io::Error) -> Error {
    let path = path.into();
    if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
        return Error::Permission(format!(
            "{action} {}: {e}; memgang needs root (or a cgroup subtree delegated to this user) for this",
            path.display()
        ));
    }
    Error::io(action, path, e)
}

/// The errno behind `e`, if it is an I/O error: some kernel answers
/// (EBUSY, EAGAIN) are results rather than failures.
pub(crate) fn errno(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

/// `/proc/<pid>/<name>`, or `/proc/<pid>` for an empty name: the one place
/// that spells a process's proc path.
pub(crate) fn proc_pid_file(pid: i32, name: &str) -> PathBuf {
    if name.is_empty() {
        PathBuf::from(format!("/proc/{pid}"))
    } else {
        PathBuf::from(format!("/proc/{pid}/{name}"))
    }
}

pub(crate) fn read_file(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| io_error("reading", path, e))
}

/// Like [`read_file`], but a missing file is `None` (optional interfaces).
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("reading", path, e)),
    }
}

/// Write a control file in one write(2), as the kernel parses each write on
/// its own. Never creates the file: a missing control file means a missing
/// controller or group, and creating a regular file there would hide that
/// (and fails on cgroupfs with a misleading EACCES anyway).
pub(crate) fn write_file(path: &Path, content: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| io_error("opening for writing", path, e))?;
    f.write_all(content.as_bytes())
        .map_err(|e| io_error("writing", path, e))
}

pub(crate) fn parse_u64(path: &Path, text: &str) -> Result<u64> {
    text.trim()
        .parse()
        .map_err(|e: std::num::ParseIntError| Error::Parse {
            path: path.to_path_buf(),
            content: text.trim().to_string(),
            reason: e.to_string(),
        })
}

/// Read a pid list (`cgroup.procs`): one decimal number per line.
pub(crate) fn read_pids(path: &Path) -> Result<Vec<i32>> {
    let text = read_file(path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim().parse::<i32>().map_err(|e| Error::Parse {
                path: path.to_path_buf(),
                content: l.to_string(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// Flat keyed files (`memory.stat`, `/proc/vmstat`, `cgroup.events`): "key
/// value" lines. Lines that do not fit are skipped; callers require the
/// keys they need with [`required`].
pub(crate) fn parse_keyed(text: &str) -> std::collections::HashMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k, v))
        })
        .collect()
}

pub(crate) fn required(
    map: &std::collections::HashMap<&str, u64>,
    key: &str,
    path: &Path,
    text: &str,
) -> Result<u64> {
    map.get(key).copied().ok_or_else(|| Error::Parse {
        path: path.to_path_buf(),
        content: truncate_for_error(text),
        reason: format!("no {key:?} field"),
    })
}

/// Error messages quote file contents; keep them to a readable size.
pub(crate) fn truncate_for_error(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

/// Poll `done` with a growing interval until it returns true or `timeout`
/// passes; Ok(false) on timeout. `done` errors end the wait.
pub(crate) fn wait_until(
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<bool> {
    let deadline = Instant::now() + timeout;
    let mut sleep = POLL_FIRST;
    loop {
        if done()? {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        std::thread::sleep(sleep.min(deadline - now));
        sleep = (sleep * 2).min(POLL_MAX);
    }
}

/// The machine's page size (bytes).
pub fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // POSIX requires the page size; 4096 is only a fallback for a libc
        // that does not answer.
        nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .and_then(|p| u64::try_from(p).ok())
            .filter(|&p| p > 0)
            .unwrap_or(4096)
    })
}

/// The size of a huge page the kernel maps with one page-table entry
/// (`hpage_pmd_size`: 2 MiB on x86-64), or None without transparent huge
/// pages.
pub fn huge_page_size() -> Option<u64> {
    static SIZE: OnceLock<Option<u64>> = OnceLock::new();
    *SIZE.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|s: &u64| *s > 0 && s.is_power_of_two())
    })
}
