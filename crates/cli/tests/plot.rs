//! `memgang plot trace|makespan` on results made by hand: no root, no real runs. The
//! JSON is written out field by field rather than from the runtime's types,
//! so that fields the schema gains (with defaults) don't break these tests.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn memgang() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memgang"))
}

/// `memgang plot KIND FILES... EXTRA... -o SVG`.
fn plot(kind: &str, files: &[&Path], extra: &[&str], svg: &Path) -> Output {
    memgang()
        .args(["plot", kind])
        .args(files)
        .args(extra)
        .arg("-o")
        .arg(svg)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A gang run of 3 s: paging bursts after the switches at 1 s and 2 s.
fn result(experiment: &str, switch: &str) -> Value {
    let samples: Vec<Value> = (1..=30)
        .map(|i| {
            let burst = i % 10 < 3;
            json!({
                "t_s": i as f64 * 0.1,
                "swap_in": if burst { 2000 + 100 * i } else { 0 },
                "swap_out": if burst { 1500 } else { 10 },
                "pool_usage_bytes": 200 << 20,
                "psi_some_avg10": null,
                "jobs": [],
            })
        })
        .collect();
    let switch_at =
        |at_s: f64| json!({"at_s": at_s, "took_s": 0.15, "suspended": ["a"], "resumed": ["b"]});
    json!({
        "schema": 1,
        "memgang_version": "test",
        "experiment": experiment,
        "policy": "gang",
        "quantum_s": 1.0,
        "switch": switch,
        "pool_memory_bytes": 256 << 20,
        "machine": {
            "hostname": "test", "kernel": "test", "cpus": 2,
            "memory_bytes": 1u64 << 30, "swap_bytes": 1u64 << 30,
            "cgroup": "v2", "freezer": "cgroup-freezer",
        },
        "started_unix_s": 0,
        "makespan_s": 3.0,
        "switching_overhead": null,
        "batch_makespan_s": null,
        "baseline": "none",
        "fairness": null,
        "swap_in_pages": 0,
        "swap_out_pages": 0,
        "switch_count": 2,
        "switch_time_s": 0.3,
        "interrupted": false,
        "jobs": [],
        "timeline": [],
        "switches": [switch_at(1.0), switch_at(2.0)],
        "samples": samples,
    })
}

fn write(dir: &Path, name: &str, r: &Value) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string(r).unwrap()).unwrap();
    p
}

#[test]
fn trace_draws_one_panel_per_file_with_switch_markers() {
    let dir = tempfile::tempdir().unwrap();
    let lru = write(dir.path(), "lru.json", &result("two-jobs", "lru"));
    let aoai = write(dir.path(), "aoai.json", &result("two-jobs", "ao/ai"));
    let svg_path = dir.path().join("trace.svg");
    let out = plot("trace", &[&lru, &aoai], &[], &svg_path);
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(&svg_path).expect("the SVG was written");
    assert!(svg.len() > 5000, "SVG is suspiciously small:\n{svg}");
    assert!(svg.starts_with("<svg"), "not an SVG:\n{svg}");
    for caption in ["two-jobs gang lru q=1s", "two-jobs gang ao/ai q=1s"] {
        assert!(svg.contains(caption), "caption {caption:?} missing:\n{svg}");
    }
    for label in ["swap-in", "swap-out", "switch", "time (s)", "MiB/s"] {
        assert!(svg.contains(label), "label {label:?} missing:\n{svg}");
    }
    // Switch markers are lines in their own colour (#606060): two switches
    // per panel plus the legend's sample, in each of two panels.
    let markers = svg.matches(r##"stroke="#606060""##).count();
    assert!(markers >= 6, "expected >= 6 switch strokes, got {markers}");
}

#[test]
fn trace_window_keeps_only_its_switches() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "lru.json", &result("two-jobs", "lru"));
    let svg_path = dir.path().join("window.svg");
    let out = plot("trace", &[&f], &["--from", "1.5", "--to", "3"], &svg_path);
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    // The switch at 2 s and the legend's sample; not the one at 1 s.
    assert_eq!(svg.matches(r##"stroke="#606060""##).count(), 2, "{svg}");
}

#[test]
fn missing_file_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-results.json");
    let out = plot("trace", &[&missing], &[], &dir.path().join("out.svg"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-results.json"), "{}", text(&out));
    assert!(!dir.path().join("out.svg").exists());
}

#[test]
fn bad_input_and_output_fail_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    let mut empty = result("empty", "lru");
    empty["samples"] = json!([]);
    let empty = write(dir.path(), "empty.json", &empty);
    let good = write(dir.path(), "good.json", &result("two-jobs", "lru"));
    let cases = [
        (
            &garbage,
            dir.path().join("a.svg"),
            "not a memgang results file",
        ),
        (&empty, dir.path().join("b.svg"), "has no samples"),
        (&good, dir.path().join("nodir/c.svg"), "does not exist"),
    ];
    for (input, output, why) in cases {
        let out = plot("trace", &[input], &[], &output);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "expected {why:?}: {}", text(&out));
        assert!(!output.exists());
    }
}

#[test]
fn makespan_draws_one_line_per_policy_and_one_panel_per_family() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (family, n) in [("compute", 1), ("compute", 3), ("compute", 5), ("2rank", 3)] {
        for (policy, overlap, makespan) in [
            ("batch", None, 8.0 * n as f64),
            ("hybrid", Some("prefetch"), 4.5 * n as f64),
        ] {
            let mut r = result(&format!("{family}-n{n}"), "so/ao/ai");
            r["policy"] = json!(policy);
            r["overlap"] = json!(overlap);
            r["makespan_s"] = json!(makespan);
            r["interrupted"] = json!(n == 5 && policy == "batch");
            let name = format!("{family}-{n}-{policy}.json");
            files.push(write(dir.path(), &name, &r));
        }
    }
    let svg_path = dir.path().join("makespan.svg");
    let paths: Vec<&Path> = files.iter().map(|f| f.as_path()).collect();
    let out = plot("makespan", &paths, &[], &svg_path);
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    for label in [
        "compute: makespan",
        "2rank: makespan",
        "batch",
        "hybrid prefetch",
        "simultaneous jobs",
        "makespan (s)",
    ] {
        assert!(svg.contains(label), "label {label:?} missing:\n{svg}");
    }
    // Each run is a marker; the stopped one is hollow (fill="none").
    assert_eq!(svg.matches("<circle").count(), files.len(), "{svg}");
    let hollow = svg
        .split("<circle")
        .skip(1)
        .filter(|c| c.split('>').next().unwrap().contains(r#"fill="none""#))
        .count();
    assert_eq!(hollow, 1, "{svg}");

    // Two results for the same point are a mistake, said as such.
    let again = write(dir.path(), "again.json", &{
        let mut r = result("compute-n3", "so/ao/ai");
        r["policy"] = json!("batch");
        r
    });
    let out = plot(
        "makespan",
        &[paths.as_slice(), &[again.as_path()]].concat(),
        &[],
        &dir.path().join("dup.svg"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a second \"batch\" run of compute-n3"),
        "{}",
        text(&out)
    );
}

#[test]
fn png_is_written_as_png_and_sim_results_plot_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let lru = write(dir.path(), "lru.json", &result("x", "lru"));
    let png = dir.path().join("t.png");
    let out = plot("trace", &[&lru], &[], &png);
    assert!(out.status.success(), "{}", text(&out));
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A PNG with text in it is far larger than an empty one.
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());

    let sims: Vec<_> = [("gang", 2.5, 0.1), ("hybrid", 1.5, 0.02)]
        .iter()
        .map(|(p, sd, ov)| {
            let r = json!({"policy": p, "switching": "lru", "quantum_s": 60.0,
                           "mean_bounded_slowdown": sd, "switching_overhead": ov});
            write(dir.path(), &format!("{p}.json"), &r)
        })
        .collect();
    let svg = dir.path().join("s.svg");
    let out = plot("sim", &[&sims[0], &sims[1]], &[], &svg);
    assert!(out.status.success(), "{}", text(&out));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(
        s.contains("hybrid lru q=60s") && s.contains("mean bounded slowdown"),
        "{s}"
    );
    // A run result is not a sim result: the error says which file to give.
    let out = plot("sim", &[&lru], &[], &svg);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("memgang sim --json"),
        "{}",
        text(&out)
    );
    let out = plot("sim", &[&sims[0]], &[], &dir.path().join("s.pdf"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("name it .svg or .png"),
        "{}",
        text(&out)
    );
}

#[test]
fn switches_draws_each_switchs_parts_its_limit_and_the_faults_left() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = result("two-jobs", "so/ao/ai");
    for (i, s) in r["switches"].as_array_mut().unwrap().iter_mut().enumerate() {
        s["page_out_s"] = json!(0.08);
        s["page_in_s"] = json!(0.05 + 0.01 * i as f64);
        s["paged_in_bytes"] = json!(40u64 << 20);
        s["swap_out_pages"] = json!(10_000);
        s["swap_in_pages"] = json!(10_000);
    }
    for (i, s) in r["samples"].as_array_mut().unwrap().iter_mut().enumerate() {
        s["jobs"] = json!([{"job": "b", "state": "running", "anon_bytes": 0,
                            "swap_bytes": null, "major_faults": 50 * i}]);
    }
    let run = write(dir.path(), "run.json", &r);
    let bw = write(
        dir.path(),
        "bw.json",
        &json!({"read_bytes_per_s": 1.0e9, "write_bytes_per_s": 2.0e9, "sample_bytes": 1}),
    );
    let svg_path = dir.path().join("switches.svg");
    let bw_arg = bw.to_str().unwrap();
    let out = plot("switches", &[&run], &["--bandwidth", bw_arg], &svg_path);
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    for label in [
        "two-jobs gang so/ao/ai q=1s: seconds per switch",
        "page-out",
        "page-in",
        "whole switch",
        "disk limit",
        "faults after page-in",
        "target 1%",
    ] {
        assert!(svg.contains(label), "label {label:?} missing:\n{svg}");
    }

    // A run that never switched, and a file that is not a bandwidth file.
    let mut none = result("batch", "lru");
    none["switches"] = json!([]);
    let none = write(dir.path(), "none.json", &none);
    let out = plot("switches", &[&none], &[], &dir.path().join("a.svg"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("has no switches"), "{}", text(&out));
    let run_arg = run.to_str().unwrap();
    let out = plot(
        "switches",
        &[&run],
        &["--bandwidth", run_arg],
        &dir.path().join("b.svg"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("not a bandwidth file"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("b.svg").exists());
}
