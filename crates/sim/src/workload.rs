//! Where jobs come from: a Standard Workload Format trace read line by line,
//! or a generator (paper 003 §5: Pareto lifetimes and memory; Poisson or
//! closed-loop arrivals; widths powers of two).

use crate::rng::Rng;
use memgang_core::Time;
use std::io::BufRead;
use std::time::Duration;

/// A job as the simulator needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceJob {
    pub name: String,
    pub arrival: Time,
    pub ranks: u32,
    /// Time it computes when it runs alone with all its memory, s.
    pub runtime_s: f64,
    /// Memory per rank, bytes (SWF's unit: per processor).
    pub memory_per_rank: u64,
    /// Share of its run time alone a rank keeps its CPU busy (0, 1]: SWF's
    /// average CPU time per processor (field 6) over the run time; 1 when
    /// the trace does not say. Ranks that wait (messages, I/O) leave CPU
    /// to the jobs sharing their node, as the measured co-scheduled runs
    /// show (docs/sim.md).
    pub cpu_share: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("{path}:{line}: {msg}")]
    BadLine {
        path: String,
        line: u64,
        msg: String,
    },
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// A stream of jobs in arrival order.
pub trait Workload {
    fn next_job(&mut self) -> Result<Option<TraceJob>, WorkloadError>;
    /// A job finished at `now`. A closed-loop workload answers with the job
    /// that takes its place, arriving `now`.
    fn job_finished(&mut self, _now: Time) -> Option<TraceJob> {
        None
    }
    /// Lines skipped as malformed, with the first few reasons.
    fn skipped(&self) -> (u64, &[String]) {
        (0, &[])
    }
    /// Well-formed jobs that cannot be simulated (no run time or no
    /// processor count: cancelled before they ran).
    fn unusable(&self) -> u64 {
        0
    }
}

/// What to do with a malformed SWF line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadLines {
    /// Stop with an error naming the line.
    Refuse,
    /// Skip it, counting it and keeping the first reasons for the report.
    Skip,
}

const SWF_FIELDS: usize = 18;
/// Longest time a trace may name, s (about 317 years). Archive traces span
/// a few years; anything longer is a unit mistake or garbage, and refusing
/// it keeps every simulated instant (arrival plus stretched run time) far
/// inside what `Duration` holds.
const MAX_TRACE_S: f64 = 1e10;
/// Most memory per processor a trace may name, KB (1 PiB): far above any
/// machine, and small enough that a job's total cannot overflow a u64.
const MAX_MEMORY_KB: f64 = (1u64 << 40) as f64;
const KEEP_REASONS: usize = 5;

/// A Standard Workload Format trace (Parallel Workloads Archive, 18 fields
/// per line, `;` comments, -1 for unknown), read as the run goes.
///
/// Jobs without a run time (field 4) or a processor count (field 5, else 8)
/// cannot be simulated: they are counted and passed over; memory is field 7
/// (used), else 10 (requested), in KB per processor, else `default_memory`.
pub struct Swf<R> {
    path: String,
    lines: R,
    line_no: u64,
    bad: BadLines,
    default_memory: u64,
    skipped: u64,
    reasons: Vec<String>,
    unusable: u64,
    buf: String,
    /// The last job's submit time as written, for the order check.
    last_arrival: f64,
    header: SwfHeader,
    /// The first job line, read by `read_header` and not parsed yet.
    pending: bool,
    /// Submit times are divided by this (`with_load_factor`).
    load_factor: f64,
    /// Memory drawn for jobs the trace gives none (`with_memory_draw`).
    draw: Option<MemoryDraw>,
}

/// Memory per processor for the jobs of a trace that records none: Pareto
/// with the default memory as its mean (as the generator draws it, paper
/// 003 §5), so that a log without memory gives jobs of many sizes rather
/// than one.
struct MemoryDraw {
    rng: Rng,
    shape: f64,
    cap: f64,
}

/// What an SWF header (its leading `; Field: value` comments) says about
/// the machine the trace came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SwfHeader {
    /// `; MaxNodes:`: nodes of the machine.
    pub max_nodes: Option<u64>,
    /// `; MaxProcs:`: processors of the machine.
    pub max_procs: Option<u64>,
}

impl SwfHeader {
    /// Takes what a header comment line says, if it is one we use.
    fn note(&mut self, comment: &str) {
        let Some((key, value)) = comment.trim_start_matches(';').split_once(':') else {
            return;
        };
        let value = value.split_whitespace().next().and_then(|v| v.parse().ok());
        match key.trim() {
            "MaxNodes" => self.max_nodes = value.filter(|v| *v > 0),
            "MaxProcs" => self.max_procs = value.filter(|v| *v > 0),
            _ => {}
        }
    }
}

impl<R: BufRead> Swf<R> {
    pub fn new(path: impl Into<String>, lines: R, bad: BadLines, default_memory: u64) -> Self {
        Swf {
            path: path.into(),
            lines,
            line_no: 0,
            bad,
            default_memory,
            skipped: 0,
            reasons: Vec::new(),
            unusable: 0,
            buf: String::new(),
            last_arrival: 0.0,
            header: SwfHeader::default(),
            pending: false,
            load_factor: 1.0,
            draw: None,
        }
    }

    /// Draws the memory per processor of the jobs the trace gives none
    /// from a Pareto distribution of this `shape` (> 1; smaller, heavier
    /// tail) whose mean is the default memory, at most `cap` (a node's
    /// share), seeded by `seed`, instead of giving them all the default.
    pub fn with_memory_draw(mut self, seed: u64, shape: f64, cap: u64) -> Self {
        assert!(shape > 1.0, "Pareto shape {shape}");
        self.draw = Some(MemoryDraw {
            rng: Rng::new(seed),
            shape,
            cap: cap as f64,
        });
        self
    }

    /// Offers `factor` times the trace's load: every submit time is divided
    /// by it, so the gaps between arrivals shrink and the run times stay
    /// (the usual way to load an archive trace more, e.g. Feitelson's
    /// workload modelling; a trace then fits a smaller or busier cluster).
    /// `factor` must be finite and positive: the command line checks it.
    pub fn with_load_factor(mut self, factor: f64) -> Self {
        assert!(factor.is_finite() && factor > 0.0, "load factor {factor}");
        self.load_factor = factor;
        self
    }

    /// Reads the header comments (up to the first job line, which is kept
    /// for `next_job`) and returns what they say about the machine.
    pub fn read_header(&mut self) -> Result<SwfHeader, WorkloadError> {
        if !self.pending {
            self.pending = self.next_line()?;
        }
        Ok(self.header)
    }

    /// The header comments seen so far.
    pub fn header(&self) -> SwfHeader {
        self.header
    }

    /// Reads up to the next non-comment line into `buf`; false at the end.
    fn next_line(&mut self) -> Result<bool, WorkloadError> {
        loop {
            self.buf.clear();
            let n = self
                .lines
                .read_line(&mut self.buf)
                .map_err(|source| WorkloadError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            if n == 0 {
                return Ok(false);
            }
            self.line_no += 1;
            let line = self.buf.trim();
            if line.starts_with(';') {
                self.header.note(line);
            } else if !line.is_empty() {
                return Ok(true);
            }
        }
    }

    /// `Ok(None)`: well formed, but the job cannot be simulated. With the
    /// job, its submit time as written (before the load factor), and
    /// whether the trace gave its memory.
    fn parse(&self, line: &str) -> Result<Option<(TraceJob, f64, bool)>, String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != SWF_FIELDS {
            return Err(format!("expected {SWF_FIELDS} fields, found {}", f.len()));
        }
        let num = |i: usize| -> Result<f64, String> {
            f[i - 1]
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("field {i} is {:?}, not a number", f[i - 1]))
        };
        for i in 1..=SWF_FIELDS {
            num(i)?;
        }
        let within = |i: usize, what: &str, max: f64, unit: &str| -> Result<f64, String> {
            let v = num(i)?;
            if v > max {
                return Err(format!(
                    "{what} (field {i}) is {} {unit}, more than the {max:e} {unit} a trace may name: \
                     check the trace's units",
                    f[i - 1]
                ));
            }
            Ok(v)
        };
        let submit = within(2, "submit time", MAX_TRACE_S, "s")?;
        if submit < 0.0 {
            return Err("submit time (field 2) is unknown".into());
        }
        if submit < self.last_arrival {
            return Err(format!(
                "submit time {submit} is before the previous job's {}: SWF traces are sorted by submit time",
                self.last_arrival
            ));
        }
        let runtime = within(4, "run time", MAX_TRACE_S, "s")?;
        let cpu = within(6, "average CPU time", MAX_TRACE_S, "s")?;
        let procs = [num(5)?, num(8)?].into_iter().find(|p| *p >= 1.0);
        let Some(procs) = procs.filter(|_| runtime > 0.0) else {
            return Ok(None);
        };
        let mem_kb = [
            within(7, "used memory", MAX_MEMORY_KB, "KB")?,
            within(10, "requested memory", MAX_MEMORY_KB, "KB")?,
        ]
        .into_iter()
        .find(|m| *m > 0.0);
        let job = TraceJob {
            name: f[0].to_string(),
            arrival: Duration::from_secs_f64(submit / self.load_factor),
            ranks: procs.min(u32::MAX as f64) as u32,
            runtime_s: runtime,
            memory_per_rank: mem_kb.map_or(self.default_memory, |kb| (kb * 1024.0) as u64),
            // Unknown (-1) or none recorded (0): the rank computes all the
            // time. More than the run time (multithreaded ranks): all.
            cpu_share: if cpu > 0.0 {
                (cpu / runtime).min(1.0)
            } else {
                1.0
            },
        };
        Ok(Some((job, submit, mem_kb.is_some())))
    }
}

impl<R: BufRead> Workload for Swf<R> {
    fn next_job(&mut self) -> Result<Option<TraceJob>, WorkloadError> {
        loop {
            if !std::mem::take(&mut self.pending) && !self.next_line()? {
                return Ok(None);
            }
            let line = self.buf.trim();
            match self.parse(line) {
                Ok(Some((mut job, submit, given))) => {
                    self.last_arrival = submit;
                    if let (false, Some(d)) = (given, self.draw.as_mut()) {
                        job.memory_per_rank =
                            d.rng.pareto(self.default_memory as f64, d.shape, d.cap) as u64;
                    }
                    return Ok(Some(job));
                }
                Ok(None) => self.unusable += 1,
                Err(msg) if self.bad == BadLines::Skip => {
                    self.skipped += 1;
                    if self.reasons.len() < KEEP_REASONS {
                        self.reasons.push(format!("line {}: {msg}", self.line_no));
                    }
                }
                Err(msg) => {
                    return Err(WorkloadError::BadLine {
                        path: self.path.clone(),
                        line: self.line_no,
                        msg: format!("{msg} (pass --skip-bad-lines to skip such lines)"),
                    })
                }
            }
        }
    }

    fn skipped(&self) -> (u64, &[String]) {
        (self.skipped, &self.reasons)
    }

    fn unusable(&self) -> u64 {
        self.unusable
    }
}

/// How generated jobs arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    /// A Poisson process with this mean gap between arrivals.
    Poisson { mean_gap_s: f64 },
    /// `jobs` jobs in the system at all times: each finished job is
    /// replaced at once (paper 003 §5's second set of experiments).
    Closed { jobs: u32 },
}

/// Settings of the synthetic workload.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorSpec {
    pub jobs: u64,
    pub arrivals: Arrivals,
    /// Mean run time, s, and the Pareto shape (heavier tail when smaller,
    /// > 1 so the mean exists); run times are capped at 100 times the mean.
    pub mean_runtime_s: f64,
    pub runtime_shape: f64,
    /// Mean memory per rank, bytes, Pareto with this shape, capped at `max_memory`.
    pub mean_memory: u64,
    pub memory_shape: f64,
    pub max_memory: u64,
    /// Widths are 2^k ranks, k uniform in 0..=log2(max_ranks).
    pub max_ranks: u32,
    pub seed: u64,
}

pub struct Generator {
    spec: GeneratorSpec,
    rng: Rng,
    made: u64,
    clock: f64,
}

impl Generator {
    pub fn new(spec: GeneratorSpec) -> Self {
        assert!(spec.runtime_shape > 1.0 && spec.memory_shape > 1.0);
        let rng = Rng::new(spec.seed);
        Generator {
            spec,
            rng,
            made: 0,
            clock: 0.0,
        }
    }

    fn make(&mut self, at: f64) -> Option<TraceJob> {
        if self.made == self.spec.jobs {
            return None;
        }
        self.made += 1;
        let s = &self.spec;
        let (mr, rs, mm, ms, cap) = (
            s.mean_runtime_s,
            s.runtime_shape,
            s.mean_memory as f64,
            s.memory_shape,
            s.max_memory as f64,
        );
        let levels = 32 - s.max_ranks.max(1).leading_zeros();
        let runtime_s = self.rng.pareto(mr, rs, 100.0 * mr).max(1.0);
        let memory = self.rng.pareto(mm, ms, cap);
        let k = self.rng.below(levels as u64) as u32;
        Some(TraceJob {
            name: format!("g{}", self.made),
            arrival: Duration::from_secs_f64(at),
            ranks: 1 << k,
            runtime_s,
            memory_per_rank: memory as u64,
            cpu_share: 1.0,
        })
    }
}

impl Workload for Generator {
    fn next_job(&mut self) -> Result<Option<TraceJob>, WorkloadError> {
        Ok(match self.spec.arrivals {
            Arrivals::Poisson { mean_gap_s } => {
                let at = self.clock;
                let gap = -mean_gap_s * (1.0 - self.rng.f64()).ln();
                self.clock += gap;
                self.make(at)
            }
            Arrivals::Closed { jobs } if self.made < u64::from(jobs) => self.make(0.0),
            Arrivals::Closed { .. } => None,
        })
    }

    fn job_finished(&mut self, now: Time) -> Option<TraceJob> {
        match self.spec.arrivals {
            Arrivals::Closed { .. } => self.make(now.as_secs_f64()),
            Arrivals::Poisson { .. } => None,
        }
    }
}
