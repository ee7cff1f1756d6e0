//! Real applications keep their results across switches: pairs of the
//! SciPy CG and the NumPy stencil of bench/apps (from PyPI, in the repo's
//! .venv) and of LAMMPS (Debian's, two MPI ranks per job) gang-scheduled
//! under lru and so/ao/ai in a pool that holds one of them, each job's own
//! check (residual, checksum, final energies) compared with the same
//! program run alone.

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
fn alone(cmd: &[String]) -> String {
    let out = Command::new(&cmd[0]).args(&cmd[1..]).output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_string()
}

/// Two jobs of `cmd`, each declaring `memory`, gang-scheduled in `pool`
/// with 1 s quanta under lru and so/ao/ai: each switches at least twice,
/// so/ao/ai pages in more than 8 MiB, and every job ends with the check
/// `cmd` printed alone.
fn pair_keeps_its_check(bed: &Bed, cmd: &[String], memory: &str, pool: &str) {
    let want = alone(cmd);
    let command = cmd
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let exp = bed.write(
        "apps.toml",
        &format!(
            "pool_memory = \"{pool}\"\nquantum = \"1s\"\n\
             [[job]]\nname = \"a\"\ncommand = [{command}]\nmemory = \"{memory}\"\n\
             [[job]]\nname = \"b\"\ncommand = [{command}]\nmemory = \"{memory}\"\n"
        ),
    );
    for switch in ["lru", "so/ao/ai"] {
        let (out, v) = bed.run(
            &exp,
            &["--policy", "gang", "--switch", switch, "--baseline", "none"],
        );
        assert!(out.status.success(), "{cmd:?} {switch}: {}", text(&out));
        let v = v.unwrap();
        assert!(
            v["switch_count"].as_u64().unwrap() >= 2,
            "{cmd:?} {switch}: too few switches to test anything"
        );
        if switch != "lru" {
            let paged_in: u64 = v["switches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["paged_in_bytes"].as_u64().unwrap())
                .sum();
            assert!(paged_in > 8 << 20, "{cmd:?} {switch}: paged in {paged_in}");
        }
        for job in v["jobs"].as_array().unwrap() {
            let log = job["log_dir"].as_str().unwrap();
            let said = std::fs::read_to_string(format!("{log}/stdout")).unwrap();
            assert_eq!(
                said.trim().lines().last(),
                Some(want.as_str()),
                "{cmd:?} {switch} job {}",
                job["name"]
            );
        }
    }
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn scipy_and_numpy_results_survive_every_switch() {
    require_root("scipy_and_numpy_results_survive_every_switch");
    let py = python().display().to_string();
    let bed = Bed::new();
    let apps = repo().join("bench/apps");
    // About 90 MiB steady each (CG: 80^3 unknowns, its build's peak about
    // 190 MiB; stencil: two 160^3 grids), a 112 MiB pool: several switches
    // each, about 3 s of work alone.
    for (prog, a0, a1) in [("cg.py", "80", "300"), ("stencil.py", "160", "60")] {
        let prog = apps.join(prog).display().to_string();
        let cmd = [py.clone(), prog, a0.into(), a1.into()];
        pair_keeps_its_check(&bed, &cmd, "90M", "112M");
    }
}

#[test]
#[ignore = "needs root: cgroups, swap; LAMMPS and Open MPI from Debian (scripts/test installs them as root)"]
fn lammps_results_survive_every_switch() {
    require_root("lammps_results_survive_every_switch");
    require_installed(&["lmp", "mpirun"], "ensure_lammps");
    let bed = Bed::new();
    // Two MPI ranks per job; 36^3 cells of 4 atoms (186,624), 100 steps:
    // a few seconds alone. A pool of 112M holds one job and not two (the
    // pair check asserts that so/ao/ai paged). The check is the last
    // thermo line, printed to 8 digits: equal only if every atom came back.
    let lammps = repo().join("bench/apps/lammps.sh").display().to_string();
    let cmd = [lammps, "36".into(), "100".into()];
    pair_keeps_its_check(&bed, &cmd, "80M", "112M");
}
