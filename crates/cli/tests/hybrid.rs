//! `memgang run --policy hybrid|auto` end to end: real processes in a real
//! memory pool with real swap (root; run serially, see run.rs).

mod common;
use common::*;
use serde_json::Value;

const POOL: u64 = 256 << 20;

/// Four jobs of 70 MiB in a 256 MiB pool (set capacity 240 MiB): three fit
/// together, four do not. `d` declares 10 MiB, so at first all four are
/// packed together; its measured peak must move it to a set of its own.
/// `b` is a 2-rank job.
fn four_jobs(policy: &str, marker: u32) -> String {
    let job = |name: &str, declared: &str, extra: &str| {
        format!(
            r#"
[[job]]
name = "{name}"
command = ["memgang-workload", "--mib", "70", "--pattern", "seq", "--iterations", "60", "--compute", "2", "--seed", "{marker}"{extra}]
memory = "{declared}"
"#
        )
    };
    format!(
        "name = \"hybrid\"\npolicy = \"{policy}\"\nquantum = \"1s\"\npool_memory = \"256M\"\n{}{}{}{}",
        job("a", "70M", ""),
        job("b", "70M", ", \"--ranks\", \"2\"") + "ranks = 2\n",
        job("c", "70M", ""),
        job("d", "10M", ""),
    )
}

fn jobs(v: &Value) -> &Vec<Value> {
    v["jobs"].as_array().unwrap()
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn hybrid_runs_sets_that_fit_and_pages_only_at_switches() {
    require_root("hybrid_runs_sets_that_fit_and_pages_only_at_switches");
    let bed = Bed::new();
    let exp = bed.write("hybrid.toml", &four_jobs("hybrid", 2001));
    for overlap in ["sequential", "overlapped", "prefetch"] {
        let (out, v) = bed.run(&exp, &["--baseline", "none", "--overlap", overlap]);
        assert!(out.status.success(), "{overlap}: {}", text(&out));
        let v = v.unwrap();
        assert_eq!(v["policy"], "hybrid");
        assert_eq!(v["overlap"], overlap);
        for j in jobs(&v) {
            // The workload checks every word it wrote: exit 0 is no data lost.
            assert_eq!(
                j["exit_code"],
                0,
                "{overlap}: job {}: {}",
                j["name"],
                text(&out)
            );
        }
        // d's peak split the jobs into two sets, which then took turns.
        assert!(
            v["switch_count"].as_u64().unwrap() >= 2,
            "{overlap}: {} switches",
            v["switch_count"]
        );
        // Never all four at once after the re-pack (the first sample with
        // fewer than four running: before it, all four start together and
        // how long d takes to reach its peak depends on the machine's
        // load), and the running set's memory stays within the pool.
        let samples = v["samples"].as_array().unwrap();
        let mut crowded = 0;
        let mut repacked = false;
        for s in samples {
            let running: Vec<&Value> = s["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|j| j["state"] == "running")
                .collect();
            let resident: u64 = running
                .iter()
                .map(|j| j["anon_bytes"].as_u64().unwrap())
                .sum();
            assert!(
                resident <= POOL,
                "{overlap}: running set holds {resident} bytes"
            );
            if running.len() < 4 {
                repacked = true;
            } else if repacked {
                crowded += 1;
            }
        }
        assert!(
            repacked && crowded <= 3,
            "{overlap}: all four ran together in {crowded} samples after the re-pack"
        );
        // Inside a quantum the jobs run from memory: each job has 17920
        // pages and is switched out and back several times; paging on
        // demand would fault most of them back in at every turn.
        for j in jobs(&v) {
            let faults = j["major_faults"].as_u64().unwrap();
            assert!(
                faults < 4000,
                "{overlap}: job {} took {faults} major faults",
                j["name"]
            );
            assert!(j["major_faults_per_min"].as_f64().is_some());
        }
        assert!(v["major_faults_per_min_mean"].as_f64().is_some());
        eprintln!(
            "{overlap}: makespan {} switches {} faults {:?}",
            v["makespan_s"],
            v["switch_count"],
            jobs(&v)
                .iter()
                .map(|j| j["major_faults"].as_u64().unwrap())
                .collect::<Vec<_>>()
        );
    }
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn auto_coschedules_when_everything_fits() {
    require_root("auto_coschedules_when_everything_fits");
    let bed = Bed::new();
    let exp = bed.write(
        "fits.toml",
        r#"
policy = "auto"
quantum = "1s"
pool_memory = "256M"
[[job]]
name = "a"
command = ["memgang-workload", "--mib", "60", "--pattern", "seq", "--iterations", "30", "--compute", "2"]
memory = "60M"
[[job]]
name = "b"
command = ["memgang-workload", "--mib", "60", "--pattern", "random", "--iterations", "20", "--compute", "2", "--ranks", "2"]
ranks = 2
memory = "60M"
"#,
    );
    let (out, v) = bed.run(&exp, &["--baseline", "none"]);
    assert!(out.status.success(), "{}", text(&out));
    let v = v.unwrap();
    assert_eq!(v["policy"], "auto");
    assert_eq!(v["switch_count"], 0, "{}", text(&out));
    for j in jobs(&v) {
        assert_eq!(j["exit_code"], 0, "{}", text(&out));
        assert!(j["start_s"].as_f64().unwrap() < 1.0, "both start at once");
    }
    // One stretch of running per job: never suspended.
    assert_eq!(v["timeline"].as_array().unwrap().len(), 2);
}
