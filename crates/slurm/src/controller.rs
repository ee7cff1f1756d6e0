//! The controller: memgang's policy for a Slurm partition, carried out by
//! Slurm (start, stop, continue) and the nodes' agents (memory).
//!
//! A switch, as the core's policy lists it: `scontrol suspend` of the
//! outgoing jobs (every rank on every node stops); a `check` on every node
//! the switch touches (a node whose swap cannot take the page-out refuses,
//! and the switch is skipped before anything moved); then every node's
//! page-out, make-room and page-in at once, one thread per node; and
//! `scontrol resume` of a job only once every one of its nodes has paged
//! it in. A node that fails or does not answer in time leaves its jobs
//! stopped (not resumed half-paged), says so in the log and in the job's
//! Slurm record, and is retried at the next poll.
//!
//! Crash-safe without a state file of its own: Slurm's records hold every
//! fact the controller needs, and hold them in the order they happen. A
//! job in the submit partition was never started; a job in the run
//! partition was started by a controller (one `scontrol update`), and
//! Slurm says whether it runs or is suspended; each agent says what it
//! holds paged out and stopped ([`Request::State`]). A restarted
//! controller ([`run`]) takes every job of the run partition back into
//! the policy's rotation (see [`Controller::take_back`]), so a `kill -9` at
//! any instant leaves no job suspended for good, none lost, none started
//! twice. Each poll also squares Slurm with the policy
//! ([`Controller::reconcile`]): a job that runs outside its turn is
//! suspended, one whose turn it is and that Slurm keeps suspended (a
//! resume that failed) is resumed.
//!
//! An administrator's `scontrol suspend` is told from the controller's by
//! Slurm's record alone: the controller writes its mark
//! ([`slurmctl::STOPPED`]) into a job's `AdminComment` before it suspends
//! the job, and clears it after it resumes the job. A job of the run
//! partition that Slurm has SUSPENDED without the mark is an
//! administrator's ([`Controller::admin_suspends`]): it leaves the
//! rotation until an administrator resumes it. Only the pair SUSPENDED
//! and marked says "the controller's", so every crash window is safe:
//! - killed between the mark and the suspend: the job runs with a mark,
//!   which means nothing on a running job; the next controller clears it
//!   and suspends the job itself if it runs outside its turn;
//! - killed between the suspend and the page-out, or anywhere until the
//!   resume: SUSPENDED and marked, the controller's, taken back and
//!   resumed at its turn;
//! - killed between the resume and the clearing: as the first.
//!
//! Only an administrator's suspend inside those windows (milliseconds, or
//! until a restarted controller's first poll) is taken for the
//! controller's and resumed at the job's turn, as before the mark.

use crate::agents::Agents;
use crate::slurm_json::{self, Job};
use crate::slurmctl::{self, JobInfo};
use crate::wire::{HeldJob, Request, Response, SlurmJob, Step, SwitchReport};
use anyhow::{bail, Context, Result};
use memgang_core::{
    Action, Cluster, Event, JobId, JobSpec, JobStatus, Node, NodeId, PageInPlan, PageOutPlan,
    PolicyKind, Scheduler, Switching,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest the controller goes on a cached `squeue --json` while
/// `squeue`'s text shows no change: the text has no `AdminComment`, so an
/// administrator's edit of it (taking a job out of the rotation by hand,
/// docs/slurm.md) is seen within this. 10 s: one JSON read in 20 polls at
/// the default 500 ms (bench/slurm_poll.sh's 1.1% of a CPU was measured
/// before this refresh, not with it).
const JSON_MAX_AGE: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct Settings {
    /// Where users submit: a DOWN partition, so Slurm queues and never
    /// starts its jobs itself.
    pub partition: String,
    /// Where the controller moves a job to start it: UP, hidden, with
    /// `OverSubscribe=FORCE` so jobs share nodes.
    pub run_partition: String,
    /// The nodes' agents: each at its node's Slurm `NodeAddr`, over TCP
    /// with MUNGE credentials.
    pub agents: Agents,
    pub policy: PolicyKind,
    pub quantum: Duration,
    pub switching: Switching,
    /// How long one node's part of a switch may take before its jobs stay
    /// stopped and the switch is reported failed.
    pub switch_timeout: Duration,
    /// How often Slurm's queue is read: new jobs wait at most this long.
    pub poll: Duration,
    /// End once every job seen has ended and none is queued (benchmarks).
    pub exit_when_idle: bool,
    /// Write the run's record (jobs, switches) as JSON here at the end.
    pub json: Option<PathBuf>,
}

/// What the run did, for benchmarks: times from the controller's start.
#[derive(Debug, Default, Serialize)]
pub struct Record {
    pub nodes: Vec<String>,
    pub jobs: Vec<JobRecord>,
    pub switches: Vec<SwitchRecord>,
    pub makespan_s: f64,
}

#[derive(Debug, Serialize)]
pub struct JobRecord {
    pub slurm_id: u32,
    pub name: String,
    pub nodes: Vec<String>,
    pub arrived_s: f64,
    pub started_s: Option<f64>,
    pub ended_s: Option<f64>,
    pub final_state: String,
    /// Started by an earlier run of the controller, taken back by this one.
    pub taken_back: bool,
}

#[derive(Debug, Serialize)]
pub struct SwitchRecord {
    pub at_s: f64,
    pub took_s: f64,
    pub suspended: Vec<u32>,
    pub resumed: Vec<u32>,
    /// Per node: what its agent did, or why it failed.
    pub nodes: BTreeMap<String, Result<SwitchReport, String>>,
}

struct Controller {
    s: Settings,
    nodes: Vec<String>,
    sched: Scheduler,
    /// Core id -> Slurm id, and back.
    slurm: Vec<u32>,
    core: BTreeMap<u32, JobId>,
    /// Jobs the policy runs that Slurm keeps stopped: a node failed to page
    /// them in.
    held: BTreeSet<JobId>,
    /// Each job's state in Slurm's last answer.
    slurm_state: BTreeMap<u32, String>,
    /// Slurm's queue as the last `squeue --json` gave it, and when: still
    /// the queue while `squeue`'s text shows the same jobs, for at most
    /// [`JSON_MAX_AGE`] ([`read_queue`](Self::read_queue)).
    last_json: Option<(Instant, Vec<Job>)>,
    /// Jobs whose `AdminComment` carries the controller's mark (Slurm's
    /// last answer, and the controller's own updates since).
    marked: BTreeSet<u32>,
    /// Jobs of the run partition an administrator suspended: out of the
    /// rotation, never resumed by the controller, until an administrator
    /// resumes them.
    admin: BTreeSet<u32>,
    /// Jobs of the run partition on nodes outside the submit partition's:
    /// not this controller's (said once).
    foreign: BTreeSet<u32>,
    t0: Instant,
    record: Record,
}

/// Run until `stop` is set (or, with `exit_when_idle`, until the queue is
/// empty); on the way out every job this controller stopped is resumed,
/// so that none is left suspended without anyone to resume it.
pub fn run(s: Settings, stop: Arc<AtomicBool>) -> Result<Record> {
    let nodes = slurm_json::nodes(&s.partition)?;
    let mut cluster_nodes = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let pool = match s.agents.call(n, &Request::Hello, s.switch_timeout)? {
            Response::Hello { pool_bytes, .. } => pool_bytes,
            r => bail!("the agent of node {n} answered {r:?} to hello"),
        };
        // One rank per node: Slurm places ranks inside a node, memgang
        // decides which nodes' memory a job's turn takes.
        cluster_nodes.push(Node {
            id: NodeId(i as u32),
            cpus: 1,
            memory_bytes: pool,
        });
    }
    let cluster = Cluster {
        nodes: cluster_nodes,
    };
    let policy = s.policy.build(s.quantum, s.switching);
    tracing::info!(
        "memgang on Slurm: partition {} ({} nodes: {}), policy {} q = {} switch {}",
        s.partition,
        nodes.len(),
        nodes.join(","),
        s.policy,
        humantime::format_duration(s.quantum),
        s.switching
    );
    let mut c = Controller {
        record: Record {
            nodes: nodes.clone(),
            ..Record::default()
        },
        s,
        nodes,
        sched: Scheduler::new(cluster, Vec::new(), policy),
        slurm: Vec::new(),
        core: BTreeMap::new(),
        held: BTreeSet::new(),
        slurm_state: BTreeMap::new(),
        last_json: None,
        marked: BTreeSet::new(),
        admin: BTreeSet::new(),
        foreign: BTreeSet::new(),
        t0: Instant::now(),
    };
    let result = c.main_loop(&stop);
    c.let_go();
    c.record.makespan_s = c
        .record
        .jobs
        .iter()
        .filter_map(|j| j.ended_s)
        .fold(0.0, f64::max);
    if let Some(path) = &c.s.json {
        std::fs::write(path, serde_json::to_vec_pretty(&c.record)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    result.map(|()| c.record)
}

impl Controller {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Slurm's jobs of both partitions, each one's state kept for
    /// [`reconcile`](Self::reconcile). Every poll first asks `squeue` for
    /// its text, which costs half the CPU of `--json` (22.05's `--json`
    /// prints every job slurmctld knows, whatever the filter;
    /// bench/results/slurm_poll-20261129): while the text shows every job
    /// as the last JSON read did (id, state, nodes, memory, partition,
    /// name), that read is still the queue. Any difference, or a text
    /// that fails to parse, reads the JSON again.
    fn read_queue(&mut self) -> Result<Vec<Job>> {
        let parts = [self.s.partition.as_str(), self.s.run_partition.as_str()];
        let unchanged = self.last_json.as_ref().is_some_and(|(at, last)| {
            at.elapsed() < JSON_MAX_AGE
                && slurmctl::jobs(&parts).is_ok_and(|text| same_jobs(last, text))
        });
        let queue = match (&self.last_json, unchanged) {
            (Some((_, last)), true) => last.clone(),
            _ => {
                let queue = slurm_json::jobs(&parts)?;
                self.last_json = Some((Instant::now(), queue.clone()));
                queue
            }
        };
        self.slurm_state = queue
            .iter()
            .map(|j| (j.info.id, j.info.state.clone()))
            .collect();
        self.marked = queue
            .iter()
            .filter(|j| slurmctl::is_marked(&j.admin_comment))
            .map(|j| j.info.id)
            .collect();
        Ok(queue)
    }

    fn main_loop(&mut self, stop: &AtomicBool) -> Result<()> {
        let mut seen_any = !self.core.is_empty();
        while !stop.load(Ordering::Relaxed) {
            let queue = match self.read_queue() {
                Ok(q) => q,
                Err(e) => {
                    // slurmctld restarting or busy: nothing is decided
                    // until it answers again.
                    tracing::warn!("reading Slurm's queue: {e:#}; trying again");
                    std::thread::sleep(self.s.poll);
                    continue;
                }
            };
            let mut actions = self.admin_suspends(&queue);
            seen_any |= self.take_back(&queue);
            for j in &queue {
                let j = &j.info;
                if !self.core.contains_key(&j.id) && j.partition == self.s.partition && !j.is_over()
                {
                    self.submit(j, j.nodes.max(1), None)
                        .expect("a job without placed nodes is refused by nothing");
                    seen_any = true;
                }
            }
            for (&sid, &job) in &self.core.clone() {
                let status = self.sched.state().job(job).status;
                if !matches!(status, JobStatus::Running | JobStatus::Suspended) {
                    continue;
                }
                let info = queue.iter().find(|j| j.info.id == sid);
                if info.is_none_or(|j| j.info.is_over()) {
                    let state = info.map_or("GONE".to_string(), |i| i.info.state.clone());
                    actions.extend(self.finished(job, &state));
                }
            }
            actions.extend(self.sched.advance(self.now()));
            self.reconcile(&actions);
            self.carry_out(actions)?;
            self.retry_held();
            let alive = self
                .core
                .values()
                .any(|&j| !matches!(self.sched.state().job(j).status, JobStatus::Finished));
            if self.s.exit_when_idle && seen_any && !alive && self.admin.is_empty() {
                return Ok(());
            }
            std::thread::sleep(self.s.poll);
        }
        Ok(())
    }

    /// A job joins the policy's queue: `ranks` nodes of its memory, on the
    /// nodes `placed` if it runs there already (taken back).
    fn submit(
        &mut self,
        j: &JobInfo,
        ranks: u32,
        placed: Option<Vec<NodeId>>,
    ) -> Result<JobId, String> {
        let taken_back = placed.is_some();
        let spec = JobSpec {
            name: j.id.to_string(),
            ranks,
            memory_bytes: j.mem_per_node.map(|m| m * ranks as u64),
            arrival: self.now(),
            placed,
        };
        let id = self.sched.submit(spec)?;
        debug_assert_eq!(id.index(), self.slurm.len());
        self.slurm.push(j.id);
        self.core.insert(j.id, id);
        self.record.jobs.push(JobRecord {
            slurm_id: j.id,
            name: j.name.clone(),
            nodes: Vec::new(),
            arrived_s: self.now().as_secs_f64(),
            started_s: None,
            ended_s: None,
            final_state: String::new(),
            taken_back,
        });
        if !taken_back {
            tracing::info!("job {} ({}) queued: {} nodes", j.id, j.name, ranks);
        }
        Ok(id)
    }

    /// Whether an earlier run of the controller started `job` (or an
    /// administrator resumed it): the policy places it where Slurm runs it,
    /// and its first start continues it there (page-in, resume).
    fn taken_back(&self, job: JobId) -> bool {
        self.sched.state().job(job).spec.placed.is_some()
    }

    /// A job of the run partition this controller does not know was
    /// started by an earlier run of it (at its start: every job there).
    /// Each joins the policy's rotation as a job just queued, placed on the
    /// nodes Slurm runs it on (`JobSpec::placed`: the policy counts it
    /// there from its first round, not on nodes of its own choice); the
    /// policy's first start of it pages it in and resumes it if Slurm has
    /// it suspended, and [`reconcile`](Self::reconcile) suspends the ones
    /// that run outside their turn. The running ones are queued first, so
    /// that the policy's first turn (in queue order) goes to them and they
    /// go on without a stop. A job moved there whose nodes Slurm has not
    /// chosen yet (no node list) is taken once it has them. True if any was
    /// taken.
    fn take_back(&mut self, queue: &[Job]) -> bool {
        let mut theirs: Vec<&Job> = queue
            .iter()
            .filter(|j| {
                j.info.partition == self.s.run_partition
                    && !j.info.is_over()
                    && !self.core.contains_key(&j.info.id)
                    && !self.foreign.contains(&j.info.id)
                    && !self.admin.contains(&j.info.id)
                    && (!j.node_list.is_empty() || !j.required_nodes.is_empty())
            })
            .collect();
        if theirs.is_empty() {
            return false;
        }
        theirs.sort_by_key(|j| (j.info.state == "SUSPENDED", j.info.id));
        let held = self.agent_states();
        for j in theirs {
            let Some(nodes) = self.slurm_nodes(j) else {
                tracing::warn!(
                    "job {} in {} runs on {:?}, not on nodes of {}: left to Slurm",
                    j.info.id,
                    self.s.run_partition,
                    j.node_list,
                    self.s.partition
                );
                self.foreign.insert(j.info.id);
                continue;
            };
            let placed = nodes
                .iter()
                .filter_map(|n| self.nodes.iter().position(|m| m == n))
                .map(|i| NodeId(i as u32))
                .collect();
            if let Err(e) = self.submit(&j.info, nodes.len() as u32, Some(placed)) {
                tracing::warn!("job {} cannot be taken back: {e}; left to Slurm", j.info.id);
                self.foreign.insert(j.info.id);
                continue;
            }
            let on: Vec<String> = nodes
                .iter()
                .map(|n| describe_held(n, held.get(n), j.info.id))
                .collect();
            tracing::info!(
                "job {} ({}) taken back: {} on {}",
                j.info.id,
                j.info.name,
                j.info.state,
                on.join("; ")
            );
        }
        true
    }

    /// The nodes Slurm runs `j` on (or was told to), if they are all of the
    /// submit partition's.
    fn slurm_nodes(&self, j: &Job) -> Option<Vec<String>> {
        let list = if j.node_list.is_empty() {
            &j.required_nodes
        } else {
            &j.node_list
        };
        let nodes = slurm_json::expand_hostlist(list).unwrap_or_default();
        (!nodes.is_empty() && nodes.iter().all(|n| self.nodes.contains(n))).then_some(nodes)
    }

    /// Jobs of the run partition that Slurm has SUSPENDED without the
    /// controller's mark: an administrator suspended them (`scontrol
    /// suspend`). Each leaves the rotation: the policy hears it finished,
    /// so its turn and its nodes' memory go to the others, and it is paged
    /// out on its nodes, in bulk, now, so that the jobs that get its memory
    /// find it free rather than have the kernel reclaim it from the pool
    /// while they run (its record kept for its page-in when it returns).
    /// The controller never resumes it (see [`resume`](Self::resume)).
    /// Once an administrator resumes it, it is a running job the
    /// controller does not know, taken back into the rotation as after a
    /// restart ([`take_back`](Self::take_back)), and suspended (marked) if
    /// it runs outside its turn. Also clears the controller's comments
    /// from running jobs: a mark left by a crash between a mark and its
    /// suspend or a resume and its clearing, or by an administrator's
    /// resume of a job the controller stopped, and what it said of a job
    /// an administrator suspended. Returns the policy's answer to the
    /// jobs that left.
    fn admin_suspends(&mut self, queue: &[Job]) -> Vec<Action> {
        let mut actions = Vec::new();
        let mut stale = Vec::new();
        let mut out: BTreeMap<String, Vec<Step>> = BTreeMap::new();
        for j in queue {
            let sid = j.info.id;
            if j.info.partition != self.s.run_partition || j.info.is_over() {
                continue;
            }
            // Whatever the controller wrote on a job that runs is over.
            if j.info.state == "RUNNING" && j.admin_comment.starts_with("memgang:") {
                stale.push(sid);
            }
            if j.info.state != "SUSPENDED" || self.marked.contains(&sid) {
                continue;
            }
            let new = self.admin.insert(sid);
            if new {
                tracing::warn!(
                    "job {sid} suspended by an administrator: left out of the rotation until resumed"
                );
                slurmctl::comment(
                    sid,
                    "suspended by an administrator: out of memgang's rotation until resumed (scontrol resume)",
                );
            }
            // A job the controller runs or stopped leaves the policy now; a
            // queued one (taken back, not yet started) once the policy
            // starts it, which resumes nothing (`resume`). One it does not
            // know (a restart found it so) was paged out by an earlier
            // run or is now: its earlier record is kept.
            let (nodes, record) = match self.core.get(&sid) {
                Some(&job) => {
                    let status = self.sched.state().job(job).status;
                    if !matches!(status, JobStatus::Running | JobStatus::Suspended) {
                        continue;
                    }
                    let nodes = self.node_names(job);
                    actions.extend(self.sched.handle(self.now(), Event::JobFinished(job)));
                    self.core.remove(&sid);
                    self.held.remove(&job);
                    self.record.jobs[job.index()].final_state =
                        "SUSPENDED by an administrator".into();
                    (nodes, true)
                }
                None if new && !self.foreign.contains(&sid) => match self.slurm_nodes(j) {
                    Some(nodes) => (nodes, false),
                    None => continue,
                },
                None => continue,
            };
            for n in nodes {
                out.entry(n).or_default().push(Step::PageOut {
                    job: sid,
                    plan: PageOutPlan::Aggressive { record },
                });
            }
        }
        self.admin.retain(|sid| {
            let j = queue.iter().find(|j| j.info.id == *sid);
            let still = j.is_some_and(|j| j.info.state == "SUSPENDED");
            if !still && j.is_some_and(|j| j.info.state == "RUNNING") {
                tracing::info!("job {sid} resumed by an administrator: back in the rotation");
            }
            still
        });
        self.unmark(&stale);
        for (n, r) in self.per_node(out, |v| Request::Switch { steps: v }) {
            if let Err(e) = r {
                tracing::warn!("node {n}: paging out jobs an administrator suspended: {e:#}");
            }
        }
        actions
    }

    /// Suspend jobs as the controller's own: marked first, so that a job
    /// Slurm shows suspended by the controller always carries the mark;
    /// not suspended if the mark could not be written (the next poll's
    /// [`reconcile`](Self::reconcile) tries again).
    fn suspend(&mut self, ids: &[u32]) -> Result<()> {
        slurmctl::mark_stopped(ids).context("marking them as memgang's before the suspend")?;
        self.marked.extend(ids);
        slurmctl::suspend(ids)?;
        for sid in ids {
            self.slurm_state.insert(*sid, "SUSPENDED".into());
        }
        Ok(())
    }

    /// Resume jobs the controller stopped, then clear their mark; never a
    /// job an administrator suspended.
    fn resume(&mut self, ids: &[u32]) -> Result<()> {
        let ids: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|sid| !self.admin.contains(sid))
            .collect();
        slurmctl::resume(&ids)?;
        for sid in &ids {
            self.slurm_state.insert(*sid, "RUNNING".into());
        }
        self.unmark(&ids);
        Ok(())
    }

    /// Clear the controller's comment from jobs that run (a failure is
    /// said; the next poll clears what is left).
    fn unmark(&mut self, ids: &[u32]) {
        match slurmctl::clear_comment(ids) {
            Ok(()) => {
                for sid in ids {
                    self.marked.remove(sid);
                }
            }
            Err(e) => tracing::warn!("clearing memgang's mark from {ids:?}: {e:#}"),
        }
    }

    /// What each agent holds ([`Request::State`]), asked of all at once.
    fn agent_states(&self) -> BTreeMap<String, Result<Vec<HeldJob>>> {
        let requests = self.nodes.iter().map(|n| (n.clone(), Request::State));
        self.ask(requests.collect(), |r| match r {
            Response::State { jobs } => Ok(jobs),
            r => bail!("unexpected answer {r:?}"),
        })
    }

    /// Square Slurm with the policy's decision (`actions` are about to be
    /// carried out): a job Slurm runs while the policy has it stopped or
    /// queued (taken back from an earlier run, or a suspend that failed)
    /// is suspended and paged out; a job the policy runs that Slurm keeps
    /// suspended, not held by a failed node (a resume that failed), is
    /// resumed.
    fn reconcile(&mut self, actions: &[Action]) {
        let acting: BTreeSet<JobId> = actions.iter().map(Action::job).collect();
        let mut stop = Vec::new();
        let mut go = Vec::new();
        for (&sid, &job) in &self.core {
            if acting.contains(&job) {
                continue;
            }
            let status = self.sched.state().job(job).status;
            match (self.slurm_state.get(&sid).map(String::as_str), status) {
                (Some("RUNNING"), JobStatus::Queued | JobStatus::Suspended) => stop.push(job),
                (Some("SUSPENDED"), JobStatus::Running) if !self.held.contains(&job) => {
                    go.push(job)
                }
                _ => {}
            }
        }
        if !stop.is_empty() {
            let ids: Vec<u32> = stop.iter().map(|j| self.slurm[j.index()]).collect();
            tracing::info!("jobs {ids:?} run outside their turn: suspended and paged out");
            match self.suspend(&ids) {
                Ok(()) => {
                    let mut steps: BTreeMap<String, Vec<Step>> = BTreeMap::new();
                    for (job, &sid) in stop.iter().zip(&ids) {
                        for n in self.node_names(*job) {
                            steps.entry(n).or_default().push(Step::PageOut {
                                job: sid,
                                plan: PageOutPlan::Aggressive { record: true },
                            });
                        }
                    }
                    for (n, r) in self.per_node(steps, |v| Request::Switch { steps: v }) {
                        if let Err(e) = r {
                            tracing::warn!("node {n}: paging out {ids:?}: {e:#}");
                        }
                    }
                }
                Err(e) => tracing::warn!("suspending {ids:?}: {e:#}"),
            }
        }
        if !go.is_empty() {
            let ids: Vec<u32> = go.iter().map(|j| self.slurm[j.index()]).collect();
            tracing::info!("jobs {ids:?} are in their turn but suspended: resumed");
            if let Err(e) = self.resume(&ids) {
                tracing::warn!("resuming {ids:?}: {e:#}");
            }
        }
    }

    fn finished(&mut self, job: JobId, state: &str) -> Vec<Action> {
        let now = self.now();
        let r = &mut self.record.jobs[job.index()];
        r.ended_s = Some(now.as_secs_f64());
        r.final_state = state.to_string();
        self.held.remove(&job);
        tracing::info!("job {} ended: {state}", self.slurm[job.index()]);
        self.sched.handle(now, Event::JobFinished(job))
    }

    /// The nodes `job` runs on: the policy's, or before the policy starts
    /// a job taken back, Slurm's (where it is placed).
    fn node_names(&self, job: JobId) -> Vec<String> {
        let j = self.sched.state().job(job);
        let ids = match &j.spec.placed {
            Some(placed) if j.nodes.is_empty() => placed,
            _ => &j.nodes,
        };
        ids.iter()
            .map(|n| self.nodes[n.0 as usize].clone())
            .collect()
    }

    /// Declared memory of `job` on each of its nodes.
    fn declared_per_node(&self, job: JobId) -> u64 {
        let j = self.sched.state().job(job);
        j.spec.memory_bytes.unwrap_or(0) / j.spec.ranks.max(1) as u64
    }

    fn carry_out(&mut self, actions: Vec<Action>) -> Result<()> {
        let mut queue = actions;
        while !queue.is_empty() {
            let batch = std::mem::take(&mut queue);
            let is_switch = batch.iter().any(Action::is_switch);
            let began = Instant::now();
            let at = self.now();
            let mut suspended = Vec::new();
            let mut resumed = Vec::new();
            let mut starts = Vec::new();
            let mut steps: BTreeMap<String, Vec<Step>> = BTreeMap::new();
            let mut incoming: BTreeMap<String, Vec<(SlurmJob, u64)>> = BTreeMap::new();
            for action in &batch {
                let job = action.job();
                let sid = self.slurm[job.index()];
                let nodes = self.node_names(job);
                let mut each = |step: Step| {
                    for n in &nodes {
                        steps.entry(n.clone()).or_default().push(step.clone());
                    }
                };
                match action {
                    // A job taken back: its first start continues it where
                    // Slurm runs it, as a resume does.
                    Action::Start { .. } if self.taken_back(job) => {
                        resumed.push(job);
                        each(Step::PageIn {
                            job: sid,
                            plan: PageInPlan::Recorded,
                        });
                    }
                    Action::Start { .. } => starts.push(job),
                    Action::Suspend { page_out, .. } => {
                        suspended.push(sid);
                        each(Step::PageOut {
                            job: sid,
                            plan: *page_out,
                        });
                    }
                    Action::Resume { page_in, .. } => {
                        resumed.push(job);
                        each(Step::PageIn {
                            job: sid,
                            plan: *page_in,
                        });
                    }
                    Action::Protect { on, .. } => each(Step::Protect { job: sid, on: *on }),
                    Action::MakeRoom { from, .. } => {
                        let declared = self.declared_per_node(job);
                        for n in &nodes {
                            incoming.entry(n.clone()).or_default().push((sid, declared));
                        }
                        let from = from.iter().map(|v| self.slurm[v.index()]).collect();
                        each(Step::MakeRoom {
                            job: sid,
                            declared,
                            from,
                        });
                    }
                    Action::WriteBack { until, .. } => each(Step::WriteBack {
                        job: sid,
                        window_ms: until.saturating_sub(self.now()).as_millis() as u64,
                    }),
                    Action::PageIn { .. } => each(Step::Prefetch { job: sid }),
                    // Only dynamic coscheduling boosts (paper 003), and it
                    // needs each job's message counts; the controller
                    // builds its policy without it (`PolicyKind::build`),
                    // so no Boost reaches here.
                    Action::Boost { .. } => {
                        tracing::debug!(
                            "job {sid}: {action:?} has no dynamic coscheduling on Slurm"
                        );
                    }
                    Action::Defer { reason, .. } => tracing::info!("job {sid} waits: {reason}"),
                }
            }
            if is_switch {
                tracing::info!(
                    "switch begins: out {suspended:?} in {:?}",
                    resumed
                        .iter()
                        .chain(&starts)
                        .map(|j| self.slurm[j.index()])
                        .collect::<Vec<_>>()
                );
                // Refuse before anything moves: a full swap device is said
                // now, not found out by the OOM killer.
                let refusals = self.per_node(incoming, |v| Request::Check { incoming: v });
                let refused: Vec<String> = refusals
                    .into_iter()
                    .filter_map(|(n, r)| r.err().map(|e| format!("{n}: {e}")))
                    .collect();
                if !refused.is_empty() {
                    // The outgoing jobs stop as the policy said; nothing is
                    // paged and the incoming ones wait, stopped, until
                    // their nodes accept (retried at every poll).
                    let msg = format!("switch refused: {}", refused.join("; "));
                    tracing::error!("{msg}");
                    if let Err(e) = self.suspend(&suspended) {
                        tracing::warn!("suspending {suspended:?}: {e:#}");
                    }
                    for job in &resumed {
                        self.held.insert(*job);
                        // `stopped`: the reason keeps the controller's mark.
                        slurmctl::comment(self.slurm[job.index()], &format!("stopped: {msg}"));
                    }
                    for job in starts {
                        self.held.insert(job);
                    }
                    let took = began.elapsed();
                    queue.extend(self.sched.handle(self.now(), Event::SwitchDone { took }));
                    continue;
                }
                if let Err(e) = self.suspend(&suspended) {
                    tracing::warn!("suspending {suspended:?}: {e:#}");
                }
            }
            let reports = self.per_node(steps, |v| Request::Switch { steps: v });
            let failed: BTreeSet<&String> = reports
                .iter()
                .filter(|(_, r)| r.is_err())
                .map(|(n, _)| n)
                .collect();
            let mut go = Vec::new();
            for job in &resumed {
                let bad: Vec<&String> = self
                    .node_names(*job)
                    .iter()
                    .filter_map(|n| failed.get(n).copied())
                    .collect();
                let sid = self.slurm[job.index()];
                if bad.is_empty() {
                    go.push(*job);
                } else {
                    let why: Vec<String> = bad
                        .iter()
                        .map(|n| format!("{n}: {}", reports[*n].as_ref().err().unwrap()))
                        .collect();
                    let msg = format!(
                        "switch failed on {}; job {sid} stays stopped until they page it in",
                        why.join("; ")
                    );
                    tracing::error!("{msg}");
                    slurmctl::comment(sid, &format!("stopped: {msg}"));
                    self.held.insert(*job);
                }
            }
            for job in &go {
                if self.record.jobs[job.index()].started_s.is_none() {
                    let nodes = self.node_names(*job);
                    let r = &mut self.record.jobs[job.index()];
                    r.started_s = Some(self.t0.elapsed().as_secs_f64());
                    r.nodes = nodes;
                }
            }
            // A job taken back that Slurm still runs needs no resume.
            let resume_ids: Vec<u32> = go
                .iter()
                .map(|j| self.slurm[j.index()])
                .filter(|sid| self.slurm_state.get(sid).is_none_or(|s| s != "RUNNING"))
                .collect();
            if let Err(e) = self.resume(&resume_ids) {
                tracing::warn!("resuming {resume_ids:?}: {e:#}");
            }
            for job in starts {
                let sid = self.slurm[job.index()];
                let nodes = self.node_names(job);
                self.record.jobs[job.index()].nodes = nodes.clone();
                self.record.jobs[job.index()].started_s = Some(self.now().as_secs_f64());
                if let Err(e) = slurmctl::start(sid, &self.s.run_partition, &nodes) {
                    tracing::error!("job {sid} could not start: {e:#}");
                    queue.extend(self.finished(job, "NOT_STARTED"));
                } else {
                    tracing::info!("job {sid} started on {}", nodes.join(","));
                }
            }
            if is_switch {
                let took = began.elapsed();
                tracing::info!(
                    "switch at {:.1}s took {:.2}s: out {suspended:?} in {:?}",
                    at.as_secs_f64(),
                    took.as_secs_f64(),
                    resume_ids
                );
                self.record.switches.push(SwitchRecord {
                    at_s: at.as_secs_f64(),
                    took_s: took.as_secs_f64(),
                    suspended,
                    resumed: resume_ids,
                    nodes: reports
                        .into_iter()
                        .map(|(n, r)| (n, r.map_err(|e| format!("{e:#}"))))
                        .collect(),
                });
                queue.extend(self.sched.handle(self.now(), Event::SwitchDone { took }));
            }
        }
        Ok(())
    }

    /// Send each node its request, all at once, and wait for every answer
    /// (at most the switch timeout each).
    fn per_node<T: Send + 'static>(
        &self,
        work: BTreeMap<String, Vec<T>>,
        req: impl Fn(Vec<T>) -> Request,
    ) -> BTreeMap<String, Result<SwitchReport, anyhow::Error>> {
        let requests = work.into_iter().map(|(node, v)| (node, req(v)));
        let answers = self.ask(requests.collect(), |r| match r {
            Response::Switched(r) => Ok(r),
            Response::Ok => Ok(SwitchReport::default()),
            r => bail!("unexpected answer {r:?}"),
        });
        for (n, r) in &answers {
            for w in r.iter().flat_map(|r| &r.warnings) {
                tracing::warn!("node {n}: {w}");
            }
        }
        answers
    }

    /// Each node's request sent at once, one thread per node; every
    /// answer, read by `answer`, waited for (at most the switch timeout
    /// each).
    fn ask<T: Send + 'static>(
        &self,
        requests: BTreeMap<String, Request>,
        answer: fn(Response) -> Result<T>,
    ) -> BTreeMap<String, Result<T>> {
        let handles: Vec<_> = requests
            .into_iter()
            .map(|(node, req)| {
                let agents = self.s.agents.clone();
                let timeout = self.s.switch_timeout;
                let n = node.clone();
                let h = std::thread::spawn(move || answer(agents.call(&n, &req, timeout)?));
                (node, h)
            })
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the request thread panicked")));
                (n, r)
            })
            .collect()
    }

    /// Jobs the policy runs that Slurm keeps stopped (a node refused or
    /// failed their switch): once every node accepts, page them in (or
    /// start them) and let them go.
    fn retry_held(&mut self) {
        for job in self.held.clone() {
            if self.sched.state().job(job).status != JobStatus::Running {
                self.held.remove(&job);
                continue;
            }
            let sid = self.slurm[job.index()];
            let nodes = self.node_names(job);
            let declared = self.declared_per_node(job);
            let check = nodes
                .iter()
                .map(|n| (n.clone(), vec![(sid, declared)]))
                .collect();
            if self
                .per_node(check, |v| Request::Check { incoming: v })
                .values()
                .any(Result::is_err)
            {
                continue;
            }
            let started = self.record.jobs[job.index()].started_s.is_some() || self.taken_back(job);
            let steps = nodes
                .iter()
                .map(|n| {
                    let page_in = Step::PageIn {
                        job: sid,
                        plan: memgang_core::PageInPlan::Recorded,
                    };
                    let room = Step::MakeRoom {
                        job: sid,
                        declared,
                        from: Vec::new(),
                    };
                    (n.clone(), vec![if started { page_in } else { room }])
                })
                .collect();
            let reports = self.per_node(steps, |v| Request::Switch { steps: v });
            if !reports.values().all(Result::is_ok) {
                continue;
            }
            let go = if started {
                match self.slurm_state.get(&sid).map(String::as_str) {
                    Some("RUNNING") => Ok(()),
                    _ => self.resume(&[sid]),
                }
            } else {
                self.record.jobs[job.index()].nodes = nodes.clone();
                self.record.jobs[job.index()].started_s = Some(self.now().as_secs_f64());
                slurmctl::start(sid, &self.s.run_partition, &nodes)
            };
            match go {
                Ok(()) => {
                    tracing::info!("job {sid}: its nodes took it at last, it runs");
                    self.held.remove(&job);
                }
                Err(e) => tracing::warn!("letting job {sid} go: {e:#}"),
            }
        }
    }

    /// On the way out: no job this controller stopped (or took back
    /// stopped) stays stopped.
    fn let_go(&mut self) {
        let stopped: Vec<u32> = self
            .core
            .iter()
            .filter(|(sid, &j)| {
                let status = self.sched.state().job(j).status;
                status == JobStatus::Suspended
                    || self.held.contains(&j)
                    || (status != JobStatus::Finished
                        && self.slurm_state.get(sid).is_some_and(|s| s == "SUSPENDED"))
            })
            .map(|(&sid, _)| sid)
            .collect();
        if !stopped.is_empty() {
            tracing::info!("resuming {stopped:?} on the way out");
            if let Err(e) = self.resume(&stopped) {
                tracing::error!("resuming {stopped:?} on the way out: {e:#}");
            }
        }
    }
}

/// Whether `squeue`'s text (`text`) shows the jobs of a JSON read
/// (`json`), each as it was: then nothing the controller reads changed.
fn same_jobs(json: &[Job], mut text: Vec<JobInfo>) -> bool {
    let mut seen: Vec<&JobInfo> = json.iter().map(|j| &j.info).collect();
    seen.sort_by_key(|j| j.id);
    text.sort_by_key(|j| j.id);
    seen.len() == text.len() && seen.iter().zip(&text).all(|(a, b)| *a == b)
}

/// What node `node`'s agent holds of job `job`, for the log.
fn describe_held(node: &str, held: Option<&Result<Vec<HeldJob>>>, job: SlurmJob) -> String {
    match held {
        None => node.to_string(),
        Some(Err(e)) => format!("{node} (its agent did not say what it holds: {e:#})"),
        Some(Ok(jobs)) => match jobs.iter().find(|h| h.job == job) {
            None => format!("{node} (nothing of it in the pool)"),
            Some(h) => format!(
                "{node} ({} processes{}, {} in memory, {} on swap)",
                h.processes,
                if h.stopped { ", stopped" } else { "" },
                memgang_core::units::format_bytes(h.resident_bytes),
                h.swap_bytes
                    .map_or("?".to_string(), memgang_core::units::format_bytes)
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeues_text_says_whether_the_last_json_read_still_holds() {
        let mut json =
            slurm_json::parse_jobs(include_str!("../tests/data/squeue-22.05.8.json")).unwrap();
        // Job 5 (--mem-per-cpu): its text line was not captured.
        json.retain(|j| j.info.id != 5);
        // What `squeue -o %i|%T|%D|%m|%P|%j` printed beside that JSON
        // (slurm_json's test), in another order.
        let text = |lines: &[&str]| -> Vec<JobInfo> {
            lines
                .iter()
                .map(|l| slurmctl::parse_job(l).unwrap())
                .collect()
        };
        let now = [
            "4|COMPLETED|1|0|memgang-run|done",
            "6|CANCELLED|1|0|memgang|cancelled",
            "3|SUSPENDED|1|0|memgang-run|susp",
            "1|PENDING|2|120M|memgang|pend a|b",
            "2|RUNNING|2|100M|memgang-run|run",
        ];
        assert!(same_jobs(&json, text(&now)));
        let mut resumed = now;
        resumed[2] = "3|RUNNING|1|0|memgang-run|susp";
        assert!(!same_jobs(&json, text(&resumed)));
        let mut started = now;
        started[3] = "1|PENDING|2|120M|memgang-run|pend a|b";
        assert!(!same_jobs(&json, text(&started)));
        assert!(!same_jobs(&json, text(&now[1..])));
        let more = [&now[..], &["7|PENDING|1|0|memgang|new"]].concat();
        assert!(!same_jobs(&json, text(&more)));
    }
}
