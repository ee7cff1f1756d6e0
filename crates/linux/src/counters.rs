//! Node and process counters memgang samples while jobs run: paging
//! activity (`/proc/vmstat`), memory pressure (PSI, `/proc/pressure/memory`
//! and cgroup v2 `memory.pressure`), swap space (`/proc/meminfo`) and a
//! process's resident and swapped-out memory (`/proc/<pid>/status`).
//!
//! procfs parses the files (see [`crate::proc`]); every reader has a pure
//! `parse` next to its `read`, so the conversions are tested without the
//! kernel.

use crate::error::{Error, Result};
use crate::proc;
use procfs::process::{Stat, Status};
use procfs::{Meminfo, MemoryPressure, PressureRecord};
use std::path::Path;

const VMSTAT: &str = "/proc/vmstat";
const MEMINFO: &str = "/proc/meminfo";
const NODE_MEMORY_PSI: &str = "/proc/pressure/memory";

/// Node-wide paging counters since boot (`/proc/vmstat`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VmStat {
    /// Pages swapped in.
    pub pswpin: u64,
    /// Pages swapped out.
    pub pswpout: u64,
    /// Major page faults (faults that needed I/O, swap-ins among them).
    pub pgmajfault: u64,
}

impl VmStat {
    pub fn read() -> Result<Self> {
        Self::parse(&proc::read_to_string(Path::new(VMSTAT))?)
    }

    pub fn parse(text: &str) -> Result<Self> {
        let path = Path::new(VMSTAT);
        let v: procfs::VmStat = proc::parse(path, text)?;
        let field = |key: &str| {
            let bad = |reason: String| Error::Parse {
                path: path.to_path_buf(),
                content: crate::sysfs::truncate_for_error(text),
                reason,
            };
            let n = v.0.get(key).copied();
            let n = n.ok_or_else(|| bad(format!("no {key:?} field")))?;
            u64::try_from(n).map_err(|_| bad(format!("{key} is negative: {n}")))
        };
        Ok(VmStat {
            pswpin: field("pswpin")?,
            pswpout: field("pswpout")?,
            pgmajfault: field("pgmajfault")?,
        })
    }
}

/// Pressure stall information for memory: the share of time some (or all,
/// "full") non-idle tasks waited for memory. See
/// Documentation/accounting/psi.rst.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Psi {
    /// % of the last 10 s in which at least one task stalled on memory.
    pub some_avg10: f64,
    /// % of the last 10 s in which all non-idle tasks stalled on memory.
    pub full_avg10: f64,
    /// Total stall time, µs since boot (or since the group was made).
    pub some_total_us: u64,
    pub full_total_us: u64,
}

impl Psi {
    /// None if the file is missing (kernel without PSI, cgroup v1) or
    /// unreadable (PSI disabled at boot reads as EOPNOTSUPP): pressure is an
    /// extra signal, its absence is not an error.
    pub fn read(path: &Path) -> Option<Self> {
        proc::read(path).ok().map(Self::from_procfs)
    }

    /// Parse a memory pressure file ("some avg10=.. avg60=.. avg300=..
    /// total=..\nfull ..."; `/proc/pressure/memory` and cgroup v2
    /// `memory.pressure` share the format). None unless it has both lines.
    pub fn parse(text: &str) -> Option<Self> {
        proc::parse(Path::new(NODE_MEMORY_PSI), text)
            .ok()
            .map(Self::from_procfs)
    }

    fn from_procfs(p: MemoryPressure) -> Self {
        Psi {
            some_avg10: avg10(&p.some),
            full_avg10: avg10(&p.full),
            some_total_us: p.some.total,
            full_total_us: p.full.total,
        }
    }

    /// The whole node's memory pressure.
    pub fn node_memory() -> Option<Self> {
        Self::read(Path::new(NODE_MEMORY_PSI))
    }
}

/// procfs holds averages as f32; the kernel prints them with two decimals,
/// so rounding the f64 to those gives back the printed value (1.1, not
/// 1.100000023841858).
fn avg10(r: &PressureRecord) -> f64 {
    (f64::from(r.avg10) * 100.0).round() / 100.0
}

/// Swap space on the node (`/proc/meminfo` SwapTotal and SwapFree).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwapStatus {
    pub total_bytes: u64,
    pub used_bytes: u64,
}

impl SwapStatus {
    pub fn read() -> Result<Self> {
        proc::read(Path::new(MEMINFO)).map(Self::from_procfs)
    }

    pub fn parse(text: &str) -> Result<Self> {
        proc::parse(Path::new(MEMINFO), text).map(Self::from_procfs)
    }

    /// procfs has already converted kB to bytes.
    fn from_procfs(m: Meminfo) -> Self {
        SwapStatus {
            total_bytes: m.swap_total,
            used_bytes: m.swap_total.saturating_sub(m.swap_free),
        }
    }
}

/// The node's RAM (`/proc/meminfo` MemTotal), in bytes.
pub fn memory_total() -> Result<u64> {
    proc::read(Path::new(MEMINFO)).map(|m: Meminfo| m.mem_total)
}

/// The node-wide counters an executor samples, behind an interface so that
/// an executor can be tested with made-up numbers. [`ProcCounters`] reads
/// the kernel's.
pub trait NodeCounters: Send + Sync + std::fmt::Debug {
    /// Paging since boot (`/proc/vmstat`).
    fn vmstat(&self) -> Result<VmStat>;
    /// The node's memory pressure; None without PSI.
    fn memory_pressure(&self) -> Option<Psi>;
    /// Swap space (`/proc/meminfo`).
    fn swap(&self) -> Result<SwapStatus>;
}

/// [`NodeCounters`] from `/proc`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcCounters;

impl NodeCounters for ProcCounters {
    fn vmstat(&self) -> Result<VmStat> {
        VmStat::read()
    }

    fn memory_pressure(&self) -> Option<Psi> {
        Psi::node_memory()
    }

    fn swap(&self) -> Result<SwapStatus> {
        SwapStatus::read()
    }
}

/// Resident and swapped-out memory of a process, in bytes, from
/// `/proc/<pid>/status` (`VmRSS`, `VmSwap`). Both are 0 for processes
/// without a user address space (kernel threads, zombies).
pub fn process_rss_swap(pid: i32) -> Result<(u64, u64)> {
    let status: Status = proc::read(&proc_pid_file(pid, "status"))?;
    Ok(rss_swap(&status))
}

/// procfs gives these in KiB.
fn rss_swap(s: &Status) -> (u64, u64) {
    (s.vmrss.unwrap_or(0) * 1024, s.vmswap.unwrap_or(0) * 1024)
}

/// The scheduler state letter of a process (`R`, `S`, `D`, `T` stopped,
/// `t` traced, `Z` zombie, ...), field 3 of `/proc/<pid>/stat`.
pub fn process_state(pid: i32) -> Result<char> {
    let stat: Stat = proc::read(&proc_pid_file(pid, "stat"))?;
    Ok(stat.state)
}

use crate::sysfs::proc_pid_file;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmstat() {
        let text = "nr_free_pages 123\npgpgin 5\npswpin 10\npswpout 20\npgfault 99\npgmajfault 7\n";
        assert_eq!(
            VmStat::parse(text).unwrap(),
            VmStat {
                pswpin: 10,
                pswpout: 20,
                pgmajfault: 7
            }
        );
        let e = VmStat::parse("pswpin 1\n").unwrap_err().to_string();
        assert!(e.contains("/proc/vmstat") && e.contains("pswpout"), "{e}");
        let e = VmStat::parse("pswpin 1\npswpout -2\npgmajfault 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("negative"), "{e}");
        let e = VmStat::parse("pswpin x\n").unwrap_err().to_string();
        assert!(e.contains("/proc/vmstat") && e.contains("pswpin x"), "{e}");
    }

    #[test]
    fn vmstat_of_this_machine() {
        let v = VmStat::read().unwrap();
        assert!(v.pgmajfault < u64::MAX);
    }

    #[test]
    fn psi() {
        let text = "some avg10=1.10 avg60=0.20 avg300=0.00 total=123456\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=6543\n";
        assert_eq!(
            Psi::parse(text),
            Some(Psi {
                // Exactly what the kernel printed, despite procfs's f32.
                some_avg10: 1.1,
                full_avg10: 0.75,
                some_total_us: 123456,
                full_total_us: 6543
            })
        );
        // Memory pressure always has both lines; anything else is not PSI.
        assert_eq!(
            Psi::parse("some avg10=2.00 avg60=0.00 avg300=0.00 total=9\n"),
            None
        );
        assert_eq!(Psi::parse(""), None);
        assert_eq!(
            Psi::parse(
                "some avg10=x avg60=0 avg300=0 total=1\nfull avg10=0 avg60=0 avg300=0 total=1\n"
            ),
            None
        );
        assert_eq!(Psi::read(Path::new("/nonexistent/memory.pressure")), None);
        // Present on kernels with PSI enabled (it is here).
        if Path::new(NODE_MEMORY_PSI).exists() {
            assert!(Psi::node_memory().is_some());
        }
    }

    /// A complete /proc/meminfo (procfs requires the fields every kernel has).
    const MEMINFO_TEXT: &str = "\
MemTotal:        8000000 kB
MemFree:         4000000 kB
MemAvailable:    6000000 kB
Buffers:           13824 kB
Cached:          2851376 kB
SwapCached:            0 kB
Active:           980196 kB
Inactive:        1880952 kB
SwapTotal:       1048576 kB
SwapFree:         786432 kB
Dirty:               168 kB
Writeback:             0 kB
Mapped:            10800 kB
Slab:             161436 kB
Committed_AS:      50784 kB
VmallocTotal:   34359738367 kB
VmallocUsed:       14076 kB
VmallocChunk:          0 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
";

    #[test]
    fn meminfo() {
        assert_eq!(
            SwapStatus::parse(MEMINFO_TEXT).unwrap(),
            SwapStatus {
                total_bytes: 1 << 30,
                used_bytes: 256 << 20
            }
        );
        let e = SwapStatus::parse("MemTotal: 1 kB\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/proc/meminfo") && e.contains("MemTotal"), "{e}");
        let garbled = MEMINFO_TEXT.replace("SwapTotal:       1048576", "SwapTotal: x");
        assert!(SwapStatus::parse(&garbled).is_err());
        let s = SwapStatus::read().unwrap();
        assert!(s.used_bytes <= s.total_bytes);
    }

    fn status_text(vm: &str) -> String {
        format!(
            "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nNgid:\t0\nPid:\t42\nPPid:\t1\n\
             TracerPid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nFDSize:\t64\nGroups:\t \n{vm}\
             Threads:\t1\nSigQ:\t0/96551\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n\
             SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n\
             CapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n"
        )
    }

    fn parse_status(text: &str) -> Status {
        proc::parse(Path::new("/proc/42/status"), text).unwrap()
    }

    #[test]
    fn status_rss_swap() {
        let with_mm =
            status_text("VmSize:\t    3060 kB\nVmRSS:\t    2048 kB\nVmSwap:\t     512 kB\n");
        assert_eq!(rss_swap(&parse_status(&with_mm)), (2 << 20, 512 << 10));
        // Kernel threads and zombies have no Vm* lines.
        assert_eq!(rss_swap(&parse_status(&status_text(""))), (0, 0));
        let (rss, _) = process_rss_swap(std::process::id() as i32).unwrap();
        assert!(rss > 0);
        let e = process_rss_swap(-1).unwrap_err().to_string();
        assert!(e.contains("reading /proc/-1/status"), "{e}");
    }

    #[test]
    fn stat_state() {
        // The command name may contain spaces and ')': the state follows the
        // last ')'.
        let tail = "1 2 3 0 -1 4194304 98 0 0 0 0 0 0 0 20 0 1 0 339045 3133440 390 \
                    18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 1 1 1 1 1 1 1 0";
        let state = |line: String| {
            proc::parse::<Stat>(Path::new("/proc/42/stat"), &line)
                .unwrap()
                .state
        };
        assert_eq!(state(format!("42 (a) b) c) T {tail}\n")), 'T');
        assert_eq!(state(format!("1 (init) S {tail}\n")), 'S');
        assert!(proc::parse::<Stat>(Path::new("/proc/42/stat"), "garbage").is_err());
        // The harness's main thread (whose state /proc/<pid>/stat shows) waits
        // for this test, or runs.
        assert!("RS".contains(process_state(std::process::id() as i32).unwrap()));
        let e = process_state(-1).unwrap_err().to_string();
        assert!(e.contains("reading /proc/-1/stat"), "{e}");
    }
}
