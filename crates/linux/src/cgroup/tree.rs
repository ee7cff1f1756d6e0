//! Walking and changing a hierarchy's directory tree: making and removing
//! groups, listing their processes and children.

use super::GroupPath;
use crate::error::{Error, Result};
use crate::sysfs::{io_error, read_pids};
use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long `remove` retries an rmdir that fails with EBUSY although no
/// process is listed. A killed task leaves `cgroup.procs` when it exits, but
/// the kernel releases its cgroup membership a little later (after it is
/// reaped and has switched out for the last time); in that window rmdir
/// says EBUSY. Milliseconds in practice; one second is ample.
const RMDIR_BUSY_GRACE: Duration = Duration::from_secs(1);

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
