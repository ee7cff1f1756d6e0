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
/// ([`capacity::fits`]).
pub fn admit<K: Copy>(queue: &[(K, u64)], held: &[u64], cap: &Capacity) -> Admission<K> {
    let mut out = Admission {
        admit: Vec::new(),
        wait: Vec::new(),
    };
    let mut set = Set::of(held);
    let mut blocked = false;
    for (i, &(key, bytes)) in queue.iter().enumerate() {
        let with = set.with(bytes);
        if !blocked && capacity::fits(with, cap) {
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

    const G: u64 = 1 << 30;

    fn cap(pool: u64, swap: u64) -> Capacity {
        Capacity::measured(pool, swap, 0, 0, 0, true)
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
