//! Switch arithmetic: how much memory a switch must free for an incoming
//! job, how much of a job's record a page-in may bring back, and the
//! working-set estimate both start from. Pure, so that the runtime (with
//! counters read from cgroups) and the simulator (with its model's bytes)
//! compute a switch the same way.

/// The memory a job is expected to want when it next runs: what it had
/// resident when it was last suspended (paper 000 §3.2: what it kept in
/// memory over its last quantum), else what it declared, else nothing
/// known.
pub fn working_set(last_suspended: Option<u64>, declared: Option<u64>) -> u64 {
    last_suspended.or(declared).unwrap_or(0)
}

/// Bytes an incoming job is short of: `want` plus `margin`, less what it
/// has `resident` and what the pool has `free`. The runtime's margin
/// covers what a real job needs beyond its working set (page tables,
/// per-CPU charge caches, pages touched anew); the simulator's memory is
/// exact bytes and uses none.
pub fn shortfall(want: u64, resident: u64, free: u64, margin: u64) -> u64 {
    want.saturating_add(margin)
        .saturating_sub(resident.saturating_add(free))
}

/// Bytes of a job's records a page-in may bring back now: what the pool
/// has free (`pool` less `used`) less `margin`, plus what the job already
/// `holds` (its resident and swap-cache pages, which its record covers
/// too and which come back without I/O). A bulk page-in past this fills
/// the pool with pages under read that reclaim cannot take (docs/design.md).
pub fn page_in_budget(pool: u64, used: u64, holds: u64, margin: u64) -> u64 {
    pool.saturating_sub(used)
        .saturating_sub(margin)
        .saturating_add(holds)
}

/// Memory a running job may keep, to tell programs that adapt their own
/// memory (memadapt): the pool less `margin` and what the `others`
/// running beside it hold.
pub fn allowance(pool: u64, others: u64, margin: u64) -> u64 {
    pool.saturating_sub(margin).saturating_sub(others)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_prefers_what_the_job_kept() {
        assert_eq!(working_set(Some(5), Some(9)), 5);
        assert_eq!(working_set(None, Some(9)), 9);
        assert_eq!(working_set(None, None), 0);
    }

    #[test]
    fn shortfall_counts_what_is_there_and_what_is_free() {
        // Wants 100 + 10, has 30, 50 free: 30 short.
        assert_eq!(shortfall(100, 30, 50, 10), 30);
        assert_eq!(shortfall(100, 30, 500, 10), 0);
        assert_eq!(shortfall(u64::MAX, 0, 0, 10), u64::MAX);
    }

    #[test]
    fn an_allowance_is_what_the_others_leave() {
        assert_eq!(allowance(1000, 300, 100), 600);
        assert_eq!(allowance(1000, 3000, 100), 0);
    }

    #[test]
    fn a_page_in_fits_in_free_memory_and_what_the_job_holds() {
        assert_eq!(page_in_budget(1000, 700, 50, 100), 250);
        // A full pool: only what the job holds.
        assert_eq!(page_in_budget(1000, 1200, 50, 100), 50);
    }
}
