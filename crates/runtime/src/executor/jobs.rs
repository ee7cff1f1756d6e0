//! A node's jobs: what each is launched with, starting it in its cgroup,
//! reaping it, finishing or cancelling it, and tearing every cgroup down
//! however the node ends.

use super::Env;
use crate::account::Tracker;
use crate::engine::{JobMemory, Memories};
use crate::procs::{self, Launch, Launched};
use crate::results::{Interval, JobResult, Switch};
use anyhow::{Context, Result};
use memgang_core::{capacity, JobId, JobSpec, JobStatus, State};
use memgang_linux::cgroup::{CgroupBackend, GroupPath, MemoryStat};
use memgang_linux::process::{self, Exit};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lines of a failed job's stderr kept in the results: enough for an error
/// message and a short backtrace, small enough for a table.
const STDERR_TAIL_LINES: usize = 10;

pub(super) struct JobRun {
    pub(super) group: GroupPath,
    pub(super) launch: Launch,
    /// Its memory as the switch engine keeps it: records, working-set
    /// estimate, background writing, early page-in, huge-page restore.
    pub(super) mem: JobMemory,
    /// Peak resident memory last reported to the policy.
    pub(super) reported_peak: u64,
    pub(super) proc: Option<Launched>,
    pub(super) running_since: Option<Duration>,
    /// Time it ran (thawed) in the intervals closed so far.
    pub(super) ran: Duration,
    /// Since when (s) dynamic coscheduling has it boosted.
    pub(super) boosted_since: Option<f64>,
    /// Its allowance file (`$MEMGANG_ALLOWANCE_FILE`) and the bytes last
    /// written to it.
    pub(super) allowance: Option<(PathBuf, u64)>,
    /// Cancelled: killed if it runs, never started if it has not.
    pub(super) cancelled: bool,
    /// Why it is kept stopped although the policy runs it (memory that
    /// suspended jobs hold locked: [`Jobs::hold`]); None: as the policy
    /// says.
    pub(super) held: Option<String>,
    /// Started by an earlier process and taken over ([`Jobs::adopt`]):
    /// frozen until the policy starts it, thawed instead of launched,
    /// ended when its group is empty.
    pub(super) adopted: bool,
    pub(super) last: MemoryStat,
    pub(super) result: JobResult,
}

impl JobRun {
    /// Stop its background writing and wait for its paging threads (a
    /// page-in started early, its huge pages going back): nothing of it
    /// runs on after its end or the node's release.
    pub(super) fn stop_paging(&mut self) {
        self.result.huge_restored_bytes += self.mem.stop_paging();
    }

    pub(super) fn new(group: GroupPath, spec: &JobSpec, launch: Launch) -> JobRun {
        JobRun {
            mem: JobMemory::new(group.clone(), &spec.name, spec.memory_bytes),
            group,
            reported_peak: 0,
            proc: None,
            running_since: None,
            ran: Duration::ZERO,
            boosted_since: None,
            allowance: None,
            cancelled: false,
            held: None,
            adopted: false,
            last: MemoryStat::default(),
            result: JobResult {
                name: spec.name.clone(),
                command: launch.command.clone(),
                ranks: spec.ranks,
                declared_memory_bytes: spec.memory_bytes,
                arrival_s: spec.arrival.as_secs_f64(),
                ..JobResult::default()
            },
            launch,
        }
    }
}

/// The variable that names a job's allowance file (memadapt reads it).
pub const ALLOWANCE_ENV: &str = "MEMGANG_ALLOWANCE_FILE";

/// Write `bytes` to the allowance file at `path`: whole or not at all
/// (a reader never sees half a number), readable by the job's user, and
/// through no link (`memgang_linux::files`).
pub(super) fn write_allowance(path: &std::path::Path, bytes: u64) -> std::io::Result<()> {
    memgang_linux::files::replace(path, format!("{bytes}\n").as_bytes(), 0o644)
}

/// Tears down every cgroup of the node, whatever way it ends (return,
/// error or panic): no process, frozen task or cgroup outlives memgang.
pub(super) struct Teardown {
    backend: Arc<dyn CgroupBackend>,
    pool: GroupPath,
    /// Job groups made, with their first process once started.
    pub(super) jobs: Vec<(GroupPath, Option<i32>)>,
    /// Leave everything as it is ([`Jobs::release`]).
    pub(super) keep: bool,
}

impl Teardown {
    pub(super) fn new(backend: Arc<dyn CgroupBackend>, pool: GroupPath) -> Teardown {
        Teardown {
            backend,
            pool,
            jobs: Vec::new(),
            keep: false,
        }
    }
}

impl Drop for Teardown {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for (group, pid) in self.jobs.drain(..) {
            if let Err(e) = procs::kill_and_remove(self.backend.as_ref(), &group, pid) {
                tracing::error!("cleanup: {e:#}");
            }
        }
        if let Err(e) = self.backend.remove(&self.pool) {
            tracing::error!("cleanup: removing pool cgroup {}: {e}", self.pool.as_str());
        }
    }
}

/// A node's jobs by [`JobId`]: every job added and not forgotten
/// ([`Jobs::forget`]: a service forgets a job once it has recorded its
/// end, so that what it holds follows the jobs alive).
#[derive(Default)]
pub(super) struct Runs(BTreeMap<JobId, JobRun>);

impl Runs {
    pub(super) fn get(&self, job: JobId) -> Option<&JobRun> {
        self.0.get(&job)
    }

    pub(super) fn get_mut(&mut self, job: JobId) -> Option<&mut JobRun> {
        self.0.get_mut(&job)
    }

    /// In the order they were added.
    pub(super) fn iter(&self) -> impl Iterator<Item = (JobId, &JobRun)> {
        self.0.iter().map(|(id, j)| (*id, j))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &JobRun> {
        self.0.values()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut JobRun> {
        self.0.values_mut()
    }

    pub(super) fn ids(&self) -> Vec<JobId> {
        self.0.keys().copied().collect()
    }

    pub(super) fn insert(&mut self, job: JobId, run: JobRun) {
        self.0.insert(job, run);
    }

    pub(super) fn remove(&mut self, job: JobId) -> Option<JobRun> {
        self.0.remove(&job)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn into_values(self) -> impl Iterator<Item = JobRun> {
        self.0.into_values()
    }
}

impl std::ops::Index<JobId> for Runs {
    type Output = JobRun;
    fn index(&self, job: JobId) -> &JobRun {
        self.0
            .get(&job)
            .unwrap_or_else(|| panic!("job {} is not on this node", job.0))
    }
}

impl std::ops::IndexMut<JobId> for Runs {
    fn index_mut(&mut self, job: JobId) -> &mut JobRun {
        self.0
            .get_mut(&job)
            .unwrap_or_else(|| panic!("job {} is not on this node", job.0))
    }
}

/// A node's jobs ([`Runs`]), the cgroups to tear down, the intervals
/// they ran and their time accounts (crate::account).
pub(super) struct Jobs {
    pub(super) runs: Runs,
    /// First processes not past their gate yet ([`Jobs::open_gates`]).
    pub(super) gates: Vec<Gate>,
    pub(super) teardown: Teardown,
    pub(super) timeline: Vec<Interval>,
    pub(super) account: Tracker,
}

impl Memories<JobId> for Jobs {
    /// None for a job that has ended (run, or failed to start): its groups
    /// are gone, and a switch the policy made before it heard of the end
    /// skips its steps on the job rather than fail on a freezer that is
    /// no longer there (memgangd's soak, 2026-12-07, ended the daemon so).
    fn memory(&mut self, job: &JobId) -> Option<&mut JobMemory> {
        self.runs
            .get_mut(*job)
            .filter(|j| j.result.finish_s.is_none())
            .map(|j| &mut j.mem)
    }
}

impl Jobs {
    /// No job yet; the accounts' clock starts at `t0`.
    pub(super) fn new(teardown: Teardown, t0: Instant) -> Jobs {
        Jobs {
            runs: Runs::default(),
            gates: Vec::new(),
            teardown,
            timeline: Vec::new(),
            account: Tracker::start(t0),
        }
    }

    pub(super) fn name(&self, job: JobId) -> &str {
        &self.runs[job].result.name
    }

    /// Cancel a job: one that runs (or is suspended) is killed and
    /// finishes at the next step, with the error "cancelled"; one not
    /// started yet finishes, unstarted, when the policy would start it. A
    /// finished job is left as it is.
    pub(super) fn cancel(&mut self, env: &Env, job: JobId) -> Result<()> {
        let j = self
            .runs
            .get_mut(job)
            .with_context(|| format!("no job {} on this node", job.0))?;
        if j.result.finish_s.is_some() || j.cancelled {
            return Ok(());
        }
        j.cancelled = true;
        j.result.error = Some("cancelled".into());
        if let Some(p) = &j.proc {
            procs::kill(env.backend.as_ref(), &j.group, &p.pidfd)
                .with_context(|| format!("cancelling job {}", j.result.name))?;
        } else if j.adopted {
            // Frozen, waiting for its turn: thawed so that it can die.
            env.freezer.thaw(&j.group)?;
            procs::kill_and_remove(env.backend.as_ref(), &j.group, None)
                .with_context(|| format!("cancelling job {}", j.result.name))?;
        }
        Ok(())
    }

    /// Take over a job an earlier process left running in `group`: frozen
    /// now, thawed instead of launched when the policy starts it, ended
    /// when its group has no process left.
    /// The caller adds the run returned under the job's id.
    pub(super) fn adopt(&mut self, env: &Env, spec: &JobSpec, group: GroupPath) -> Result<JobRun> {
        env.freezer
            .freeze(&group)
            .with_context(|| format!("freezing adopted job {}", group.as_str()))?;
        let mut run = JobRun::new(group.clone(), spec, Launch::default());
        run.adopted = true;
        self.teardown.jobs.push((group, None));
        Ok(run)
    }

    /// Leave every job alive for a later process to adopt: thawed, its
    /// background paging stopped; no process killed, no cgroup removed.
    pub(super) fn release(&mut self, env: &Env) {
        for j in self.runs.values_mut() {
            j.stop_paging();
            if j.proc.is_some() || (j.adopted && j.result.finish_s.is_none()) {
                if let Err(e) = env.freezer.thaw(&j.group) {
                    tracing::error!("thawing {} on release: {e:#}", j.group.as_str());
                }
            }
        }
        self.teardown.keep = true;
    }

    /// Start a job in its cgroup (an adopted one: thaw it), with
    /// `allowance` bytes written to its allowance file; times are read
    /// from the node's clock `t0`.
    pub(super) fn start(
        &mut self,
        env: &Env,
        job: JobId,
        allowance: u64,
        t0: Instant,
    ) -> Result<()> {
        let i = job.index();
        if self.runs[job].cancelled {
            anyhow::bail!("cancelled before it started");
        }
        if self.runs[job].adopted {
            return self.resume_adopted(env, job, t0);
        }
        let group = self.runs[job].group.clone();
        env.backend
            .create(&group)
            .with_context(|| format!("creating cgroup {}", group.as_str()))?;
        self.teardown.jobs.push((group.clone(), None));
        let launched = match self.launch(env, job, allowance, &group) {
            Ok(l) => l,
            Err(e) => {
                // What its start made goes with it, now: its group (and
                // anything that joined it), not at the node's end. A node
                // that fails to start thousands of jobs holds no group.
                match procs::kill_and_remove(env.backend.as_ref(), &group, None) {
                    Ok(()) => self.teardown.jobs.retain(|(g, _)| *g != group),
                    Err(r) => tracing::error!("cleanup after a failed start: {r:#}"),
                }
                return Err(e);
            }
        };
        // Started: its environment (up to a user's budget of it) is of no
        // more use.
        self.runs[job].launch.env = BTreeMap::new();
        if let Some(entry) = self.teardown.jobs.iter_mut().find(|(g, _)| *g == group) {
            entry.1 = Some(launched.pid);
        }
        // The counters attach now, before the first process has passed its
        // gate (it cannot without the SIGCONT `open_gates` sends once it
        // has stopped there), so they inherit into what it forks. Nothing
        // here waits for the gate: a first process slow to reach it (an
        // LD_PRELOAD constructor that sleeps) holds no one else's turn.
        let now = t0.elapsed();
        let others = env.backend.procs_recursive(&group).unwrap_or_default();
        self.account
            .started(i, launched.pid, &others, now.as_secs_f64());
        if self.runs[job].launch.gate {
            self.gates.push(Gate {
                job,
                next: Instant::now(),
                every: GATE_POLL_MIN,
            });
        }
        let j = &mut self.runs[job];
        j.proc = Some(launched);
        j.running_since = Some(now);
        j.result.start_s = Some(now.as_secs_f64());
        env.say(format!(
            "{:>7.1}s  {} started",
            now.as_secs_f64(),
            j.result.name
        ));
        Ok(())
    }

    /// A job's first process, started in `group` (made) with its log
    /// directory and its allowance file written.
    fn launch(
        &mut self,
        env: &Env,
        job: JobId,
        allowance: u64,
        group: &GroupPath,
    ) -> Result<Launched> {
        let name = self.runs[job].result.name.clone();
        let mut launch = self.runs[job].launch.clone();
        let log_dir = launch
            .log_dir
            .clone()
            .unwrap_or_else(|| env.logs.join(&name));
        // Programs that adapt their memory (memadapt) read how much they
        // may keep here; the samples keep it current.
        let allowance_file = launch
            .allowance
            .clone()
            .unwrap_or_else(|| log_dir.join("allowance"));
        std::fs::create_dir_all(&log_dir)
            .and_then(|()| write_allowance(&allowance_file, allowance))
            .with_context(|| format!("writing {}", allowance_file.display()))?;
        launch
            .env
            .insert(ALLOWANCE_ENV.into(), allowance_file.display().to_string());
        self.runs[job].allowance = Some((allowance_file, allowance));
        let launched = procs::launch(env.backend.as_ref(), group, &launch, &log_dir)?;
        self.runs[job].result.log_dir = Some(log_dir.display().to_string());
        Ok(launched)
    }

    /// An adopted job's first turn: thawed, watched through one of its
    /// processes (the wait for any job's end wakes on it).
    fn resume_adopted(&mut self, env: &Env, job: JobId, t0: Instant) -> Result<()> {
        let group = self.runs[job].group.clone();
        env.freezer
            .thaw(&group)
            .with_context(|| format!("resuming adopted job {}", group.as_str()))?;
        let pids = env.backend.procs_recursive(&group).unwrap_or_default();
        // A first process still stopped at its gate (`Launch::gate`): the
        // service that started it ended before it continued it. Every
        // stopped process of the job is continued, not only the shim: a
        // process its user stopped on purpose is continued too, as the
        // signal freezer's thaw does (docs/daemon.md says so).
        for &p in &pids {
            if process::state(p) == Some('T') {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGCONT,
                );
            }
        }
        let launched = watch_one(&pids)
            .with_context(|| format!("adopted job {} has ended", group.as_str()))?;
        let now = t0.elapsed();
        let j = &mut self.runs[job];
        j.proc = Some(launched);
        j.running_since = Some(now);
        j.result.start_s = Some(now.as_secs_f64());
        Ok(())
    }

    /// How `job` ended, if its first process has exited (an adopted
    /// job: if its group is empty); None while it runs or has not started.
    pub(super) fn exited(&mut self, env: &Env, job: JobId) -> Option<Exit> {
        let p = self.runs[job].proc.as_ref()?;
        if self.runs[job].adopted {
            let watched = p.pidfd.is_alive();
            let pids = env
                .backend
                .procs_recursive(&self.runs[job].group)
                .unwrap_or_default();
            if !pids.is_empty() {
                if !watched {
                    // The process watched ended before the others: watch
                    // another, or the wait would not wait.
                    if let Some(other) = watch_one(&pids) {
                        self.runs[job].proc = Some(other);
                    }
                }
                return None;
            }
            return Some(Exit {
                code: None,
                signal: None,
                cpu_s: 0.0,
                system_s: 0.0,
                major_faults: 0,
            });
        }
        if p.pidfd.is_alive() {
            return None;
        }
        process::try_reap(p.pid)
    }

    /// Record a job's end: its interval closed, its cgroup's last counters
    /// read, whatever it left behind killed with its cgroup, its result
    /// and time account (over the node's `switches` so far) filled in.
    pub(super) fn finish_job(
        &mut self,
        env: &Env,
        job: JobId,
        exit: Exit,
        now: Duration,
        switches: &[Switch],
    ) {
        self.stop_interval(job, now);
        let backend = env.backend.as_ref();
        let j = &mut self.runs[job];
        j.proc = None;
        j.stop_paging();
        // Read the cgroup's counters before it goes: they include processes
        // the job did not reap itself.
        if let Ok(stat) = backend.memory_stat(&j.group) {
            j.last = stat;
        }
        // Daemons or orphans the job left behind go with it (and count in
        // its account).
        let leftovers = backend.procs_recursive(&j.group).unwrap_or_default();
        if let Err(e) = procs::kill_and_remove(backend, &j.group, None) {
            tracing::error!("{e:#}");
        } else {
            self.teardown.jobs.retain(|(g, _)| *g != j.group);
        }
        let r = &mut j.result;
        if let Some(since) = j.boosted_since.take() {
            r.boosted_s += now.as_secs_f64() - since;
        }
        r.finish_s = Some(now.as_secs_f64());
        r.completion_s = Some(now.as_secs_f64() - r.arrival_s);
        r.exit_code = exit.code;
        r.signal = exit.signal;
        r.cpu_s = exit.cpu_s;
        r.system_cpu_s = Some(exit.system_s);
        r.major_faults = j.last.major_faults.max(exit.major_faults);
        r.major_faults_per_min = r
            .start_s
            .map(|start| now.as_secs_f64() - start)
            .filter(|d| *d > 0.0)
            .map(|d| r.major_faults as f64 * 60.0 / d);
        if !r.ok() {
            r.stderr_tail = r
                .log_dir
                .as_ref()
                .and_then(|d| tail(&PathBuf::from(d).join("stderr")));
        }
        let status = match (exit.code, exit.signal) {
            _ if j.cancelled => "cancelled".to_string(),
            (Some(0), _) => "ok".to_string(),
            (Some(c), _) => format!("FAILED with exit code {c}"),
            (_, Some(s)) => format!("KILLED by signal {s}"),
            _ => "ended".to_string(),
        };
        let name = r.name.clone();
        env.say(format!(
            "{:>7.1}s  {name} finished: {status}",
            now.as_secs_f64()
        ));
        let (i, j) = (job.index(), &self.runs[job]);
        let account = (self.account).finish(i, &j.result, &leftovers, &self.timeline, switches);
        self.runs[job].result.account = account;
    }

    /// A job that could not start (or was cancelled before it did) ends
    /// now, without having run.
    pub(super) fn finish_unstarted(&mut self, job: JobId, now: Duration) {
        let r = &mut self.runs[job].result;
        r.finish_s = Some(now.as_secs_f64());
        r.completion_s = Some(now.as_secs_f64() - r.arrival_s);
    }

    pub(super) fn stop_interval(&mut self, job: JobId, now: Duration) {
        if let Some(since) = self.runs[job].running_since.take() {
            self.runs[job].ran += now.saturating_sub(since);
            let name = self.name(job).to_string();
            self.timeline.push(Interval {
                job: name,
                start_s: since.as_secs_f64(),
                end_s: now.as_secs_f64(),
            });
        }
    }

    /// At the end: close what is still open; jobs still alive end now.
    pub(super) fn close(&mut self, end: Duration) {
        for j in self.runs.values_mut() {
            if let Some(since) = j.running_since.take() {
                self.timeline.push(Interval {
                    job: j.result.name.clone(),
                    start_s: since.as_secs_f64(),
                    end_s: end.as_secs_f64(),
                });
            }
            if j.proc.is_some() {
                j.result.error = Some("stopped: memgang was interrupted".into());
                j.result.major_faults = j.last.major_faults;
                // Its rate until then: a run stopped because it thrashed is
                // what Fig. 8's statistics are about.
                j.result.major_faults_per_min = j
                    .result
                    .start_s
                    .map(|start| end.as_secs_f64() - start)
                    .filter(|d| *d > 0.0)
                    .map(|d| j.last.major_faults as f64 * 60.0 / d);
            }
        }
    }
}

/// One of `pids` to watch an adopted job's end through (the first still
/// there to open).
fn watch_one(pids: &[i32]) -> Option<Launched> {
    pids.iter().find_map(|&pid| {
        let pidfd = memgang_linux::pidfd::PidFd::try_open(pid).ok()??;
        Some(Launched { pid, pidfd })
    })
}

/// The last lines of a job's stderr, read from its last 64 KiB only: the
/// file is the job's to fill, and a service reading all of it would hold
/// whatever the job wrote.
fn tail(path: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL_BYTES: u64 = 64 << 10;
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))
        .ok()?;
    let mut bytes = Vec::new();
    f.take(TAIL_BYTES).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
    (!tail.is_empty()).then_some(tail)
}

impl Jobs {
    /// Locked memory (a cgroup's `unevictable`, last sampled) of the jobs
    /// `state` has suspended, but `job`.
    fn pinned_elsewhere(&self, job: JobId, state: &State) -> u64 {
        self.runs
            .iter()
            .filter(|(id, _)| *id != job && state.job(*id).status == JobStatus::Suspended)
            .map(|(_, j)| j.last.unevictable_bytes.unwrap_or(0))
            .sum()
    }

    /// Why `job`, which a switch is to run, must stay stopped: the
    /// memory suspended jobs hold locked leaves no room for it
    /// ([`capacity::check_pinned`]: no page-out moves locked pages, and it
    /// would thrash against them).
    pub(super) fn hold(&self, job: JobId, state: &State, pool_memory: u64) -> Option<String> {
        // At least its declared size: a job held since its start (frozen)
        // measures a working set of almost nothing, and would be let run
        // into the locked memory at its next resume.
        let mem = &self.runs.get(job)?.mem;
        let ws = mem.working_set().max(mem.declared.unwrap_or(0));
        capacity::check_pinned(ws, self.pinned_elsewhere(job, state), pool_memory)
    }

    /// A job just started that is to be held: stopped at once (a gated
    /// first process has not passed its gate yet).
    pub(super) fn hold_started(&mut self, env: &Env, job: JobId, why: String) -> Result<()> {
        let group = self.runs[job].group.clone();
        env.freezer
            .freeze(&group)
            .with_context(|| format!("holding job {}", self.name(job)))?;
        let pids = env.backend.procs_recursive(&group).unwrap_or_default();
        self.account.frozen(job.index(), &pids, None);
        let j = &mut self.runs[job];
        j.running_since = None;
        j.held = Some(why);
        Ok(())
    }

    /// Run the held jobs that now fit beside the locked memory of the
    /// suspended ones (one ended, or runs again); forget the hold of a
    /// job the policy has stopped meanwhile.
    pub(super) fn release_held(&mut self, env: &Env, state: &State, pool_memory: u64, t0: Instant) {
        let held: Vec<JobId> = (self.runs.iter())
            .filter(|(_, j)| j.held.is_some())
            .map(|(id, _)| id)
            .collect();
        for job in held {
            if state.job(job).status != JobStatus::Running || self.runs[job].proc.is_none() {
                self.runs[job].held = None;
                continue;
            }
            if let Some(why) = self.hold(job, state, pool_memory) {
                self.runs[job].held = Some(why);
                continue;
            }
            if let Err(e) = env.freezer.thaw(&self.runs[job].group) {
                tracing::error!("running held job {}: {e:#}", self.name(job));
                continue;
            }
            self.account.thawed(job.index());
            let j = &mut self.runs[job];
            j.held = None;
            j.running_since = Some(t0.elapsed());
            env.say(format!(
                "{:>7.1}s  {} runs: the locked memory it waited for is gone",
                t0.elapsed().as_secs_f64(),
                j.result.name
            ));
        }
    }
}

/// How often a gate is looked at: at once, then less often the longer
/// the first process takes to reach it (a shim reaches it in a
/// millisecond; one held up by its user's LD_PRELOAD may take forever).
const GATE_POLL_MIN: Duration = Duration::from_millis(1);
const GATE_POLL_MAX: Duration = Duration::from_millis(100);

/// A job whose first process is to be continued once it has stopped
/// itself at its gate (`Launch::gate`), and when to look next.
pub(super) struct Gate {
    pub(super) job: JobId,
    pub(super) next: Instant,
    pub(super) every: Duration,
}

impl Jobs {
    /// Continue each first process that has stopped at its gate; forget
    /// the gates of jobs that ended or whose process is gone. A job the
    /// policy suspended meanwhile is continued at its resume (its gate
    /// waits: a SIGCONT would undo a signal freezer's stop).
    pub(super) fn open_gates(&mut self) {
        let now = Instant::now();
        let runs = &self.runs;
        self.gates.retain_mut(|g| {
            let Some(j) = runs.get(g.job) else {
                return false;
            };
            let Some(p) = &j.proc else {
                return false;
            };
            if now < g.next || j.running_since.is_none() {
                return true;
            }
            match process::state(p.pid) {
                Some('T') => {
                    if let Err(e) = p.pidfd.send_signal(libc::SIGCONT) {
                        tracing::warn!("continuing job {} at its gate: {e}", j.result.name);
                    }
                    false
                }
                Some('Z') | None => false,
                _ => {
                    g.every = (g.every * 2).min(GATE_POLL_MAX);
                    g.next = now + g.every;
                    true
                }
            }
        });
    }

    /// When a gate is to be looked at next, if one waits.
    pub(super) fn next_gate(&self) -> Option<Instant> {
        self.gates.iter().map(|g| g.next).min()
    }
}
