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
//!
//! In rooms: the loop and the policy's jobs here, a switch carried out in
//! `switch`, taking jobs back and squaring Slurm with the policy in
//! `recovery`.

mod recovery;
mod switch;

use crate::agents::Agents;
use crate::slurm_json::{self, Job};
use crate::slurmctl::{self, JobInfo};
use crate::wire::{Request, Response, SwitchReport};
use anyhow::{bail, Context, Result};
use memgang_core::{
    Action, Cluster, Event, JobId, JobSpec, JobStatus, Node, NodeId, PolicyKind, Scheduler,
    Switching,
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
}

/// Whether `squeue`'s text (`text`) shows the jobs of a JSON read
/// (`json`), each as it was: then nothing the controller reads changed.
fn same_jobs(json: &[Job], mut text: Vec<JobInfo>) -> bool {
    let mut seen: Vec<&JobInfo> = json.iter().map(|j| &j.info).collect();
    seen.sort_by_key(|j| j.id);
    text.sort_by_key(|j| j.id);
    seen.len() == text.len() && seen.iter().zip(&text).all(|(a, b)| *a == b)
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
