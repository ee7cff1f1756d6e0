//! Tables made from result files alone (the JSON is the source of truth).

use memgang_runtime::RunResult;
use std::fmt::Write;

pub fn render(results: &[RunResult]) -> String {
    if let [one] = results {
        return one.table();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:<8} {:<8} {:<10} {:>8} {:>11} {:>9} {:>9} {:>9} {:>11} {:>11} {:>6}",
        "experiment",
        "policy",
        "stop",
        "switch",
        "quantum",
        "makespan_s",
        "overhead",
        "fairness",
        "switches",
        "swap_in_pg",
        "swap_out_pg",
        "failed"
    );
    for r in results {
        let failed = r.jobs.iter().filter(|j| !j.ok()).count();
        // Policies that suspend jobs: gang, and hybrid/auto (with an overlap).
        let gang = r.policy == "gang" || r.overlap.is_some();
        let _ = writeln!(
            out,
            "{:<16} {:<8} {:<8} {:<10} {:>8} {:>11.1} {:>9} {:>9} {:>9} {:>11} {:>11} {:>6}",
            r.experiment,
            r.policy,
            // How jobs were stopped matters only where they were.
            if gang {
                r.machine.freezer.trim_start_matches("cgroup-")
            } else {
                "-"
            },
            match (&r.overlap, gang) {
                (Some(o), _) => o.as_str(),
                (None, true) => r.switch.as_str(),
                (None, false) => "-",
            },
            if gang {
                format!("{}s", r.quantum_s)
            } else {
                "-".into()
            },
            r.makespan_s,
            r.switching_overhead
                .map(|o| format!("{:.1}%", o * 100.0))
                .unwrap_or_else(|| "n/a".into()),
            r.fairness
                .map(|f| format!("{f:.1}"))
                .unwrap_or_else(|| "n/a".into()),
            r.switch_count,
            r.swap_in_pages,
            r.swap_out_pages,
            failed
        );
    }
    out
}
