//! Paging prevention (paper 003 §3): a node service starts a job only when
//! the memory it has promised to the jobs it admitted, plus this job, fits
//! in the pool plus the swap the jobs may use. The policy may then page a
//! suspended job out, but it never has to page out more than swap holds,
//! so no scheduling decision leaves the kernel an OOM kill as its only way
//! out.
//!
//! Strict first come, first served: a job never overtakes an earlier one
//! that waits for memory (no backfilling), so a big job cannot starve.
//! Pure: the caller measures swap and hands in numbers.

use crate::capacity::{self, Set};
pub use crate::capacity::{refuse, Capacity};
use crate::units::format_bytes;

/// What [`admit`] decided for the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission<K> {
    /// Start these now, in this order.
    pub admit: Vec<K>,
    /// The rest of the queue, in order, each with why it waits.
    pub wait: Vec<(K, String)>,
}

/// Decide which queued jobs (`(key, declared bytes)`, in submission order)
/// start, given the declared bytes of the jobs admitted and still alive
/// (`held`): a job starts when it and every job admitted before it fit by
/// the capacity model, a switch's exchange included
/// ([`capacity::job_may_start`]). `cap` is what paging prevention may
/// promise ([`Capacity::promised`]).
pub fn admit<K: Copy>(queue: &[(K, u64)], held: &[u64], cap: &Capacity) -> Admission<K> {
    let mut out = Admission {
        admit: Vec::new(),
        wait: Vec::new(),
    };
    let mut set = Set::of(held);
    let mut blocked = false;
    for (i, &(key, bytes)) in queue.iter().enumerate() {
        let with = set.with(bytes);
        if !blocked && capacity::job_may_start(set, bytes, cap) {
            set = with;
            out.admit.push(key);
            continue;
        }
        let reason = if blocked {
            format!("waits its turn: {i} earlier job(s) wait for memory (first come, first served)")
        } else {
            format!(
                "waits for memory: needs {}, {} of {} promised to running jobs, {} more for a \
                 switch's exchange; {}",
                format_bytes(bytes),
                format_bytes(set.sum),
                format_bytes(cap.total()),
                format_bytes(capacity::exchange(with, cap)),
                cap.describe()
            )
        };
        blocked = true;
        out.wait.push((key, reason));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{experiment_may_run, Holding};
    use crate::PolicyKind;

    const G: u64 = 1 << 30;

    fn cap(pool: u64, swap: u64) -> Capacity {
        Capacity::measured(pool, swap, 0, 0, 0)
    }

    #[test]
    fn admits_while_pool_plus_swap_holds_the_jobs_and_their_exchange() {
        // 1G + 1G + an exchange of 1G fits in 1G + 2G; a third does not.
        let a = admit(&[(1, G), (2, G), (3, G)], &[], &cap(G, 2 * G));
        assert_eq!(a.admit, vec![1, 2]);
        assert_eq!(a.wait.len(), 1);
        assert!(
            a.wait[0]
                .1
                .starts_with("waits for memory: needs 1G, 2G of 3G")
                && a.wait[0].1.contains("1G more for a switch's exchange"),
            "{}",
            a.wait[0].1
        );
        // Without swap for the exchange, the second waits.
        let a = admit(&[(1, G), (2, G)], &[], &cap(G, G));
        assert_eq!(a.admit, vec![1]);
    }

    #[test]
    fn strict_fcfs_no_backfilling() {
        // 3 would fit beside 1 but must not overtake 2.
        let a = admit(&[(1, G), (2, 3 * G), (3, G / 2)], &[], &cap(G, 2 * G));
        assert_eq!(a.admit, vec![1]);
        assert_eq!(a.wait.iter().map(|w| w.0).collect::<Vec<_>>(), vec![2, 3]);
        assert!(a.wait[1].1.contains("first come, first served"));
    }

    #[test]
    fn memory_held_by_running_jobs_counts() {
        // Held 2G (two jobs of 1G) and 1G more, exchange 1G: 4G.
        let a = admit(&[(1, G)], &[G, G], &cap(G, 3 * G));
        assert_eq!(a.admit, vec![1]);
        let a = admit(&[(1, G)], &[G, G + 1], &cap(G, 3 * G));
        assert!(a.admit.is_empty());
    }

    const M: u64 = 1 << 20;

    /// How memgangd judges a set of jobs submitted at once to an idle
    /// node: refused at submit, some wait, or all start at once.
    #[derive(Debug, PartialEq)]
    enum Daemon {
        Refused,
        SomeWait,
        AllStart,
    }

    /// As memgangd does: each job through [`refuse`] at submit, then the
    /// queue through [`admit`], both against what it may promise.
    fn memgangd(jobs: &[u64], room: Capacity, policy: PolicyKind) -> Daemon {
        let cap = room.promised(Holding::of(policy));
        if jobs.iter().any(|&b| refuse(b, &cap).is_some()) {
            return Daemon::Refused;
        }
        let queue: Vec<(usize, u64)> = jobs.iter().copied().enumerate().collect();
        if admit(&queue, &[], &cap).wait.is_empty() {
            Daemon::AllStart
        } else {
            Daemon::SomeWait
        }
    }

    /// As `memgang run` does (`check_pool`): true if the experiment runs.
    fn memgang_run(jobs: &[u64], room: Capacity, policy: PolicyKind) -> bool {
        experiment_may_run(jobs, &room, Holding::of(policy)).is_ok()
    }

    /// The same job sets through both entry points' rules: alike under
    /// the switching policies, and different only where the module doc of
    /// `capacity` says they mean to be (cosched: memgangd prevents paging;
    /// batch: memgangd promises memory from admission).
    #[test]
    fn memgang_run_and_memgangd_judge_alike_but_where_they_mean_to_differ() {
        use Daemon::*;
        use PolicyKind::*;
        // Pool 256M, swap 320M less the 64M reserve: 512M of room.
        let room = Capacity::measured(256 * M, 320 * M, 0, 0, 64 * M);
        let switching = [Gang, Hybrid, Auto];
        #[rustfmt::skip]
        let table: &[(&[u64], &[PolicyKind], bool, Daemon)] = &[
            // jobs (MiB)     policies    memgang run  memgangd
            (&[100, 100],      &[Batch, Cosched, Gang, Hybrid, Auto], true, AllStart),
            (&[600],           &[Batch, Cosched, Gang, Hybrid, Auto], false, Refused),
            // 420M and 210M read back at a switch: more than 512M.
            (&[210, 210],      &switching, false, SomeWait),
            (&[300],           &switching, true, AllStart),
            (&[100, 100, 100], &switching, true, AllStart),
            // Cosched: memgang run counts swap (it measures the paging),
            // memgangd the pool alone (it prevents it).
            (&[210, 210],      &[Cosched], true, SomeWait),
            (&[300],           &[Cosched], true, Refused),
            (&[100, 100, 100], &[Cosched], true, SomeWait),
            // Batch: one at a time for memgang run; memgangd promises
            // memory from admission, so the second waits in its queue.
            (&[210, 210],      &[Batch], true, SomeWait),
            (&[300],           &[Batch], true, AllStart),
        ];
        for (jobs, policies, run, daemon) in table {
            let jobs: Vec<u64> = jobs.iter().map(|m| m * M).collect();
            for &p in *policies {
                let why = format!("{jobs:?} under {p}");
                assert_eq!(memgang_run(&jobs, room, p), *run, "memgang run, {why}");
                assert_eq!(memgangd(&jobs, room, p), *daemon, "memgangd, {why}");
            }
        }
        // Over every small node and set: what memgangd starts at once,
        // memgang run runs; under the switching policies the converse too.
        for pool in 1..8u64 {
            for swap in 0..8u64 {
                let room = Capacity::measured(pool, swap, 0, 0, 1);
                for a in 1..8u64 {
                    for b in 0..8u64 {
                        for c in 0..8u64 {
                            let jobs: Vec<u64> = [a, b, c].into_iter().filter(|&j| j > 0).collect();
                            for p in PolicyKind::ALL {
                                let run = memgang_run(&jobs, room, p);
                                let all = memgangd(&jobs, room, p) == AllStart;
                                let why = format!("pool {pool} swap {swap} {jobs:?} {p}");
                                assert!(run || !all, "{why}");
                                if Holding::of(p) == Holding::Parked {
                                    assert_eq!(run, all, "{why}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn reserve_and_foreign_swap_are_not_usable() {
        let c = Capacity {
            pool_bytes: G,
            swap_total_bytes: 4 * G,
            swap_used_elsewhere_bytes: G,
            swap_reserve_bytes: G,
        };
        assert_eq!(c.total(), 3 * G);
        assert_eq!(admit(&[(1, 3 * G)], &[], &c).admit, vec![1]);
        assert!(admit(&[(1, 3 * G + 1)], &[], &c).admit.is_empty());
    }
}
