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

use crate::units::format_bytes;

/// The memory jobs may hold between them, as measured now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// The pool's memory limit.
    pub pool_bytes: u64,
    /// Swap space of the node.
    pub swap_total_bytes: u64,
    /// Swap in use by anything but the admitted jobs (other processes on
    /// the node): not ours to count on.
    pub swap_used_elsewhere_bytes: u64,
    /// Swap kept back for the rest of the node (configured).
    pub swap_reserve_bytes: u64,
}

impl Capacity {
    /// Swap the jobs may fill.
    pub fn swap_usable(&self) -> u64 {
        self.swap_total_bytes
            .saturating_sub(self.swap_used_elsewhere_bytes)
            .saturating_sub(self.swap_reserve_bytes)
    }

    /// Everything the admitted jobs may hold at once.
    pub fn total(&self) -> u64 {
        self.pool_bytes.saturating_add(self.swap_usable())
    }

    fn describe(&self) -> String {
        format!(
            "pool {} + usable swap {} (swap {} - used elsewhere {} - reserve {})",
            format_bytes(self.pool_bytes),
            format_bytes(self.swap_usable()),
            format_bytes(self.swap_total_bytes),
            format_bytes(self.swap_used_elsewhere_bytes),
            format_bytes(self.swap_reserve_bytes),
        )
    }
}

/// A job that could never run here: refused at submission.
pub fn refuse(job_bytes: u64, cap: &Capacity) -> Option<String> {
    // Against the whole swap, not what is free now: other processes' swap
    // use comes and goes, the pool and the device do not.
    let most = cap
        .pool_bytes
        .saturating_add(cap.swap_total_bytes.saturating_sub(cap.swap_reserve_bytes));
    (job_bytes > most).then(|| {
        format!(
            "the job declares {} but this node can never hold more than {} (pool {} + swap {} - reserve {}); \
             declare less memory with --memory, or ask the administrator for a bigger pool or swap",
            format_bytes(job_bytes),
            format_bytes(most),
            format_bytes(cap.pool_bytes),
            format_bytes(cap.swap_total_bytes),
            format_bytes(cap.swap_reserve_bytes),
        )
    })
}

/// What [`admit`] decided for the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission<K> {
    /// Start these now, in this order.
    pub admit: Vec<K>,
    /// The rest of the queue, in order, each with why it waits.
    pub wait: Vec<(K, String)>,
}

/// Decide which queued jobs (`(key, declared bytes)`, in submission order)
/// start, given the memory `held` by the jobs admitted and still alive.
pub fn admit<K: Copy>(queue: &[(K, u64)], held: u64, cap: &Capacity) -> Admission<K> {
    let mut out = Admission {
        admit: Vec::new(),
        wait: Vec::new(),
    };
    let total = cap.total();
    let mut held = held;
    let mut blocked = false;
    for (i, &(key, bytes)) in queue.iter().enumerate() {
        if !blocked && held.saturating_add(bytes) <= total {
            held += bytes;
            out.admit.push(key);
            continue;
        }
        let reason = if blocked {
            format!("waits its turn: {i} earlier job(s) wait for memory (first come, first served)")
        } else {
            format!(
                "waits for memory: needs {}, {} of {} promised to running jobs; {}",
                format_bytes(bytes),
                format_bytes(held),
                format_bytes(total),
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
        Capacity {
            pool_bytes: pool,
            swap_total_bytes: swap,
            swap_used_elsewhere_bytes: 0,
            swap_reserve_bytes: 0,
        }
    }

    #[test]
    fn admits_while_pool_plus_swap_holds_the_jobs() {
        let a = admit(&[(1, G), (2, G), (3, G)], 0, &cap(G, G));
        assert_eq!(a.admit, vec![1, 2]);
        assert_eq!(a.wait.len(), 1);
        assert!(
            a.wait[0].1.starts_with("waits for memory: needs 1G"),
            "{}",
            a.wait[0].1
        );
    }

    #[test]
    fn strict_fcfs_no_backfilling() {
        // 3 would fit beside 1 but must not overtake 2.
        let a = admit(&[(1, G), (2, 2 * G), (3, G / 2)], 0, &cap(G, G));
        assert_eq!(a.admit, vec![1]);
        assert_eq!(a.wait.iter().map(|w| w.0).collect::<Vec<_>>(), vec![2, 3]);
        assert!(a.wait[1].1.contains("first come, first served"));
    }

    #[test]
    fn memory_held_by_running_jobs_counts() {
        let a = admit(&[(1, G)], 2 * G, &cap(G, 2 * G));
        assert_eq!(a.admit, vec![1]);
        let a = admit(&[(1, G)], 2 * G + 1, &cap(G, 2 * G));
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
        assert_eq!(admit(&[(1, 3 * G)], 0, &c).admit, vec![1]);
        assert!(admit(&[(1, 3 * G + 1)], 0, &c).admit.is_empty());
        // More foreign swap than the device: nothing usable, no underflow.
        let c = Capacity {
            swap_used_elsewhere_bytes: 9 * G,
            ..c
        };
        assert_eq!(c.total(), G);
    }

    #[test]
    fn refuses_only_what_could_never_fit() {
        let c = Capacity {
            pool_bytes: G,
            swap_total_bytes: 2 * G,
            swap_used_elsewhere_bytes: 2 * G,
            swap_reserve_bytes: G / 2,
        };
        assert_eq!(refuse(G + G + G / 2, &c), None);
        let msg = refuse(G + G + G / 2 + 1, &c).unwrap();
        assert!(msg.contains("--memory"), "{msg}");
    }
}
