//! The controller's switch: a batch of the policy's actions carried out
//! with Slurm (suspend, start, resume) and each node's agent (its steps),
//! one method per part: the steps of each node ([`Plan`]), the check
//! before anything moves, the page-ins that decide which jobs resume, the
//! starts, the switch's record; and the jobs held after a refusal or a
//! failure, retried at every poll.

use super::{Controller, SwitchRecord};
use crate::slurmctl;
use crate::wire::{Request, Response, SlurmJob, Step, SwitchReport};
use anyhow::{bail, Result};
use memgang_core::{Action, Event, JobId, JobStatus, PageInPlan};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Each node's answer to a request sent to all at once.
type Reports = BTreeMap<String, Result<SwitchReport>>;

/// A batch of the policy's actions as Slurm and the agents carry it out.
#[derive(Default)]
struct Plan {
    /// It stops or restarts jobs: a switch.
    is_switch: bool,
    /// Slurm ids of the jobs to suspend.
    suspended: Vec<u32>,
    /// Jobs to page in and resume once every node of theirs has (and a
    /// job taken back, at its first start).
    resumed: Vec<JobId>,
    /// Jobs to start.
    starts: Vec<JobId>,
    /// Each node's steps, in the policy's order.
    steps: BTreeMap<String, Vec<Step>>,
    /// Each node's incoming jobs with their declared memory there: what
    /// the check before the switch asks about.
    incoming: BTreeMap<String, Vec<(SlurmJob, u64)>>,
}

impl Controller {
    /// Carry out the policy's actions, batch after batch: what the policy
    /// answers (to a switch's end, a job that could not start) is the next
    /// batch.
    pub(super) fn carry_out(&mut self, actions: Vec<Action>) -> Result<()> {
        let mut queue = actions;
        while !queue.is_empty() {
            let batch = std::mem::take(&mut queue);
            queue = self.carry_out_batch(&batch);
        }
        Ok(())
    }

    /// One batch: a switch is checked on every node first (refused, its
    /// outgoing jobs stop and its incoming ones are held), then the
    /// outgoing jobs are suspended, every node's steps run at once, and a
    /// job resumes once every one of its nodes paged it in. Returns the
    /// policy's answers.
    fn carry_out_batch(&mut self, batch: &[Action]) -> Vec<Action> {
        let began = Instant::now();
        let at = self.now();
        let plan = self.plan(batch);
        if plan.is_switch {
            tracing::info!(
                "switch begins: out {:?} in {:?}",
                plan.suspended,
                plan.resumed
                    .iter()
                    .chain(&plan.starts)
                    .map(|j| self.slurm[j.index()])
                    .collect::<Vec<_>>()
            );
            if let Some(msg) = self.refused(plan.incoming.clone()) {
                self.hold_refused(&plan, &msg);
                let took = began.elapsed();
                return self.sched.handle(self.now(), Event::SwitchDone { took });
            }
            if let Err(e) = self.suspend(&plan.suspended) {
                tracing::warn!("suspending {:?}: {e:#}", plan.suspended);
            }
        }
        let reports = self.per_node(plan.steps, |v| Request::Switch { steps: v });
        let go = self.paged_in(&plan.resumed, &reports);
        let resumed = self.resume_paged_in(&go);
        let mut answers = self.start(plan.starts);
        if plan.is_switch {
            let took = began.elapsed();
            self.record_switch(at, took, plan.suspended, resumed, reports);
            answers.extend(self.sched.handle(self.now(), Event::SwitchDone { took }));
        }
        answers
    }

    /// What the batch asks of Slurm and of each node, in order.
    fn plan(&self, batch: &[Action]) -> Plan {
        let mut plan = Plan {
            is_switch: batch.iter().any(Action::is_switch),
            ..Plan::default()
        };
        for action in batch {
            let job = action.job();
            let sid = self.slurm[job.index()];
            let nodes = self.node_names(job);
            let step = match action {
                // A job taken back: its first start continues it where
                // Slurm runs it, as a resume does.
                Action::Start { .. } if self.taken_back(job) => {
                    plan.resumed.push(job);
                    Some(Step::PageIn {
                        job: sid,
                        plan: PageInPlan::Recorded,
                    })
                }
                Action::Start { .. } => {
                    plan.starts.push(job);
                    None
                }
                Action::Suspend { .. } => {
                    plan.suspended.push(sid);
                    self.node_step(action)
                }
                Action::Resume { .. } => {
                    plan.resumed.push(job);
                    self.node_step(action)
                }
                Action::MakeRoom { from, .. } => {
                    let declared = self.declared_per_node(job);
                    for n in &nodes {
                        let incoming = plan.incoming.entry(n.clone()).or_default();
                        incoming.push((sid, declared));
                    }
                    Some(Step::MakeRoom {
                        job: sid,
                        declared: Some(declared),
                        from: from.iter().map(|v| self.slurm[v.index()]).collect(),
                    })
                }
                // Only dynamic coscheduling boosts (paper 003), and it
                // needs each job's message counts; the controller builds
                // its policy without it (`PolicyKind::build`), so no Boost
                // reaches here.
                Action::Boost { .. } => {
                    tracing::debug!("job {sid}: {action:?} has no dynamic coscheduling on Slurm");
                    None
                }
                Action::Defer { reason, .. } => {
                    tracing::info!("job {sid} waits: {reason}");
                    None
                }
                Action::Protect { .. } | Action::WriteBack { .. } | Action::PageIn { .. } => {
                    self.node_step(action)
                }
            };
            if let Some(step) = step {
                for n in &nodes {
                    plan.steps.entry(n.clone()).or_default().push(step.clone());
                }
            }
        }
        plan
    }

    /// `action`'s step on each of its nodes now, by Slurm job.
    fn node_step(&self, action: &Action) -> Option<Step> {
        let step = action.node_step(self.now())?;
        Some(step.map(|j| self.slurm[j.index()]))
    }

    /// Refuse before anything moves: a full swap device is said now, not
    /// found out by the OOM killer. Why, if a node refused.
    fn refused(&self, incoming: BTreeMap<String, Vec<(SlurmJob, u64)>>) -> Option<String> {
        let refusals = self.per_node(incoming, |v| Request::Check { incoming: v });
        let refused: Vec<String> = refusals
            .into_iter()
            .filter_map(|(n, r)| r.err().map(|e| format!("{n}: {e}")))
            .collect();
        (!refused.is_empty()).then(|| format!("switch refused: {}", refused.join("; ")))
    }

    /// A refused switch: the outgoing jobs stop as the policy said; nothing
    /// is paged and the incoming ones wait, stopped, until their nodes
    /// accept (retried at every poll, [`retry_held`](Self::retry_held)).
    fn hold_refused(&mut self, plan: &Plan, msg: &str) {
        tracing::error!("{msg}");
        if let Err(e) = self.suspend(&plan.suspended) {
            tracing::warn!("suspending {:?}: {e:#}", plan.suspended);
        }
        for job in &plan.resumed {
            self.held.insert(*job);
            // `stopped`: the reason keeps the controller's mark.
            slurmctl::comment(self.slurm[job.index()], &format!("stopped: {msg}"));
        }
        for job in &plan.starts {
            self.held.insert(*job);
        }
    }

    /// The incoming jobs every node of theirs paged in; the others stay
    /// stopped and held, with why in their Slurm record.
    fn paged_in(&mut self, resumed: &[JobId], reports: &Reports) -> Vec<JobId> {
        let failed: BTreeSet<&String> = reports
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(n, _)| n)
            .collect();
        let mut go = Vec::new();
        for job in resumed {
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
        go
    }

    /// Resume the jobs paged in (a job taken back that Slurm still runs
    /// needs none); their Slurm ids.
    fn resume_paged_in(&mut self, go: &[JobId]) -> Vec<u32> {
        for job in go {
            if self.record.jobs[job.index()].started_s.is_none() {
                let nodes = self.node_names(*job);
                let r = &mut self.record.jobs[job.index()];
                r.started_s = Some(self.t0.elapsed().as_secs_f64());
                r.nodes = nodes;
            }
        }
        let resume_ids: Vec<u32> = go
            .iter()
            .map(|j| self.slurm[j.index()])
            .filter(|sid| self.slurm_state.get(sid).is_none_or(|s| s != "RUNNING"))
            .collect();
        if let Err(e) = self.resume(&resume_ids) {
            tracing::warn!("resuming {resume_ids:?}: {e:#}");
        }
        resume_ids
    }

    /// Start jobs on the nodes the policy chose; the policy's answer to
    /// those that could not start.
    fn start(&mut self, starts: Vec<JobId>) -> Vec<Action> {
        let mut answers = Vec::new();
        for job in starts {
            let sid = self.slurm[job.index()];
            let nodes = self.node_names(job);
            self.record.jobs[job.index()].nodes = nodes.clone();
            self.record.jobs[job.index()].started_s = Some(self.now().as_secs_f64());
            if let Err(e) = slurmctl::start(sid, &self.s.run_partition, &nodes) {
                tracing::error!("job {sid} could not start: {e:#}");
                answers.extend(self.finished(job, "NOT_STARTED"));
            } else {
                tracing::info!("job {sid} started on {}", nodes.join(","));
            }
        }
        answers
    }

    /// The switch said and recorded, with each node's report.
    fn record_switch(
        &mut self,
        at: Duration,
        took: Duration,
        suspended: Vec<u32>,
        resumed: Vec<u32>,
        reports: Reports,
    ) {
        tracing::info!(
            "switch at {:.1}s took {:.2}s: out {suspended:?} in {resumed:?}",
            at.as_secs_f64(),
            took.as_secs_f64(),
        );
        self.record.switches.push(SwitchRecord {
            at_s: at.as_secs_f64(),
            took_s: took.as_secs_f64(),
            suspended,
            resumed,
            nodes: reports
                .into_iter()
                .map(|(n, r)| (n, r.map_err(|e| format!("{e:#}"))))
                .collect(),
        });
    }

    /// Send each node its request, all at once, and wait for every answer
    /// (at most the switch timeout each).
    pub(super) fn per_node<T: Send + 'static>(
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
    pub(super) fn ask<T: Send + 'static>(
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
    pub(super) fn retry_held(&mut self) {
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
                        plan: PageInPlan::Recorded,
                    };
                    let room = Step::MakeRoom {
                        job: sid,
                        declared: Some(declared),
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
}
