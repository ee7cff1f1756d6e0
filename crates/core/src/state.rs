//! The scheduler's view of the world at one instant. Policies read it; only
//! the [`Scheduler`](crate::Scheduler) changes it.
//!
//! Jobs may be submitted while the run goes on and retired once finished
//! (see [`Scheduler::submit`](crate::Scheduler::submit) and
//! [`Scheduler::retire`](crate::Scheduler::retire)), so that an executor
//! replaying a long trace holds only the jobs alive at once.

use crate::model::{Cluster, JobId, JobSpec, NodeId, Time};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};

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

/// Marks a retired job in [`State::slot_of`].
const RETIRED: u32 = u32::MAX;
/// `slot_of` is halved once it is longer than twice the jobs held plus
/// this: the simulator, which retires jobs in about the order they came,
/// seldom meets it; a service with a job held long meets it every few
/// thousand jobs.
const SPARSE_SLACK: usize = 1024;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub(crate) now: Time,
    pub(crate) cluster: Cluster,
    /// The jobs held: in submission order until some are retired (a retired
    /// job's slot is taken by the last one).
    pub(crate) jobs: Vec<JobState>,
    /// `slot_of[id - base]` is the job's index in `jobs`, or `RETIRED`. Four
    /// bytes per job between the oldest held and the newest, so a job that
    /// runs for long does not keep the others' states alive; and when
    /// that stretch is mostly retired (a job held for days while
    /// thousands pass, in a service), the held jobs of its older half move
    /// to `older` and the half goes: at most about twice the jobs held,
    /// plus [`SPARSE_SLACK`].
    slot_of: VecDeque<u32>,
    base: u32,
    /// Slots of held jobs older than `base`.
    #[serde(default)]
    older: HashMap<u32, u32>,
    /// Jobs submitted and not finished.
    pub(crate) unfinished: usize,
    /// Running jobs on each node, and the idle nodes, kept as jobs start,
    /// stop and end when the policy reads them (`Policy::reads_node_load`),
    /// so that asking which nodes are idle or least loaded costs the nodes,
    /// not every job alive (a long archive trace queues tens of thousands:
    /// `git log -- docs/sim.md`). When not kept, the answers are counted from the
    /// running jobs.
    running_on: Option<RunningCounts>,
}

/// Running jobs per node, and how many nodes have none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct RunningCounts {
    per_node: Vec<u32>,
    idle: usize,
}

impl State {
    pub fn new(cluster: Cluster, specs: Vec<JobSpec>) -> Self {
        let mut state = State {
            now: Time::ZERO,
            jobs: Vec::with_capacity(specs.len()),
            slot_of: VecDeque::with_capacity(specs.len()),
            base: 0,
            older: HashMap::new(),
            unfinished: 0,
            running_on: None,
            cluster,
        };
        for spec in specs {
            state.push(spec);
        }
        state
    }

    /// Add a job, waiting for its arrival; ids follow submission order.
    pub(crate) fn push(&mut self, spec: JobSpec) -> JobId {
        let id = JobId(self.base + self.slot_of.len() as u32);
        self.slot_of.push_back(self.jobs.len() as u32);
        self.jobs.push(JobState {
            id,
            spec,
            status: JobStatus::Waiting,
            nodes: Vec::new(),
            started_at: None,
            finished_at: None,
        });
        self.unfinished += 1;
        id
    }

    /// Forget a finished job, returning its last state.
    pub(crate) fn remove(&mut self, id: JobId) -> JobState {
        let slot = self.slot(id);
        assert_eq!(
            self.jobs[slot].status,
            JobStatus::Finished,
            "only finished jobs can be retired"
        );
        let gone = self.jobs.swap_remove(slot);
        if let Some(moved) = self.jobs.get(slot) {
            let moved = moved.id;
            self.set_slot(moved, slot as u32);
        }
        self.set_slot(id, RETIRED);
        while self.slot_of.front() == Some(&RETIRED) {
            self.slot_of.pop_front();
            self.base += 1;
        }
        if self.slot_of.len() > 2 * self.jobs.len() + SPARSE_SLACK {
            // The held jobs of the older half keep their slots by id.
            let half = self.slot_of.len() / 2;
            for (k, s) in self.slot_of.drain(..half).enumerate() {
                if s != RETIRED {
                    self.older.insert(self.base + k as u32, s);
                }
            }
            self.base += half as u32;
        }
        gone
    }

    /// Job `id`'s slot in `jobs` is now `slot` (RETIRED: gone).
    fn set_slot(&mut self, id: JobId, slot: u32) {
        if id.0 < self.base {
            if slot == RETIRED {
                self.older.remove(&id.0);
            } else {
                self.older.insert(id.0, slot);
            }
        } else {
            self.slot_of[(id.0 - self.base) as usize] = slot;
        }
    }

    fn slot(&self, id: JobId) -> usize {
        let slot = match id.0.checked_sub(self.base) {
            Some(k) => self.slot_of.get(k as usize).copied(),
            None => self.older.get(&id.0).copied(),
        }
        .filter(|s| *s != RETIRED);
        match slot {
            Some(s) => s as usize,
            None => panic!("job {} is retired or was never submitted", id.0),
        }
    }

    /// Keep running counts per node from now on (set before any job runs).
    pub(crate) fn keep_node_load(&mut self) {
        let counts = self.counts().into_owned();
        let idle = counts.iter().filter(|c| **c == 0).count();
        self.running_on = Some(RunningCounts {
            per_node: counts,
            idle,
        });
    }

    /// Change a job's status, keeping the running counts per node; a job
    /// that starts has its nodes set first.
    pub(crate) fn set_status(&mut self, id: JobId, status: JobStatus) {
        let slot = self.slot(id);
        let was = std::mem::replace(&mut self.jobs[slot].status, status);
        let Some(running_on) = self.running_on.as_mut() else {
            return;
        };
        let delta = match (was == JobStatus::Running, status == JobStatus::Running) {
            (false, true) => 1i32,
            (true, false) => -1,
            _ => return,
        };
        for n in &self.jobs[slot].nodes {
            let count = &mut running_on.per_node[n.0 as usize];
            if delta > 0 {
                running_on.idle -= usize::from(*count == 0);
                *count += 1;
            } else {
                *count -= 1;
                running_on.idle += usize::from(*count == 0);
            }
        }
    }

    pub(crate) fn job_mut(&mut self, id: JobId) -> &mut JobState {
        let slot = self.slot(id);
        &mut self.jobs[slot]
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The jobs held: every job submitted, in submission order, unless some
    /// were retired (then in no particular order).
    pub fn jobs(&self) -> &[JobState] {
        &self.jobs
    }

    /// A job submitted and not retired; panics otherwise.
    pub fn job(&self, id: JobId) -> &JobState {
        &self.jobs[self.slot(id)]
    }

    pub fn with_status(&self, status: JobStatus) -> impl Iterator<Item = &JobState> {
        self.jobs.iter().filter(move |j| j.status == status)
    }

    /// Every job submitted so far has finished.
    pub fn all_finished(&self) -> bool {
        self.unfinished == 0
    }

    /// Running jobs per node: kept, or counted now.
    fn counts(&self) -> std::borrow::Cow<'_, [u32]> {
        match &self.running_on {
            Some(c) => std::borrow::Cow::Borrowed(&c.per_node),
            None => {
                let mut c = vec![0; self.cluster.nodes.len()];
                for j in self.with_status(JobStatus::Running) {
                    for n in &j.nodes {
                        c[n.0 as usize] += 1;
                    }
                }
                std::borrow::Cow::Owned(c)
            }
        }
    }

    /// Nodes on which no job is running right now.
    pub fn idle_nodes(&self) -> Vec<NodeId> {
        let counts = self.counts();
        self.cluster
            .nodes
            .iter()
            .filter(|n| counts[n.id.0 as usize] == 0)
            .map(|n| n.id)
            .collect()
    }

    /// How many nodes have no running job.
    pub fn idle_node_count(&self) -> usize {
        match &self.running_on {
            Some(c) => c.idle,
            None => self.counts().iter().filter(|c| **c == 0).count(),
        }
    }

    /// Running jobs on each node right now, indexed by node id.
    pub fn running_per_node(&self) -> std::borrow::Cow<'_, [u32]> {
        self.counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Cluster;
    use std::time::Duration;

    fn spec(name: String) -> JobSpec {
        JobSpec {
            name,
            ranks: 1,
            memory_bytes: None,
            arrival: Duration::ZERO,
            placed: None,
        }
    }

    /// A job held while thousands come and go keeps its slot, and the
    /// index over ids stays within about twice the jobs held: nothing
    /// grows with the jobs gone.
    #[test]
    fn a_long_held_job_keeps_the_index_small() {
        let mut st = State::new(Cluster::uniform(1, 1, 1), Vec::new());
        let long = st.push(spec("long".into()));
        let mut held = Vec::new();
        for i in 0..20_000u32 {
            let id = st.push(spec(format!("j{i}")));
            held.push(id);
            // Three alive at a time beside the long one, retired in an
            // order that is not theirs.
            if held.len() > 3 {
                let gone = held.remove(i as usize % 3);
                st.job_mut(gone).status = JobStatus::Finished;
                st.remove(gone);
            }
            assert!(st.slot_of.len() <= 2 * st.jobs.len() + SPARSE_SLACK + 1);
        }
        assert_eq!(st.job(long).spec.name, "long");
        for id in &held {
            assert_eq!(st.job(*id).id, *id);
        }
        st.job_mut(long).status = JobStatus::Finished;
        assert_eq!(st.remove(long).spec.name, "long");
        assert!(st.older.is_empty());
        assert_eq!(st.jobs().len(), held.len());
    }
}
