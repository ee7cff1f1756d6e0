//! Admission: the queue through paging prevention (the core's
//! [`admission::admit`] against what the node may promise), each admitted
//! job journaled before it starts, and its start on the node.

use super::store::{disk_full, log_limited, unix_now};
use super::Service;
use crate::journal::Record;
use anyhow::{Context, Result};
use memgang_core::admission::{self, Capacity};
use memgang_core::text::printable;
use memgang_core::{JobId, JobSpec};
use memgang_linux::cgroup::GroupPath;
use memgang_proto::JobState;
use memgang_runtime::executor::{Launch, Node};
use std::time::Duration;

impl Service {
    /// Under the lock: the queue through admission, the cancellations.
    pub(super) fn admit(&self, cap: Capacity, pool: &GroupPath) -> (Vec<(u64, Record)>, Vec<u64>) {
        let mut g = self.shared.lock();
        let inner = &mut *g;
        inner.capacity = cap;
        let held: Vec<u64> = inner
            .jobs
            .values()
            .filter(|r| r.admitted && !r.info.state.is_final())
            .map(|r| r.info.memory_bytes)
            .collect();
        let queue: Vec<(u64, u64)> = inner
            .jobs
            .values()
            .filter(|r| !r.admitted && r.info.state == JobState::Queued)
            .filter(|r| {
                !inner.cancelled.contains(&r.info.id) && !inner.pending.contains_key(&r.info.id)
            })
            .map(|r| (r.info.id, r.info.memory_bytes))
            .collect();
        let cancels = std::mem::take(&mut inner.cancels);
        let decision = if self.cfg.paging_prevention {
            admission::admit(&queue, &held, &cap)
        } else {
            // Off (to measure what prevention is worth): every job starts
            // at once, and the kernel pages as it must.
            admission::Admission {
                admit: queue.iter().map(|(id, _)| *id).collect(),
                wait: Vec::new(),
            }
        };
        for (id, why) in decision.wait {
            if let Some(r) = inner.jobs.get_mut(&id) {
                r.info.reason = Some(why);
            }
        }
        let mut starts = Vec::new();
        for id in decision.admit {
            if cancels.contains(&id) {
                continue;
            }
            let Some(r) = inner.jobs.get_mut(&id) else {
                continue;
            };
            r.admitted = true;
            r.group = Some(format!("{}/job-j{id}", pool.as_str()));
            r.info.reason = Some("admitted: memory promised, waiting for the policy".into());
            // Durable before it starts: a restarted daemon then looks for
            // it instead of starting it again.
            if let Err(e) = inner.journal.append(r) {
                log_limited(
                    "admit",
                    format!("job {id} waits: {}", printable(&format!("{e:#}"))),
                );
                r.admitted = false;
                r.group = None;
                continue;
            }
            starts.push((id, r.clone()));
        }
        (starts, cancels)
    }

    pub(super) fn start(&self, node: &mut Node, r: &Record) -> Result<JobId> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let dir = &r.info.log_dir;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // The job may pass through to its allowance file (0644) but not
        // list the directory or read its other files (0600: the daemon
        // runs with umask 077).
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))?;
        // Root's, 0600, made afresh (a file left by an older version
        // was the user's): the shim gets it open on its stdin (see
        // `shim`); the job cannot open it.
        let status = dir.join("status");
        match std::fs::remove_file(&status) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", status.display()))
            }
            _ => {}
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&status)
            .with_context(|| format!("creating {}", status.display()))?;
        let shim = std::env::current_exe().context("finding memgangd's own binary for the shim")?;
        let mut command = vec![shim.display().to_string(), "shim".into(), "--".into()];
        command.extend(r.info.command.iter().cloned());
        let launch = Launch {
            command,
            env: r.env.clone(),
            cwd: Some(r.info.cwd.clone()),
            uid: Some(r.info.uid),
            gid: Some(r.gid),
            groups: r.groups.clone(),
            log_dir: Some(dir.clone()),
            status: Some(status),
            gate: true,
        };
        let spec = JobSpec {
            name: format!("j{}", r.info.id),
            ranks: r.info.ranks,
            memory_bytes: Some(r.info.memory_bytes),
            arrival: Duration::ZERO,
            placed: None,
        };
        node.add_job(spec, launch)
    }

    /// A job the daemon could not start: failed, unless the state
    /// directory's disk is full (then it waits in the queue for room:
    /// not the job's fault, and it never ran).
    pub(super) fn could_not_start(&self, id: u64, why: &str) {
        let full = disk_full(why);
        if full {
            log_limited(
                "start",
                format!("job {id} waits: could not start it: {}", printable(why)),
            );
        }
        self.shared.update(id, |r| {
            if full {
                r.admitted = false;
                r.group = None;
                r.info.state = JobState::Queued;
                r.info.reason = Some(format!(
                    "waits for room on memgangd's state directory: {why}"
                ));
            } else {
                r.info.state = JobState::Failed;
                r.info.reason = Some(format!("could not start: {why}"));
                r.info.finished_unix_s = Some(unix_now());
            }
        });
    }
}
