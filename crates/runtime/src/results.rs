//! The results of a run: one JSON document (schema in docs/results.md) from
//! which every table, plot and report is made.

use serde::{Deserialize, Serialize};

/// Bumped when a field changes meaning or is removed; adding fields keeps it.
pub const SCHEMA_VERSION: u32 = 1;

fn lru() -> String {
    "lru".into()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: u32,
    pub memgang_version: String,
    pub experiment: String,
    pub policy: String,
    pub quantum_s: f64,
    /// The most of the time switching may take: quanta after a dearer
    /// switch were longer than `quantum_s`; null: fixed quanta.
    #[serde(default)]
    pub max_switch_share: Option<f64>,
    /// Switch mechanisms: "lru" or e.g. "ao/ai" (paper 000's names).
    #[serde(default = "lru")]
    pub switch: String,
    /// Set-switch overlap of `hybrid`/`auto`: "sequential", "overlapped"
    /// or "prefetch"; null for the other policies.
    #[serde(default)]
    pub overlap: Option<String>,
    /// Paper 003's dynamic coscheduling was on.
    #[serde(default)]
    pub dynamic_coscheduling: bool,
    pub pool_memory_bytes: u64,
    pub machine: Machine,
    /// Unix time (s) at which the run started.
    pub started_unix_s: u64,
    /// From the first arrival to the last completion.
    pub makespan_s: f64,
    /// Paper 000 §4.1: (makespan - batch makespan) / makespan; null when no
    /// batch reference was used.
    pub switching_overhead: Option<f64>,
    pub batch_makespan_s: Option<f64>,
    /// Where the batch reference came from: "self", "cache <file>", "run",
    /// "file <path>" or "none".
    pub baseline: String,
    /// Paper 001: makespan over the standard deviation of completion times;
    /// null with fewer than two jobs or equal completion times.
    pub fairness: Option<f64>,
    /// Paper 001 Fig. 8: the mean and standard deviation over the jobs of
    /// their major page faults per minute (`major_faults_per_min`); null
    /// when no job finished.
    #[serde(default)]
    pub major_faults_per_min_mean: Option<f64>,
    #[serde(default)]
    pub major_faults_per_min_std: Option<f64>,
    /// Node-wide pages swapped in and out during the run (/proc/vmstat).
    pub swap_in_pages: u64,
    pub swap_out_pages: u64,
    /// Switches and the time the mechanisms took for them, in total.
    pub switch_count: usize,
    pub switch_time_s: f64,
    /// True when the run was stopped by a signal before all jobs ended.
    pub interrupted: bool,
    pub jobs: Vec<JobResult>,
    /// Which job ran when: one interval per stretch of running.
    pub timeline: Vec<Interval>,
    pub switches: Vec<Switch>,
    pub samples: Vec<Sample>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub swap_bytes: u64,
    pub cgroup: String,
    pub freezer: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct JobResult {
    pub name: String,
    pub command: Vec<String>,
    pub ranks: u32,
    pub declared_memory_bytes: Option<u64>,
    pub arrival_s: f64,
    pub start_s: Option<f64>,
    pub finish_s: Option<f64>,
    /// Finish minus arrival: the time the user waited for the job.
    pub completion_s: Option<f64>,
    /// User plus system CPU time of all its processes (wait4 rusage).
    pub cpu_s: f64,
    pub major_faults: u64,
    /// Major faults per minute from its start to its finish, or to the
    /// interruption (paper 001 Fig. 8); null for a job that never started.
    #[serde(default)]
    pub major_faults_per_min: Option<f64>,
    /// Pages swapped in and out on the job's behalf. Exact where the cgroup
    /// counts them (v2 with pswpin/pswpout); otherwise the node's counts
    /// attributed per 100 ms sample by the job's share of major faults
    /// (swap-in) and of swap growth (swap-out). See docs/results.md.
    pub swap_in_pages: u64,
    pub swap_out_pages: u64,
    pub peak_anon_bytes: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Why the job could not run or was stopped, if it did not exit by itself.
    pub error: Option<String>,
    /// The last lines the job wrote to stderr, when it failed.
    pub stderr_tail: Option<String>,
    pub log_dir: Option<String>,
    /// Dynamic coscheduling: the largest CPU priority boost the job got,
    /// in nice steps (0: never raised).
    #[serde(default)]
    pub max_boost: u32,
    /// Dynamic coscheduling: seconds of its run it spent boosted.
    #[serde(default)]
    pub boosted_s: f64,
}

impl JobResult {
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0) && self.error.is_none()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Interval {
    pub job: String,
    pub start_s: f64,
    pub end_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Switch {
    pub at_s: f64,
    pub took_s: f64,
    pub suspended: Vec<String>,
    pub resumed: Vec<String>,
    /// Bytes the switch paged out and in itself (0 under `lru`, where the
    /// kernel pages on demand after the switch).
    #[serde(default)]
    pub paged_out_bytes: u64,
    #[serde(default)]
    pub paged_in_bytes: u64,
    /// Time spent paging out (suspensions, making room) and paging in. A
    /// page-in that overlapped the page-out counts its own duration, so
    /// the two can add up to more than `took_s`.
    #[serde(default)]
    pub page_out_s: f64,
    #[serde(default)]
    pub page_in_s: f64,
    /// Node pages swapped in and out during the switch (/proc/vmstat): the
    /// disk traffic the switch caused, for its physical limit. Page-out
    /// writes are counted when submitted.
    #[serde(default)]
    pub swap_in_pages: u64,
    #[serde(default)]
    pub swap_out_pages: u64,
    /// Bytes background writing (`bg`) paged out of the suspended jobs in
    /// their quantum's last part, before this switch.
    #[serde(default)]
    pub background_bytes: u64,
    /// What went wrong without stopping the switch (a nearly full swap
    /// device, a mechanism the kernel refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub t_s: f64,
    /// Node pages swapped in / out since the previous sample.
    pub swap_in: u64,
    pub swap_out: u64,
    pub pool_usage_bytes: u64,
    /// Node memory PSI "some" avg10 (%), when the kernel has PSI.
    pub psi_some_avg10: Option<f64>,
    /// Taken while a switch ran, by a thread beside it: node swap traffic
    /// and pool usage only, `jobs` is empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_switch: bool,
    pub jobs: Vec<JobSample>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobSample {
    pub job: String,
    /// What the kernel says: "running" or "frozen" (by the freezer or by
    /// SIGSTOP), read at the sample instant, not what memgang intended.
    pub state: String,
    pub anon_bytes: u64,
    pub swap_bytes: Option<u64>,
    pub major_faults: u64,
}
