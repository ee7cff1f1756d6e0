//! `memgang report` of several runs: the kernel's way (gang lru) beside
//! memgang's, with the share of lru's overhead each run cuts.

use serde_json::Value;
use std::process::Command;

#[test]
fn report_shows_the_cut_of_lru_overhead() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/results/adaptive-fix/2rank-x1-q10s-so-ao-ai.json"
    );
    let mut ours: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    ours["switching_overhead"] = 0.05.into();
    let mut lru = ours.clone();
    lru["switch"] = "lru".into();
    lru["switching_overhead"] = 0.25.into();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("lru.json"), dir.path().join("ours.json"));
    std::fs::write(&a, lru.to_string()).unwrap();
    std::fs::write(&b, ours.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memgang"))
        .arg("report")
        .args([&a, &b])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    let header = table.lines().next().unwrap();
    let col = header
        .split('|')
        .position(|c| c.trim() == "cut_vs_lru")
        .unwrap_or_else(|| panic!("no cut column:\n{table}"));
    let cells: Vec<String> = table
        .lines()
        .skip(2)
        .map(|l| l.split('|').nth(col).unwrap().trim().to_string())
        .collect();
    // lru itself: no cut; 5% against 25%: 80% of it cut.
    assert_eq!(cells, ["-", "80%"], "{table}");
}
