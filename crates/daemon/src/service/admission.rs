//! Admission: the queue through paging prevention (the core's
//! [`admission::admit`] against what the node may promise), each admitted
//! job journaled before it starts, and its start on the node.

use super::store::{disk_full, log_limited, unix_now};
use super::{queue, Service};
use crate::journal::Record;
use anyhow::{Context, Result};
use memgang_core::admission::{self, Capacity};
use memgang_core::capacity;
use memgang_core::text::printable;
use memgang_core::{JobId, JobSpec};
use memgang_linux::cgroup::GroupPath;
use memgang_proto::JobState;
use memgang_runtime::executor::{Launch, Node};
use std::collections::HashMap;
use std::time::Duration;

/// PAM's limits: `limits.conf` and `limits.d/` (pam_limits(8)).
const LIMITS_DIR: &str = "/etc/security";

impl Service {
    /// Under the lock: the queue through admission, the cancellations.
    /// `pinned`: memory the jobs on the node hold locked, by id, which
    /// counts as resident ([`capacity::less_pinned`]).
    pub(super) fn admit(
        &self,
        cap: Capacity,
        pool: &GroupPath,
        pinned: &HashMap<u64, u64>,
    ) -> (Vec<(u64, Record)>, Vec<u64>) {
        let mut g = self.shared.lock();
        let inner = &mut *g;
        inner.capacity = cap;
        let (mut held, locked): (Vec<u64>, Vec<u64>) = inner
            .jobs
            .values()
            .filter(|r| r.admitted && !r.info.state.is_final())
            .map(|r| {
                (
                    r.info.memory_bytes,
                    pinned.get(&r.info.id).copied().unwrap_or(0),
                )
            })
            .unzip();
        let cap = capacity::less_pinned(cap, &mut held, &locked);
        // Startable now, in fair turns between users.
        let queue = queue::startable(inner);
        let cancels = std::mem::take(&mut inner.cancels);
        let decision = if self.cfg.paging_prevention {
            // A job that could not start even alone now is held out of
            // the line, with why, and blocks no one.
            let (line, unfitting) = admission::hold_unfitting(&queue, &cap);
            let mut d = admission::admit(&line, &held, &cap);
            d.wait.extend(unfitting);
            d
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
        let dir = &r.info.log_dir;
        let jobs = self.shared.state_dir.join("jobs");
        let name = r.info.id.to_string();
        if dir != &jobs.join(&name) {
            anyhow::bail!(
                "job {name}'s directory is not {}",
                jobs.join(&name).display()
            );
        }
        // Root's alone (0700): no other user learns anything from it, not
        // even a file's size. The job reaches only its allowance file,
        // elsewhere (`allowance_file`).
        let (d, _) = memgang_linux::files::Dir::open(&jobs)
            .and_then(|j| j.make_dir(&name, 0o700))
            .with_context(|| format!("creating {}", dir.display()))?;
        // Root's, 0600, made afresh (a file left by an older version
        // was the user's): the shim gets it open on its stdin (see
        // `shim`); the job cannot open it.
        let status = dir.join("status");
        d.remove("status")
            .and_then(|()| d.create_new("status", 0o600))
            .with_context(|| format!("creating {}", status.display()))?;
        let shim = std::env::current_exe().context("finding memgangd's own binary for the shim")?;
        let mut command = vec![shim.display().to_string(), "shim".into()];
        for (flag, path) in [
            ("--stdout", &r.info.queue.stdout),
            ("--stderr", &r.info.queue.stderr),
        ] {
            if let Some(p) = path {
                command.extend([flag.to_string(), p.display().to_string()]);
            }
        }
        command.push("--".into());
        command.extend(r.info.command.iter().cloned());
        let launch = Launch {
            command,
            env: r.env.clone(),
            cwd: Some(r.info.cwd.clone()),
            uid: Some(r.info.uid),
            gid: Some(r.gid),
            groups: r.groups.clone(),
            limits: self.login_limits(r),
            log_dir: Some(dir.clone()),
            allowance: Some(self.allowance_file(r.info.id)?),
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

    /// The resource limits job `r` runs with: its user's at login
    /// (`/etc/security/limits.conf` and `limits.d`, over the kernel's
    /// defaults: never the daemon's own, e.g. its unit's
    /// `LimitMEMLOCK=infinity`), locked memory capped at
    /// `max_locked_memory`.
    fn login_limits(&self, r: &Record) -> Vec<memgang_linux::limits::Limit> {
        use memgang_linux::limits::{self, Login};
        use nix::unistd::{Gid, Group, Uid, User};
        let uid = r.info.uid;
        let name = User::from_uid(Uid::from_raw(uid))
            .ok()
            .flatten()
            .map_or_else(String::new, |u| u.name);
        let groups: Vec<(String, u32)> = std::iter::once(r.gid)
            .chain(r.groups.iter().copied())
            .map(|g| {
                let name = Group::from_gid(Gid::from_raw(g)).ok().flatten();
                (name.map_or_else(String::new, |g| g.name), g)
            })
            .collect();
        let who = Login {
            name: &name,
            uid,
            groups: &groups,
        };
        let dir = std::path::Path::new(LIMITS_DIR);
        let (mut out, warnings) = limits::login_limits(dir, &who, limits::login_defaults());
        for w in warnings {
            log_limited("limits", printable(&w).into_owned());
        }
        limits::cap_memlock(&mut out, self.cfg.max_locked_memory);
        out
    }

    /// A new allowance file's path for job `id`: `allowance/<id>-<32 hex
    /// digits>`, 128 bits from the kernel's random source, so that only
    /// the job, whose environment names it, can find it.
    fn allowance_file(&self, id: u64) -> Result<std::path::PathBuf> {
        use std::io::Read;
        let mut bits = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bits))
            .context("reading /dev/urandom for a job's allowance file name")?;
        let hex: String = bits.iter().map(|b| format!("{b:02x}")).collect();
        Ok(self
            .shared
            .state_dir
            .join(super::ALLOWANCE_DIR)
            .join(format!("{id}-{hex}")))
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
