//! The conjugate-gradient examples (`examples/c/cg.c`, compiled against
//! this build's static library, and `examples/python/cg.py`) solve a small
//! problem in each of the four ways of Table 1 (incore, ooc, mmap, mema,
//! and mema with a fixed panel count), and every solution equals the
//! in-core one to the solver's tolerance. No root, no memory pressure:
//! what is tested is that each way reads the matrix right.

mod common;

use common::{c_compiler, compile_cg, crate_dir, library_dir, python};
use std::path::{Path, PathBuf};
use std::process::Command;

const MODES: [&[&str]; 5] = [
    &["incore"],
    &["ooc"],
    &["mmap"],
    &["mema"],
    &["mema", "--fixed", "2"],
];

/// Solver tolerance on the residual is 1e-8; the solutions of the
/// different modes do the same arithmetic, so they should agree far
/// better than that, but the test asks no more than the tolerance.
const TOL: f64 = 1e-8;

fn read_x(path: &Path) -> Vec<f64> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

fn assert_close(what: &str, x: &[f64], reference: &[f64]) {
    assert_eq!(x.len(), reference.len(), "{what}: length");
    let scale = reference.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let worst = x
        .iter()
        .zip(reference)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        worst <= TOL * scale,
        "{what}: differs from in core by {worst:e} (scale {scale:e})"
    );
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the example runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Runs `solver` (a command prefix) in every mode on `file`; the
/// solutions, named after the modes, go to `dir`.
fn solve_in_every_mode(solver: &[&std::ffi::OsStr], file: &Path, dir: &Path) -> Vec<PathBuf> {
    MODES
        .iter()
        .enumerate()
        .map(|(k, mode)| {
            let x = dir.join(format!("x{k}"));
            let text = run(Command::new(solver[0])
                .args(&solver[1..])
                .arg(mode[0])
                .arg(file)
                .args(&mode[1..])
                .arg("--x-out")
                .arg(&x)
                .env("MEMADAPT_LIB", library_dir().join("libmemadapt.so")));
            assert!(text.contains("converged"), "{mode:?}:\n{text}");
            x
        })
        .collect()
}

#[test]
fn c_and_python_cg_equal_in_core_in_every_mode() {
    let Some(cc) = c_compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("cg");
    compile_cg(&cc, &exe);
    // 14^3 unknowns in 5 panels: the last panel shorter, panels not a
    // whole number of pages.
    let file = dir.path().join("A.panels");
    run(Command::new(&exe)
        .arg("create")
        .arg(&file)
        .args(["14", "5"]));

    let c = solve_in_every_mode(&[exe.as_os_str()], &file, dir.path());
    let reference = read_x(&c[0]);
    assert!(reference.iter().all(|v| v.is_finite() && *v > 0.0));
    for (mode, x) in MODES.iter().zip(&c) {
        assert_close(&format!("C {mode:?}"), &read_x(x), &reference);
    }

    let Some(python) = python() else { return };
    let py_dir = dir.path().join("py");
    std::fs::create_dir(&py_dir).unwrap();
    // The Python example writes the same file format, byte for byte.
    let py_file = py_dir.join("A.panels");
    let script = crate_dir().join("examples/python/cg.py");
    run(Command::new(&python)
        .arg(&script)
        .arg("create")
        .arg(&py_file)
        .args(["14", "5"])
        .env("MEMADAPT_LIB", library_dir().join("libmemadapt.so")));
    assert!(
        std::fs::read(&file).unwrap() == std::fs::read(&py_file).unwrap(),
        "cg.c and cg.py create different files"
    );
    let py = solve_in_every_mode(&[python.as_os_str(), script.as_os_str()], &py_file, &py_dir);
    for (mode, x) in MODES.iter().zip(&py) {
        assert_close(&format!("Python {mode:?}"), &read_x(x), &reference);
    }
}
