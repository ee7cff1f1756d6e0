//! The node loop: the executor's [`Node`] in the daemon's pool, taken
//! over from a previous daemon where one left jobs; each turn admits and
//! starts jobs, carries out cancellations, steps the node, records what
//! it did, and does the periodic work (metrics, retention, compaction).

use super::exposition::Accounted;
use super::queue::Clocks;
use super::recovery::{read_status, shim_said, Adopted, Recovered};
use super::store::{disk_full, finish, stopped_by_daemon, unix_now};
use super::Service;
use anyhow::Result;
use memgang_core::admission::Capacity;
use memgang_core::text::printable;
use memgang_core::{JobId, JobSpec, JobStatus};
use memgang_linux::cgroup::GroupPath;
use memgang_linux::counters::VmStat;
use memgang_proto::JobState;
use memgang_runtime::executor::Node;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the loop sleeps when nothing is due: a submitted job wakes it
/// at once (condition variable); this only bounds how late it notices a
/// job adopted from a previous daemon ending, and a SIGTERM.
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// The metrics file is rewritten this often: fresher than node_exporter's
/// usual 15 s scrape, cheap (a few reads of /proc and cgroup files).
const METRICS_EVERY: Duration = Duration::from_secs(5);
/// Retention is applied this often (and at start): jobs end at most a
/// minute past their time.
const FORGET_EVERY: Duration = Duration::from_secs(60);
/// Samples of the node's paging trace kept (one a second): the daemon
/// reads the last; more would grow with the daemon's uptime.
const KEEP_SAMPLES: usize = 60;
/// Running jobs' output is measured this often: a job writing at the
/// disk's speed passes `max_job_output` by about this much writing.
const OUTPUT_EVERY: Duration = Duration::from_secs(1);

/// What the node loop carries from one turn to the next.
struct Turns {
    node: Node,
    /// The daemon's id of each job on the node, to the node's.
    map: HashMap<u64, JobId>,
    /// Jobs of a previous daemon running to their end in older pools.
    adopted: Vec<Adopted>,
    accounted: Accounted,
    clocks: Clocks,
    vm_start: Option<VmStat>,
    next_metrics: Instant,
    next_forget: Instant,
    next_output: Instant,
}

impl Service {
    /// Run until `stop`: recover, then admit, start, step, record.
    pub fn run(&self, stop: &AtomicBool) -> Result<()> {
        let mut rec = self.recover();
        let node = self.open_node(&mut rec)?;
        let mut t = self.rejoin(node, rec);
        while !stop.load(Ordering::Relaxed) {
            self.turn(&mut t)?;
        }
        self.close(t);
        Ok(())
    }

    /// The node in the pool the previous daemon left, with its jobs to
    /// rejoin, else in a new pool. A pool that refuses its limit (e.g. a
    /// smaller pool_memory than its jobs hold) keeps its jobs, which run
    /// to their end there (moved from `rec.rejoin` to `rec.elsewhere`),
    /// and the new jobs go to a new pool.
    fn open_node(&self, rec: &mut Recovered) -> Result<Node> {
        let pool = rec.pool.clone().unwrap_or_else(|| self.new_pool_name());
        let settings = self.node_settings(pool.clone());
        // Ours before it exists: a daemon removes only the pools it made.
        self.own_pools(|pools| {
            pools.insert(pool.clone());
        });
        let node = match Node::new(settings, self.env.clone()) {
            Ok(node) => node,
            Err(e) if rec.pool.is_some() => {
                tracing::warn!(
                    "taking over the pool {pool}: {e:#}; its jobs run to their end there"
                );
                for (id, r) in rec.rejoin.drain(..) {
                    if let Some(g) = r.group.as_deref().and_then(|g| GroupPath::new(g).ok()) {
                        rec.elsewhere.push(self.run_to_end(id, g));
                    }
                }
                let pool = self.new_pool_name();
                self.own_pools(|pools| {
                    pools.insert(pool.clone());
                });
                Node::new(self.node_settings(pool), self.env.clone())?
            }
            Err(e) => return Err(e),
        };
        tracing::info!(
            "memgangd: pool {} ({} bytes), policy {}, quantum {:?}, switch {}",
            node.pool().as_str(),
            self.cfg.pool_memory,
            self.cfg.policy,
            self.cfg.quantum,
            self.cfg.switch
        );
        Ok(node)
    }

    /// The previous daemon's jobs in this pool rejoin the rotation (one
    /// the node cannot adopt runs to its end); pools left empty go.
    fn rejoin(&self, mut node: Node, rec: Recovered) -> Turns {
        let mut adopted = rec.elsewhere;
        let mut map: HashMap<u64, JobId> = HashMap::new();
        for (id, r) in rec.rejoin {
            let spec = JobSpec {
                name: format!("j{id}"),
                ranks: r.info.ranks,
                memory_bytes: Some(r.info.memory_bytes),
                arrival: Duration::ZERO,
                placed: None,
            };
            let Some(group) = r.group.as_deref().and_then(|g| GroupPath::new(g).ok()) else {
                continue;
            };
            match node.adopt(spec, group.clone()) {
                Ok(jid) => {
                    tracing::info!("adopted job {id}: it rejoins the policy's rotation");
                    map.insert(id, jid);
                }
                Err(e) => {
                    tracing::error!("adopting job {id}: {e:#}; it runs to its end");
                    adopted.push(self.run_to_end(id, group));
                }
            }
        }
        self.remove_stale_pools(&adopted, node.pool());
        Turns {
            node,
            map,
            adopted,
            next_metrics: Instant::now(),
            next_forget: Instant::now(),
            next_output: Instant::now(),
            accounted: Accounted::default(),
            clocks: Clocks::default(),
            vm_start: VmStat::read().ok(),
        }
    }

    /// One turn: the pool kept, the queue admitted and started, the
    /// cancellations carried out, the node stepped, what it did recorded,
    /// the adopted jobs that ended reaped, and the periodic work.
    fn turn(&self, t: &mut Turns) -> Result<()> {
        self.shared.flush();
        self.keep_pool(t.node.pool());
        let mut pools: BTreeSet<GroupPath> =
            t.adopted.iter().filter_map(|a| a.group.parent()).collect();
        pools.insert(t.node.pool().clone());
        let cap = self.capacity(&pools.into_iter().collect::<Vec<_>>());
        self.drop_unsatisfiable();
        let pinned: HashMap<u64, u64> = (t.map.iter())
            .map(|(id, jid)| (*id, t.node.pinned(*jid)))
            .collect();
        let (starts, cancels) = self.admit(cap, t.node.pool(), &pinned);
        for (id, r) in starts {
            match self.start(&mut t.node, &r) {
                Ok(jid) => {
                    t.map.insert(id, jid);
                }
                Err(e) => self.could_not_start(id, &format!("{e:#}")),
            }
        }
        for id in cancels {
            self.cancel_job(t, id);
        }
        let idle = t.node.step(Some(IDLE_WAIT))?;
        self.tick_clocks(t);
        // Before sync, which may forget the switches of ended jobs.
        self.shared.observe_switches(t.node.switches());
        self.sync(&mut t.node, &mut t.map, &mut t.accounted, &mut t.clocks);
        self.publish(&t.node, &t.map);
        t.adopted.retain(|a| !self.reap_adopted(a));
        self.periodic(t, cap, idle);
        Ok(())
    }

    /// Running time counted for the jobs the node runs now (not frozen,
    /// not held); a job at its `--time` is cancelled on the node, to end
    /// `timeout`.
    fn tick_clocks(&self, t: &mut Turns) {
        let state = t.node.scheduler().state();
        let running: Vec<(u64, JobId)> = (t.map.iter())
            // A held job is frozen though the policy runs it: not its time.
            .filter(|(_, &jid)| {
                state.job(jid).status == JobStatus::Running && t.node.held(jid).is_none()
            })
            .map(|(&id, &jid)| (id, jid))
            .collect();
        self.tick(&mut t.clocks, &running, |jid| {
            if let Err(e) = t.node.cancel(jid) {
                tracing::error!("{}", printable(&format!("{e:#}")));
            }
        });
    }

    /// A cancellation: the node cancels its job, an adopted job's group
    /// is killed, and a job not started yet ends here.
    fn cancel_job(&self, t: &mut Turns, id: u64) {
        if let Some(jid) = t.map.get(&id) {
            if let Err(e) = t.node.cancel(*jid) {
                tracing::error!("{}", printable(&format!("{e:#}")));
            }
        } else if let Some(a) = t.adopted.iter_mut().find(|a| a.id == id) {
            a.cancelled = true;
            // Best effort: the group is removed, or reported, after.
            let _ = memgang_runtime::kill_group(self.env.backend.as_ref(), &a.group);
        } else {
            self.shared.update(id, |r| {
                if !r.admitted {
                    r.info.state = JobState::Cancelled;
                    r.info.reason = Some("cancelled before it started".into());
                    r.info.finished_unix_s = Some(unix_now());
                }
            });
        }
    }

    /// The metrics and retention when due, the wait of an idle turn, and
    /// the journal's compaction.
    fn periodic(&self, t: &mut Turns, cap: Capacity, idle: bool) {
        if Instant::now() >= t.next_metrics {
            t.next_metrics = Instant::now() + METRICS_EVERY;
            self.write_metrics(&t.node, &t.map, cap, t.vm_start, &t.accounted);
        }
        let keep = super::store::Retention {
            keep_for: self.cfg.keep_finished_for,
            keep_jobs: self.cfg.keep_finished_jobs,
            keep_per_user: self.cfg.keep_finished_jobs_per_user,
            user_bytes: self.cfg.max_user_bytes,
        };
        let forgot = Instant::now() >= t.next_forget && self.shared.forget(&keep, unix_now());
        if Instant::now() >= t.next_forget {
            t.next_forget = Instant::now() + FORGET_EVERY;
            // The node's paging trace: only the last sample is read here.
            t.node.keep_samples(KEEP_SAMPLES);
        }
        if Instant::now() >= t.next_output {
            t.next_output = Instant::now() + OUTPUT_EVERY;
            let adopted = t.adopted.iter().map(|a| a.id);
            self.stop_over_output(t.map.keys().copied().chain(adopted));
        }
        if idle {
            self.shared.idle_wait(IDLE_WAIT);
        }
        self.shared.compact(forgot);
    }

    /// At stop: the node's last news recorded; jobs still running are left
    /// for the next start to adopt, else the pool goes.
    fn close(&self, mut t: Turns) {
        self.sync(&mut t.node, &mut t.map, &mut t.accounted, &mut t.clocks);
        self.shared.flush();
        let alive = t.map.iter().any(|(id, _)| {
            self.shared
                .get(*id)
                .is_some_and(|r| !r.info.state.is_final())
        });
        if alive {
            tracing::info!("memgangd stopping: jobs left running for the next start to adopt");
            t.node.release();
        } else {
            let pool = t.node.pool().clone();
            drop(t.node.finish());
            self.own_pools(|pools| {
                pools.remove(&pool.as_str().to_string());
            });
        }
    }

    /// The node's view of each job into the records; the time account of
    /// each job that ended into `accounted` too. A job whose end is
    /// recorded is forgotten by the node ([`Node::forget`]): the daemon
    /// holds a job gone by its record only, which retention bounds.
    fn sync(
        &self,
        node: &mut Node,
        map: &mut HashMap<u64, JobId>,
        accounted: &mut Accounted,
        clocks: &mut Clocks,
    ) {
        let (mut requeued, mut done) = (Vec::new(), Vec::new());
        for (&id, &jid) in map.iter() {
            let Some(res) = node.result(jid) else {
                continue;
            };
            let status = node.scheduler().state().job(jid).status;
            let cur = self.shared.get(id);
            if cur.as_ref().is_none_or(|r| r.info.state.is_final()) {
                // Ended for good: nothing more to learn from the node.
                if res.finish_s.is_some() {
                    done.push(id);
                }
                continue;
            }
            let asked = self.shared.cancel_asked(id);
            let stopped = self.shared.stopped(id);
            let (held, pinned) = (node.held(jid).map(str::to_string), node.pinned(jid));
            if let (Some(_), None, Some(e), false) = (res.finish_s, res.start_s, &res.error, asked)
            {
                if disk_full(e) {
                    // Not started for want of room in the state directory.
                    self.could_not_start(id, e);
                    requeued.push(id);
                    continue;
                }
            }
            self.shared.update(id, |r| {
                if res.finish_s.is_some() {
                    let cancelled = asked || res.error.as_deref() == Some("cancelled");
                    // The daemon is the shim's parent: the kernel's word on
                    // how it ended (the shim ends as the command did), not a
                    // file. Only a job adopted from an earlier daemon has no
                    // parent here; its end is in the root-owned status file.
                    let (code, signal) = if res.exit_code.is_some() || res.signal.is_some() {
                        (res.exit_code, res.signal)
                    } else {
                        read_status(&r.info.log_dir).unwrap_or((None, None))
                    };
                    finish(r, code, signal, cancelled, res.error.clone());
                    stopped_by_daemon(r, stopped.clone());
                    if r.info.state == JobState::Failed && stopped.is_none() {
                        if let Some(why) = shim_said(&r.info.log_dir) {
                            r.info.reason = Some(why);
                        }
                    }
                    self.end_clock(clocks, r);
                    // In the same journal line as the end: a line after an
                    // end is never replayed.
                    r.info.account = res
                        .account
                        .as_ref()
                        .and_then(|a| serde_json::to_value(a).ok());
                } else if res.start_s.is_some() {
                    r.info.started_unix_s.get_or_insert_with(unix_now);
                    (r.info.state, r.info.reason) = running_state(status, held.as_deref(), pinned);
                }
            });
            // Once: the next sync finds the job's end recorded.
            if let (Some(_), Some(a)) = (res.finish_s, &res.account) {
                accounted.add(a);
            }
        }
        if !done.is_empty() {
            self.shared.remove_allowances(|id| done.contains(&id));
        }
        for id in requeued.into_iter().chain(done) {
            if let Some(jid) = map.remove(&id) {
                if let Err(e) = node.forget(jid) {
                    tracing::error!("job {id}: {e:#}");
                }
            }
        }
    }

    /// Stop each job whose stdout and stderr hold more than
    /// `max_job_output` together (the larger of their size and their
    /// blocks: space allocated past the end counts too): it ends failed,
    /// saying so. They are root's files in the state directory, and the
    /// disk is the node's.
    fn stop_over_output(&self, ids: impl Iterator<Item = u64>) {
        use memgang_core::units::format_bytes;
        use std::os::unix::fs::MetadataExt;
        let most = self.cfg.max_job_output;
        for id in ids {
            let Some(r) = self.shared.get(id) else {
                continue;
            };
            if r.info.state.is_final() || self.shared.stopped(id).is_some() {
                continue;
            }
            let bytes: u64 = ["stdout", "stderr"]
                .iter()
                .filter_map(|f| std::fs::symlink_metadata(r.info.log_dir.join(f)).ok())
                .map(|m| m.len().max(m.blocks() * 512))
                .sum();
            if bytes > most {
                let why = format!(
                    "stopped: its output (stdout and stderr) reached {}, more than \
                     max_job_output ({})",
                    format_bytes(bytes),
                    format_bytes(most)
                );
                tracing::warn!("job {id}: {why}");
                self.shared.stop(id, why);
            }
        }
    }
}

/// A started job's state and reason from the node: suspended by the
/// policy, held (the policy runs it, but memory suspended jobs hold
/// locked leaves it no room: why), or running, saying so when it holds
/// memory locked itself (other jobs may wait for it).
fn running_state(status: JobStatus, held: Option<&str>, pinned: u64) -> (JobState, Option<String>) {
    use memgang_core::units::format_bytes;
    match (status, held) {
        (JobStatus::Suspended, _) => (JobState::Suspended, None),
        (_, Some(why)) => (JobState::Suspended, Some(why.to_string())),
        _ if pinned >= memgang_core::capacity::PINNED_COUNTED => (
            JobState::Running,
            Some(format!(
                "holds {} locked (mlock), which no switch pages out: it counts as resident, \
                 and jobs that need its room wait for it",
                format_bytes(pinned)
            )),
        ),
        _ => (JobState::Running, None),
    }
}
