//! Node and process counters memgang samples while jobs run: paging
//! activity (`/proc/vmstat`), memory pressure (PSI, `/proc/pressure/memory`
//! and cgroup v2 `memory.pressure`), swap space (`/proc/meminfo`) and a
//! process's resident and swapped-out memory (`/proc/<pid>/status`).
//!
//! Every file has a pure `parse` next to its `read`, so the formats are
//! tested without the kernel.

use crate::cgroup::{parse_keyed, required};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

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
        let text = std::fs::read_to_string(VMSTAT).map_err(|e| Error::io("reading", VMSTAT, e))?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self> {
        let m = parse_keyed(text);
        let path = Path::new(VMSTAT);
        Ok(VmStat {
            pswpin: required(&m, "pswpin", path, text)?,
            pswpout: required(&m, "pswpout", path, text)?,
            pgmajfault: required(&m, "pgmajfault", path, text)?,
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
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| Self::parse(&t))
    }

    /// Parse "some avg10=.. avg60=.. avg300=.. total=..\nfull ...". A missing
    /// "full" line (CPU pressure on old kernels) counts as zero.
    pub fn parse(text: &str) -> Option<Self> {
        let mut psi = Psi::default();
        let mut have_some = false;
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let kind = fields.next()?;
            let mut avg10 = None;
            let mut total = None;
            for f in fields {
                match f.split_once('=') {
                    Some(("avg10", v)) => avg10 = Some(v.parse::<f64>().ok()?),
                    Some(("total", v)) => total = Some(v.parse::<u64>().ok()?),
                    _ => {}
                }
            }
            match kind {
                "some" => {
                    psi.some_avg10 = avg10?;
                    psi.some_total_us = total?;
                    have_some = true;
                }
                "full" => {
                    psi.full_avg10 = avg10?;
                    psi.full_total_us = total?;
                }
                _ => {}
            }
        }
        have_some.then_some(psi)
    }

    /// The whole node's memory pressure.
    pub fn node_memory() -> Option<Self> {
        Self::read(Path::new(NODE_MEMORY_PSI))
    }
}

/// Swap space on the node (`/proc/meminfo` SwapTotal and SwapFree).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwapStatus {
    pub total_bytes: u64,
    pub used_bytes: u64,
}

impl SwapStatus {
    pub fn read() -> Result<Self> {
        let text =
            std::fs::read_to_string(MEMINFO).map_err(|e| Error::io("reading", MEMINFO, e))?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self> {
        let total = meminfo_bytes(text, "SwapTotal", Path::new(MEMINFO))?;
        let free = meminfo_bytes(text, "SwapFree", Path::new(MEMINFO))?;
        Ok(SwapStatus {
            total_bytes: total,
            used_bytes: total.saturating_sub(free),
        })
    }
}

/// A "Key:   N kB" field of meminfo-style files, in bytes.
fn meminfo_bytes(text: &str, key: &str, path: &Path) -> Result<u64> {
    meminfo_optional(text, key, path)?.ok_or_else(|| Error::Parse {
        path: path.to_path_buf(),
        content: crate::cgroup::truncate_for_error(text),
        reason: format!("no {key:?} field"),
    })
}

fn meminfo_optional(text: &str, key: &str, path: &Path) -> Result<Option<u64>> {
    for line in text.lines() {
        let Some((k, rest)) = line.split_once(':') else {
            continue;
        };
        if k.trim() != key {
            continue;
        }
        let mut it = rest.split_whitespace();
        let bad = |reason: &str| Error::Parse {
            path: path.to_path_buf(),
            content: line.to_string(),
            reason: reason.into(),
        };
        let n: u64 = it
            .next()
            .ok_or_else(|| bad("no value"))?
            .parse()
            .map_err(|_| bad("value is not a number"))?;
        return match it.next() {
            Some("kB") => Ok(Some(n * 1024)),
            None => Ok(Some(n)),
            Some(_) => Err(bad("unknown unit (expected kB)")),
        };
    }
    Ok(None)
}

/// Resident and swapped-out memory of a process, in bytes, from
/// `/proc/<pid>/status` (`VmRSS`, `VmSwap`). Both are 0 for processes
/// without a user address space (kernel threads, zombies).
pub fn process_rss_swap(pid: i32) -> Result<(u64, u64)> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
    parse_rss_swap(&text, &path)
}

pub(crate) fn parse_rss_swap(text: &str, path: &Path) -> Result<(u64, u64)> {
    Ok((
        meminfo_optional(text, "VmRSS", path)?.unwrap_or(0),
        meminfo_optional(text, "VmSwap", path)?.unwrap_or(0),
    ))
}

/// The scheduler state letter of a process (`R`, `S`, `D`, `T` stopped,
/// `t` traced, `Z` zombie, ...), field 3 of `/proc/<pid>/stat`.
pub fn process_state(pid: i32) -> Result<char> {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
    parse_stat_state(&text).ok_or_else(|| Error::Parse {
        path,
        content: crate::cgroup::truncate_for_error(&text),
        reason: "no state field after the command name".into(),
    })
}

/// The command name (field 2) is in parentheses and may itself contain
/// spaces and ')', so the state is found after the *last* ')'.
fn parse_stat_state(text: &str) -> Option<char> {
    let rest = &text[text.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

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
    }

    #[test]
    fn vmstat_of_this_machine() {
        let v = VmStat::read().unwrap();
        assert!(v.pgmajfault < u64::MAX);
    }

    #[test]
    fn psi() {
        let text = "some avg10=1.50 avg60=0.20 avg300=0.00 total=123456\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=6543\n";
        assert_eq!(
            Psi::parse(text),
            Some(Psi {
                some_avg10: 1.5,
                full_avg10: 0.75,
                some_total_us: 123456,
                full_total_us: 6543
            })
        );
        let some_only = "some avg10=2.00 avg60=0.00 avg300=0.00 total=9\n";
        assert_eq!(
            Psi::parse(some_only),
            Some(Psi {
                some_avg10: 2.0,
                some_total_us: 9,
                ..Psi::default()
            })
        );
        assert_eq!(Psi::parse(""), None);
        assert_eq!(Psi::parse("some avg10=x total=1\n"), None);
        assert_eq!(
            Psi::parse("full avg10=1.00 avg60=0 avg300=0 total=1\n"),
            None
        );
        assert_eq!(Psi::read(Path::new("/nonexistent/memory.pressure")), None);
    }

    #[test]
    fn meminfo() {
        let text = "MemTotal:        8000000 kB\nSwapCached:            0 kB\nSwapTotal:       1048576 kB\nSwapFree:         786432 kB\n";
        assert_eq!(
            SwapStatus::parse(text).unwrap(),
            SwapStatus {
                total_bytes: 1 << 30,
                used_bytes: 256 << 20
            }
        );
        assert!(SwapStatus::parse("MemTotal: 1 kB\n")
            .unwrap_err()
            .to_string()
            .contains("SwapTotal"));
        assert!(SwapStatus::parse("SwapTotal: x kB\nSwapFree: 0 kB\n").is_err());
        SwapStatus::read().unwrap();
    }

    #[test]
    fn status_rss_swap() {
        let text = "Name:\tx\nVmRSS:\t    2048 kB\nVmSwap:\t     512 kB\n";
        assert_eq!(
            parse_rss_swap(text, Path::new("s")).unwrap(),
            (2 << 20, 512 << 10)
        );
        assert_eq!(
            parse_rss_swap("Name:\tkthreadd\n", Path::new("s")).unwrap(),
            (0, 0)
        );
        let (rss, _) = process_rss_swap(std::process::id() as i32).unwrap();
        assert!(rss > 0);
    }

    #[test]
    fn stat_state() {
        assert_eq!(parse_stat_state("42 (a) b) c) T 1 2 3"), Some('T'));
        assert_eq!(parse_stat_state("1 (init) S 0"), Some('S'));
        assert_eq!(parse_stat_state("garbage"), None);
        // The harness's main thread (whose state /proc/<pid>/stat shows) waits
        // for this test, or runs.
        assert!("RS".contains(process_state(std::process::id() as i32).unwrap()));
    }
}
