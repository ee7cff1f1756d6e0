//! Figures made from result files alone, as SVG or PNG (by the output's
//! extension): the paging activity trace of paper 000 Fig. 6, makespan
//! against the number of jobs of paper 001 Fig. 7/9, and simulator results
//! side by side.

use crate::out::outln;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use memgang_linux::paging::page_size;
use memgang_results::{RunResult, Switch};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Draws with `draw` on a drawing area of `size` in the output's format
/// and writes the file.
macro_rules! emit {
    ($out:expr, $size:expr, |$root:ident| $draw:expr) => {{
        let out: &Path = $out;
        register_fonts();
        match format_of(out)? {
            Format::Svg => {
                let mut svg = String::new();
                {
                    let $root = SVGBackend::with_string(&mut svg, $size).into_drawing_area();
                    let drawn: DrawResult<()> = $draw;
                    drawn.map_err(|e| anyhow!("drawing the plot: {e}"))?;
                    $root
                        .present()
                        .map_err(|e| anyhow!("drawing the plot: {e}"))?;
                }
                std::fs::write(out, svg)
                    .with_context(|| format!("writing the plot to {}", out.display()))?;
            }
            Format::Png => {
                let $root = BitMapBackend::new(out, $size).into_drawing_area();
                let drawn: DrawResult<()> = $draw;
                drawn.map_err(|e| anyhow!("drawing the plot: {e}"))?;
                $root
                    .present()
                    .map_err(|e| anyhow!("writing the plot to {}: {e}", out.display()))?;
            }
        }
        outln!("plot: {}", out.display())?;
    }};
}

#[derive(Subcommand)]
pub enum Plot {
    /// Swap-in and swap-out rates over time with the switches marked (paper
    /// 000 Fig. 6): one panel per file, sharing the time axis.
    Trace(TraceArgs),
    /// Makespan against the number of simultaneous jobs, one line per
    /// policy (paper 001 Fig. 7, 9): one panel per experiment family, the
    /// experiment's name less its `-nN` (N: the number of jobs).
    Makespan(MakespanArgs),
    /// Simulator results (`memgang sim --json`) side by side: mean bounded
    /// slowdown and switching overhead, one bar per file.
    Sim(MakespanArgs),
    /// Where each switch's time went (page-out, page-in, the whole switch,
    /// the disk's limit for its traffic) and the major faults its page-in
    /// left in the quantum after it: one row per file.
    Switches(SwitchesArgs),
}

#[derive(Args)]
pub struct SwitchesArgs {
    /// Results JSON written by `run --json`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The file to write: .svg or .png.
    #[arg(short, long)]
    output: PathBuf,
    /// The swap device's bandwidth (`memgang testbed bandwidth --json`),
    /// for each switch's limit: its pages out at the write rate plus its
    /// pages in at the read rate. Given twice, the slower of each.
    #[arg(long, value_name = "FILE")]
    bandwidth: Vec<PathBuf>,
}

#[derive(Args)]
pub struct MakespanArgs {
    /// Results JSON written by `run --json`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The file to write: .svg or .png.
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Args)]
pub struct TraceArgs {
    /// Results JSON written by `run --json`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The file to write: .svg or .png.
    #[arg(short, long)]
    output: PathBuf,
    /// Start of the time window, in seconds since the run started.
    #[arg(long, value_name = "S")]
    from: Option<f64>,
    /// End of the time window, in seconds since the run started.
    #[arg(long, value_name = "S")]
    to: Option<f64>,
}

pub fn run(plot: Plot) -> Result<()> {
    match plot {
        Plot::Trace(args) => trace(args),
        Plot::Makespan(args) => makespan(args),
        Plot::Sim(args) => sim(args),
        Plot::Switches(args) => switches(args),
    }
}

const WIDTH: u32 = 1100;
const PANEL_HEIGHT: u32 = 300;
const SWAP_IN: RGBColor = RGBColor(31, 119, 180);
const SWAP_OUT: RGBColor = RGBColor(214, 39, 40);
const SWITCH: RGBColor = RGBColor(96, 96, 96);
const MIB: f64 = 1024.0 * 1024.0;
/// Line colours of the makespan plot (matplotlib's tab10: tell apart on
/// white, unlike plotters' palettes, whose third colour is yellow).
const LINES: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One panel: rates (MiB/s) against time (s) and the switches in the window.
struct Panel {
    caption: String,
    swap_in: Vec<(f64, f64)>,
    swap_out: Vec<(f64, f64)>,
    switches: Vec<Switch>,
}

fn trace(args: TraceArgs) -> Result<()> {
    check_output_dir(&args.output)?;
    let results = args
        .files
        .iter()
        .map(|f| load(f).map(|r| (f, r)))
        .collect::<Result<Vec<_>>>()?;
    let t_max = results
        .iter()
        .flat_map(|(_, r)| r.samples.iter().map(|s| s.t_s))
        .fold(0.0, f64::max);
    let from = args.from.unwrap_or(0.0);
    let to = args.to.unwrap_or(t_max);
    if from >= to {
        bail!("empty time window {from}s..{to}s: the runs' samples end at {t_max:.1}s; fix --from/--to");
    }
    let page = page_size() as f64;
    let mut panels = Vec::new();
    for (file, r) in &results {
        let p = panel(r, page, from, to);
        if p.swap_in.is_empty() {
            bail!(
                "{} has no samples between {from}s and {to}s: widen --from/--to",
                file.display()
            );
        }
        panels.push(p);
    }
    // One rate scale for all panels, so that they compare at a glance.
    let y_max = panels
        .iter()
        .flat_map(|p| p.swap_in.iter().chain(&p.swap_out).map(|&(_, y)| y))
        .fold(1.0, f64::max)
        * 1.1;
    let size = (WIDTH, PANEL_HEIGHT * panels.len() as u32);
    emit!(&args.output, size, |root| draw(
        &root,
        &panels,
        from..to,
        y_max
    ));
    Ok(())
}

/// What to write, by the output's extension.
#[derive(Clone, Copy)]
enum Format {
    Svg,
    Png,
}

fn format_of(out: &Path) -> Result<Format> {
    match out.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(Format::Svg),
        Some(e) if e.eq_ignore_ascii_case("png") => Ok(Format::Png),
        _ => bail!(
            "cannot tell the format of {}: name it .svg or .png",
            out.display()
        ),
    }
}

/// Plotters lays text out (and the PNG backend draws it) with ab_glyph from
/// fonts registered here: it has no font files of its own, and machines
/// may have none.
fn register_fonts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            // The font is valid: it is compiled in.
            let _ = plotters::style::register_font(
                "sans-serif",
                style,
                epaint_default_fonts::UBUNTU_LIGHT,
            );
        }
    });
}

/// Fail before the work, with a hint, when the output can't be written.
fn check_output_dir(out: &Path) -> Result<()> {
    format_of(out)?;
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        if !dir.is_dir() {
            bail!(
                "cannot write {}: directory {} does not exist; create it first or choose another -o",
                out.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<RunResult> {
    const HINT: &str = "give results JSON written by `memgang run --json FILE`";
    let text =
        std::fs::read(path).with_context(|| format!("reading {} ({HINT})", path.display()))?;
    serde_json::from_slice(&text)
        .with_context(|| format!("{} is not a memgang results file ({HINT})", path.display()))
}

fn load(path: &Path) -> Result<RunResult> {
    let r = read(path)?;
    if r.samples.is_empty() {
        bail!(
            "{} has no samples to plot: the run ended before its first 100 ms sample; \
             plot a run that paged",
            path.display()
        );
    }
    Ok(r)
}

fn panel(r: &RunResult, page: f64, from: f64, to: f64) -> Panel {
    let mut swap_in = Vec::new();
    let mut swap_out = Vec::new();
    let mut prev_t = 0.0;
    for (i, s) in r.samples.iter().enumerate() {
        // Each sample counts pages since the previous one (the first: since
        // the start, or one spacing if it was taken at 0).
        let mut dt = s.t_s - prev_t;
        if i == 0 && dt <= 0.0 {
            dt = r.samples.get(1).map_or(0.1, |n| n.t_s - s.t_s);
        }
        prev_t = s.t_s;
        if dt <= 0.0 || s.t_s < from || s.t_s > to {
            continue;
        }
        let rate = |pages: u64| pages as f64 * page / MIB / dt;
        swap_in.push((s.t_s, rate(s.swap_in)));
        swap_out.push((s.t_s, rate(s.swap_out)));
    }
    let switches = r
        .switches
        .iter()
        .filter(|s| s.at_s + s.took_s >= from && s.at_s <= to)
        .cloned()
        .collect();
    Panel {
        caption: format!(
            "{} {} {} q={}s",
            r.experiment, r.policy, r.switch, r.quantum_s
        ),
        swap_in,
        swap_out,
        switches,
    }
}

type DrawResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The series' labels, in a box that lets the lines show through.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    at: SeriesLabelPosition,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.5))
        .draw()?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[Panel],
    x: std::ops::Range<f64>,
    y_max: f64,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    {
        root.fill(&WHITE)?;
        for (area, p) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
            let mut chart = ChartBuilder::on(area)
                .caption(&p.caption, ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(x.clone(), 0.0..y_max)?;
            chart
                .configure_mesh()
                .x_desc("time (s)")
                .y_desc("MiB/s")
                .draw()?;
            // The time each switch took, then a marker where it began.
            let (lo, hi) = (x.start, x.end);
            chart.draw_series(p.switches.iter().filter(|s| s.took_s > 0.0).map(|s| {
                let band = [(s.at_s.max(lo), 0.0), ((s.at_s + s.took_s).min(hi), y_max)];
                Rectangle::new(band, SWITCH.mix(0.15).filled())
            }))?;
            chart
                .draw_series(
                    p.switches
                        .iter()
                        .filter(|s| (lo..=hi).contains(&s.at_s))
                        .map(|s| PathElement::new(vec![(s.at_s, 0.0), (s.at_s, y_max)], SWITCH)),
                )?
                .label("switch")
                .legend(|(x, y)| PathElement::new(vec![(x, y - 6), (x, y + 6)], SWITCH));
            for (points, color, label) in [
                (&p.swap_in, SWAP_IN, "swap-in"),
                (&p.swap_out, SWAP_OUT, "swap-out"),
            ] {
                chart
                    .draw_series(LineSeries::new(points.iter().copied(), color))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
    }
    Ok(())
}

/// A run's place in the makespan plot: its family (panel), its line and
/// the number of jobs.
fn makespan_point(r: &RunResult) -> (String, String, usize) {
    let (family, n) = match r.experiment.rsplit_once("-n") {
        Some((f, n)) if n.parse::<usize>().is_ok() => (f.to_string(), n.parse().unwrap()),
        _ => (r.experiment.clone(), r.jobs.len()),
    };
    let line = match (&r.overlap, r.policy.as_str()) {
        (Some(o), p) => format!("{p} {o}"),
        (None, "gang") => format!("gang {}", r.switch),
        (None, p) => p.to_string(),
    };
    (family, line, n)
}

/// (line, points of (n, makespan, stopped by a time limit)) of one panel.
type Lines = Vec<(String, Vec<(usize, f64, bool)>)>;

fn makespan(args: MakespanArgs) -> Result<()> {
    check_output_dir(&args.output)?;
    let mut panels: Vec<(String, Lines)> = Vec::new();
    for f in &args.files {
        let r = read(f)?;
        let (family, line, n) = makespan_point(&r);
        let panel = match panels.iter().position(|(p, _)| *p == family) {
            Some(i) => &mut panels[i].1,
            None => {
                panels.push((family, Vec::new()));
                &mut panels.last_mut().unwrap().1
            }
        };
        let points = match panel.iter().position(|(l, _)| *l == line) {
            Some(i) => &mut panel[i].1,
            None => {
                panel.push((line.clone(), Vec::new()));
                &mut panel.last_mut().unwrap().1
            }
        };
        if points.iter().any(|p| p.0 == n) {
            bail!(
                "{}: a second {line:?} run of {} with {n} jobs; give one result per policy and n",
                f.display(),
                r.experiment
            );
        }
        points.push((n, r.makespan_s, r.interrupted));
    }
    for (_, lines) in &mut panels {
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, points) in lines.iter_mut() {
            points.sort_by_key(|p| p.0);
        }
    }
    let size = (WIDTH, PANEL_HEIGHT * 3 / 2 * panels.len() as u32);
    emit!(&args.output, size, |root| draw_makespan(&root, &panels));
    Ok(())
}

fn draw_makespan<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[(String, Lines)],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    {
        root.fill(&WHITE)?;
        for (area, (family, lines)) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
            let points = || lines.iter().flat_map(|(_, p)| p.iter());
            let n_max = points().map(|p| p.0).max().unwrap_or(1);
            let y_max = points().map(|p| p.1).fold(1.0, f64::max) * 1.1;
            let mut chart = ChartBuilder::on(area)
                .caption(
                    format!(
                        "{family}: makespan (hollow: stopped by the time limit, a lower bound)"
                    ),
                    ("sans-serif", 18),
                )
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.5..n_max as f64 + 0.5, 0.0..y_max)?;
            chart
                .configure_mesh()
                .x_desc("simultaneous jobs")
                .y_desc("makespan (s)")
                .x_labels(n_max + 1)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .draw()?;
            for (i, (line, pts)) in lines.iter().enumerate() {
                let color = LINES[i % LINES.len()];
                let xy = |&(n, m, _): &(usize, f64, bool)| (n as f64, m);
                chart
                    .draw_series(LineSeries::new(pts.iter().map(xy), color.stroke_width(2)))?
                    .label(line.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart.draw_series(pts.iter().map(|p| {
                    let style = if p.2 {
                        color.stroke_width(2)
                    } else {
                        color.filled()
                    };
                    Circle::new(xy(p), 4, style)
                }))?;
            }
            legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        }
    }
    Ok(())
}

/// One bar of `plot sim`: the run's label and its two figures.
struct SimBar {
    label: String,
    slowdown: f64,
    overhead_pct: f64,
}

fn read_sim(path: &Path) -> Result<SimBar> {
    const HINT: &str = "give results JSON written by `memgang sim --json FILE`";
    let text =
        std::fs::read(path).with_context(|| format!("reading {} ({HINT})", path.display()))?;
    let v: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not JSON ({HINT})", path.display()))?;
    let num = |k: &str| {
        v[k].as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .with_context(|| format!("{}: no number {k:?} ({HINT})", path.display()))
    };
    let text_of = |k: &str| v[k].as_str().unwrap_or("?").to_string();
    Ok(SimBar {
        label: format!(
            "{} {} q={}s",
            text_of("policy"),
            text_of("switching"),
            num("quantum_s")?
        ),
        slowdown: num("mean_bounded_slowdown")?,
        overhead_pct: 100.0 * num("switching_overhead")?,
    })
}

fn sim(args: MakespanArgs) -> Result<()> {
    check_output_dir(&args.output)?;
    let bars = args
        .files
        .iter()
        .map(|f| read_sim(f))
        .collect::<Result<Vec<_>>>()?;
    emit!(&args.output, (WIDTH, PANEL_HEIGHT * 2), |root| draw_sim(
        &root, &bars
    ));
    Ok(())
}

fn draw_sim<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, bars: &[SimBar]) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let n = bars.len();
    type Figure = fn(&SimBar) -> f64;
    let panels: [(&str, Figure); 2] = [
        ("mean bounded slowdown", |b| b.slowdown),
        ("switching overhead (% of node time)", |b| b.overhead_pct),
    ];
    for (i, (area, (what, value))) in root.split_evenly((2, 1)).iter().zip(panels).enumerate() {
        let y_max = bars.iter().map(value).fold(1e-9, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(what, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..y_max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                    bars[i as usize].label.clone()
                } else {
                    String::new()
                }
            })
            .draw()?;
        let color = LINES[i];
        chart.draw_series(bars.iter().enumerate().map(|(j, b)| {
            let x = j as f64;
            Rectangle::new([(x - 0.3, 0.0), (x + 0.3, value(b))], color.filled())
        }))?;
    }
    Ok(())
}

/// `memgang wss -o`: per job, the working set of each τ over time (at the
/// end of its windows) and the pages touched so far (paper 004 Fig. 5-7).
pub fn wss(out: &Path, jobs: &[(String, Vec<memgang_core::wss::Window>)]) -> Result<()> {
    check_output_dir(out)?;
    if jobs.is_empty() {
        bail!("nothing to plot: no job lived through a whole window");
    }
    emit!(out, (WIDTH, PANEL_HEIGHT * jobs.len() as u32), |root| {
        draw_wss(&root, jobs)
    });
    Ok(())
}

fn draw_wss<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    jobs: &[(String, Vec<memgang_core::wss::Window>)],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    for (area, (name, windows)) in root.split_evenly((jobs.len(), 1)).iter().zip(jobs) {
        let t_max = windows.iter().map(|w| w.end_s).fold(1e-3, f64::max);
        let y_max = windows
            .iter()
            .map(|w| w.touched_bytes.max(w.referenced_bytes) as f64 / MIB)
            .fold(1e-3, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{name}: working sets"), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("MiB")
            .draw()?;
        let mut taus: Vec<f64> = windows.iter().map(|w| w.tau_s).collect();
        taus.sort_by(f64::total_cmp);
        taus.dedup();
        for (i, tau) in taus.iter().enumerate() {
            let color = LINES[i % LINES.len()];
            let points = windows
                .iter()
                .filter(|w| w.tau_s == *tau)
                .map(|w| (w.end_s, w.referenced_bytes as f64 / MIB));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(format!("τ = {} ms", (tau * 1000.0).round()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        let touched = windows
            .iter()
            .map(|w| (w.end_s, w.touched_bytes as f64 / MIB));
        chart
            .draw_series(LineSeries::new(touched, BLACK))?
            .label("touched since start")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    Ok(())
}

/// `memgang testbed bandwidth --json`, the fields a switch's limit needs.
#[derive(Deserialize)]
struct DiskRates {
    read_bytes_per_s: f64,
    write_bytes_per_s: f64,
}

/// One run's switches: seconds per part, the limit, and the faults left.
struct SwitchRow {
    caption: String,
    /// Per switch: page-out s, page-in s, the whole switch s.
    seconds: Vec<[f64; 3]>,
    limits: Vec<Option<f64>>,
    /// Per switch that paged in: faults after it, % of the pages it paged in.
    faults_pct: Vec<(usize, f64)>,
}

const PAGE_OUT: RGBColor = SWAP_OUT;
const PAGE_IN: RGBColor = SWAP_IN;
/// The issue-12 target for the faults a page-in leaves.
const FAULTS_TARGET_PCT: f64 = 1.0;

fn switches(args: SwitchesArgs) -> Result<()> {
    check_output_dir(&args.output)?;
    let mut rates: Option<(f64, f64)> = None;
    for f in &args.bandwidth {
        let text = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let d: DiskRates = serde_json::from_slice(&text).with_context(|| {
            format!(
                "{} is not a bandwidth file: give the output of `memgang testbed bandwidth --json`",
                f.display()
            )
        })?;
        let (r, w) = rates.unwrap_or((f64::INFINITY, f64::INFINITY));
        rates = Some((r.min(d.read_bytes_per_s), w.min(d.write_bytes_per_s)));
    }
    let page = page_size() as f64;
    let mut rows = Vec::new();
    for f in &args.files {
        let r = read(f)?;
        if r.switches.is_empty() {
            bail!(
                "{} has no switches to plot: plot a gang or hybrid run that switched",
                f.display()
            );
        }
        let seconds = r
            .switches
            .iter()
            .map(|s| [s.page_out_s, s.page_in_s, s.took_s])
            .collect();
        let limits = r
            .switches
            .iter()
            .map(|s| {
                rates.map(|(rd, wr)| {
                    s.swap_out_pages as f64 * page / wr + s.swap_in_pages as f64 * page / rd
                })
            })
            .collect();
        let faults_pct = r
            .switches
            .iter()
            .enumerate()
            .filter(|(_, s)| s.paged_in_bytes > 0)
            .filter_map(|(k, s)| {
                // Results written before the counts were stored lack them.
                let faults = s.faults_after.or_else(|| r.faults_after_switch(k))?;
                Some((k, faults as f64 * page / s.paged_in_bytes as f64 * 100.0))
            })
            .collect();
        let grows = r
            .max_switch_share
            .map(|m| format!(" growing to switch <= {:.0}%", m * 100.0))
            .unwrap_or_default();
        rows.push(SwitchRow {
            caption: format!(
                "{} {} {} q={}s{grows}",
                r.experiment, r.policy, r.switch, r.quantum_s
            ),
            seconds,
            limits,
            faults_pct,
        });
    }
    let size = (WIDTH, PANEL_HEIGHT * rows.len() as u32);
    emit!(&args.output, size, |root| draw_switches(&root, &rows));
    Ok(())
}

/// The mesh of a per-switch panel: switches numbered from 1 along x.
fn switch_axis<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    switches: usize,
    y_desc: &str,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(switches.min(20))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("switch")
        .y_desc(y_desc)
        .draw()?;
    Ok(())
}

fn draw_switches<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[SwitchRow],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    // One seconds scale for all rows, so that runs compare at a glance.
    let y_max = rows
        .iter()
        .flat_map(|r| {
            r.seconds
                .iter()
                .flatten()
                .copied()
                .chain(r.limits.iter().flatten().copied())
        })
        .fold(0.1, f64::max)
        // Room above the bars for the legend.
        * 1.45;
    for (area, row) in root.split_evenly((rows.len(), 1)).iter().zip(rows) {
        let (left, right) = area.split_horizontally((WIDTH as f64 * 0.62) as u32);
        let n = row.seconds.len() as f64;
        let mut chart = ChartBuilder::on(&left)
            .caption(
                format!("{}: seconds per switch", row.caption),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d(0.5..n + 0.5, 0.0..y_max)?;
        switch_axis(&mut chart, row.seconds.len(), "s")?;
        for (i, (color, label)) in [
            (PAGE_OUT, "page-out"),
            (PAGE_IN, "page-in"),
            (SWITCH, "whole switch"),
        ]
        .into_iter()
        .enumerate()
        {
            let x0 = |k: usize| k as f64 + 1.0 - 0.36 + i as f64 * 0.24;
            chart
                .draw_series(row.seconds.iter().enumerate().map(|(k, s)| {
                    Rectangle::new([(x0(k), 0.0), (x0(k) + 0.22, s[i])], color.filled())
                }))?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        if row.limits.iter().any(Option::is_some) {
            chart
                .draw_series(row.limits.iter().enumerate().filter_map(|(k, l)| {
                    let x = k as f64 + 1.0;
                    l.map(|l| {
                        PathElement::new(vec![(x - 0.42, l), (x + 0.42, l)], BLACK.stroke_width(2))
                    })
                }))?
                .label("disk limit")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2))
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;

        let f_max = row
            .faults_pct
            .iter()
            .map(|&(_, p)| p)
            .fold(FAULTS_TARGET_PCT, f64::max)
            * 1.2;
        let mut chart = ChartBuilder::on(&right)
            .caption("faults after page-in, % of pages in", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d(0.5..n + 0.5, 0.0..f_max)?;
        switch_axis(&mut chart, row.seconds.len(), "%")?;
        chart.draw_series(row.faults_pct.iter().map(|&(k, p)| {
            let x = k as f64 + 1.0;
            Rectangle::new([(x - 0.3, 0.0), (x + 0.3, p)], PAGE_IN.mix(0.6).filled())
        }))?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.5, FAULTS_TARGET_PCT), (n + 0.5, FAULTS_TARGET_PCT)],
                BLACK.stroke_width(1),
            )))?
            .label("target 1%")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}
