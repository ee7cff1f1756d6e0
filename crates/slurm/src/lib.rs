//! memgang on Slurm: the memory half of gang scheduling on a Slurm
//! cluster (papers 000 and 001 across nodes).
//!
//! Slurm allocates nodes, launches ranks and stops and continues them
//! (`scontrol suspend`/`resume`, SIGSTOP/SIGCONT on every node). memgang
//! decides when, with the core's policies, and moves the memory:
//!
//! - [`agent`]: one per node. Slurm's `TaskProlog` hands it each task's
//!   process before the task execs ([`agent::adopt`]), so every rank runs
//!   inside the node's memory pool in a group of its job; at a switch it
//!   pages the stopped jobs out and the incoming ones in, with the same
//!   mechanisms as the one-node runtime (`memgang_runtime::memory`).
//! - [`controller`]: one per cluster. Jobs wait in a Slurm partition that
//!   is DOWN; the controller runs the core [`Scheduler`](memgang_core::Scheduler)
//!   over the cluster's pools and carries its actions out: start (move the
//!   job to the run partition on the nodes the policy chose), suspend, then
//!   every node's page-out and page-in in parallel, and resume only once
//!   every node has paged in.
//! - [`wire`]: the agent's requests and answers, JSON lines in memgang's
//!   one transport (`memgang_proto::lines`).
//! - [`net`]: the agent's TCP server and client, each request
//!   authenticated by [`auth`] (MUNGE); [`agents`]: the controller's
//!   address book of the agents (each node's `NodeAddr` from Slurm).
//! - [`slurmctl`]: the Slurm commands the controller runs, and the parsing
//!   of what they print; [`slurm_json`]: the same read from Slurm's JSON.

pub mod agent;
pub mod agents;
pub mod auth;
pub mod controller;
pub mod net;
pub mod site;
pub mod slurm_json;
pub mod slurmctl;
pub mod wire;
