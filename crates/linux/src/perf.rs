//! Counters of a job (`perf_event_open`): hardware ones (cycles,
//! instructions, last-level-cache and data-TLB read misses) where the
//! machine has a PMU, and the kernel's software ones (page faults, context
//! switches, CPU migrations, CPU and task clocks) everywhere, of a process
//! and every thread and child it makes after they are attached
//! (`inherit`).
//!
//! nix has no `perf_event_open`; the call is one syscall with a 64-byte
//! attribute block (`PERF_ATTR_SIZE_VER0`, which every kernel accepts), so
//! it is written here rather than pulling a crate for it. Where the kernel
//! refuses (a virtual machine without a PMU, `perf_event_paranoid`), the
//! reason is returned so that results can say it.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_HW_CACHE: u32 = 3;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_HW_CACHE_LL: u64 = 2;
const PERF_COUNT_HW_CACHE_DTLB: u64 = 3;
const PERF_COUNT_HW_CACHE_OP_READ: u64 = 0;
const PERF_COUNT_HW_CACHE_RESULT_MISS: u64 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;
const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;
const PERF_COUNT_SW_PAGE_FAULTS_MIN: u64 = 5;
const PERF_COUNT_SW_PAGE_FAULTS_MAJ: u64 = 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
/// `inherit` and `exclude_hv` of the attribute's flag bits.
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER0`.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// The events memgang counts per job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Cycles,
    Instructions,
    LlcMisses,
    DtlbMisses,
    /// The kernel's software events, which need no PMU. Clocks in ns.
    TaskClock,
    CpuClock,
    PageFaults,
    MinorFaults,
    MajorFaults,
    ContextSwitches,
    CpuMigrations,
}

impl Event {
    pub const HARDWARE: [Event; 4] = [
        Event::Cycles,
        Event::Instructions,
        Event::LlcMisses,
        Event::DtlbMisses,
    ];
    pub const SOFTWARE: [Event; 7] = [
        Event::TaskClock,
        Event::CpuClock,
        Event::PageFaults,
        Event::MinorFaults,
        Event::MajorFaults,
        Event::ContextSwitches,
        Event::CpuMigrations,
    ];

    fn attr(self) -> (u32, u64) {
        let cache = |c: u64| {
            c | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)
        };
        match self {
            Event::Cycles => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
            Event::Instructions => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
            Event::LlcMisses => (PERF_TYPE_HW_CACHE, cache(PERF_COUNT_HW_CACHE_LL)),
            Event::DtlbMisses => (PERF_TYPE_HW_CACHE, cache(PERF_COUNT_HW_CACHE_DTLB)),
            Event::TaskClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
            Event::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK),
            Event::PageFaults => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS),
            Event::MinorFaults => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN),
            Event::MajorFaults => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ),
            Event::ContextSwitches => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES),
            Event::CpuMigrations => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Event::Cycles => "cycles",
            Event::Instructions => "instructions",
            Event::LlcMisses => "LLC read misses",
            Event::DtlbMisses => "dTLB read misses",
            Event::TaskClock => "task-clock",
            Event::CpuClock => "cpu-clock",
            Event::PageFaults => "page-faults",
            Event::MinorFaults => "minor-faults",
            Event::MajorFaults => "major-faults",
            Event::ContextSwitches => "context-switches",
            Event::CpuMigrations => "cpu-migrations",
        }
    }
}

/// Counters attached to a process tree.
pub struct Counters {
    events: Vec<(Event, File)>,
}

impl Counters {
    /// Count `events` in process `pid` and what it starts from now on, on
    /// every CPU. Err: why the kernel refused (the first event it refused).
    pub fn attach(pid: i32, events: &[Event]) -> Result<Counters, String> {
        let mut out = Vec::new();
        for &e in events {
            let (kind, config) = e.attr();
            let attr = Attr {
                kind,
                size: std::mem::size_of::<Attr>() as u32,
                config,
                read_format: PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
                flags: FLAG_INHERIT | FLAG_EXCLUDE_HV,
                ..Attr::default()
            };
            // SAFETY: perf_event_open reads `attr` (size given in it) and
            // returns a new descriptor or -1; no memory is kept.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    &attr as *const Attr,
                    pid,
                    -1i32,
                    -1i32,
                    PERF_FLAG_FD_CLOEXEC,
                )
            };
            if fd < 0 {
                let err = std::io::Error::last_os_error();
                let why = match err.raw_os_error() {
                    Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => format!(
                        "not available on this machine (no PMU): the kernel has no {} counter: {err}",
                        e.name()
                    ),
                    Some(libc::EACCES) | Some(libc::EPERM) => format!(
                        "perf_event_open refused ({err}); see kernel.perf_event_paranoid"
                    ),
                    _ => format!("perf_event_open for {}: {err}", e.name()),
                };
                return Err(why);
            }
            // SAFETY: a descriptor the call just returned, owned by nobody else.
            out.push((e, File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) })));
        }
        Ok(Counters { events: out })
    }

    /// Count `events` in `pid` as [`attach`](Self::attach) does, and also
    /// in `others`, processes already started (whose work `pid`'s counters
    /// do not inherit): those that could not be attached (gone, say) are
    /// left out. A job started through a wrapper (memgangd's shim) may have
    /// forked its command before the counters attach: counted on the shim
    /// alone, its counters missed the command's work.
    pub fn attach_tree(pid: i32, others: &[i32], events: &[Event]) -> Result<Counters, String> {
        let mut all = Counters::attach(pid, events)?;
        for &p in others.iter().filter(|&&p| p != pid) {
            if let Ok(c) = Counters::attach(p, events) {
                all.events.extend(c.events);
            }
        }
        Ok(all)
    }

    /// Each event's count so far, summed over the processes attached and
    /// scaled up where the kernel multiplexed it (ran it part of the
    /// time). Counts of children are added when they exit: read after the
    /// tree has ended for its total.
    pub fn read(&self) -> Vec<(Event, u64)> {
        let mut sums: Vec<(Event, u64)> = Vec::new();
        for (e, n) in self.read_each() {
            match sums.iter_mut().find(|(k, _)| *k == e) {
                Some((_, total)) => *total += n,
                None => sums.push((e, n)),
            }
        }
        sums
    }

    fn read_each(&self) -> Vec<(Event, u64)> {
        self.events
            .iter()
            .filter_map(|(e, fd)| {
                let mut bytes = [0u8; 24];
                (&*fd).read_exact(&mut bytes).ok()?;
                let word =
                    |k: usize| u64::from_ne_bytes(bytes[8 * k..8 * k + 8].try_into().unwrap());
                let buf = [word(0), word(1), word(2)];
                let [value, enabled, running] = buf;
                let scaled = if running > 0 && running < enabled {
                    (value as f64 * enabled as f64 / running as f64) as u64
                } else {
                    value
                };
                Some((*e, scaled))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wrapper whose command already runs (memgangd's shim): counted on
    /// the wrapper alone, the command's work is missed; on the tree, it
    /// is counted.
    #[test]
    fn processes_already_started_are_counted_on_the_tree() {
        let spawn = |script: &str| {
            std::process::Command::new("sh")
                .args(["-c", script])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let mut wrapper = spawn("read x");
        let mut command = spawn("read x; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done");
        let (w, c) = (wrapper.id() as i32, command.id() as i32);
        let alone = Counters::attach(w, &Event::SOFTWARE).unwrap();
        let tree = Counters::attach_tree(w, &[w, c], &Event::SOFTWARE).unwrap();
        drop(command.stdin.take());
        command.wait().unwrap();
        drop(wrapper.stdin.take());
        wrapper.wait().unwrap();
        let clock = |c: &Counters| {
            c.read()
                .into_iter()
                .find(|r| r.0 == Event::TaskClock)
                .unwrap()
                .1
        };
        assert_eq!(tree.read().len(), Event::SOFTWARE.len());
        assert!(
            clock(&tree) > 1_000_000 + clock(&alone),
            "tree {} alone {}",
            clock(&tree),
            clock(&alone)
        );
    }

    #[test]
    fn a_child_and_its_threads_are_counted_after_they_exit() {
        // The software clock exists everywhere; the hardware events share
        // the code path and are refused with a reason where absent.
        // The shell waits for its child `sleep`, so it is switched out at
        // least once whenever the counters attach (its `read` may see the
        // end of its input before they do, and never wait).
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "read x; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; sleep 0.01",
            ])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let counters = Counters::attach(child.id() as i32, &Event::SOFTWARE).unwrap();
        drop(child.stdin.take());
        child.wait().unwrap();
        let read = counters.read();
        assert_eq!(read.len(), Event::SOFTWARE.len(), "{read:?}");
        let get = |e: Event| read.iter().find(|r| r.0 == e).unwrap().1;
        // The loop runs for milliseconds at least; the shell faults pages
        // in, and so does its child.
        assert!(get(Event::TaskClock) > 1_000_000, "{read:?}");
        assert!(get(Event::PageFaults) > 0, "{read:?}");
        assert!(
            get(Event::PageFaults) >= get(Event::MinorFaults),
            "{read:?}"
        );
        assert!(get(Event::ContextSwitches) > 0, "{read:?}");
        match Counters::attach(std::process::id() as i32, &Event::HARDWARE) {
            Ok(c) => assert_eq!(c.read().len(), 4),
            Err(why) => assert!(why.contains("perf_event_open") || why.contains("counter")),
        }
    }
}
