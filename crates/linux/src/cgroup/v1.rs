//! cgroup v1: the memory controller and (optionally) the freezer controller,
//! each its own hierarchy with its own mount. A memgang group is one
//! directory of the same relative path in each hierarchy, and a process is
//! put in both (hence two `cgroup.procs` files in
//! [`procs_files`](CgroupBackend::procs_files)).
//!
//! Kernel interfaces (Documentation/admin-guide/cgroup-v1/memory.rst and
//! freezer-subsystem.rst): `memory.limit_in_bytes`, `memory.usage_in_bytes`,
//! `memory.stat` (`total_*` fields count the group and its descendants),
//! `memory.swappiness`, `freezer.state` (THAWED / FREEZING / FROZEN).

use super::tree::{child_groups, mkdir_group, procs_below, rmdir_group};
use super::{CgroupBackend, CgroupVersion, GroupPath, MemoryStat, FREEZE_TIMEOUT};
use crate::counters::Psi;
use crate::error::{Error, Result};
use crate::sysfs::{
    errno, io_error, page_size, parse_keyed, parse_u64, read_file, read_pids, required, wait_until,
    write_file,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// v1 reports "no limit" as the largest page-aligned value a page counter
/// holds (LONG_MAX rounded down to a page: 0x7FFFFFFFFFFFF000 with 4 KiB
/// pages, ...0000 with 64 KiB pages). Anything at or above the 64 KiB
/// figure therefore means unlimited on every page size.
const V1_UNLIMITED_FROM: u64 = 0x7FFF_FFFF_FFFF_0000;
// What a 4 KiB-page kernel shows for "no limit" must count as unlimited.
const _: () = assert!(9_223_372_036_854_771_712 >= V1_UNLIMITED_FROM);

/// `memory.swappiness` of a protected group (see
/// [`protect`](CgroupBackend::protect)). Not 0: reclaim below a v1 limit
/// takes only file pages from a group at 0 (get_scan_count's SCAN_FILE for
/// cgroup reclaim), so once the other jobs are paged out the protected job
/// would be OOM-killed instead of paged. At 1, get_scan_count gives the
/// group's anon list a 1/200 share of each scan where a sibling at the
/// default 60 gets 60/200 (anon and file costs being equal), i.e. about 60
/// times fewer pages scanned; and at priority 0, the last resort, any
/// nonzero swappiness scans anon and file alike.
const PROTECTED_SWAPPINESS: u64 = 1;

/// Limit writes per `reclaim`. Each write gives up (EBUSY) at the first
/// reclaim round that frees nothing (mem_cgroup_resize_max), which under
/// write-back comes early; the cap keeps a group that keeps freeing a
/// trickle from holding a switch without end.
const RECLAIM_ROUNDS: usize = 64;
/// Writes in a row without the usage going down before `reclaim` stops:
/// one may just have caught write-back in flight, two mean nothing is left
/// that the kernel can free (locked pages, a full swap device).
const RECLAIM_IDLE_ROUNDS: usize = 2;

#[derive(Debug)]
pub struct V1 {
    memory_root: PathBuf,
    freezer_root: Option<PathBuf>,
    freeze_timeout: Duration,
}

impl V1 {
    /// `memory_root`: where the memory hierarchy is mounted (e.g.
    /// /sys/fs/cgroup/memory); `freezer_root`: the freezer hierarchy, if
    /// mounted (it may be the same directory when co-mounted).
    pub fn new(memory_root: impl Into<PathBuf>, freezer_root: Option<PathBuf>) -> Self {
        V1 {
            memory_root: memory_root.into(),
            freezer_root,
            freeze_timeout: FREEZE_TIMEOUT,
        }
    }

    /// Wait at most `timeout` for a freeze or thaw to complete.
    pub fn with_freeze_timeout(mut self, timeout: Duration) -> Self {
        self.freeze_timeout = timeout;
        self
    }

    pub fn memory_root(&self) -> &Path {
        &self.memory_root
    }

    pub fn freezer_root(&self) -> Option<&Path> {
        self.freezer_root.as_deref()
    }

    /// Every hierarchy a group lives in, memory first, each once (the
    /// freezer may be co-mounted with memory).
    fn roots(&self) -> Vec<&Path> {
        let mut roots = vec![self.memory_root.as_path()];
        if let Some(f) = &self.freezer_root {
            if f != &self.memory_root {
                roots.push(f);
            }
        }
        roots
    }

    fn memory_file(&self, group: &GroupPath, file: &str) -> PathBuf {
        group.under(&self.memory_root).join(file)
    }

    fn freezer_state_file(&self, group: &GroupPath) -> Result<PathBuf> {
        match &self.freezer_root {
            Some(root) => Ok(group.under(root).join("freezer.state")),
            None => Err(Error::Unsupported(format!(
                "cannot freeze cgroup {group}: the cgroup v1 freezer controller is not mounted \
                 (mount -t cgroup -o freezer cgroup /sys/fs/cgroup/freezer, or use --signals)"
            ))),
        }
    }

    fn usage(&self, group: &GroupPath) -> Result<u64> {
        let path = self.memory_file(group, "memory.usage_in_bytes");
        parse_u64(&path, &read_file(&path)?)
    }

    fn read_freezer_state(&self, group: &GroupPath) -> Result<String> {
        let path = self.freezer_state_file(group)?;
        Ok(read_file(&path)?.trim().to_string())
    }
}

/// Parse a v1 `memory.stat`. The `total_*` fields are hierarchical (this
/// group and its descendants), which is what a pool's or job's figure must
/// be. `total_rss` already includes transparent huge pages (`total_rss_huge`
/// is the THP part of it), so it is not added again.
pub fn parse_memory_stat(text: &str, path: &Path) -> Result<MemoryStat> {
    let m = parse_keyed(text);
    Ok(MemoryStat {
        anon_bytes: required(&m, "total_rss", path, text)?,
        file_bytes: required(&m, "total_cache", path, text)?,
        usage_bytes: 0,
        // Only present with swap accounting (CONFIG_MEMCG_SWAP and not
        // swapaccount=0).
        swap_bytes: m.get("total_swap").copied(),
        major_faults: required(&m, "total_pgmajfault", path, text)?,
        // v1 does not count swap-ins/outs per cgroup.
        swap_ins: None,
        swap_outs: None,
        anon_huge_bytes: m.get("total_rss_huge").copied(),
        unevictable_bytes: m.get("total_unevictable").copied(),
    })
}

impl CgroupBackend for V1 {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V1
    }

    fn describe(&self) -> String {
        match &self.freezer_root {
            Some(f) => format!(
                "cgroup v1: memory at {}, freezer at {}",
                self.memory_root.display(),
                f.display()
            ),
            None => format!(
                "cgroup v1: memory at {}, no freezer",
                self.memory_root.display()
            ),
        }
    }

    fn create(&self, group: &GroupPath) -> Result<()> {
        for root in self.roots() {
            mkdir_group(root, group)?;
        }
        Ok(())
    }

    fn remove(&self, group: &GroupPath) -> Result<()> {
        // Try every hierarchy even if one fails, so a retry has less to do;
        // report the first failure.
        let mut first_err = None;
        for root in self.roots() {
            if let Err(e) = rmdir_group(root, group) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn set_memory_limit(&self, group: &GroupPath, bytes: Option<u64>) -> Result<()> {
        let value = bytes.map_or_else(|| "-1".to_string(), |b| b.to_string());
        write_file(&self.memory_file(group, "memory.limit_in_bytes"), &value)
    }

    fn memory_limit(&self, group: &GroupPath) -> Result<Option<u64>> {
        let path = self.memory_file(group, "memory.limit_in_bytes");
        let v = parse_u64(&path, &read_file(&path)?)?;
        Ok((v < V1_UNLIMITED_FROM).then_some(v))
    }

    fn protect(&self, group: &GroupPath, on: bool) -> Result<()> {
        let path = self.memory_file(group, "memory.swappiness");
        let value = if on {
            PROTECTED_SWAPPINESS
        } else {
            // A new memcg copies its parent's swappiness; the parent of a
            // top-level group is the root, whose file shows vm.swappiness.
            let parent = group
                .parent()
                .map_or_else(|| self.memory_root.clone(), |p| p.under(&self.memory_root))
                .join("memory.swappiness");
            parse_u64(&parent, &read_file(&parent)?)?
        };
        write_file(&path, &value.to_string()).map_err(|e| match e {
            Error::Io { ref source, .. } if source.raw_os_error() == Some(libc::EINVAL) => {
                Error::Unsupported(format!(
                    "writing {value} to {}: {source}: the kernel refused the swappiness. Kernels \
                     from before mid-2014 refuse it for any group inside a use_hierarchy tree, \
                     and values above 200 (100 before Linux 5.8) are refused; without it memgang \
                     cannot protect cgroup {group}'s pages from its siblings' reclaim",
                    path.display()
                ))
            }
            e => e,
        })
    }

    fn reclaim(&self, group: &GroupPath, bytes: u64) -> Result<u64> {
        if bytes == 0 {
            return Ok(0);
        }
        // v1 has no memory.reclaim. Shrinking the limit below the usage
        // makes the write itself reclaim (mem_cgroup_resize_max: reclaim
        // from the group, 32 pages a round, oldest first, until the usage
        // fits), so it returns once the freed pages are written to swap and
        // gone; it says EBUSY once a round frees nothing. (With a slow swap
        // device it may unmap more than that and leave the rest in the swap
        // cache, still in RAM and charged: the usage, not the mapped anon,
        // is the measure.) While the limit is low the group's own
        // allocations must also reclaim to fit (and OOM if they cannot),
        // which is why this is meant for switched-out groups.
        let limit_path = self.memory_file(group, "memory.limit_in_bytes");
        let previous = self.memory_limit(group)?;
        let before = self.usage(group)?;
        let page = page_size();
        let target = before.saturating_sub(bytes) / page * page;
        // One write gives up (EBUSY) at the first reclaim round that frees
        // nothing, which under write-back happens long before the group is
        // out of reclaimable pages: they are queued for swap and still
        // charged. So write again while the previous write made progress.
        let mut shrink = Ok(());
        let mut last = before;
        let mut idle = 0;
        for _ in 0..RECLAIM_ROUNDS {
            shrink = write_file(&limit_path, &target.to_string());
            match &shrink {
                Err(e) if errno(e) == Some(libc::EBUSY) => {}
                _ => break,
            }
            let now = self.usage(group)?;
            if now < last {
                idle = 0;
            } else {
                idle += 1;
                if idle >= RECLAIM_IDLE_ROUNDS {
                    break;
                }
            }
            last = now;
        }
        // Measured before the limit goes back up, so nothing the group
        // faults in afterwards counts against what was freed.
        let after = self.usage(group);
        if let Err(e) = self.set_memory_limit(group, previous) {
            let previous = previous.map_or_else(|| "-1".to_string(), |b| b.to_string());
            return Err(Error::Unsupported(format!(
                "putting back {} after reclaiming from cgroup {group}: {e}; its limit is still \
                 {target} instead of {previous}: write {previous} to it",
                limit_path.display()
            )));
        }
        match shrink {
            Ok(()) => {}
            // The kernel could not get the usage down to the target:
            // nothing more it could free (no swap space left, pages
            // locked), so the drop so far is the answer.
            Err(e) if errno(&e) == Some(libc::EBUSY) => {
                tracing::debug!("cgroup {group}: reclaim of {bytes} bytes stopped short: {e}");
            }
            Err(e) => return Err(e),
        }
        Ok(before.saturating_sub(after?))
    }

    fn procs_files(&self, group: &GroupPath) -> Vec<PathBuf> {
        self.roots()
            .into_iter()
            .map(|r| group.under(r).join("cgroup.procs"))
            .collect()
    }

    fn procs(&self, group: &GroupPath) -> Result<Vec<i32>> {
        read_pids(&self.memory_file(group, "cgroup.procs"))
    }

    fn procs_recursive(&self, group: &GroupPath) -> Result<Vec<i32>> {
        // The union over both hierarchies: a process normally sits in both,
        // but one that got into only one (a half-done move) must still be
        // found, or teardown would leave it behind.
        let mut pids = BTreeSet::new();
        let mut found = false;
        for root in self.roots() {
            found |= procs_below(root, group, &mut pids)?;
        }
        if !found {
            let path = group.under(&self.memory_root);
            return Err(io_error(
                "listing processes of cgroup",
                path,
                std::io::ErrorKind::NotFound.into(),
            ));
        }
        Ok(pids.into_iter().collect())
    }

    fn can_freeze(&self) -> bool {
        self.freezer_root
            .as_ref()
            .is_some_and(|r| r.join("cgroup.procs").exists())
    }

    fn set_frozen(&self, group: &GroupPath, frozen: bool) -> Result<()> {
        let path = self.freezer_state_file(group)?;
        let want = if frozen { "FROZEN" } else { "THAWED" };
        write_file(&path, want)?;
        // Writing FROZEN starts freezing; the state reads FREEZING until
        // every task has stopped (the kernel re-checks on each read).
        let mut last = String::new();
        let done = wait_until(self.freeze_timeout, || {
            last = read_file(&path)?.trim().to_string();
            Ok(last == want)
        })?;
        if !done {
            return Err(Error::Unsupported(format!(
                "{}: cgroup {group} still reads {last:?} {:?} after writing {want} \
                 (a task may be stuck in uninterruptible sleep; see /proc/<pid>/stack of {:?})",
                path.display(),
                self.freeze_timeout,
                self.procs(group).unwrap_or_default()
            )));
        }
        Ok(())
    }

    fn is_frozen(&self, group: &GroupPath) -> Result<bool> {
        Ok(self.read_freezer_state(group)? == "FROZEN")
    }

    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat> {
        let path = self.memory_file(group, "memory.stat");
        let mut stat = parse_memory_stat(&read_file(&path)?, &path)?;
        stat.usage_bytes = self.usage(group)?;
        Ok(stat)
    }

    fn memory_pressure(&self, _group: &GroupPath) -> Option<Psi> {
        // v1 has no per-cgroup PSI files.
        None
    }

    fn list_groups(&self, prefix: &str) -> Result<Vec<GroupPath>> {
        let mut groups = BTreeSet::new();
        for root in self.roots() {
            child_groups(root, None, prefix, &mut groups)?;
        }
        Ok(groups.into_iter().collect())
    }

    fn list_children(&self, group: &GroupPath) -> Result<Vec<GroupPath>> {
        let mut groups = BTreeSet::new();
        let mut found = false;
        for root in self.roots() {
            let dir = group.under(root);
            if dir.is_dir() {
                found = true;
                child_groups(&dir, Some(group), "", &mut groups)?;
            }
        }
        if !found {
            let path = group.under(&self.memory_root);
            return Err(io_error(
                "listing cgroup directory",
                path,
                std::io::ErrorKind::NotFound.into(),
            ));
        }
        Ok(groups.into_iter().collect())
    }

    fn exists(&self, group: &GroupPath) -> bool {
        self.roots().iter().any(|r| group.under(r).is_dir())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from this machine's kernel (6.18) for a group with THP.
    const STAT: &str = "\
cache 9220096
rss 5881856
rss_huge 2097152
swap 0
pgmajfault 0
total_cache 613871616
total_rss 11132928
total_rss_huge 2097152
total_shmem 9084928
total_swap 4096
total_pgfault 3060081
total_pgmajfault 1181
total_inactive_anon 5558272
";

    #[test]
    fn parses_hierarchical_totals() {
        let s = parse_memory_stat(STAT, Path::new("memory.stat")).unwrap();
        assert_eq!(
            s,
            MemoryStat {
                anon_bytes: 11132928,
                file_bytes: 613871616,
                usage_bytes: 0,
                swap_bytes: Some(4096),
                major_faults: 1181,
                swap_ins: None,
                swap_outs: None,
                anon_huge_bytes: Some(2097152),
                unevictable_bytes: None,
            }
        );
    }

    #[test]
    fn swap_is_none_without_swap_accounting() {
        let text = STAT.replace("total_swap 4096\n", "");
        let s = parse_memory_stat(&text, Path::new("memory.stat")).unwrap();
        assert_eq!(s.swap_bytes, None);
    }

    #[test]
    fn missing_field_names_file_and_field() {
        let text = STAT.replace("total_rss 11132928\n", "");
        let e = parse_memory_stat(&text, Path::new("/x/memory.stat"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/x/memory.stat") && e.contains("total_rss"),
            "{e}"
        );
    }
}
