//! The static model: a cluster of nodes and the jobs submitted to it.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Time since the start of an experiment. The caller (runtime or simulator)
/// decides what clock it comes from; the core never reads one.
pub type Time = Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// Index of a job in the order it was submitted (its position in the
/// experiment), stable for the whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId(pub u32);

impl JobId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    pub cpus: u32,
    /// Memory the jobs on this node may use together (the pool), in bytes.
    pub memory_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// `count` identical nodes.
    pub fn uniform(count: u32, cpus: u32, memory_bytes: u64) -> Self {
        assert!(count > 0 && cpus > 0, "a cluster needs nodes with CPUs");
        let nodes = (0..count)
            .map(|i| Node {
                id: NodeId(i),
                cpus,
                memory_bytes,
            })
            .collect();
        Cluster { nodes }
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// Nodes a job of `ranks` processes occupies. Jobs get whole nodes, as on
    /// HPC clusters: a node runs the ranks of one job per time slot, so that
    /// time-sharing a node means time-sharing its memory too.
    pub fn nodes_needed(&self, ranks: u32) -> u32 {
        let cpus = self.nodes[0].cpus.max(1);
        ranks.max(1).div_ceil(cpus)
    }
}

/// A job as submitted: what the policy may know before it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub name: String,
    /// Processes of the job; they run at the same time on its nodes.
    pub ranks: u32,
    /// Declared memory footprint of the whole job, in bytes, if known.
    pub memory_bytes: Option<u64>,
    pub arrival: Time,
    /// Already runs on these nodes (taken back by a restarted controller,
    /// or resumed by an administrator): every policy's placement keeps it
    /// there, and starts it nowhere else. One node per
    /// [`Cluster::nodes_needed`] of its ranks, each once
    /// ([`JobSpec::check`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<Vec<NodeId>>,
}

impl JobSpec {
    /// Why `cluster` cannot take this job as specified, if it cannot: its
    /// placed nodes must be nodes of the cluster, each listed once, as
    /// many as its ranks take. [`Scheduler::submit`](crate::Scheduler::submit)
    /// refuses such a job with this.
    pub fn check(&self, cluster: &Cluster) -> Result<(), String> {
        let Some(placed) = &self.placed else {
            return Ok(());
        };
        let need = cluster.nodes_needed(self.ranks) as usize;
        if placed.len() != need {
            return Err(format!(
                "job {:?} is placed on {} node(s), but its {} rank(s) take {need} ({} CPU(s) a \
                 node): list exactly {need}",
                self.name,
                placed.len(),
                self.ranks,
                cluster.nodes[0].cpus
            ));
        }
        for (i, n) in placed.iter().enumerate() {
            if n.0 as usize >= cluster.nodes.len() {
                return Err(format!(
                    "job {:?} is placed on node {}, which the cluster does not have (nodes 0 to \
                     {}): place it on the cluster's nodes",
                    self.name,
                    n.0,
                    cluster.nodes.len() - 1
                ));
            }
            if placed[..i].contains(n) {
                return Err(format!(
                    "job {:?} is placed on node {} twice: list each node once",
                    self.name, n.0
                ));
            }
        }
        Ok(())
    }
}
