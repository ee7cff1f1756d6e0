//! The agent's protocol: its requests and answers, one JSON line each in
//! memgang's one transport ([`memgang_proto::lines`]), one request per
//! connection. The controller sends them over TCP, each with a MUNGE
//! credential ([`net`](crate::net)); a task's prolog sends `adopt` over
//! the node's local socket ([`agent::serve`](crate::agent::serve)).

use anyhow::{bail, Context, Result};
use memgang_core::NodeStep;
use memgang_proto::lines;
use memgang_runtime::SwitchSteps;
use serde::{Deserialize, Serialize};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A Slurm job id.
pub type SlurmJob = u32;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// The node's name and pool.
    Hello,
    /// Move process `pid` (a task about to exec) into the group of Slurm
    /// job `job` in the pool. Only the process's owner (or root) may.
    Adopt { pid: i32, job: SlurmJob },
    /// Would the node's swap take what must leave memory for `incoming`
    /// (job, declared bytes on this node)? Asked before a switch begins, so
    /// that a full swap device refuses the switch rather than the kernel
    /// killing a job.
    Check { incoming: Vec<(SlurmJob, u64)> },
    /// A switch's steps on this node, in order (the jobs were stopped by
    /// Slurm before).
    Switch { steps: Vec<Step> },
    /// What the agent holds: every job with a group in the pool, how much
    /// of it is in memory and on swap, and whether its processes are
    /// stopped. A restarted controller asks it to take its jobs back.
    State,
}

/// One step of a switch on a node: the core's step, keyed by Slurm job
/// (`{"step":"page_out","job":7,"plan":...}`; docs/slurm.md).
pub type Step = NodeStep<SlurmJob>;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchReport {
    pub paged_out_bytes: u64,
    pub paged_in_bytes: u64,
    pub page_out_s: f64,
    pub page_in_s: f64,
    pub warnings: Vec<String>,
    /// Where the node's switch spent its time, step by step (the switch
    /// engine's, as in a `memgang run`'s switch record); absent from
    /// older agents.
    #[serde(default)]
    pub steps: SwitchSteps,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    Hello { node: String, pool_bytes: u64 },
    Adopted { job: SlurmJob },
    Ok,
    Switched(SwitchReport),
    State { jobs: Vec<HeldJob> },
    Error { message: String },
}

/// A job as a node's agent holds it (the answer to [`Request::State`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldJob {
    pub job: SlurmJob,
    /// Its processes on this node.
    pub processes: usize,
    /// Every one of them stopped (Slurm's suspend: SIGSTOP), and at least
    /// one.
    pub stopped: bool,
    pub resident_bytes: u64,
    /// On swap: paged out (None without swap accounting).
    pub swap_bytes: Option<u64>,
}

/// Largest answer a controller reads: a switch report with its warnings.
pub const MAX_ANSWER: usize = 1 << 20;

/// An agent's answer line (from `peer`); an [`Response::Error`] comes
/// back as an `Err` with the agent's message. Errors are one sentence
/// with their cause (the controller writes them to the job's
/// `AdminComment` as they are).
pub fn parse_response(line: &[u8], peer: &str) -> Result<Response> {
    match lines::decode(line, "answer") {
        Ok(Response::Error { message }) => bail!("{message}"),
        Ok(r) => Ok(r),
        Err(e) => bail!("the agent at {peer} answered something unreadable: {e}"),
    }
}

/// A failed round trip to the agent at `peer` as one sentence.
pub fn call_error(e: lines::Error, peer: &str, timeout: Duration) -> anyhow::Error {
    match e {
        lines::Error::Timeout { .. } => anyhow::anyhow!(
            "no answer from the agent at {peer} within {}",
            humantime::format_duration(timeout)
        ),
        lines::Error::Closed { .. } => anyhow::anyhow!(
            "the agent at {peer} closed the connection without answering (see its log)"
        ),
        e => anyhow::anyhow!("the agent at {peer}: {e}"),
    }
}

/// One round trip to the agent's local socket (the task prolog's
/// `adopt`), waiting at most `timeout` for the answer.
pub fn call_local(socket: &Path, req: &Request, timeout: Duration) -> Result<Response> {
    let peer = socket.display().to_string();
    let stream = UnixStream::connect(socket).with_context(|| {
        format!("cannot reach the memgang agent at {peer} (is `memgang slurm agent` running on this node?)")
    })?;
    let line = lines::call(&stream, &[&lines::encode(req)], MAX_ANSWER, timeout)
        .map_err(|e| call_error(e, &peer, timeout))?;
    parse_response(&line, &peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_tagged_line() {
        let r = Request::Switch {
            steps: vec![Step::PageOut {
                job: 7,
                plan: memgang_core::PageOutPlan::Aggressive { record: true },
            }],
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(!s.contains('\n'));
        assert!(s.starts_with("{\"op\":\"switch\""), "{s}");
        assert_eq!(serde_json::from_str::<Request>(&s).unwrap(), r);
    }

    #[test]
    fn steps_read_as_the_agents_always_did() {
        // As agents sent and read them before the step was the core's
        // `NodeStep` (docs/slurm.md).
        let lines = [
            r#"{"step":"page_out","job":7,"plan":{"Aggressive":{"record":true}}}"#,
            r#"{"step":"protect","job":7,"on":false}"#,
            r#"{"step":"make_room","job":8,"declared":1048576,"from":[7]}"#,
            r#"{"step":"page_in","job":8,"plan":"Recorded"}"#,
            r#"{"step":"prefetch","job":8}"#,
            r#"{"step":"write_back","job":8,"window_ms":1500}"#,
        ];
        for line in lines {
            let step: Step = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&step).unwrap(), line);
        }
        let wb: Step = serde_json::from_str(lines[5]).unwrap();
        assert_eq!(
            wb,
            Step::WriteBack {
                job: 8,
                window: Duration::from_millis(1500)
            }
        );
        // Without `declared`: the node's own estimate.
        let room: Step = serde_json::from_str(r#"{"step":"make_room","job":8,"from":[]}"#).unwrap();
        assert_eq!(
            room,
            Step::MakeRoom {
                job: 8,
                declared: None,
                from: Vec::new()
            }
        );
    }
}
