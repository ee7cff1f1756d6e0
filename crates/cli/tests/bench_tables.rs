//! The bench scripts' own parsing and tables (Python, no root): each
//! script's `--self-test` checks its parsers and rows on text captured
//! from the tools it reads (Slurm's `scontrol show job -o`, /proc/PID/stat)
//! or on made-up results (realapps_rounds.py's floors).

use std::path::PathBuf;
use std::process::Command;

fn self_test(script: &str) {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .arg(repo.join("bench").join(script))
        .arg("--self-test")
        .output()
        .unwrap_or_else(|e| panic!("running python3 bench/{script}: {e} (is python3 installed?)"));
    assert!(
        out.status.success(),
        "bench/{script} --self-test failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn slurm_table_splits_the_overhead_from_slurms_job_records() {
    self_test("slurm_table.py");
}

#[test]
fn slurm_poll_counts_cpu_from_proc_stat() {
    self_test("slurm_poll.py");
}

#[test]
fn realapps_rounds_sets_a_run_against_the_kernels_and_the_disks_time() {
    self_test("realapps_rounds.py");
}
