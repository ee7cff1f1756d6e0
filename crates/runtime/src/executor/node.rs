//! The node: the pool cgroup, the scheduler and the jobs, and the loop
//! that drives them one iteration ([`Node::step`]) at a time.

use super::jobs::{JobRun, Teardown};
use super::sampling::Traffic;
use super::switch::SwitchState;
use super::Env;
use crate::engine::NodeSwitch;
use crate::experiment::Experiment;
use crate::memory::GroupMemory;
use crate::procs::Launch;
use crate::results::{Interval, JobResult, Machine, Sample, Switch};
use anyhow::{bail, Context, Result};
use memgang_core::policy::DynamicCosched;
use memgang_core::{Cluster, JobId, JobSpec, Policy, Scheduler};
use memgang_linux::cgroup::GroupPath;
use memgang_linux::counters::VmStat;
use memgang_linux::pidfd::{self, PidFd};
use std::time::{Duration, Instant};

/// What a node is set up with.
pub struct NodeSettings {
    /// The pool cgroup's name, e.g. `memgang-<pid>`.
    pub pool: String,
    /// The pool's memory limit: the memory the jobs share.
    pub pool_memory: u64,
    /// CPUs the policy may hand out (ranks beyond them share them).
    pub cpus: u32,
    pub policy: Box<dyn Policy>,
    /// The policy's name for the progress line.
    pub label: String,
    /// How often the jobs' counters are read.
    pub sample_interval: Duration,
    /// Paper 003's dynamic coscheduling over `policy`: the node counts
    /// each running job's messages every
    /// [`TRAFFIC_PERIOD`](memgang_core::policy::TRAFFIC_PERIOD).
    pub dynamic_coscheduling: bool,
    /// Swap the node keeps free of the jobs: what its admission kept back
    /// is what a switch's page-outs leave free
    /// ([`memgang_core::capacity::SWAP_RESERVE`]).
    pub swap_reserve: u64,
}

impl NodeSettings {
    /// The node an experiment runs on: this process's pool, the machine's
    /// CPUs or the widest job's ranks, the experiment's policy.
    pub fn for_experiment(exp: &Experiment, machine: &Machine) -> NodeSettings {
        NodeSettings {
            pool: format!("memgang-{}", std::process::id()),
            pool_memory: exp.pool_memory,
            cpus: machine
                .cpus
                .max(exp.jobs.iter().map(|j| j.spec.ranks).max().unwrap_or(1)),
            policy: exp
                .policy
                .build_with(exp.quantum(), exp.switch, exp.overlap),
            label: exp.policy.to_string(),
            sample_interval: exp.sample_interval,
            dynamic_coscheduling: exp.dynamic_coscheduling,
            swap_reserve: memgang_core::capacity::SWAP_RESERVE,
        }
    }
}

/// What a node recorded, once it is torn down.
pub struct NodeReport {
    /// Every job added, in order (their [`JobId`]s index it).
    pub jobs: Vec<JobResult>,
    pub timeline: Vec<Interval>,
    pub switches: Vec<Switch>,
    pub samples: Vec<Sample>,
    /// Node-wide swap traffic over the node's life.
    pub swap_in_pages: u64,
    pub swap_out_pages: u64,
    /// When it ended, since it was set up.
    pub end: Duration,
}

/// One node's pool, scheduler and jobs. Dropping it (on an error, a panic
/// or after [`finish`](Self::finish)) kills every job and removes every
/// cgroup it made.
pub struct Node {
    pub(super) env: Env,
    /// Its switch state: the engine over the pool, the switches done.
    pub(super) sw: SwitchState,
    pub(super) label: String,
    pub(super) sample_interval: Duration,
    pub(super) sched: Scheduler,
    /// Indexed by [`JobId`]: jobs are never retired from a node.
    pub(super) jobs: Vec<JobRun>,
    pub(super) teardown: Teardown,
    pub(super) t0: Instant,
    pub(super) timeline: Vec<Interval>,
    pub(super) samples: Vec<Sample>,
    pub(super) vm_start: VmStat,
    pub(super) vm_last: VmStat,
    pub(super) next_sample: Duration,
    /// Message counts for dynamic coscheduling, when it is on.
    pub(super) traffic: Option<Traffic>,
    /// The node was under memory pressure at the last sample.
    pub(super) pressured: bool,
    /// The jobs' time accounts (crate::account).
    pub(super) account: crate::account::Tracker,
}

impl Node {
    /// Make the pool cgroup with its memory limit; the clock starts now.
    pub fn new(settings: NodeSettings, env: Env) -> Result<Node> {
        let pool = GroupPath::new(&settings.pool)?;
        let backend = env.backend.clone();
        backend
            .create(&pool)
            .with_context(|| format!("creating the pool cgroup {}", pool.as_str()))?;
        let teardown = Teardown::new(backend.clone(), pool.clone());
        backend
            .set_memory_limit(&pool, Some(settings.pool_memory))
            .with_context(|| {
                format!(
                    "setting the pool's memory limit to {} bytes",
                    settings.pool_memory
                )
            })?;
        // The node as the policy sees it: its CPUs and the pool's memory.
        let cluster = Cluster::uniform(1, settings.cpus, settings.pool_memory);
        let vm_start = env
            .counters
            .vmstat()
            .context("reading the node's paging counters (/proc/vmstat)")?;
        let t0 = Instant::now();
        Ok(Node {
            account: crate::account::Tracker::start(t0),
            sched: Scheduler::new(
                cluster,
                Vec::new(),
                if settings.dynamic_coscheduling {
                    Box::new(DynamicCosched::new(settings.policy))
                } else {
                    settings.policy
                },
            ),
            traffic: settings.dynamic_coscheduling.then(Traffic::default),
            sw: SwitchState {
                engine: NodeSwitch {
                    memory: GroupMemory {
                        backend: env.backend.clone(),
                        paging: env.paging.clone(),
                        counters: env.counters.clone(),
                        swap_reserve: settings.swap_reserve,
                    },
                    pool,
                    pool_memory: settings.pool_memory,
                },
                done: Vec::new(),
                protect_failed: false,
            },
            label: settings.label,
            sample_interval: settings.sample_interval,
            env,
            jobs: Vec::new(),
            teardown,
            t0,
            timeline: Vec::new(),
            samples: Vec::new(),
            vm_start,
            vm_last: vm_start,
            next_sample: Duration::ZERO,
            pressured: false,
        })
    }

    /// Add a job; it arrives at `spec.arrival` (time since the node was set
    /// up), or at the next step if that has passed. Its cgroup is
    /// `<pool>/job-<name>`: a name must be unique among the jobs alive.
    pub fn add_job(&mut self, spec: JobSpec, launch: Launch) -> Result<JobId> {
        if let Some(j) = self
            .jobs
            .iter()
            .find(|j| j.result.name == spec.name && j.result.finish_s.is_none())
        {
            bail!("a job named {:?} is already on this node", j.result.name);
        }
        let group = self
            .sw
            .engine
            .pool
            .join(&format!("job-{}", spec.name))
            .with_context(|| format!("job name {:?}", spec.name))?;
        let run = JobRun::new(group, &spec, launch);
        let id = self.sched.submit(spec);
        debug_assert_eq!(id.index(), self.jobs.len());
        self.jobs.push(run);
        Ok(id)
    }

    /// One iteration of the loop: deliver what is due to the policy and
    /// carry its actions out, reap the jobs that exited, and, unless every
    /// job has finished (then it returns true at once), sample the counters
    /// if due and wait until something is due again, at most `max_wait`.
    pub fn step(&mut self, max_wait: Option<Duration>) -> Result<bool> {
        let now = self.now();
        let actions = self.sched.advance(now);
        self.carry_out(actions)?;
        self.reap()?;
        if self.sched.all_finished() {
            return Ok(true);
        }
        self.sample_if_due()?;
        self.traffic_if_due()?;
        let wake = self
            .sched
            .next_wakeup()
            .map_or(self.next_sample, |w| w.min(self.next_sample));
        let wake = self.traffic.as_ref().map_or(wake, |t| wake.min(t.next));
        let mut wait = wake.saturating_sub(self.now());
        if let Some(max) = max_wait {
            wait = wait.min(max);
        }
        let fds: Vec<&PidFd> = self
            .jobs
            .iter()
            .filter_map(|j| j.proc.as_ref())
            .map(|p| &p.pidfd)
            .collect();
        pidfd::wait_any(&fds, wait);
        Ok(false)
    }

    /// The switches so far.
    pub fn switches(&self) -> &[Switch] {
        &self.sw.done
    }

    /// The pool cgroup.
    pub fn pool(&self) -> &GroupPath {
        &self.sw.engine.pool
    }

    /// What a job has recorded so far (final once `finish_s` is set).
    pub fn result(&self, job: JobId) -> Option<&JobResult> {
        self.jobs.get(job.index()).map(|j| &j.result)
    }

    /// The node's scheduler state (read-only), e.g. for a status display.
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// End the node: a last sample, running jobs' intervals closed, jobs
    /// still alive marked stopped and killed, every cgroup removed.
    pub fn finish(mut self) -> NodeReport {
        let end = self.now();
        // The run is over: what the jobs measured is of no use to the policy.
        let _ = self.sample(end);
        self.close_jobs(end);
        let Node {
            env,
            jobs,
            teardown,
            timeline,
            sw,
            samples,
            vm_start,
            vm_last,
            ..
        } = self;
        drop(teardown);
        let vm_end = env.counters.vmstat().unwrap_or(vm_last);
        NodeReport {
            jobs: jobs.into_iter().map(|j| j.result).collect(),
            timeline,
            switches: sw.done,
            samples,
            swap_in_pages: vm_end.pswpin.saturating_sub(vm_start.pswpin),
            swap_out_pages: vm_end.pswpout.saturating_sub(vm_start.pswpout),
            end,
        }
    }

    pub(super) fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    pub(super) fn name(&self, job: JobId) -> &str {
        &self.jobs[job.index()].result.name
    }

    pub(super) fn say(&self, msg: String) {
        if self.env.progress.is_hidden() {
            // A service's log: a job's error may quote what a user wrote
            // (its working directory), which must not forge a line.
            tracing::info!("{}", memgang_core::text::printable(&msg));
        } else {
            self.env.progress.println(msg);
        }
    }
}
