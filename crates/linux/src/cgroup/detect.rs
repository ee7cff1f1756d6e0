//! Which cgroup interface this node has: its mounts, read from
//! /proc/self/mountinfo, and the backend that drives them.

use super::{v1, v2, CgroupBackend};
use crate::error::{Error, Result};
use crate::proc::unescape_octal;
use crate::sysfs::io_error;
use std::path::{Path, PathBuf};

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
