//! `memgang sim`: the command line of the simulator (crates/sim).

use crate::out::{out, outln};
use anyhow::{bail, Context, Result};
use clap::Args;
use memgang_core::units::{format_bytes, parse_bytes};
use memgang_core::{Overlap, PolicyKind, Switching, Time};
use memgang_sim::{
    Access, Arrivals, BadLines, Config, Device, DeviceFile, FaultPolicy, Generator, GeneratorSpec,
    JobRecord, PagingModel, Report, Simulator, Swf, SwfHeader, Workload,
};
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Pareto shape of generated memory sizes, and of those drawn for trace
/// jobs without memory: paper 003 §5's workloads (a heavy tail: most jobs
/// small, a few near the node's size).
const MEMORY_SHAPE: f64 = 1.5;

/// How trace jobs without memory get theirs (`--default-memory-dist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum MemoryDist {
    Fixed,
    Pareto,
}

#[derive(Args)]
pub struct SimArgs {
    /// A Standard Workload Format trace (Parallel Workloads Archive), plain
    /// or gzip-compressed (.swf.gz, as the archive ships them).
    #[arg(
        long,
        conflicts_with = "generate",
        required_unless_present = "generate"
    )]
    swf: Option<PathBuf>,
    /// Instead of a trace, generate this many jobs (Poisson arrivals,
    /// Pareto run times and memory, power-of-two widths).
    #[arg(long)]
    generate: Option<u64>,
    /// Nodes of the cluster; default: the trace header's MaxNodes.
    #[arg(long)]
    nodes: Option<u32>,
    /// Memory of each node, e.g. 64G.
    #[arg(long, value_parser = parse_bytes)]
    node_memory: u64,
    /// Processors per node: a job of r ranks takes ceil(r / this) nodes;
    /// default: the trace header's MaxProcs / MaxNodes, else 1.
    #[arg(long)]
    cpus_per_node: Option<u32>,
    /// batch | cosched | gang | hybrid | auto.
    #[arg(long, default_value = "gang")]
    policy: PolicyKind,
    /// Time slice of gang scheduling (and of hybrid's and auto's sets).
    #[arg(long, default_value = "60s", value_parser = crate::args::duration)]
    quantum: Duration,
    /// The most of the time switching may take, e.g. 5%: a quantum after a
    /// dearer switch grows until it does, up to 10 quanta (as `memgang run`).
    #[arg(long, value_parser = memgang_core::Quantum::parse_share)]
    max_switch_share: Option<f64>,
    /// Gang's switch mechanisms, as for `memgang run`: lru, or so, ao, ai,
    /// bg (bg=N) joined by '/', e.g. so/ao/ai.
    #[arg(long, default_value = "lru")]
    switch: Switching,
    /// Hybrid and auto: sequential | overlapped | prefetch.
    #[arg(long, default_value = "sequential")]
    overlap: Overlap,
    /// What a node does on a page fault of a parallel job (paper 004):
    /// spin, lug or pcs.
    #[arg(long, default_value = "spin")]
    fault_policy: FaultPolicy,
    /// Paper 004's F_pf: share of a fault's time that stalls the job's
    /// other nodes (0..1).
    #[arg(long, default_value_t = 0.5)]
    f_pf: f64,
    /// Share of its memory a job touches per second of computing (paper
    /// 004's applications: all of it every 0.03 to 2 s); sets how often a
    /// job faults while memory is short.
    #[arg(long, default_value_t = 0.5)]
    touch_per_s: f64,
    /// How the jobs touch their memory: sweep (in order: a fault's
    /// readahead brings the next pages while the job computes, and a job
    /// resumed short of memory faults all of itself back) or random (each
    /// fault brings one page, and the job waits for it).
    #[arg(long, default_value = "sweep")]
    access: Access,
    /// The swap device as JSON {"write_bps", "read_bps",
    /// "random_read_iops", optional "switch_efficiency"}, as `memgang
    /// calibrate` writes it; default: a SATA SSD (400 MB/s write, 500 MB/s
    /// read, 20,000 random reads/s).
    #[arg(long)]
    device: Option<PathBuf>,
    /// Memory per processor for trace jobs that give none (fields 7 and 10 -1).
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    default_memory: u64,
    /// How trace jobs that give no memory get theirs: all the default
    /// (fixed), or drawn from a Pareto distribution of mean the default,
    /// shape 1.5, at most a node's share per processor, seeded by --seed
    /// (pareto; the generator's sizes).
    #[arg(long, value_enum, default_value_t = MemoryDist::Fixed, conflicts_with = "generate")]
    default_memory_dist: MemoryDist,
    /// Skip malformed trace lines (counted and reported) instead of stopping.
    #[arg(long)]
    skip_bad_lines: bool,
    /// Trace: offer this many times its load, by dividing every submit
    /// time by it (run times stay): 2 makes arrivals twice as dense.
    #[arg(long, default_value_t = 1.0, conflicts_with = "generate")]
    load_factor: f64,
    /// Seed of the random numbers: the generator's, and --default-memory-dist pareto's.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Generator: mean time between arrivals.
    #[arg(long, default_value = "30s", value_parser = crate::args::duration)]
    arrival_gap: Duration,
    /// Generator: keep this many jobs in the system instead (closed loop).
    #[arg(long)]
    closed: Option<u32>,
    /// Generator: mean run time (Pareto, shape 1.5).
    #[arg(long, default_value = "10m", value_parser = crate::args::duration)]
    mean_runtime: Duration,
    /// Generator: mean memory per rank (Pareto, shape 1.5, capped at the node's memory).
    #[arg(long, value_parser = parse_bytes)]
    mean_memory: Option<u64>,
    /// Generator: widest job, in ranks (widths are powers of two up to it).
    #[arg(long)]
    max_ranks: Option<u32>,
    /// Write the run's figures as JSON (with provenance: version, command,
    /// seed, device, trace hash); `-` prints them to stdout instead of the table.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write one CSV line per finished job.
    #[arg(long)]
    csv: Option<PathBuf>,
}

/// The trace file, decompressed when it is gzip (by its magic bytes, not
/// its name), hashed as it is read so that results name the exact trace.
struct TraceReader {
    inner: Box<dyn std::io::Read>,
    sha: std::rc::Rc<std::cell::RefCell<sha2::Sha256>>,
}

impl std::io::Read for TraceReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        sha2::Digest::update(&mut *self.sha.borrow_mut(), &buf[..n]);
        Ok(n)
    }
}

fn open_trace(
    path: &std::path::Path,
) -> Result<(TraceReader, std::rc::Rc<std::cell::RefCell<sha2::Sha256>>)> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)
        .with_context(|| format!("opening the trace {}", path.display()))?;
    let mut magic = [0u8; 2];
    let gz = file
        .read(&mut magic)
        .map(|n| n == 2 && magic == [0x1f, 0x8b])?;
    let file = std::io::Read::chain(std::io::Cursor::new(magic), file);
    let inner: Box<dyn std::io::Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let sha = std::rc::Rc::new(std::cell::RefCell::new(
        <sha2::Sha256 as sha2::Digest>::new(),
    ));
    Ok((
        TraceReader {
            inner,
            sha: sha.clone(),
        },
        sha,
    ))
}

/// The trace read (if one was given): its reader, its hash as it is read,
/// its header.
#[derive(Default)]
struct Trace {
    swf: Option<Swf<BufReader<TraceReader>>>,
    sha: Option<std::rc::Rc<std::cell::RefCell<sha2::Sha256>>>,
    header: SwfHeader,
}

pub fn run(a: SimArgs) -> Result<()> {
    let mut trace = open(&a)?;
    let (nodes, cpus_per_node) = cluster(&a, &trace.header)?;
    if a.default_memory_dist == MemoryDist::Pareto {
        trace.swf = trace.swf.map(|s| {
            s.with_memory_draw(
                a.seed,
                MEMORY_SHAPE,
                a.node_memory / u64::from(cpus_per_node),
            )
        });
    }
    let paging = paging(&a)?;
    let cfg = Config {
        nodes,
        cpus_per_node,
        node_memory: a.node_memory,
        policy: a.policy,
        quantum: memgang_core::Quantum {
            length: a.quantum,
            max_switch_share: a.max_switch_share,
        },
        switching: a.switch,
        overlap: a.overlap,
        paging,
    };
    let mut generator;
    let (workload, total): (&mut dyn Workload, Option<u64>) = match (&mut trace.swf, a.generate) {
        (Some(swf), _) => (swf, None),
        (None, Some(jobs)) => {
            generator = generate(&a, jobs, nodes, cpus_per_node);
            (&mut generator, Some(jobs))
        }
        (None, None) => bail!("give a trace (--swf FILE) or --generate JOBS"),
    };
    let report = simulate(&a, cfg, workload, total)?;
    if let Some(p) = &a.json {
        let mut value = serde_json::to_value(&report)?;
        value["provenance"] = provenance(&a, &trace, &paging, cpus_per_node);
        let text = serde_json::to_string_pretty(&value)?;
        if p.as_os_str() == "-" {
            outln!("{text}")?;
            return Ok(());
        }
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    out!("{}", table(&report))?;
    Ok(())
}

/// The trace of `--swf`, its header read, after `--load-factor` is checked.
fn open(a: &SimArgs) -> Result<Trace> {
    if !(a.load_factor.is_finite() && a.load_factor > 0.0 && a.load_factor <= 1e6) {
        bail!(
            "--load-factor is {}: give a positive factor (2 offers twice the trace's load), at most 1e6",
            a.load_factor
        );
    }
    let Some(path) = &a.swf else {
        return Ok(Trace::default());
    };
    let bad = if a.skip_bad_lines {
        BadLines::Skip
    } else {
        BadLines::Refuse
    };
    let (reader, sha) = open_trace(path)?;
    let mut s = Swf::new(
        path.display().to_string(),
        BufReader::with_capacity(1 << 16, reader),
        bad,
        a.default_memory,
    )
    .with_load_factor(a.load_factor);
    let header = s.read_header()?;
    Ok(Trace {
        swf: Some(s),
        sha: Some(sha),
        header,
    })
}

/// The cluster's nodes and processors per node: given, else the trace
/// header's.
fn cluster(a: &SimArgs, header: &SwfHeader) -> Result<(u32, u32)> {
    let nodes = match (a.nodes, header.max_nodes) {
        (Some(n), _) => n,
        (None, Some(n)) => u32::try_from(n).context("the trace's MaxNodes is too large")?,
        (None, None) => bail!(
            "give --nodes: {}",
            if a.swf.is_some() {
                "the trace's header has no MaxNodes"
            } else {
                "generated jobs need a cluster size"
            }
        ),
    };
    let cpus_per_node = match (a.cpus_per_node, a.nodes, header.max_nodes, header.max_procs) {
        (Some(c), ..) => c,
        // The header's machine, when the cluster is the header's too.
        (None, None, Some(n), Some(p)) if p >= n => u32::try_from(p / n).unwrap_or(u32::MAX),
        _ => 1,
    };
    if nodes == 0 || cpus_per_node == 0 || a.node_memory == 0 {
        bail!("--nodes, --cpus-per-node and --node-memory must be greater than zero");
    }
    Ok((nodes, cpus_per_node))
}

/// The paging model of the flags and `--device`.
fn paging(a: &SimArgs) -> Result<PagingModel> {
    if !(0.0..=1.0).contains(&a.f_pf) {
        bail!("--f-pf is {}: it is a share, between 0 and 1", a.f_pf);
    }
    if !(a.touch_per_s.is_finite() && a.touch_per_s > 0.0 && a.touch_per_s <= 1e6) {
        bail!(
            "--touch-per-s is {}: give a positive share of the memory per second",
            a.touch_per_s
        );
    }
    read_paging(
        a.device.as_deref(),
        PagingModel {
            f_pf: a.f_pf,
            fault_policy: a.fault_policy,
            touch_per_s: a.touch_per_s,
            access: a.access,
            ..PagingModel::default()
        },
    )
}

/// `--generate`'s jobs.
fn generate(a: &SimArgs, jobs: u64, nodes: u32, cpus_per_node: u32) -> Generator {
    let arrivals = match a.closed {
        Some(jobs) => Arrivals::Closed { jobs },
        None => Arrivals::Poisson {
            mean_gap_s: a.arrival_gap.as_secs_f64(),
        },
    };
    Generator::new(GeneratorSpec {
        jobs,
        arrivals,
        mean_runtime_s: a.mean_runtime.as_secs_f64(),
        runtime_shape: 1.5,
        mean_memory: a.mean_memory.unwrap_or(a.node_memory / 8),
        memory_shape: MEMORY_SHAPE,
        max_memory: a.node_memory / u64::from(cpus_per_node),
        max_ranks: a
            .max_ranks
            .unwrap_or((nodes.saturating_mul(cpus_per_node) / 16).max(1)),
        seed: a.seed,
    })
}

/// Runs the simulation with a bar of jobs done (of `total` if known),
/// writing `--csv` as jobs finish.
fn simulate(
    a: &SimArgs,
    cfg: Config,
    workload: &mut dyn Workload,
    total: Option<u64>,
) -> Result<Report> {
    let bar = crate::progress::jobs_bar(total);
    let mut progress = |now: Time, done: u64| {
        bar.set_position(done);
        bar.set_message(format!(
            "simulated {}",
            humantime::format_duration(secs(now))
        ));
    };
    let mut csv = match &a.csv {
        Some(p) => {
            let f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            let mut w = BufWriter::new(f);
            writeln!(w, "{}", JobRecord::CSV_HEADER)?;
            Some(w)
        }
        None => None,
    };
    let mut csv_err = None;
    let mut on_job = |j: &JobRecord| {
        if let Some(w) = csv.as_mut() {
            if let Err(e) = writeln!(w, "{}", j.csv()) {
                csv_err.get_or_insert(e);
            }
        }
    };
    let report = Simulator::new(cfg, workload)
        .on_progress(&mut progress)
        .on_job(&mut on_job)
        .run();
    bar.finish_and_clear();
    let report = report?;
    if let Some(e) = csv_err {
        bail!("writing the CSV: {e}");
    }
    if let (Some(w), Some(p)) = (csv.as_mut(), &a.csv) {
        w.flush()
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(report)
}

/// What the JSON records of how it was made: version, command, seed,
/// device, trace (with its hash).
fn provenance(
    a: &SimArgs,
    trace: &Trace,
    model: &PagingModel,
    cpus_per_node: u32,
) -> serde_json::Value {
    let device = &model.device;
    serde_json::json!({
        "memgang_version": env!("CARGO_PKG_VERSION"),
        "command": std::env::args().collect::<Vec<_>>(),
        "seed": (a.generate.is_some() || a.default_memory_dist == MemoryDist::Pareto).then_some(a.seed),
        "device": {
            "file": a.device,
            "write_bps": device.write_bps,
            "read_bps": device.read_bps,
            "random_read_iops": device.random_read_iops,
            "readahead_pages": model.readahead_pages,
            "readahead_reads": model.readahead_reads,
            "reclaim_cpu_s_per_page": model.reclaim_cpu_s,
            "own_evict_share": model.own_evict_share,
            "own_evict_slope": model.own_evict_slope,
            "own_evict_split": model.own_evict_split,
            "queue_read_iops": model.queue_read_iops,
            "touch_per_s": model.touch_per_s,
            "access": model.access,
        },
        "trace": a.swf.as_ref().map(|path| serde_json::json!({
            "path": path,
            "sha256": trace.sha.as_ref().map(|sha| {
                let digest = sha2::Digest::finalize(sha.borrow().clone());
                digest.iter().map(|b| format!("{b:02x}")).collect::<String>()
            }),
            "max_nodes": trace.header.max_nodes,
            "max_procs": trace.header.max_procs,
            "load_factor": a.load_factor,
            "default_memory": a.default_memory,
            "default_memory_dist": a.default_memory_dist,
        })),
        "cpus_per_node": cpus_per_node,
    })
}

/// The swap device of `--device FILE` (as `memgang calibrate` writes it),
/// else the default one.
pub fn read_device(path: Option<&std::path::Path>) -> Result<Device> {
    Ok(read_paging(path, PagingModel::default())?.device)
}

/// `base` with the device, readahead and reclaim cost of `--device FILE`.
pub fn read_paging(path: Option<&std::path::Path>, base: PagingModel) -> Result<PagingModel> {
    Ok(match path {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str::<DeviceFile>(&text)
                .with_context(|| {
                    format!(
                        "{}: expected {{\"write_bps\": ..., \"read_bps\": ..., \"random_read_iops\": ..., \
                         optional \"switch_efficiency\", \"readahead_pages\", \"readahead_reads\", \
                         \"reclaim_cpu_s_per_page\", \"own_evict_share\", \"own_evict_slope\", \"own_evict_split\", \"queue_read_iops\", \"calibration\": {{...}}}} \
                         (`memgang calibrate` writes one)",
                        p.display()
                    )
                })?
                .model(base)
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => base,
    })
}

fn secs(t: Time) -> Duration {
    Duration::from_secs(t.as_secs())
}

fn table(r: &Report) -> String {
    let mut t = crate::report::table(["figure", "value"]);
    let mut row = |k: &str, v: String| {
        t.add_row(vec![k.to_string(), v]);
    };
    row(
        "policy",
        format!(
            "{} (switch {}, quantum {}s, faults {})",
            r.policy, r.switching, r.quantum_s, r.fault_policy
        ),
    );
    row(
        "cluster",
        format!("{} nodes × {}", r.nodes, format_bytes(r.node_memory)),
    );
    let mut jobs = format!("{} finished", r.jobs);
    for (n, what) in [
        (r.unfinished, "unfinished"),
        (r.unusable, "without run time or width (not simulated)"),
        (r.clamped, "wider than the cluster (run on all of it)"),
        (r.skipped_lines, "bad lines skipped"),
    ] {
        if n > 0 {
            jobs.push_str(&format!(", {n} {what}"));
        }
    }
    row("jobs", jobs);
    for reason in &r.skipped_reasons {
        row("  skipped", reason.clone());
    }
    row("makespan", format!("{:.0} s", r.makespan_s));
    row("utilization", format!("{:.3}", r.utilization));
    row("mean response", format!("{:.1} s", r.mean_response_s));
    row(
        "mean bounded slowdown",
        format!("{:.2} (10 s bound)", r.mean_bounded_slowdown),
    );
    row(
        "switches",
        format!("{} taking {:.0} s", r.switches, r.switch_s),
    );
    row(
        "switching overhead",
        format!("{:.2}% of node time", 100.0 * r.switching_overhead),
    );
    if r.overcommitted_node_s > 0.0 {
        // Out of core on a real node the kernel either keeps up or
        // collapses, and the model gives neither (docs/sim.md).
        row(
            "overcommitted",
            format!(
                "{:.0} node-s with the running jobs wanting more memory than \
                 their nodes: the model's thrashing, mild where a real node \
                 may collapse",
                r.overcommitted_node_s
            ),
        );
    }
    row(
        "paged out / in",
        format!(
            "{} / {}",
            format_bytes(r.paged_out_bytes),
            format_bytes(r.paged_in_bytes)
        ),
    );
    row(
        "events",
        format!(
            "{} in {:.2} s wall ({:.0}/s), at most {} jobs alive, {} job-node actions",
            r.events, r.wall_s, r.events_per_s, r.peak_jobs_alive, r.node_actions
        ),
    );
    format!("{t}\n")
}
