//! The node agent: the node's memory pool (a cgroup with the node's
//! memory limit, `memgang-slurm-<node>`), a group per Slurm job in it, and
//! the switch's memory work on them when the controller asks, carried out
//! by the switch engine the one-node executor uses
//! ([`memgang_runtime::engine::NodeSwitch`]).
//!
//! Where the pool and the job groups are is the node's Slurm's choice
//! ([`site`](crate::site)): under Slurm's cgroups (`proctrack/cgroup`,
//! `task/cgroup`) the pool is Slurm's cgroup of all jobs and every task
//! stays in Slurm's job cgroup; without them, tasks enter memgang's own
//! pool by Slurm's `TaskProlog`, which Slurm runs in each task's own
//! process before it execs the task: `memgang slurm adopt` asks the agent
//! to move its parent (that process) into the job's group, so that the
//! rank and everything it forks run in the pool from their first
//! instruction.

use crate::auth::Verifier;
use crate::net;
use crate::site::Site;
use crate::wire::{HeldJob, Request, Response, SlurmJob, Step, SwitchReport};
use anyhow::{bail, Context, Result};
use memgang_core::units::format_bytes;
use memgang_core::PageInPlan;
use memgang_linux::cgroup::{CgroupBackend, GroupPath};
use memgang_linux::counters::NodeCounters;
use memgang_linux::paging::Paging;
use memgang_proto::lines;
use memgang_runtime::engine::{JobMemory, Memories, NodeSwitch, Suspended, SwitchHost};
use memgang_runtime::memory::GroupMemory;
use memgang_runtime::SwitchSteps;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A request is one line of a few hundred bytes; more is not a client.
const MAX_REQUEST_BYTES: usize = 1 << 20;
/// A task's prolog sends its line at once; a connection that does not
/// must not hold a thread. The controller's switches answer on their own
/// time: this only bounds the read of the request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How often groups of ended jobs are removed: a job's group outliving it
/// by a few seconds costs nothing.
const SWEEP_EVERY: Duration = Duration::from_secs(2);

pub struct Agent {
    node: String,
    /// The node's pool and the switch engine over it: the same steps as
    /// the one-node executor's switch.
    engine: NodeSwitch,
    /// One switch at a time; adopt takes it briefly.
    jobs: Mutex<BTreeMap<SlurmJob, JobMemory>>,
    /// Where the node's Slurm keeps its jobs: the pool, the jobs' groups.
    site: Site,
}

impl Agent {
    /// Give the node's pool (`site`'s) its limit.
    pub fn new(node: &str, pool_bytes: u64, site: Site) -> Result<Agent> {
        site.open_pool(pool_bytes)?;
        let (backend, pool) = (site.backend.clone(), site.pool.clone());
        Ok(Agent {
            node: node.to_string(),
            engine: NodeSwitch {
                memory: GroupMemory {
                    backend,
                    paging: Arc::new(memgang_linux::paging::Madvise),
                    counters: Arc::new(memgang_linux::counters::ProcCounters),
                    swap_reserve: memgang_core::capacity::SWAP_RESERVE,
                },
                pool,
                pool_memory: pool_bytes,
                suspended: Default::default(),
            },
            jobs: Mutex::new(BTreeMap::new()),
            site,
        })
    }

    pub fn with_paging(mut self, paging: Arc<dyn Paging>) -> Agent {
        self.engine.memory.paging = paging;
        self
    }

    pub fn with_counters(mut self, counters: Arc<dyn NodeCounters>) -> Agent {
        self.engine.memory.counters = counters;
        self
    }

    fn backend(&self) -> &dyn CgroupBackend {
        self.engine.memory.backend.as_ref()
    }

    fn job_group(&self, job: SlurmJob) -> GroupPath {
        self.site.job_group(job)
    }

    /// Under Slurm's cgroups no prolog announces a job: take in every job
    /// Slurm has started in the pool that the agent does not hold yet.
    fn discover(&self) {
        if !self.site.is_slurm() {
            return;
        }
        let found = self.site.jobs();
        let mut jobs = self.jobs.lock().unwrap();
        for (job, group) in found {
            jobs.entry(job).or_insert_with(|| {
                tracing::info!("job {job}: found in Slurm's {group}");
                JobMemory::new(group, &job.to_string(), None)
            });
        }
    }

    /// Job `job` as the engine keeps it; a job with no process here yet
    /// (not adopted) has nothing in memory: a fresh one.
    fn memory_of(&self, job: SlurmJob) -> JobMemory {
        JobMemory::new(self.job_group(job), &job.to_string(), None)
    }

    /// Answer one request from a caller with uid `uid`.
    pub fn handle(&self, req: Request, uid: u32) -> Result<Response> {
        if uid != 0 && !matches!(req, Request::Adopt { .. } | Request::Hello) {
            bail!("only root may ask the memgang agent to switch jobs (you are uid {uid})");
        }
        match req {
            Request::Hello => Ok(Response::Hello {
                node: self.node.clone(),
                pool_bytes: self.engine.pool_memory,
            }),
            Request::Adopt { pid, job } => self.adopt(pid, job, uid),
            Request::Check { incoming } => {
                self.discover();
                self.check(&incoming)
            }
            Request::Switch { steps } => {
                self.discover();
                Ok(Response::Switched(self.switch(steps)?))
            }
            Request::State => {
                self.discover();
                Ok(Response::State {
                    jobs: self.held_jobs(),
                })
            }
        }
    }

    /// Every job with a group in the pool: what a restarted controller
    /// asks to see which jobs are paged out and stopped. Waits for a
    /// switch in progress (the jobs' lock), so it sees the switch's end.
    fn held_jobs(&self) -> Vec<HeldJob> {
        let jobs = self.jobs.lock().unwrap();
        let backend = self.backend();
        let mut out = Vec::new();
        for (job, group) in self.site.jobs() {
            let pids = self.site.job_procs(&group);
            let stat = backend.memory_stat(&group).ok();
            out.push(HeldJob {
                job,
                processes: pids.len(),
                stopped: self.site.all_stopped(&pids),
                resident_bytes: stat.as_ref().map_or(0, |s| s.usage_bytes),
                swap_bytes: stat.and_then(|s| s.swap_bytes),
            });
        }
        drop(jobs);
        out
    }

    fn adopt(&self, pid: i32, job: SlurmJob, uid: u32) -> Result<Response> {
        // The task's process is slurmstepd forked, before exec: its
        // /proc environ is slurmstepd's, not the job's, so the job comes
        // from the prolog, which Slurm gives the job's environment. A user
        // can only move processes of their own, as with any cgroup
        // delegation, and gains nothing by naming another job.
        let owner = std::fs::metadata(format!("/proc/{pid}"))
            .with_context(|| format!("process {pid} to adopt is gone"))?
            .uid();
        if uid != 0 && uid != owner {
            bail!("process {pid} belongs to uid {owner}, not to you (uid {uid})");
        }
        let mut jobs = self.jobs.lock().unwrap();
        let group = self.site.adopt(pid, job)?;
        jobs.entry(job)
            .or_insert_with(|| JobMemory::new(group, &job.to_string(), None));
        tracing::info!("job {job}: adopted process {pid}");
        Ok(Response::Adopted { job })
    }

    fn check(&self, incoming: &[(SlurmJob, u64)]) -> Result<Response> {
        // A job Slurm's own limit would kill is not paged in to be killed:
        // the refusal names the limit (the controller writes it into the
        // job's AdminComment).
        for &(job, declared) in incoming {
            if let Some(why) = self.site.slurm_limit(job, declared) {
                bail!("node {}: {why}; switch refused", self.node);
            }
        }
        let mut jobs = self.jobs.lock().unwrap();
        let mut fresh = Vec::new();
        for &(job, declared) in incoming {
            match jobs.get_mut(&job) {
                Some(j) => j.declared = Some(declared),
                None => {
                    let mut j = self.memory_of(job);
                    j.declared = Some(declared);
                    fresh.push(j);
                }
            }
        }
        let known = incoming.iter().filter_map(|(job, _)| jobs.get(job));
        if let Some(why) = self.engine.check(known.chain(&fresh)) {
            bail!(
                "node {}: {why}; switch refused. Add swap on this node",
                self.node
            );
        }
        Ok(Response::Ok)
    }

    /// A switch's steps on this node, through the switch engine's loop:
    /// its jobs were stopped by Slurm before and are resumed by the
    /// controller after ([`Host`]).
    fn switch(&self, steps: Vec<Step>) -> Result<SwitchReport> {
        let mut jobs = self.jobs.lock().unwrap();
        let began = Instant::now();
        let mut host = Host {
            agent: self,
            jobs: &mut jobs,
        };
        let moved = self.engine.carry_out(steps, &mut host)?;
        Ok(SwitchReport {
            paged_out_bytes: moved.paged_out,
            paged_in_bytes: moved.paged_in,
            page_out_s: moved.page_out.as_secs_f64(),
            page_in_s: moved.page_in.as_secs_f64(),
            warnings: moved.warnings,
            steps: moved.steps.close(began.elapsed().as_secs_f64()),
        })
    }

    /// Remove the groups of jobs whose processes have all ended on this
    /// node.
    pub fn sweep(&self) {
        let mut jobs = self.jobs.lock().unwrap();
        let backend = self.engine.memory.backend.clone();
        jobs.retain(|job, j| {
            let alive = backend
                .procs_recursive(&j.group)
                .map_or(!self.site.is_slurm(), |p| !p.is_empty());
            if !alive {
                j.stop_paging();
                match self.site.ended(&j.group) {
                    Ok(()) => tracing::info!("job {job}: ended on this node"),
                    Err(e) => {
                        tracing::warn!("job {job}: removing its group: {e}");
                        return true;
                    }
                }
            }
            alive
        });
    }

    /// On the agent's exit: the pool given back (its limit lifted, or
    /// memgang's own removed), no job left protected.
    pub fn release(&self) -> Result<()> {
        self.site.release()
    }
}

/// What the agent lends the switch engine's loop: its jobs' memory, a
/// fresh one for a job not adopted here yet, their processes (Slurm
/// stopped them before the switch: nothing to freeze), protection.
struct Host<'a> {
    agent: &'a Agent,
    jobs: &'a mut BTreeMap<SlurmJob, JobMemory>,
}

impl Memories<SlurmJob> for Host<'_> {
    fn memory(&mut self, job: &SlurmJob) -> Option<&mut JobMemory> {
        self.jobs.get_mut(job)
    }
}

impl SwitchHost<SlurmJob> for Host<'_> {
    type Item = Step;

    fn page_in(step: &Step) -> Option<(SlurmJob, PageInPlan)> {
        match step {
            Step::PageIn { job, plan } => Some((*job, *plan)),
            _ => None,
        }
    }

    fn step(&mut self, step: Step) -> Result<Option<Step>> {
        Ok(Some(step))
    }

    fn fresh(&self, job: &SlurmJob) -> Option<JobMemory> {
        Some(self.agent.memory_of(*job))
    }

    fn stop(&mut self, job: &SlurmJob, _: &mut SwitchSteps) -> Result<Vec<i32>> {
        let group = &self.jobs[job].group;
        Ok(self
            .agent
            .backend()
            .procs_recursive(group)
            .unwrap_or_default())
    }

    fn stopped(&mut self, job: &SlurmJob, out: &Suspended) {
        if out.huge_restored > 0 {
            tracing::debug!("job {job}: {} bytes back on huge pages", out.huge_restored);
        }
    }

    fn protect(&mut self, job: &SlurmJob, on: bool) -> Option<String> {
        let group = self
            .jobs
            .get(job)
            .map_or_else(|| self.agent.job_group(*job), |j| j.group.clone());
        let backend = self.agent.backend();
        if !backend.exists(&group) {
            return None;
        }
        let e = backend.protect(&group, on).err()?;
        Some(format!("protecting job {job}: {e}"))
    }
}

/// Where and how an agent listens.
pub struct Listen {
    /// The controller's requests: TCP at this address, each verified by
    /// `verifier` (MUNGE, this node's name).
    pub tcp: String,
    pub verifier: Verifier,
    pub limits: net::Limits,
    /// The tasks' `adopt`: a local socket anyone may connect to (0666);
    /// the caller is who the kernel says it is (SO_PEERCRED).
    pub local: PathBuf,
}

/// Local connections served at once: a task's prolog takes
/// milliseconds; a user opening more is refused "busy".
const MAX_LOCAL: usize = 64;

/// Serve `agent` until `stop` is set: the controller over TCP, the tasks'
/// `adopt` over the local socket; sweep ended jobs; then release the pool.
pub fn serve(agent: Arc<Agent>, listen: Listen, stop: Arc<AtomicBool>) -> Result<()> {
    let server = net::Server::bind(listen.tcp.as_str(), listen.verifier, listen.limits)?;
    let stopper = server.stopper();
    let tcp = server.local_addr();
    let a = agent.clone();
    let network = std::thread::spawn(move || {
        server.run(move |req| {
            // Verified: root on a host of the cluster, for this node.
            a.handle(req, 0).unwrap_or_else(|e| Response::Error {
                message: format!("{e:#}"),
            })
        })
    });
    let local = serve_local(&agent, &listen.local, tcp, &stop);
    stopper.stop();
    let network = network
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the TCP server panicked")));
    let released = agent.release();
    local.and(network).and(released)
}

/// The local socket's loop (and the sweep) until `stop`.
fn serve_local(
    agent: &Arc<Agent>,
    socket: &Path,
    tcp: std::net::SocketAddr,
    stop: &AtomicBool,
) -> Result<()> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let _ = std::fs::remove_file(socket);
    let listener =
        UnixListener::bind(socket).with_context(|| format!("listening on {}", socket.display()))?;
    // Tasks of every user adopt themselves; the agent checks who they are.
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
    listener.set_nonblocking(true)?;
    tracing::info!(
        "agent of node {} listening on {tcp} (MUNGE) and {} (adopt) (pool {}: {})",
        agent.node,
        socket.display(),
        format_bytes(agent.engine.pool_memory),
        agent.site.describe()
    );
    let active = Arc::new(AtomicUsize::new(0));
    let mut last_sweep = Instant::now();
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        match listener.accept() {
            Ok((conn, _)) => {
                if conn.set_nonblocking(false).is_err() {
                    continue;
                }
                if active.fetch_add(1, Ordering::SeqCst) >= MAX_LOCAL {
                    active.fetch_sub(1, Ordering::SeqCst);
                    lines::refuse(
                        &conn,
                        &Response::Error {
                            message: format!(
                                "agent {} busy: {MAX_LOCAL} local requests in progress, try again",
                                agent.node
                            ),
                        },
                    );
                    continue;
                }
                let (agent, active) = (agent.clone(), active.clone());
                std::thread::spawn(move || {
                    if let Err(e) = connection(&conn, &agent) {
                        tracing::debug!("local connection: {e:#}");
                    }
                    lines::close(&conn, Duration::from_millis(100));
                    active.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => break Err(e).context("accepting a connection"),
        }
        if last_sweep.elapsed() >= SWEEP_EVERY {
            agent.sweep();
            last_sweep = Instant::now();
        }
    };
    let _ = std::fs::remove_file(socket);
    result
}

/// One request on the local socket: `adopt` (and `hello`); what moves
/// memory comes over TCP with a MUNGE credential only, so that there is
/// one way to drive an agent to check.
fn connection(conn: &UnixStream, agent: &Agent) -> Result<()> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let uid = getsockopt(conn, PeerCredentials)
        .context("SO_PEERCRED")?
        .uid();
    let resp = match lines::read_line(
        &mut lines::reader(conn, READ_TIMEOUT),
        MAX_REQUEST_BYTES,
        "request",
    )
    .and_then(|l| lines::decode::<Request>(&l, "request"))
    {
        Ok(req @ (Request::Adopt { .. } | Request::Hello)) => {
            agent.handle(req, uid).unwrap_or_else(|e| Response::Error {
                message: format!("{e:#}"),
            })
        }
        Ok(_) => Response::Error {
            message: "the agent's local socket takes adopt only; switches come over TCP with a MUNGE credential (`memgang slurm run`)".into(),
        },
        Err(e) => Response::Error {
            message: format!("malformed request: {e}; expected one JSON object per line"),
        },
    };
    conn.set_write_timeout(Some(READ_TIMEOUT))?;
    lines::write(conn, &resp)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgang_linux::cgroup::v1::V1;
    use memgang_linux::testing::FakeCounters;

    /// An agent over a v1 tree in a temporary directory (the kernel plays
    /// no part): pool of 256 MiB, `used` of it in use.
    fn agent(dir: &Path, used: u64, swap: u64) -> Agent {
        // The kernel makes a group's files; here the test does.
        let pool = dir.join("memgang-slurm-n1");
        std::fs::create_dir_all(&pool).unwrap();
        std::fs::write(pool.join("memory.limit_in_bytes"), "").unwrap();
        let backend = Arc::new(V1::new(dir, None));
        let a = Agent::new("n1", 256 << 20, Site::own("n1", backend).unwrap())
            .unwrap()
            .with_counters(Arc::new(FakeCounters::with_swap(swap)));
        std::fs::write(pool.join("memory.usage_in_bytes"), used.to_string()).unwrap();
        let stat = format!("total_rss {used}\ntotal_cache 0\ntotal_pgmajfault 0\n");
        std::fs::write(pool.join("memory.stat"), stat).unwrap();
        a
    }

    #[test]
    fn the_pool_gets_the_node_memory_as_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        agent(dir.path(), 0, 1 << 30);
        let limit =
            std::fs::read_to_string(dir.path().join("memgang-slurm-n1/memory.limit_in_bytes"));
        assert_eq!(limit.unwrap().trim(), (256u64 << 20).to_string());
    }

    #[test]
    fn a_switch_the_swap_cannot_take_is_refused_before_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        // A full pool and 100 MiB of swap (36 MiB beyond the reserve): an
        // incoming job of 200 MiB needs about 200 MiB paged out.
        let a = agent(dir.path(), 250 << 20, 100 << 20);
        let err = a
            .handle(
                Request::Check {
                    incoming: vec![(7, 200 << 20)],
                },
                0,
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("node n1") && err.contains("switch refused"),
            "{err}"
        );
        // With room in swap the same switch goes ahead.
        let a = agent(dir.path(), 250 << 20, 4 << 30);
        assert_eq!(
            a.handle(
                Request::Check {
                    incoming: vec![(7, 200 << 20)]
                },
                0
            )
            .unwrap(),
            Response::Ok
        );
    }

    #[test]
    fn state_lists_the_jobs_in_the_pool_and_whether_slurm_stopped_them() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(dir.path(), 0, 1 << 30);
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let pool = dir.path().join("memgang-slurm-n1");
        for (job, procs) in [("job-7", pid.to_string()), ("job-8", String::new())] {
            let g = pool.join(job);
            std::fs::create_dir_all(&g).unwrap();
            std::fs::write(g.join("cgroup.procs"), &procs).unwrap();
            std::fs::write(g.join("memory.usage_in_bytes"), "4096").unwrap();
            let stat = "total_rss 4096\ntotal_cache 0\ntotal_swap 8192\ntotal_pgmajfault 0\n";
            std::fs::write(g.join("memory.stat"), stat).unwrap();
        }
        // Not a job's group: not listed.
        std::fs::create_dir_all(pool.join("other")).unwrap();
        let state = |a: &Agent| match a.handle(Request::State, 0).unwrap() {
            Response::State { jobs } => jobs,
            r => panic!("{r:?}"),
        };
        let jobs = state(&a);
        assert_eq!(jobs.len(), 2, "{jobs:?}");
        assert_eq!(
            jobs[0],
            HeldJob {
                job: 7,
                processes: 1,
                stopped: false,
                resident_bytes: 4096,
                swap_bytes: Some(8192),
            }
        );
        assert!(!jobs[1].stopped && jobs[1].processes == 0);
        // Slurm's suspend: SIGSTOP.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGSTOP,
        )
        .unwrap();
        let t = Instant::now();
        while !state(&a)[0].stopped {
            assert!(t.elapsed() < Duration::from_secs(5), "never seen stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Only root may see it.
        assert!(a.handle(Request::State, 1000).is_err());
    }

    #[test]
    fn steps_on_jobs_the_node_does_not_hold_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(dir.path(), 0, 1 << 30);
        let steps = vec![
            Step::PageOut {
                job: 9,
                plan: memgang_core::PageOutPlan::Aggressive { record: true },
            },
            Step::Protect { job: 9, on: true },
            Step::Prefetch { job: 9 },
            Step::WriteBack {
                job: 9,
                window: Duration::from_secs(1),
            },
            Step::PageIn {
                job: 9,
                plan: PageInPlan::Recorded,
            },
        ];
        let report = match a.handle(Request::Switch { steps }, 0).unwrap() {
            Response::Switched(r) => r,
            r => panic!("{r:?}"),
        };
        assert_eq!(report.paged_out_bytes + report.paged_in_bytes, 0);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        assert!(!dir.path().join("memgang-slurm-n1/job-9").exists());
        assert!(a.jobs.lock().unwrap().is_empty());
    }

    #[test]
    fn only_root_switches_and_users_adopt_only_their_own_processes() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(dir.path(), 0, 1 << 30);
        let err = a
            .handle(Request::Switch { steps: Vec::new() }, 1000)
            .unwrap_err()
            .to_string();
        assert!(err.contains("only root"), "{err}");
        // pid 1 belongs to root, not to uid 1000.
        let err = a
            .handle(Request::Adopt { pid: 1, job: 3 }, 1000)
            .unwrap_err()
            .to_string();
        assert!(err.contains("belongs to uid 0"), "{err}");
        assert!(!dir.path().join("memgang-slurm-n1/job-3").exists());
    }
}
