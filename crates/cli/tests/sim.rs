//! `memgang sim` as a user runs it: a small SWF trace on a cluster, JSON and
//! CSV out, a bad line refused or skipped. No root: nothing touches the kernel.

mod common;

use common::{memgang, text};
use serde_json::Value;
use std::process::Output;

/// Three jobs of 40 GB per processor on 2 nodes of 64G: 1 and 2 share the
/// nodes, so gang switches between them; 3 never ran (run time -1).
const TRACE: &str = "\
; Computer: two nodes
1 0 0 100 2 -1 41943040 2 100 -1 1 1 1 -1 1 -1 -1 -1
2 5 0 100 2 -1 41943040 2 100 -1 1 1 1 -1 1 -1 -1 -1
3 6 0 -1 2 -1 -1 2 100 -1 5 1 1 -1 1 -1 -1 -1
";

fn sim(trace: &str, extra: &[&str]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let swf = dir.path().join("t.swf");
    std::fs::write(&swf, trace).unwrap();
    let out = memgang()
        .args(["sim", "--swf"])
        .arg(&swf)
        .args(["--nodes", "2", "--node-memory", "64G", "--policy", "gang"])
        .args(["--quantum", "60s", "--json"])
        .arg(dir.path().join("r.json"))
        .arg("--csv")
        .arg(dir.path().join("jobs.csv"))
        .args(extra)
        .output()
        .unwrap();
    (out, dir)
}

#[test]
fn sim_runs_a_trace_and_writes_json_and_csv() {
    let (out, dir) = sim(TRACE, &["--switch", "ao/ai"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("makespan"), "{}", text(&out));
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["jobs"], 2, "{r}");
    assert_eq!(r["unusable"], 1, "{r}");
    assert!(r["switches"].as_u64().unwrap() >= 2, "{r}");
    // The two jobs need 80G of 64G: each switch moves 40G out and in.
    assert!(r["paged_out_bytes"].as_u64().unwrap() >= 40 << 30, "{r}");
    assert!(r["makespan_s"].as_f64().unwrap() > 200.0, "{r}");
    for k in ["events", "events_per_s", "wall_s"] {
        assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
    }
    let csv = std::fs::read_to_string(dir.path().join("jobs.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with("name,arrival_s,"), "{csv}");
}

#[test]
fn sim_refuses_a_bad_line_unless_told_to_skip_it() {
    let trace = format!("{TRACE}4 7 0 10 1 -1\n");
    let (out, _dir) = sim(&trace, &[]);
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("t.swf:5: expected 18 fields, found 6")
            && stderr.contains("--skip-bad-lines"),
        "{}",
        text(&out)
    );
    let (out, dir) = sim(&trace, &["--skip-bad-lines"]);
    assert!(out.status.success(), "{}", text(&out));
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(
        (r["jobs"].as_u64(), r["skipped_lines"].as_u64()),
        (Some(2), Some(1)),
        "{r}"
    );
}

#[test]
fn sim_reads_gzip_traces_and_their_header_and_records_provenance() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let trace = format!("; MaxNodes: 2\n; MaxProcs: 4\n{TRACE}");
    let gz = dir.path().join("t.swf.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    enc.write_all(trace.as_bytes()).unwrap();
    enc.finish().unwrap();
    let json = dir.path().join("r.json");
    let out = memgang()
        .args(["sim", "--swf"])
        .arg(&gz)
        .args(["--node-memory", "64G", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["nodes"], 2, "{r}");
    assert_eq!(r["jobs"], 2, "{r}");
    let p = &r["provenance"];
    assert_eq!(p["cpus_per_node"], 2, "{r}");
    assert_eq!(p["trace"]["max_procs"], 4, "{r}");
    assert_eq!(p["memgang_version"], env!("CARGO_PKG_VERSION"), "{r}");
    let sha = p["trace"]["sha256"].as_str().unwrap();
    let want = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(trace.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(
        String::from_utf8_lossy(&want.stdout).starts_with(sha),
        "{r}"
    );
    // Without a header, the cluster size must be given.
    let plain = dir.path().join("t.swf");
    std::fs::write(&plain, TRACE).unwrap();
    let out = memgang()
        .args(["sim", "--swf"])
        .arg(&plain)
        .args(["--node-memory", "64G"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("give --nodes: the trace's header has no MaxNodes"),
        "{}",
        text(&out)
    );
}

#[test]
fn sim_refuses_huge_times_and_memory_instead_of_panicking() {
    let huge = [
        (
            "4 1e99 0 10 1 -1 1 1 -1 -1 1 1 1 -1 1 -1 -1 -1",
            "submit time (field 2) is 1e99 s",
        ),
        (
            "4 7 0 1e99 1 -1 1 1 -1 -1 1 1 1 -1 1 -1 -1 -1",
            "run time (field 4)",
        ),
        (
            "4 7 0 10 1 -1 1e30 1 -1 -1 1 1 1 -1 1 -1 -1 -1",
            "used memory (field 7)",
        ),
    ];
    for (line, what) in huge {
        let trace = format!("{TRACE}{line}\n");
        let (out, _dir) = sim(&trace, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && stderr.contains(what) && !stderr.contains("panicked"),
            "{line}: {}",
            text(&out)
        );
        let (out, dir) = sim(&trace, &["--skip-bad-lines"]);
        assert!(out.status.success(), "{line}: {}", text(&out));
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap())
                .unwrap();
        assert_eq!(r["skipped_lines"], 1, "{r}");
    }
    // A huge user id (field 12) is not a time: accepted.
    let trace = TRACE.replace(
        "1 1 1 -1 1 -1 -1 -1\n2 5",
        "1 4294967296 1 -1 1 -1 -1 -1\n2 5",
    );
    let (out, _dir) = sim(&trace, &[]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn sim_generated_runs_are_the_same_for_a_seed() {
    let run = |seed: &str| {
        let out = memgang()
            .args([
                "sim",
                "--generate",
                "300",
                "--nodes",
                "16",
                "--node-memory",
                "16G",
            ])
            .args([
                "--policy",
                "hybrid",
                "--seed",
                seed,
                "--arrival-gap",
                "120s",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        // All but the wall-clock row; cells trimmed, since that row's
        // width sets the table's column widths.
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("| events"))
            .map(|l| {
                l.split('|')
                    .map(|c| c.trim().trim_matches('-'))
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let a = run("3");
    assert_eq!(a, run("3"));
    assert_ne!(a, run("4"));
}

#[test]
fn sim_refuses_a_device_file_with_a_bad_value_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("device.json");
    std::fs::write(
        &dev,
        r#"{"write_bps": 4e8, "read_bps": 5e8, "random_read_iops": 2e4, "switch_efficiency": 0}"#,
    )
    .unwrap();
    let (out, _dir) = sim(TRACE, &["--device", dev.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = text(&out);
    assert!(
        err.contains("device.json") && err.contains("switch_efficiency"),
        "{err}"
    );
    std::fs::write(&dev, r#"{"write_bps": 4e8, "read_bps": 5e8}"#).unwrap();
    let (out, _dir) = sim(TRACE, &["--device", dev.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("random_read_iops"), "{}", text(&out));
}

/// `memgang figures paper004`: the tables of Fig. 3, 4 and 8 and the same
/// rows as JSON, one per application of the paper, slowdown growing as the
/// memory fraction falls and smaller on the fast device.
#[test]
fn paper004_figures_print_as_tables_and_json() {
    let out = memgang().args(["figures", "paper004"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    for fig in [
        "Fig. 3",
        "Fig. 4",
        "Fig. 8",
        "Barnes",
        "What the paper states",
    ] {
        assert!(s.contains(fig), "{fig} missing:\n{s}");
    }
    let out = memgang()
        .args(["figures", "paper004", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let apps = v["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 7);
    for a in apps {
        let disk: Vec<f64> = serde_json::from_value(a["fig3_slowdown"].clone()).unwrap();
        let fast: Vec<f64> = serde_json::from_value(a["fig8_slowdown"].clone()).unwrap();
        assert_eq!(disk[0], 1.0, "{a}");
        assert!(disk.windows(2).all(|w| w[1] > w[0]), "{a}");
        assert!(fast[5] < disk[5], "{a}");
    }
}

/// `--load-factor 5` brings job 2 in at 1 s instead of 5 s (run times
/// kept), says so in the provenance, and a factor of 0 is refused by name.
#[test]
fn sim_load_factor_compresses_arrivals_and_is_recorded() {
    let arrivals = |extra: &[&str]| {
        let (out, dir) = sim(TRACE, extra);
        assert!(out.status.success(), "{}", text(&out));
        let csv = std::fs::read_to_string(dir.path().join("jobs.csv")).unwrap();
        let v: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
        (csv, v)
    };
    let (plain, v1) = arrivals(&[]);
    let (dense, v5) = arrivals(&["--load-factor", "5"]);
    let arrival_of_2 = |csv: &str| -> f64 {
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = header
            .iter()
            .position(|h| h.starts_with("arrival"))
            .unwrap();
        let row = lines.find(|l| l.starts_with("2,")).unwrap();
        row.split(',').nth(col).unwrap().parse().unwrap()
    };
    assert_eq!(arrival_of_2(&plain), 5.0, "{plain}");
    assert_eq!(arrival_of_2(&dense), 1.0, "{dense}");
    assert_eq!(v1["provenance"]["trace"]["load_factor"], 1.0);
    assert_eq!(v5["provenance"]["trace"]["load_factor"], 5.0);

    let (out, _dir) = sim(TRACE, &["--load-factor", "0"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--load-factor is 0"), "{}", text(&out));
}

/// `--access random`: under gang lru a resumed job waits for its faults
/// instead of computing through them, so the run is longer than with the
/// default sweep; the provenance says which, and a wrong word is refused
/// with the choices.
#[test]
fn sim_access_pattern_changes_demand_paging_and_is_recorded() {
    let run = |extra: &[&str]| -> Value {
        let (out, dir) = sim(TRACE, &[&["--switch", "lru"], extra].concat());
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap()
    };
    let (sweep, random) = (run(&[]), run(&["--access", "random"]));
    assert_eq!(sweep["provenance"]["device"]["access"], "sweep");
    assert_eq!(random["provenance"]["device"]["access"], "random");
    let makespan = |v: &Value| v["makespan_s"].as_f64().unwrap();
    assert!(makespan(&random) > makespan(&sweep), "{random} {sweep}");

    let (out, _dir) = sim(TRACE, &["--access", "rand"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("expected sweep or random"),
        "{}",
        text(&out)
    );
}

/// Cosched runs jobs 1 and 2 together on nodes that hold one of them, so
/// the table says how long the nodes were overcommitted (the model's mild
/// thrashing, where a real node may collapse) and the JSON has it; gang
/// never overcommits, and its table has no such line.
#[test]
fn sim_reports_the_node_time_spent_overcommitted() {
    let run = |policy: &str| -> (String, Value) {
        let dir = tempfile::tempdir().unwrap();
        let swf = dir.path().join("t.swf");
        std::fs::write(&swf, TRACE).unwrap();
        let json = dir.path().join("r.json");
        let out = memgang()
            .args(["sim", "--swf"])
            .arg(&swf)
            .args([
                "--nodes",
                "2",
                "--node-memory",
                "64G",
                "--policy",
                policy,
                "--json",
            ])
            .arg(&json)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let r = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), r)
    };
    let (table, r) = run("cosched");
    let over = r["overcommitted_node_s"].as_f64().unwrap();
    // Both nodes, from job 2's arrival at 5 s to the first end.
    assert!(over > 2.0 * 95.0, "{r}");
    assert!(table.contains("overcommitted"), "{table}");
    let (table, r) = run("gang");
    assert_eq!(r["overcommitted_node_s"].as_f64(), Some(0.0), "{r}");
    assert!(!table.contains("overcommitted"), "{table}");
}
