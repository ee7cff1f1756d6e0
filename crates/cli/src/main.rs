//! `memgang`: time-share memory-hungry jobs on one Linux node.
//!
//! Verbs: `run` an experiment, `report` results, set up a `testbed` (swap),
//! `sim`ulate a cluster, `calibrate` the simulator on this node, and
//! `cleanup` what a killed memgang left behind.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use memgang_core::units::{format_bytes, parse_bytes};
use memgang_core::PolicyKind;
use memgang_experiment::{Baseline, Experiment, Overrides, RunOptions, RunResult};
use out::{note, out, outln};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod args;
mod calibrate;
mod cancel;
mod cleanup;
mod client;
mod figures;
mod log;
mod man;
mod out;
mod plot;
mod progress;
mod report;
mod sim;
mod slurm;
mod submit;
#[cfg(test)]
mod tests;
mod top;
mod wss;

#[derive(Parser)]
#[command(
    name = "memgang",
    version,
    about = "Gang-schedule processors and memory: time-share memory-hungry jobs on one node"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Client(client::Verb),
    /// The node live: pool and swap in use, each job running, frozen,
    /// paging out or in, or queued (and why), its memory and share of
    /// turns, the next switch and the last ones. Refreshes each second;
    /// q, Esc or Ctrl-C quits.
    Top(top::TopArgs),
    /// Run an experiment file's jobs under a policy and report the results.
    Run(RunArgs),
    /// Print results (JSON written by `run --json`) as tables; with several
    /// files, one comparison row per file.
    Report {
        /// Results JSON written by `run --json`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the comparison rows as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Draw figures from results (JSON written by `run --json`) as SVG or
    /// PNG, by the output file's extension (.svg, .png).
    Plot {
        #[command(subcommand)]
        plot: plot::Plot,
    },
    /// Prepare (or tear down) this machine for experiments: a swap file.
    Testbed {
        #[command(subcommand)]
        action: TestbedAction,
    },
    /// Simulate a cluster running a trace (or generated jobs) under a
    /// policy, with a model of paging; see docs/sim.md.
    Sim(Box<sim::SimArgs>),
    /// The papers' figures the simulator's model recomputes, as tables
    /// (paper 004's Fig. 3, 4 and 8).
    Figures {
        #[command(subcommand)]
        figure: figures::Figures,
    },
    /// Measure this node's paging parameters (swap device bandwidths,
    /// random reads, real switches) into a device file for `sim --device`.
    Calibrate(Box<calibrate::CalibrateArgs>),
    /// Working sets of running jobs or a command over windows τ (paper 004),
    /// and the pool and quantum they need.
    Wss(Box<wss::WssArgs>),
    /// memgang on a Slurm cluster: node agents, the task prolog, and the
    /// controller that gang-schedules a partition's jobs with their memory.
    Slurm {
        #[command(subcommand)]
        cmd: slurm::Slurm,
    },
    /// Remove cgroups, frozen jobs and processes left by a memgang that was
    /// killed with SIGKILL (runs of live memgang processes are left alone).
    Cleanup {
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write man pages (memgang.1, one per verb, memgang-workload.1) into a
    /// directory.
    #[command(hide = true)]
    Man {
        /// The directory to write them into (made if missing).
        #[arg(short, long, default_value = ".")]
        out: PathBuf,
    },
    /// Print a completion script for a shell (bash, zsh, fish, elvish,
    /// powershell), e.g. `memgang completions bash > /etc/bash_completion.d/memgang`.
    #[command(hide = true)]
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

#[derive(Args)]
struct RunArgs {
    /// The experiment file (TOML): jobs and settings; see examples/.
    experiment: PathBuf,
    /// batch | cosched | gang | hybrid | auto (overrides the file).
    #[arg(long)]
    policy: Option<PolicyKind>,
    /// Time slice of gang scheduling, e.g. 10s (overrides the file).
    #[arg(long, value_parser = args::duration)]
    quantum: Option<Duration>,
    /// The most of the time switching may take, e.g. 5%: a quantum after
    /// a dearer switch grows until it does, up to 10 quanta (overrides the
    /// file; default: fixed quanta).
    #[arg(long, value_parser = memgang_core::Quantum::parse_share)]
    max_switch_share: Option<f64>,
    /// Switch mechanisms of gang (overrides the file): lru (the kernel
    /// pages on demand), or mechanisms joined by '/': so (reclaim takes
    /// the suspended jobs' pages first), ao (page out in bulk at the
    /// switch), ai (record the outgoing job's resident pages and bring
    /// them back in bulk), bg or bg=N (write the running job's pages in
    /// the background in the last 10%, or N%, of its quantum); e.g.
    /// so/ao/ai (docs/switching.md).
    #[arg(long)]
    switch: Option<memgang_core::Switching>,
    /// How hybrid and auto overlap a set switch's page-in (overrides the
    /// file): sequential (page out, then in), overlapped (both at once, in
    /// the pool's free memory) or prefetch (page-in before the quantum ends).
    #[arg(long)]
    overlap: Option<memgang_core::Overlap>,
    /// Paper 003's dynamic coscheduling over the policy: a job that
    /// communicates (wakes for messages every 100 ms) runs at a higher CPU
    /// priority while it does (overrides the file).
    #[arg(long)]
    dynamic_coscheduling: bool,
    /// Memory the jobs share, e.g. 1G (overrides the file).
    #[arg(long, value_parser = parse_bytes)]
    pool_memory: Option<u64>,
    /// Write the full results as JSON to this file; `-` prints them to
    /// stdout instead of the table.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Directory for the jobs' stdout and stderr (one directory per job).
    #[arg(long)]
    logs: Option<PathBuf>,
    /// Batch reference for the switching overhead: auto (cached, else run
    /// batch first), run (always run batch first), none, or a batch JSON file.
    #[arg(long, default_value = "auto")]
    baseline: Baseline,
    /// Stop jobs with SIGSTOP/SIGCONT instead of the cgroup freezer.
    #[arg(long)]
    signals: bool,
    /// Only check the experiment file and print what would run.
    #[arg(long)]
    check: bool,
}

#[derive(Subcommand)]
enum TestbedAction {
    /// Create and enable a swap file and measure its device's bandwidth.
    Up {
        /// Size of the swap file, e.g. 8G.
        #[arg(long, value_parser = parse_bytes)]
        swap: u64,
        /// Where the swap file goes (its disk is the one measured).
        #[arg(long, default_value = memgang_linux::swap::DEFAULT_SWAP_PATH)]
        path: PathBuf,
        /// Print JSON instead of sentences.
        #[arg(long)]
        json: bool,
    },
    /// Disable and remove the swap file, and clean up leftovers.
    Down {
        /// The swap file `testbed up` made.
        #[arg(long, default_value = memgang_linux::swap::DEFAULT_SWAP_PATH)]
        path: PathBuf,
    },
    /// Show active swap, memgang cgroups and whether CRIU works here.
    Status {
        /// Print JSON instead of sentences.
        #[arg(long)]
        json: bool,
    },
    /// Measure the sequential read and write bandwidth of the disk under
    /// the swap file (the physical limit of a switch).
    Bandwidth {
        /// A directory on the disk to measure; default: the directory of
        /// the active swap file with the highest priority.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print JSON instead of a sentence.
        #[arg(long)]
        json: bool,
        /// Also read random 4 KiB pages for this long, one at a time and
        /// then 8 in flight (the rates demand faults and swap readahead
        /// get), e.g. 2s; default: not measured.
        #[arg(long, value_parser = args::duration)]
        random_for: Option<Duration>,
        /// Also time demand faults over this much memory paged out and
        /// touched back, at random and in order (root: a memory cgroup),
        /// e.g. 128M: the pages a swap readahead brings and what it costs
        /// in random faults, as `memgang calibrate` writes them.
        #[arg(long, value_parser = parse_bytes)]
        faults: Option<u64>,
    },
}

/// Exit codes: scripts can tell a run with failed jobs from a broken run.
const EXIT_JOBS_FAILED: u8 = 3;
const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMGANG_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_target(false)
        .with_ansi(out::color(std::io::stderr().is_terminal()))
        .without_time()
        .with_writer(std::io::stderr)
        .init();
    match dispatch(Cli::parse()) {
        Ok(code) => code,
        Err(e) if out::closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            note!("memgang: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Client(client::Verb::Cancel { ids, states, users }) => {
            let all = cancel::cancel(&ids, &states, &users)?;
            Ok(if all {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Client(client::Verb::Log { id, lines }) => {
            log::log(&client::job(id)?, lines).map(|()| ExitCode::SUCCESS)
        }
        Command::Client(client::Verb::Follow { id }) => {
            log::follow(id, || client::job(id)).map(|()| ExitCode::SUCCESS)
        }
        Command::Client(verb) => client::run(verb),
        Command::Top(args) => top::run(args).map(|()| ExitCode::SUCCESS),
        Command::Run(args) => run(args),
        Command::Report { files, json } => {
            let results = files
                .iter()
                .map(|f| memgang_experiment::baseline::load(f))
                .collect::<Result<Vec<_>>>()?;
            if json {
                let rows: Vec<_> = results.iter().map(report::summary).collect();
                outln!("{}", serde_json::to_string_pretty(&rows)?)?;
            } else {
                out!("{}", report::render(&results))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plot { plot } => {
            plot::run(plot)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Testbed { action } => testbed(action),
        Command::Figures { figure } => {
            figures::run(figure)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sim(args) => {
            sim::run(*args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Wss(args) => {
            wss::run(*args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Slurm { cmd } => {
            slurm::run(cmd)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Calibrate(args) => {
            calibrate::run(*args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cleanup { json } => {
            let removed = cleanup::run()?;
            if json {
                outln!("{}", serde_json::json!({ "removed": removed }))?;
            } else {
                for pool in &removed {
                    outln!("removed stale {pool}")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { out } => {
            man::write(&out)?;
            outln!("man pages written to {}", out.display())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            // Into memory first: clap_complete panics on a write error.
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "memgang", &mut script);
            out::emit(script)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run(args: RunArgs) -> Result<ExitCode> {
    let overrides = Overrides {
        policy: args.policy,
        quantum: args.quantum,
        max_switch_share: args.max_switch_share,
        switch: args.switch,
        overlap: args.overlap,
        dynamic_coscheduling: args.dynamic_coscheduling.then_some(true),
        pool_memory: args.pool_memory,
    };
    let exp = Experiment::load(&args.experiment, &overrides)?;
    if args.check {
        outln!(
            "{}: {} job(s), policy {}, quantum {:?}, {}, pool {}",
            exp.name,
            exp.jobs.len(),
            exp.policy,
            exp.quantum,
            if exp.policy.uses_overlap() {
                format!("overlap {}", exp.overlap)
            } else {
                format!("switch {}", exp.switch)
            },
            format_bytes(exp.pool_memory)
        )?;
        for j in &exp.jobs {
            outln!(
                "  {:<12} ranks {:<3} memory {:<6} arrival {:?}  {}",
                j.spec.name,
                j.spec.ranks,
                j.spec
                    .memory_bytes
                    .map(format_bytes)
                    .unwrap_or_else(|| "-".into()),
                j.spec.arrival,
                j.command.join(" ")
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let line = progress::StatusLine::on_terminal();
    let opts = RunOptions {
        logs: args.logs,
        baseline: args.baseline,
        progress: progress::callback(&line),
        signals: args.signals,
    };
    let result = memgang_experiment::run(&exp, &opts);
    if let Some(line) = &line {
        line.clear();
    }
    let result = result?;
    let code = if result.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if result.jobs.iter().all(|j| j.ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_JOBS_FAILED)
    };
    // The run's code, not stdout's: a reader that left early does not
    // change how the jobs ended.
    match print_result(args.json.as_ref(), &result) {
        Err(e) if out::closed(&e) => Ok(code),
        r => r.map(|()| code),
    }
}

/// The run's table, or its results as JSON (to stdout with `-`).
fn print_result(json: Option<&PathBuf>, result: &RunResult) -> Result<()> {
    match json {
        Some(path) if path.as_os_str() == "-" => {
            outln!("{}", serde_json::to_string_pretty(result)?)
        }
        Some(path) => {
            write_json(path, result)?;
            out!("{}", report::single(result))?;
            outln!("results: {}", path.display())
        }
        None => out!("{}", report::single(result)),
    }
}

fn write_json(path: &PathBuf, result: &RunResult) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(result)?;
    std::fs::write(path, text).with_context(|| format!("writing results to {}", path.display()))
}

/// Sample size for the bandwidth measurement: large enough to get past the
/// device's write cache and reach its sustained rate, small enough to take
/// about a second at the ~1.4-2.4 GB/s of the machines we run on.
const BANDWIDTH_SAMPLE: u64 = 1 << 30;

/// Measures the bandwidth under `dir`; prints it (as a sentence, or JSON
/// with `json`) when `print`, and returns it as JSON.
fn print_bandwidth(
    dir: &std::path::Path,
    json: bool,
    print: bool,
    random_for: Duration,
    faults: Option<u64>,
) -> Result<serde_json::Value> {
    let bw = memgang_linux::swap::measure_device(dir, BANDWIDTH_SAMPLE, random_for)
        .with_context(|| format!("measuring the disk bandwidth in {}", dir.display()))?;
    let readahead = faults.map(calibrate::Readahead::measure).transpose()?;
    let mut value = serde_json::json!({
        "dir": dir,
        "sample_bytes": bw.sample_bytes,
        "read_bytes_per_s": bw.read_bytes_per_s,
        "write_bytes_per_s": bw.write_bytes_per_s,
    });
    let random = bw.random_read_iops.zip(bw.queue_read_iops);
    if let Some((one, queue)) = random {
        value["random_read_iops"] = one.into();
        value["queue_read_iops"] = queue.into();
    }
    if let Some(ra) = &readahead {
        value["readahead_pages"] = ra.pages().into();
        value["readahead_reads"] = ra.reads().into();
        value["faults"] = ra.passes_json();
    }
    if print && json {
        outln!("{value}")?;
    } else if print {
        outln!(
            "swap device bandwidth (sequential, O_DIRECT, {}): read {:.0} MB/s, write {:.0} MB/s",
            format_bytes(bw.sample_bytes),
            bw.read_bytes_per_s / 1e6,
            bw.write_bytes_per_s / 1e6
        )?;
        if let Some((one, queue)) = random {
            outln!(
                "random 4 KiB reads: {one:.0}/s one at a time, {queue:.0}/s with {} in flight",
                memgang_linux::swap::QUEUE_DEPTH
            )?;
        }
        if let Some(ra) = &readahead {
            outln!("{}", ra.sentence(bw.random_read_iops))?;
        }
    }
    Ok(value)
}

fn testbed(action: TestbedAction) -> Result<ExitCode> {
    use memgang_linux::swap;
    match action {
        TestbedAction::Up {
            swap: size,
            path,
            json,
        } => {
            let sf = swap::up(&path, size)?;
            if !json {
                outln!(
                    "swap: {} ({}) active",
                    sf.path.display(),
                    format_bytes(sf.size_bytes)
                )?;
            }
            let dir = path.parent().unwrap_or(std::path::Path::new("/"));
            let bw = print_bandwidth(dir, false, !json, Duration::ZERO, None)?;
            if json {
                outln!(
                    "{}",
                    serde_json::json!({
                        "swap": { "path": sf.path, "size_bytes": sf.size_bytes },
                        "bandwidth": bw,
                    })
                )?;
            }
        }
        TestbedAction::Bandwidth {
            dir,
            json,
            random_for,
            faults,
        } => {
            let dir = match dir {
                Some(d) => d,
                None => calibrate::swap_dir()?.context(
                    "no active swap file to measure: run `memgang testbed up --swap 8G` \
                         or give --dir",
                )?,
            };
            if let Some(b) = faults {
                calibrate::check_fault_sample("--faults", b)?;
            }
            print_bandwidth(&dir, json, true, random_for.unwrap_or_default(), faults)?;
        }
        TestbedAction::Down { path } => {
            swap::down(&path)?;
            for pool in cleanup::run()? {
                outln!("removed stale {pool}")?;
            }
            outln!("swap {} removed", path.display())?;
        }
        TestbedAction::Status { json } => {
            let areas = swap::active()?;
            let groups = cleanup::list()?;
            // Paper 001's switch by checkpoint to files: not built; say
            // whether it could be on this machine.
            let criu = memgang_linux::criu::check().to_string();
            if json {
                let swaps: Vec<_> = areas
                    .iter()
                    .map(|a| {
                        serde_json::json!({
                            "path": a.path,
                            "size_bytes": a.size_bytes,
                            "used_bytes": a.used_bytes,
                            "priority": a.priority,
                        })
                    })
                    .collect();
                let cgroups: Vec<_> = groups
                    .iter()
                    .map(|(g, alive)| serde_json::json!({ "cgroup": g, "in_use": alive }))
                    .collect();
                outln!(
                    "{}",
                    serde_json::json!({ "swap": swaps, "cgroups": cgroups, "criu": criu })
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            if areas.is_empty() {
                outln!("no active swap: run `memgang testbed up --swap 8G`")?;
            }
            for a in areas {
                outln!(
                    "swap {} size {} used {} priority {}",
                    a.path.display(),
                    format_bytes(a.size_bytes),
                    format_bytes(a.used_bytes),
                    a.priority
                )?;
            }
            for (g, alive) in groups {
                outln!(
                    "cgroup {g} ({})",
                    if alive {
                        "in use"
                    } else {
                        "stale: `memgang cleanup` removes it"
                    }
                )?;
            }
            outln!("checkpoint switch (CRIU): {criu}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
