//! What a simulation reports: the figures of the papers, per run and per job.

use serde::Serialize;

/// One run. Every field but `wall_s` and `events_per_s` is the same for
/// the same inputs and seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub policy: String,
    pub switching: String,
    pub nodes: u32,
    pub node_memory: u64,
    pub quantum_s: f64,
    /// The most of the time switching could take (`--max-switch-share`);
    /// null: fixed quanta.
    pub max_switch_share: Option<f64>,
    pub fault_policy: String,
    /// Jobs that ran to the end.
    pub jobs: u64,
    /// Jobs left when nothing more could happen (none, unless a policy
    /// never starts some job).
    pub unfinished: u64,
    /// Jobs wider than the cluster, run on all of it.
    pub clamped: u64,
    pub skipped_lines: u64,
    pub skipped_reasons: Vec<String>,
    /// Trace jobs without a run time or processor count (not simulated).
    pub unusable: u64,
    /// First arrival to last end.
    pub makespan_s: f64,
    /// Node-seconds of work (run time × nodes) over nodes × makespan.
    pub utilization: f64,
    pub mean_response_s: f64,
    /// Mean of max(1, response / max(run time, 10 s)).
    pub mean_bounded_slowdown: f64,
    pub switches: u64,
    /// Sum of the switches' durations (a switch's nodes page in parallel).
    pub switch_s: f64,
    /// Node-seconds jobs spent waiting for paging (switches and demand
    /// faults after them) instead of computing.
    pub paging_node_s: f64,
    /// Node-seconds in which a node's running jobs wanted more memory than
    /// it has (cosched out of core, hybrid with a bad estimate), so that
    /// they thrashed: how much of the run rests on the model's thrashing,
    /// which on a real node either beats batch or collapses (docs/sim.md).
    pub overcommitted_node_s: f64,
    /// paging_node_s / (work + paging_node_s): the share of the jobs' node
    /// time that went to switching.
    pub switching_overhead: f64,
    pub paged_out_bytes: u64,
    pub paged_in_bytes: u64,
    pub background_bytes: u64,
    pub peak_jobs_alive: u64,
    /// Events the simulator processed (arrivals, ends, quantum timers,
    /// switch completions).
    pub events: u64,
    /// Starts, suspensions, room made and resumptions, each counted once
    /// per node of its job: the engine's work per event grows with these
    /// (a hybrid set switch moves every job of two sets).
    pub node_actions: u64,
    pub wall_s: f64,
    pub events_per_s: f64,
}

/// One finished job (a CSV row).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRecord {
    pub name: String,
    pub arrival_s: f64,
    pub start_s: f64,
    pub finish_s: f64,
    pub nodes: u32,
    pub memory_per_node: u64,
    pub runtime_s: f64,
    pub response_s: f64,
    pub bounded_slowdown: f64,
}

impl JobRecord {
    pub const CSV_HEADER: &'static str = "name,arrival_s,start_s,finish_s,nodes,memory_per_node,runtime_s,response_s,bounded_slowdown";

    /// A CSV line; names are quoted when they need it.
    pub fn csv(&self) -> String {
        let name = if self.name.contains([',', '"', '\n']) {
            format!("\"{}\"", self.name.replace('"', "\"\""))
        } else {
            self.name.clone()
        };
        format!(
            "{name},{:.3},{:.3},{:.3},{},{},{:.3},{:.3},{:.4}",
            self.arrival_s,
            self.start_s,
            self.finish_s,
            self.nodes,
            self.memory_per_node,
            self.runtime_s,
            self.response_s,
            self.bounded_slowdown
        )
    }
}
