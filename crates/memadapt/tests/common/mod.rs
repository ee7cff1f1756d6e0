//! Helpers shared by the integration tests that use the built libraries.
#![allow(dead_code)] // each test file uses a part

use std::path::PathBuf;

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where this build's `libmemadapt.a` and `libmemadapt.so` are. Cargo
/// compiles the library with all its crate types before the tests and
/// leaves them beside the test executable, in `<target>/<profile>/deps`
/// (`cargo build` also copies them up to `<target>/<profile>`). Found
/// from the executable, not from a guessed `target/`, so that
/// CARGO_TARGET_DIR, `--release` and `--target` all work.
pub fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let deps = exe.parent().expect("the executable is in a directory");
    let candidates = [deps.to_owned(), deps.join("..")];
    candidates
        .iter()
        .find(|d| d.join("libmemadapt.a").is_file() && d.join("libmemadapt.so").is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "libmemadapt.a and libmemadapt.so not found in {candidates:?}: cargo builds \
                 them with the tests when crates/memadapt/Cargo.toml lists the crate types \
                 \"cdylib\" and \"staticlib\"; run `cargo build -p memadapt` and retry"
            )
        })
}

/// The repo-local virtual environment's Python, with numpy and pytest
/// (`scripts/lib.sh` ensure_python_env creates it), or `$MEMADAPT_PYTHON`;
/// `None` when the Python tests are to be skipped.
pub fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMADAPT_PYTHON") {
        return Some(p.into());
    }
    let venv = crate_dir().join("../../.venv/bin/python");
    let works = std::process::Command::new(&venv)
        .args(["-c", "import numpy, pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(venv);
    }
    if std::env::var_os("MEMADAPT_SKIP_PYTHON_TESTS").is_some() {
        eprintln!(
            "SKIPPED: no {} with numpy and pytest and MEMADAPT_SKIP_PYTHON_TESTS is set: \
             the Python package is NOT tested",
            venv.display()
        );
        return None;
    }
    panic!(
        "no Python with numpy and pytest at {}: run `bash -c 'source scripts/lib.sh; \
         ensure_python_env'` from the repository (scripts/test does), set MEMADAPT_PYTHON, \
         or set MEMADAPT_SKIP_PYTHON_TESTS=1 to skip the Python tests",
        venv.display()
    );
}
