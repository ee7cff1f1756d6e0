//! Switch arithmetic: how much memory a switch must free for an incoming
//! job (sized by what it will touch when the jobs' working sets fit the
//! pool together, [`room_for`]), how much of a job's record a page-in may
//! bring back, and the working-set estimate both start from. Pure, so that the runtime (with
//! counters read from cgroups) and the simulator (with its model's bytes)
//! compute a switch the same way.

/// The memory a job is expected to want when it next runs: what it had
/// resident when it was last suspended (paper 000 §3.2: what it kept in
/// memory over its last quantum), else what it declared, else nothing
/// known.
pub fn working_set(last_suspended: Option<u64>, declared: Option<u64>) -> u64 {
    last_suspended.or(declared).unwrap_or(0)
}

/// What is known of a job's memory at a switch, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// What it referenced over its last quantum: its working set at τ =
    /// the quantum (paper 004 §4.2), measured up to its suspension.
    pub touched: Option<u64>,
    /// What it had resident when it was last suspended.
    pub kept: Option<u64>,
    pub declared: Option<u64>,
}

impl Estimate {
    /// What it is expected to touch when it next runs: what it touched
    /// over its last quantum (no more than it kept), else what it kept or
    /// declared ([`working_set`]).
    pub fn touches(self) -> u64 {
        match (self.touched, self.kept) {
            (Some(t), Some(k)) => t.min(k),
            (Some(t), None) => t,
            (None, kept) => working_set(kept, self.declared),
        }
    }
}

/// The working set a switch makes room for when it brings `job` in
/// (issue 47): `others` is what the other jobs holding memory in the pool
/// are expected to touch ([`Estimate::touches`], summed), `pool` the
/// pool's bytes, `margin` what a real job needs beyond its working set.
///
/// When the job's working set and the others' fit the pool together, the
/// jobs fit by phases (hpcc: each phase uses less than the peak) and only
/// what the job will touch is made room for: the rest of the others'
/// memory stays in place, as the kernel's LRU leaves it, instead of going
/// out and coming back at every switch (so/ao/ai ended 6% after lru,
/// docs/realapps.md). When they do not fit, every switch moves a working
/// set anyway, and paging out and in all the job kept in bulk beats
/// faulting it in: the room is what it kept, as before. A job touched
/// since its last suspension in a way not measured (no `touched`) gets
/// what it kept or declared.
pub fn room_for(job: Estimate, others: u64, pool: u64, margin: u64) -> u64 {
    match job.touched {
        Some(_) if job.touches().saturating_add(others).saturating_add(margin) <= pool => {
            job.touches()
        }
        _ => working_set(job.kept, job.declared),
    }
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
    fn room_is_what_the_job_touches_when_the_working_sets_fit() {
        let mib = 1u64 << 20;
        // hpcc's pair in a 512 MiB pool: each kept 300 MiB at its
        // suspension but touched 150 in its quantum.
        let b = Estimate {
            touched: Some(150 * mib),
            kept: Some(300 * mib),
            declared: Some(320 * mib),
        };
        assert_eq!(b.touches(), 150 * mib);
        assert_eq!(room_for(b, 150 * mib, 512 * mib, 32 * mib), 150 * mib);
        // The other touched 350: together they do not fit, every switch
        // moves a working set, and the room is all it kept.
        assert_eq!(room_for(b, 350 * mib, 512 * mib, 32 * mib), 300 * mib);
        // Not measured: what it kept, else declared.
        let k = Estimate { touched: None, ..b };
        assert_eq!(room_for(k, 0, 512 * mib, 32 * mib), 300 * mib);
        let d = Estimate {
            declared: Some(320 * mib),
            ..Estimate::default()
        };
        assert_eq!(room_for(d, 0, 512 * mib, 32 * mib), 320 * mib);
        // Touched more than it kept (pages evicted under it in its
        // quantum): no more than it kept is known to come back.
        let over = Estimate {
            touched: Some(400 * mib),
            kept: Some(300 * mib),
            declared: None,
        };
        assert_eq!(over.touches(), 300 * mib);
        assert_eq!(room_for(over, u64::MAX, 512 * mib, 32 * mib), 300 * mib);
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
