//! memgang tells each job how much memory it may keep: a file named by
//! `$MEMGANG_ALLOWANCE_FILE` (memadapt reads it and sheds panels to fit),
//! the pool less a margin and what the other running jobs hold.

mod common;

use common::*;

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn a_job_reads_the_pool_less_what_the_others_hold() {
    require_root("a_job_reads_the_pool_less_what_the_others_hold");
    let bed = Bed::new();
    let exp = bed.write(
        "allowance.toml",
        r#"
policy = "cosched"
pool_memory = "512M"
[[job]]
name = "hog"
command = ["memgang-workload", "--mib", "200", "--pattern", "seq", "--iterations", "60", "--compute", "4"]
[[job]]
name = "reader"
arrival = "3s"
command = ["sh", "-c", "sleep 1; cat \"$MEMGANG_ALLOWANCE_FILE\""]
"#,
    );
    let (out, v) = bed.run(&exp, &["--baseline", "none"]);
    assert!(out.status.success(), "{}", text(&out));
    let v = v.unwrap();
    let log = v["jobs"][1]["log_dir"].as_str().unwrap().to_string();
    let said = std::fs::read_to_string(format!("{log}/stdout")).unwrap();
    let bytes: u64 = said.trim().parse().unwrap_or_else(|_| panic!("{said:?}"));
    let mib = bytes >> 20;
    // 512 - 32 (margin) - about 200 (the hog's memory, sampled).
    assert!((260..=290).contains(&mib), "allowance {mib} MiB");
}
