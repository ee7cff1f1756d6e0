//! The Python package (`crates/memadapt/python`): its pytest suite, run
//! with the repo-local venv's Python against the `libmemadapt.so` cargo
//! built for this test run (MEMADAPT_LIB), so that `cargo test` tests the
//! Python side of this very build.

mod common;

use common::{crate_dir, library_dir, python};
use std::process::Command;

#[test]
fn python_package_pytest_suite() {
    let Some(python) = python() else { return };
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(crate_dir().join("python/tests"))
        .env("MEMADAPT_LIB", library_dir().join("libmemadapt.so"))
        .env("PYTHONPATH", crate_dir().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}
