//! `memgang calibrate`: measure this node's paging parameters into the
//! device file `memgang sim --device` reads.
//!
//! Five measurements, each reusing what already exists: the swap device's
//! sequential bandwidths and its random 4 KiB read rate
//! (`memgang_linux::swap::measure_device`, the probe of `testbed
//! bandwidth`); demand faults on the fault path, in a random order and in
//! order (`memgang_linux::faults`): the pages a fault's swap readahead
//! brings and what it costs against a random fault; the share of a
//! resumed job's faults that evict its own pages under a full pool
//! (`faults::own_share`); and the cost of real switches, from a short
//! `memgang run` of two jobs that do not fit in the pool together (gang,
//! `so/ao/ai`).
//! Swap is created (`testbed up`) only if the node has none, and removed
//! again (`testbed down`) on every way out: error, panic, Ctrl-C.

use crate::out::{note, out, outln};
use anyhow::{bail, Context, Result};
use clap::Args;
use memgang_core::units::{format_bytes, parse_bytes};
use memgang_experiment::{Baseline, Experiment, Overrides, RunOptions, RunResult};
use memgang_linux::faults::{self, Order};
use memgang_linux::swap;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[derive(Args)]
pub struct CalibrateArgs {
    /// Where to write the device file (JSON) for `memgang sim --device`.
    #[arg(long, short, default_value = "device.json")]
    output: PathBuf,
    /// Bytes written and read back sequentially on the swap device.
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    sample: u64,
    /// How long to read random 4 KiB pages of the sample, one at a time;
    /// then as long again with 8 in flight (the swap readahead window).
    #[arg(long, default_value = "5s", value_parser = crate::args::duration)]
    random_for: Duration,
    /// Memory paged out and faulted back, once in a random order and once
    /// in order, to time demand faults and their readahead.
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    fault_sample: u64,
    /// Memory of each of the two jobs that take turns, touching their
    /// memory at random, under two pools that hold more than one of them
    /// and less than two (those of memgang's 700 and 600 MiB pairs): the
    /// share of a resumed job's faults that evict its own pages.
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    own_sample: u64,
    /// Memory pool of the switch run; its two jobs take 70% of it each.
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    pool_memory: u64,
    /// Quantum of the switch run.
    #[arg(long, default_value = "2s", value_parser = crate::args::duration)]
    quantum: Duration,
    /// Sweeps over its memory each job of the switch run makes (its length).
    #[arg(long, default_value_t = 20)]
    iterations: u32,
    /// Size of the swap file made if the node has no swap (removed after).
    #[arg(long, default_value = "2G", value_parser = parse_bytes)]
    swap: u64,
    /// Where that swap file goes.
    #[arg(long, default_value = swap::DEFAULT_SWAP_PATH)]
    swap_path: PathBuf,
}

pub fn run(a: CalibrateArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "memgang calibrate needs root: it may add swap, and its switch run creates \
             cgroups; run it with sudo"
        );
    }
    if a.pool_memory < (16 << 20) {
        bail!(
            "--pool-memory {} is too small for the switch run: give at least 16M",
            format_bytes(a.pool_memory)
        );
    }
    check_fault_sample("--fault-sample", a.fault_sample)?;
    if a.own_sample < (64 << 20) {
        bail!(
            "--own-sample {} is too small: under pools of a few dozen MiB the processes' \
             own overhead weighs, and the pool's OOM killer can outrun its reclaim; give at \
             least 64M",
            format_bytes(a.own_sample)
        );
    }
    if a.sample < (64 << 20) {
        bail!(
            "--sample {} is too small to get past the device's cache: give at least 64M",
            format_bytes(a.sample)
        );
    }
    // A signal must not kill us between a swapon and its swapoff: it is
    // noted, and the measurement stops at the next step.
    let stop = Arc::new(AtomicBool::new(false));
    let mut handlers = Vec::new();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        handlers.push(signal_hook::flag::register(sig, stop.clone())?);
    }
    let result = calibrate(&a, &stop);
    for h in handlers {
        signal_hook::low_level::unregister(h);
    }
    let (value, summary) = result?;
    let text = serde_json::to_string_pretty(&value)? + "\n";
    std::fs::write(&a.output, text).with_context(|| format!("writing {}", a.output.display()))?;
    out!("{summary}")?;
    outln!(
        "device file: {} (memgang sim --device {0})",
        a.output.display()
    )?;
    Ok(())
}

/// The directory of the active swap file with the highest priority.
pub fn swap_dir() -> Result<Option<PathBuf>> {
    Ok(swap::active()?
        .into_iter()
        .filter(|a| a.path.is_file())
        .max_by_key(|a| a.priority)
        .and_then(|a| a.path.parent().map(PathBuf::from)))
}

/// `testbed down` when dropped, for swap this run made.
struct MadeSwap(PathBuf);

impl Drop for MadeSwap {
    fn drop(&mut self) {
        match swap::down(&self.0) {
            Ok(()) => note!("memgang: removed the swap file {}", self.0.display()),
            Err(e) => note!(
                "memgang: the swap file {0} was not removed: {e}; run `memgang testbed down --path {0}`",
                self.0.display()
            ),
        }
    }
}

struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check(stop: &AtomicBool) -> Result<()> {
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted; nothing written");
    }
    Ok(())
}

/// What a calibration measured: the device (`dir`, with the swap file
/// added for it if there was none), its faults and own evictions, and the
/// switch run.
struct Measured {
    dir: PathBuf,
    swap_file: Option<PathBuf>,
    bw: swap::Bandwidth,
    iops: f64,
    queue_iops: f64,
    ra: Readahead,
    own: OwnEvictions,
    run: SwitchRun,
}

/// The switch run: its result, the switches that paged, the size of its
/// jobs and their sweeps.
struct SwitchRun {
    r: RunResult,
    cost: SwitchCost,
    job: u64,
    iterations: u32,
}

fn calibrate(a: &CalibrateArgs, stop: &AtomicBool) -> Result<(serde_json::Value, String)> {
    let (_made, dir, swap_file) = swap_for(a)?;
    check(stop)?;
    note!(
        "memgang: sequential bandwidth ({}) and {:?} of random 4 KiB reads in {}",
        format_bytes(a.sample),
        a.random_for,
        dir.display()
    );
    let bw = swap::measure_device(&dir, a.sample, a.random_for)
        .with_context(|| format!("measuring the swap device in {}", dir.display()))?;
    let iops = bw
        .random_read_iops
        .context("the random-read pass gave no rate")?;
    let queue_iops = bw
        .queue_read_iops
        .context("the random-read pass at depth gave no rate")?;
    check(stop)?;
    note!(
        "memgang: demand faults over {} paged out, touched back at random and in order",
        format_bytes(a.fault_sample)
    );
    let ra = Readahead::measure(a.fault_sample)?;
    check(stop)?;
    note!(
        "memgang: two jobs of {} taking turns at random under two pools",
        format_bytes(a.own_sample)
    );
    let own = OwnEvictions::measure(a.own_sample)?;
    check(stop)?;
    let run = switch_run(a, stop)?;
    let m = Measured {
        dir,
        swap_file,
        bw,
        iops,
        queue_iops,
        ra,
        own,
        run,
    };
    Ok((device_file(a, &m), summary(&m)))
}

/// The directory of the swap file to probe, adding one (removed when the
/// returned guard drops) if the node has no swap.
fn swap_for(a: &CalibrateArgs) -> Result<(Option<MadeSwap>, PathBuf, Option<PathBuf>)> {
    Ok(match swap_dir()? {
        Some(dir) => (None, dir, None),
        None if !swap::active()?.is_empty() => bail!(
            "the active swap is a partition, not a file, so its device cannot be probed \
             through a file; add a swap file with `memgang testbed up --swap 2G`"
        ),
        None => {
            note!(
                "memgang: no swap: adding {} at {} for the calibration",
                format_bytes(a.swap),
                a.swap_path.display()
            );
            let sf = swap::up(&a.swap_path, a.swap)
                .context("adding swap for the calibration (give --swap SIZE or --swap-path)")?;
            let made = MadeSwap(sf.path.clone());
            let dir = sf.path.parent().unwrap_or(Path::new("/")).to_path_buf();
            (Some(made), dir, Some(sf.path))
        }
    })
}

/// The switch run: two jobs of 70% of the pool under gang `so/ao/ai`.
/// The jobs must outlast a quantum so that gang switches them; how long
/// `--iterations` takes depends on the machine, so a run that ended
/// without paging is repeated with jobs twice as long (at most five
/// doublings, so that a pool the jobs fit in ends with an error).
fn switch_run(a: &CalibrateArgs, stop: &AtomicBool) -> Result<SwitchRun> {
    let job = ((a.pool_memory >> 20) * 7 / 10) << 20;
    let logs =
        RemoveDir(std::env::temp_dir().join(format!("memgang-calibrate-{}", std::process::id())));
    let mut iterations = a.iterations;
    loop {
        let exp = Experiment::parse(
            &experiment(a, job, iterations),
            "calibrate",
            &Overrides::default(),
        )?;
        note!(
            "memgang: switch run: 2 jobs of {} ({iterations} sweeps) in a pool of {}, \
             gang so/ao/ai, quantum {:?}",
            format_bytes(job),
            format_bytes(a.pool_memory),
            a.quantum
        );
        let line = crate::progress::StatusLine::on_terminal();
        let r = memgang_experiment::run(
            &exp,
            &RunOptions {
                logs: Some(logs.0.clone()),
                baseline: Baseline::None,
                progress: crate::progress::callback(&line),
                signals: false,
            },
        );
        if let Some(line) = &line {
            line.clear();
        }
        let r = r?;
        check(stop)?;
        if r.interrupted {
            bail!("the switch run was interrupted; nothing written");
        }
        if let Some(j) = r.jobs.iter().find(|j| !j.ok()) {
            bail!(
                "job {} of the switch run failed ({}): {}",
                j.name,
                j.error.as_deref().unwrap_or("exit status"),
                j.stderr_tail.as_deref().unwrap_or("")
            );
        }
        let cost = SwitchCost::of(&r);
        if cost.out_bytes > 0 && cost.in_bytes > 0 && cost.took_s > 0.0 {
            return Ok(SwitchRun {
                r,
                cost,
                job,
                iterations,
            });
        }
        if iterations >= a.iterations.saturating_mul(32) {
            bail!(
                "the switch run paged nothing ({} switches) even with {iterations} sweeps: \
                 the jobs fit in the pool or end within a quantum; give a smaller \
                 --quantum or more --iterations",
                r.switch_count
            );
        }
        note!(
            "memgang: the jobs ended without a paging switch ({} switches); again, twice as long",
            r.switch_count
        );
        iterations = iterations.saturating_mul(2);
    }
}

impl SwitchRun {
    /// What the model would charge for the bytes paged over what they took.
    fn model_s(&self, bw: &swap::Bandwidth) -> f64 {
        self.cost.out_bytes as f64 / bw.write_bytes_per_s
            + self.cost.in_bytes as f64 / bw.read_bytes_per_s
    }

    fn out_bps(&self) -> f64 {
        self.cost.out_bytes as f64 / self.cost.out_s.max(1e-9)
    }

    fn in_bps(&self) -> f64 {
        self.cost.in_bytes as f64 / self.cost.in_s.max(1e-9)
    }
}

/// The device file, with the calibration's provenance.
fn device_file(a: &CalibrateArgs, m: &Measured) -> serde_json::Value {
    let (bw, run, r, s) = (&m.bw, &m.run, &m.run.r, &m.run.cost);
    let model_s = run.model_s(bw);
    let (out_bps, in_bps) = (run.out_bps(), run.in_bps());
    let mut value = json!({
        "write_bps": bw.write_bytes_per_s,
        "read_bps": bw.read_bytes_per_s,
        "random_read_iops": m.iops,
        "queue_read_iops": m.queue_iops,
        "readahead_pages": m.ra.pages(),
        "readahead_reads": m.ra.reads(),
        "switch_efficiency": model_s / s.took_s,
        "calibration": {
            "memgang_version": env!("CARGO_PKG_VERSION"),
            "date": humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            "hostname": r.machine.hostname,
            "kernel": r.machine.kernel,
            "cpus": r.machine.cpus,
            "memory_bytes": r.machine.memory_bytes,
            "device_dir": m.dir,
            "swap_file_added": m.swap_file,
            "sample_bytes": bw.sample_bytes,
            "random_read_s": a.random_for.as_secs_f64(),
            "queue_depth": swap::QUEUE_DEPTH,
            "faults": m.ra.passes_json(),
            "switch_run": {
                "jobs": 2,
                "job_bytes": run.job,
                "pool_bytes": a.pool_memory,
                "policy": "gang",
                "switch": r.switch,
                "quantum_s": r.quantum_s,
                "iterations": run.iterations,
                "makespan_s": r.makespan_s,
                "switches": r.switch_count,
                "switch_s": s.took_s,
                "paged_out_bytes": s.out_bytes,
                "paged_in_bytes": s.in_bytes,
                "page_out_s": s.out_s,
                "page_in_s": s.in_s,
                "page_out_bps": out_bps,
                "page_in_bps": in_bps,
                "page_out_of_sequential": out_bps / bw.write_bytes_per_s,
                "page_in_of_sequential": in_bps / bw.read_bytes_per_s,
                "model_switch_s": model_s,
            },
        },
    });
    // Apart from the json! above, which is at serde_json's recursion limit.
    value["own_evict_share"] = m.own.share().clamp(0.0, 0.95).into();
    value["own_evict_slope"] = m.own.slope().clamp(-1.0, 1.0).into();
    value["own_evict_split"] = m.own.split().clamp(-0.5, 0.5).into();
    value["calibration"]["own_evictions"] = m.own.json();
    value
}

/// What `calibrate` prints of what it measured.
fn summary(m: &Measured) -> String {
    let (bw, run, s) = (&m.bw, &m.run, &m.run.cost);
    let (iops, queue_iops) = (m.iops, m.queue_iops);
    let model_s = run.model_s(bw);
    let efficiency = model_s / s.took_s;
    let (out_bps, in_bps) = (run.out_bps(), run.in_bps());
    let mbs = |b: f64| format!("{:.0} MB/s", b / 1e6);
    format!(
        "swap device {}: sequential write {}, read {} ({}, O_DIRECT)\n\
         random 4 KiB reads: {iops:.0}/s ({}, queue depth 1); {queue_iops:.0}/s ({}, queue depth {})\n\
         {}\n\
         {}\n\
         switch run: {} switches took {:.2} s for {} out, {} in: page-out {} ({:.2} of sequential), \
         page-in {} ({:.2})\n\
         switch efficiency: {efficiency:.2} (the model's {model_s:.2} s over the measured {:.2} s)\n",
        m.dir.display(),
        mbs(bw.write_bytes_per_s),
        mbs(bw.read_bytes_per_s),
        format_bytes(bw.sample_bytes),
        mbs(iops * 4096.0),
        mbs(queue_iops * 4096.0),
        swap::QUEUE_DEPTH,
        m.ra.sentence(Some(iops)),
        m.own.sentence(),
        run.r.switch_count,
        s.took_s,
        format_bytes(s.out_bytes),
        format_bytes(s.in_bytes),
        mbs(out_bps),
        out_bps / bw.write_bytes_per_s,
        mbs(in_bps),
        in_bps / bw.read_bytes_per_s,
        s.took_s,
    )
}

/// Two jobs of `job` bytes, sweeping their memory, in a pool that holds
/// one of them: gang with `so/ao/ai` pages each out and in in bulk.
fn experiment(a: &CalibrateArgs, job: u64, iterations: u32) -> String {
    let mib = job >> 20;
    let mut s = format!(
        "name = \"calibrate\"\npolicy = \"gang\"\nswitch = \"so/ao/ai\"\nquantum = \"{}ms\"\npool_memory = \"{}M\"\n",
        a.quantum.as_millis(),
        a.pool_memory >> 20
    );
    for (name, seed) in [("a", 1), ("b", 2)] {
        s.push_str(&format!(
            "[[job]]\nname = \"{name}\"\nmemory = \"{mib}M\"\ncommand = [\"memgang-workload\", \"--mib\", \"{mib}\", \
             \"--pattern\", \"seq\", \"--iterations\", \"{iterations}\", \"--compute\", \"2\", \"--seed\", \"{seed}\"]\n",
        ));
    }
    s
}

/// Sums over the switches that moved pages.
#[derive(Default)]
struct SwitchCost {
    out_bytes: u64,
    in_bytes: u64,
    out_s: f64,
    in_s: f64,
    took_s: f64,
}

impl SwitchCost {
    fn of(r: &RunResult) -> Self {
        let mut c = SwitchCost::default();
        for s in r
            .switches
            .iter()
            .filter(|s| s.paged_out_bytes + s.paged_in_bytes > 0)
        {
            c.out_bytes += s.paged_out_bytes;
            c.in_bytes += s.paged_in_bytes;
            c.out_s += s.page_out_s;
            c.in_s += s.page_in_s;
            c.took_s += s.took_s;
        }
        c
    }
}

/// Refuses a fault sample given as `flag` too small for its fault counts
/// to mean anything: below 16M, a few thousand faults.
pub fn check_fault_sample(flag: &str, bytes: u64) -> Result<()> {
    if bytes < (16 << 20) {
        bail!(
            "{flag} {} is too small for the fault counts to mean anything: give at least 16M",
            format_bytes(bytes)
        );
    }
    Ok(())
}

/// Demand faults timed on the fault path (`memgang_linux::faults`), once
/// at random and once in order: the pages a swap readahead brings and
/// what a fault that reads them costs against a random one.
pub struct Readahead {
    pub random: faults::FaultPass,
    pub in_order: faults::FaultPass,
}

impl Readahead {
    /// Both passes over `bytes` (root, swap with room for them).
    pub fn measure(bytes: u64) -> Result<Self> {
        let backend = memgang_linux::cgroup::detect().context("timing demand faults")?;
        let pass = |order: Order| {
            faults::measure(backend.as_ref(), bytes, order, 1)
                .with_context(|| format!("timing demand faults ({})", order.as_str()))
        };
        Ok(Readahead {
            random: pass(Order::Random)?,
            in_order: pass(Order::InOrder)?,
        })
    }

    /// Pages read per in-order fault (the device file's `readahead_pages`).
    pub fn pages(&self) -> f64 {
        self.in_order.pages_per_fault().max(1.0)
    }

    /// An in-order fault's time over a random one's (`readahead_reads`).
    pub fn reads(&self) -> f64 {
        self.in_order.s_per_fault() / self.random.s_per_fault()
    }

    /// Both passes' figures, for provenance.
    pub fn passes_json(&self) -> serde_json::Value {
        let pass = |p: &faults::FaultPass| {
            json!({
                "pages": p.pages,
                "swapped_bytes": p.swapped_bytes,
                "major_faults": p.major_faults,
                "pages_read": p.pages_read,
                "wall_s": p.wall.as_secs_f64(),
                "cpu_s": p.cpu.as_secs_f64(),
                "s_per_fault": p.s_per_fault(),
                "cpu_s_per_fault": p.cpu_s_per_fault(),
                "pages_per_fault": p.pages_per_fault(),
            })
        };
        json!({ "random": pass(&self.random), "in_order": pass(&self.in_order) })
    }

    /// One line; with the disk's random reads per second at depth 1
    /// (`disk_iops`), the random faults' rate against it.
    pub fn sentence(&self, disk_iops: Option<f64>) -> String {
        let vs_disk = disk_iops.map_or(String::new(), |d| {
            format!(
                " ({:.2} of the disk's random read rate)",
                1.0 / self.random.s_per_fault() / d
            )
        });
        format!(
            "demand faults: at random {:.1} us each{vs_disk}, {:.2} pages; \
             in order {:.1} us each, {:.2} pages (readahead): a window costs {:.2} random faults",
            1e6 * self.random.s_per_fault(),
            self.random.pages_per_fault(),
            1e6 * self.in_order.s_per_fault(),
            self.pages(),
            self.reads()
        )
    }
}

/// The share of a resumed job's faults that evict its own pages
/// (`memgang_linux::faults::own_share`) under two pools, the one of
/// memgang's 700 MiB pairs in 1 GiB and the one of its 600 MiB pairs: the
/// device file's `own_evict_share` (on the line through the two, where a
/// resume lacks `AT_LACK` of its job), `own_evict_slope` and
/// `own_evict_split`.
pub struct OwnEvictions(pub [faults::OwnShare; 2]);

/// Where the device file gives the share: what memgang's 700 MiB pairs
/// lacked, the simulator's own reference point.
const AT_LACK: f64 = memgang_sim::paging::OWN_EVICT_AT_LACK;

impl OwnEvictions {
    /// Two jobs of `bytes` under each pool (root, swap with room for one).
    pub fn measure(bytes: u64) -> Result<Self> {
        let backend = memgang_linux::cgroup::detect().context("measuring own evictions")?;
        let at = |pool_per_job: f64| {
            faults::own_share(
                backend.as_ref(),
                bytes,
                (bytes as f64 * pool_per_job) as u64,
                1,
            )
            .context("measuring a resumed job's own evictions")
        };
        Ok(OwnEvictions([
            at(faults::POOL_PER_JOB)?,
            at(1024.0 / 600.0)?,
        ]))
    }

    /// Change of the share per unit of the job a resume lacks.
    pub fn slope(&self) -> f64 {
        let [a, b] = &self.0;
        (a.share() - b.share()) / (a.lack_share() - b.lack_share())
    }

    /// Half the first-made job's share less the other's, over both pools.
    pub fn split(&self) -> f64 {
        self.0.iter().map(faults::OwnShare::split).sum::<f64>() / 2.0
    }

    /// The share where a resume lacks [`AT_LACK`] of its job.
    pub fn share(&self) -> f64 {
        let a = &self.0[0];
        a.share() + self.slope() * (AT_LACK - a.lack_share())
    }

    /// Every turn, for provenance.
    pub fn json(&self) -> serde_json::Value {
        let pool = |o: &faults::OwnShare| {
            json!({
                "job_bytes": o.job_bytes,
                "pool_bytes": o.pool_bytes,
                "lack_share": o.lack_share(),
                "attempts": o.attempts,
                "share": o.share(),
                "job_shares": [o.job_share(0), o.job_share(1)],
                "split": o.split(),
                "counted_from_turn": 2,
                "turns": o.turns.iter().map(|t| json!({
                    "lacked_bytes": t.lacked_bytes,
                    "faulted_bytes": t.faulted_bytes,
                    "passes": t.passes,
                    "wall_s": t.wall.as_secs_f64(),
                })).collect::<Vec<_>>(),
            })
        };
        json!({ "at_lack": AT_LACK, "pools": self.0.iter().map(pool).collect::<Vec<_>>() })
    }

    pub fn sentence(&self) -> String {
        let [a, b] = &self.0;
        let per_turn = |o: &faults::OwnShare| {
            let n = o.counted().len().max(1) as u64;
            format_bytes(o.counted().iter().map(|t| t.faulted_bytes).sum::<u64>() / n)
        };
        format!(
            "own evictions: jobs of {} under pools of {} and {} lacked {:.2} and {:.2} of \
             themselves and faulted {} and {} per turn: {:.2} and {:.2} of a resumed job's \
             faults evicted its own pages ({:.2} where it lacks {AT_LACK}, {:+.2} per unit lacked; \
             the first-made job's {:+.2} from it)",
            format_bytes(a.job_bytes),
            format_bytes(a.pool_bytes),
            format_bytes(b.pool_bytes),
            a.lack_share(),
            b.lack_share(),
            per_turn(a),
            per_turn(b),
            a.share(),
            b.share(),
            self.share(),
            self.slope(),
            self.split()
        )
    }
}
