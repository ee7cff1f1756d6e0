//! Helpers shared by the integration tests that use the built libraries.
#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::Command;

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
    let works = Command::new(&venv)
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

/// The C compiler, or `None` when the C tests are to be skipped.
pub fn c_compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let works = Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(cc);
    }
    if std::env::var_os("MEMADAPT_SKIP_C_TESTS").is_some() {
        eprintln!(
            "SKIPPED: no C compiler ({cc:?} does not run) and MEMADAPT_SKIP_C_TESTS is set: \
             the C interface is NOT tested"
        );
        return None;
    }
    panic!(
        "no C compiler: {cc:?} does not run. Install one (or set CC), or set \
         MEMADAPT_SKIP_C_TESTS=1 to skip the tests of the C interface"
    );
}

/// Compiles the CG example (`examples/c/cg.c`) into `exe`, linked
/// statically with this build's library.
pub fn compile_cg(cc: &str, exe: &Path) {
    let archive = library_dir().join("libmemadapt.a");
    compile(
        cc,
        &[&crate_dir().join("examples/c/cg.c")],
        &[archive.to_str().unwrap(), "-lpthread", "-ldl", "-lm"],
        exe,
    );
}

/// Compiles `sources` into `exe` with warnings as errors, so that the
/// header stays clean C99 under strict flags.
pub fn compile(cc: &str, sources: &[&Path], link: &[&str], exe: &Path) {
    let include = crate_dir().join("include");
    let output = Command::new(cc)
        .args([
            "-std=c99",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O1",
        ])
        .arg("-I")
        .arg(&include)
        .args(sources)
        .args(link)
        .arg("-o")
        .arg(exe)
        .output()
        .expect("the C compiler runs");
    assert!(
        output.status.success(),
        "{cc} failed on {sources:?}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
