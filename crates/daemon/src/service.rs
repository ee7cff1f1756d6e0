//! The service: jobs shared between the socket's threads and the node
//! loop, admission (paging prevention), the node loop that drives the
//! executor's [`Node`], recovery of a previous daemon's jobs from their
//! cgroups, and the metrics file.

use crate::config::Config;
use crate::journal::{Journal, Record};
use anyhow::{Context, Result};
use memgang_core::admission::{self, Capacity};
use memgang_core::{JobId, JobSpec, JobStatus};
use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_linux::counters::{Psi, SwapStatus, VmStat};
use memgang_proto::{JobInfo, JobState};
use memgang_runtime::executor::{Env, Launch, Node, NodeSettings};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the loop sleeps when nothing is due: a submitted job wakes it
/// at once (condition variable); this only bounds how late it notices a
/// job adopted from a previous daemon ending, and a SIGTERM.
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// The metrics file is rewritten this often: fresher than node_exporter's
/// usual 15 s scrape, cheap (a few reads of /proc and cgroup files).
const METRICS_EVERY: Duration = Duration::from_secs(5);

pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub struct Shared {
    inner: Mutex<Inner>,
    wake: Condvar,
    pub state_dir: PathBuf,
}

struct Inner {
    jobs: BTreeMap<u64, Record>,
    next_id: u64,
    journal: Journal,
    cancels: Vec<u64>,
    capacity: Capacity,
    woken: bool,
}

impl Shared {
    pub fn new(
        journal: Journal,
        jobs: BTreeMap<u64, Record>,
        state_dir: PathBuf,
        capacity: Capacity,
    ) -> Shared {
        let next_id = jobs.keys().next_back().map_or(1, |id| id + 1);
        Shared {
            inner: Mutex::new(Inner {
                jobs,
                next_id,
                journal,
                cancels: Vec::new(),
                capacity,
                woken: false,
            }),
            wake: Condvar::new(),
            state_dir,
        }
    }

    pub fn set_capacity(&self, cap: Capacity) {
        self.lock().capacity = cap;
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record a new job durably and return its id; a job that could never
    /// fit is refused.
    pub fn submit(&self, make: impl FnOnce(u64, PathBuf) -> Record) -> Result<u64> {
        let mut g = self.lock();
        let id = g.next_id;
        let r = make(id, self.state_dir.join("jobs").join(id.to_string()));
        if let Some(msg) = admission::refuse(r.info.memory_bytes, &g.capacity) {
            anyhow::bail!("{msg}");
        }
        g.journal.append(&r)?;
        g.next_id += 1;
        g.jobs.insert(id, r);
        g.woken = true;
        self.wake.notify_all();
        Ok(id)
    }

    pub fn list(&self, visible: impl Fn(&Record) -> bool) -> Vec<JobInfo> {
        let g = self.lock();
        g.jobs
            .values()
            .filter(|r| visible(r))
            .map(|r| r.info.clone())
            .collect()
    }

    pub fn get(&self, id: u64) -> Option<Record> {
        self.lock().jobs.get(&id).cloned()
    }

    pub fn cancel(&self, id: u64) {
        let mut g = self.lock();
        g.cancels.push(id);
        g.woken = true;
        self.wake.notify_all();
    }

    fn idle_wait(&self, d: Duration) {
        let g = self.lock();
        let (mut g, _) = self
            .wake
            .wait_timeout_while(g, d, |g| !g.woken)
            .unwrap_or_else(|p| p.into_inner());
        g.woken = false;
    }

    /// Change a job and journal it if anything changed.
    fn update(&self, id: u64, f: impl FnOnce(&mut Record)) {
        let mut g = self.lock();
        let inner = &mut *g;
        let Some(r) = inner.jobs.get_mut(&id) else {
            return;
        };
        let before = serde_json::to_string(r).ok();
        f(r);
        if serde_json::to_string(r).ok() != before {
            if let Err(e) = inner.journal.append(r) {
                tracing::error!("{e:#}");
            }
        }
    }
}

/// The mechanisms the node loop works with.
pub struct Service {
    pub cfg: Config,
    pub shared: Arc<Shared>,
    pub env: Env,
    /// The cgroup the pools go in: the daemon's own.
    pub parent: Option<GroupPath>,
}

/// A job of a previous daemon found alive in its cgroup: thawed and left
/// to run to its end (it holds its promised memory until then).
struct Adopted {
    id: u64,
    group: GroupPath,
    cancelled: bool,
}

/// The daemon's own cgroup from /proc/self/cgroup text: the v2 line
/// (`0::/path`) or the v1 memory line (`N:...memory...:/path`). None at
/// the root or if the path is not one memgang can name.
pub fn own_cgroup(text: &str, v2: bool) -> Option<GroupPath> {
    let path = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        let ours = if v2 {
            id == "0" && ctrl.is_empty()
        } else {
            ctrl.split(',').any(|c| c == "memory")
        };
        ours.then_some(path)
    })?;
    let rel = path.trim_matches('/');
    (!rel.is_empty())
        .then(|| GroupPath::new(rel).ok())
        .flatten()
}

impl Service {
    fn pool_name(&self) -> String {
        // Unique per start (a restarted daemon may get the same pid while
        // the old pool still holds adopted jobs).
        let leaf = format!("memgang-pool-{}", (unix_now() * 1000.0) as u64);
        match &self.parent {
            Some(p) => format!("{}/{leaf}", p.as_str()),
            None => leaf,
        }
    }

    fn capacity(&self, pools: &[GroupPath]) -> Capacity {
        let ours: u64 = pools
            .iter()
            .filter_map(|p| self.env.backend.memory_stat(p).ok()?.swap_bytes)
            .sum();
        memgang_runtime::memory::capacity(
            self.env.counters.as_ref(),
            self.cfg.pool_memory,
            ours,
            self.cfg.swap_reserve,
            self.cfg.policy != memgang_core::PolicyKind::Cosched,
        )
    }

    /// A capacity for refusing submissions before the loop has measured.
    pub fn initial_capacity(&self) -> Capacity {
        self.capacity(&[])
    }

    /// Run until `stop`: recover, then admit, start, step, record.
    pub fn run(&self, stop: &AtomicBool) -> Result<()> {
        let mut adopted = self.recover();
        let settings = NodeSettings {
            pool: self.pool_name(),
            pool_memory: self.cfg.pool_memory,
            cpus: self.env.machine.cpus,
            policy: self.cfg.policy.build_with(
                self.cfg.quantum(),
                self.cfg.switch,
                self.cfg.overlap(),
            ),
            label: self.cfg.policy.to_string(),
            sample_interval: Duration::from_secs(1),
            dynamic_coscheduling: self.cfg.dynamic_coscheduling,
            swap_reserve: self.cfg.swap_reserve,
        };
        let mut node = Node::new(settings, self.env.clone())?;
        tracing::info!(
            "memgangd: pool {} ({} bytes), policy {}, quantum {:?}, switch {}",
            node.pool().as_str(),
            self.cfg.pool_memory,
            self.cfg.policy,
            self.cfg.quantum,
            self.cfg.switch
        );
        let mut map: HashMap<u64, JobId> = HashMap::new();
        let mut next_metrics = Instant::now();
        let vm_start = VmStat::read().ok();
        while !stop.load(Ordering::Relaxed) {
            let mut pools: BTreeSet<GroupPath> =
                adopted.iter().filter_map(|a| a.group.parent()).collect();
            pools.insert(node.pool().clone());
            let cap = self.capacity(&pools.into_iter().collect::<Vec<_>>());
            let (starts, cancels) = self.admit(cap, node.pool());
            for (id, r) in starts {
                match self.start(&mut node, &r) {
                    Ok(jid) => {
                        map.insert(id, jid);
                    }
                    Err(e) => self.shared.update(id, |r| {
                        r.info.state = JobState::Failed;
                        r.info.reason = Some(format!("could not start: {e:#}"));
                        r.info.finished_unix_s = Some(unix_now());
                    }),
                }
            }
            for id in cancels {
                if let Some(jid) = map.get(&id) {
                    if let Err(e) = node.cancel(*jid) {
                        tracing::error!("{e:#}");
                    }
                } else if let Some(a) = adopted.iter_mut().find(|a| a.id == id) {
                    a.cancelled = true;
                    kill_group(self.env.backend.as_ref(), &a.group);
                } else {
                    self.shared.update(id, |r| {
                        if !r.info.state.is_final() && !r.admitted {
                            r.info.state = JobState::Cancelled;
                            r.info.reason = Some("cancelled before it started".into());
                            r.info.finished_unix_s = Some(unix_now());
                        }
                    });
                }
            }
            let idle = node.step(Some(IDLE_WAIT))?;
            self.sync(&node, &map);
            adopted.retain(|a| !self.reap_adopted(a));
            if Instant::now() >= next_metrics {
                next_metrics = Instant::now() + METRICS_EVERY;
                self.write_metrics(&node, cap, vm_start);
            }
            if idle {
                self.shared.idle_wait(IDLE_WAIT);
            }
            let mut g = self.shared.lock();
            let inner = &mut *g;
            let live: Vec<&Record> = inner
                .jobs
                .values()
                .filter(|r| !r.info.state.is_final())
                .collect();
            if let Err(e) = inner.journal.maybe_compact(live.into_iter()) {
                tracing::error!("compacting the journal: {e:#}");
            }
        }
        self.sync(&node, &map);
        let alive = map.iter().any(|(id, _)| {
            self.shared
                .get(*id)
                .is_some_and(|r| !r.info.state.is_final())
        });
        if alive {
            tracing::info!("memgangd stopping: jobs left running for the next start to adopt");
            node.release();
        } else {
            drop(node.finish());
        }
        Ok(())
    }

    /// Under the lock: the queue through admission, the cancellations.
    fn admit(&self, cap: Capacity, pool: &GroupPath) -> (Vec<(u64, Record)>, Vec<u64>) {
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
                tracing::error!("{e:#}");
                r.admitted = false;
                continue;
            }
            starts.push((id, r.clone()));
        }
        (starts, cancels)
    }

    fn start(&self, node: &mut Node, r: &Record) -> Result<JobId> {
        use std::os::unix::fs::PermissionsExt;
        let dir = &r.info.log_dir;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // Others may pass through to the status file but not list or read
        // the job's output (0600 files: the daemon runs with umask 077).
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))?;
        let status = dir.join("status");
        std::fs::write(&status, "")?;
        std::os::unix::fs::chown(&status, Some(r.info.uid), Some(r.gid))?;
        let shim = std::env::current_exe().context("finding memgangd's own binary for the shim")?;
        let mut command = vec![
            shim.display().to_string(),
            "shim".into(),
            status.display().to_string(),
            "--".into(),
        ];
        command.extend(r.info.command.iter().cloned());
        let launch = Launch {
            command,
            env: r.env.clone(),
            cwd: Some(r.info.cwd.clone()),
            uid: Some(r.info.uid),
            gid: Some(r.gid),
            groups: r.groups.clone(),
            log_dir: Some(dir.clone()),
        };
        let spec = JobSpec {
            name: format!("j{}", r.info.id),
            ranks: r.info.ranks,
            memory_bytes: Some(r.info.memory_bytes),
            arrival: Duration::ZERO,
        };
        node.add_job(spec, launch)
    }

    /// The node's view of each job into the records.
    fn sync(&self, node: &Node, map: &HashMap<u64, JobId>) {
        for (&id, &jid) in map {
            let Some(res) = node.result(jid) else {
                continue;
            };
            let status = node.scheduler().state().job(jid).status;
            let cur = self.shared.get(id);
            if cur.as_ref().is_none_or(|r| r.info.state.is_final()) {
                continue;
            }
            self.shared.update(id, |r| {
                if res.finish_s.is_some() {
                    let cancelled = res.error.as_deref() == Some("cancelled");
                    let st = read_status(&r.info.log_dir);
                    let (code, signal) = st.unwrap_or((res.exit_code, res.signal));
                    finish(r, code, signal, cancelled, res.error.clone());
                } else if res.start_s.is_some() {
                    r.info.started_unix_s.get_or_insert_with(unix_now);
                    r.info.state = if status == JobStatus::Suspended {
                        JobState::Suspended
                    } else {
                        JobState::Running
                    };
                    r.info.reason = None;
                }
            });
        }
    }

    /// Jobs of the previous daemon: adopt what runs, finish what ended,
    /// queue again what never started. Nothing stays frozen.
    fn recover(&self) -> Vec<Adopted> {
        let backend = self.env.backend.as_ref();
        let records: Vec<Record> = self
            .shared
            .list(|r| !r.info.state.is_final() && r.admitted)
            .into_iter()
            .filter_map(|i| self.shared.get(i.id))
            .collect();
        let mut adopted = Vec::new();
        for r in records {
            let id = r.info.id;
            let group = r.group.as_deref().and_then(|g| GroupPath::new(g).ok());
            let alive = group.as_ref().is_some_and(|g| {
                backend.exists(g) && backend.procs_recursive(g).is_ok_and(|p| !p.is_empty())
            });
            if let (true, Some(group)) = (alive, group.clone()) {
                // Finish an interrupted switch by resuming everyone: the
                // memory was promised to all of them (admission), so they
                // fit in pool plus swap together.
                if let Err(e) = self.env.freezer.thaw(&group) {
                    tracing::error!("thawing adopted job {id}: {e:#}");
                }
                let _ = memgang_linux::freeze::signal_group(backend, &group, libc::SIGCONT);
                let _ = backend.protect(&group, false);
                tracing::info!("adopted job {id} from {}", group.as_str());
                self.shared.update(id, |r| {
                    r.info.state = JobState::Running;
                    r.info.started_unix_s.get_or_insert_with(unix_now);
                    r.info.reason = Some("adopted after a daemon restart: runs to its end".into());
                });
                adopted.push(Adopted {
                    id,
                    group,
                    cancelled: false,
                });
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
        self.remove_stale_pools(&adopted);
        adopted
    }

    /// True once the adopted job has ended (and is recorded).
    fn reap_adopted(&self, a: &Adopted) -> bool {
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
        self.shared.update(a.id, |r| {
            let (code, signal) = st.unwrap_or((None, Some(libc::SIGKILL)));
            finish(
                r,
                code,
                signal,
                a.cancelled,
                a.cancelled.then(|| "cancelled".into()),
            );
        });
        remove_empty(backend, &a.group);
        if let Some(pool) = a.group.parent() {
            if backend.list_children(&pool).is_ok_and(|c| c.is_empty()) {
                remove_empty(backend, &pool);
            }
        }
        true
    }

    /// Pools of earlier daemons with no job left in them.
    fn remove_stale_pools(&self, adopted: &[Adopted]) {
        let backend = self.env.backend.as_ref();
        let keep: BTreeSet<GroupPath> = adopted.iter().filter_map(|a| a.group.parent()).collect();
        let listed = match &self.parent {
            Some(p) => backend.list_children(p),
            None => backend.list_groups("memgang-pool-"),
        };
        for pool in listed.unwrap_or_default() {
            if !pool.name().starts_with("memgang-pool-") || keep.contains(&pool) {
                continue;
            }
            for child in backend.list_children(&pool).unwrap_or_default() {
                if backend.procs_recursive(&child).is_ok_and(|p| p.is_empty()) {
                    remove_empty(backend, &child);
                }
            }
            remove_empty(backend, &pool);
        }
    }

    fn write_metrics(&self, node: &Node, cap: Capacity, vm_start: Option<VmStat>) {
        let path = metrics_path(&self.cfg.socket);
        let jobs = self.shared.list(|_| true);
        let pool = self.env.backend.memory_stat(node.pool()).ok();
        let vm = VmStat::read().ok();
        let text = metrics_text(&MetricsInput {
            jobs: &jobs,
            switches: node.switches().len(),
            switch_seconds: node.switches().iter().fold(0.0, |t, s| t + s.took_s),
            paged_out: node.switches().iter().map(|s| s.paged_out_bytes).sum(),
            paged_in: node.switches().iter().map(|s| s.paged_in_bytes).sum(),
            swapped: vm.zip(vm_start).map(|(v, s)| {
                (
                    v.pswpin.saturating_sub(s.pswpin) * page_size(),
                    v.pswpout.saturating_sub(s.pswpout) * page_size(),
                )
            }),
            pool_limit: self.cfg.pool_memory,
            pool_usage: pool.map(|p| p.usage_bytes),
            cap,
            swap_used: SwapStatus::read().ok().map(|s| s.used_bytes),
            psi: Psi::node_memory(),
        });
        let tmp = path.with_extension("prom.tmp");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)) {
            tracing::warn!("writing metrics {}: {e}", path.display());
        }
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// Beside the socket, where node_exporter's textfile collector can be
/// pointed (it reads *.prom).
pub fn metrics_path(socket: &Path) -> PathBuf {
    socket.with_file_name("memgang.prom")
}

pub struct MetricsInput<'a> {
    pub jobs: &'a [JobInfo],
    pub switches: usize,
    pub switch_seconds: f64,
    pub paged_out: u64,
    pub paged_in: u64,
    pub swapped: Option<(u64, u64)>,
    pub pool_limit: u64,
    pub pool_usage: Option<u64>,
    pub cap: Capacity,
    pub swap_used: Option<u64>,
    pub psi: Option<Psi>,
}

/// Prometheus text exposition format.
pub fn metrics_text(m: &MetricsInput) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, String)]| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(s, "{name}{labels} {v}");
        }
    };
    let states = [
        JobState::Queued,
        JobState::Running,
        JobState::Suspended,
        JobState::Finished,
        JobState::Failed,
        JobState::Cancelled,
    ];
    let by_state: Vec<(String, String)> = states
        .iter()
        .map(|st| {
            let n = m.jobs.iter().filter(|j| j.state == *st).count();
            (format!("{{state=\"{}\"}}", st.name()), n.to_string())
        })
        .collect();
    metric("memgang_jobs", "gauge", "Jobs by state.", &by_state);
    let one = |v: String| vec![(String::new(), v)];
    metric(
        "memgang_switches_total",
        "counter",
        "Switches since the daemon started.",
        &one(m.switches.to_string()),
    );
    metric(
        "memgang_switch_seconds_total",
        "counter",
        "Time spent switching.",
        &one(format!("{}", m.switch_seconds)),
    );
    metric(
        "memgang_switch_paged_bytes_total",
        "counter",
        "Bytes switches paged out and in themselves.",
        &[
            ("{direction=\"out\"}".into(), m.paged_out.to_string()),
            ("{direction=\"in\"}".into(), m.paged_in.to_string()),
        ],
    );
    if let Some((inb, outb)) = m.swapped {
        metric(
            "memgang_node_swapped_bytes_total",
            "counter",
            "Bytes the node swapped since the daemon started (/proc/vmstat).",
            &[
                ("{direction=\"in\"}".into(), inb.to_string()),
                ("{direction=\"out\"}".into(), outb.to_string()),
            ],
        );
    }
    metric(
        "memgang_pool_limit_bytes",
        "gauge",
        "The pool's memory limit.",
        &one(m.pool_limit.to_string()),
    );
    if let Some(u) = m.pool_usage {
        metric(
            "memgang_pool_usage_bytes",
            "gauge",
            "Memory charged to the pool.",
            &one(u.to_string()),
        );
    }
    metric(
        "memgang_swap_total_bytes",
        "gauge",
        "Swap space of the node.",
        &one(m.cap.swap_total_bytes.to_string()),
    );
    if let Some(u) = m.swap_used {
        metric(
            "memgang_swap_used_bytes",
            "gauge",
            "Swap in use on the node.",
            &one(u.to_string()),
        );
    }
    metric(
        "memgang_swap_usable_bytes",
        "gauge",
        "Swap the jobs may fill (admission).",
        &one(m.cap.swap_usable().to_string()),
    );
    if let Some(p) = m.psi {
        metric(
            "memgang_memory_pressure_avg10",
            "gauge",
            "Node memory pressure (PSI), % of the last 10 s.",
            &[
                ("{kind=\"some\"}".into(), p.some_avg10.to_string()),
                ("{kind=\"full\"}".into(), p.full_avg10.to_string()),
            ],
        );
    }
    s
}

fn finish(
    r: &mut Record,
    code: Option<i32>,
    signal: Option<i32>,
    cancelled: bool,
    error: Option<String>,
) {
    r.info.exit_code = code;
    r.info.signal = signal;
    r.info.finished_unix_s = Some(unix_now());
    (r.info.state, r.info.reason) = if cancelled {
        (JobState::Cancelled, Some("cancelled".into()))
    } else if code == Some(0) {
        (JobState::Finished, None)
    } else if let Some(c) = code {
        (
            JobState::Failed,
            Some(error.unwrap_or_else(|| format!("exit code {c}"))),
        )
    } else if let Some(s) = signal {
        (JobState::Failed, Some(format!("killed by signal {s}")))
    } else {
        (JobState::Failed, error.or(Some("ended".into())))
    };
}

/// The shim's record of how the command ended: `exit N` or `signal N`.
pub fn read_status(log_dir: &Path) -> Option<(Option<i32>, Option<i32>)> {
    let text = std::fs::read_to_string(log_dir.join("status")).ok()?;
    let (kind, n) = text.trim().split_once(' ')?;
    let n: i32 = n.parse().ok()?;
    match kind {
        "exit" => Some((Some(n), None)),
        "signal" => Some((None, Some(n))),
        _ => None,
    }
}

fn kill_group(backend: &dyn CgroupBackend, group: &GroupPath) {
    if backend.can_freeze() {
        let _ = backend.set_frozen(group, false);
    }
    for sig in [libc::SIGKILL, libc::SIGCONT] {
        let _ = memgang_linux::freeze::signal_group(backend, group, sig);
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
    fn own_cgroup_reads_v2_and_v1_lines() {
        let v2 = "0::/system.slice/memgangd.service\n";
        assert_eq!(
            own_cgroup(v2, true).unwrap().as_str(),
            "system.slice/memgangd.service"
        );
        assert!(own_cgroup("0::/\n", true).is_none());
        let v1 = "12:freezer:/a\n4:memory:/system.slice/memgangd.service\n0::/x\n";
        assert_eq!(
            own_cgroup(v1, false).unwrap().as_str(),
            "system.slice/memgangd.service"
        );
        // A name memgang cannot use: at the root instead.
        assert!(own_cgroup("0::/user.slice/user@0.service\n", true).is_none());
    }

    #[test]
    fn status_file_parses() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_status(d.path()), None);
        std::fs::write(d.path().join("status"), "").unwrap();
        assert_eq!(read_status(d.path()), None);
        std::fs::write(d.path().join("status"), "exit 3\n").unwrap();
        assert_eq!(read_status(d.path()), Some((Some(3), None)));
        std::fs::write(d.path().join("status"), "signal 9").unwrap();
        assert_eq!(read_status(d.path()), Some((None, Some(9))));
    }

    #[test]
    fn metrics_are_prometheus_text() {
        let t = metrics_text(&MetricsInput {
            jobs: &[],
            switches: 3,
            switch_seconds: 1.5,
            paged_out: 10,
            paged_in: 20,
            swapped: Some((4096, 8192)),
            pool_limit: 1 << 30,
            pool_usage: Some(5),
            cap: Capacity {
                pool_bytes: 1 << 30,
                swap_total_bytes: 2 << 30,
                swap_used_elsewhere_bytes: 0,
                swap_reserve_bytes: 0,
            },
            swap_used: Some(0),
            psi: None,
        });
        assert!(t.contains("# TYPE memgang_jobs gauge\n"));
        assert!(t.contains("memgang_jobs{state=\"queued\"} 0\n"));
        assert!(t.contains("memgang_switches_total 3\n"));
        assert!(t.contains("memgang_switch_paged_bytes_total{direction=\"in\"} 20\n"));
        // Every sample line is `name{labels} value`.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').unwrap();
            v.parse::<f64>().unwrap();
        }
    }
}
