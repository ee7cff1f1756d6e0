//! Shared setup of the real-kernel tests: root, a swap file and a private
//! baseline cache, all removed when the test ends, also when it fails.

#![allow(dead_code)]

use memgang_linux::swap::TestSwap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod daemon;
pub mod slurm;

/// The memgang the tests run: the one built with them, or
/// `$MEMGANG_TEST_MEMGANG` (an older build, the client of
/// `$MEMGANG_TEST_MEMGANGD`'s).
pub fn memgang() -> Command {
    if let Some(exe) = std::env::var_os("MEMGANG_TEST_MEMGANG") {
        return Command::new(exe);
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_memgang"));
    let workload = exe.with_file_name("memgang-workload");
    assert!(
        workload.exists(),
        "{} is missing: build the whole workspace first (cargo build --workspace), as .ci/run does",
        workload.display()
    );
    Command::new(exe)
}

/// Fails the test unless it runs as root. Root tests are `#[ignore]`d so
/// that a run without root lists them as ignored, never as passed;
/// `scripts/test` runs them as root with `--include-ignored`.
pub fn require_root(test: &str) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "{test} needs root (cgroups, swap): run it as root, as scripts/test does"
    );
}

/// Fails the test unless every one of `cmds` is on the PATH (programs
/// from Debian's packages that `scripts/test` installs as root, by the
/// function of scripts/lib.sh named in `how`).
pub fn require_installed(cmds: &[&str], how: &str) {
    let script = cmds
        .iter()
        .map(|c| format!("command -v {c}"))
        .collect::<Vec<_>>()
        .join(" && ");
    let found = Command::new("sh")
        .args(["-c", &script])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{} is missing: scripts/test installs them as root ({how})",
        cmds.join(" or ")
    );
}

pub struct Bed {
    pub dir: tempfile::TempDir,
    _swap: TestSwap,
}

/// Swap large enough for the tests' pools (a few hundred MiB each).
const TEST_SWAP: u64 = 2 << 30;

impl Bed {
    pub fn new() -> Bed {
        let swap = TestSwap::new(TEST_SWAP).expect("creating the test swap file");
        Bed {
            dir: tempfile::tempdir().expect("tempdir"),
            _swap: swap,
        }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `memgang run` with results and logs in the bed and a private cache.
    pub fn run(&self, exp: &Path, extra: &[&str]) -> (Output, Option<serde_json::Value>) {
        let json = self.dir.path().join(format!(
            "{}.json",
            exp.file_stem().unwrap().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&json);
        let out = memgang()
            .arg("run")
            .arg(exp)
            .arg("--json")
            .arg(&json)
            .arg("--logs")
            .arg(self.dir.path().join("logs"))
            .args(extra)
            .env("MEMGANG_CACHE", self.dir.path().join("cache"))
            .output()
            .unwrap();
        let value = std::fs::read(&json)
            .ok()
            .map(|b| serde_json::from_slice(&b).unwrap());
        (out, value)
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// cgroups named memgang-<pid> of `pid` in any hierarchy.
pub fn leftover_cgroups(pid: u32) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for root in [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/freezer",
        "/sys/fs/cgroup/unified",
    ] {
        let p = Path::new(root).join(format!("memgang-{pid}"));
        if p.exists() {
            found.push(p);
        }
    }
    found
}

/// Processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(marker) {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            found.push((
                pid,
                format!("{cmd} [{}]", stat.rsplit(')').next().unwrap_or("").trim()),
            ));
        }
    }
    found
}
