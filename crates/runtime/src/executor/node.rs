//! The node: the pool cgroup, the scheduler and the jobs, and the loop
//! that drives them one iteration ([`Node::step`]) at a time.

use super::jobs::{JobRun, Jobs, Teardown};
use super::sampling::{Sampling, Traffic};
use super::switch::{NodeParts, SwitchState, SwitchWatch};
use super::Env;
use crate::engine::NodeSwitch;
use crate::memory::GroupMemory;
use crate::procs::Launch;
use crate::results::{Interval, JobResult, Sample, Switch};
use anyhow::{bail, Context, Result};
use memgang_core::policy::DynamicCosched;
use memgang_core::{Action, Cluster, Event, JobId, JobSpec, Policy, Scheduler};
use memgang_linux::cgroup::GroupPath;
use memgang_linux::pidfd::{self, PidFd};
use std::collections::VecDeque;
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

/// One node's pool, scheduler and jobs: it composes the concerns (each
/// owns its state: `jobs`, `sampling`, `switch`) and runs the loop.
/// Dropping it (on an error, a panic or after [`finish`](Self::finish))
/// kills every job and removes every cgroup it made.
pub struct Node {
    env: Env,
    /// Its switch state: the engine over the pool, the switches done.
    sw: SwitchState,
    sched: Scheduler,
    jobs: Jobs,
    sampling: Sampling,
    /// Message counts for dynamic coscheduling, when it is on.
    traffic: Option<Traffic>,
    t0: Instant,
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
            jobs: Jobs::new(teardown, t0),
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
                    suspended: Default::default(),
                },
                done: Vec::new(),
                totals: Default::default(),
                protect_failed: false,
                watch: SwitchWatch::default(),
            },
            sampling: Sampling::new(settings.sample_interval, settings.label, vm_start),
            env,
            t0,
        })
    }

    /// Add a job; it arrives at `spec.arrival` (time since the node was set
    /// up), or at the next step if that has passed. Its cgroup is
    /// `<pool>/job-<name>`: a name must be unique among the jobs alive.
    pub fn add_job(&mut self, spec: JobSpec, launch: Launch) -> Result<JobId> {
        if let Some(j) = self
            .jobs
            .runs
            .values()
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
        let id = self.sched.submit(spec).map_err(anyhow::Error::msg)?;
        self.jobs.runs.insert(id, run);
        Ok(id)
    }

    /// Cancel a job: one that runs (or is suspended) is killed and
    /// finishes at the next step, with the error "cancelled"; one not
    /// started yet finishes, unstarted, when the policy would start it. A
    /// finished job is left as it is.
    pub fn cancel(&mut self, job: JobId) -> Result<()> {
        self.jobs.cancel(&self.env, job)
    }

    /// Take over a job that an earlier process (a service before its
    /// restart) started and left running in `group`, a child of this
    /// node's pool: it is frozen now and joins the policy's rotation like
    /// a job just added; when the policy starts it, it is thawed instead
    /// of launched. It ends when its group has no process left; its exit
    /// status is not this process's to read (the result has none).
    pub fn adopt(&mut self, spec: JobSpec, group: GroupPath) -> Result<JobId> {
        if group.parent().as_ref() != Some(&self.sw.engine.pool) {
            anyhow::bail!(
                "cannot adopt {}: not a group of the pool {}",
                group.as_str(),
                self.sw.engine.pool.as_str()
            );
        }
        spec.check(self.sched.state().cluster())
            .map_err(anyhow::Error::msg)?;
        let run = self.jobs.adopt(&self.env, &spec, group)?;
        let id = self.sched.submit(spec).expect("checked");
        self.jobs.runs.insert(id, run);
        Ok(id)
    }

    /// End the node but leave its jobs alive, for a service that stops
    /// and will adopt them from their cgroups when it starts again: every
    /// job is thawed (nothing stays frozen while no one would resume it),
    /// its background paging stopped; no process is killed, no cgroup
    /// removed, the pool's limit stays.
    pub fn release(mut self) {
        self.jobs.release(&self.env);
    }

    /// One iteration of the loop: deliver what is due to the policy and
    /// carry its actions out, reap the jobs that exited, and, unless every
    /// job has finished (then it returns true at once), sample the counters
    /// if due and wait until something is due again, at most `max_wait`.
    pub fn step(&mut self, max_wait: Option<Duration>) -> Result<bool> {
        let now = self.now();
        let actions = self.sched.advance(now);
        self.carry_out(actions)?;
        let pool_memory = self.sw.engine.pool_memory;
        (self.jobs).release_held(&self.env, self.sched.state(), pool_memory, self.t0);
        self.jobs.open_gates();
        self.reap()?;
        if self.sched.all_finished() {
            return Ok(true);
        }
        self.sample_if_due()?;
        self.traffic_if_due()?;
        let next_sample = self.sampling.next();
        let wake = self
            .sched
            .next_wakeup()
            .map_or(next_sample, |w| w.min(next_sample));
        let wake = self.traffic.as_ref().map_or(wake, |t| wake.min(t.next));
        let mut wait = wake.saturating_sub(self.now());
        if let Some(max) = max_wait {
            wait = wait.min(max);
        }
        if let Some(gate) = self.jobs.next_gate() {
            wait = wait.min(gate.saturating_duration_since(Instant::now()));
        }
        let fds: Vec<&PidFd> = self
            .jobs
            .runs
            .values()
            .filter_map(|j| j.proc.as_ref())
            .map(|p| &p.pidfd)
            .collect();
        pidfd::wait_any(&fds, wait);
        Ok(false)
    }

    /// The switches so far (those of forgotten jobs only: let go with
    /// them, [`Node::forget`]).
    pub fn switches(&self) -> &[Switch] {
        &self.sw.done
    }

    /// Every switch of the node's life, summed.
    pub fn switch_totals(&self) -> super::SwitchTotals {
        self.sw.totals
    }

    /// Forget a job that has ended, for a service that has recorded its
    /// end: its run (launch, environment, result, memory records), its
    /// intervals, the switches that moved only forgotten jobs, and its
    /// state in the scheduler ([`Scheduler::retire`]), so that what the
    /// node holds follows the jobs alive, not every job it ever ran. Its
    /// [`result`](Self::result) is gone with it; [`finish`](Self::finish)
    /// reports the jobs not forgotten.
    pub fn forget(&mut self, job: JobId) -> Result<()> {
        let ended = self
            .jobs
            .runs
            .get(job)
            .is_some_and(|j| j.result.finish_s.is_some())
            && self.sched.state().job(job).status == memgang_core::JobStatus::Finished;
        if !ended {
            bail!("job {} has not ended: it cannot be forgotten", job.0);
        }
        let mut run = self.jobs.runs.remove(job).expect("checked");
        run.stop_paging();
        self.jobs.gates.retain(|g| g.job != job);
        let name = run.result.name;
        self.jobs.timeline.retain(|i| i.job != name);
        let alive: std::collections::HashSet<&str> = self
            .jobs
            .runs
            .values()
            .map(|j| j.result.name.as_str())
            .collect();
        let moved_alive =
            |s: &Switch| (s.suspended.iter().chain(&s.resumed)).any(|n| alive.contains(n.as_str()));
        self.sw.done.retain(moved_alive);
        self.sched.retire(job);
        Ok(())
    }

    /// Keep only the newest `n` samples (the paging trace): a service's
    /// node samples every second without end, and reads only the last.
    pub fn keep_samples(&mut self, n: usize) {
        let s = &mut self.sampling.samples;
        if s.len() > n {
            s.drain(..s.len() - n);
        }
    }

    /// Why a job the policy runs is kept stopped, if it is (memory the
    /// suspended jobs hold locked leaves it no room).
    pub fn held(&self, job: JobId) -> Option<&str> {
        self.jobs.runs.get(job)?.held.as_deref()
    }

    /// Memory the job holds locked (its cgroup's `unevictable`, last
    /// sampled), which no page-out moves.
    pub fn pinned(&self, job: JobId) -> u64 {
        (self.jobs.runs.get(job)).map_or(0, |j| j.last.unevictable_bytes.unwrap_or(0))
    }

    /// The jobs on the node (added, not forgotten).
    pub fn job_count(&self) -> usize {
        self.jobs.runs.len()
    }

    /// The pool cgroup.
    pub fn pool(&self) -> &GroupPath {
        &self.sw.engine.pool
    }

    /// What a job has recorded so far (final once `finish_s` is set).
    pub fn result(&self, job: JobId) -> Option<&JobResult> {
        self.jobs.runs.get(job).map(|j| &j.result)
    }

    /// A running job's counters so far (crate::account::Tracker::live).
    pub fn live(&self, job: JobId) -> Option<crate::account::Live> {
        self.jobs.account.live(job.index())
    }

    /// The node's scheduler state (read-only), e.g. for a status display.
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// What the switch in progress is doing, for a reader on another
    /// thread (it never waits for the switch).
    pub fn switch_watch(&self) -> SwitchWatch {
        self.sw.watch.clone()
    }

    /// A job's memory at its last sample (every `sample_interval`, between
    /// switches): resident anonymous bytes and bytes in swap (None where
    /// the cgroup does not count swap). None for a job that has no
    /// process here (not started, ended, or adopted).
    pub fn memory(&self, job: JobId) -> Option<(u64, Option<u64>)> {
        let j = self.jobs.runs.get(job)?;
        j.proc.as_ref()?;
        Some((j.last.anon_bytes, j.last.swap_bytes))
    }

    /// The share of its time since it first started that a job has run
    /// (thawed): its share of the node's turns. None before it starts.
    pub fn run_share(&self, job: JobId) -> Option<f64> {
        let j = self.jobs.runs.get(job)?;
        let now = self.now();
        let since = Duration::from_secs_f64(j.result.start_s?);
        let ran = j.ran
            + j.running_since
                .map_or(Duration::ZERO, |s| now.saturating_sub(s));
        let life = now.saturating_sub(since).as_secs_f64();
        Some(if life > 0.0 {
            (ran.as_secs_f64() / life).min(1.0)
        } else {
            1.0
        })
    }

    /// Time on the node's clock (since it was set up): switches' `at_s`
    /// and the policy's wake-ups are on it.
    pub fn elapsed(&self) -> Duration {
        self.now()
    }

    /// End the node: a last sample, running jobs' intervals closed, jobs
    /// still alive marked stopped and killed, every cgroup removed.
    pub fn finish(mut self) -> NodeReport {
        let end = self.now();
        // The run is over: what the jobs measured is of no use to the policy.
        let _ = self.sample(end);
        self.jobs.close(end);
        let Node {
            env,
            jobs,
            sw,
            sampling,
            ..
        } = self;
        let Jobs {
            runs,
            teardown,
            timeline,
            ..
        } = jobs;
        drop(teardown);
        let vm_end = env.counters.vmstat().unwrap_or(sampling.vm_last);
        NodeReport {
            jobs: runs.into_values().map(|j| j.result).collect(),
            timeline,
            switches: sw.done,
            samples: sampling.samples,
            swap_in_pages: vm_end.pswpin.saturating_sub(sampling.vm_start.pswpin),
            swap_out_pages: vm_end.pswpout.saturating_sub(sampling.vm_start.pswpout),
            end,
        }
    }

    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Carry out actions in order. Actions that stop or restart jobs form a
    /// switch, timed as one; the policy hears of it as `SwitchDone`, and of
    /// jobs that could not start as `JobFinished`, which may bring more
    /// actions.
    fn carry_out(&mut self, actions: Vec<Action>) -> Result<()> {
        let mut queue: VecDeque<Action> = actions.into();
        while !queue.is_empty() {
            let batch: Vec<Action> = queue.drain(..).collect();
            let parts = NodeParts {
                env: &self.env,
                jobs: &mut self.jobs,
                sampling: &mut self.sampling,
                state: self.sched.state(),
                t0: self.t0,
            };
            let carried = self.sw.carry_out(batch, parts)?;
            if let Some(took) = carried.switch {
                queue.extend(self.sched.handle(self.now(), Event::SwitchDone { took }));
            }
            for job in carried.failed {
                let now = self.now();
                self.jobs.finish_unstarted(job, now);
                queue.extend(self.sched.handle(now, Event::JobFinished(job)));
            }
        }
        Ok(())
    }

    /// Collect every job whose first process has exited (an adopted job:
    /// whose group is empty).
    fn reap(&mut self) -> Result<()> {
        for job in self.jobs.runs.ids() {
            let Some(exit) = self.jobs.exited(&self.env, job) else {
                continue;
            };
            let now = self.now();
            self.jobs
                .finish_job(&self.env, job, exit, now, &self.sw.done);
            let actions = self.sched.handle(now, Event::JobFinished(job));
            self.carry_out(actions)?;
        }
        Ok(())
    }

    /// Take the sample that is due, if one is: the jobs' counters (and the
    /// events they bring), and the node's memory pressure.
    fn sample_if_due(&mut self) -> Result<()> {
        let now = self.now();
        if now < self.sampling.next() {
            return Ok(());
        }
        for event in self.sample(now) {
            let actions = self.sched.handle(self.now(), event);
            self.carry_out(actions)?;
        }
        self.sampling
            .show_progress(&self.env, self.sched.state(), self.now());
        if let Some(event) = self.sampling.pressure_began() {
            let actions = self.sched.handle(now, event);
            self.carry_out(actions)?;
        }
        self.sampling.taken(now);
        Ok(())
    }

    fn sample(&mut self, now: Duration) -> Vec<Event> {
        let pool = (&self.sw.engine.pool, self.sw.engine.pool_memory);
        self.sampling.sample(
            &self.env,
            &mut self.jobs.runs,
            &mut self.jobs.account,
            self.sched.state(),
            pool,
            now,
        )
    }

    /// Count each running job's messages over the last period and tell the
    /// policy, when dynamic coscheduling is on and a count is due.
    fn traffic_if_due(&mut self) -> Result<()> {
        let now = self.now();
        let Some(t) = self.traffic.as_mut() else {
            return Ok(());
        };
        let events = t.count_if_due(&self.env, &self.jobs.runs, self.sched.state(), now);
        for event in events {
            let actions = self.sched.handle(now, event);
            self.carry_out(actions)?;
        }
        Ok(())
    }
}
