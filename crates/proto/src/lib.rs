//! memgangd's protocol: requests and responses, one JSON object per line
//! over a Unix stream socket, one request per connection (see README).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub mod client;

/// Where memgangd listens unless its configuration says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/memgang/memgang.sock";

/// A request line's size limit: a command line with its environment is a
/// few KiB; a client sending more is broken or hostile, and the daemon
/// must not buffer it.
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// Output chunk size of one `output` response: big enough that `follow`
/// keeps up with a chatty job in a few round trips per second.
pub const OUTPUT_CHUNK: u64 = 256 << 10;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Run `command` as the caller, in `cwd` with `env` (the caller's
    /// whole environment: the job sees what it would see in a shell).
    Submit {
        command: Vec<String>,
        /// Declared memory footprint; admission needs it, so the client
        /// requires it.
        memory_bytes: u64,
        ranks: u32,
        cwd: PathBuf,
        env: BTreeMap<String, String>,
        name: Option<String>,
    },
    /// The caller's jobs (root: everyone's).
    List,
    Show {
        id: u64,
    },
    Cancel {
        id: u64,
    },
    /// Bytes of a job's `stream` ("stdout" or "stderr") from `offset`.
    Output {
        id: u64,
        stream: Stream,
        offset: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn file_name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    Submitted {
        id: u64,
    },
    Jobs {
        jobs: Vec<JobInfo>,
    },
    Job {
        job: JobInfo,
    },
    Done,
    /// `data` is lossily decoded UTF-8; `next` is the offset to ask for
    /// next; `finished`: the job has ended, nothing more will come after
    /// `next` reaches the end.
    Output {
        data: String,
        next: u64,
        finished: bool,
    },
    Error {
        message: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for memory or CPUs (see `reason`).
    Queued,
    Running,
    /// Frozen by the policy, taking turns.
    Suspended,
    /// Exited with status 0.
    Finished,
    /// Exited otherwise, was killed, or could not start.
    Failed,
    Cancelled,
}

impl JobState {
    /// Every state, in a job's order.
    pub const ALL: [JobState; 6] = [
        JobState::Queued,
        JobState::Running,
        JobState::Suspended,
        JobState::Finished,
        JobState::Failed,
        JobState::Cancelled,
    ];

    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Failed | JobState::Cancelled
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Suspended => "suspended",
            JobState::Finished => "finished",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: u64,
    pub uid: u32,
    pub name: String,
    pub command: Vec<String>,
    pub memory_bytes: u64,
    pub ranks: u32,
    pub state: JobState,
    /// Why a queued job waits, or why a failed job failed.
    pub reason: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub submitted_unix_s: f64,
    pub started_unix_s: Option<f64>,
    pub finished_unix_s: Option<f64>,
    pub log_dir: PathBuf,
    pub cwd: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_as_one_line() {
        let r = Request::Output {
            id: 3,
            stream: Stream::Stderr,
            offset: 10,
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(
            line,
            r#"{"op":"output","id":3,"stream":"stderr","offset":10}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), r);
    }

    #[test]
    fn unknown_ops_are_errors() {
        assert!(serde_json::from_str::<Request>(r#"{"op":"format_disk"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"show"}"#).is_err());
    }
}
