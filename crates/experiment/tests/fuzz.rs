//! Every file `memgang run` reads from outside is fuzzed: experiment TOML
//! (written by people), results JSON (read back by `report`, `plot` and as
//! a batch reference, also from the baseline cache). Whatever the text, a
//! clear error or a value, never a panic. Case counts are bounded (CI).

use memgang_experiment::{baseline, Experiment, Overrides, RunResult};
use proptest::prelude::*;

/// Values that have broken parsers before, and ordinary ones.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"gang\"".to_string()),
        Just("\"so/ao/ai\"".to_string()),
        Just("\"lru/ai/ao/so/bg\"".to_string()),
        Just("\"1e99s\"".to_string()),
        Just("\"18446744073709551616s\"".to_string()),
        Just("\"0s\"".to_string()),
        Just("\"-1G\"".to_string()),
        Just("\"99999999999999999999E\"".to_string()),
        Just("\"1G\"".to_string()),
        Just("\"10s\"".to_string()),
        Just("-1".to_string()),
        Just("4294967296".to_string()),
        Just("1e308".to_string()),
        Just("nan".to_string()),
        Just("[]".to_string()),
        Just("[\"\"]".to_string()),
        Just("[\"memgang-workload\", \"--mib\", \"1\"]".to_string()),
        "\"[ -~]{0,12}\"",
        any::<i64>().prop_map(|v| v.to_string()),
    ]
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "name",
        "policy",
        "quantum",
        "switch",
        "overlap",
        "pool_memory",
        "command",
        "ranks",
        "memory",
        "arrival",
        "unknown",
    ])
}

fn experiment() -> impl Strategy<Value = String> {
    let pairs = || prop::collection::vec((key(), value()), 0..6);
    (pairs(), prop::collection::vec(pairs(), 0..4)).prop_map(|(top, jobs)| {
        let mut s = String::new();
        for (k, v) in top {
            s += &format!("{k} = {v}\n");
        }
        for job in jobs {
            s += "[[job]]\n";
            for (k, v) in job {
                s += &format!("{k} = {v}\n");
            }
        }
        s
    })
}

/// A results file as `memgang run --json` writes it, to mutate.
fn sample_result() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/results/adaptive-fix/2rank-x1-q10s-so-ao-ai.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Replaces the `n`th leaf (in a walk of the document) by `with`.
fn mutate(v: &mut serde_json::Value, n: &mut usize, with: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => m.values_mut().any(|c| mutate(c, n, with)),
        serde_json::Value::Array(a) => a.iter_mut().any(|c| mutate(c, n, with)),
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

fn extreme() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    prop_oneof![
        Just(json!(null)),
        Just(json!(-1)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(u64::MAX)),
        Just(json!(0)),
        Just(json!("")),
        Just(json!([])),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn any_experiment_text_parses_or_says_where(text in experiment()) {
        if let Err(e) = Experiment::parse(&text, "fuzz.toml", &Overrides::default()) {
            prop_assert!(e.to_string().starts_with("fuzz.toml"), "{e}");
        }
    }

    #[test]
    fn any_bytes_as_an_experiment_are_refused_or_read(text in any::<String>()) {
        let _ = Experiment::parse(&text, "fuzz.toml", &Overrides::default());
    }

    #[test]
    fn any_mutated_result_reads_or_is_refused(n in 0usize..4000, with in extreme()) {
        let mut v = sample_result();
        mutate(&mut v, &mut { n }, &with);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, v.to_string()).unwrap();
        if let Ok(mut r) = baseline::load(&path) {
            let _ = baseline::usable(&r);
            let batch = r.makespan_s;
            baseline::apply(&mut r, batch, "fuzz".into());
            let _: RunResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        }
    }
}
