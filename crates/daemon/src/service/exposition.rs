//! The Prometheus text exposition format of memgangd's metrics: the node
//! (jobs, switches, pool, swap, pressure), the time accounts of the jobs
//! that ended summed, and the own series of each job running or recently
//! ended (docs/daemon.md, "Metrics", lists them all). Counters only rise
//! within one run; they start again from 0 when the daemon does, which
//! Prometheus's `rate` and `increase` take as a reset.

use super::tally::{Histogram, Tally, FINAL};
use memgang_core::admission::Capacity;
use memgang_linux::counters::Psi;
use memgang_proto::{JobInfo, JobState};
use memgang_results::{JobAccount, SwCounts};
use memgang_runtime::account::Live;
use std::fmt::Write;

/// memgangd's version and the commit it was built from (`build.rs`:
/// `git describe`, or `$MEMGANG_GIT`, or "unknown" outside a checkout).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const GIT: &str = env!("MEMGANG_GIT");

/// The time accounts of the jobs that ended since the daemon started,
/// summed (counters: a job forgotten from the list still counts).
#[derive(Debug, Default)]
pub struct Accounted {
    pub jobs: u64,
    pub wall_s: f64,
    /// Per part of [`JobAccount::parts`], in its order.
    pub parts: [f64; 7],
    pub user_cpu_s: f64,
    pub system_cpu_s: f64,
    pub swapin_delay_s: f64,
    pub thrashing_delay_s: f64,
    pub reclaim_delay_s: f64,
}

impl Accounted {
    pub fn add(&mut self, a: &JobAccount) {
        self.jobs += 1;
        self.wall_s += a.wall_s;
        for (sum, (_, v)) in self.parts.iter_mut().zip(a.parts()) {
            *sum += v;
        }
        self.user_cpu_s += a.user_cpu_s;
        self.system_cpu_s += a.system_cpu_s;
        self.swapin_delay_s += a.swapin_delay_s;
        self.thrashing_delay_s += a.thrashing_delay_s;
        self.reclaim_delay_s += a.reclaim_delay_s;
    }
}

/// One job's own metrics series: a running job's counters so far, or an
/// ended one's time account and counters.
#[derive(Debug, Default)]
pub struct JobSeries {
    pub id: u64,
    pub user: String,
    /// Its time account, once it has ended.
    pub account: Option<JobAccount>,
    pub counters: Live,
}

/// A label value as the text format wants it: backslash, double quote and
/// newline escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub struct MetricsInput<'a> {
    /// The jobs the daemon keeps.
    pub jobs: &'a [JobInfo],
    /// Submissions, completions and queue waits since the daemon started.
    pub tally: &'a Tally,
    pub switches: usize,
    /// The switches' durations (their count is `switches`).
    pub switch_seconds: &'a Histogram,
    pub paged_out: u64,
    pub paged_in: u64,
    pub swapped: Option<(u64, u64)>,
    pub pool_limit: u64,
    pub pool_usage: Option<u64>,
    pub cap: Capacity,
    pub swap_used: Option<u64>,
    pub psi: Option<Psi>,
    pub accounted: &'a Accounted,
    /// The jobs with series of their own (`metrics::job_series`).
    pub per_job: &'a [JobSeries],
}

/// Samples of one metric family: (labels, value), labels with their
/// braces or empty.
type Samples = Vec<(String, String)>;

/// The exposition text, written one family at a time.
#[derive(Default)]
struct Text(String);

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(self.0, "{name}{labels} {v}");
        }
    }

    /// A histogram without labels: its cumulative buckets (`le`, the
    /// last `+Inf`), sum and count.
    fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (le, n) in h.cumulative() {
            let le = le.map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(self.0, "{name}_bucket{{le=\"{le}\"}} {n}");
        }
        let _ = writeln!(self.0, "{name}_sum {}\n{name}_count {}", h.sum(), h.count());
    }
}

/// One sample without labels.
fn one(v: String) -> Samples {
    vec![(String::new(), v)]
}

/// Prometheus text exposition format.
pub fn metrics_text(m: &MetricsInput) -> String {
    let mut t = Text::default();
    t.family(
        "memgang_build_info",
        "gauge",
        "memgangd's version and the git commit it was built from; always 1.",
        &one_labelled(
            format!(
                "{{version=\"{}\",git=\"{}\"}}",
                label_value(VERSION),
                label_value(GIT)
            ),
            "1",
        ),
    );
    jobs(&mut t, m);
    switches(&mut t, m);
    pool_and_swap(&mut t, m);
    accounted(&mut t, m.accounted);
    // Per job (`job_series`): running ones and recently ended ones.
    job_accounts(&mut t, m.per_job);
    job_counters(&mut t, m.per_job);
    t.0
}

/// One sample with labels.
fn one_labelled(labels: String, v: &str) -> Samples {
    vec![(labels, v.to_string())]
}

/// Jobs in progress by state, jobs submitted and completed, queue waits.
fn jobs(t: &mut Text, m: &MetricsInput) {
    // Only the states a job leaves: a gauge of ended jobs would fall as
    // retention forgets them; memgang_jobs_completed_total counts them.
    let by_state: Samples = (JobState::ALL.iter().filter(|s| !s.is_final()))
        .map(|st| {
            let n = m.jobs.iter().filter(|j| j.state == *st).count();
            (format!("{{state=\"{}\"}}", st.name()), n.to_string())
        })
        .collect();
    t.family(
        "memgang_jobs",
        "gauge",
        "Jobs in progress by state (queued: waiting for memory or for the policy to start it; suspended: frozen, taking turns).",
        &by_state,
    );
    t.family(
        "memgang_jobs_submitted_total",
        "counter",
        "Jobs submitted (accepted and journaled) since the daemon started.",
        &one(m.tally.submitted.to_string()),
    );
    let completed: Samples = (FINAL.iter().zip(m.tally.completed))
        .map(|(st, n)| (format!("{{state=\"{}\"}}", st.name()), n.to_string()))
        .collect();
    t.family(
        "memgang_jobs_completed_total",
        "counter",
        "Jobs that ended since the daemon started, by how (finished: exit 0; failed: otherwise, killed, or could not start; cancelled).",
        &completed,
    );
    t.histogram(
        "memgang_queue_wait_seconds",
        "Time from submission to start of each job that started since the daemon started.",
        &m.tally.queue_wait,
    );
}

/// The switches, what they paged, the node's swapping and memory stalls.
fn switches(t: &mut Text, m: &MetricsInput) {
    t.family(
        "memgang_switches_total",
        "counter",
        "Switches since the daemon started.",
        &one(m.switches.to_string()),
    );
    t.histogram(
        "memgang_switch_duration_seconds",
        "How long each switch took, from the first freeze to the last thaw (page-out and page-in included).",
        m.switch_seconds,
    );
    t.family(
        "memgang_switch_paged_bytes_total",
        "counter",
        "Bytes switches paged out and in themselves.",
        &[
            ("{direction=\"out\"}".into(), m.paged_out.to_string()),
            ("{direction=\"in\"}".into(), m.paged_in.to_string()),
        ],
    );
    if let Some((inb, outb)) = m.swapped {
        t.family(
            "memgang_node_swapped_bytes_total",
            "counter",
            "Bytes the node swapped since the daemon started (/proc/vmstat).",
            &[
                ("{direction=\"in\"}".into(), inb.to_string()),
                ("{direction=\"out\"}".into(), outb.to_string()),
            ],
        );
    }
    if let Some(p) = m.psi {
        let s = |us: u64| (us as f64 * 1e-6).to_string();
        t.family(
            "memgang_memory_pressure_stall_seconds_total",
            "counter",
            "Node memory pressure (PSI, /proc/pressure/memory total=), since boot: time some task, or all non-idle tasks at once (full), stalled on memory.",
            &[
                ("{kind=\"some\"}".into(), s(p.some_total_us)),
                ("{kind=\"full\"}".into(), s(p.full_total_us)),
            ],
        );
    }
}

/// The pool and the swap admission counts on.
fn pool_and_swap(t: &mut Text, m: &MetricsInput) {
    t.family(
        "memgang_pool_limit_bytes",
        "gauge",
        "The pool's memory limit.",
        &one(m.pool_limit.to_string()),
    );
    if let Some(u) = m.pool_usage {
        t.family(
            "memgang_pool_usage_bytes",
            "gauge",
            "Memory charged to the pool.",
            &one(u.to_string()),
        );
    }
    t.family(
        "memgang_swap_total_bytes",
        "gauge",
        "Swap space of the node.",
        &one(m.cap.swap_total_bytes.to_string()),
    );
    if let Some(u) = m.swap_used {
        t.family(
            "memgang_swap_used_bytes",
            "gauge",
            "Swap in use on the node.",
            &one(u.to_string()),
        );
    }
    t.family(
        "memgang_swap_usable_bytes",
        "gauge",
        "Swap the jobs may fill (admission).",
        &one(m.cap.swap_usable().to_string()),
    );
}

/// The time accounts of the jobs that ended, summed.
fn accounted(t: &mut Text, a: &Accounted) {
    t.family(
        "memgang_jobs_accounted_total",
        "counter",
        "Jobs that ended after running, since the daemon started: the memgang_job_* series sum their time accounts.",
        &one(a.jobs.to_string()),
    );
    t.family(
        "memgang_job_wall_seconds_total",
        "counter",
        "Their wall time, from start to end.",
        &one(a.wall_s.to_string()),
    );
    let parts: Samples = JobAccount::default()
        .parts()
        .iter()
        .zip(a.parts)
        .map(|((name, _), v)| {
            (
                format!("{{part=\"{}\"}}", name.replace(' ', "_")),
                v.to_string(),
            )
        })
        .collect();
    t.family(
        "memgang_job_seconds_total",
        "counter",
        "Their wall time by part (docs/results.md, time account); the parts add up to memgang_job_wall_seconds_total.",
        &parts,
    );
    t.family(
        "memgang_job_cpu_seconds_total",
        "counter",
        "Their CPU time (rusage), in CPU seconds.",
        &[
            ("{mode=\"user\"}".into(), a.user_cpu_s.to_string()),
            ("{mode=\"system\"}".into(), a.system_cpu_s.to_string()),
        ],
    );
    t.family(
        "memgang_job_stall_seconds_total",
        "counter",
        "Their memory stalls (taskstats), overlapping the parts.",
        &[
            ("{kind=\"swapin\"}".into(), a.swapin_delay_s.to_string()),
            (
                "{kind=\"thrashing\"}".into(),
                a.thrashing_delay_s.to_string(),
            ),
            ("{kind=\"reclaim\"}".into(), a.reclaim_delay_s.to_string()),
        ],
    );
}

/// A job's series: its id and user, then `extra` labels.
fn series(v: Vec<(&JobSeries, String, String)>) -> Samples {
    v.into_iter()
        .map(|(j, extra, value)| {
            let sep = if extra.is_empty() { "" } else { "," };
            let labels = format!(
                "{{id=\"{}\",user=\"{}\"{sep}{extra}}}",
                j.id,
                label_value(&j.user)
            );
            (labels, value)
        })
        .collect()
}

/// Each recently ended job's time account.
fn job_accounts(t: &mut Text, per_job: &[JobSeries]) {
    let ended: Vec<(&JobSeries, &JobAccount)> = (per_job.iter())
        .filter_map(|j| Some((j, j.account.as_ref()?)))
        .collect();
    t.family(
        "memgang_job_account_wall_seconds",
        "gauge",
        "A recently ended job's wall time, from start to end.",
        &series(
            (ended.iter())
                .map(|(j, a)| (*j, String::new(), a.wall_s.to_string()))
                .collect(),
        ),
    );
    t.family(
        "memgang_job_account_seconds",
        "gauge",
        "Its wall time by part (docs/results.md, time account); the parts add up to memgang_job_account_wall_seconds.",
        &series(
            (ended.iter())
                .flat_map(|(j, a)| {
                    a.parts().map(|(name, v)| {
                        let part = format!("part=\"{}\"", name.replace(' ', "_"));
                        (*j, part, v.to_string())
                    })
                })
                .collect(),
        ),
    );
    t.family(
        "memgang_job_account_cpu_seconds",
        "gauge",
        "Its CPU time (rusage), in CPU seconds.",
        &series(
            (ended.iter())
                .flat_map(|(j, a)| {
                    [("user", a.user_cpu_s), ("system", a.system_cpu_s)]
                        .map(|(mode, v)| (*j, format!("mode=\"{mode}\""), v.to_string()))
                })
                .collect(),
        ),
    );
}

/// Each running or recently ended job's counters: perf events, task
/// clock, huge pages.
fn job_counters(t: &mut Text, per_job: &[JobSeries]) {
    // Absent for a job whose counters the kernel refused.
    let sw: Vec<(&JobSeries, &SwCounts)> = (per_job.iter())
        .filter_map(|j| Some((j, j.counters.sw.as_ref()?)))
        .collect();
    t.family(
        "memgang_job_perf_events_total",
        "counter",
        "A running or recently ended job's software perf events so far, its threads and children included.",
        &series(
            (sw.iter())
                .flat_map(|(j, c)| {
                    [
                        ("minor_faults", c.minor_faults),
                        ("major_faults", c.major_faults),
                        ("context_switches", c.context_switches),
                        ("cpu_migrations", c.cpu_migrations),
                    ]
                    .map(|(event, n)| (*j, format!("event=\"{event}\""), n.to_string()))
                })
                .collect(),
        ),
    );
    t.family(
        "memgang_job_task_clock_seconds_total",
        "counter",
        "Its task clock (perf): the time its tasks were on a CPU.",
        &series(
            (sw.iter())
                .map(|(j, c)| {
                    (
                        *j,
                        String::new(),
                        (c.task_clock_ns as f64 * 1e-9).to_string(),
                    )
                })
                .collect(),
        ),
    );
    t.family(
        "memgang_job_anon_huge_bytes",
        "gauge",
        "Its anonymous huge pages (its cgroup's counter), the mean of its readings so far: at every sample while it runs (when=\"running\") and at each quantum's end (when=\"quantum_end\").",
        &series(
            (per_job.iter())
                .flat_map(|j| {
                    let c = &j.counters;
                    [("running", &c.anon_huge_running), ("quantum_end", &c.anon_huge_quantum_end)]
                        .into_iter()
                        .filter_map(move |(when, h)| {
                            let h = h.as_ref()?;
                            Some((j, format!("when=\"{when}\""), h.mean_bytes.to_string()))
                        })
                })
                .collect(),
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::tally::SWITCH_BUCKETS;
    use std::path::PathBuf;

    /// What an input borrows.
    struct Fixture {
        accounted: Accounted,
        tally: Tally,
        switch_seconds: Histogram,
        psi: Option<Psi>,
    }

    impl Default for Fixture {
        fn default() -> Fixture {
            let mut switch_seconds = Histogram::new(SWITCH_BUCKETS);
            for s in [0.3, 0.7, 0.5] {
                switch_seconds.observe(s);
            }
            Fixture {
                accounted: Accounted::default(),
                tally: Tally::default(),
                switch_seconds,
                psi: None,
            }
        }
    }

    impl Fixture {
        fn input<'a>(&'a self, per_job: &'a [JobSeries]) -> MetricsInput<'a> {
            MetricsInput {
                jobs: &[],
                tally: &self.tally,
                switches: 3,
                switch_seconds: &self.switch_seconds,
                paged_out: 10,
                paged_in: 20,
                swapped: Some((4096, 8192)),
                pool_limit: 1 << 30,
                pool_usage: Some(5),
                cap: Capacity {
                    pool_bytes: 1 << 30,
                    swap_total_bytes: 2 << 30,
                    swap_used_elsewhere_bytes: 0,
                    swap_reserve_bytes: 0,
                },
                swap_used: Some(0),
                psi: self.psi,
                accounted: &self.accounted,
                per_job,
            }
        }
    }

    #[test]
    fn each_job_has_series_of_its_own_with_escaped_labels() {
        let account = JobAccount {
            wall_s: 10.0,
            cpu_s: 7.0,
            frozen_s: 3.0,
            user_cpu_s: 6.5,
            system_cpu_s: 0.5,
            sw: Some(SwCounts {
                major_faults: 12,
                task_clock_ns: 7_000_000_000,
                ..SwCounts::default()
            }),
            anon_huge_running: Some(memgang_results::HugeStat {
                samples: 1,
                mean_bytes: 2 << 20,
                min_bytes: 2 << 20,
                max_bytes: 2 << 20,
            }),
            ..JobAccount::default()
        };
        let jobs = [
            JobSeries {
                id: 7,
                user: "a\"b\\c\nd".into(),
                counters: Live::from(&account),
                account: Some(account),
            },
            // Running, its counters refused by the kernel: no series.
            JobSeries {
                id: 8,
                user: "bob".into(),
                ..JobSeries::default()
            },
        ];
        let t = metrics_text(&Fixture::default().input(&jobs));
        let who = r#"id="7",user="a\"b\\c\nd""#;
        for line in [
            format!("memgang_job_account_wall_seconds{{{who}}} 10\n"),
            format!("memgang_job_account_seconds{{{who},part=\"frozen\"}} 3\n"),
            format!("memgang_job_account_seconds{{{who},part=\"run_queue\"}} 0\n"),
            format!("memgang_job_account_cpu_seconds{{{who},mode=\"system\"}} 0.5\n"),
            format!("memgang_job_perf_events_total{{{who},event=\"major_faults\"}} 12\n"),
            format!("memgang_job_task_clock_seconds_total{{{who}}} 7\n"),
            format!("memgang_job_anon_huge_bytes{{{who},when=\"running\"}} 2097152\n"),
        ] {
            assert!(t.contains(&line), "{line} missing in\n{t}");
        }
        assert!(!t.contains("quantum_end\"}"), "{t}");
        assert!(!t.contains(r#"id="8""#), "{t}");
        // One sample per line: the escaped newline did not cut one.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').unwrap();
            v.parse::<f64>().unwrap();
        }
    }

    #[test]
    fn metrics_are_prometheus_text() {
        let mut f = Fixture::default();
        f.accounted.add(&JobAccount {
            wall_s: 10.0,
            cpu_s: 7.0,
            frozen_s: 2.0,
            unaccounted_s: 1.0,
            swapin_delay_s: 0.5,
            ..JobAccount::default()
        });
        f.tally.submitted = 4;
        f.tally.completed = [2, 1, 0];
        f.tally.queue_wait.observe(30.0);
        f.psi = Some(Psi {
            some_avg10: 1.5,
            full_avg10: 0.5,
            some_total_us: 2_500_000,
            full_total_us: 1_000_000,
        });
        let t = metrics_text(&f.input(&[]));
        for line in [
            "# TYPE memgang_jobs gauge\n",
            "memgang_jobs{state=\"queued\"} 0\n",
            "memgang_jobs_submitted_total 4\n",
            "memgang_jobs_completed_total{state=\"finished\"} 2\n",
            "memgang_jobs_completed_total{state=\"cancelled\"} 0\n",
            "memgang_queue_wait_seconds_bucket{le=\"10\"} 0\n",
            "memgang_queue_wait_seconds_bucket{le=\"60\"} 1\n",
            "memgang_queue_wait_seconds_bucket{le=\"+Inf\"} 1\n",
            "memgang_queue_wait_seconds_sum 30\n",
            "memgang_switches_total 3\n",
            "memgang_switch_duration_seconds_bucket{le=\"0.25\"} 0\n",
            "memgang_switch_duration_seconds_bucket{le=\"0.5\"} 2\n",
            "memgang_switch_duration_seconds_count 3\n",
            "memgang_switch_paged_bytes_total{direction=\"in\"} 20\n",
            "memgang_memory_pressure_stall_seconds_total{kind=\"some\"} 2.5\n",
            "memgang_jobs_accounted_total 1\n",
            "memgang_job_seconds_total{part=\"frozen\"} 2\n",
            "memgang_job_seconds_total{part=\"run_queue\"} 0\n",
            "memgang_job_stall_seconds_total{kind=\"swapin\"} 0.5\n",
        ] {
            assert!(t.contains(line), "{line} missing in\n{t}");
        }
        // Ended jobs are counted, not gauged: retention forgets them.
        assert!(!t.contains("memgang_jobs{state=\"finished\"}"), "{t}");
        assert!(t.contains(&format!(
            "memgang_build_info{{version=\"{VERSION}\",git=\"{GIT}\"}} 1\n"
        )));
        // Every sample line is `name{labels} value`.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').unwrap();
            v.parse::<f64>().unwrap();
        }
    }

    /// The repository's Python with the Prometheus client (`.venv`, made
    /// by scripts/lib.sh's ensure_python_env from
    /// scripts/requirements-test.txt), or `$MEMGANG_PYTHON`; None (said)
    /// when `MEMGANG_SKIP_PYTHON_TESTS` is set and there is none.
    fn python() -> Option<PathBuf> {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let py = std::env::var_os("MEMGANG_PYTHON")
            .map_or_else(|| repo.join(".venv/bin/python"), PathBuf::from);
        let works = std::process::Command::new(&py)
            .args(["-c", "import prometheus_client"])
            .output()
            .is_ok_and(|o| o.status.success());
        if works {
            return Some(py);
        }
        if std::env::var_os("MEMGANG_SKIP_PYTHON_TESTS").is_some() {
            eprintln!(
                "SKIPPED: no {} with prometheus_client and MEMGANG_SKIP_PYTHON_TESTS is set: \
                 the metrics' conventions are NOT checked",
                py.display()
            );
            return None;
        }
        panic!(
            "no Python with prometheus_client at {}: run `bash -c 'source scripts/lib.sh; \
             ensure_python_env'` from the repository (scripts/test does), set MEMGANG_PYTHON, \
             or set MEMGANG_SKIP_PYTHON_TESTS=1 to skip",
            py.display()
        );
    }

    /// Every family, a running job's and an ended job's series among
    /// them, as the Prometheus client's parser reads it: HELP and TYPE,
    /// counters in _total, units as suffixes, histograms whole; and a
    /// name against the rules is caught.
    #[test]
    fn every_family_follows_prometheus_conventions() {
        let Some(py) = python() else {
            return;
        };
        let check =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/prometheus_conventions.py");
        let f = Fixture {
            psi: Some(Psi::default()),
            ..Fixture::default()
        };
        let account = JobAccount {
            wall_s: 3.0,
            sw: Some(SwCounts::default()),
            ..JobAccount::default()
        };
        let jobs = [
            JobSeries {
                id: 1,
                user: "alice".into(),
                counters: Live::from(&account),
                account: Some(account),
            },
            JobSeries {
                id: 2,
                user: "bob".into(),
                counters: Live {
                    sw: Some(SwCounts::default()),
                    ..Live::default()
                },
                account: None,
            },
        ];
        let text = metrics_text(&f.input(&jobs));
        let dir = tempfile::tempdir().unwrap();
        let run = |texts: &[&str]| {
            let paths: Vec<PathBuf> = (texts.iter().enumerate())
                .map(|(i, t)| {
                    let p = dir.path().join(format!("{i}.prom"));
                    std::fs::write(&p, t).unwrap();
                    p
                })
                .collect();
            std::process::Command::new(&py)
                .arg(&check)
                .args(&paths)
                .output()
                .unwrap()
        };
        let out = run(&[&text]);
        let said = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{said}\n{text}");
        eprintln!("{said}");
        // What the check must refuse: PSI's percent as it was, a counter
        // without _total, a unit inside a name, and a counter that fell.
        for bad in [
            "# HELP memgang_memory_pressure_avg10 x\n# TYPE memgang_memory_pressure_avg10 gauge\nmemgang_memory_pressure_avg10 1\n",
            "# HELP memgang_switches x\n# TYPE memgang_switches counter\nmemgang_switches 1\n",
            "# HELP memgang_seconds_switching x\n# TYPE memgang_seconds_switching gauge\nmemgang_seconds_switching 1\n",
            "memgang_untyped_bytes 1\n",
        ] {
            assert!(!run(&[bad]).status.success(), "passed: {bad}");
        }
        let later = text.replace("memgang_switches_total 3", "memgang_switches_total 2");
        assert!(!run(&[&text, &later]).status.success());
    }
}
