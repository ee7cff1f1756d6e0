//! The node as memgangd's loop last published it for `memgang top`
//! (`top.rs` writes and reads it; the job table in `store.rs` holds it).

use memgang_core::JobId;
use memgang_proto::top::Activity;
use memgang_runtime::executor::SwitchWatch;
use std::collections::HashMap;

/// The node as the loop last saw it.
pub struct Published {
    pub(super) policy: String,
    pub(super) quantum_s: f64,
    pub(super) pool_limit: u64,
    pub(super) pool_usage: Option<u64>,
    pub(super) next_switch_unix_s: Option<f64>,
    pub(super) switches: Vec<Switched>,
    /// Each job on the node by the daemon's id.
    pub(super) jobs: HashMap<u64, OnNode>,
    /// The node's ids to the daemon's, for the watch.
    pub(super) ids: HashMap<JobId, u64>,
    pub(super) watch: SwitchWatch,
}

pub struct OnNode {
    pub(super) activity: Activity,
    pub(super) resident: Option<u64>,
    pub(super) swapped: Option<u64>,
    pub(super) run_share: Option<f64>,
}

pub struct Switched {
    pub(super) at_unix_s: f64,
    pub(super) took_s: f64,
    pub(super) out: Vec<u64>,
    pub(super) into: Vec<u64>,
    pub(super) paged_out: u64,
    pub(super) paged_in: u64,
}
