//! Real applications keep their results across switches: pairs of the
//! SciPy CG and the NumPy stencil of bench/apps (from PyPI, in the repo's
//! .venv) gang-scheduled with every bulk mechanism in a pool that holds one
//! of them, each job's own check (residual, checksum) compared with the
//! same program run alone.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    let py = repo().join(".venv/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import numpy, scipy"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with numpy and scipy is missing: scripts/test makes it (ensure_python_env)",
        py.display()
    );
    py
}

/// The last line the program prints: its check.
fn alone(py: &PathBuf, args: &[&str]) -> String {
    let out = Command::new(py).args(args).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_string()
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn scipy_and_numpy_results_survive_every_switch() {
    require_root("scipy_and_numpy_results_survive_every_switch");
    let py = python();
    let bed = Bed::new();
    let apps = repo().join("bench/apps");
    // About 90 MiB steady each (CG: 80^3 unknowns, its build's peak about
    // 190 MiB; stencil: two 160^3 grids), a 112 MiB pool, 1 s quanta:
    // several switches each, about 3 s of work alone.
    let cg = apps.join("cg.py");
    let stencil = apps.join("stencil.py");
    for (prog, args) in [(&cg, ["80", "300"]), (&stencil, ["160", "60"])] {
        let prog = prog.to_str().unwrap();
        let want = alone(&py, &[prog, args[0], args[1]]);
        for switch in ["lru", "so/ao/ai"] {
            let exp = bed.write(
                "apps.toml",
                &format!(
                    r#"
pool_memory = "112M"
quantum = "1s"
[[job]]
name = "a"
command = ["{py}", "{prog}", "{a0}", "{a1}"]
memory = "90M"
[[job]]
name = "b"
command = ["{py}", "{prog}", "{a0}", "{a1}"]
memory = "90M"
"#,
                    py = py.display(),
                    a0 = args[0],
                    a1 = args[1]
                ),
            );
            let (out, v) = bed.run(
                &exp,
                &["--policy", "gang", "--switch", switch, "--baseline", "none"],
            );
            assert!(out.status.success(), "{prog} {switch}: {}", text(&out));
            let v = v.unwrap();
            assert!(
                v["switch_count"].as_u64().unwrap() >= 2,
                "{prog} {switch}: too few switches to test anything"
            );
            if switch != "lru" {
                let paged_in: u64 = v["switches"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["paged_in_bytes"].as_u64().unwrap())
                    .sum();
                assert!(paged_in > 8 << 20, "{prog} {switch}: paged in {paged_in}");
            }
            for job in v["jobs"].as_array().unwrap() {
                let log = job["log_dir"].as_str().unwrap();
                let said = std::fs::read_to_string(format!("{log}/stdout")).unwrap();
                assert_eq!(
                    said.trim().lines().last(),
                    Some(want.as_str()),
                    "{prog} {switch} job {}",
                    job["name"]
                );
            }
        }
    }
}
