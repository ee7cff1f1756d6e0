//! Tables made from result files alone (the JSON is the source of truth),
//! for people; `--json` gives scripts the same rows.

use comfy_table::{presets::ASCII_MARKDOWN, Cell, CellAlignment, Row, Table};
use memgang_results::JobAccount;
use memgang_results::RunResult;
use serde_json::{json, Value};
use std::fmt::Write;

/// A table in the style every verb prints: Markdown, so that it can be
/// pasted into docs/ as it is.
pub fn table(header: impl Into<Row>) -> Table {
    let mut t = Table::new();
    t.load_preset(ASCII_MARKDOWN).set_header(header);
    t
}

/// Right-aligns every column from `first` on (the numbers).
pub fn numbers_right(t: &mut Table, first: usize) {
    for i in first..t.column_count() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

pub fn render(results: &[RunResult]) -> String {
    if let [one] = results {
        return single(one);
    }
    // The kernel's way (gang with lru) is what memgang's switches are
    // measured against: where it is among the results, each other run's
    // overhead says how much of lru's it cuts.
    let lru = |exp: &str| {
        results
            .iter()
            .find(|r| r.experiment == exp && r.policy == "gang" && r.switch == "lru")
            .and_then(|r| r.switching_overhead)
    };
    let with_cut = results.iter().any(|r| lru(&r.experiment).is_some());
    let mut header = vec![
        "experiment",
        "policy",
        "stop",
        "switch",
        "quantum",
        "makespan_s",
        "overhead",
    ];
    if with_cut {
        header.push("cut_vs_lru");
    }
    header.extend([
        "fairness",
        "switches",
        "swap_in_pg",
        "swap_out_pg",
        "failed",
    ]);
    let mut t = table(header);
    for r in results {
        let row = summary(r);
        let cut = match (r.switching_overhead, lru(&r.experiment)) {
            (Some(o), Some(l))
                if l > 0.0
                    && row["switch"].is_string()
                    && !(r.policy == "gang" && r.switch == "lru") =>
            {
                format!("{:.0}%", (1.0 - o / l) * 100.0)
            }
            _ => "-".into(),
        };
        let mut cells = vec![
            Cell::new(&r.experiment),
            Cell::new(&r.policy),
            Cell::new(row["stop"].as_str().unwrap_or("-")),
            Cell::new(row["switch"].as_str().unwrap_or("-")),
            Cell::new(
                row["quantum_s"]
                    .as_f64()
                    .map(|q| format!("{q}s"))
                    .unwrap_or_else(|| "-".into()),
            ),
            Cell::new(format!("{:.1}", r.makespan_s)),
            Cell::new(percent(r.switching_overhead)),
        ];
        if with_cut {
            cells.push(Cell::new(cut));
        }
        cells.extend([
            Cell::new(
                r.fairness
                    .map(|f| format!("{f:.1}"))
                    .unwrap_or_else(|| "n/a".into()),
            ),
            Cell::new(r.switch_count),
            Cell::new(r.swap_in_pages),
            Cell::new(r.swap_out_pages),
            Cell::new(row["failed"].as_u64().unwrap_or(0)),
        ]);
        t.add_row(cells);
    }
    numbers_right(&mut t, 4);
    format!("{t}\n")
}

/// The comparison row of one result, as `report --json` prints it.
pub fn summary(r: &RunResult) -> Value {
    // Policies that suspend jobs: gang, and hybrid/auto (with an overlap).
    let gang = r.policy == "gang" || r.overlap.is_some();
    json!({
        "experiment": r.experiment,
        "policy": r.policy,
        // How jobs were stopped matters only where they were.
        "stop": gang.then(|| r.machine.freezer.trim_start_matches("cgroup-")),
        "switch": match (&r.overlap, gang) {
            (Some(o), _) => Some(o.as_str()),
            (None, true) => Some(r.switch.as_str()),
            (None, false) => None,
        },
        "quantum_s": gang.then_some(r.quantum_s),
        "makespan_s": r.makespan_s,
        "switching_overhead": r.switching_overhead,
        "fairness": r.fairness,
        "switch_count": r.switch_count,
        "swap_in_pages": r.swap_in_pages,
        "swap_out_pages": r.swap_out_pages,
        "failed": r.jobs.iter().filter(|j| !j.ok()).count(),
        "account": r.account,
    })
}

fn percent(v: Option<f64>) -> String {
    v.map(|o| format!("{:.1}%", o * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

/// One run: a heading, a row per job, and the run's totals.
pub fn single(r: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} — policy {}{}, pool {}, {}",
        r.experiment,
        r.policy,
        if r.policy == "gang" {
            format!(" (quantum {}s, switch {})", num(r.quantum_s), r.switch)
        } else if let Some(o) = &r.overlap {
            format!(" (quantum {}s, overlap {o})", num(r.quantum_s))
        } else {
            String::new()
        },
        memgang_core::units::format_bytes(r.pool_memory_bytes),
        if r.interrupted {
            "INTERRUPTED"
        } else {
            "completed"
        }
    );
    let mut t = table([
        "job",
        "ranks",
        "start_s",
        "finish_s",
        "completion",
        "cpu_s",
        "majflt",
        "swapin_pg",
        "swapout_pg",
        "status",
    ]);
    for j in &r.jobs {
        let status = match (&j.error, j.exit_code, j.signal) {
            (Some(e), _, _) => e.clone(),
            (None, Some(0), _) => "ok".into(),
            (None, Some(c), _) => format!("exit {c}"),
            (None, None, Some(s)) => format!("killed by signal {s}"),
            (None, None, None) => "not run".into(),
        };
        t.add_row(vec![
            Cell::new(&j.name),
            Cell::new(j.ranks),
            Cell::new(opt(j.start_s)),
            Cell::new(opt(j.finish_s)),
            Cell::new(opt(j.completion_s)),
            Cell::new(num(j.cpu_s)),
            Cell::new(j.major_faults),
            Cell::new(j.swap_in_pages),
            Cell::new(j.swap_out_pages),
            Cell::new(status),
        ]);
    }
    numbers_right(&mut t, 1);
    if let Some(c) = t.column_mut(9) {
        c.set_cell_alignment(CellAlignment::Left);
    }
    let _ = writeln!(out, "{t}");
    let _ = writeln!(
        out,
        "makespan {}s | switching overhead {} (batch {}) | fairness {} | switches {} ({}s; account's samples {:.1}ms) | swap in {} / out {} pages",
        num(r.makespan_s),
        percent(r.switching_overhead),
        match r.batch_makespan_s {
            Some(b) => format!("{}s, {}", num(b), r.baseline),
            None => r.baseline.clone(),
        },
        r.fairness.map(num).unwrap_or_else(|| "n/a".into()),
        r.switch_count,
        num(r.switch_time_s),
        r.switch_sampling_s * 1e3,
        r.swap_in_pages,
        r.swap_out_pages
    );
    if let (Some(m), Some(sd)) = (r.major_faults_per_min_mean, r.major_faults_per_min_std) {
        let _ = writeln!(
            out,
            "major faults per minute per job: mean {} std {}",
            num(m),
            num(sd)
        );
    }
    out.push_str(&account(r));
    out
}

/// Where the time went (docs/results.md, "Time account"): a row per job
/// whose parts add up to its wall time, the run's split of the makespan,
/// and the hardware counters where the kernel gave them.
pub fn account(r: &RunResult) -> String {
    let mut out = String::new();
    let Some(run) = &r.account else {
        return out;
    };
    let _ = writeln!(out, "\ntime account (s; each row adds up to wall_s):");
    let mut t = table([
        "job",
        "wall_s",
        "cpu",
        "cpu_vs_batch",
        "run_queue",
        "io_wait",
        "frozen",
        "switch_out",
        "switch_in",
        "unaccounted",
        "swapin_delay",
        "thrashing",
        "reclaim",
    ]);
    for j in &r.jobs {
        let Some(a) = &j.account else { continue };
        let vs_batch = a
            .batch
            .as_ref()
            .filter(|b| b.cpu_s > 0.0)
            .map(|b| {
                format!(
                    "{:+.1}%",
                    ((a.user_cpu_s + a.system_cpu_s) / b.cpu_s - 1.0) * 100.0
                )
            })
            .unwrap_or_else(|| "-".into());
        t.add_row(vec![
            Cell::new(&j.name),
            Cell::new(num(a.wall_s)),
            Cell::new(num(a.cpu_s)),
            Cell::new(vs_batch),
            Cell::new(num(a.run_queue_s)),
            Cell::new(num(a.io_wait_s)),
            Cell::new(num(a.frozen_s)),
            Cell::new(num(a.switch_out_s)),
            Cell::new(num(a.switch_in_s)),
            Cell::new(num(a.unaccounted_s)),
            Cell::new(num(a.swapin_delay_s)),
            Cell::new(num(a.thrashing_delay_s)),
            Cell::new(num(a.reclaim_delay_s)),
        ]);
    }
    numbers_right(&mut t, 1);
    let _ = writeln!(out, "{t}");
    let share = |v: f64| format!("{} ({})", num(v), percent_of(v, run.makespan_s));
    let _ = writeln!(
        out,
        "makespan {}s = cpu {} + run queue {} + io wait {} + switches {} + idle {} + unaccounted {}",
        num(run.makespan_s),
        share(run.cpu_s),
        share(run.run_queue_s),
        share(run.io_wait_s),
        share(run.switch_s),
        share(run.idle_s),
        share(run.unaccounted_s),
    );
    let cpu = run.user_cpu_s + run.system_cpu_s;
    let _ = writeln!(
        out,
        "jobs' CPU {}s (system {}s){} | delay accounting: {}{}",
        num(cpu),
        num(run.system_cpu_s),
        match run.batch_cpu_s {
            Some(b) if b > 0.0 => format!(", batch {}s ({:+.1}%)", num(b), (cpu / b - 1.0) * 100.0),
            _ => String::new(),
        },
        run.delay_accounting,
        if run.records_lost > 0 {
            format!(" ({} records lost)", run.records_lost)
        } else {
            String::new()
        }
    );
    out.push_str(&counters(r));
    let hw: Vec<_> = r
        .jobs
        .iter()
        .filter_map(|j| Some((j, j.account.as_ref()?.hw.as_ref()?)))
        .collect();
    if hw.is_empty() {
        let _ = writeln!(out, "hardware counters: {}", run.hw_counters);
    } else {
        let mut t = table([
            "job",
            "cycles",
            "instructions",
            "IPC",
            "LLC_misses",
            "dTLB_misses",
            "batch_IPC",
            "batch_LLC_misses",
            "batch_dTLB_misses",
        ]);
        let ipc = |h: &memgang_results::HwCounts| {
            if h.cycles > 0 {
                format!("{:.2}", h.instructions as f64 / h.cycles as f64)
            } else {
                "-".into()
            }
        };
        for (j, h) in hw {
            let b = j
                .account
                .as_ref()
                .and_then(|a| a.batch.as_ref()?.hw.as_ref());
            t.add_row(vec![
                Cell::new(&j.name),
                Cell::new(h.cycles),
                Cell::new(h.instructions),
                Cell::new(ipc(h)),
                Cell::new(h.llc_misses),
                Cell::new(h.dtlb_misses),
                Cell::new(b.map_or("-".into(), ipc)),
                Cell::new(b.map_or("-".into(), |b| b.llc_misses.to_string())),
                Cell::new(b.map_or("-".into(), |b| b.dtlb_misses.to_string())),
            ]);
        }
        numbers_right(&mut t, 1);
        let _ = writeln!(out, "hardware counters:\n{t}");
    }
    out
}

/// The jobs' software counters (no PMU needed), huge pages and what the
/// kernel counted while they were frozen, beside their batch run's.
fn counters(r: &RunResult) -> String {
    let rows: Vec<_> = r
        .jobs
        .iter()
        .filter_map(|j| Some((j, j.account.as_ref()?)))
        .filter(|(_, a)| a.sw.is_some() || a.frozen_samples > 0)
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut t = table([
        "job",
        "task_clock_s",
        "page_faults",
        "major_faults",
        "ctx_switches",
        "migrations",
        "batch_page_faults",
        "huge_MB_quantum_end",
        "huge_MB_running",
        "batch_huge_MB",
        "frozen_io_wait",
        "frozen_cpu",
    ]);
    let mb = |h: Option<&memgang_results::HugeStat>| {
        h.map_or("-".into(), |h| num(h.mean_bytes as f64 / 1048576.0))
    };
    for (j, a) in rows {
        let sw = a.sw.as_ref();
        let b = a.batch.as_ref();
        let n =
            |f: fn(&memgang_results::SwCounts) -> u64| sw.map_or("-".into(), |s| f(s).to_string());
        t.add_row(vec![
            Cell::new(&j.name),
            Cell::new(sw.map_or("-".into(), |s| num(s.task_clock_ns as f64 * 1e-9))),
            Cell::new(n(|s| s.page_faults)),
            Cell::new(n(|s| s.major_faults)),
            Cell::new(n(|s| s.context_switches)),
            Cell::new(n(|s| s.cpu_migrations)),
            Cell::new(
                b.and_then(|b| b.sw.as_ref())
                    .map_or("-".into(), |s| s.page_faults.to_string()),
            ),
            Cell::new(mb(a.anon_huge_quantum_end.as_ref())),
            Cell::new(mb(a.anon_huge_running.as_ref())),
            Cell::new(mb(b.and_then(|b| b.anon_huge_running.as_ref()))),
            Cell::new(num(a.io_wait_while_frozen_s)),
            Cell::new(num(a.cpu_while_frozen_s)),
        ]);
    }
    numbers_right(&mut t, 1);
    format!("counters (perf software events; huge pages: mean of the cgroup's anonymous THP; counted while frozen, s):\n{t}\n")
}

/// One job's account as a block of lines (`memgang show`): its wall
/// time, each part with its share, and the stalls inside them.
pub fn job_account(a: &JobAccount) -> String {
    let mut out = format!(
        "wall {} s, from its start to its end ({}; {} tasks, width {:.2}{})\n",
        num(a.wall_s),
        a.source,
        a.tasks,
        a.width,
        if a.records_lost > 0 {
            format!("; {} exit records lost", a.records_lost)
        } else {
            String::new()
        }
    );
    for (name, v) in a.parts() {
        let _ = write!(
            out,
            "  {name:<12} {:>7} s {:>6}",
            num(v),
            percent_of(v, a.wall_s)
        );
        if name == "cpu" {
            let _ = write!(
                out,
                "  user {} + system {} CPU s",
                num(a.user_cpu_s),
                num(a.system_cpu_s)
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "  stalls inside these: swap-in {} s, thrashing {} s, reclaim {} s",
        num(a.swapin_delay_s),
        num(a.thrashing_delay_s),
        num(a.reclaim_delay_s)
    );
    if a.frozen_samples > 0 {
        let _ = writeln!(
            out,
            "  counted while frozen ({} freezes sampled), inside frozen and switches: io wait {} s, cpu {} s, run queue {} s",
            a.frozen_samples,
            num(a.io_wait_while_frozen_s),
            num(a.cpu_while_frozen_s),
            num(a.run_queue_while_frozen_s)
        );
    }
    if a.io_wait_dropped_s > 0.0 {
        let _ = writeln!(
            out,
            "  left out: {} s of io wait the kernel added that no wait can have had (docs/results.md); \
             io wait not measured for {} s",
            num(a.io_wait_dropped_s),
            num(a.io_wait_untrusted_s)
        );
    }
    if let Some(s) = &a.sw {
        let _ = writeln!(
            out,
            "  counters: {} page faults ({} major), {} context switches, {} CPU migrations",
            s.page_faults, s.major_faults, s.context_switches, s.cpu_migrations
        );
    }
    out
}

/// `v` as a share of `total`; "-" without a total.
fn percent_of(v: f64, total: f64) -> String {
    if total > 0.0 {
        format!("{:.1}%", v / total * 100.0)
    } else {
        "-".into()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_else(|| "-".into())
}

/// Two decimals for small numbers, none once they have three digits: the
/// measurements are not more precise than that.
fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
