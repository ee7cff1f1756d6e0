//! What a policy asks the executor to do: the outputs of a policy.
//!
//! Plans say *what* to page; the executor's mechanisms decide *how*.

use crate::model::{JobId, NodeId, Time};
use serde::{Deserialize, Serialize};

/// What to do with a job's memory when it is suspended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PageOutPlan {
    /// Leave it to the kernel: pages are evicted on demand, least recently
    /// used first, when another job needs the memory (the baseline).
    #[default]
    Lru,
    /// Record which pages the job has resident, as runs, for a later
    /// [`PageInPlan::Recorded`]; leave the pages where they are.
    Record,
    /// Page the job's resident set out now, in bulk, before the next job
    /// runs (paper 000's aggressive page-out), recording it first if asked.
    Aggressive { record: bool },
}

/// What to do with a job's memory when it is resumed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PageInPlan {
    /// The job faults its pages back in as it touches them (the baseline).
    #[default]
    Demand,
    /// Bring back the pages recorded at its last page-out, in bulk, before
    /// it runs (paper 000's adaptive page-in).
    Recorded,
    /// As `Recorded`, but the page-in starts at the beginning of the switch,
    /// concurrently with the page-outs listed before this resume, for as
    /// much as the pool has free at that moment; the rest comes back after
    /// the page-outs, as with `Recorded` (paper 001 Fig. 5, "overlapped").
    Overlapped,
}

impl PageInPlan {
    /// Whether the job's recorded pages are brought back before it runs.
    pub fn uses_records(self) -> bool {
        matches!(self, PageInPlan::Recorded | PageInPlan::Overlapped)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Launch a queued job on these nodes.
    Start { job: JobId, nodes: Vec<NodeId> },
    /// Stop a running job (all its ranks) and treat its memory as planned.
    Suspend { job: JobId, page_out: PageOutPlan },
    /// Let a suspended job run again on the nodes it was started on.
    Resume { job: JobId, page_in: PageInPlan },
    /// Selective page-out (paper 000 §3.1): while `on`, the kernel takes
    /// memory from other jobs before this one's when the node runs short.
    /// A policy turns it on for the jobs it runs and off for those it
    /// suspends.
    Protect { job: JobId, on: bool },
    /// Before `job` runs, free the memory its working set still needs,
    /// taking it from these suspended jobs in order, each one's oldest
    /// pages first (paper 000 Fig. 3 with Fig. 2's choice of victims). The
    /// executor measures the need; the policy chooses the victims.
    MakeRoom { job: JobId, from: Vec<JobId> },
    /// Background writing (paper 000 §3.4): write the running job's pages
    /// out at low priority, spread until `until` (the end of its quantum),
    /// and stop when it is suspended, so that its switch has less to write.
    WriteBack { job: JobId, until: Time },
    /// Prefetch (paper 001 Fig. 5, "predictive restart prefetch"): start
    /// bringing a suspended job's recorded pages back now, while other jobs
    /// still run, for as much as the pool has free; the job stays
    /// suspended. Its later `Resume` with recorded page-in waits for this
    /// and brings back the rest. An executor without records may ignore it.
    PageIn { job: JobId },
    /// Change a running job's CPU priority (a nice value, lower runs first).
    Boost { job: JobId, nice: i32 },
    /// Keep a queued job waiting, saying why (reported to the user). A job
    /// that will never fit is deferred with `until: None`.
    Defer {
        job: JobId,
        until: Option<Time>,
        reason: String,
    },
}

impl Action {
    pub fn job(&self) -> JobId {
        match self {
            Action::Start { job, .. }
            | Action::Suspend { job, .. }
            | Action::Resume { job, .. }
            | Action::Protect { job, .. }
            | Action::MakeRoom { job, .. }
            | Action::WriteBack { job, .. }
            | Action::PageIn { job }
            | Action::Boost { job, .. }
            | Action::Defer { job, .. } => *job,
        }
    }

    /// Actions that stop or restart jobs, or move memory between them, make
    /// up a switch.
    pub fn is_switch(&self) -> bool {
        matches!(
            self,
            Action::Suspend { .. } | Action::Resume { .. } | Action::MakeRoom { .. }
        )
    }
}
