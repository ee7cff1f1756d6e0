//! Stopping and resuming a job's whole process tree.
//!
//! Two mechanisms behind [`Freezer`]:
//!
//! * [`CgroupFreezer`]: the kernel's cgroup freezer (v1 `freezer.state`, v2
//!   `cgroup.freeze`). Atomic for the whole group, processes forked while
//!   freezing included, and invisible to the job. Preferred.
//! * [`SignalFreezer`]: SIGSTOP / SIGCONT to every process of the group, for
//!   nodes without a usable cgroup freezer. Visible to the job (a parent
//!   sees its children stop, SIGCONT handlers run) and racy by nature, so it
//!   rescans until the group is stable and signals only through pidfds.

use crate::cgroup::{CgroupBackend, GroupPath, FREEZE_TIMEOUT};
use crate::counters::process_state;
use crate::error::{Error, Result};
use crate::pidfd::PidFd;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stop and resume all processes of a group.
pub trait Freezer: Send + Sync + std::fmt::Debug {
    /// "cgroup-freezer" or "signals" (goes into results and logs).
    fn name(&self) -> &'static str;
    /// Return once every process of the group is stopped.
    fn freeze(&self, group: &GroupPath) -> Result<()>;
    fn thaw(&self, group: &GroupPath) -> Result<()>;
    /// Whether the group is stopped now (for the trace: "frozen" or
    /// "running").
    fn is_frozen(&self, group: &GroupPath) -> Result<bool>;
}

/// The kernel's cgroup freezer, through [`CgroupBackend::set_frozen`].
#[derive(Debug)]
pub struct CgroupFreezer(pub Arc<dyn CgroupBackend>);

impl Freezer for CgroupFreezer {
    fn name(&self) -> &'static str {
        "cgroup-freezer"
    }

    fn freeze(&self, group: &GroupPath) -> Result<()> {
        self.0.set_frozen(group, true)
    }

    fn thaw(&self, group: &GroupPath) -> Result<()> {
        self.0.set_frozen(group, false)
    }

    fn is_frozen(&self, group: &GroupPath) -> Result<bool> {
        self.0.is_frozen(group)
    }
}

/// SIGSTOP / SIGCONT to every process of the group and its subgroups.
///
/// Freezing repeats "list the group, signal what is new" until a listing,
/// taken after every signalled process has actually stopped, shows nothing
/// new: a process forked during the scan is caught by a later listing, and
/// once all are stopped none can fork. Each pid is opened as a pidfd and
/// only signalled if a listing taken *after* the open still shows it in the
/// group, so a pid recycled by an unrelated process is never signalled.
#[derive(Debug)]
pub struct SignalFreezer {
    backend: Arc<dyn CgroupBackend>,
    timeout: Duration,
}

/// Sleep between checks that signalled processes have stopped. A SIGSTOP
/// takes effect at the process's next return to user space, typically
/// within microseconds; 2 ms keeps the wait short without spinning.
const STOP_POLL: Duration = Duration::from_millis(2);

impl SignalFreezer {
    pub fn new(backend: Arc<dyn CgroupBackend>) -> Self {
        SignalFreezer {
            backend,
            timeout: FREEZE_TIMEOUT,
        }
    }

    /// Give up on a freeze after `timeout` (default [`FREEZE_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn members(&self, group: &GroupPath) -> Result<BTreeSet<i32>> {
        Ok(self.backend.procs_recursive(group)?.into_iter().collect())
    }

    /// Members of the group that still need a SIGSTOP: never signalled, or
    /// signalled but since exited while the pid is listed again by a live
    /// process (a recycled pid that joined the group). A listed process that
    /// has exited (a zombie) needs nothing.
    fn unstopped(&self, group: &GroupPath, stopped: &HashMap<i32, PidFd>) -> Result<Vec<i32>> {
        let mut out = Vec::new();
        for pid in self.members(group)? {
            match stopped.get(&pid) {
                Some(fd) if fd.is_alive() => {}
                Some(_) => {
                    if PidFd::try_open(pid)?.is_some_and(|fresh| fresh.is_alive()) {
                        out.push(pid);
                    }
                }
                None => out.push(pid),
            }
        }
        Ok(out)
    }
}

/// Send `sig` to every process of `group` and its subgroups, through
/// pidfds checked against a listing taken after the open, so that a pid
/// recycled by an unrelated process is never signalled. Returns how many
/// processes were signalled.
pub fn signal_group(backend: &dyn CgroupBackend, group: &GroupPath, sig: i32) -> Result<usize> {
    let pids = backend.procs_recursive(group)?;
    Ok(signal_verified(backend, group, &pids, sig)?.len())
}

/// Open pidfds for `pids`, keep those still in the group afterwards, send
/// them `sig`. Returns the handles of the processes signalled.
fn signal_verified(
    backend: &dyn CgroupBackend,
    group: &GroupPath,
    pids: &[i32],
    sig: i32,
) -> Result<Vec<PidFd>> {
    let mut opened = Vec::with_capacity(pids.len());
    for &pid in pids {
        // Gone already: nothing to signal.
        if let Some(fd) = PidFd::try_open(pid)? {
            opened.push(fd);
        }
    }
    if opened.is_empty() {
        return Ok(opened);
    }
    // The check after the open: if `pid` was recycled between listing and
    // open, the new holder is only signalled if it is in the group.
    let members: BTreeSet<i32> = backend.procs_recursive(group)?.into_iter().collect();
    let mut signalled = Vec::with_capacity(opened.len());
    for fd in opened {
        if members.contains(&fd.pid()) && fd.send_signal(sig)? {
            signalled.push(fd);
        }
    }
    Ok(signalled)
}

/// Whether a process sent SIGSTOP has stopped, or cannot run another
/// instruction of its own before it does.
///
/// 'D' (uninterruptible sleep) counts: a stop signal is acted on at the
/// next return to user space, so a process in 'D' with our SIGSTOP pending
/// stops before it runs user code or completes a fork (fork fails with a
/// signal pending and is restarted after the stop). Waiting for 'T' instead
/// would wait forever in two common cases: a parent in vfork(2) whose child
/// we stopped before it exec'd (dash starts every command this way), and a
/// task waiting for a swap-in on a thrashing node, for seconds.
fn has_stopped(fd: &PidFd) -> bool {
    if !fd.is_alive() {
        return true;
    }
    // The pidfd is still live, so the pid still names this process (a pid
    // is only reused after its process is reaped).
    match process_state(fd.pid()) {
        Ok(state) => matches!(state, 'T' | 't' | 'D' | 'Z' | 'X'),
        Err(_) => !fd.is_alive(),
    }
}

impl Freezer for SignalFreezer {
    fn name(&self) -> &'static str {
        "signals"
    }

    fn freeze(&self, group: &GroupPath) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        // Every process signalled so far, by pid.
        let mut stopped: HashMap<i32, PidFd> = HashMap::new();
        loop {
            let new = self.unstopped(group, &stopped)?;
            if !new.is_empty() {
                for fd in signal_verified(self.backend.as_ref(), group, &new, libc::SIGSTOP)? {
                    stopped.insert(fd.pid(), fd);
                }
            } else if stopped.values().all(has_stopped) {
                // Everyone has really stopped (not merely been sent SIGSTOP:
                // one might have been finishing a fork), so no process can
                // appear any more; a last listing confirms none did since.
                if self.unstopped(group, &stopped)?.is_empty() {
                    return Ok(());
                }
                continue;
            } else {
                std::thread::sleep(STOP_POLL);
            }
            if Instant::now() >= deadline {
                let running: Vec<String> = stopped
                    .values()
                    .filter(|fd| !has_stopped(fd))
                    .map(|fd| format!("{} ({})", fd.pid(), process_state(fd.pid()).unwrap_or('?')))
                    .collect();
                return Err(Error::Unsupported(format!(
                    "stopping cgroup {group} with SIGSTOP: not every process stopped within {:?} \
                     (not stopped: {running:?}; members now: {:?}); thaw it to resume the ones stopped",
                    self.timeout,
                    self.members(group).unwrap_or_default()
                )));
            }
        }
    }

    fn thaw(&self, group: &GroupPath) -> Result<()> {
        // Stopped processes cannot fork, so one listing finds them all.
        let pids: Vec<i32> = self.members(group)?.into_iter().collect();
        signal_verified(self.backend.as_ref(), group, &pids, libc::SIGCONT)?;
        Ok(())
    }

    /// Stopped (state `T` or `t`) is one of its processes at least, and so
    /// is every other live one, or it is in uninterruptible sleep (`D`),
    /// where a pending SIGSTOP stops it before it runs again (see
    /// `has_stopped`). Exited ones (`Z`, `X`, or gone) do not count.
    fn is_frozen(&self, group: &GroupPath) -> Result<bool> {
        let mut any = false;
        for pid in self.members(group)? {
            match process_state(pid) {
                Ok('T' | 't') => any = true,
                Ok('D' | 'Z' | 'X') | Err(_) => {}
                Ok(_) => return Ok(false),
            }
        }
        Ok(any)
    }
}

/// The cgroup freezer when the backend has one and signals are not asked
/// for, else the signal freezer (with a warning saying why).
pub fn choose(backend: Arc<dyn CgroupBackend>, prefer_signals: bool) -> Arc<dyn Freezer> {
    if prefer_signals {
        tracing::info!("freezing jobs with SIGSTOP/SIGCONT, as asked");
        return Arc::new(SignalFreezer::new(backend));
    }
    if backend.can_freeze() {
        return Arc::new(CgroupFreezer(backend));
    }
    tracing::warn!(
        "no cgroup freezer ({}): freezing jobs with SIGSTOP/SIGCONT instead, which jobs can observe",
        backend.describe()
    );
    Arc::new(SignalFreezer::new(backend))
}
