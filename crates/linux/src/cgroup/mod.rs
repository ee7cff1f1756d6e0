//! Cgroups: where memgang's jobs live, how much memory they may use, and
//! what they use.
//!
//! memgang makes one "pool" cgroup (`memgang-<pid>`) whose memory limit is
//! the memory the jobs share, and one child cgroup per job
//! (`memgang-<pid>/job-<name>`). Two kernel interfaces do this:
//!
//! * cgroup v1 ([`v1::V1`]): the memory and freezer controllers are separate
//!   hierarchies, each its own mount; a group exists once per hierarchy.
//! * cgroup v2 ([`v2::V2`]): one unified tree; controllers are enabled per
//!   subtree through `cgroup.subtree_control`.
//!
//! Both sit behind [`CgroupBackend`], and [`detect`] picks the one this node
//! has at run time.

pub mod v1;
pub mod v2;

use crate::counters::Psi;
use crate::error::{Error, Result};
use crate::proc::unescape_octal;
use std::collections::BTreeSet;
use std::fmt;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which cgroup interface a backend drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// How long freezing or thawing a group may take before it is reported as
/// stuck. The kernel normally stops a group in well under a millisecond per
/// task, but a task in uninterruptible sleep only stops once that sleep ends,
/// and on a node that is paging hard (memgang's normal situation) a swap-in
/// can keep a task there for seconds. 10 s covers that and still reports a
/// genuinely stuck job (e.g. blocked on a dead NFS server) in bounded time.
pub const FREEZE_TIMEOUT: Duration = Duration::from_secs(10);

/// First and longest sleep between two checks of a freezer state. Starting
/// at 1 ms makes the common case (frozen almost at once) cost about 1 ms;
/// doubling up to 50 ms keeps a slow freeze from burning CPU in reads.
const POLL_FIRST: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(50);

/// How long `remove` retries an rmdir that fails with EBUSY although no
/// process is listed. A killed task leaves `cgroup.procs` when it exits, but
/// the kernel releases its cgroup membership a little later (after it is
/// reaped and has switched out for the last time); in that window rmdir
/// says EBUSY. Milliseconds in practice; one second is ample.
const RMDIR_BUSY_GRACE: Duration = Duration::from_secs(1);

/// Longest cgroup name component: the kernel's NAME_MAX for a directory.
const NAME_MAX: usize = 255;

/// A cgroup path relative to the hierarchy roots, e.g. `memgang-123/job-a`.
///
/// Validated on construction so that no caller can make memgang write
/// outside its own groups: non-empty, relative, no empty, `.` or `..`
/// components, and components made of `[A-Za-z0-9._-]` only.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupPath(String);

impl GroupPath {
    pub fn new(s: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::Parse {
            path: PathBuf::from("<cgroup path>"),
            content: s.to_string(),
            reason: reason.to_string(),
        };
        if s.is_empty() {
            return Err(invalid("empty cgroup path"));
        }
        if s.starts_with('/') {
            return Err(invalid(
                "cgroup path must be relative to the hierarchy root",
            ));
        }
        for comp in s.split('/') {
            validate_component(comp).map_err(|r| invalid(&r))?;
        }
        Ok(GroupPath(s.to_string()))
    }

    /// `self/child`; `child` may itself have several components.
    pub fn join(&self, child: &str) -> Result<Self> {
        GroupPath::new(&format!("{}/{}", self.0, child))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The last component, e.g. `job-a` for `memgang-123/job-a`.
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The enclosing group, or None for a top-level group.
    pub fn parent(&self) -> Option<GroupPath> {
        self.0
            .rsplit_once('/')
            .map(|(p, _)| GroupPath(p.to_string()))
    }

    /// The group's directory under a hierarchy mounted at `root`.
    pub fn under(&self, root: &Path) -> PathBuf {
        root.join(&self.0)
    }
}

impl fmt::Display for GroupPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn validate_component(comp: &str) -> std::result::Result<(), String> {
    if comp.is_empty() {
        return Err("empty component (leading, trailing or double '/')".into());
    }
    if comp == "." || comp == ".." {
        return Err(format!("component {comp:?} is not allowed"));
    }
    if comp.len() > NAME_MAX {
        return Err(format!("component longer than {NAME_MAX} bytes"));
    }
    if let Some(c) = comp
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "character {c:?} is not allowed (only A-Z a-z 0-9 . _ -)"
        ));
    }
    Ok(())
}

/// A group's memory use, from the kernel's memory controller.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryStat {
    /// Anonymous memory in RAM. v1 `total_rss` (which already includes
    /// transparent huge pages, `total_rss_huge` is a subset); v2 `anon`.
    pub anon_bytes: u64,
    /// Page cache. v1 `total_cache`; v2 `file`.
    pub file_bytes: u64,
    /// What the group is charged for. v1 `memory.usage_in_bytes`; v2
    /// `memory.current`.
    pub usage_bytes: u64,
    /// Swap used. v1 `total_swap` (absent without swap accounting); v2
    /// `memory.swap.current` (absent without swap support).
    pub swap_bytes: Option<u64>,
    /// Major page faults (v1 `total_pgmajfault`, v2 `pgmajfault`).
    pub major_faults: u64,
    /// Pages swapped in; v2 `pswpin` on kernels that count it per cgroup.
    pub swap_ins: Option<u64>,
    /// Pages swapped out; v2 `pswpout` on kernels that count it per cgroup.
    pub swap_outs: Option<u64>,
}

/// One cgroup setup (v1: memory and optional freezer hierarchies mounted
/// separately; v2: one unified tree). All paths are [`GroupPath`]s relative
/// to the hierarchy roots.
pub trait CgroupBackend: Send + Sync + std::fmt::Debug {
    fn version(&self) -> CgroupVersion;
    /// One line for logs and results, e.g. "cgroup v1: memory at
    /// /sys/fs/cgroup/memory, freezer at /sys/fs/cgroup/freezer".
    fn describe(&self) -> String;
    /// Make the group (and missing ancestors) in every hierarchy used.
    /// Idempotent. v2: enables the memory controller for the new group in
    /// its parent's `cgroup.subtree_control` where needed.
    fn create(&self, group: &GroupPath) -> Result<()>;
    /// Remove the group and any groups below it, in every hierarchy. Ok if
    /// already gone; fails (naming the group) while processes remain.
    fn remove(&self, group: &GroupPath) -> Result<()>;
    /// v1 `memory.limit_in_bytes` (None => -1); v2 `memory.max` (None =>
    /// "max").
    fn set_memory_limit(&self, group: &GroupPath, bytes: Option<u64>) -> Result<()>;
    fn memory_limit(&self, group: &GroupPath) -> Result<Option<u64>>;
    /// While `on`, have the kernel reclaim the pages of the group's siblings
    /// before its own when their common parent (the pool) hits its memory
    /// limit: paper 000's selective page-out (the switched-out jobs lose
    /// pages first, each oldest first) done by the kernel's own LRU. The
    /// protection is a preference, not a pin: with nothing else left to
    /// reclaim, the kernel still takes the group's pages rather than OOM.
    /// It only applies to reclaim below the pool, not node-wide reclaim.
    /// Between unprotected siblings the kernel does not go by age: on v1
    /// (6.18) pool-limit reclaim took the first-created child's pages first.
    ///
    /// v1: the group's `memory.swappiness`, 1 while on (the anon list of a
    /// group at 1 is scanned about 60 times less than at the default 60);
    /// off restores the parent's value, which the group inherited at
    /// creation. v2: `memory.low`, "max" while on, "0" off.
    fn protect(&self, group: &GroupPath, on: bool) -> Result<()>;
    /// Have the kernel reclaim about `bytes` of the group's memory now,
    /// oldest pages first (its LRU order), and return how far the group's
    /// usage actually dropped (before - after, 0 if it grew). Returns once
    /// the kernel has finished trying; reclaiming less than asked (nothing
    /// more it could free) is not an error. `bytes == 0` does nothing.
    /// Used to page out only the shortfall an incoming job needs.
    ///
    /// v2: writes `bytes` to `memory.reclaim` (Linux 5.19+). v1, which has
    /// no such file: shrinks `memory.limit_in_bytes` to usage - `bytes`
    /// (the kernel reclaims until the usage fits) and puts the previous
    /// limit back, also when the shrink fails; meanwhile the group's own
    /// allocations must fit under the lowered limit, so call it on
    /// switched-out (frozen) groups.
    fn reclaim(&self, group: &GroupPath, bytes: u64) -> Result<u64>;
    /// The group's `cgroup.procs` in every hierarchy. The runtime opens them
    /// before fork and writes "0" to each from the child, so that a job is
    /// inside its group before it runs a single instruction of its own.
    fn procs_files(&self, group: &GroupPath) -> Vec<PathBuf>;
    /// Processes (thread-group ids) directly in the group.
    fn procs(&self, group: &GroupPath) -> Result<Vec<i32>>;
    /// Processes in the group and all groups below it, sorted, no repeats.
    fn procs_recursive(&self, group: &GroupPath) -> Result<Vec<i32>>;
    /// Whether [`set_frozen`](Self::set_frozen) can work: v1 freezer
    /// hierarchy mounted; v2 kernel with `cgroup.freeze` (Linux 5.2+).
    fn can_freeze(&self) -> bool;
    /// Freeze or thaw, and wait (at most [`FREEZE_TIMEOUT`] unless the
    /// backend was configured otherwise) until the kernel reports it done.
    fn set_frozen(&self, group: &GroupPath, frozen: bool) -> Result<()>;
    fn is_frozen(&self, group: &GroupPath) -> Result<bool>;
    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat>;
    /// The group's memory PSI (v2 `memory.pressure`); None on v1 or when the
    /// kernel has PSI disabled.
    fn memory_pressure(&self, group: &GroupPath) -> Option<Psi>;
    /// Top-level groups whose name starts with `prefix`, in any hierarchy
    /// used (for `memgang cleanup` of leftovers). Sorted, no repeats.
    fn list_groups(&self, prefix: &str) -> Result<Vec<GroupPath>>;
    /// Groups directly below `group`, in any hierarchy used. Sorted.
    fn list_children(&self, group: &GroupPath) -> Result<Vec<GroupPath>>;
    /// Whether the group exists in any hierarchy used.
    fn exists(&self, group: &GroupPath) -> bool;
}

/// Pick this node's cgroup backend:
///
/// 1. `MEMGANG_CGROUP=v1|v2` forces one (an error if it is not available);
/// 2. else a cgroup2 mount whose `cgroup.controllers` has `memory` (pure v2;
///    `/sys/fs/cgroup` preferred) => [`v2::V2`] there;
/// 3. else a v1 `memory` hierarchy => [`v1::V1`], with the v1 freezer if
///    that is mounted too;
/// 4. else [`Error::Unsupported`] saying what to do.
///
/// Mounts come from `/proc/self/mountinfo`, so nothing depends on where a
/// distribution mounts its hierarchies.
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
    spawn_into_as(backend, group, cmd, None)
}

/// Who a job runs as: a service (root) starting another user's job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// [`spawn_into`], then, when `user` is given, drop to that user in the
/// child: setgroups, setgid, setuid, in that order (each needs the
/// privilege the next one gives up), after joining the group, whose files
/// were opened as root, and before exec. A failure to drop aborts the
/// spawn: the job never runs as root by mistake.
pub fn spawn_into_as(
    backend: &dyn CgroupBackend,
    group: &GroupPath,
    cmd: &mut std::process::Command,
    user: Option<&Credentials>,
) -> Result<std::io::Result<std::process::Child>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let files = backend
        .procs_files(group)
        .iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| io_error("opening for writing", p, e))
        })
        .collect::<Result<Vec<_>>>()?;
    let fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
    let user = user.cloned();
    // SAFETY: the closure only calls write(2), setgroups(2), setgid(2) and
    // setuid(2), async-signal-safe, on descriptors that stay open until
    // spawn() returns (`files`) and memory allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(c) = &user {
                if libc::setgroups(c.groups.len(), c.groups.as_ptr()) != 0
                    || libc::setgid(c.gid) != 0
                    || libc::setuid(c.uid) != 0
                {
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

pub fn detect() -> Result<Box<dyn CgroupBackend>> {
    const MOUNTINFO: &str = "/proc/self/mountinfo";
    let text = std::fs::read_to_string(MOUNTINFO).map_err(|e| io_error("reading", MOUNTINFO, e))?;
    let forced = std::env::var("MEMGANG_CGROUP").ok();
    let choice = choose_hierarchy(&parse_mountinfo(&text), forced.as_deref(), &|root| {
        v2::has_controller(root, "memory")
    })?;
    let backend: Box<dyn CgroupBackend> = match choice {
        Hierarchy::V1 {
            memory_root,
            freezer_root,
        } => Box::new(v1::V1::new(memory_root, freezer_root)),
        Hierarchy::V2 { root } => Box::new(v2::V2::new(root)),
    };
    tracing::debug!("cgroup backend: {}", backend.describe());
    Ok(backend)
}

/// What [`choose_hierarchy`] found: the roots a backend is built on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    V1 {
        memory_root: PathBuf,
        freezer_root: Option<PathBuf>,
    },
    V2 {
        root: PathBuf,
    },
}

/// The decision of [`detect`], separated from the I/O so it can be tested:
/// `v2_has_memory(root)` says whether a cgroup2 mount offers the memory
/// controller; `forced` is the value of `MEMGANG_CGROUP`.
pub fn choose_hierarchy(
    mounts: &[Mount],
    forced: Option<&str>,
    v2_has_memory: &dyn Fn(&Path) -> bool,
) -> Result<Hierarchy> {
    let mut v2_mounts: Vec<&Mount> = mounts.iter().filter(|m| m.fstype == "cgroup2").collect();
    // The canonical place first: with several cgroup2 mounts (bind mounts,
    // a container's view) the one at /sys/fs/cgroup is the one tools use.
    v2_mounts.sort_by_key(|m| m.mount_point != Path::new("/sys/fs/cgroup"));
    let v2 = v2_mounts
        .iter()
        .find(|m| v2_has_memory(&m.mount_point))
        .map(|m| Hierarchy::V2 {
            root: m.mount_point.clone(),
        });
    let v1_with = |controller: &str| {
        mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == controller))
            .map(|m| m.mount_point.clone())
    };
    let v1 = v1_with("memory").map(|memory_root| Hierarchy::V1 {
        memory_root,
        freezer_root: v1_with("freezer"),
    });

    match forced.map(str::trim) {
        Some("v2") => v2.ok_or_else(|| {
            let seen: Vec<String> = v2_mounts.iter().map(|m| m.mount_point.display().to_string()).collect();
            Error::Unsupported(format!(
                "MEMGANG_CGROUP=v2, but no cgroup2 mount offers the memory controller (cgroup2 mounts: {}); \
                 boot with systemd.unified_cgroup_hierarchy=1 or unset MEMGANG_CGROUP",
                if seen.is_empty() { "none".to_string() } else { seen.join(", ") }
            ))
        }),
        Some("v1") => v1.ok_or_else(|| {
            Error::Unsupported(
                "MEMGANG_CGROUP=v1, but no cgroup v1 memory hierarchy is mounted; \
                 mount one (mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory) or unset MEMGANG_CGROUP"
                    .into(),
            )
        }),
        Some(other) if !other.is_empty() => {
            Err(Error::Unsupported(format!("MEMGANG_CGROUP={other:?}: expected \"v1\" or \"v2\" (or unset it)")))
        }
        _ => v2.or(v1).ok_or_else(|| {
            Error::Unsupported(
                "no cgroup memory controller found: neither a cgroup2 mount with \"memory\" in cgroup.controllers \
                 nor a cgroup v1 memory hierarchy is mounted (see /proc/self/mountinfo). memgang needs one to limit \
                 the jobs' memory: enable CONFIG_MEMCG, do not boot with cgroup_disable=memory, and mount cgroup2 at \
                 /sys/fs/cgroup (or v1 memory at /sys/fs/cgroup/memory)"
                    .into(),
            )
        }),
    }
}

/// One line of `/proc/self/mountinfo`, the fields memgang needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted (octal escapes such as `\040` decoded).
    pub mount_point: PathBuf,
    /// Which directory of the filesystem is mounted there (`/` for a whole
    /// hierarchy; a subtree for bind mounts and some containers).
    pub root: String,
    pub fstype: String,
    /// Per-superblock options (`name` or `name=value`), sorted; for cgroup
    /// v1 these name the controllers.
    pub super_options: Vec<String>,
}

impl Mount {
    fn from_procfs(m: procfs::process::MountInfo) -> Self {
        let mut super_options: Vec<String> = m
            .super_options
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => format!("{k}={v}"),
                None => k,
            })
            .collect();
        super_options.sort();
        Mount {
            mount_point: PathBuf::from(unescape_octal(&m.mount_point.to_string_lossy())),
            root: unescape_octal(&m.root).to_string_lossy().into_owned(),
            fstype: m.fs_type,
            super_options,
        }
    }
}

/// Parse `/proc/self/mountinfo` (proc(5)) with procfs, line by line:
/// malformed lines are skipped, as one odd mount must not hide the others.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| procfs::process::MountInfo::from_line(line).ok())
        .map(Mount::from_procfs)
        .collect()
}

// ---- helpers shared by the two backends ---------------------------------

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

/// mkdir -p of `group` under `root`, tolerating groups that exist.
pub(crate) fn mkdir_group(root: &Path, group: &GroupPath) -> Result<()> {
    let dir = group.under(root);
    std::fs::create_dir_all(&dir).map_err(|e| io_error("creating cgroup directory", dir, e))
}

/// rmdir the group's directory and every directory below it, deepest first.
/// A group that is already gone is fine.
pub(crate) fn rmdir_group(root: &Path, group: &GroupPath) -> Result<()> {
    let dir = group.under(root);
    let mut dirs = Vec::new();
    if let Err(e) = collect_dirs(&dir, &mut dirs) {
        return match e {
            Error::Io { ref source, .. } if source.kind() == ErrorKind::NotFound => Ok(()),
            e => Err(e),
        };
    }
    // collect_dirs lists a directory before its children: reverse for
    // children first.
    for d in dirs.iter().rev() {
        rmdir_one(d)?;
    }
    Ok(())
}

fn rmdir_one(dir: &Path) -> Result<()> {
    let deadline = Instant::now() + RMDIR_BUSY_GRACE;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let procs = read_pids(&dir.join("cgroup.procs")).unwrap_or_default();
                if !procs.is_empty() || Instant::now() >= deadline {
                    return Err(Error::Unsupported(format!(
                        "removing cgroup {}: {e}: processes {procs:?} are still in it \
                         (kill them first, e.g. `memgang cleanup`)",
                        dir.display()
                    )));
                }
                // Listed empty: exiting tasks are still being released.
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(io_error("removing cgroup directory", dir, e)),
        }
    }
}

/// `dir` and every directory below it, parents before children.
pub(crate) fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| io_error("listing cgroup directory", dir, e))?;
    out.push(dir.to_path_buf());
    for entry in entries {
        let entry = entry.map_err(|e| io_error("listing cgroup directory", dir, e))?;
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if is_dir {
            match collect_dirs(&entry.path(), out) {
                // Removed while we walked: nothing to do for it.
                Err(Error::Io { ref source, .. }) if source.kind() == ErrorKind::NotFound => {}
                r => r?,
            }
        }
    }
    Ok(())
}

/// Pids in `group` and below under one hierarchy root, added to `out`.
/// Groups that vanish during the walk are skipped (their processes are gone
/// with them); Ok(false) if the group itself does not exist.
pub(crate) fn procs_below(root: &Path, group: &GroupPath, out: &mut BTreeSet<i32>) -> Result<bool> {
    let mut dirs = Vec::new();
    match collect_dirs(&group.under(root), &mut dirs) {
        Ok(()) => {}
        Err(Error::Io { ref source, .. }) if source.kind() == ErrorKind::NotFound => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    }
    for d in dirs {
        match read_pids(&d.join("cgroup.procs")) {
            Ok(pids) => out.extend(pids),
            Err(Error::Io { ref source, .. }) if source.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Subdirectories of `dir` whose name starts with `prefix` and is a valid
/// group name, as groups below `base` (None = top level).
pub(crate) fn child_groups(
    dir: &Path,
    base: Option<&GroupPath>,
    prefix: &str,
    out: &mut BTreeSet<GroupPath>,
) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| io_error("listing cgroup directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error("listing cgroup directory", dir, e))?;
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(prefix) {
            continue;
        }
        let group = match base {
            Some(b) => b.join(name),
            None => GroupPath::new(name),
        };
        // A name we could not have made is not ours: leave it alone.
        if let Ok(g) = group {
            out.insert(g);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_path_accepts_memgang_names() {
        for ok in [
            "memgang-123",
            "memgang-123/job-a",
            "memgang-1/job-x.y_z",
            "a/b/c",
        ] {
            assert_eq!(GroupPath::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn group_path_rejects_escapes_and_odd_characters() {
        for bad in [
            "",
            "/memgang",
            "memgang/",
            "memgang//job",
            "..",
            "memgang/../etc",
            "./memgang",
            "mem gang",
            "memgang\n",
            "memgang/jöb",
            "a*b",
            &"x".repeat(256),
        ] {
            assert!(GroupPath::new(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn group_path_join_parent_name() {
        let pool = GroupPath::new("memgang-7").unwrap();
        let job = pool.join("job-a").unwrap();
        assert_eq!(job.as_str(), "memgang-7/job-a");
        assert_eq!(job.name(), "job-a");
        assert_eq!(job.parent(), Some(pool.clone()));
        assert_eq!(pool.parent(), None);
        assert!(pool.join("../x").is_err());
        assert!(pool.join("").is_err());
        assert_eq!(
            job.under(Path::new("/sys/fs/cgroup")),
            PathBuf::from("/sys/fs/cgroup/memgang-7/job-a")
        );
    }

    /// This machine's layout: v1 controllers plus a cgroup2 mount without
    /// memory (a "hybrid" systemd setup).
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const PURE_V2: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
28 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    #[test]
    fn mountinfo_parses_fields_and_optional_tags() {
        let m = parse_mountinfo(HYBRID);
        assert_eq!(m.len(), 5);
        assert_eq!(m[2].mount_point, PathBuf::from("/sys/fs/cgroup/memory"));
        assert_eq!(m[2].fstype, "cgroup");
        assert_eq!(m[2].super_options, vec!["memory", "rw"]);
        assert_eq!(m[0].super_options, vec!["mode=755", "rw"]);
        assert_eq!(m[2].root, "/");
        let p = parse_mountinfo(PURE_V2);
        assert_eq!(p[1].fstype, "cgroup2");
        assert_eq!(
            p[1].super_options,
            vec!["memory_recursiveprot", "nsdelegate", "rw"]
        );
    }

    #[test]
    fn mountinfo_unescapes_and_skips_garbage() {
        let text = "1 2 0:1 /sub\\134dir /mnt/with\\040space rw - cgroup cgroup rw,cpu,memory\n\
                    not a mountinfo line\n\
                    2 1 0:2 / /x rw - cgroup\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(m[0].root, "/sub\\dir");
        assert_eq!(m[0].super_options, vec!["cpu", "memory", "rw"]);
    }

    #[test]
    fn choose_prefers_v2_with_memory_else_v1() {
        let no_mem = |_: &Path| false;
        let mem = |_: &Path| true;
        let hybrid = parse_mountinfo(HYBRID);
        assert_eq!(
            choose_hierarchy(&hybrid, None, &no_mem).unwrap(),
            Hierarchy::V1 {
                memory_root: "/sys/fs/cgroup/memory".into(),
                freezer_root: Some("/sys/fs/cgroup/freezer".into())
            }
        );
        assert!(choose_hierarchy(&hybrid, Some("v2"), &no_mem).is_err());
        // Were memory available in the unified tree, v2 would win.
        assert_eq!(
            choose_hierarchy(&hybrid, None, &mem).unwrap(),
            Hierarchy::V2 {
                root: "/sys/fs/cgroup/unified".into()
            }
        );
        assert!(matches!(
            choose_hierarchy(&hybrid, Some("v1"), &mem).unwrap(),
            Hierarchy::V1 { .. }
        ));

        let pure = parse_mountinfo(PURE_V2);
        assert_eq!(
            choose_hierarchy(&pure, None, &mem).unwrap(),
            Hierarchy::V2 {
                root: "/sys/fs/cgroup".into()
            }
        );
        let e = choose_hierarchy(&pure, Some("v1"), &mem)
            .unwrap_err()
            .to_string();
        assert!(e.contains("MEMGANG_CGROUP=v1"), "{e}");
        let e = choose_hierarchy(&pure, None, &no_mem)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no cgroup memory controller"), "{e}");
        let e = choose_hierarchy(&pure, Some("v3"), &mem)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected"), "{e}");
    }

    #[test]
    fn v1_without_freezer_and_comounted() {
        let m = parse_mountinfo("1 0 0:1 / /cg/mem rw - cgroup cgroup rw,memory\n");
        assert_eq!(
            choose_hierarchy(&m, None, &|_: &Path| false).unwrap(),
            Hierarchy::V1 {
                memory_root: "/cg/mem".into(),
                freezer_root: None
            }
        );
        let m = parse_mountinfo("1 0 0:1 / /cg/mf rw - cgroup cgroup rw,memory,freezer\n");
        assert_eq!(
            choose_hierarchy(&m, None, &|_: &Path| false).unwrap(),
            Hierarchy::V1 {
                memory_root: "/cg/mf".into(),
                freezer_root: Some("/cg/mf".into())
            }
        );
    }

    #[test]
    fn permission_errors_say_what_to_do() {
        let e = io_error(
            "writing",
            "/sys/fs/cgroup/x/memory.max",
            std::io::Error::from_raw_os_error(libc::EACCES),
        );
        let msg = e.to_string();
        assert!(matches!(e, Error::Permission(_)));
        assert!(
            msg.contains("/sys/fs/cgroup/x/memory.max")
                && msg.contains("writing")
                && msg.contains("root"),
            "{msg}"
        );
        let e = io_error(
            "reading",
            "/f",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(matches!(e, Error::Io { .. }));
    }

    #[test]
    fn keyed_parser_skips_odd_lines() {
        let m = parse_keyed("a 1\nb x\n\nc 3 extra\n");
        assert_eq!(m.get("a"), Some(&1));
        assert_eq!(m.get("b"), None);
        assert_eq!(m.get("c"), Some(&3));
    }
}
