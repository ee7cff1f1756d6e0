//! The commit memgangd is built from, for `memgang_build_info`:
//! `$MEMGANG_GIT` when set (a build from a source tarball), else `git
//! describe --always` of the checkout (the commit, or the tag it is or
//! follows), else "unknown". Rebuilt when HEAD moves (a commit, a
//! checkout); uncommitted changes are not marked, since they would not
//! rebuild it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=MEMGANG_GIT");
    let described = std::env::var("MEMGANG_GIT").ok().or_else(|| {
        // HEAD, the branch it names, and packed refs: what a commit or a
        // checkout changes (in a worktree too).
        for path in ["HEAD", "packed-refs"] {
            if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
        git(&["describe", "--always", "--abbrev=12"])
    });
    println!(
        "cargo:rustc-env=MEMGANG_GIT={}",
        described.as_deref().unwrap_or("unknown")
    );
}
