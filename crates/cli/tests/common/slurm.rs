//! An emulated Slurm cluster for a test (scripts/slurm-cluster: two
//! nodes, each a network namespace of its own, with munge and Open MPI),
//! brought down (a supervised controller and its loop stopped, jobs
//! cancelled, daemons stopped by pid, namespaces and pools removed) when
//! the test ends, also when it fails.

use super::{text, Bed};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Who runs the cluster's controller.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// The test, with the flags it needs (`--no-controller`).
    Test,
    /// scripts/slurm-cluster, which restarts it when it dies, as
    /// systemd's Restart=on-failure would.
    Supervised,
}

/// What an MPI job asks on a node beyond its rank's array.
pub const MPI_MIB: u32 = 32;

pub struct Cluster {
    _bed: Bed,
    /// The test's files: the compiled MPI program, the jobs' outputs.
    pub dir: tempfile::TempDir,
    /// scripts/slurm-cluster's STATE_DIR: slurm.conf, munge, pid files,
    /// logs. Each test file has its own, so that a leftover of one does
    /// not stop another.
    pub state: &'static str,
}

impl Cluster {
    /// `pool`: each node's memory pool; `select`: Slurm's select plugin,
    /// `linear` or `cons_tres`.
    pub fn up(state: &'static str, pool: &str, select: &str, controller: Controller) -> Cluster {
        let bed = Bed::new();
        let _ = script(state, "down", &[]);
        let mut args = vec![
            "--nodes",
            "2",
            "--pool",
            pool,
            "--quantum",
            "3",
            "--select",
            select,
        ];
        if controller == Controller::Test {
            args.push("--no-controller");
        }
        let out = script(state, "up", &args);
        assert!(out.status.success(), "slurm-cluster up: {}", text(&out));
        let dir = tempfile::tempdir().unwrap();
        let cc = Command::new("mpicc")
            .args(["-O2", "-o"])
            .arg(dir.path().join("mpi_sweep"))
            .arg(repo().join("bench/slurm/mpi_sweep.c"))
            .output()
            .expect("mpicc (openmpi, installed by scripts/slurm-cluster)");
        assert!(cc.status.success(), "mpicc: {}", text(&cc));
        Cluster {
            _bed: bed,
            dir,
            state,
        }
    }

    pub fn conf(&self) -> String {
        format!("{}/slurm.conf", self.state)
    }

    /// Runs a Slurm command against this cluster; fails the test unless
    /// it succeeds; its stdout.
    pub fn slurm(&self, cmd: &str, args: &[&str]) -> String {
        let out = Command::new(cmd)
            .args(args)
            .env("SLURM_CONF", self.conf())
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{cmd} {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A job `name` of two ranks (one per node), `mib` MiB each, that
    /// synchronise every one of `sweeps` sweeps; its output in
    /// `dir/name.out`. It asks `--mem` of its rank and 32 MiB for Open
    /// MPI's own (orted, buffers): under Slurm's task/cgroup with
    /// select/linear, `--mem` is the job cgroup's limit, and a job asking
    /// just its array pages against it.
    pub fn submit(&self, name: &str, mib: u32, sweeps: u32) {
        // Open MPI's session directories go under TMPDIR and stay behind
        // when a job is killed: keep them in the test's dir. mpirun
        // forwards the SIGTSTP of Slurm's suspend to its daemons, and one
        // that has not reported in yet fails the job ("proc ... not
        // running - cannot relay"): the controller can stop a job 3 s
        // after its start, during its launch, under load. Slurm stops
        // every rank itself; mpirun forwards nothing.
        let tmp = self.dir.path().join("tmp");
        let wrap = format!(
            "mkdir -p {tmp} && TMPDIR={tmp} mpirun --allow-run-as-root --mca ess_base_forward_signals none --mca btl self,tcp {} {mib} {sweeps}",
            self.dir.path().join("mpi_sweep").display(),
            tmp = tmp.display()
        );
        self.slurm(
            "sbatch",
            &[
                "-N2",
                "--ntasks-per-node=1",
                &format!("--mem={}M", mib + MPI_MIB),
                "-J",
                name,
                "-o",
                &format!("{}/{name}.out", self.dir.path().display()),
                "--wrap",
                &wrap,
            ],
        );
    }

    /// `scontrol show job -o`'s fields of every job Slurm knows.
    pub fn jobs(&self) -> Vec<BTreeMap<String, String>> {
        self.slurm("scontrol", &["show", "job", "-o"])
            .lines()
            .filter(|l| l.starts_with("JobId="))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|f| f.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }
}

impl Cluster {
    /// The supervised controller's log (scripts/slurm-cluster's
    /// `controller.log`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(format!("{}/controller.log", self.state)).unwrap_or_default()
    }

    /// The supervised controller's pid, if it runs now (its loop may be
    /// between two).
    pub fn controller_pid(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(format!("{}/controller.pid", self.state))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        String::from_utf8_lossy(&cmd)
            .contains("slurm\0run")
            .then_some(pid)
    }

    /// Wait (at most `limit`) until every job is SUSPENDED and one says in
    /// its `AdminComment` that memgang keeps it stopped because of `why`
    /// (a refused or failed switch); fails the test with Slurm's records
    /// otherwise.
    pub fn wait_refused(&self, why: &str, limit: std::time::Duration) {
        let t = std::time::Instant::now();
        loop {
            let shown = self.slurm("scontrol", &["show", "job", "-o"]);
            let jobs = self.jobs();
            let stopped = jobs.iter().all(|j| j["JobState"] == "SUSPENDED");
            let said = shown
                .lines()
                .filter_map(|l| {
                    l.split_once("AdminComment=memgang: stopped: switch")
                        .map(|x| x.1)
                })
                .any(|c| c.contains(why));
            if stopped && said {
                return;
            }
            assert!(
                t.elapsed() < limit,
                "no refusal saying {why:?} within {limit:?}:\n{shown}"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }

    /// Wait (at most `limit`) until the test's two jobs are COMPLETED,
    /// every job meanwhile in one of the `allowed` states; fails the test
    /// with Slurm's records and the controller's log otherwise.
    pub fn wait_completed(&self, limit: std::time::Duration, allowed: &[&str]) {
        let t = std::time::Instant::now();
        loop {
            let jobs = self.jobs();
            if jobs.iter().filter(|j| j["JobState"] == "COMPLETED").count() == 2 {
                return;
            }
            assert!(
                t.elapsed() < limit,
                "jobs never completed: {jobs:?}\n{}",
                self.log()
            );
            assert!(
                jobs.iter()
                    .all(|j| allowed.contains(&j["JobState"].as_str())),
                "a job failed: {jobs:?}\n{}",
                self.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let out = script(self.state, "down", &[]);
        if !out.status.success() {
            eprintln!("slurm-cluster down: {}", text(&out));
        }
    }
}

/// scripts/slurm-cluster `verb` with `state` as its STATE_DIR and this
/// build's memgang.
pub fn script(state: &str, verb: &str, args: &[&str]) -> Output {
    Command::new(repo().join("scripts/slurm-cluster"))
        .arg(verb)
        .args(args)
        .env("STATE_DIR", state)
        .env("MEMGANG", env!("CARGO_BIN_EXE_memgang"))
        .output()
        .unwrap()
}
