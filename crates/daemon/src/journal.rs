//! The write-ahead journal: one JSON line per change of a job (its whole
//! record), fsynced before the change is acted on or answered. Replaying
//! keeps each job's last line; a torn last line (a crash mid-write) is
//! dropped. Compaction rewrites the live records to a new file, fsyncs it
//! and renames it over the old one, so a crash leaves one or the other.

use anyhow::{Context, Result};
use memgang_proto::JobInfo;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// A job as the daemon keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub info: JobInfo,
    /// Its environment (not shown: it may hold secrets).
    pub env: BTreeMap<String, String>,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// Handed to the node to run (memory promised to it). From then on a
    /// restarted daemon looks for it in its cgroup rather than start it.
    pub admitted: bool,
    /// Its cgroup once admitted.
    pub group: Option<String>,
}

pub struct Journal {
    path: PathBuf,
    file: File,
    lines: usize,
}

impl Journal {
    /// Open (or create) the journal in `dir` and return it with the jobs
    /// it holds, compacted.
    pub fn open(dir: &Path) -> Result<(Journal, BTreeMap<u64, Record>)> {
        let path = dir.join("journal.jsonl");
        let mut jobs = BTreeMap::new();
        match File::open(&path) {
            Ok(f) => {
                for (n, line) in BufReader::new(f).lines().enumerate() {
                    let line = line.with_context(|| format!("reading {}", path.display()))?;
                    match serde_json::from_str::<Record>(&line) {
                        Ok(r) => {
                            jobs.insert(r.info.id, r);
                        }
                        Err(e) => tracing::warn!(
                            "{}:{}: skipping an unreadable record ({e}); a crash mid-write leaves one",
                            path.display(),
                            n + 1
                        ),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
        }
        let file = rewrite(&path, jobs.values())?;
        let lines = jobs.len();
        Ok((Journal { path, file, lines }, jobs))
    }

    /// Record `r` durably.
    pub fn append(&mut self, r: &Record) -> Result<()> {
        let mut line = serde_json::to_vec(r)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("writing the journal {}", self.path.display()))?;
        self.lines += 1;
        Ok(())
    }

    /// Rewrite to the live records when the file has grown to several
    /// times their number: each job leaves a handful of lines (submitted,
    /// admitted, started, its switches, finished), so this keeps the file
    /// and the replay at start small without rewriting often.
    pub fn maybe_compact<'a>(
        &mut self,
        live: impl ExactSizeIterator<Item = &'a Record>,
    ) -> Result<()> {
        if self.lines <= 4 * live.len() + 1024 {
            return Ok(());
        }
        self.lines = live.len();
        self.file = rewrite(&self.path, live)?;
        Ok(())
    }
}

fn rewrite<'a>(path: &Path, records: impl Iterator<Item = &'a Record>) -> Result<File> {
    let tmp = path.with_extension("jsonl.new");
    let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut seen = BTreeSet::new();
    for r in records {
        seen.insert(r.info.id);
        serde_json::to_writer(&mut f, r)?;
        f.write_all(b"\n")?;
    }
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgang_proto::JobState;

    fn rec(id: u64, state: JobState) -> Record {
        Record {
            info: JobInfo {
                id,
                uid: 1000,
                name: format!("j{id}"),
                command: vec!["true".into()],
                memory_bytes: 1,
                ranks: 1,
                state,
                reason: None,
                exit_code: None,
                signal: None,
                submitted_unix_s: 0.0,
                started_unix_s: None,
                finished_unix_s: None,
                log_dir: "/tmp".into(),
                cwd: "/".into(),
            },
            env: BTreeMap::new(),
            gid: 1000,
            groups: vec![],
            admitted: false,
            group: None,
        }
    }

    #[test]
    fn replay_keeps_the_last_record_and_drops_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut j, jobs) = Journal::open(dir.path()).unwrap();
            assert!(jobs.is_empty());
            j.append(&rec(1, JobState::Queued)).unwrap();
            j.append(&rec(2, JobState::Queued)).unwrap();
            j.append(&rec(1, JobState::Running)).unwrap();
        }
        let path = dir.path().join("journal.jsonl");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"info\":{\"id\":2,\"st").unwrap();
        drop(f);
        let (_, jobs) = Journal::open(dir.path()).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[&1].info.state, JobState::Running);
        assert_eq!(jobs[&2].info.state, JobState::Queued);
        // Opened compacted: one line per job.
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
    }

    #[test]
    fn compaction_keeps_live_records() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        let r = rec(7, JobState::Running);
        for _ in 0..1100 {
            j.append(&r).unwrap();
        }
        j.maybe_compact([&r].into_iter()).unwrap();
        j.append(&rec(8, JobState::Queued)).unwrap();
        let text = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 2);
        let (_, jobs) = Journal::open(dir.path()).unwrap();
        assert_eq!(jobs.keys().copied().collect::<Vec<_>>(), vec![7, 8]);
    }
}
