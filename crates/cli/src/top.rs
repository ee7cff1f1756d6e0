//! `memgang top`: the node as memgangd sees it, redrawn in place each
//! second until `q`, Esc or Ctrl-C (the terminal is given back as it was,
//! also on SIGTERM, SIGHUP or a panic); one frame with `--once` or when
//! stdout is not a terminal. The frame is a pure function of the daemon's
//! answer ([`frame`]), cut to the terminal's width and height.

use crate::client::{ask, unix_now, user_name};
use crate::out::emit;
use anyhow::{bail, Result};
use clap::Args;
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::style::Stylize;
use crossterm::{cursor, execute, queue, terminal};
use memgang_core::text::printable;
use memgang_core::units::format_bytes;
use memgang_proto::top::{Activity, Count, JobView, NodeView};
use memgang_proto::{Request, Response};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the view is asked for again.
const REFRESH: Duration = Duration::from_secs(1);
/// A frame's size where stdout is no terminal (`--once` into a pipe).
const PLAIN: (usize, usize) = (80, 40);
/// Switches listed under the header.
const SWITCHES: usize = 3;

#[derive(Args)]
pub struct TopArgs {
    /// Print one frame and exit (what it does anyway when stdout is not a
    /// terminal): for scripts and tests.
    #[arg(long)]
    once: bool,
}

pub fn run(args: TopArgs) -> Result<()> {
    let tty = std::io::stdout().is_terminal();
    if args.once || !tty {
        let (w, h) = if tty { size() } else { PLAIN };
        let view = view()?;
        let lines = frame(&view, unix_now(), w, h, crate::out::color(tty));
        return emit(lines.join("\n") + "\n");
    }
    live()
}

fn view() -> Result<NodeView> {
    match ask(&Request::Top)? {
        Response::Top { view } => Ok(*view),
        r => bail!("unexpected answer to top: {r:?}"),
    }
}

fn size() -> (usize, usize) {
    terminal::size().map_or(PLAIN, |(w, h)| (w as usize, h as usize))
}

/// Gives the terminal back: whatever way `live` ends.
struct Screen;

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(
            std::io::stdout(),
            cursor::Show,
            terminal::LeaveAlternateScreen
        );
        let _ = terminal::disable_raw_mode();
    }
}

fn live() -> Result<()> {
    // Raw mode turns Ctrl-C into a key; these end the loop instead of
    // the process, so that the screen is restored.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let color = crate::out::color(true);
    let mut out = std::io::stdout();
    terminal::enable_raw_mode()?;
    let _screen = Screen;
    execute!(out, terminal::EnterAlternateScreen, cursor::Hide)?;
    while !stop.load(Ordering::Relaxed) {
        let (w, h) = size();
        let lines = match view() {
            Ok(v) => frame(&v, unix_now(), w, h, color),
            Err(e) => vec![fit(
                &format!("memgang top: {e:#} (trying again; q quits)"),
                w,
            )],
        };
        queue!(
            out,
            cursor::MoveTo(0, 0),
            terminal::Clear(terminal::ClearType::All)
        )?;
        out.write_all(lines.join("\r\n").as_bytes())?;
        out.flush()?;
        if wait_for_key(&stop)? {
            break;
        }
    }
    Ok(())
}

/// Until the next refresh: true on q, Esc or Ctrl-C; a resize redraws
/// at once.
fn wait_for_key(stop: &AtomicBool) -> Result<bool> {
    let until = Instant::now() + REFRESH;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        if !event::poll(left.min(Duration::from_millis(100)))? {
            continue;
        }
        match event::read()? {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if ctrl_c || matches!(k.code, KeyCode::Char('q' | 'Q') | KeyCode::Esc) {
                    return Ok(true);
                }
            }
            Event::Resize(..) => return Ok(false),
            _ => {}
        }
    }
    Ok(true)
}

/// The frame for `view` at `now`, at most `width` columns by `height`
/// lines (jobs past the last line counted in it).
pub fn frame(view: &NodeView, now: f64, width: usize, height: usize, color: bool) -> Vec<String> {
    let mut head = header(view, now);
    head.push(String::new());
    head.push(format!(
        "{:>6} {:<8} {:<14} {:<10} {:>7} {:>8} {:>8} {:>5}",
        "ID", "USER", "NAME", "STATE", "MEMORY", "RESIDENT", "SWAPPED", "TURNS"
    ));
    let mut lines: Vec<String> = head.iter().map(|l| fit(l, width)).collect();
    if color {
        let last = lines.len() - 1;
        lines[last] = lines[last].clone().bold().to_string();
    }
    let room = height.saturating_sub(lines.len()).max(1);
    let listed = if view.jobs.len() > room {
        room - 1
    } else {
        view.jobs.len()
    };
    for j in &view.jobs[..listed] {
        let line = fit(&job_line(j), width);
        lines.push(if color { paint(line, j.activity) } else { line });
    }
    let rest = view.jobs[listed..].iter().map(|j| j.activity);
    let mut more = Count::of(rest);
    for m in &view.more {
        match more.iter_mut().find(|c| c.activity == m.activity) {
            Some(c) => c.jobs += m.jobs,
            None => more.push(m.clone()),
        }
    }
    more.sort_by_key(|c| c.activity);
    if !more.is_empty() {
        let n: u32 = more.iter().map(|c| c.jobs).sum();
        lines.push(fit(&format!("… {n} more: {}", counts(&more)), width));
    }
    lines.truncate(height.max(1));
    lines
}

fn header(view: &NodeView, now: f64) -> Vec<String> {
    let pool = match view.pool_usage_bytes {
        Some(u) => format!(
            "{} of {} ({:.0}%)",
            format_bytes(u),
            format_bytes(view.pool_limit_bytes),
            100.0 * u as f64 / view.pool_limit_bytes.max(1) as f64
        ),
        None => format!("? of {}", format_bytes(view.pool_limit_bytes)),
    };
    let swap = match view.swap_used_bytes {
        Some(u) => format!(
            "{} of {}",
            format_bytes(u),
            format_bytes(view.swap_total_bytes)
        ),
        None => format!("? of {}", format_bytes(view.swap_total_bytes)),
    };
    let switch = match (view.switching_since_unix_s, view.next_switch_unix_s) {
        (Some(since), _) => format!("switching for {:.1} s", (now - since).max(0.0)),
        (None, Some(next)) => format!("next switch in {:.1} s", (next - now).max(0.0)),
        (None, None) => "no switch due (no job waits for a turn)".into(),
    };
    let mut lines = vec![
        format!(
            "memgang top: policy {}, quantum {} s; {switch}",
            view.policy, view.quantum_s
        ),
        format!(
            "pool {pool}   swap {swap} used, {} for jobs",
            format_bytes(view.swap_usable_bytes)
        ),
    ];
    let all: Vec<Activity> = view.jobs.iter().map(|j| j.activity).collect();
    let mut jobs = format!("jobs: {}", or_none(&counts(&Count::of(all))));
    if !view.others.is_empty() {
        jobs += &format!("; other users': {}", counts(&view.others));
    }
    lines.push(jobs);
    for s in view.switches.iter().rev().take(SWITCHES) {
        let ids = |v: &[u64]| {
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let others = if s.others > 0 {
            format!(" +{} other", s.others)
        } else {
            String::new()
        };
        lines.push(format!(
            "switch {:.1} s ago took {:.2} s: out [{}] in [{}]{others}; paged {} out, {} in",
            (now - s.at_unix_s).max(0.0),
            s.took_s,
            ids(&s.out),
            ids(&s.into),
            format_bytes(s.paged_out_bytes),
            format_bytes(s.paged_in_bytes),
        ));
    }
    lines
}

fn job_line(j: &JobView) -> String {
    let bytes = |b: Option<u64>| b.map_or_else(|| "-".into(), format_bytes);
    let lead = format!(
        "{:>6} {:<8} {:<14} {:<10} {:>7}",
        j.id,
        cut(&user_name(j.uid), 8),
        cut(&printable(&j.name), 14),
        j.activity.name(),
        format_bytes(j.memory_bytes)
    );
    match (&j.reason, j.activity) {
        (Some(why), Activity::Queued) => format!("{lead}  {}", printable(why)),
        _ => format!(
            "{lead} {:>8} {:>8} {:>5}",
            bytes(j.resident_bytes),
            bytes(j.swapped_bytes),
            j.run_share
                .map_or_else(|| "-".into(), |s| format!("{:.0}%", s * 100.0))
        ),
    }
}

fn paint(line: String, a: Activity) -> String {
    match a {
        Activity::Running => line.green().to_string(),
        Activity::PagingIn | Activity::PagingOut => line.yellow().to_string(),
        Activity::Frozen => line.blue().to_string(),
        Activity::Queued => line.dim().to_string(),
    }
}

fn counts(c: &[Count]) -> String {
    let parts: Vec<String> = c
        .iter()
        .map(|c| format!("{} {}", c.jobs, c.activity.name()))
        .collect();
    parts.join(", ")
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "none in progress".into()
    } else {
        s.into()
    }
}

/// `s` in at most `n` characters.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.into();
    }
    let mut c: String = s.chars().take(n.saturating_sub(1)).collect();
    c.push('…');
    c
}

fn fit(s: &str, width: usize) -> String {
    cut(s, width.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgang_proto::top::SwitchView;

    fn job(id: u64, activity: Activity) -> JobView {
        JobView {
            id,
            uid: 0,
            name: format!("job-with-a-long-name-{id}"),
            activity,
            reason: (activity == Activity::Queued).then(|| "waits for memory".into()),
            memory_bytes: 1 << 30,
            resident_bytes: Some(512 << 20),
            swapped_bytes: Some(0),
            run_share: Some(0.5),
            started_unix_s: Some(1.0),
        }
    }

    fn view(jobs: Vec<JobView>) -> NodeView {
        NodeView {
            at_unix_s: 100.0,
            policy: "gang".into(),
            quantum_s: 2.0,
            pool_limit_bytes: 2 << 30,
            pool_usage_bytes: Some(1 << 30),
            swap_total_bytes: 4 << 30,
            swap_used_bytes: Some(0),
            swap_usable_bytes: 3 << 30,
            switching_since_unix_s: None,
            next_switch_unix_s: Some(101.5),
            switches: vec![SwitchView {
                at_unix_s: 99.0,
                took_s: 0.25,
                out: vec![1],
                into: vec![2],
                others: 1,
                paged_out_bytes: 1 << 20,
                paged_in_bytes: 0,
            }],
            jobs,
            others: vec![Count {
                activity: Activity::Running,
                jobs: 2,
            }],
            more: vec![Count {
                activity: Activity::Queued,
                jobs: 7,
            }],
        }
    }

    #[test]
    fn a_frame_fits_its_box_and_counts_what_does_not() {
        let jobs = vec![
            job(1, Activity::Running),
            job(2, Activity::PagingOut),
            job(3, Activity::Queued),
            job(4, Activity::Queued),
        ];
        let v = view(jobs);
        let all = frame(&v, 100.0, 80, 40, false);
        let text = all.join("\n");
        assert!(all.iter().all(|l| l.chars().count() <= 80), "{text}");
        assert!(text.contains("next switch in 1.5 s"), "{text}");
        assert!(text.contains("other users': 2 running"), "{text}");
        assert!(text.contains("out [1] in [2] +1 other"), "{text}");
        assert!(text.contains("paging out"), "{text}");
        assert!(text.contains("waits for memory"), "{text}");
        assert!(text.contains("… 7 more: 7 queued"), "{text}");
        // Eight lines tall: the header, one job and the rest counted.
        let short = frame(&v, 100.0, 40, 8, false);
        assert_eq!(short.len(), 8, "{short:#?}");
        assert!(short.iter().all(|l| l.chars().count() <= 40));
        assert!(short[7].starts_with("… 10 more"), "{short:#?}");
    }

    #[test]
    fn colour_only_when_asked() {
        let v = view(vec![job(1, Activity::Running)]);
        assert!(!frame(&v, 100.0, 80, 40, false).concat().contains('\x1b'));
        assert!(frame(&v, 100.0, 80, 40, true).concat().contains('\x1b'));
    }
}
