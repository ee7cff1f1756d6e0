//! memgangd's protocol: requests and responses, one JSON object per line
//! over a Unix stream socket, one request per connection (see README);
//! [`lines`] is the framing, which the Slurm agents' protocol shares.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub mod client;
pub mod lines;
pub mod top;

/// Where memgangd listens unless its configuration says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/memgang/memgang.sock";

/// A request line's size limit: a command line with its environment is a
/// few KiB; a client sending more is broken or hostile, and the daemon
/// must not buffer it.
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// Most tasks in one array (Slurm's default MaxArraySize is 1001).
pub const MAX_ARRAY_TASKS: usize = 1000;

/// Output chunk size of one `output` response: big enough that `follow`
/// keeps up with a chatty job in a few round trips per second.
pub const OUTPUT_CHUNK: u64 = 256 << 10;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
// One request per connection, parsed once: a submission's size is no cost.
#[allow(clippy::large_enum_variant)]
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
        /// The queue's options (output files, time limit, dependencies,
        /// array); absent from an older client: none.
        #[serde(default, flatten)]
        queue: QueueOptions,
    },
    /// The caller's jobs (root: everyone's), a page at a time: those
    /// after job `after` (None: from the first), as many as fit the
    /// daemon's `max_answer_bytes`.
    List {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<u64>,
    },
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
    /// The node now, for `memgang top` ([`top::NodeView`]).
    Top,
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
    /// A page of jobs; `next`: more follow, ask for those after this
    /// id (absent on the last page, and from a daemon before pages).
    Jobs {
        jobs: Vec<JobInfo>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next: Option<u64>,
    },
    /// Boxed: a job with its account is far larger than the other
    /// answers (the JSON is the same).
    Job {
        job: Box<JobInfo>,
    },
    Done,
    /// `data`: the job's bytes exactly, one character per byte (U+0000
    /// to U+00FF, so plain ASCII reads as itself; see [`bytes`]); `next`
    /// is the offset to ask for next; `finished`: the job has ended,
    /// nothing more will come after `next` reaches the end.
    Output {
        #[serde(with = "bytes")]
        data: Vec<u8>,
        next: u64,
        finished: bool,
    },
    Error {
        message: String,
    },
    /// The answer to [`Request::Top`]; boxed as `Job` is.
    Top {
        view: Box<top::NodeView>,
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
    /// Stopped at its time limit (`--time`, running time only).
    Timeout,
}

impl JobState {
    /// Every state, in a job's order.
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Suspended,
        JobState::Finished,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
    ];

    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Failed | JobState::Cancelled | JobState::Timeout
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
            JobState::Timeout => "timeout",
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
    /// Where its time went, set when it ends: the job's time account as
    /// result files carry it (`jobs[].account`, docs/results.md). Carried
    /// as the JSON object it is, so that the account's one definition
    /// (memgang-results' `JobAccount`) can grow without a protocol
    /// change. Absent for a job that did not run to its end, while it
    /// runs (the kernel gives a task's figures when it exits) and in
    /// journals written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<serde_json::Value>,
    /// Its queue options as the daemon settled them (absent in journals
    /// written before them).
    #[serde(default, flatten)]
    pub queue: QueueInfo,
}

/// What a submission asks of the queue beyond memory and ranks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueOptions {
    /// Pattern of the file its stdout goes to (`%j` id, `%x` name, `%u`
    /// user, `%a` array index, `%A` array id, `%%`), relative to its
    /// working directory. None with `error` None too: no files, the
    /// output stays in memgangd's job directory (what `memgang submit`
    /// sends unless told: `memgang-%j.out`, as sbatch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Pattern of its stderr's file; None: the output file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Running time allowed, in seconds (frozen time does not count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<u64>,
    /// Jobs that must end first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Dependency>,
    /// Run it as an array of tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<ArraySpec>,
}

/// A dependency, as Slurm's `--dependency` spells its kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub id: u64,
    pub kind: DependencyKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyKind {
    /// Starts once the job finished with exit code 0; never, if it ended
    /// otherwise.
    Afterok,
    /// Starts once the job ended, however it ended.
    Afterany,
}

impl DependencyKind {
    pub fn name(self) -> &'static str {
        match self {
            DependencyKind::Afterok => "afterok",
            DependencyKind::Afterany => "afterany",
        }
    }
}

/// `--array FIRST-LAST[:STEP][%LIMIT]` or a list `1,3,5[%LIMIT]`: the
/// indexes, and how many of its tasks may run at once (None: no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    pub indexes: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// A job's queue settings and bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueInfo {
    /// The file its stdout goes to, made by the job as its user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<PathBuf>,
    /// Its stderr's file, when not the stdout's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<u64>,
    /// Running time used so far (frozen time not counted), as last
    /// recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub used_s: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Dependency>,
    /// The array it is a task of (the id of its first task), its index,
    /// and how many of the array's tasks may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_limit: Option<u32>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl JobInfo {
    /// The job without what its user wrote (name, command, directories,
    /// output files, dependencies, reason: empty) and with its account only if `account`: small
    /// whatever the job, for counting jobs (the daemon's metrics).
    pub fn summary(&self, account: bool) -> JobInfo {
        JobInfo {
            id: self.id,
            uid: self.uid,
            name: String::new(),
            command: Vec::new(),
            memory_bytes: self.memory_bytes,
            ranks: self.ranks,
            state: self.state,
            reason: None,
            exit_code: self.exit_code,
            signal: self.signal,
            submitted_unix_s: self.submitted_unix_s,
            started_unix_s: self.started_unix_s,
            finished_unix_s: self.finished_unix_s,
            log_dir: PathBuf::new(),
            cwd: PathBuf::new(),
            account: if account { self.account.clone() } else { None },
            queue: QueueInfo {
                stdout: None,
                stderr: None,
                after: Vec::new(),
                ..self.queue.clone()
            },
        }
    }
}

/// Bytes in a JSON string, one character per byte (Latin-1): exact
/// whatever the bytes are (a job's output need not be UTF-8, and a chunk
/// may end inside a character), and text that is ASCII stays readable on
/// the socket. A character above U+00FF is malformed.
pub mod bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&b.iter().map(|&c| char::from(c)).collect::<String>())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        s.chars()
            .map(|c| {
                u8::try_from(c).map_err(|_| {
                    serde::de::Error::custom(format!("{c:?} is not a byte (above U+00FF)"))
                })
            })
            .collect()
    }
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
    fn output_carries_any_bytes_exactly() {
        // A two-byte character cut by a chunk boundary, bytes that are no
        // UTF-8, control bytes: all come back as they were.
        let data: Vec<u8> = [b"ok \xc3".as_slice(), &[0, 0x1b, 0xff, 0x80, b'\n']].concat();
        let r = Response::Output {
            data: data.clone(),
            next: 9,
            finished: false,
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<Response>(&line).unwrap(), r);
        // ASCII reads as itself.
        let r = Response::Output {
            data: b"hello\n".to_vec(),
            next: 6,
            finished: true,
        };
        assert!(serde_json::to_string(&r)
            .unwrap()
            .contains(r#""data":"hello\n""#));
        let bad = r#"{"kind":"output","data":"\u0100","next":1,"finished":true}"#;
        assert!(serde_json::from_str::<Response>(bad).is_err());
    }

    #[test]
    fn unknown_ops_are_errors() {
        assert!(serde_json::from_str::<Request>(r#"{"op":"format_disk"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"show"}"#).is_err());
    }
}
