//! The scheduler's view of the world at one instant. Policies read it; only
//! the [`Scheduler`](crate::Scheduler) changes it.

use crate::model::{Cluster, JobId, JobSpec, NodeId, Time};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobStatus {
    /// Submitted with an arrival time that has not come yet.
    Waiting,
    /// Arrived, never started.
    Queued,
    Running,
    Suspended,
    Finished,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    pub id: JobId,
    pub spec: JobSpec,
    pub status: JobStatus,
    /// Nodes the job was started on; empty until it starts.
    pub nodes: Vec<NodeId>,
    pub started_at: Option<Time>,
    pub finished_at: Option<Time>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub(crate) now: Time,
    pub(crate) cluster: Cluster,
    pub(crate) jobs: Vec<JobState>,
}

impl State {
    pub fn new(cluster: Cluster, specs: Vec<JobSpec>) -> Self {
        let jobs = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| JobState {
                id: JobId(i as u32),
                spec,
                status: JobStatus::Waiting,
                nodes: Vec::new(),
                started_at: None,
                finished_at: None,
            })
            .collect();
        State {
            now: Time::ZERO,
            cluster,
            jobs,
        }
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub fn jobs(&self) -> &[JobState] {
        &self.jobs
    }

    pub fn job(&self, id: JobId) -> &JobState {
        &self.jobs[id.index()]
    }

    pub fn with_status(&self, status: JobStatus) -> impl Iterator<Item = &JobState> {
        self.jobs.iter().filter(move |j| j.status == status)
    }

    pub fn all_finished(&self) -> bool {
        self.jobs.iter().all(|j| j.status == JobStatus::Finished)
    }

    /// Nodes on which no job is running right now.
    pub fn idle_nodes(&self) -> Vec<NodeId> {
        let mut busy = vec![false; self.cluster.nodes.len()];
        for j in self.with_status(JobStatus::Running) {
            for n in &j.nodes {
                busy[n.0 as usize] = true;
            }
        }
        self.cluster
            .nodes
            .iter()
            .filter(|n| !busy[n.id.0 as usize])
            .map(|n| n.id)
            .collect()
    }
}
