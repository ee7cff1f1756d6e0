//! What the verbs draw on a terminal while they work, with indicatif, on
//! stderr and only when it is a terminal: `run`'s (and `calibrate`'s)
//! status line, which the runtime feeds through its `Progress` callback,
//! and `sim`'s bar of jobs done. No template colours anything, so there is
//! nothing for NO_COLOR to turn off.

use indicatif::{ProgressBar, ProgressStyle};
use memgang_core::units::format_bytes;
use memgang_runtime::executor::{Progress, Status};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// A run's status line: a spinner with the node's state at the last
/// sample, and the runtime's notes printed above it.
pub struct StatusLine {
    bar: ProgressBar,
}

impl StatusLine {
    /// A status line if stderr is a terminal; None otherwise (notes then
    /// go to the log).
    pub fn on_terminal() -> Option<Arc<StatusLine>> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(250));
        Some(Arc::new(StatusLine { bar }))
    }

    /// Removes the line, before the run's report is printed.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// `{line}` as a [`Progress`] for `RunOptions`, if there is one.
pub fn callback(line: &Option<Arc<StatusLine>>) -> Option<Arc<dyn Progress>> {
    line.clone().map(|l| l as Arc<dyn Progress>)
}

impl Progress for StatusLine {
    fn status(&self, s: &Status<'_>) {
        self.bar.set_message(status_text(s));
    }

    fn note(&self, line: &str) {
        self.bar.println(line);
    }
}

/// The status line's text.
fn status_text(s: &Status<'_>) -> String {
    let names = |n: &[&str]| {
        if n.is_empty() {
            "-".to_string()
        } else {
            n.join(",")
        }
    };
    format!(
        "{:.1}s {} | running {} | suspended {} | done {}/{} | pool {} | swap in {:.0}/s out {:.0}/s pages",
        s.at.as_secs_f64(),
        s.policy,
        names(&s.running),
        names(&s.suspended),
        s.finished,
        s.jobs,
        format_bytes(s.pool_bytes),
        s.swap_in_per_s,
        s.swap_out_per_s,
    )
}

/// `sim`'s bar when stderr is a terminal (jobs done, of the total if
/// known); a hidden one otherwise.
pub fn jobs_bar(total: Option<u64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} jobs, {msg} ({elapsed})")
                .expect("a valid template"),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {pos} jobs done, {msg} ({elapsed})")
                .expect("a valid template"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_says_what_runs() {
        let s = Status {
            at: Duration::from_millis(12_340),
            policy: "gang so/ao/ai",
            running: vec!["a"],
            suspended: vec![],
            finished: 1,
            jobs: 3,
            pool_bytes: 700 << 20,
            swap_in_per_s: 10.0,
            swap_out_per_s: 2.4,
        };
        assert_eq!(
            status_text(&s),
            "12.3s gang so/ao/ai | running a | suspended - | done 1/3 | pool 700M | \
             swap in 10/s out 2/s pages"
        );
    }
}
