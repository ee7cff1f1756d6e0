//! Working sets (paper 004 §4.2, Fig. 5-7) and what they say about a pool
//! and a quantum. Pure: windows measured elsewhere come in, figures out.

use serde::{Deserialize, Serialize};

/// One measured window: the bytes a job touched within `tau_s`, and the
/// bytes it had touched since it began (resident or swapped) at its end.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub tau_s: f64,
    pub start_s: f64,
    pub end_s: f64,
    pub referenced_bytes: u64,
    pub touched_bytes: u64,
}

/// A job's working set at one τ over its run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TauSummary {
    pub tau_s: f64,
    pub windows: usize,
    pub mean_bytes: u64,
    pub max_bytes: u64,
    /// max_bytes over the most the job had touched: near 1, the job needs
    /// all its data within τ (no locality to page on demand from).
    pub max_share_of_touched: f64,
}

/// Per τ (ascending), the windows' mean and largest working set.
pub fn summarize(windows: &[Window]) -> Vec<TauSummary> {
    let touched = windows.iter().map(|w| w.touched_bytes).max().unwrap_or(0);
    let mut taus: Vec<f64> = windows.iter().map(|w| w.tau_s).collect();
    taus.sort_by(f64::total_cmp);
    taus.dedup();
    taus.into_iter()
        .map(|tau| {
            let at: Vec<u64> = windows
                .iter()
                .filter(|w| w.tau_s == tau)
                .map(|w| w.referenced_bytes)
                .collect();
            let max = at.iter().copied().max().unwrap_or(0);
            TauSummary {
                tau_s: tau,
                windows: at.len(),
                mean_bytes: at.iter().sum::<u64>() / at.len().max(1) as u64,
                max_bytes: max,
                max_share_of_touched: if touched > 0 {
                    max as f64 / touched as f64
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// Room beyond the working sets: page tables, the kernel's per-cgroup
/// memory and a job's growth between measurement and run. 10% is what the
/// runtime's pools have needed beyond their jobs' resident sets.
pub const HEADROOM: f64 = 0.10;

/// Paper 000's target: switching costs at most 5% of a quantum.
pub const SWITCH_SHARE: f64 = 0.05;

/// No quantum shorter than this: below a second, sampling (100 ms) and the
/// freezer's latency are a large part of it.
pub const MIN_QUANTUM_S: f64 = 1.0;

/// What a set of measured jobs needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Suggestion {
    /// Pool that holds every job's working set at once: cosched (or auto)
    /// runs them side by side without paging.
    pub cosched_pool_bytes: u64,
    /// Pool that holds the largest job's working set: gang runs one at a
    /// time, paging only at switches.
    pub gang_pool_bytes: u64,
    /// Quantum over which a switch (the largest working set out, the next
    /// in) costs at most `SWITCH_SHARE`.
    pub quantum_s: f64,
    /// The switch time that quantum is made from, s.
    pub switch_s: f64,
    /// The τ whose working sets were used (the largest measured).
    pub tau_s: f64,
}

/// The pool and quantum for jobs whose working sets (one summary list per
/// job, from [`summarize`]) are given, on a device that writes and reads
/// `write_bps` and `read_bps` in bulk. `None` without measurements.
pub fn suggest(jobs: &[Vec<TauSummary>], write_bps: f64, read_bps: f64) -> Option<Suggestion> {
    // The longest window is the closest to a quantum: what a job must find
    // resident to run a quantum without faults.
    let tau = jobs
        .iter()
        .flat_map(|j| j.iter().map(|s| s.tau_s))
        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))?;
    let wss: Vec<u64> = jobs
        .iter()
        .map(|j| {
            j.iter()
                .filter(|s| s.tau_s == tau)
                .map(|s| s.max_bytes)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let with_room = |b: u64| (b as f64 * (1.0 + HEADROOM)).ceil() as u64;
    let largest = wss.iter().copied().max().unwrap_or(0);
    let switch_s = largest as f64 / write_bps.max(1.0) + largest as f64 / read_bps.max(1.0);
    Some(Suggestion {
        cosched_pool_bytes: with_room(wss.iter().sum()),
        gang_pool_bytes: with_room(largest),
        quantum_s: (switch_s / SWITCH_SHARE).max(MIN_QUANTUM_S).ceil(),
        switch_s,
        tau_s: tau,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(tau_s: f64, referenced: u64, touched: u64) -> Window {
        Window {
            tau_s,
            start_s: 0.0,
            end_s: tau_s,
            referenced_bytes: referenced,
            touched_bytes: touched,
        }
    }

    #[test]
    fn summaries_are_per_tau_with_the_share_of_touched() {
        let s = summarize(&[
            w(0.5, 300, 1000),
            w(0.032, 100, 900),
            w(0.5, 500, 1000),
            w(0.032, 50, 1000),
        ]);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].tau_s, s[0].windows, s[0].mean_bytes, s[0].max_bytes),
            (0.032, 2, 75, 100)
        );
        assert_eq!((s[1].mean_bytes, s[1].max_bytes), (400, 500));
        assert!((s[1].max_share_of_touched - 0.5).abs() < 1e-12);
        assert!(summarize(&[]).is_empty());
    }

    #[test]
    fn suggestion_holds_the_largest_set_for_gang_and_all_for_cosched() {
        let gib = 1u64 << 30;
        let a = summarize(&[w(0.032, gib / 4, gib), w(0.512, gib, gib)]);
        let b = summarize(&[w(0.512, gib / 2, gib)]);
        // 1 GiB out at 100 MiB/s and in at 200 MiB/s: 10.24 s + 5.12 s.
        let s = suggest(&[a, b], 100.0 * (1 << 20) as f64, 200.0 * (1 << 20) as f64).unwrap();
        assert_eq!(s.tau_s, 0.512);
        assert_eq!(s.gang_pool_bytes, (gib as f64 * 1.1).ceil() as u64);
        assert_eq!(s.cosched_pool_bytes, (1.5 * gib as f64 * 1.1).ceil() as u64);
        assert!((s.switch_s - 15.36).abs() < 1e-9, "{s:?}");
        assert_eq!(s.quantum_s, 308.0);
        assert_eq!(suggest(&[], 1.0, 1.0), None);
        // A tiny job still gets a quantum the sampling can see.
        let tiny = summarize(&[w(0.5, 4096, 4096)]);
        assert_eq!(suggest(&[tiny], 1e9, 1e9).unwrap().quantum_s, MIN_QUANTUM_S);
    }
}
