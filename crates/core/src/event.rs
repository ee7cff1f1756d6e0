//! What happens to the scheduler: the inputs of a policy.

use crate::model::{JobId, NodeId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// The job's arrival time has come; it is now queued.
    JobArrived(JobId),
    /// All processes of the job have exited (whatever the exit status).
    JobFinished(JobId),
    /// The timer a policy asked for has expired (the end of a quantum).
    QuantumExpired,
    /// The executor finished carrying out a switch (suspends and resumes
    /// returned together); `took` is how long the mechanisms needed.
    SwitchDone { took: Duration },
    /// The node's memory is under pressure (PSI "some" share over 10 s, in %).
    MemoryPressure { node: NodeId, some_avg10: f64 },
    /// Messages a running job sent and received in the last
    /// [`TRAFFIC_PERIOD`](crate::policy::TRAFFIC_PERIOD), per rank (the
    /// executor counts them per process). Only dynamic coscheduling uses
    /// it; executors send it only where that layer is on.
    JobTraffic { job: JobId, messages: u64 },
    /// What a running job's memory measured: `peak_bytes` is the largest
    /// resident anonymous memory seen so far, `resident_bytes` the current
    /// one. Executors send it when the peak has grown (the runtime from the
    /// job's cgroup counters, in steps of a few MiB); policies that do not
    /// pack by memory ignore it. Only `hybrid`/`auto` use it, to re-pack a
    /// job that grew past its estimate.
    JobMemory {
        job: JobId,
        peak_bytes: u64,
        resident_bytes: u64,
    },
}
