//! `memgang wss`: working sets of running jobs or a command over windows τ
//! (paper 004 Fig. 5-7), and the pool and quantum they call for.

use crate::out::{out, outln};
use anyhow::{bail, Context, Result};
use clap::Args;
use memgang_core::units::format_bytes;
use memgang_core::wss::{self, Suggestion, TauSummary, Window};
use memgang_linux::wss as kernel;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct WssArgs {
    /// A running job to measure: this process and its descendants. Give
    /// several to measure a set of jobs at once.
    #[arg(long = "pid", value_name = "PID")]
    pids: Vec<i32>,
    /// Windows τ (comma-separated), measured in turn: the kernel keeps one
    /// accessed bit per page, so windows cannot overlap.
    #[arg(long, value_delimiter = ',', default_value = "32ms,128ms,512ms", value_parser = crate::args::duration)]
    tau: Vec<Duration>,
    /// Stop after this long (a command still running is then killed);
    /// default: when every job has exited.
    #[arg(long, value_parser = crate::args::duration)]
    duration: Option<Duration>,
    /// Earlier `memgang wss --json` files: their jobs join the suggestion.
    #[arg(long, value_name = "JSON")]
    from: Vec<PathBuf>,
    /// The swap device as `memgang calibrate` writes it, for the quantum;
    /// default: the simulator's (a SATA SSD, 400 MB/s out, 500 MB/s in).
    #[arg(long)]
    device: Option<PathBuf>,
    /// Write the windows, summaries and suggestion as JSON (`-`: stdout).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Plot working set against time per τ, and pages touched (.svg, .png).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Name of the command's job in tables and plots (default: its program).
    #[arg(long)]
    name: Option<String>,
    /// A command to run and measure, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// One job's measurement, as `--json` writes it.
#[derive(Serialize, Deserialize)]
pub struct JobWss {
    pub name: String,
    pub pid: i32,
    pub windows: Vec<Window>,
    pub summary: Vec<TauSummary>,
}

#[derive(Serialize, Deserialize)]
struct WssFile {
    schema: u32,
    memgang_version: String,
    jobs: Vec<JobWss>,
    write_bps: f64,
    read_bps: f64,
    suggestion: Option<Suggestion>,
}

struct Target {
    name: String,
    pid: i32,
    child: Option<Child>,
    windows: Vec<Window>,
    done: bool,
}

impl Target {
    fn alive(&mut self) -> bool {
        if self.done {
            return false;
        }
        self.done = match &mut self.child {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => !std::path::Path::new(&format!("/proc/{}", self.pid)).exists(),
        };
        !self.done
    }
}

pub fn run(a: WssArgs) -> Result<()> {
    if a.pids.is_empty() && a.command.is_empty() && a.from.is_empty() {
        bail!("nothing to measure: give --pid PID, a command after `--`, or --from FILE.json");
    }
    let device = crate::sim::read_device(a.device.as_deref())?;
    let mut taus = a.tau.clone();
    taus.sort();
    taus.dedup();
    let mut targets = Vec::new();
    for &pid in &a.pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .with_context(|| format!("--pid {pid}: no such process"))?;
        // argv[0]'s file name: comm is cut at 15 bytes.
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(argv0);
        let name = name.rsplit('/').next().unwrap_or_default();
        targets.push(Target {
            name: if name.is_empty() {
                format!("pid {pid}")
            } else {
                name.to_string()
            },
            pid,
            child: None,
            windows: Vec::new(),
            done: false,
        });
    }
    if let Some((prog, args)) = a.command.split_first() {
        let child = Command::new(prog)
            .args(args)
            .spawn()
            .with_context(|| format!("starting {prog:?}: is it installed and on PATH?"))?;
        targets.push(Target {
            name: a.name.clone().unwrap_or_else(|| {
                std::path::Path::new(prog)
                    .file_name()
                    .map_or_else(|| prog.clone(), |n| n.to_string_lossy().into_owned())
            }),
            pid: child.id() as i32,
            child: Some(child),
            windows: Vec::new(),
            done: false,
        });
    }
    let measured = measure(&mut targets, &taus, a.duration);
    // A command still running when --duration ended is not left behind.
    for t in &mut targets {
        if let Some(c) = &mut t.child {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
    measured?;
    let mut jobs: Vec<JobWss> = targets
        .into_iter()
        .map(|t| JobWss {
            summary: wss::summarize(&t.windows),
            name: t.name,
            pid: t.pid,
            windows: t.windows,
        })
        .collect();
    for f in &a.from {
        let text = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let file: WssFile = serde_json::from_slice(&text)
            .with_context(|| format!("{} is not a `memgang wss --json` file", f.display()))?;
        jobs.extend(file.jobs);
    }
    let summaries: Vec<Vec<TauSummary>> = jobs.iter().map(|j| j.summary.clone()).collect();
    let suggestion = wss::suggest(&summaries, device.write_bps, device.read_bps);
    if let Some(out) = &a.output {
        let series: Vec<(String, Vec<Window>)> = jobs
            .iter()
            .filter(|j| !j.windows.is_empty())
            .map(|j| (format!("{} (pid {})", j.name, j.pid), j.windows.clone()))
            .collect();
        crate::plot::wss(out, &series)?;
    }
    let file = WssFile {
        schema: 1,
        memgang_version: env!("CARGO_PKG_VERSION").into(),
        jobs,
        write_bps: device.write_bps,
        read_bps: device.read_bps,
        suggestion,
    };
    match &a.json {
        Some(p) if p.as_os_str() == "-" => {
            outln!("{}", serde_json::to_string_pretty(&file)?)?;
            return Ok(());
        }
        Some(p) => std::fs::write(p, serde_json::to_string_pretty(&file)?)
            .with_context(|| format!("writing {}", p.display()))?,
        None => {}
    }
    out!("{}", table(&file))?;
    Ok(())
}

/// Takes the τs in turn until every target has exited or `duration` passed.
fn measure(targets: &mut [Target], taus: &[Duration], duration: Option<Duration>) -> Result<()> {
    let start = Instant::now();
    let over = |now: Instant| duration.is_some_and(|d| now - start >= d);
    'outer: loop {
        for &tau in taus {
            let mut live: Vec<(usize, Vec<i32>)> = Vec::new();
            for (i, t) in targets.iter_mut().enumerate() {
                if t.alive() {
                    let pids = kernel::tree(t.pid);
                    kernel::clear(&pids).with_context(|| format!("measuring {}", t.name))?;
                    live.push((i, pids));
                }
            }
            if live.is_empty() || over(Instant::now()) {
                break 'outer;
            }
            let from = start.elapsed().as_secs_f64();
            std::thread::sleep(tau);
            let to = start.elapsed().as_secs_f64();
            for (i, pids) in live {
                let t = &mut targets[i];
                // Children born during the window count too.
                let mut all = kernel::tree(t.pid);
                all.extend(pids);
                all.sort_unstable();
                all.dedup();
                let u = kernel::usage(&all).with_context(|| format!("measuring {}", t.name))?;
                // A job that exited during the window has nothing to say.
                if u.touched() > 0 {
                    t.windows.push(Window {
                        tau_s: tau.as_secs_f64(),
                        start_s: from,
                        end_s: to,
                        referenced_bytes: u.referenced,
                        touched_bytes: u.touched(),
                    });
                }
            }
        }
    }
    Ok(())
}

fn table(f: &WssFile) -> String {
    let mut t = crate::report::table([
        "job",
        "tau",
        "windows",
        "mean WSS",
        "max WSS",
        "max/touched",
        "touched",
    ]);
    for j in &f.jobs {
        let touched = j.windows.iter().map(|w| w.touched_bytes).max().unwrap_or(0);
        for s in &j.summary {
            t.add_row(vec![
                j.name.clone(),
                format!("{}ms", (s.tau_s * 1000.0).round()),
                s.windows.to_string(),
                format_bytes(s.mean_bytes),
                format_bytes(s.max_bytes),
                format!("{:.0}%", 100.0 * s.max_share_of_touched),
                format_bytes(touched),
            ]);
        }
    }
    crate::report::numbers_right(&mut t, 2);
    let mut out = format!("{t}\n");
    match &f.suggestion {
        Some(s) => out.push_str(&format!(
            "suggested (working sets at τ = {}ms, {}% headroom): pool {} to run these jobs side by side \
             (cosched/auto), {} for gang; quantum {}s (a switch of the largest set takes {:.1}s at \
             {:.0} MB/s out, {:.0} MB/s in: at most {}% of the quantum)\n",
            (s.tau_s * 1000.0).round(),
            (wss::HEADROOM * 100.0).round(),
            format_bytes(s.cosched_pool_bytes),
            format_bytes(s.gang_pool_bytes),
            s.quantum_s,
            s.switch_s,
            f.write_bps / 1e6,
            f.read_bps / 1e6,
            (wss::SWITCH_SHARE * 100.0).round()
        )),
        None => out.push_str("no windows measured: the jobs exited before the first window ended\n"),
    }
    out
}
