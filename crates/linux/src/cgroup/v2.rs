//! cgroup v2: one unified tree (Documentation/admin-guide/cgroup-v2.rst).
//!
//! Controllers are enabled per subtree: a group only has `memory.*` files
//! if its parent lists `memory` in `cgroup.subtree_control`, so
//! [`create`](CgroupBackend::create) enables it on the way down. Interfaces
//! used: `cgroup.controllers`, `cgroup.subtree_control`, `cgroup.procs`,
//! `memory.max`, `memory.current`, `memory.low`, `memory.reclaim`,
//! `memory.stat`, `memory.swap.current`, `memory.pressure`, `cgroup.freeze`
//! and the `frozen` key of `cgroup.events`.
//!
//! [`V2`] only does file operations under its root, so it runs unchanged on
//! a fake tree of plain files (the tests do that: this project's CI kernel
//! has no v2 memory controller). On a fake tree nothing answers a write, so
//! every wait for the kernel is bounded and its error names the file.

use super::tree::{child_groups, procs_below, rmdir_group};
use super::{CgroupBackend, CgroupVersion, GroupPath, MemoryStat, FREEZE_TIMEOUT};
use crate::counters::Psi;
use crate::error::{Error, Result};
use crate::sysfs::{
    errno, io_error, parse_keyed, parse_u64, read_file, read_optional, read_pids, required,
    wait_until, write_file,
};
use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// statfs(2) f_type of a cgroup2 filesystem (linux/magic.h).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// cgroup.freeze appeared in Linux 5.2.
const FREEZE_MIN_KERNEL: (u32, u32) = (5, 2);

/// memory.reclaim (proactive reclaim) appeared in Linux 5.19.
const RECLAIM_MIN_KERNEL: (u32, u32) = (5, 19);

#[derive(Debug)]
pub struct V2 {
    root: PathBuf,
    freeze_timeout: Duration,
}

impl V2 {
    /// A backend on the cgroup2 tree at `root` (normally /sys/fs/cgroup; any
    /// directory works, e.g. a fake tree in a test).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        V2 {
            root: root.into(),
            freeze_timeout: FREEZE_TIMEOUT,
        }
    }

    /// Wait at most `timeout` for a freeze or thaw to complete.
    pub fn with_freeze_timeout(mut self, timeout: Duration) -> Self {
        self.freeze_timeout = timeout;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&self, group: &GroupPath, name: &str) -> PathBuf {
        group.under(&self.root).join(name)
    }

    /// Make sure `dir`'s children get the memory controller: add "+memory"
    /// to its `cgroup.subtree_control` if `dir` has the controller and it is
    /// not enabled yet. A parent without the controller is left alone: the
    /// group is still usable for freezing, and the memory calls then say
    /// clearly that the controller is missing.
    fn enable_memory_below(&self, dir: &Path) -> Result<()> {
        let controllers = dir.join("cgroup.controllers");
        let available = read_file(&controllers).map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == ErrorKind::NotFound => {
                Error::Unsupported(format!(
                    "{} does not exist: {} is not a cgroup2 directory",
                    controllers.display(),
                    dir.display()
                ))
            }
            e => e,
        })?;
        if !available.split_whitespace().any(|c| c == "memory") {
            tracing::debug!(
                "{}: no memory controller to enable below {}",
                controllers.display(),
                dir.display()
            );
            return Ok(());
        }
        let subtree = dir.join("cgroup.subtree_control");
        // The kernel lists enabled controllers bare ("cpu memory"); accept
        // "+memory" too, which is what a fake tree holds after our write.
        let enabled = read_file(&subtree)?;
        if enabled
            .split_whitespace()
            .any(|c| c.trim_start_matches('+') == "memory")
        {
            return Ok(());
        }
        write_file(&subtree, "+memory").map_err(|e| match e {
            Error::Io { ref source, .. } if source.raw_os_error() == Some(libc::EBUSY) => Error::Unsupported(format!(
                "writing +memory to {}: {source}: cgroup {} has processes of its own, and cgroup v2 cannot \
                 enable a controller for the children of a non-root group that has processes (\"no internal \
                 processes\" rule). Move its processes into a child group first, or give memgang a delegated \
                 subtree without processes",
                subtree.display(),
                dir.display()
            )),
            e => e,
        })
    }

    /// A clearer error for a memory file that is missing although the group
    /// exists: the memory controller is not enabled for it.
    fn memory_file_error(&self, group: &GroupPath, file: &Path, e: Error) -> Error {
        match e {
            Error::Io { ref source, .. }
                if source.kind() == ErrorKind::NotFound && group.under(&self.root).is_dir() =>
            {
                let parent = group
                    .parent()
                    .map_or(self.root.clone(), |p| p.under(&self.root));
                Error::Unsupported(format!(
                    "{} does not exist: the memory controller is not enabled for cgroup {group} \
                     (\"memory\" missing from {}/cgroup.subtree_control)",
                    file.display(),
                    parent.display()
                ))
            }
            e => e,
        }
    }

    fn read_memory_file(&self, group: &GroupPath, name: &str) -> Result<(PathBuf, String)> {
        let path = self.file(group, name);
        match read_file(&path) {
            Ok(text) => Ok((path, text)),
            Err(e) => Err(self.memory_file_error(group, &path, e)),
        }
    }

    fn frozen_from_events(path: &Path, text: &str) -> Result<bool> {
        let events = parse_keyed(text);
        match events.get("frozen") {
            Some(v) => Ok(*v == 1),
            None => Err(Error::Unsupported(format!(
                "{} has no \"frozen\" key: this kernel has no cgroup v2 freezer (needs Linux {}.{}+)",
                path.display(),
                FREEZE_MIN_KERNEL.0,
                FREEZE_MIN_KERNEL.1
            ))),
        }
    }
}

/// Whether the cgroup2 directory `dir` offers `controller` (in its
/// `cgroup.controllers`). False if it cannot be read.
pub fn has_controller(dir: &Path, controller: &str) -> bool {
    std::fs::read_to_string(dir.join("cgroup.controllers"))
        .map(|s| s.split_whitespace().any(|c| c == controller))
        .unwrap_or(false)
}

/// Parse a v2 `memory.stat` (usage and swap come from other files).
/// `pswpin`/`pswpout` are per-cgroup only on newer kernels, hence Options.
pub fn parse_memory_stat(text: &str, path: &Path) -> Result<MemoryStat> {
    let m = parse_keyed(text);
    Ok(MemoryStat {
        anon_bytes: required(&m, "anon", path, text)?,
        file_bytes: required(&m, "file", path, text)?,
        usage_bytes: 0,
        swap_bytes: None,
        major_faults: required(&m, "pgmajfault", path, text)?,
        swap_ins: m.get("pswpin").copied(),
        swap_outs: m.get("pswpout").copied(),
        anon_huge_bytes: m.get("anon_thp").copied(),
        unevictable_bytes: m.get("unevictable").copied(),
    })
}

fn is_cgroup2_fs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct we own; c is a valid C
    // string for the duration of the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    st.f_type as i64 == CGROUP2_SUPER_MAGIC
}

/// (major, minor) of the running kernel (`/proc/sys/kernel/osrelease`,
/// what uname(2) reports, parsed by procfs).
fn kernel_version() -> Option<(u32, u32)> {
    let v = procfs::KernelVersion::current().ok()?;
    Some((u32::from(v.major), u32::from(v.minor)))
}

impl CgroupBackend for V2 {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }

    fn describe(&self) -> String {
        let controllers =
            std::fs::read_to_string(self.root.join("cgroup.controllers")).unwrap_or_default();
        format!(
            "cgroup v2 at {} (controllers: {})",
            self.root.display(),
            controllers.trim()
        )
    }

    fn create(&self, group: &GroupPath) -> Result<()> {
        let mut dir = self.root.clone();
        for comp in group.as_str().split('/') {
            self.enable_memory_below(&dir)?;
            dir.push(comp);
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error("creating cgroup directory", dir, e)),
            }
        }
        Ok(())
    }

    fn create_leaf(&self, group: &GroupPath) -> Result<()> {
        let dir = group.under(&self.root);
        std::fs::create_dir_all(&dir).map_err(|e| io_error("creating cgroup directory", dir, e))
    }

    fn remove(&self, group: &GroupPath) -> Result<()> {
        rmdir_group(&self.root, group)
    }

    fn set_memory_limit(&self, group: &GroupPath, bytes: Option<u64>) -> Result<()> {
        let path = self.file(group, "memory.max");
        let value = bytes.map_or_else(|| "max".to_string(), |b| b.to_string());
        write_file(&path, &value).map_err(|e| self.memory_file_error(group, &path, e))
    }

    fn memory_limit(&self, group: &GroupPath) -> Result<Option<u64>> {
        let (path, text) = self.read_memory_file(group, "memory.max")?;
        match text.trim() {
            "max" => Ok(None),
            v => parse_u64(&path, v).map(Some),
        }
    }

    fn protect(&self, group: &GroupPath, on: bool) -> Result<()> {
        // When the pool hits memory.max, the pool is the reclaim root, and
        // for a child of the reclaim root the kernel takes memory.low as
        // the effective protection as it is (mem_cgroup_calculate_protection),
        // so "max" shields all of the group's pages while a sibling has
        // unprotected ones. Reclaim that finds only protected pages makes a
        // second pass that ignores memory.low (and counts a `low` event),
        // so the group is paged rather than OOM-killed.
        let path = self.file(group, "memory.low");
        write_file(&path, if on { "max" } else { "0" })
            .map_err(|e| self.memory_file_error(group, &path, e))
    }

    fn reclaim(&self, group: &GroupPath, bytes: u64) -> Result<u64> {
        if bytes == 0 {
            return Ok(0);
        }
        let (current, text) = self.read_memory_file(group, "memory.current")?;
        let before = parse_u64(&current, &text)?;
        // The write returns when the kernel is done: Ok once it freed
        // `bytes`, EAGAIN when it gave up short of that (after
        // MAX_RECLAIM_RETRIES rounds that freed nothing), which is a
        // result, not a failure. A group's own memory.low does not apply
        // when it is the root of the reclaim, so this also works on a
        // protected group.
        let path = self.file(group, "memory.reclaim");
        match write_file(&path, &bytes.to_string()) {
            Ok(()) => {}
            Err(e) if errno(&e) == Some(libc::EAGAIN) => {
                tracing::debug!("cgroup {group}: reclaim of {bytes} bytes stopped short: {e}");
            }
            // memory.current was there, so the controller is enabled: a
            // missing memory.reclaim means an older kernel.
            Err(Error::Io { ref source, .. }) if source.kind() == ErrorKind::NotFound => {
                return Err(Error::Unsupported(format!(
                    "{} does not exist: this kernel has no proactive reclaim (needs Linux {}.{}+)",
                    path.display(),
                    RECLAIM_MIN_KERNEL.0,
                    RECLAIM_MIN_KERNEL.1
                )));
            }
            Err(e) => return Err(e),
        }
        let (current, text) = self.read_memory_file(group, "memory.current")?;
        Ok(before.saturating_sub(parse_u64(&current, &text)?))
    }

    fn procs_files(&self, group: &GroupPath) -> Vec<PathBuf> {
        vec![self.file(group, "cgroup.procs")]
    }

    fn procs(&self, group: &GroupPath) -> Result<Vec<i32>> {
        read_pids(&self.file(group, "cgroup.procs"))
    }

    fn procs_recursive(&self, group: &GroupPath) -> Result<Vec<i32>> {
        let mut pids = BTreeSet::new();
        if !procs_below(&self.root, group, &mut pids)? {
            let path = group.under(&self.root);
            return Err(io_error(
                "listing processes of cgroup",
                path,
                ErrorKind::NotFound.into(),
            ));
        }
        Ok(pids.into_iter().collect())
    }

    fn can_freeze(&self) -> bool {
        // The root group has no cgroup.freeze, so look at its children too;
        // on a real cgroup2 mount without children decide by kernel version.
        if self.root.join("cgroup.freeze").exists() {
            return true;
        }
        let child_has_it = std::fs::read_dir(&self.root)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.path().join("cgroup.freeze").exists())
            })
            .unwrap_or(false);
        child_has_it
            || (is_cgroup2_fs(&self.root)
                && kernel_version().is_some_and(|v| v >= FREEZE_MIN_KERNEL))
    }

    fn set_frozen(&self, group: &GroupPath, frozen: bool) -> Result<()> {
        write_file(
            &self.file(group, "cgroup.freeze"),
            if frozen { "1" } else { "0" },
        )?;
        // cgroup.freeze says what we asked for; cgroup.events "frozen" says
        // what the kernel has done (every task stopped, or running again).
        let events = self.file(group, "cgroup.events");
        let mut last = String::new();
        let done = wait_until(self.freeze_timeout, || {
            last = read_file(&events)?;
            Ok(Self::frozen_from_events(&events, &last)? == frozen)
        })?;
        if !done {
            return Err(Error::Unsupported(format!(
                "{}: cgroup {group} not {} after {:?} (reads {:?}){}",
                events.display(),
                if frozen { "frozen" } else { "thawed" },
                self.freeze_timeout,
                last.trim(),
                if frozen {
                    " - a task may be stuck in uninterruptible sleep"
                } else {
                    " - is a parent group frozen?"
                }
            )));
        }
        Ok(())
    }

    fn is_frozen(&self, group: &GroupPath) -> Result<bool> {
        let events = self.file(group, "cgroup.events");
        Self::frozen_from_events(&events, &read_file(&events)?)
    }

    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat> {
        let (path, text) = self.read_memory_file(group, "memory.stat")?;
        let mut stat = parse_memory_stat(&text, &path)?;
        let (current, text) = self.read_memory_file(group, "memory.current")?;
        stat.usage_bytes = parse_u64(&current, &text)?;
        // Absent on kernels built without swap support.
        let swap = self.file(group, "memory.swap.current");
        stat.swap_bytes = match read_optional(&swap)? {
            Some(text) => Some(parse_u64(&swap, &text)?),
            None => None,
        };
        Ok(stat)
    }

    fn memory_pressure(&self, group: &GroupPath) -> Option<Psi> {
        Psi::read(&self.file(group, "memory.pressure"))
    }

    fn list_groups(&self, prefix: &str) -> Result<Vec<GroupPath>> {
        let mut groups = BTreeSet::new();
        child_groups(&self.root, None, prefix, &mut groups)?;
        Ok(groups.into_iter().collect())
    }

    fn list_children(&self, group: &GroupPath) -> Result<Vec<GroupPath>> {
        let mut groups = BTreeSet::new();
        child_groups(&group.under(&self.root), Some(group), "", &mut groups)?;
        Ok(groups.into_iter().collect())
    }

    fn exists(&self, group: &GroupPath) -> bool {
        group.under(&self.root).is_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shape of a 6.x kernel's memory.stat (trimmed).
    const STAT: &str = "\
anon 33554432
file 4096000
kernel 1052672
kernel_stack 16384
shmem 0
zswap 0
swapcached 0
anon_thp 0
inactive_anon 33521664
active_anon 32768
slab 262144
workingset_refault_anon 12
pgfault 8392
pgmajfault 17
pswpin 120
pswpout 8300
thp_fault_alloc 0
";

    #[test]
    fn parses_v2_stat() {
        let s = parse_memory_stat(STAT, Path::new("memory.stat")).unwrap();
        assert_eq!(s.anon_bytes, 33554432);
        assert_eq!(s.file_bytes, 4096000);
        assert_eq!(s.major_faults, 17);
        assert_eq!(s.swap_ins, Some(120));
        assert_eq!(s.swap_outs, Some(8300));
        assert_eq!(s.swap_bytes, None);
        assert_eq!(s.anon_huge_bytes, Some(0));
    }

    #[test]
    fn older_kernels_lack_pswp() {
        let text = STAT.replace("pswpin 120\npswpout 8300\n", "");
        let s = parse_memory_stat(&text, Path::new("memory.stat")).unwrap();
        assert_eq!((s.swap_ins, s.swap_outs), (None, None));
        let e = parse_memory_stat("anon 1\n", Path::new("/g/memory.stat"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/g/memory.stat") && e.contains("\"file\""),
            "{e}"
        );
    }

    #[test]
    fn frozen_key() {
        let p = Path::new("cgroup.events");
        assert!(V2::frozen_from_events(p, "populated 1\nfrozen 1\n").unwrap());
        assert!(!V2::frozen_from_events(p, "populated 1\nfrozen 0\n").unwrap());
        assert!(V2::frozen_from_events(p, "populated 1\n").is_err());
    }

    #[test]
    fn kernel_version_is_readable() {
        let v = kernel_version().unwrap();
        assert!(v >= (3, 0), "{v:?}");
    }
}
