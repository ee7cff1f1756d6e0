//! The experiment file (TOML): which jobs to run and how. Every error names
//! the file, the line and what to write instead.

use memgang_core::packing;
use memgang_core::units::{format_bytes, parse_size};
use memgang_core::{JobSpec, Overlap, PolicyKind, Quantum, Switching};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// Counters are sampled this often: the papers' paging traces use 100 ms
/// bins, fine enough to see a switch and cheap enough (a few file reads per
/// job) not to disturb the jobs.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
pub const DEFAULT_QUANTUM: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ExperimentError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobDef {
    pub spec: JobSpec,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub source: Option<PathBuf>,
    pub policy: PolicyKind,
    pub quantum: Duration,
    /// The most of the time switching may take: a quantum after a dear
    /// switch grows until it does (`memgang_core::Quantum`); None: fixed.
    pub max_switch_share: Option<f64>,
    /// How gang switches treat memory: `lru` (the kernel) or `ao`, `ai`, ...
    pub switch: Switching,
    /// How `hybrid`/`auto` overlap a set switch's page-in with the rest.
    pub overlap: Overlap,
    /// Paper 003's dynamic coscheduling over the policy: communicating
    /// jobs get a higher CPU priority while their messages flow.
    pub dynamic_coscheduling: bool,
    pub pool_memory: u64,
    pub sample_interval: Duration,
    pub jobs: Vec<JobDef>,
}

/// Command-line settings that take precedence over the file's.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub policy: Option<PolicyKind>,
    pub quantum: Option<Duration>,
    pub max_switch_share: Option<f64>,
    pub switch: Option<Switching>,
    pub overlap: Option<Overlap>,
    pub dynamic_coscheduling: Option<bool>,
    pub pool_memory: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    name: Option<String>,
    policy: Option<Spanned<String>>,
    quantum: Option<Spanned<String>>,
    max_switch_share: Option<Spanned<toml::Value>>,
    switch: Option<Spanned<String>>,
    overlap: Option<Spanned<String>>,
    dynamic_coscheduling: Option<bool>,
    pool_memory: Option<Spanned<String>>,
    sample_interval: Option<Spanned<String>>,
    #[serde(default, rename = "job")]
    jobs: Vec<Spanned<FileJob>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJob {
    name: Spanned<String>,
    command: Spanned<Vec<String>>,
    ranks: Option<Spanned<i64>>,
    memory: Option<Spanned<String>>,
    arrival: Option<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

impl Experiment {
    /// The quantum the policy is built with: its length and how far it may
    /// grow after a dear switch.
    pub fn quantum(&self) -> memgang_core::Quantum {
        memgang_core::Quantum {
            length: self.quantum,
            max_switch_share: self.max_switch_share,
        }
    }

    pub fn load(path: &Path, overrides: &Overrides) -> Result<Self, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|e| ExperimentError {
            file: path.display().to_string(),
            line: None,
            message: format!("cannot read the experiment file: {e}"),
        })?;
        let mut exp = Self::parse(&text, &path.display().to_string(), overrides)?;
        exp.source = Some(path.to_path_buf());
        Ok(exp)
    }

    /// Parse an experiment; `file` is only used in messages.
    pub fn parse(text: &str, file: &str, overrides: &Overrides) -> Result<Self, ExperimentError> {
        let cx = Cx { text, file };
        let doc: FileDoc =
            toml::from_str(text).map_err(|e| cx.err(e.span(), e.message().to_string()))?;
        let policy = match (overrides.policy, &doc.policy) {
            (Some(p), _) => p,
            (None, Some(p)) => p.get_ref().parse().map_err(|m| cx.err(Some(p.span()), m))?,
            (None, None) => PolicyKind::Auto,
        };
        let quantum = match (overrides.quantum, &doc.quantum) {
            (Some(q), _) => q,
            (None, Some(q)) => cx.duration(q, "quantum")?,
            (None, None) => DEFAULT_QUANTUM,
        };
        let max_switch_share = cx.max_switch_share(&doc, overrides, policy)?;
        let switch = match (overrides.switch, &doc.switch) {
            (Some(s), _) => s,
            (None, Some(s)) => s.get_ref().parse().map_err(|m| cx.err(Some(s.span()), m))?,
            (None, None) => Switching::LRU,
        };
        let overlap = cx.overlap(&doc, overrides, policy)?;
        let sample_interval = match &doc.sample_interval {
            Some(v) => cx.duration(v, "sample_interval")?,
            None => DEFAULT_SAMPLE_INTERVAL,
        };
        let pool_memory = cx.pool_memory(&doc, overrides)?;
        let jobs = cx.jobs(&doc.jobs)?;
        if policy == PolicyKind::Hybrid {
            check_packable(&jobs, pool_memory)
                .map_err(|m| cx.err(doc.pool_memory.as_ref().map(|p| p.span()), m))?;
        }
        let name = doc.name.unwrap_or_else(|| {
            Path::new(file)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "experiment".into())
        });
        Ok(Experiment {
            name,
            source: None,
            policy,
            quantum,
            max_switch_share,
            switch,
            overlap,
            dynamic_coscheduling: overrides
                .dynamic_coscheduling
                .or(doc.dynamic_coscheduling)
                .unwrap_or(false),
            pool_memory,
            sample_interval,
            jobs,
        })
    }

    pub fn specs(&self) -> Vec<JobSpec> {
        self.jobs.iter().map(|j| j.spec.clone()).collect()
    }

    /// The same jobs under another policy (the batch reference run).
    pub fn with_policy(&self, policy: PolicyKind) -> Self {
        Experiment {
            policy,
            ..self.clone()
        }
    }
}

/// The file being parsed, for errors that name it and the line.
struct Cx<'a> {
    text: &'a str,
    file: &'a str,
}

impl Cx<'_> {
    fn err(&self, span: Option<std::ops::Range<usize>>, message: String) -> ExperimentError {
        ExperimentError {
            file: self.file.to_string(),
            line: span.map(|s| line_of(self.text, s.start)),
            message,
        }
    }

    /// A duration setting (`what` names it), more than zero.
    fn duration(&self, v: &Spanned<String>, what: &str) -> Result<Duration, ExperimentError> {
        let d = humantime::parse_duration(v.get_ref()).map_err(|e| {
            self.err(
                Some(v.span()),
                format!(
                    "invalid {what} {:?}: {e}; write e.g. \"10s\" or \"500ms\"",
                    v.get_ref()
                ),
            )
        })?;
        if d.is_zero() {
            return Err(self.err(Some(v.span()), format!("{what} must be greater than zero")));
        }
        Ok(d)
    }

    /// A size setting (`what` names it), with its unit.
    fn size(&self, v: &Spanned<String>, what: &str) -> Result<u64, ExperimentError> {
        parse_size(what, v.get_ref()).map_err(|m| self.err(Some(v.span()), m))
    }

    /// `max_switch_share`, a percentage or a fraction, for the policies
    /// whose quantum a switch may grow.
    fn max_switch_share(
        &self,
        doc: &FileDoc,
        overrides: &Overrides,
        policy: PolicyKind,
    ) -> Result<Option<f64>, ExperimentError> {
        let max_switch_share = match (overrides.max_switch_share, &doc.max_switch_share) {
            (Some(m), _) => Some(m),
            (None, Some(v)) => {
                let text = match v.get_ref() {
                    toml::Value::String(t) => t.clone(),
                    toml::Value::Float(f) => f.to_string(),
                    other => other.to_string(),
                };
                Some(Quantum::parse_share(&text).map_err(|m| self.err(Some(v.span()), m))?)
            }
            (None, None) => None,
        };
        if max_switch_share.is_some() && matches!(policy, PolicyKind::Batch | PolicyKind::Cosched) {
            return Err(self.err(
                doc.max_switch_share.as_ref().map(|v| v.span()),
                format!("max_switch_share grows the quantum after a switch, which policy {policy} does not make: use gang, hybrid or auto, or remove it"),
            ));
        }
        Ok(max_switch_share)
    }

    /// `overlap`, which only the policies that make set switches take.
    fn overlap(
        &self,
        doc: &FileDoc,
        overrides: &Overrides,
        policy: PolicyKind,
    ) -> Result<Overlap, ExperimentError> {
        let overlap = match (overrides.overlap, &doc.overlap) {
            (Some(o), _) => Some((o, None)),
            (None, Some(o)) => Some((
                o.get_ref()
                    .parse()
                    .map_err(|m| self.err(Some(o.span()), m))?,
                Some(o.span()),
            )),
            (None, None) => None,
        };
        if let Some((o, span)) = &overlap {
            if !policy.uses_overlap() {
                return Err(self.err(
                    span.clone(),
                    format!(
                        "overlap = {:?} applies to set switches, which policy {policy} does not make: use policy hybrid or auto, or remove the overlap",
                        o.name()
                    ),
                ));
            }
        }
        Ok(overlap.map(|(o, _)| o).unwrap_or_default())
    }

    fn pool_memory(&self, doc: &FileDoc, overrides: &Overrides) -> Result<u64, ExperimentError> {
        let pool_memory = match (overrides.pool_memory, &doc.pool_memory) {
            (Some(m), _) => m,
            (None, Some(m)) => self.size(m, "pool_memory")?,
            (None, None) => {
                return Err(self.err(None, "no pool_memory: say how much memory the jobs share, e.g. pool_memory = \"1G\" (or --pool-memory)".into()))
            }
        };
        if pool_memory < 16 << 20 {
            return Err(self.err(
                doc.pool_memory.as_ref().map(|p| p.span()),
                "pool_memory must be at least 16M".into(),
            ));
        }
        Ok(pool_memory)
    }

    /// The `[[job]]`s, at least one, with unique names.
    fn jobs(&self, file_jobs: &[Spanned<FileJob>]) -> Result<Vec<JobDef>, ExperimentError> {
        if file_jobs.is_empty() {
            return Err(self.err(
                None,
                "no jobs: add at least one [[job]] with a name and a command".into(),
            ));
        }
        let mut jobs: Vec<JobDef> = Vec::new();
        for job in file_jobs {
            let j = job.get_ref();
            let name = self.job_name(j)?;
            if jobs.iter().any(|o| &o.spec.name == name) {
                return Err(self.err(
                    Some(j.name.span()),
                    format!("duplicate job name {name:?}: job names must be unique"),
                ));
            }
            jobs.push(self.job(j)?);
        }
        Ok(jobs)
    }

    /// A job's name, which names its cgroup.
    fn job_name<'j>(&self, j: &'j FileJob) -> Result<&'j String, ExperimentError> {
        let name = j.name.get_ref();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            || name.starts_with('.')
        {
            return Err(self.err(Some(j.name.span()), format!("invalid job name {name:?}: use letters, digits, '-', '_' and '.' (it names the job's cgroup)")));
        }
        Ok(name)
    }

    /// A job whose name [`Cx::job_name`] took.
    fn job(&self, j: &FileJob) -> Result<JobDef, ExperimentError> {
        let name = j.name.get_ref();
        if j.command.get_ref().is_empty() || j.command.get_ref()[0].is_empty() {
            return Err(self.err(Some(j.command.span()), format!("job {name:?}: command is empty: give the program and its arguments, e.g. [\"memgang-workload\", \"--mib\", \"100\"]")));
        }
        let ranks = match &j.ranks {
            None => 1,
            Some(r) if (1..=4096).contains(r.get_ref()) => *r.get_ref() as u32,
            Some(r) => {
                return Err(self.err(
                    Some(r.span()),
                    format!(
                        "job {name:?}: ranks must be between 1 and 4096, not {}",
                        r.get_ref()
                    ),
                ))
            }
        };
        let memory_bytes = (j.memory.as_ref())
            .map(|m| self.size(m, &format!("job {name:?}: memory")))
            .transpose()?;
        let arrival = match &j.arrival {
            None => Duration::ZERO,
            Some(a) => humantime::parse_duration(a.get_ref()).map_err(|e| {
                self.err(
                    Some(a.span()),
                    format!(
                        "job {name:?}: invalid arrival {:?}: {e}; write e.g. \"0s\" or \"30s\"",
                        a.get_ref()
                    ),
                )
            })?,
        };
        Ok(JobDef {
            spec: JobSpec {
                name: name.clone(),
                ranks,
                memory_bytes,
                arrival,
                placed: None,
            },
            command: j.command.get_ref().clone(),
            env: j.env.clone(),
        })
    }
}

/// `hybrid` promises quanta without paging by packing jobs into sets that
/// fit in the pool. When every job declares more than a set may hold, no
/// set can hold even one job without paging, so that promise cannot be
/// kept: say so rather than run a slow gang under another name. (`auto`
/// and jobs without a declared size are left to the measured peaks.)
fn check_packable(jobs: &[JobDef], pool: u64) -> Result<(), String> {
    let cap = packing::capacity(pool);
    let sizes: Option<Vec<(&str, u64)>> = jobs
        .iter()
        .map(|j| {
            j.spec
                .memory_bytes
                .map(|m| (j.spec.name.as_str(), packing::estimate(Some(m), None)))
        })
        .collect();
    let Some(smallest) = sizes.and_then(|s| s.into_iter().min_by_key(|(_, b)| *b)) else {
        return Ok(());
    };
    if smallest.1 <= cap {
        return Ok(());
    }
    Err(format!(
        "pool_memory {} is too small for policy hybrid to pack any job: a set may hold {} (the pool less 1/16), and the smallest job, {:?}, needs {} (its memory plus {} per job); every job would page even alone. Give a pool of at least {}, or use policy gang",
        format_bytes(pool),
        format_bytes(cap),
        smallest.0,
        format_bytes(smallest.1),
        format_bytes(packing::JOB_OVERHEAD),
        // Rounded up to whole MiB: the advice must be enough.
        format_bytes(
            (smallest.1 * packing::MARGIN_DIVISOR)
                .div_ceil(packing::MARGIN_DIVISOR - 1)
                .div_ceil(1 << 20)
                << 20
        ),
    ))
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
policy = "gang"
quantum = "10s"
pool_memory = "1G"
[[job]]
name = "a"
command = ["memgang-workload", "--mib", "700"]
ranks = 2
memory = "700M"
arrival = "5s"
[[job]]
name = "b"
command = ["true"]
"#;

    fn parse(text: &str) -> Result<Experiment, ExperimentError> {
        Experiment::parse(text, "exp.toml", &Overrides::default())
    }

    #[test]
    fn parses_the_documented_shape() {
        let e = parse(GOOD).unwrap();
        assert_eq!(e.policy, PolicyKind::Gang);
        assert_eq!(e.quantum, Duration::from_secs(10));
        assert_eq!(e.pool_memory, 1 << 30);
        assert_eq!(e.jobs[0].spec.ranks, 2);
        assert_eq!(e.jobs[0].spec.memory_bytes, Some(700 << 20));
        assert_eq!(e.jobs[0].spec.arrival, Duration::from_secs(5));
        assert_eq!(e.jobs[1].spec.ranks, 1);
        assert_eq!(e.name, "exp");
    }

    #[test]
    fn overrides_win() {
        let o = Overrides {
            policy: Some(PolicyKind::Batch),
            quantum: Some(Duration::from_secs(3)),
            max_switch_share: None,
            switch: Some("ao/ai".parse().unwrap()),
            overlap: None,
            dynamic_coscheduling: None,
            pool_memory: Some(2 << 30),
        };
        let e = Experiment::parse(GOOD, "x", &o).unwrap();
        assert_eq!(e.switch.to_string(), "ao/ai");
        assert_eq!(
            (e.policy, e.quantum, e.pool_memory),
            (PolicyKind::Batch, Duration::from_secs(3), 2 << 30)
        );
    }

    fn error_of(text: &str) -> ExperimentError {
        parse(text).unwrap_err()
    }

    #[test]
    fn a_switch_share_is_a_percentage_or_a_fraction_for_policies_that_switch() {
        for v in ["\"5%\"", "0.05"] {
            let e = parse(&GOOD.replace(
                "quantum = \"10s\"",
                &format!("quantum = \"10s\"\nmax_switch_share = {v}"),
            ))
            .unwrap();
            assert_eq!(e.max_switch_share, Some(0.05), "{v}");
        }
        assert_eq!(parse(GOOD).unwrap().max_switch_share, None);
        let e = error_of(&GOOD.replace(
            "quantum = \"10s\"",
            "quantum = \"10s\"\nmax_switch_share = \"150%\"",
        ));
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("below 100%"), "{e}");
        let e = error_of(
            &GOOD
                .replace("policy = \"gang\"", "policy = \"batch\"")
                .replace("quantum = \"10s\"", "max_switch_share = \"5%\""),
        );
        assert!(e.message.contains("policy batch does not make"), "{e}");
    }

    #[test]
    fn errors_carry_the_line() {
        let e = error_of(&GOOD.replace("memory = \"700M\"", "memory = \"70QM\""));
        assert_eq!(e.line, Some(9), "{e}");
        assert!(
            e.to_string()
                .starts_with("exp.toml:9: job \"a\": memory \"70QM\" is not a size"),
            "{e}"
        );
        // A number without a unit is refused, not read as bytes.
        let e = error_of(&GOOD.replace("memory = \"700M\"", "memory = \"700\""));
        assert_eq!(
            e.to_string(),
            "exp.toml:9: job \"a\": memory \"700\" has no unit: write 700M, 700MiB or 700G \
             (700B if bytes are meant)"
        );
        let e = error_of(&GOOD.replace("pool_memory = \"1G\"", "pool_memory = \"1\""));
        assert!(
            e.to_string()
                .starts_with("exp.toml:4: pool_memory \"1\" has no unit: write 1M"),
            "{e}"
        );

        let e =
            error_of(&GOOD.replace("quantum = \"10s\"", "quantum = \"10s\"\nswitch = \"ao/zz\""));
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("unknown switch mechanism"), "{e}");

        let e = error_of(&GOOD.replace("policy = \"gang\"", "policy = \"fifo\""));
        assert_eq!(e.line, Some(2), "{e}");

        let e = error_of(&GOOD.replace("ranks = 2", "ranks = 0"));
        assert_eq!(e.line, Some(8), "{e}");

        // Without a policy, memgang chooses: auto.
        let e = parse(&GOOD.replace("policy = \"gang\"\n", "")).unwrap();
        assert_eq!(e.policy, PolicyKind::Auto);

        // An overlap policy only means something to hybrid and auto.
        let e = error_of(&GOOD.replace(
            "quantum = \"10s\"",
            "quantum = \"10s\"\noverlap = \"prefetch\"",
        ));
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("use policy hybrid or auto"), "{e}");
        let e = error_of(&GOOD.replace(
            "policy = \"gang\"",
            "policy = \"hybrid\"\noverlap = \"eager\"",
        ));
        assert_eq!(e.line, Some(3), "{e}");
        let e = parse(&GOOD.replace(
            "policy = \"gang\"",
            "policy = \"hybrid\"\noverlap = \"prefetch\"",
        ))
        .unwrap();
        assert_eq!(
            (e.policy, e.overlap),
            (PolicyKind::Hybrid, memgang_core::Overlap::Prefetch)
        );

        // A pool that no job fits in: hybrid says so, with the pool's line
        // and the size it would need (700M + 4M, plus the 1/16 margin).
        let tight = GOOD
            .replace("policy = \"gang\"", "policy = \"hybrid\"")
            .replace("pool_memory = \"1G\"", "pool_memory = \"512M\"")
            .replace("[\"true\"]", "[\"true\"]\nmemory = \"600M\"");
        let e = error_of(&tight);
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("too small for policy hybrid"), "{e}");
        assert!(e.message.contains("\"b\", needs 604M"), "{e}");
        assert!(e.message.contains("at least 645M"), "{e}");
        // One job that fits is enough to pack; gang and auto are not held
        // to hybrid's promise; a job of unknown size may be small.
        assert!(parse(&tight.replace("memory = \"600M\"", "memory = \"400M\"")).is_ok());
        assert!(parse(&tight.replace("policy = \"hybrid\"", "policy = \"gang\"")).is_ok());
        assert!(parse(&tight.replace("policy = \"hybrid\"\n", "")).is_ok());
        assert!(parse(&tight.replace("memory = \"600M\"", "")).is_ok());

        let e = error_of(&GOOD.replace("quantum = \"10s\"", "quantum = \"ten\""));
        assert_eq!(e.line, Some(3), "{e}");

        let e = error_of(&GOOD.replace("ranks = 2", "rank = 2"));
        assert_eq!(e.line, Some(8), "{e}");
        assert!(e.message.contains("unknown field"), "{e}");

        let e = error_of(&GOOD.replace("name = \"b\"", "name = \"a\""));
        assert_eq!(e.line, Some(12), "{e}");

        let e = error_of(&GOOD.replace("[\"true\"]", "[]"));
        assert_eq!(e.line, Some(13), "{e}");

        let e = error_of(&GOOD.replace("pool_memory = \"1G\"\n", "pool_memory = [\n"));
        assert!(e.line.is_some(), "{e}");
    }

    #[test]
    fn missing_essentials_are_explained() {
        assert!(error_of("pool_memory = \"1G\"").message.contains("no jobs"));
        assert!(error_of("[[job]]\nname=\"a\"\ncommand=[\"true\"]")
            .message
            .contains("no pool_memory"));
        assert!(error_of(&GOOD.replace("name = \"a\"", "name = \"../a\""))
            .message
            .contains("invalid job name"));
    }
}
