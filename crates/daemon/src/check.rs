//! `memgangd --check-config [FILE]`: what an admin runs before a restart,
//! as any user (as `sshd -t` or `nginx -t`): the file parsed and checked
//! exactly as at start, the effective settings, and what of the node
//! memgangd would use (the pool derived from RAM, swap, the cgroup
//! hierarchy). Exit 0 when memgangd would accept the file, 1 (with the
//! file, line and key) when not.

use crate::config::{Config, KeyDefault, KEYS};
use memgang_core::units::format_bytes;
use std::path::Path;
use std::process::ExitCode;

/// A line of the report (written whole at the end: a closed pipe, as
/// `| head`, loses the rest, not the exit status).
macro_rules! say {
    ($out:ident, $($t:tt)*) => {{
        let _ = writeln!($out, $($t)*);
    }};
}

pub fn check(path: &Path, explicit: bool) -> ExitCode {
    use std::fmt::Write as _;
    let mut out = String::new();
    let cfg = match Config::load(path, explicit) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("memgangd: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let source = if path.exists() {
        format!("{}: valid", path.display())
    } else {
        format!("{}: no such file: the defaults", path.display())
    };
    say!(out, "# {source}; the effective settings:");
    let ram = memgang_linux::counters::memory_total().unwrap_or(0);
    let defaults = Config::defaults()
        .map(|d| d.effective())
        .unwrap_or_default();
    for (key, value) in cfg.effective() {
        let is_default = defaults.iter().any(|(k, v)| *k == key && *v == value);
        let phrase = KEYS
            .iter()
            .find(|k| k.name == key)
            .and_then(|k| match k.default {
                KeyDefault::Phrase(p) => Some(p),
                KeyDefault::Value(_) => None,
            });
        let line = match value {
            Some(v) => format!("{key} = {v}"),
            None => format!("# {key} unset"),
        };
        match (is_default, phrase) {
            (true, Some(p)) => say!(out, "{line:<48} # the default: {p}"),
            (true, None) => say!(out, "{line:<48} # the default"),
            (false, _) => say!(out, "{line}"),
        }
    }
    say!(out, "# this node:");
    say!(
        out,
        "#   RAM {}, pool {}",
        format_bytes(ram),
        format_bytes(cfg.pool_memory)
    );
    if cfg.pool_memory > ram {
        say!(out, "#   warning: pool_memory is more than the node's RAM");
    }
    match memgang_linux::counters::SwapStatus::read() {
        Ok(s) if s.total_bytes == 0 => say!(
            out,
            "#   swap: none: jobs beyond the pool wait (admission counts pool plus swap); add swap for memgang to switch through"
        ),
        Ok(s) => say!(
            out,
            "#   swap {} ({} used), {} for jobs after swap_reserve",
            format_bytes(s.total_bytes),
            format_bytes(s.used_bytes),
            format_bytes(s.total_bytes.saturating_sub(cfg.swap_reserve))
        ),
        Err(e) => say!(out, "#   swap: cannot tell: {e}"),
    }
    match memgang_linux::cgroup::detect() {
        Ok(b) => say!(out, "#   {}", b.describe()),
        Err(e) => say!(out, "#   warning: memgangd cannot run here: {e}"),
    }
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    ExitCode::SUCCESS
}
