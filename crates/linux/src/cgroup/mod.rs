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

mod detect;
mod spawn;
pub(crate) mod tree;
pub mod v1;
pub mod v2;

pub use detect::{choose_hierarchy, detect, parse_mountinfo, Hierarchy, Mount};
pub use spawn::{join, open_procs, spawn_into, spawn_into_as, Credentials};

use crate::counters::Psi;
use crate::error::{Error, Result};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// Anonymous transparent huge pages (PMD-sized), in bytes: v1
    /// `total_rss_huge`, v2 `anon_thp`. The kernel keeps this counter, so
    /// reading it costs one file read, where a process's smaps_rollup
    /// walks its page tables (`bench/switch_sampling.sh`: the switch's
    /// samples took 8-10 ms with smaps). None where the kernel does not
    /// show it.
    pub anon_huge_bytes: Option<u64>,
    /// Memory reclaim cannot take (locked by mlock, SHM_LOCK, ramfs),
    /// which no page-out moves: v1 `total_unevictable`, v2 `unevictable`.
    pub unevictable_bytes: Option<u64>,
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
    /// Make a group that only holds processes (a leaf), and its missing
    /// ancestors, without handing controllers down to it. v2: nothing is
    /// written to any `cgroup.subtree_control`, so this works while the
    /// parent still holds processes (a daemon moving itself into a leaf
    /// of its delegated group before it enables controllers there). v1:
    /// the same as [`create`](Self::create).
    fn create_leaf(&self, group: &GroupPath) -> Result<()> {
        self.create(group)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::{io_error, parse_keyed};

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
