//! A policy's action as one node carries it out on a job's memory: a
//! switch's step. The runtime's executor makes one of each of its actions
//! ([`Action::node_step`]) and the switch engine carries it out; the Slurm
//! controller makes one per node of the job and sends it to that node's
//! agent (its wire carries `NodeStep<SlurmJob>`), whose switch engine
//! carries it out the same way.

use crate::action::{Action, PageInPlan, PageOutPlan};
use crate::model::{JobId, Time};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One step of a switch on one node, on the memory of a job keyed by `K`
/// (the executor's [`JobId`], a Slurm job id on the agent's wire). A line
/// of JSON on the wire: `{"step":"page_out","job":7,"plan":...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum NodeStep<K> {
    /// Page the stopped job out by `plan` ([`Action::Suspend`]).
    PageOut { job: K, plan: PageOutPlan },
    /// Selective page-out on or off ([`Action::Protect`]).
    Protect { job: K, on: bool },
    /// Free what `job` still needs from the stopped jobs `from`, in order
    /// ([`Action::MakeRoom`]). `declared`: its declared memory on this
    /// node, for a node that holds nothing of it yet (the Slurm agent
    /// before the job's tasks joined); absent, the node's own estimate.
    MakeRoom {
        job: K,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        declared: Option<u64>,
        from: Vec<K>,
    },
    /// Bring the stopped job's memory back by `plan` before it runs again
    /// ([`Action::Resume`]).
    PageIn { job: K, plan: PageInPlan },
    /// Start bringing a stopped job's recorded pages back now, for as much
    /// as the pool has free ([`Action::PageIn`], paper 001's prefetch); it
    /// stays stopped.
    Prefetch { job: K },
    /// Page the running job's pages out in the background over the next
    /// `window` ([`Action::WriteBack`], paper 000 §3.4); whole
    /// milliseconds on the wire (`window_ms`).
    WriteBack {
        job: K,
        #[serde(rename = "window_ms", with = "millis")]
        window: Duration,
    },
}

impl<K> NodeStep<K> {
    pub fn job(&self) -> &K {
        match self {
            NodeStep::PageOut { job, .. }
            | NodeStep::Protect { job, .. }
            | NodeStep::MakeRoom { job, .. }
            | NodeStep::PageIn { job, .. }
            | NodeStep::Prefetch { job }
            | NodeStep::WriteBack { job, .. } => job,
        }
    }

    /// The same step on jobs keyed by `f`'s keys.
    pub fn map<L>(self, mut f: impl FnMut(K) -> L) -> NodeStep<L> {
        match self {
            NodeStep::PageOut { job, plan } => NodeStep::PageOut { job: f(job), plan },
            NodeStep::Protect { job, on } => NodeStep::Protect { job: f(job), on },
            NodeStep::MakeRoom {
                job,
                declared,
                from,
            } => NodeStep::MakeRoom {
                job: f(job),
                declared,
                from: from.into_iter().map(f).collect(),
            },
            NodeStep::PageIn { job, plan } => NodeStep::PageIn { job: f(job), plan },
            NodeStep::Prefetch { job } => NodeStep::Prefetch { job: f(job) },
            NodeStep::WriteBack { job, window } => NodeStep::WriteBack {
                job: f(job),
                window,
            },
        }
    }
}

impl Action {
    /// What this action does to its job's memory on each of its nodes,
    /// carried out at `now`; None for the actions that move no memory
    /// (`Start`, `Boost`, `Defer`), which each executor carries out itself.
    pub fn node_step(&self, now: Time) -> Option<NodeStep<JobId>> {
        Some(match self {
            Action::Suspend { job, page_out } => NodeStep::PageOut {
                job: *job,
                plan: *page_out,
            },
            Action::Resume { job, page_in } => NodeStep::PageIn {
                job: *job,
                plan: *page_in,
            },
            Action::Protect { job, on } => NodeStep::Protect { job: *job, on: *on },
            Action::MakeRoom { job, from } => NodeStep::MakeRoom {
                job: *job,
                declared: None,
                from: from.clone(),
            },
            Action::WriteBack { job, until } => NodeStep::WriteBack {
                job: *job,
                window: until.saturating_sub(now),
            },
            Action::PageIn { job } => NodeStep::Prefetch { job: *job },
            Action::Start { .. } | Action::Boost { .. } | Action::Defer { .. } => return None,
        })
    }
}

/// A duration as whole milliseconds.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_back_runs_to_the_quantums_end_and_a_start_is_no_step() {
        let job = JobId(3);
        let wb = Action::WriteBack {
            job,
            until: Duration::from_secs(10),
        };
        assert_eq!(
            wb.node_step(Duration::from_secs(4)),
            Some(NodeStep::WriteBack {
                job,
                window: Duration::from_secs(6)
            })
        );
        // Past its end: an empty window, not an underflow.
        let late = wb.node_step(Duration::from_secs(11)).unwrap();
        assert_eq!(
            late.map(|j| j.0 + 1),
            NodeStep::WriteBack {
                job: 4,
                window: Duration::ZERO
            }
        );
        let start = Action::Start {
            job,
            nodes: Vec::new(),
        };
        assert_eq!(start.node_step(Duration::ZERO), None);
        let room = Action::MakeRoom {
            job,
            from: vec![JobId(1), JobId(2)],
        };
        let mapped = room.node_step(Duration::ZERO).unwrap().map(|j| j.0 * 10);
        assert_eq!(
            mapped,
            NodeStep::MakeRoom {
                job: 30,
                declared: None,
                from: vec![10, 20]
            }
        );
        assert_eq!(*mapped.job(), 30);
    }
}
