//! /etc/memgang/memgang.toml: every key optional, the defaults work on a
//! machine with swap (dist/memgang.toml lists them).

use anyhow::{Context, Result};
use memgang_core::units::parse_size;
use memgang_core::{Overlap, PolicyKind, Switching};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const DEFAULT_CONFIG: &str = "/etc/memgang/memgang.toml";

mod keys;
pub use keys::{KeyDefault, KEYS};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    pool_memory: Option<String>,
    policy: Option<String>,
    quantum: Option<String>,
    max_switch_share: Option<String>,
    switch: Option<String>,
    swap_reserve: Option<String>,
    paging_prevention: Option<bool>,
    dynamic_coscheduling: Option<bool>,
    state_dir: Option<PathBuf>,
    socket: Option<PathBuf>,
    keep_finished_for: Option<String>,
    keep_finished_jobs: Option<usize>,
    metrics_file: Option<PathBuf>,
    metrics_listen: Option<String>,
    max_job_command: Option<String>,
    max_job_environment: Option<String>,
    max_jobs_per_user: Option<usize>,
    max_user_bytes: Option<String>,
    keep_finished_jobs_per_user: Option<usize>,
    max_answer_bytes: Option<String>,
    user_request_workers: Option<usize>,
    lookup_timeout: Option<String>,
    max_locked_memory: Option<String>,
    max_job_output: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// Memory the jobs share. Default: 3/4 of RAM, so the rest of the node
    /// (the daemon, sshd, page cache) keeps a quarter.
    pub pool_memory: u64,
    pub policy: PolicyKind,
    pub quantum: Duration,
    /// The most of the time switching may take ("5%"): a quantum after a
    /// dearer switch grows until it does, up to 10 quanta. Default: fixed
    /// quanta, as an admin who set one expects.
    pub max_switch_share: Option<f64>,
    pub switch: Switching,
    /// Swap kept back from jobs, for the rest of the node. Default 512M:
    /// room for other processes' swap while the jobs fill the rest.
    pub swap_reserve: u64,
    /// Paper 003 §3: admit a job only while pool plus swap holds every
    /// admitted job. Default on; off only to measure what it is worth.
    pub paging_prevention: bool,
    /// Paper 003 §4.1: raise communicating jobs' CPU priority. Default
    /// off: it helps parallel jobs beside sequential ones and costs reading
    /// /proc/PID/task/*/status per process every 100 ms.
    pub dynamic_coscheduling: bool,
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    /// Ended jobs are kept (in the journal, `memgang status --all`, `wait`
    /// and `show`, their output) this long after they end, and at most
    /// `keep_finished_jobs` of them, the newest; older ones are forgotten
    /// and their output removed. Default 7 days and 10,000 jobs: a week of
    /// history for questions about a job, a bounded journal and disk.
    pub keep_finished_for: Duration,
    pub keep_finished_jobs: usize,
    /// Prometheus text file, rewritten every 5 s and world-readable, for
    /// node_exporter's textfile collector. Default: memgang.prom beside
    /// the socket; None (`metrics_file = ""`) writes none.
    pub metrics_file: Option<PathBuf>,
    /// Address of an HTTP listener answering `GET /metrics` with the same
    /// text (Prometheus scraping memgangd directly); None: no listener.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Bytes of a job's name, command (its arguments) and working
    /// directory together. Default 64K: a command line is rarely over a
    /// few KiB, and the kernel takes at most 128 KiB per argument.
    pub max_job_command: u64,
    /// Bytes of a job's environment (names and values). Default 256K:
    /// a login shell's is a few KiB, one with modules loaded (Lmod) up
    /// to about 100 KiB; exec itself takes a quarter of the stack limit
    /// (2 MiB) for arguments and environment together.
    pub max_job_environment: u64,
    /// Jobs a user may have in progress (queued, running, suspended) at
    /// once; a submission beyond is refused. Default 1,000.
    pub max_jobs_per_user: usize,
    /// Bytes a user's jobs in progress may hold in the daemon (their
    /// name, command, working directory and environment), and again the
    /// ended jobs kept of theirs: a submission beyond the first is
    /// refused, retention forgets the oldest ended ones beyond the
    /// second. Default 64M: 200 jobs of the largest size, 10,000 of a
    /// usual one.
    pub max_user_bytes: u64,
    /// Ended jobs kept per user (the newest), beside `keep_finished_jobs`
    /// for all. Default 1,000.
    pub keep_finished_jobs_per_user: usize,
    /// An answer listing jobs is cut into pages of about this many bytes
    /// (the client asks for the next page): no request makes the daemon
    /// hold more than a page per connection. Default 1M.
    pub max_answer_bytes: u64,
    /// Workers one user's requests may hold at once (of the three that
    /// answer users): the others answer the other users meanwhile.
    /// Default 1.
    pub user_request_workers: usize,
    /// How long a submission's checks as the user (the working directory,
    /// the command looked up on their PATH) may take. Default 2s.
    pub lookup_timeout: Duration,
    /// The largest RLIMIT_MEMLOCK a job's process gets, whatever the
    /// user's limits say (locked memory cannot be paged out at a switch).
    /// Default 8M, the kernel's own default.
    pub max_locked_memory: u64,
    /// The most bytes a job may write to its stdout and stderr together
    /// (files in the state directory, root's disk): a job past it is
    /// stopped, failed with the reason. Default 1G.
    pub max_job_output: u64,
}

impl Config {
    /// Read `path`; a missing file at the default path means defaults.
    /// An error names the file, and the line and key at fault.
    pub fn load(path: &Path, explicit: bool) -> Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        // toml's message says the line and column, and shows it.
        let file = toml::from_str::<File>(&text)
            .with_context(|| format!("{}: not a valid memgang configuration", path.display()))?;
        Config::from_file(file, memgang_linux::counters::memory_total()?).map_err(|e| {
            match e
                .downcast_ref::<BadKey>()
                .and_then(|b| key_line(&text, b.key))
            {
                Some(line) => e.context(format!("{}:{line}", path.display())),
                None => e.context(format!("in {}", path.display())),
            }
        })
    }

    /// The settings without a file, on this node.
    pub fn defaults() -> Result<Config> {
        Config::from_file(File::default(), memgang_linux::counters::memory_total()?)
    }

    fn from_file(f: File, ram: u64) -> Result<Config> {
        let bytes = |key: &'static str, v: &Option<String>, default: u64| -> Result<u64> {
            v.as_deref()
                .map_or(Ok(default), |s| parse_size(key, s).map_err(|e| bad(key, e)))
        };
        let quantum = match &f.quantum {
            None => Duration::from_secs(60),
            Some(s) => humantime::parse_duration(s)
                .map_err(|e| bad("quantum", format!("quantum = {s:?}: {e}; write e.g. 60s")))?,
        };
        if quantum.is_zero() {
            return Err(bad("quantum", "quantum must be greater than zero".into()));
        }
        let keep_finished_for = match &f.keep_finished_for {
            None => Duration::from_secs(7 * 24 * 3600),
            Some(s) => humantime::parse_duration(s).map_err(|e| {
                bad(
                    "keep_finished_for",
                    format!("keep_finished_for = {s:?}: {e}; write e.g. 7days"),
                )
            })?,
        };
        let pool_memory = bytes("pool_memory", &f.pool_memory, ram / 4 * 3)?;
        let socket = f
            .socket
            .clone()
            .unwrap_or_else(|| PathBuf::from(memgang_proto::DEFAULT_SOCKET));
        if pool_memory == 0 {
            return Err(bad(
                "pool_memory",
                "pool_memory must be greater than zero".into(),
            ));
        }
        Ok(Config {
            pool_memory,
            policy: match &f.policy {
                None => PolicyKind::Auto,
                Some(s) => s
                    .parse()
                    .map_err(|e| bad("policy", format!("policy = {s:?}: {e}")))?,
            },
            quantum,
            max_switch_share: f
                .max_switch_share
                .as_deref()
                .map(memgang_core::Quantum::parse_share)
                .transpose()
                .map_err(|e| bad("max_switch_share", format!("max_switch_share: {e}")))?,
            // so/ao/ai: the best switch measured on this machine
            // (docs/switching.md).
            switch: match &f.switch {
                None => "so/ao/ai".parse().map_err(|e| anyhow::anyhow!("{e}"))?,
                Some(s) => s
                    .parse()
                    .map_err(|e| bad("switch", format!("switch = {s:?}: {e}")))?,
            },
            swap_reserve: bytes("swap_reserve", &f.swap_reserve, 512 << 20)?,
            paging_prevention: f.paging_prevention.unwrap_or(true),
            dynamic_coscheduling: f.dynamic_coscheduling.unwrap_or(false),
            state_dir: f
                .state_dir
                .unwrap_or_else(|| PathBuf::from("/var/lib/memgang")),
            keep_finished_for,
            keep_finished_jobs: f.keep_finished_jobs.unwrap_or(10_000),
            metrics_file: match f.metrics_file {
                Some(p) if p.as_os_str().is_empty() => None,
                Some(p) if p.is_relative() => {
                    return Err(bad(
                        "metrics_file",
                        format!("metrics_file = {p:?}: write an absolute path (or \"\" for none)"),
                    ))
                }
                Some(p) => Some(p),
                None => Some(metrics_path(&socket)),
            },
            metrics_listen: match f.metrics_listen.as_deref() {
                None | Some("") => None,
                Some(a) => Some(a.parse().map_err(|e| {
                    bad(
                        "metrics_listen",
                        format!("metrics_listen = {a:?}: {e}; write an address and port, e.g. \"127.0.0.1:9642\" (or \"\" for none)"),
                    )
                })?),
            },
            socket,
            max_job_command: positive(
                "max_job_command",
                bytes("max_job_command", &f.max_job_command, 64 << 10)?,
            )?,
            max_job_environment: bytes("max_job_environment", &f.max_job_environment, 256 << 10)?,
            max_jobs_per_user: positive("max_jobs_per_user", f.max_jobs_per_user.unwrap_or(1000))?,
            max_user_bytes: positive(
                "max_user_bytes",
                bytes("max_user_bytes", &f.max_user_bytes, 64 << 20)?,
            )?,
            keep_finished_jobs_per_user: f.keep_finished_jobs_per_user.unwrap_or(1000),
            max_answer_bytes: positive(
                "max_answer_bytes",
                bytes("max_answer_bytes", &f.max_answer_bytes, 1 << 20)?,
            )?,
            user_request_workers: positive(
                "user_request_workers",
                f.user_request_workers.unwrap_or(1),
            )?,
            lookup_timeout: match &f.lookup_timeout {
                None => Duration::from_secs(2),
                Some(s) => match humantime::parse_duration(s) {
                    Ok(d) if !d.is_zero() && d <= Duration::from_secs(60) => d,
                    _ => {
                        return Err(bad(
                            "lookup_timeout",
                            format!("lookup_timeout = {s:?}: write a time from 1ms to 60s, e.g. \"2s\""),
                        ))
                    }
                },
            },
            max_locked_memory: bytes("max_locked_memory", &f.max_locked_memory, 8 << 20)?,
            max_job_output: positive(
                "max_job_output",
                bytes("max_job_output", &f.max_job_output, 1 << 30)?,
            )?,
        })
    }

    /// What one user may make the daemon hold and spend.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            job_command: self.max_job_command,
            job_environment: self.max_job_environment,
            jobs_per_user: self.max_jobs_per_user,
            user_bytes: self.max_user_bytes,
            answer_bytes: self.max_answer_bytes,
            lookup_timeout: self.lookup_timeout,
        }
    }

    /// Every key's effective value as it would be written in the file
    /// (None: unset), in KEYS' order: what `--check-config` prints.
    pub fn effective(&self) -> Vec<(&'static str, Option<String>)> {
        use memgang_core::units::{format_bytes, parse_bytes};
        let q = |s: &str| Some(format!("{s:?}"));
        // Rounded only where the rounding reads back the same.
        let bytes = |b: u64| match format_bytes(b) {
            f if parse_bytes(&f) == Ok(b) => q(&f),
            // A bare number reads as no size (it has no unit): bytes say so.
            _ => q(&format!("{b}B")),
        };
        let time = |d: Duration| q(&humantime::format_duration(d).to_string());
        let path = |p: &Path| q(&p.display().to_string());
        vec![
            ("pool_memory", bytes(self.pool_memory)),
            ("policy", q(&self.policy.to_string())),
            ("quantum", time(self.quantum)),
            (
                "max_switch_share",
                self.max_switch_share
                    .and_then(|s| q(&format!("{}%", s * 100.0))),
            ),
            ("switch", q(&self.switch.to_string())),
            ("swap_reserve", bytes(self.swap_reserve)),
            (
                "paging_prevention",
                Some(self.paging_prevention.to_string()),
            ),
            (
                "dynamic_coscheduling",
                Some(self.dynamic_coscheduling.to_string()),
            ),
            ("keep_finished_for", time(self.keep_finished_for)),
            (
                "keep_finished_jobs",
                Some(self.keep_finished_jobs.to_string()),
            ),
            ("state_dir", path(&self.state_dir)),
            ("socket", path(&self.socket)),
            (
                "metrics_file",
                self.metrics_file.as_deref().map_or(q(""), path),
            ),
            (
                "metrics_listen",
                q(&self
                    .metrics_listen
                    .map(|a| a.to_string())
                    .unwrap_or_default()),
            ),
            ("max_job_command", bytes(self.max_job_command)),
            ("max_job_environment", bytes(self.max_job_environment)),
            (
                "max_jobs_per_user",
                Some(self.max_jobs_per_user.to_string()),
            ),
            ("max_user_bytes", bytes(self.max_user_bytes)),
            (
                "keep_finished_jobs_per_user",
                Some(self.keep_finished_jobs_per_user.to_string()),
            ),
            ("max_answer_bytes", bytes(self.max_answer_bytes)),
            (
                "user_request_workers",
                Some(self.user_request_workers.to_string()),
            ),
            ("lookup_timeout", time(self.lookup_timeout)),
            ("max_locked_memory", bytes(self.max_locked_memory)),
            ("max_job_output", bytes(self.max_job_output)),
        ]
    }

    pub fn overlap(&self) -> Overlap {
        Overlap::default()
    }

    /// The quantum the policy is built with: its length and how far it may
    /// grow after a dear switch.
    pub fn quantum(&self) -> memgang_core::Quantum {
        memgang_core::Quantum {
            length: self.quantum,
            max_switch_share: self.max_switch_share,
        }
    }
}

/// The budgets the socket's requests are held to (the keys of the same
/// names, without `max_`); the defaults are the configuration's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budgets {
    pub job_command: u64,
    pub job_environment: u64,
    pub jobs_per_user: usize,
    pub user_bytes: u64,
    pub answer_bytes: u64,
    pub lookup_timeout: Duration,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Config::from_file(File::default(), 1 << 30)
            .expect("the defaults are valid")
            .budgets()
    }
}

/// A count or size that must not be zero (a budget of nothing would
/// refuse every job).
fn positive<T: PartialEq + Default + std::fmt::Display>(key: &'static str, v: T) -> Result<T> {
    if v == T::default() {
        return Err(bad(key, format!("{key} = {v}: must be greater than zero")));
    }
    Ok(v)
}

/// A value refused, with its key (so that [`Config::load`] can say the
/// key's line).
#[derive(Debug)]
pub struct BadKey {
    pub key: &'static str,
    message: String,
}

impl std::fmt::Display for BadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BadKey {}

fn bad(key: &'static str, message: String) -> anyhow::Error {
    BadKey { key, message }.into()
}

/// The line (from 1) where `key` is given in `text`.
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

/// Beside the socket, where node_exporter's textfile collector can be
/// pointed (it reads *.prom).
pub fn metrics_path(socket: &Path) -> PathBuf {
    socket.with_file_name("memgang.prom")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config> {
        Config::from_file(toml::from_str(text)?, 8 << 30)
    }

    #[test]
    fn defaults_work_without_a_file() {
        let c = parse("").unwrap();
        assert_eq!(c.pool_memory, 6 << 30);
        assert_eq!(c.policy, PolicyKind::Auto);
        assert_eq!(c.socket, PathBuf::from("/run/memgang/memgang.sock"));
        assert_eq!(c.keep_finished_for, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(c.keep_finished_jobs, 10_000);
        assert_eq!(
            c.metrics_file,
            Some(PathBuf::from("/run/memgang/memgang.prom"))
        );
    }

    #[test]
    fn metrics_listen_is_an_address_or_none() {
        assert_eq!(parse("").unwrap().metrics_listen, None);
        assert_eq!(
            parse("metrics_listen = \"127.0.0.1:9642\"")
                .unwrap()
                .metrics_listen,
            Some("127.0.0.1:9642".parse().unwrap())
        );
        let e = parse("metrics_listen = \"localhost\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("metrics_listen") && e.contains("127.0.0.1:9642"),
            "{e}"
        );
    }

    #[test]
    fn metrics_file_is_an_absolute_path_or_none() {
        let c = parse("metrics_file = \"/var/lib/prometheus/node-exporter/memgang.prom\"").unwrap();
        assert_eq!(
            c.metrics_file,
            Some(PathBuf::from(
                "/var/lib/prometheus/node-exporter/memgang.prom"
            ))
        );
        assert_eq!(parse("metrics_file = \"\"").unwrap().metrics_file, None);
        let e = parse("metrics_file = \"memgang.prom\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("metrics_file") && e.contains("absolute"), "{e}");
        // Beside a socket moved elsewhere by default.
        let c = parse("socket = \"/tmp/m/s.sock\"").unwrap();
        assert_eq!(c.metrics_file, Some(PathBuf::from("/tmp/m/memgang.prom")));
    }

    #[test]
    fn the_shipped_file_says_the_defaults() {
        let shipped = parse(include_str!("../../../dist/memgang.toml")).unwrap();
        let default = parse("").unwrap();
        assert_eq!(format!("{shipped:?}"), format!("{default:?}"));
    }

    /// Every field of the file is in KEYS (serde lists the fields it
    /// expects when it meets an unknown one), and every key's documented
    /// default means the same as leaving the key out.
    #[test]
    fn keys_document_every_field_with_the_codes_default() {
        let e = toml::from_str::<File>("no_such_key = 1")
            .unwrap_err()
            .to_string();
        let expected = e.split("expected one of").nth(1).expect(&e);
        let mut fields: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let keys: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        let mut sorted = keys.clone();
        fields.sort();
        sorted.sort();
        assert_eq!(fields, sorted, "KEYS must document every field of File");
        let default = format!("{:?}", parse("").unwrap());
        let shown: Vec<&str> = parse("").unwrap().effective().iter().map(|e| e.0).collect();
        assert_eq!(shown, keys, "effective() shows every key, in KEYS' order");
        for k in KEYS {
            if let KeyDefault::Value(v) = k.default {
                let c = parse(&format!("{} = {v}", k.name))
                    .unwrap_or_else(|e| panic!("{} = {v}: {e:#}", k.name));
                assert_eq!(format!("{c:?}"), default, "{} = {v}", k.name);
            }
        }
    }

    #[test]
    fn a_refused_value_names_its_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        std::fs::write(
            &path,
            "# a comment\npolicy = \"gang\"\n  quantum  = \"0s\"\n",
        )
        .unwrap();
        let e = format!("{:#}", Config::load(&path, true).unwrap_err());
        assert!(
            e.starts_with(&format!("{}:3: quantum", path.display())),
            "{e}"
        );
        std::fs::write(&path, "policy = \"gang\"\npool_memroy = \"1G\"\n").unwrap();
        let e = format!("{:#}", Config::load(&path, true).unwrap_err());
        assert!(e.contains("line 2") && e.contains("pool_memroy"), "{e}");
    }

    #[test]
    fn budgets_have_defaults_and_refuse_nothing() {
        let c = parse("").unwrap();
        assert_eq!(
            (c.max_job_command, c.max_job_environment, c.max_user_bytes),
            (64 << 10, 256 << 10, 64 << 20)
        );
        assert_eq!(
            (c.max_jobs_per_user, c.keep_finished_jobs_per_user),
            (1000, 1000)
        );
        assert_eq!(c.lookup_timeout, Duration::from_secs(2));
        assert_eq!(c.budgets(), Budgets::default());
        for bad in [
            "max_job_command = \"0\"",
            "max_jobs_per_user = 0",
            "user_request_workers = 0",
            "lookup_timeout = \"0s\"",
            "lookup_timeout = \"1h\"",
            "max_answer_bytes = \"0\"",
            "max_job_output = \"0\"",
        ] {
            let key = bad.split(' ').next().unwrap();
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(key), "{bad}: {e}");
        }
        let c = parse("max_locked_memory = \"64M\"\nuser_request_workers = 2").unwrap();
        assert_eq!((c.max_locked_memory, c.user_request_workers), (64 << 20, 2));
        assert_eq!(parse("").unwrap().max_job_output, 1 << 30);
    }

    #[test]
    fn bad_values_name_the_key() {
        let e = parse("pool_memory = \"lots\"").unwrap_err().to_string();
        assert!(e.contains("pool_memory"), "{e}");
        // A size without its unit is refused, not read as bytes; zero
        // needs none.
        let e = parse("swap_reserve = \"512\"").unwrap_err().to_string();
        assert_eq!(
            e,
            "swap_reserve \"512\" has no unit: write 512M, 512MiB or 512G (512B if bytes are meant)"
        );
        assert_eq!(parse("swap_reserve = \"0\"").unwrap().swap_reserve, 0);
        let e = parse("quantum = \"0s\"").unwrap_err().to_string();
        assert!(e.contains("quantum"), "{e}");
        let e = parse("max_switch_share = \"half\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("max_switch_share") && e.contains("\"5%\""),
            "{e}"
        );
        assert_eq!(
            parse("max_switch_share = \"5%\"").unwrap().max_switch_share,
            Some(0.05)
        );
        assert!(parse("pool_memroy = \"1G\"").is_err());
        let e = parse("keep_finished_for = \"a week\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("keep_finished_for"), "{e}");
        let c = parse("keep_finished_for = \"1h\"\nkeep_finished_jobs = 5").unwrap();
        assert_eq!(
            (c.keep_finished_for, c.keep_finished_jobs),
            (Duration::from_secs(3600), 5)
        );
    }
}
