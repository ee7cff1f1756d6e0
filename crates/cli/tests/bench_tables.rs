//! The bench scripts' own parsing and tables (Python, no root): each
//! script's `--self-test` checks its parsers and rows on text captured
//! from the tools it reads (Slurm's `scontrol show job -o`, /proc/PID/stat)
//! or on made-up results (realapps_rounds.py's floors). And bench/README.md,
//! the index of bench/: every file on it, each cited by a doc or run by one
//! that stays.

use std::path::{Path, PathBuf};
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

#[test]
fn scale_table_sets_a_switch_against_the_kernel_and_the_disk() {
    self_test("scale_table.py");
}

#[test]
fn many_table_reads_set_switches_and_the_simulators_lines() {
    self_test("many_table.py");
}

#[test]
fn daemon_defaults_sets_a_pair_against_its_jobs_one_after_the_other() {
    self_test("daemon_defaults.py");
}

/// One row of bench/README.md: a file, the docs that cite it, and the
/// scripts and tests that run it.
struct Row {
    file: String,
    cited: Vec<String>,
    run_by: Vec<String>,
}

/// The rows of bench/README.md's tables (`| `bench/...` | prints | cited
/// in | run by |`); `—` for none.
fn index_rows(text: &str) -> Vec<Row> {
    let list = |cell: &str| -> Vec<String> {
        cell.split(',')
            .map(|s| s.trim().trim_matches('`').to_string())
            .filter(|s| !s.is_empty() && s != "—")
            .collect()
    };
    text.lines()
        .filter(|l| l.starts_with("| `bench/"))
        .map(|l| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split('|').collect();
            assert_eq!(cells.len(), 4, "bench/README.md: not 4 cells: {l}");
            Row {
                file: cells[0].trim().trim_matches('`').to_string(),
                cited: list(cells[2]),
                run_by: list(cells[3]),
            }
        })
        .collect()
}

/// What is wrong with bench/README.md (`text`) against the files under
/// bench/ (`files`, repository paths) and the text of any file (`read`):
/// a file it leaves out, a row for no file, a doc that does not name its
/// file (by path, or by name from the file's own directory), a runner
/// that does not name it, and a file neither a doc cites nor something
/// that stays runs (bench/README.md: "one that is neither goes").
fn index_problems(
    text: &str,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let rows = index_rows(text);
    let mut out = Vec::new();
    for f in files {
        if !rows.iter().any(|r| &r.file == f) {
            out.push(format!("{f}: not on bench/README.md (add a row)"));
        }
    }
    for r in &rows {
        if !files.contains(&r.file) {
            out.push(format!(
                "bench/README.md: a row for {}, which is not there",
                r.file
            ));
        }
        let (dir, name) = r.file.rsplit_once('/').unwrap_or(("", &r.file));
        for doc in &r.cited {
            let names = |t: String| {
                t.contains(&r.file)
                    || (doc.rsplit_once('/').map(|d| d.0) == Some(dir) && t.contains(name))
            };
            if !read(doc).is_some_and(names) {
                out.push(format!(
                    "bench/README.md: {doc} is said to cite {} but does not name it",
                    r.file
                ));
            }
        }
        for by in &r.run_by {
            if !read(by).is_some_and(|t| t.contains(name)) {
                out.push(format!(
                    "bench/README.md: {by} is said to run {} but does not name {name}",
                    r.file
                ));
            }
        }
    }
    // Stays: cited by a doc, run by something outside bench/ (a test, scripts/),
    // or run by a bench file that stays.
    let mut stays: Vec<&str> = Vec::new();
    loop {
        let more: Vec<&str> = rows
            .iter()
            .filter(|r| !stays.contains(&r.file.as_str()))
            .filter(|r| {
                !r.cited.is_empty()
                    || r.run_by
                        .iter()
                        .any(|b| !b.starts_with("bench/") || stays.contains(&b.as_str()))
            })
            .map(|r| r.file.as_str())
            .collect();
        if more.is_empty() {
            break;
        }
        stays.extend(more);
    }
    for r in rows.iter().filter(|r| !stays.contains(&r.file.as_str())) {
        out.push(format!(
            "{}: no doc cites it and nothing that stays runs it (remove it)",
            r.file
        ));
    }
    out
}

/// Every file under bench/ but bench/results and the READMEs, as
/// repository paths, sorted.
fn bench_files(repo: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![repo.join("bench")];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(repo).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if rel != "bench/results" {
                    todo.push(p);
                }
            } else if !rel.ends_with(".md") {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn bench_readme_lists_every_script_with_the_docs_that_cite_it() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(repo.join("bench/README.md")).expect("bench/README.md");
    let files = bench_files(&repo);
    assert!(
        files.len() > 40,
        "only {} files found under bench/",
        files.len()
    );
    let read = |p: &str| std::fs::read_to_string(repo.join(p)).ok();
    let problems = index_problems(&text, &files, &read);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_bench_index_check_finds_what_is_missing_or_orphaned() {
    let text = "\
| `bench/a.sh` | a table | docs/a.md | — |
| `bench/a.py` | a's table | — | `bench/a.sh` |
| `bench/b.py` | nothing | — | `bench/c.sh` |
| `bench/c.sh` | c's table | docs/a.md | — |
| `bench/gone.sh` | was | docs/a.md | — |
";
    let files: Vec<String> = [
        "bench/a.sh",
        "bench/a.py",
        "bench/b.py",
        "bench/c.sh",
        "bench/new.sh",
    ]
    .map(String::from)
    .to_vec();
    let read = |p: &str| match p {
        "docs/a.md" => Some("run `bench/a.sh`; bench/gone.sh".to_string()),
        "bench/a.sh" => Some("python3 bench/a.py".to_string()),
        "bench/c.sh" => Some("echo".to_string()),
        _ => None,
    };
    let problems = index_problems(text, &files, &read);
    let want = [
        "bench/new.sh: not on bench/README.md",
        "a row for bench/gone.sh",
        "docs/a.md is said to cite bench/c.sh",
        "bench/c.sh is said to run bench/b.py",
    ];
    for w in want {
        assert!(
            problems.iter().any(|p| p.contains(w)),
            "no {w:?} in {problems:#?}"
        );
    }
    // b.py is run only by c.sh, which no doc names: c.sh is listed as cited,
    // so b.py stays by it; a.py stays by a.sh.
    assert_eq!(problems.len(), want.len(), "{problems:#?}");
    let orphan =
        "| `bench/x.py` | x | — | `bench/y.py` |\n| `bench/y.py` | y | — | `bench/x.py` |\n";
    let files: Vec<String> = ["bench/x.py", "bench/y.py"].map(String::from).to_vec();
    let read = |_: &str| Some("x.py y.py".to_string());
    let problems = index_problems(orphan, &files, &read);
    assert_eq!(
        problems.len(),
        2,
        "two helpers that only run each other go: {problems:#?}"
    );
}
