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
}
