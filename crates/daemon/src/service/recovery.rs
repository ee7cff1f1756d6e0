//! Recovery of a previous daemon's jobs from their cgroups and status
//! files: those alive in one pool rejoin the rotation, those alive in
//! older pools run to their end, what ended is recorded, what never
//! started is queued again. Nothing stays frozen; only the pools this
//! daemon made are removed.

use super::store::{finish, stopped_by_daemon, unix_now};
use super::Service;
use crate::journal::Record;
use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_proto::JobState;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What the previous daemon left: the pool to take over, the jobs alive
/// in it, and jobs alive in older pools.
pub(super) struct Recovered {
    pub(super) pool: Option<String>,
    pub(super) rejoin: Vec<(u64, Record)>,
    pub(super) elsewhere: Vec<Adopted>,
}

/// A job of a previous daemon found alive in a pool not taken over:
/// thawed and left to run to its end (it holds its promised memory until
/// then).
pub(super) struct Adopted {
    pub(super) id: u64,
    pub(super) group: GroupPath,
    pub(super) cancelled: bool,
}

impl Service {
    /// Jobs of the previous daemon: those alive in one pool rejoin the
    /// rotation in it (it becomes this daemon's pool); alive ones in
    /// other pools (left by several restarts) are thawed and run to their
    /// end; what ended is finished; what never started is queued again.
    /// Nothing stays frozen.
    pub(super) fn recover(&self) -> Recovered {
        let alive = self.alive_or_recorded();
        // Allowance files of jobs that ended while no daemon ran.
        let ids: BTreeSet<u64> = alive.iter().map(|(r, _)| r.info.id).collect();
        self.shared.remove_allowances(|id| !ids.contains(&id));
        // The pool holding most of them is taken over with its jobs.
        let mut count: BTreeMap<GroupPath, usize> = BTreeMap::new();
        for (_, g) in &alive {
            if let Some(p) = g.parent() {
                *count.entry(p).or_default() += 1;
            }
        }
        let pool = count
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(p, _)| p.clone());
        let mut out = Recovered {
            pool: pool.as_ref().map(|p| p.as_str().to_string()),
            rejoin: Vec::new(),
            elsewhere: Vec::new(),
        };
        for (r, group) in alive {
            let id = r.info.id;
            let _ = self.env.backend.protect(&group, false);
            if group.parent() == pool {
                tracing::info!("job {id} found alive in {}", group.as_str());
                self.shared.update(id, |r| {
                    r.info.state = JobState::Suspended;
                    r.info.started_unix_s.get_or_insert_with(unix_now);
                    r.info.reason = Some(
                        "adopted after a daemon restart: rejoins the policy's rotation".into(),
                    );
                });
                out.rejoin.push((id, r));
                continue;
            }
            out.elsewhere.push(self.run_to_end(id, group));
        }
        out
    }

    /// The admitted jobs of the journal with processes alive in their
    /// group; the others are recorded as they ended, or queued again if
    /// they never started.
    fn alive_or_recorded(&self) -> Vec<(Record, GroupPath)> {
        let backend = self.env.backend.as_ref();
        let records: Vec<Record> = self
            .shared
            .list(|r| !r.info.state.is_final() && r.admitted)
            .into_iter()
            .filter_map(|i| self.shared.get(i.id))
            .collect();
        let mut alive = Vec::new();
        for r in records {
            let id = r.info.id;
            let group = r.group.as_deref().and_then(|g| GroupPath::new(g).ok());
            let live = group.as_ref().is_some_and(|g| {
                backend.exists(g) && backend.procs_recursive(g).is_ok_and(|p| !p.is_empty())
            });
            if let (true, Some(group)) = (live, group.clone()) {
                alive.push((r, group));
                continue;
            }
            if let Some(g) = &group {
                remove_empty(backend, g);
            }
            let st = read_status(&r.info.log_dir);
            let launched = r.info.log_dir.join("stdout").exists();
            self.shared.update(id, |r| match st {
                Some((code, signal)) => finish(r, code, signal, false, None),
                None if launched => {
                    r.info.state = JobState::Failed;
                    r.info.reason = Some(
                        "ended while memgangd was down without recording its exit status (killed?)"
                            .into(),
                    );
                    r.info.finished_unix_s = Some(unix_now());
                }
                None => {
                    // Never started: it runs once, now.
                    r.admitted = false;
                    r.group = None;
                    r.info.state = JobState::Queued;
                }
            });
        }
        alive
    }

    /// A job alive in a pool not taken over: thawed and left to run to
    /// its end there.
    pub(super) fn run_to_end(&self, id: u64, group: GroupPath) -> Adopted {
        // Finish an interrupted switch by resuming everyone: the memory
        // was promised to all of them (admission), so they fit in pool
        // plus swap together.
        if let Err(e) = self.env.freezer.thaw(&group) {
            tracing::error!("thawing adopted job {id}: {e:#}");
        }
        let _ =
            memgang_linux::freeze::signal_group(self.env.backend.as_ref(), &group, libc::SIGCONT);
        tracing::info!("adopted job {id} from {}: runs to its end", group.as_str());
        self.shared.update(id, |r| {
            r.info.state = JobState::Running;
            r.info.started_unix_s.get_or_insert_with(unix_now);
            r.info.reason =
                Some("adopted after a daemon restart, in an older pool: runs to its end".into());
        });
        Adopted {
            id,
            group,
            cancelled: false,
        }
    }

    /// True once the adopted job has ended (and is recorded).
    pub(super) fn reap_adopted(&self, a: &Adopted) -> bool {
        let backend = self.env.backend.as_ref();
        if backend
            .procs_recursive(&a.group)
            .is_ok_and(|p| !p.is_empty())
        {
            return false;
        }
        let Some(r) = self.shared.get(a.id) else {
            return true;
        };
        let st = read_status(&r.info.log_dir);
        let cancelled = a.cancelled || self.shared.cancel_asked(a.id);
        let stopped = self.shared.stopped(a.id);
        self.shared.update(a.id, |r| {
            let (code, signal) = st.unwrap_or((None, Some(libc::SIGKILL)));
            finish(
                r,
                code,
                signal,
                cancelled,
                cancelled.then(|| "cancelled".into()),
            );
            stopped_by_daemon(r, stopped);
        });
        remove_empty(backend, &a.group);
        if let Some(pool) = a.group.parent() {
            if backend.list_children(&pool).is_ok_and(|c| c.is_empty()) {
                remove_empty(backend, &pool);
                self.own_pools(|pools| {
                    pools.remove(&pool.as_str().to_string());
                });
            }
        }
        true
    }

    /// Pools this daemon made earlier (`state_dir/pools`) with no job
    /// left in them. Pools it did not make, another daemon's among them,
    /// are never touched.
    pub(super) fn remove_stale_pools(&self, adopted: &[Adopted], current: &GroupPath) {
        let backend = self.env.backend.as_ref();
        let mut keep: BTreeSet<GroupPath> =
            adopted.iter().filter_map(|a| a.group.parent()).collect();
        keep.insert(current.clone());
        self.own_pools(|pools| {
            pools.retain(|name| {
                let Ok(pool) = GroupPath::new(name) else {
                    return false;
                };
                if keep.contains(&pool) {
                    return true;
                }
                for child in backend.list_children(&pool).unwrap_or_default() {
                    if backend.procs_recursive(&child).is_ok_and(|p| p.is_empty()) {
                        remove_empty(backend, &child);
                    }
                }
                remove_empty(backend, &pool);
                backend.exists(&pool)
            });
        });
    }
}

/// The shim's record of how the command ended, for a job the daemon did
/// not start (after a restart): `exit N` or `signal N` and a newline,
/// nothing else. At most 32 bytes are read (the file is root's, written
/// by the shim only, but a status file of an older version was the
/// user's), and anything else reads as no record.
pub(super) fn read_status(log_dir: &Path) -> Option<(Option<i32>, Option<i32>)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    const MAX: u64 = 32;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(log_dir.join("status"))
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    f.take(MAX).read_to_end(&mut bytes).ok()?;
    parse_status(&bytes)
}

/// The shim's last word (`memgangd shim: ...`) in root's stderr file of
/// the job: why a job failed before its command ran (an output file the
/// user cannot write, a command that would not start). The command
/// writes to its own files, never to this one.
pub(super) fn shim_said(log_dir: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    const MAX: u64 = 4096;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(log_dir.join("stderr"))
        .ok()?;
    let len = f.metadata().ok().filter(|m| m.is_file())?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(MAX))).ok()?;
    let mut text = String::new();
    f.take(MAX).read_to_string(&mut text).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("memgangd shim: "))
        .map(str::to_string)
}

fn parse_status(bytes: &[u8]) -> Option<(Option<i32>, Option<i32>)> {
    let line = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let (kind, n) = line.split_once(' ')?;
    if n.is_empty() || n.len() > 3 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i32 = n.parse().ok()?;
    match kind {
        "exit" if n <= 255 => Some((Some(n), None)),
        "signal" if (1..=64).contains(&n) => Some((None, Some(n))),
        _ => None,
    }
}

fn remove_empty(backend: &dyn CgroupBackend, group: &GroupPath) {
    if backend.exists(group) {
        if let Err(e) = backend.remove(group) {
            tracing::warn!("removing cgroup {}: {e}", group.as_str());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_file_parses() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_status(d.path()), None);
        std::fs::write(d.path().join("status"), "").unwrap();
        assert_eq!(read_status(d.path()), None);
        std::fs::write(d.path().join("status"), "exit 3\n").unwrap();
        assert_eq!(read_status(d.path()), Some((Some(3), None)));
        std::fs::write(d.path().join("status"), "signal 9\n").unwrap();
        assert_eq!(read_status(d.path()), Some((None, Some(9))));
        // Only a whole line of the two kinds, in range; nothing else.
        for bad in [
            "signal 9",
            "exit 0\n\n",
            "exit  0\n",
            "exit -1\n",
            "exit +1\n",
            "exit 256\n",
            "signal 0\n",
            "signal 65\n",
            "exit 0 \n",
            "EXIT 0\n",
            "exit 0\nexit 1\n",
            "exit 0000000000000000000000000000000000000000000000\n",
        ] {
            std::fs::write(d.path().join("status"), bad).unwrap();
            assert_eq!(read_status(d.path()), None, "{bad:?}");
        }
        // A big file is not read whole: its first bytes are no record.
        let mut big = b"exit 0\n".to_vec();
        big.resize(1 << 20, b'x');
        std::fs::write(d.path().join("status"), &big).unwrap();
        assert_eq!(read_status(d.path()), None);
        // Not a file, or a link: no record.
        std::fs::remove_file(d.path().join("status")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("status")).unwrap();
        assert_eq!(read_status(d.path()), None);
    }
}
