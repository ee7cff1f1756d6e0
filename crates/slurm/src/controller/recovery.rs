//! Taking jobs back, and Slurm squared with the policy: a restarted
//! controller's jobs of the run partition ([`Controller::take_back`]), an
//! administrator's suspends ([`Controller::admin_suspends`]), the jobs
//! that run outside their turn or stay suspended in it
//! ([`Controller::reconcile`]), the controller's mark on the jobs it
//! suspends ([`Controller::suspend`], [`Controller::resume`]) and the jobs
//! it lets go on its way out.

use super::Controller;
use crate::slurm_json::{self, Job};
use crate::slurmctl;
use crate::wire::{HeldJob, Request, Response, SlurmJob, Step};
use anyhow::{bail, Context, Result};
use memgang_core::{Action, Event, JobId, JobStatus, NodeId, PageOutPlan};
use std::collections::{BTreeMap, BTreeSet};

impl Controller {
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
    pub(super) fn take_back(&mut self, queue: &[Job]) -> bool {
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
    pub(super) fn admin_suspends(&mut self, queue: &[Job]) -> Vec<Action> {
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
    pub(super) fn suspend(&mut self, ids: &[u32]) -> Result<()> {
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
    pub(super) fn resume(&mut self, ids: &[u32]) -> Result<()> {
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
    pub(super) fn reconcile(&mut self, actions: &[Action]) {
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

    /// On the way out: no job this controller stopped (or took back
    /// stopped) stays stopped.
    pub(super) fn let_go(&mut self) {
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
