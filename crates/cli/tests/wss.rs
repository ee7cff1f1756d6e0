//! `memgang wss` on real processes (its own children: no root needed):
//! memory touched once is not a working set; memory swept in a loop is,
//! and more of it at longer windows.

mod common;
use common::{memgang, text};
use serde_json::Value;

fn wss(args: &[&str]) -> (std::process::Output, Option<Value>) {
    let out = memgang().arg("wss").args(args).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).ok();
    (out, v)
}

/// The largest working set measured at `tau_ms`, MiB.
fn max_mib(v: &Value, tau_ms: f64) -> f64 {
    let s = v["jobs"][0]["summary"].as_array().unwrap();
    let s = s
        .iter()
        .find(|s| (s["tau_s"].as_f64().unwrap() * 1000.0 - tau_ms).abs() < 1e-6)
        .unwrap_or_else(|| panic!("no τ = {tau_ms} ms in {v}"));
    s["max_bytes"].as_f64().unwrap() / (1 << 20) as f64
}

#[test]
fn memory_touched_once_is_touched_but_not_a_working_set() {
    let (out, v) = wss(&[
        "--duration",
        "3s",
        "--tau",
        "128ms,512ms",
        "--json",
        "-",
        "--",
        "python3",
        "-c",
        "import time; b = b'x' * (96 << 20); time.sleep(30)",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v = v.unwrap();
    let touched = v["jobs"][0]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["touched_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(touched >= 96 << 20, "{v}");
    // After the first second the buffer lies idle: the last windows see
    // the interpreter sleeping, not its 96 MiB.
    let last = v["jobs"][0]["windows"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["referenced_bytes"].as_u64().unwrap() < 16 << 20,
        "{last}"
    );
}

#[test]
fn a_sweep_is_a_working_set_that_grows_with_tau() {
    let workload = env!("CARGO_BIN_EXE_memgang").replace("memgang", "memgang-workload");
    let (out, v) = wss(&[
        "--duration",
        "4s",
        "--json",
        "-",
        "--",
        &workload,
        "--mib",
        "128",
        "--pattern",
        "random",
        "--iterations",
        "100000",
        "--compute",
        "1",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v = v.unwrap();
    let (short, long) = (max_mib(&v, 32.0), max_mib(&v, 512.0));
    // Random words over 128 MiB: every page within half a second.
    assert!(long >= 0.9 * 128.0, "512 ms: {long} MiB: {v}");
    assert!(short < long, "32 ms {short} MiB, 512 ms {long} MiB");
    let s = &v["suggestion"];
    assert!(
        s["gang_pool_bytes"].as_f64().unwrap() >= long * 1.1 * (1 << 20) as f64,
        "{s}"
    );
    assert!(s["quantum_s"].as_f64().unwrap() >= 1.0, "{s}");
}

#[test]
fn bad_targets_are_refused_with_the_reason() {
    let (out, _) = wss(&["--pid", "2147483646"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--pid 2147483646: no such process"),
        "{}",
        text(&out)
    );
    let (out, _) = wss(&[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to measure"),
        "{}",
        text(&out)
    );
    let (out, _) = wss(&["--", "/nonexistent/prog"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is it installed"),
        "{}",
        text(&out)
    );
}
