//! The service: jobs shared between the socket's threads and the node
//! loop, admission (paging prevention), the node loop that drives the
//! executor's [`Node`], recovery of a previous daemon's jobs from their
//! cgroups, and the metrics file.

use crate::config::Config;
use crate::journal::{Journal, Record};
use anyhow::{Context, Result};
use memgang_core::admission::{self, Capacity};
use memgang_core::text::printable;
use memgang_core::{JobId, JobSpec, JobStatus};
use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_linux::counters::{Psi, SwapStatus, VmStat};
use memgang_proto::{JobInfo, JobState};
use memgang_results::{JobAccount, SwCounts};
use memgang_runtime::account::Live;
use memgang_runtime::executor::{Env, Launch, Node, NodeSettings};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
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
/// Retention is applied this often (and at start): jobs end at most a
/// minute past their time.
const FORGET_EVERY: Duration = Duration::from_secs(60);
/// An ended job keeps its own metrics series this long after its end:
/// several scrapes at any usual interval (15 s to 5 min) record its final
/// values, and a node that runs thousands of short jobs does not export
/// a series set per job it keeps (`keep_finished_jobs`, 10,000 by
/// default). `memgang show ID` has them for as long as the job is kept.
const RECENT_FOR_S: f64 = 15.0 * 60.0;
/// And at most this many ended jobs, the newest, have their own series:
/// about 20 series each, a few thousand series in all.
const RECENT_JOBS: usize = 200;

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
    /// Every job as last journaled: what clients are answered.
    jobs: BTreeMap<u64, Record>,
    /// Changes that could not be journaled yet (a full disk): tried again
    /// every turn of the loop, and shown to no one until they are durable,
    /// so an answer is never taken back by a restart.
    pending: BTreeMap<u64, Record>,
    next_id: u64,
    journal: Journal,
    cancels: Vec<u64>,
    /// Every cancellation asked for, so that a job killed or never
    /// started because of one ends `cancelled` whatever the node says.
    cancelled: BTreeSet<u64>,
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
        let next_id = jobs
            .keys()
            .next_back()
            .map_or(1, |id| id + 1)
            .max(journal.next_id);
        Shared {
            inner: Mutex::new(Inner {
                jobs,
                pending: BTreeMap::new(),
                next_id,
                journal,
                cancels: Vec::new(),
                cancelled: BTreeSet::new(),
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
    /// fit, or that cannot be journaled, is refused.
    pub fn submit(&self, make: impl FnOnce(u64, PathBuf) -> Record) -> Result<u64> {
        let mut g = self.lock();
        let id = g.next_id;
        let r = make(id, self.state_dir.join("jobs").join(id.to_string()));
        if let Some(msg) = admission::refuse(r.info.memory_bytes, &g.capacity) {
            anyhow::bail!("{msg}");
        }
        if let Err(e) = g.journal.append(&r) {
            log_limited(
                "submit",
                format!("refusing a submission: {}", printable(&format!("{e:#}"))),
            );
            return Err(e.context("the job was not submitted: memgangd cannot record it"));
        }
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
        g.cancelled.insert(id);
        g.woken = true;
        self.wake.notify_all();
    }

    fn cancel_asked(&self, id: u64) -> bool {
        self.lock().cancelled.contains(&id)
    }

    fn idle_wait(&self, d: Duration) {
        let g = self.lock();
        let (mut g, _) = self
            .wake
            .wait_timeout_while(g, d, |g| !g.woken)
            .unwrap_or_else(|p| p.into_inner());
        g.woken = false;
    }

    /// Change a job and journal it if anything changed; the change is
    /// seen only once journaled (until then it waits in `pending`). An
    /// ended job never changes again.
    fn update(&self, id: u64, f: impl FnOnce(&mut Record)) {
        let mut g = self.lock();
        let inner = &mut *g;
        let Some(cur) = inner.pending.get(&id).or_else(|| inner.jobs.get(&id)) else {
            return;
        };
        if cur.info.state.is_final() {
            return;
        }
        let mut r = cur.clone();
        f(&mut r);
        if Some(&r) == inner.jobs.get(&id) {
            inner.pending.remove(&id);
            return;
        }
        if Some(&r) == inner.pending.get(&id) {
            return;
        }
        inner.pending.insert(id, r);
        inner.flush();
    }

    /// Journal what waits, in order; what still cannot be written waits on.
    fn flush(&self) {
        self.lock().flush();
    }

    /// Forget ended jobs beyond the retention (and their output); true if
    /// any was forgotten.
    fn forget(&self, keep_for: Duration, keep_jobs: usize, now: f64) -> bool {
        let mut g = self.lock();
        let ended: Vec<(u64, f64)> = g
            .jobs
            .values()
            .filter(|r| r.info.state.is_final())
            .map(|r| (r.info.id, r.info.finished_unix_s.unwrap_or(0.0)))
            .collect();
        let surplus = ended.len().saturating_sub(keep_jobs);
        let old: Vec<u64> = ended
            .iter()
            .enumerate()
            .filter(|(i, (_, end))| *i < surplus || now - end > keep_for.as_secs_f64())
            .map(|(_, (id, _))| *id)
            .collect();
        for id in &old {
            if let Some(r) = g.jobs.remove(id) {
                g.cancelled.remove(id);
                // Only what the daemon made: state_dir/jobs/ID.
                if r.info.log_dir == self.state_dir.join("jobs").join(id.to_string()) {
                    let _ = std::fs::remove_dir_all(&r.info.log_dir);
                }
            }
        }
        !old.is_empty()
    }
}

impl Inner {
    fn flush(&mut self) {
        while let Some((&id, r)) = self.pending.first_key_value() {
            if let Err(e) = self.journal.append(r) {
                log_limited(
                    "journal",
                    format!(
                        "{} (job {id} and {} more changes wait to be recorded)",
                        printable(&format!("{e:#}")),
                        self.pending.len() - 1
                    ),
                );
                return;
            }
            let r = self.pending.remove(&id).expect("first entry");
            self.jobs.insert(id, r);
        }
    }
}

/// How often one kind of error is logged at most: a full disk fails every
/// turn of the loop (5 a second), and the log must not fill the disk too.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Log `msg` as an error unless one of its `kind` was logged in the last
/// [`LOG_EVERY`]; the next says how many were left out.
pub fn log_limited(kind: &'static str, msg: String) {
    static LAST: Mutex<BTreeMap<&'static str, (Instant, u64)>> = Mutex::new(BTreeMap::new());
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    match last.get_mut(kind) {
        Some((at, left_out)) if now.duration_since(*at) < LOG_EVERY => *left_out += 1,
        entry => {
            let left_out = entry.map_or(0, |(_, n)| *n);
            if left_out > 0 {
                tracing::error!("{msg} ({left_out} more like it in the last minute not logged)");
            } else {
                tracing::error!("{msg}");
            }
            last.insert(kind, (now, 0));
        }
    }
}

/// True if the error chain holds a full file system (ENOSPC, EDQUOT): the
/// state directory's trouble, not the job's.
fn disk_full(text: &str) -> bool {
    text.contains("No space left on device") || text.contains("Disk quota exceeded")
}

/// The mechanisms the node loop works with.
pub struct Service {
    pub cfg: Config,
    pub shared: Arc<Shared>,
    pub env: Env,
    /// The cgroup the pools go in: the daemon's own.
    pub parent: Option<GroupPath>,
    /// The metrics text last rendered, for the HTTP listener.
    pub metrics: crate::http::Latest,
}

/// What the previous daemon left: the pool to take over, the jobs alive
/// in it, and jobs alive in older pools.
struct Recovered {
    pool: Option<String>,
    rejoin: Vec<(u64, Record)>,
    elsewhere: Vec<Adopted>,
}

/// A job of a previous daemon found alive in a pool not taken over:
/// thawed and left to run to its end (it holds its promised memory until
/// then).
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
    fn new_pool_name(&self) -> String {
        // Unique per start (a restarted daemon may get the same pid while
        // an old pool still holds adopted jobs).
        let leaf = format!(
            "memgang-pool-{}-{}",
            std::process::id(),
            (unix_now() * 1000.0) as u64
        );
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

    fn node_settings(&self, pool: String) -> NodeSettings {
        NodeSettings {
            pool,
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
        }
    }

    /// Run until `stop`: recover, then admit, start, step, record.
    pub fn run(&self, stop: &AtomicBool) -> Result<()> {
        let rec = self.recover();
        let pool = rec.pool.clone().unwrap_or_else(|| self.new_pool_name());
        let settings = self.node_settings(pool.clone());
        // Ours before it exists: a daemon removes only the pools it made.
        self.own_pools(|pools| {
            pools.insert(pool.clone());
        });
        let mut rejoin = rec.rejoin;
        let mut adopted = rec.elsewhere;
        let mut node = match Node::new(settings, self.env.clone()) {
            Ok(node) => node,
            // The old pool refuses its limit (e.g. a smaller pool_memory
            // than its jobs hold): its jobs run to their end in it, the
            // new jobs go to a new pool.
            Err(e) if rec.pool.is_some() => {
                tracing::warn!(
                    "taking over the pool {pool}: {e:#}; its jobs run to their end there"
                );
                for (id, r) in rejoin.drain(..) {
                    if let Some(g) = r.group.as_deref().and_then(|g| GroupPath::new(g).ok()) {
                        adopted.push(self.run_to_end(id, g));
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
        let mut map: HashMap<u64, JobId> = HashMap::new();
        // The previous daemon's jobs in this pool rejoin the rotation.
        for (id, r) in rejoin {
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
        let mut next_metrics = Instant::now();
        let mut next_forget = Instant::now();
        let mut accounted = Accounted::default();
        let vm_start = VmStat::read().ok();
        while !stop.load(Ordering::Relaxed) {
            self.shared.flush();
            self.keep_pool(node.pool());
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
                    Err(e) => self.could_not_start(id, &format!("{e:#}")),
                }
            }
            for id in cancels {
                if let Some(jid) = map.get(&id) {
                    if let Err(e) = node.cancel(*jid) {
                        tracing::error!("{}", printable(&format!("{e:#}")));
                    }
                } else if let Some(a) = adopted.iter_mut().find(|a| a.id == id) {
                    a.cancelled = true;
                    kill_group(self.env.backend.as_ref(), &a.group);
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
            let idle = node.step(Some(IDLE_WAIT))?;
            self.sync(&node, &mut map, &mut accounted);
            adopted.retain(|a| !self.reap_adopted(a));
            if Instant::now() >= next_metrics {
                next_metrics = Instant::now() + METRICS_EVERY;
                self.write_metrics(&node, &map, cap, vm_start, &accounted);
            }
            let forgot = Instant::now() >= next_forget
                && self.shared.forget(
                    self.cfg.keep_finished_for,
                    self.cfg.keep_finished_jobs,
                    unix_now(),
                );
            if Instant::now() >= next_forget {
                next_forget = Instant::now() + FORGET_EVERY;
            }
            if idle {
                self.shared.idle_wait(IDLE_WAIT);
            }
            let mut g = self.shared.lock();
            let inner = &mut *g;
            if let Err(e) = inner.journal.maybe_compact(inner.jobs.values(), forgot) {
                log_limited(
                    "compact",
                    format!("compacting the journal: {}", printable(&format!("{e:#}"))),
                );
            }
        }
        self.sync(&node, &mut map, &mut accounted);
        self.shared.flush();
        let alive = map.iter().any(|(id, _)| {
            self.shared
                .get(*id)
                .is_some_and(|r| !r.info.state.is_final())
        });
        if alive {
            tracing::info!("memgangd stopping: jobs left running for the next start to adopt");
            node.release();
        } else {
            let pool = node.pool().clone();
            drop(node.finish());
            self.own_pools(|pools| {
                pools.remove(&pool.as_str().to_string());
            });
        }
        Ok(())
    }

    /// A job the daemon could not start: failed, unless the state
    /// directory's disk is full (then it waits in the queue for room:
    /// not the job's fault, and it never ran).
    fn could_not_start(&self, id: u64, why: &str) {
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

    /// Every pool always has its limit: one removed from under the daemon
    /// (by hand, or by another daemon before pools were owned) is made
    /// again with it before a job goes in.
    fn keep_pool(&self, pool: &GroupPath) {
        let backend = self.env.backend.as_ref();
        if backend.exists(pool) {
            return;
        }
        let made = backend
            .create(pool)
            .and_then(|()| backend.set_memory_limit(pool, Some(self.cfg.pool_memory)));
        match made {
            Ok(()) => tracing::warn!(
                "the pool {} was removed from under memgangd; made again with its limit",
                pool.as_str()
            ),
            Err(e) => log_limited(
                "pool",
                format!("making the pool {} again: {e}", pool.as_str()),
            ),
        }
    }

    /// The pools this daemon made, one a line in `state_dir/pools`,
    /// changed by `f` and written back (atomically).
    fn own_pools(&self, f: impl FnOnce(&mut BTreeSet<String>)) -> BTreeSet<String> {
        let path = self.shared.state_dir.join("pools");
        let mut pools: BTreeSet<String> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
            .collect();
        let before = pools.clone();
        f(&mut pools);
        if pools != before {
            let tmp = path.with_extension("new");
            let text: String = pools.iter().map(|p| format!("{p}\n")).collect();
            let write = std::fs::write(&tmp, text)
                .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
                .and_then(|()| std::fs::rename(&tmp, &path));
            if let Err(e) = write {
                let _ = std::fs::remove_file(&tmp);
                log_limited(
                    "pools",
                    format!("recording memgangd's pools in {}: {e}", path.display()),
                );
            }
        }
        pools
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

    fn start(&self, node: &mut Node, r: &Record) -> Result<JobId> {
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

    /// The node's view of each job into the records; the time account of
    /// each job that ended into `accounted` too.
    fn sync(&self, node: &Node, map: &mut HashMap<u64, JobId>, accounted: &mut Accounted) {
        let (mut requeued, mut done) = (Vec::new(), Vec::new());
        for (&id, &jid) in map.iter() {
            let Some(res) = node.result(jid) else {
                continue;
            };
            let status = node.scheduler().state().job(jid).status;
            let cur = self.shared.get(id);
            if cur.as_ref().is_none_or(|r| r.info.state.is_final()) {
                // Ended for good: nothing more to learn from the node.
                done.push(id);
                continue;
            }
            let asked = self.shared.cancel_asked(id);
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
                    // In the same journal line as the end: a line after an
                    // end is never replayed.
                    r.info.account = res
                        .account
                        .as_ref()
                        .and_then(|a| serde_json::to_value(a).ok());
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
            // Once: the next sync finds the job's end recorded.
            if let (Some(_), Some(a)) = (res.finish_s, &res.account) {
                accounted.add(a);
            }
        }
        for id in requeued.into_iter().chain(done) {
            map.remove(&id);
        }
    }

    /// Jobs of the previous daemon: those alive in one pool rejoin the
    /// rotation in it (it becomes this daemon's pool); alive ones in
    /// other pools (left by several restarts) are thawed and run to their
    /// end; what ended is finished; what never started is queued again.
    /// Nothing stays frozen.
    fn recover(&self) -> Recovered {
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
            let _ = backend.protect(&group, false);
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

    /// A job alive in a pool not taken over: thawed and left to run to
    /// its end there.
    fn run_to_end(&self, id: u64, group: GroupPath) -> Adopted {
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
        let cancelled = a.cancelled || self.shared.cancel_asked(a.id);
        self.shared.update(a.id, |r| {
            let (code, signal) = st.unwrap_or((None, Some(libc::SIGKILL)));
            finish(
                r,
                code,
                signal,
                cancelled,
                cancelled.then(|| "cancelled".into()),
            );
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
    fn remove_stale_pools(&self, adopted: &[Adopted], current: &GroupPath) {
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

    fn write_metrics(
        &self,
        node: &Node,
        map: &HashMap<u64, JobId>,
        cap: Capacity,
        vm_start: Option<VmStat>,
        accounted: &Accounted,
    ) {
        if self.cfg.metrics_file.is_none() && self.cfg.metrics_listen.is_none() {
            return;
        }
        let jobs = self.shared.list(|_| true);
        let per_job = job_series(&jobs, unix_now(), |id| node.live(*map.get(&id)?));
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
            accounted,
            per_job: &per_job,
        });
        if let Ok(mut latest) = self.metrics.lock() {
            latest.clone_from(&text);
        }
        let Some(path) = &self.cfg.metrics_file else {
            return;
        };
        // World-readable (node_exporter runs as its own user; the daemon's
        // umask is 077), and renamed into place so a reader never sees
        // half a file. The temporary name does not end in .prom, which
        // the textfile collector would read.
        let tmp = path.with_extension("prom.tmp");
        let write = || -> std::io::Result<()> {
            std::fs::write(&tmp, text)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
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

/// The time accounts of the jobs that ended since the daemon started,
/// summed (counters: a job forgotten from the list still counts).
#[derive(Debug, Default)]
pub struct Accounted {
    pub jobs: u64,
    pub wall_s: f64,
    /// Per part of [`JobAccount::parts`], in its order.
    pub parts: [f64; 7],
    pub user_cpu_s: f64,
    pub system_cpu_s: f64,
    pub swapin_delay_s: f64,
    pub thrashing_delay_s: f64,
    pub reclaim_delay_s: f64,
}

impl Accounted {
    pub fn add(&mut self, a: &JobAccount) {
        self.jobs += 1;
        self.wall_s += a.wall_s;
        for (sum, (_, v)) in self.parts.iter_mut().zip(a.parts()) {
            *sum += v;
        }
        self.user_cpu_s += a.user_cpu_s;
        self.system_cpu_s += a.system_cpu_s;
        self.swapin_delay_s += a.swapin_delay_s;
        self.thrashing_delay_s += a.thrashing_delay_s;
        self.reclaim_delay_s += a.reclaim_delay_s;
    }
}

/// One job's own metrics series: a running job's counters so far, or an
/// ended one's time account and counters.
#[derive(Debug, Default)]
pub struct JobSeries {
    pub id: u64,
    pub user: String,
    /// Its time account, once it has ended.
    pub account: Option<JobAccount>,
    pub counters: Live,
}

/// The jobs that have series of their own: those running here (`live`:
/// their counters so far, by id; None for a job not on this node, e.g.
/// adopted from an earlier daemon) and the newest [`RECENT_JOBS`] that
/// ended within [`RECENT_FOR_S`] of `now` with an account, from the jobs
/// the daemon keeps.
pub fn job_series(
    jobs: &[JobInfo],
    now: f64,
    live: impl Fn(u64) -> Option<Live>,
) -> Vec<JobSeries> {
    let mut ended: Vec<&JobInfo> = jobs
        .iter()
        .filter(|j| j.account.is_some())
        .filter(|j| j.finished_unix_s.is_some_and(|t| now - t <= RECENT_FOR_S))
        .collect();
    let end = |j: &JobInfo| j.finished_unix_s.unwrap_or(0.0);
    ended.sort_by(|a, b| end(b).total_cmp(&end(a)));
    ended.truncate(RECENT_JOBS);
    let mut names = HashMap::new();
    let mut user =
        |uid: u32| -> String { names.entry(uid).or_insert_with(|| user_name(uid)).clone() };
    let mut out: Vec<JobSeries> = ended
        .into_iter()
        .filter_map(|j| {
            // An account of another version's shape is left out here;
            // `memgang show` prints it as it is.
            let a: JobAccount = serde_json::from_value(j.account.clone()?).ok()?;
            Some(JobSeries {
                id: j.id,
                user: user(j.uid),
                counters: Live::from(&a),
                account: Some(a),
            })
        })
        .collect();
    for j in jobs.iter().filter(|j| !j.state.is_final()) {
        if let Some(counters) = live(j.id) {
            out.push(JobSeries {
                id: j.id,
                user: user(j.uid),
                account: None,
                counters,
            });
        }
    }
    out.sort_by_key(|s| s.id);
    out
}

/// The login name of `uid`, or the number where it has none.
fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// A label value as the text format wants it: backslash, double quote and
/// newline escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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
    pub accounted: &'a Accounted,
    /// The jobs with series of their own ([`job_series`]).
    pub per_job: &'a [JobSeries],
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
    let by_state: Vec<(String, String)> = JobState::ALL
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
    let a = m.accounted;
    metric(
        "memgang_jobs_accounted_total",
        "counter",
        "Jobs that ended after running, since the daemon started: the memgang_job_* series sum their time accounts.",
        &one(a.jobs.to_string()),
    );
    metric(
        "memgang_job_wall_seconds_total",
        "counter",
        "Their wall time, from start to end.",
        &one(a.wall_s.to_string()),
    );
    let parts: Vec<(String, String)> = JobAccount::default()
        .parts()
        .iter()
        .zip(a.parts)
        .map(|((name, _), v)| {
            (
                format!("{{part=\"{}\"}}", name.replace(' ', "_")),
                v.to_string(),
            )
        })
        .collect();
    metric(
        "memgang_job_seconds_total",
        "counter",
        "Their wall time by part (docs/results.md, time account); the parts add up to memgang_job_wall_seconds_total.",
        &parts,
    );
    metric(
        "memgang_job_cpu_seconds_total",
        "counter",
        "Their CPU time (rusage), in CPU seconds.",
        &[
            ("{mode=\"user\"}".into(), a.user_cpu_s.to_string()),
            ("{mode=\"system\"}".into(), a.system_cpu_s.to_string()),
        ],
    );
    metric(
        "memgang_job_stall_seconds_total",
        "counter",
        "Their memory stalls (taskstats), overlapping the parts.",
        &[
            ("{kind=\"swapin\"}".into(), a.swapin_delay_s.to_string()),
            (
                "{kind=\"thrashing\"}".into(),
                a.thrashing_delay_s.to_string(),
            ),
            ("{kind=\"reclaim\"}".into(), a.reclaim_delay_s.to_string()),
        ],
    );
    // Per job (`job_series`): running ones and recently ended ones.
    let labels = |j: &JobSeries, extra: String| {
        let sep = if extra.is_empty() { "" } else { "," };
        format!(
            "{{id=\"{}\",user=\"{}\"{sep}{extra}}}",
            j.id,
            label_value(&j.user)
        )
    };
    let series = |v: Vec<(&JobSeries, String, String)>| -> Vec<(String, String)> {
        v.into_iter()
            .map(|(j, extra, value)| (labels(j, extra), value))
            .collect()
    };
    let ended: Vec<(&JobSeries, &JobAccount)> = (m.per_job.iter())
        .filter_map(|j| Some((j, j.account.as_ref()?)))
        .collect();
    metric(
        "memgang_job_account_wall_seconds",
        "gauge",
        "A recently ended job's wall time, from start to end.",
        &series(
            (ended.iter())
                .map(|(j, a)| (*j, String::new(), a.wall_s.to_string()))
                .collect(),
        ),
    );
    metric(
        "memgang_job_account_seconds",
        "gauge",
        "Its wall time by part (docs/results.md, time account); the parts add up to memgang_job_account_wall_seconds.",
        &series(
            (ended.iter())
                .flat_map(|(j, a)| {
                    a.parts().map(|(name, v)| {
                        let part = format!("part=\"{}\"", name.replace(' ', "_"));
                        (*j, part, v.to_string())
                    })
                })
                .collect(),
        ),
    );
    metric(
        "memgang_job_account_cpu_seconds",
        "gauge",
        "Its CPU time (rusage), in CPU seconds.",
        &series(
            (ended.iter())
                .flat_map(|(j, a)| {
                    [("user", a.user_cpu_s), ("system", a.system_cpu_s)]
                        .map(|(mode, v)| (*j, format!("mode=\"{mode}\""), v.to_string()))
                })
                .collect(),
        ),
    );
    // Absent for a job whose counters the kernel refused.
    let sw: Vec<(&JobSeries, &SwCounts)> = (m.per_job.iter())
        .filter_map(|j| Some((j, j.counters.sw.as_ref()?)))
        .collect();
    metric(
        "memgang_job_perf_events_total",
        "counter",
        "A running or recently ended job's software perf events so far, its threads and children included.",
        &series(
            (sw.iter())
                .flat_map(|(j, c)| {
                    [
                        ("minor_faults", c.minor_faults),
                        ("major_faults", c.major_faults),
                        ("context_switches", c.context_switches),
                        ("cpu_migrations", c.cpu_migrations),
                    ]
                    .map(|(event, n)| (*j, format!("event=\"{event}\""), n.to_string()))
                })
                .collect(),
        ),
    );
    metric(
        "memgang_job_task_clock_seconds_total",
        "counter",
        "Its task clock (perf): the time its tasks were on a CPU.",
        &series(
            (sw.iter())
                .map(|(j, c)| {
                    (
                        *j,
                        String::new(),
                        (c.task_clock_ns as f64 * 1e-9).to_string(),
                    )
                })
                .collect(),
        ),
    );
    metric(
        "memgang_job_anon_huge_bytes",
        "gauge",
        "Its anonymous huge pages (its cgroup's counter), the mean of its readings so far: at every sample while it runs (when=\"running\") and at each quantum's end (when=\"quantum_end\").",
        &series(
            (m.per_job.iter())
                .flat_map(|j| {
                    let c = &j.counters;
                    [("running", &c.anon_huge_running), ("quantum_end", &c.anon_huge_quantum_end)]
                        .into_iter()
                        .filter_map(move |(when, h)| {
                            let h = h.as_ref()?;
                            Some((j, format!("when=\"{when}\""), h.mean_bytes.to_string()))
                        })
                })
                .collect(),
        ),
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

/// The shim's record of how the command ended, for a job the daemon did
/// not start (after a restart): `exit N` or `signal N` and a newline,
/// nothing else. At most 32 bytes are read (the file is root's, written
/// by the shim only, but a status file of an older version was the
/// user's), and anything else reads as no record.
pub fn read_status(log_dir: &Path) -> Option<(Option<i32>, Option<i32>)> {
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

fn kill_group(backend: &dyn CgroupBackend, group: &GroupPath) {
    let _ = memgang_runtime::kill_group(backend, group);
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

    /// Retention by age and by count; what is forgotten loses its
    /// output, the rest and the jobs in progress stay.
    #[test]
    fn retention_forgets_old_and_surplus_ended_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = Journal::open(dir.path()).unwrap();
        let mut jobs = BTreeMap::new();
        let day = 86_400.0;
        for (id, state, ended_days_ago) in [
            (1, JobState::Finished, Some(9.0)),
            (2, JobState::Failed, Some(3.0)),
            (3, JobState::Running, None),
            (4, JobState::Cancelled, Some(2.0)),
            (5, JobState::Finished, Some(1.0)),
        ] {
            let mut r = crate::journal::tests::rec(id, state);
            r.info.finished_unix_s = ended_days_ago.map(|d: f64| 100.0 * day - d * day);
            r.info.log_dir = dir.path().join("jobs").join(id.to_string());
            std::fs::create_dir_all(&r.info.log_dir).unwrap();
            jobs.insert(id, r);
        }
        let cap = Capacity {
            pool_bytes: 1,
            swap_total_bytes: 0,
            swap_used_elsewhere_bytes: 0,
            swap_reserve_bytes: 0,
        };
        let shared = Shared::new(journal, jobs, dir.path().to_path_buf(), cap);
        let ids = |s: &Shared| s.list(|_| true).iter().map(|j| j.id).collect::<Vec<_>>();
        let week = Duration::from_secs(7 * 86_400);
        assert!(!shared.forget(week, 10, 1.0));
        assert!(shared.forget(week, 10, 100.0 * day));
        assert_eq!(ids(&shared), vec![2, 3, 4, 5]);
        assert!(!dir.path().join("jobs/1").exists());
        assert!(shared.forget(week, 2, 100.0 * day));
        assert_eq!(ids(&shared), vec![3, 4, 5]);
        assert!(dir.path().join("jobs/4").exists() && !dir.path().join("jobs/2").exists());
        assert!(shared.forget(week, 0, 100.0 * day));
        assert_eq!(ids(&shared), vec![3]);
        // Ids are not given again.
        assert_eq!(shared.lock().next_id, 6);
    }

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

    fn input<'a>(accounted: &'a Accounted, per_job: &'a [JobSeries]) -> MetricsInput<'a> {
        MetricsInput {
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
            accounted,
            per_job,
        }
    }

    #[test]
    fn each_job_has_series_of_its_own_with_escaped_labels() {
        let account = JobAccount {
            wall_s: 10.0,
            cpu_s: 7.0,
            frozen_s: 3.0,
            user_cpu_s: 6.5,
            system_cpu_s: 0.5,
            sw: Some(SwCounts {
                major_faults: 12,
                task_clock_ns: 7_000_000_000,
                ..SwCounts::default()
            }),
            anon_huge_running: Some(memgang_results::HugeStat {
                samples: 1,
                mean_bytes: 2 << 20,
                min_bytes: 2 << 20,
                max_bytes: 2 << 20,
            }),
            ..JobAccount::default()
        };
        let jobs = [
            JobSeries {
                id: 7,
                user: "a\"b\\c\nd".into(),
                counters: Live::from(&account),
                account: Some(account),
            },
            // Running, its counters refused by the kernel: no series.
            JobSeries {
                id: 8,
                user: "bob".into(),
                ..JobSeries::default()
            },
        ];
        let t = metrics_text(&input(&Accounted::default(), &jobs));
        let who = r#"id="7",user="a\"b\\c\nd""#;
        for line in [
            format!("memgang_job_account_wall_seconds{{{who}}} 10\n"),
            format!("memgang_job_account_seconds{{{who},part=\"frozen\"}} 3\n"),
            format!("memgang_job_account_seconds{{{who},part=\"run_queue\"}} 0\n"),
            format!("memgang_job_account_cpu_seconds{{{who},mode=\"system\"}} 0.5\n"),
            format!("memgang_job_perf_events_total{{{who},event=\"major_faults\"}} 12\n"),
            format!("memgang_job_task_clock_seconds_total{{{who}}} 7\n"),
            format!("memgang_job_anon_huge_bytes{{{who},when=\"running\"}} 2097152\n"),
        ] {
            assert!(t.contains(&line), "{line} missing in\n{t}");
        }
        assert!(!t.contains("quantum_end\"}"), "{t}");
        assert!(!t.contains(r#"id="8""#), "{t}");
        // One sample per line: the escaped newline did not cut one.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').unwrap();
            v.parse::<f64>().unwrap();
        }
    }

    #[test]
    fn running_and_recently_ended_jobs_have_series_of_their_own() {
        use crate::journal::tests::rec;
        let now = 100_000.0;
        let ended = |id: u64, ago: f64| {
            let mut r = rec(id, JobState::Finished).info;
            r.finished_unix_s = Some(now - ago);
            r.account = serde_json::to_value(JobAccount::default()).ok();
            r
        };
        let mut jobs: Vec<JobInfo> = (0..RECENT_JOBS as u64 + 10)
            .map(|id| ended(id, id as f64))
            .collect();
        jobs.push(ended(9_000, RECENT_FOR_S + 1.0));
        let mut no_account = ended(9_001, 0.0);
        no_account.account = None;
        jobs.push(no_account);
        jobs.push(rec(9_002, JobState::Running).info);
        jobs.push(rec(9_003, JobState::Running).info);
        jobs.push(rec(9_004, JobState::Queued).info);
        // 9003 runs on no node of ours (adopted), 9004 waits: no counters.
        let live = |id: u64| (id == 9_002).then(Live::default);
        let ids: Vec<u64> = job_series(&jobs, now, live).iter().map(|s| s.id).collect();
        let want: Vec<u64> = (0..RECENT_JOBS as u64).chain([9_002]).collect();
        assert_eq!(ids, want);
    }

    #[test]
    fn metrics_are_prometheus_text() {
        let mut accounted = Accounted::default();
        accounted.add(&JobAccount {
            wall_s: 10.0,
            cpu_s: 7.0,
            frozen_s: 2.0,
            unaccounted_s: 1.0,
            swapin_delay_s: 0.5,
            ..JobAccount::default()
        });
        let t = metrics_text(&input(&accounted, &[]));
        assert!(t.contains("# TYPE memgang_jobs gauge\n"));
        assert!(t.contains("memgang_jobs{state=\"queued\"} 0\n"));
        assert!(t.contains("memgang_switches_total 3\n"));
        assert!(t.contains("memgang_switch_paged_bytes_total{direction=\"in\"} 20\n"));
        assert!(t.contains("memgang_jobs_accounted_total 1\n"));
        assert!(t.contains("memgang_job_seconds_total{part=\"frozen\"} 2\n"));
        assert!(t.contains("memgang_job_seconds_total{part=\"run_queue\"} 0\n"));
        assert!(t.contains("memgang_job_stall_seconds_total{kind=\"swapin\"} 0.5\n"));
        // Every sample line is `name{labels} value`.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').unwrap();
            v.parse::<f64>().unwrap();
        }
    }
}
