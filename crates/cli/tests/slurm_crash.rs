//! memgang's Slurm controller killed with SIGKILL at many points of its
//! switches, on the emulated cluster (scripts/slurm-cluster, which starts
//! the controller and restarts it when it dies, as systemd's
//! Restart=on-failure would): two MPI jobs of two nodes each that together
//! overfill every node's pool complete exactly once with exit 0, and none
//! stays suspended (issue 35's "Done when"), with Slurm's select/cons_tres
//! and select/linear.

mod common;

use common::slurm::{Cluster, Controller};
use common::*;
use std::time::{Duration, Instant};

/// Not slurm.rs's directory: the two files' tests never run at once
/// (the machine lock), but a leftover of one must not stop the other.
const STATE: &str = "/run/memgang-slurm-crash";
/// Each job's rank on each node; two of them overfill a pool.
const MIB: u32 = 170;
const POOL: &str = "256M";
/// Sweeps of each job: about 25 s of work alone on this machine, so that
/// the kills land over many switches (each kill waits for one to three
/// more steps of the rotation).
const SWEEPS: u32 = 1000;
const KILLS: usize = 10;

/// The cluster with its supervised controller.
fn up(select: &str) -> Cluster {
    Cluster::up(STATE, POOL, select, Controller::Supervised)
}

/// A small generator for the kill points; its seed is printed, so that a
/// failing sequence can be told apart from another.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn killed_at_many_points(select: &str) {
    let c = up(select);
    c.submit("a", MIB, SWEEPS);
    c.submit("b", MIB, SWEEPS);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill points from seed {seed}");
    let mut rng = Lcg(seed);
    let t0 = Instant::now();
    let done = |c: &Cluster| {
        c.jobs()
            .iter()
            .filter(|j| j.get("JobState").is_some_and(|s| s == "COMPLETED"))
            .count()
            == 2
    };
    let mut kills = Vec::new();
    // Kill points: after 1 to 3 more steps of the rotation in the
    // controller's log (a switch's beginning or end, a start, a job
    // suspended or resumed by the reconciliation), or every fourth kill
    // after one more line of any kind (most often a restarted controller
    // taking its jobs back); then 0 to 1.5 s more (inside a switch's
    // page-out or page-in, or between two polls).
    let steps = |c: &Cluster| {
        c.log()
            .lines()
            .filter(|l| {
                ["switch begins", "switch at", "started on", "their turn"]
                    .iter()
                    .any(|m| l.contains(m))
            })
            .count()
    };
    while kills.len() < KILLS && !done(&c) {
        assert!(t0.elapsed() < Duration::from_secs(300), "{}", c.log());
        let any_line = kills.len() % 4 == 3;
        let count = |c: &Cluster| {
            if any_line {
                c.log().lines().count()
            } else {
                steps(c)
            }
        };
        let target = count(&c)
            + if any_line {
                1
            } else {
                1 + rng.below(3) as usize
            };
        let waited = Instant::now();
        while count(&c) < target && waited.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        let Some(pid) = c.controller_pid() else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        let states: Vec<String> = c
            .jobs()
            .iter()
            .map(|j| format!("{}={}", j["JobName"], j["JobState"]))
            .collect();
        // SAFETY: kill(2) on the controller's pid, checked just above to
        // be `memgang slurm run`.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let last = c.log().lines().last().unwrap_or_default().to_string();
        eprintln!(
            "kill {} at {:.1} s: jobs {states:?}, last line {last:?}",
            kills.len() + 1,
            t0.elapsed().as_secs_f64()
        );
        kills.push(last);
        // Its loop starts another within about a second.
        let t = Instant::now();
        while c.controller_pid().is_none_or(|p| p == pid) {
            assert!(
                t.elapsed() < Duration::from_secs(15),
                "not restarted: {}",
                c.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(
        kills.len() >= 8,
        "only {} kills before the jobs ended: make them longer",
        kills.len()
    );
    // The last controller finishes the work.
    c.wait_completed(
        Duration::from_secs(300),
        &["PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "COMPLETING"],
    );
    // Each exactly once, exit 0, never requeued; the same checksum (the
    // same sweeps, whatever stopped them), printed once.
    let jobs = c.jobs();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    for j in &jobs {
        assert_eq!(j["ExitCode"], "0:0", "{j:?}");
        assert_eq!(j["Restarts"], "0", "{j:?}");
        assert_eq!(j["Partition"], "memgang-run", "{j:?}");
    }
    let sums: Vec<Vec<String>> = ["a", "b"]
        .iter()
        .map(|n| {
            std::fs::read_to_string(c.dir.path().join(format!("{n}.out")))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split("checksum ").nth(1).map(str::to_string))
                .collect()
        })
        .collect();
    assert!(
        sums[0].len() == 1 && sums[0] == sums[1],
        "checksums {sums:?}"
    );
    let log = c.log();
    assert!(log.contains("taken back"), "no job was taken back:\n{log}");
    // The controller's own record of the run agrees: nothing it stopped
    // is left stopped (Slurm shows both COMPLETED, above) and it is alive.
    assert!(c.controller_pid().is_some(), "{log}");
    eprintln!(
        "{} kills; both jobs completed in {:.1} s; switches begun {}, jobs taken back {}",
        kills.len(),
        t0.elapsed().as_secs_f64(),
        log.matches("switch begins").count(),
        log.matches("taken back").count()
    );
}

#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn a_controller_killed_at_many_points_loses_no_job_under_cons_tres() {
    require_root("a_controller_killed_at_many_points_loses_no_job_under_cons_tres");
    killed_at_many_points("cons_tres");
}

#[test]
#[ignore = "needs root, Slurm, munge and Open MPI (scripts/test installs them and runs it as root)"]
fn a_controller_killed_at_many_points_loses_no_job_under_linear() {
    require_root("a_controller_killed_at_many_points_loses_no_job_under_linear");
    killed_at_many_points("linear");
}
