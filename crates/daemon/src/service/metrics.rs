//! The metrics: Prometheus text (the node, the jobs' time accounts summed,
//! each running or recently ended job's own series), written to the
//! metrics file for node_exporter and kept for the HTTP listener.

use super::store::unix_now;
use super::Service;
use memgang_core::admission::Capacity;
use memgang_core::JobId;
use memgang_linux::counters::{Psi, SwapStatus, VmStat};
use memgang_linux::paging::page_size;
use memgang_proto::{JobInfo, JobState};
use memgang_results::{JobAccount, SwCounts};
use memgang_runtime::account::Live;
use memgang_runtime::executor::Node;
use std::collections::HashMap;
use std::fmt::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// An ended job keeps its own metrics series this long after its end:
/// several scrapes at any usual interval (15 s to 5 min) record its final
/// values, and a node that runs thousands of short jobs does not export
/// a series set per job it keeps (`keep_finished_jobs`, 10,000 by
/// default). `memgang show ID` has them for as long as the job is kept.
const RECENT_FOR_S: f64 = 15.0 * 60.0;
/// And at most this many ended jobs, the newest, have their own series:
/// about 20 series each, a few thousand series in all.
const RECENT_JOBS: usize = 200;

impl Service {
    /// The metrics rendered for the HTTP listener and written to the
    /// metrics file, if either is configured.
    pub(super) fn write_metrics(
        &self,
        node: &Node,
        map: &HashMap<u64, JobId>,
        cap: Capacity,
        vm_start: Option<VmStat>,
        accounted: &Accounted,
    ) {
        if self.cfg.metrics_file.is_none() && self.cfg.metrics_listen.is_none() {
            return;
        }
        let jobs = self.shared.list(|_| true);
        let per_job = job_series(&jobs, unix_now(), |id| node.live(*map.get(&id)?));
        let pool = self.env.backend.memory_stat(node.pool()).ok();
        let vm = VmStat::read().ok();
        let text = metrics_text(&MetricsInput {
            jobs: &jobs,
            switches: node.switches().len(),
            switch_seconds: node.switches().iter().fold(0.0, |t, s| t + s.took_s),
            paged_out: node.switches().iter().map(|s| s.paged_out_bytes).sum(),
            paged_in: node.switches().iter().map(|s| s.paged_in_bytes).sum(),
            swapped: vm.zip(vm_start).map(|(v, s)| {
                (
                    v.pswpin.saturating_sub(s.pswpin) * page_size(),
                    v.pswpout.saturating_sub(s.pswpout) * page_size(),
                )
            }),
            pool_limit: self.cfg.pool_memory,
            pool_usage: pool.map(|p| p.usage_bytes),
            cap,
            swap_used: SwapStatus::read().ok().map(|s| s.used_bytes),
            psi: Psi::node_memory(),
            accounted,
            per_job: &per_job,
        });
        if let Ok(mut latest) = self.metrics.lock() {
            latest.clone_from(&text);
        }
        if let Some(path) = &self.cfg.metrics_file {
            write_file(path, &text);
        }
    }
}

/// World-readable (node_exporter runs as its own user; the daemon's umask
/// is 077), and renamed into place so a reader never sees half a file.
/// The temporary name does not end in .prom, which the textfile collector
/// would read.
fn write_file(path: &Path, text: &str) {
    let tmp = path.with_extension("prom.tmp");
    let write = || -> std::io::Result<()> {
        std::fs::write(&tmp, text)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        tracing::warn!("writing metrics {}: {e}", path.display());
    }
}

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

/// The jobs that have series of their own: those running here (`live`:
/// their counters so far, by id; None for a job not on this node, e.g.
/// adopted from an earlier daemon) and the newest [`RECENT_JOBS`] that
/// ended within [`RECENT_FOR_S`] of `now` with an account, from the jobs
/// the daemon keeps.
pub fn job_series(
    jobs: &[JobInfo],
    now: f64,
    live: impl Fn(u64) -> Option<Live>,
) -> Vec<JobSeries> {
    let mut ended: Vec<&JobInfo> = jobs
        .iter()
        .filter(|j| j.account.is_some())
        .filter(|j| j.finished_unix_s.is_some_and(|t| now - t <= RECENT_FOR_S))
        .collect();
    let end = |j: &JobInfo| j.finished_unix_s.unwrap_or(0.0);
    ended.sort_by(|a, b| end(b).total_cmp(&end(a)));
    ended.truncate(RECENT_JOBS);
    let mut names = HashMap::new();
    let mut user =
        |uid: u32| -> String { names.entry(uid).or_insert_with(|| user_name(uid)).clone() };
    let mut out: Vec<JobSeries> = ended
        .into_iter()
        .filter_map(|j| {
            // An account of another version's shape is left out here;
            // `memgang show` prints it as it is.
            let a: JobAccount = serde_json::from_value(j.account.clone()?).ok()?;
            Some(JobSeries {
                id: j.id,
                user: user(j.uid),
                counters: Live::from(&a),
                account: Some(a),
            })
        })
        .collect();
    for j in jobs.iter().filter(|j| !j.state.is_final()) {
        if let Some(counters) = live(j.id) {
            out.push(JobSeries {
                id: j.id,
                user: user(j.uid),
                account: None,
                counters,
            });
        }
    }
    out.sort_by_key(|s| s.id);
    out
}

/// The login name of `uid`, or the number where it has none.
fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// A label value as the text format wants it: backslash, double quote and
/// newline escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub struct MetricsInput<'a> {
    pub jobs: &'a [JobInfo],
    pub switches: usize,
    pub switch_seconds: f64,
    pub paged_out: u64,
    pub paged_in: u64,
    pub swapped: Option<(u64, u64)>,
    pub pool_limit: u64,
    pub pool_usage: Option<u64>,
    pub cap: Capacity,
    pub swap_used: Option<u64>,
    pub psi: Option<Psi>,
    pub accounted: &'a Accounted,
    /// The jobs with series of their own ([`job_series`]).
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
}

/// One sample without labels.
fn one(v: String) -> Samples {
    vec![(String::new(), v)]
}

/// Prometheus text exposition format.
pub fn metrics_text(m: &MetricsInput) -> String {
    let mut t = Text::default();
    jobs_and_switches(&mut t, m);
    pool_and_swap(&mut t, m);
    accounted(&mut t, m.accounted);
    // Per job (`job_series`): running ones and recently ended ones.
    job_accounts(&mut t, m.per_job);
    job_counters(&mut t, m.per_job);
    if let Some(p) = m.psi {
        t.family(
            "memgang_memory_pressure_avg10",
            "gauge",
            "Node memory pressure (PSI), % of the last 10 s.",
            &[
                ("{kind=\"some\"}".into(), p.some_avg10.to_string()),
                ("{kind=\"full\"}".into(), p.full_avg10.to_string()),
            ],
        );
    }
    t.0
}

/// Jobs by state, the switches and what they paged, the node's swapping.
fn jobs_and_switches(t: &mut Text, m: &MetricsInput) {
    let by_state: Samples = JobState::ALL
        .iter()
        .map(|st| {
            let n = m.jobs.iter().filter(|j| j.state == *st).count();
            (format!("{{state=\"{}\"}}", st.name()), n.to_string())
        })
        .collect();
    t.family("memgang_jobs", "gauge", "Jobs by state.", &by_state);
    t.family(
        "memgang_switches_total",
        "counter",
        "Switches since the daemon started.",
        &one(m.switches.to_string()),
    );
    t.family(
        "memgang_switch_seconds_total",
        "counter",
        "Time spent switching.",
        &one(format!("{}", m.switch_seconds)),
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

    fn input<'a>(accounted: &'a Accounted, per_job: &'a [JobSeries]) -> MetricsInput<'a> {
        MetricsInput {
            jobs: &[],
            switches: 3,
            switch_seconds: 1.5,
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
            psi: None,
            accounted,
            per_job,
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
        let t = metrics_text(&input(&Accounted::default(), &jobs));
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
    fn running_and_recently_ended_jobs_have_series_of_their_own() {
        use crate::journal::tests::rec;
        let now = 100_000.0;
        let ended = |id: u64, ago: f64| {
            let mut r = rec(id, JobState::Finished).info;
            r.finished_unix_s = Some(now - ago);
            r.account = serde_json::to_value(JobAccount::default()).ok();
            r
        };
        let mut jobs: Vec<JobInfo> = (0..RECENT_JOBS as u64 + 10)
            .map(|id| ended(id, id as f64))
            .collect();
        jobs.push(ended(9_000, RECENT_FOR_S + 1.0));
        let mut no_account = ended(9_001, 0.0);
        no_account.account = None;
        jobs.push(no_account);
        jobs.push(rec(9_002, JobState::Running).info);
        jobs.push(rec(9_003, JobState::Running).info);
        jobs.push(rec(9_004, JobState::Queued).info);
        // 9003 runs on no node of ours (adopted), 9004 waits: no counters.
        let live = |id: u64| (id == 9_002).then(Live::default);
        let ids: Vec<u64> = job_series(&jobs, now, live).iter().map(|s| s.id).collect();
        let want: Vec<u64> = (0..RECENT_JOBS as u64).chain([9_002]).collect();
        assert_eq!(ids, want);
    }

    #[test]
    fn metrics_are_prometheus_text() {
        let mut accounted = Accounted::default();
        accounted.add(&JobAccount {
            wall_s: 10.0,
            cpu_s: 7.0,
            frozen_s: 2.0,
            unaccounted_s: 1.0,
            swapin_delay_s: 0.5,
            ..JobAccount::default()
        });
        let t = metrics_text(&input(&accounted, &[]));
        assert!(t.contains("# TYPE memgang_jobs gauge\n"));
        assert!(t.contains("memgang_jobs{state=\"queued\"} 0\n"));
        assert!(t.contains("memgang_switches_total 3\n"));
        assert!(t.contains("memgang_switch_paged_bytes_total{direction=\"in\"} 20\n"));
        assert!(t.contains("memgang_jobs_accounted_total 1\n"));
        assert!(t.contains("memgang_job_seconds_total{part=\"frozen\"} 2\n"));
        assert!(t.contains("memgang_job_seconds_total{part=\"run_queue\"} 0\n"));
        assert!(t.contains("memgang_job_stall_seconds_total{kind=\"swapin\"} 0.5\n"));
        // Every sample line is `name{labels} value`.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').unwrap();
            v.parse::<f64>().unwrap();
        }
    }
}
