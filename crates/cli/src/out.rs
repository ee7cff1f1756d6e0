//! What the verbs write to stdout and stderr, where a reader may have gone
//! (`memgang run --check | head -1`, `memgang status | grep -q x`), and
//! whether they may colour it.
//!
//! Rust ignores SIGPIPE, so a write to a pipe whose reader has closed
//! fails with EPIPE, on which `print!` panics (exit 101). Every verb
//! writes stdout through [`emit`] instead (or [`outln!`]), which turns
//! EPIPE into [`StdoutClosed`], and `main` ends a verb that gets it
//! quietly with exit 0; stderr is written by [`note!`], which drops what
//! cannot be written. SIGPIPE is not reset to its default (death, 141):
//! a verb that holds frozen jobs, cgroups or a swap file (`run`,
//! `calibrate`, `testbed up`, `slurm agent`) would die without undoing
//! them, and the client verbs' rule below would not hold.
//!
//! Why exit 0: what was asked was done (a job submitted or cancelled, a
//! run finished, a table answered) and the reader took what it wanted, so
//! a pipeline under `set -o pipefail` does not fail for it, and a script
//! does not submit again a job whose id it cut off. `run` keeps its own
//! code (jobs failed, interrupted), which does not depend on stdout.

use anyhow::Result;
use std::io::Write;

/// stdout (or the stderr `follow` passes a job's stderr on to) was closed
/// by its reader: an error of its own type, so that only a broken pipe on
/// our output ends a verb quietly, never one on the daemon's socket (a
/// busy daemon answers and closes before it reads the request: that error
/// must still be told).
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout closed by its reader")
    }
}

impl std::error::Error for StdoutClosed {}

/// Whether `e` is (or wraps) [`StdoutClosed`].
pub fn closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<StdoutClosed>())
}

/// Writes `bytes` to stdout, now.
pub fn emit(bytes: impl AsRef<[u8]>) -> Result<()> {
    emit_to(&mut std::io::stdout().lock(), bytes)
}

/// [`emit`] to `out`: `follow` passes the job's stderr on to ours, which a
/// reader may close as well (`2>&1 | head`).
pub fn emit_to(out: &mut impl Write, bytes: impl AsRef<[u8]>) -> Result<()> {
    match out.write_all(bytes.as_ref()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        r => Ok(r?),
    }
}

/// `println!` through [`emit`]: a `Result` to `?`, never a panic.
macro_rules! outln {
    () => {
        $crate::out::emit("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::emit(format!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// `print!` through [`emit`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::emit(format!($($arg)*))
    };
}
pub(crate) use out;

/// `eprintln!` that drops what cannot be written (a closed stderr must not
/// panic a verb, least of all in a `Drop` that undoes its work).
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}
pub(crate) use note;

/// Whether to colour what goes to a stream that is a terminal or not: on
/// a terminal unless NO_COLOR is set to anything but "" (no-color.org).
/// clap (anstream) asks the same of NO_COLOR by itself.
pub fn color(terminal: bool) -> bool {
    wants_color(terminal, std::env::var_os("NO_COLOR").as_deref())
}

fn wants_color(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_from_other_errors() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        drop(reader);
        let e = emit_to(&mut writer, "x").unwrap_err();
        assert!(closed(&e) && closed(&e.context("printing the table")));
        let other = emit_to(&mut std::fs::File::open("/dev/null").unwrap(), "x").unwrap_err();
        assert!(!closed(&other), "{other}");
    }

    #[test]
    fn colour_only_on_a_terminal_and_without_no_color() {
        use std::ffi::OsStr;
        assert!(wants_color(true, None));
        assert!(wants_color(true, Some(OsStr::new(""))));
        assert!(!wants_color(true, Some(OsStr::new("1"))));
        assert!(!wants_color(false, None));
    }
}
