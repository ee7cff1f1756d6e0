//! `report` and `plot` on results files with any one value replaced by an
//! extreme one: a table, a plot or a clear error, never a panic or a hang
//! (plotters has looped forever on extreme axis ranges before).

use proptest::prelude::*;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn sample() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/results/adaptive-fix/2rank-x1-q10s-so-ao-ai.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Replaces the `n`th leaf of the document by `with`.
fn mutate(v: &mut Value, n: &mut usize, with: &Value) -> bool {
    match v {
        Value::Object(m) => m.values_mut().any(|c| mutate(c, n, with)),
        Value::Array(a) => a.iter_mut().any(|c| mutate(c, n, with)),
        leaf => {
            if *n == 0 {
                *leaf = with.clone();
                return true;
            }
            *n -= 1;
            false
        }
    }
}

/// Runs memgang with `args`; fails if it panics or takes over 30 s.
fn run_bounded(args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memgang"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            if err.contains("panicked") || status.code().is_none() {
                return Err(format!("{args:?}: {status}: {err}"));
            }
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{args:?}: still running after 30 s"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

proptest! {
    // Each case starts two processes: few cases, the values that matter.
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn report_and_plot_survive_any_extreme_value(
        n in 0usize..3000,
        with in prop_oneof![
            Just(json!(1e308)), Just(json!(-1e308)), Just(json!(u64::MAX)),
            Just(json!(-1)), Just(json!(0)), Just(json!(null)), Just(json!(5e-324)),
        ],
        png: bool,
    ) {
        let mut v = sample();
        mutate(&mut v, &mut { n }, &with);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, v.to_string()).unwrap();
        let out = dir.path().join(if png { "p.png" } else { "p.svg" });
        run_bounded(&["report".as_ref(), path.as_os_str()]).map_err(TestCaseError::fail)?;
        run_bounded(&["plot".as_ref(), "trace".as_ref(), path.as_os_str(), "-o".as_ref(), out.as_os_str()])
            .map_err(TestCaseError::fail)?;
    }
}
