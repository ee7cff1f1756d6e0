//! Whether CRIU can checkpoint jobs to files on this machine: paper 001
//! switches sets with checkpoints to files, and issue 5 makes such a
//! backend optional. No backend is built on top of this yet; `memgang
//! testbed status` says whether one could be, and why not.

use std::io::ErrorKind;
use std::process::Command;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Criu {
    /// No `criu` on `PATH`.
    Missing,
    /// `criu check` failed; the reason is its last error line.
    Broken(String),
    /// `criu check` passed.
    Usable,
}

/// Run `criu check` (needs root for a meaningful answer).
pub fn check() -> Criu {
    match Command::new("criu").arg("check").output() {
        Err(e) if e.kind() == ErrorKind::NotFound => Criu::Missing,
        Err(e) => Criu::Broken(format!("cannot run criu: {e}")),
        Ok(out) if out.status.success() => Criu::Usable,
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            // CRIU's first error is the cause; later ones are its fallout
            // (on Debian 12 with Linux 6.x: "vdso: Unexpected rt vDSO area
            // bounds", then "Could not initialize kernel features").
            let cause = text
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("Error") && !l.contains("exited, status="))
                .or_else(|| text.lines().map(str::trim).find(|l| !l.is_empty()))
                .unwrap_or("no output");
            Criu::Broken(format!("criu check failed ({}): {cause}", out.status))
        }
    }
}

impl std::fmt::Display for Criu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Criu::Missing => write!(f, "not usable: criu is not installed"),
            Criu::Broken(why) => write!(f, "not usable: {why}"),
            Criu::Usable => write!(f, "criu check passed (no checkpoint backend is built yet)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real `criu check`, whatever this machine has: the answer must
    /// agree with whether criu is installed, and a failure must say why.
    #[test]
    fn check_agrees_with_the_machine() {
        let installed = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("criu").is_file()))
            .unwrap_or(false);
        let c = check();
        eprintln!("criu: {c}");
        match c {
            Criu::Missing => assert!(!installed, "criu is on PATH but was not found"),
            Criu::Broken(why) => {
                assert!(installed);
                assert!(
                    why.starts_with("criu check failed") && why.len() > 30,
                    "{why}"
                );
            }
            Criu::Usable => assert!(installed),
        }
    }
}
