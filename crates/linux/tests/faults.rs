//! Demand faults timed on the real kernel (`memgang_linux::faults`), with a
//! test swap file: a random order faults one page at a time, an in-order
//! one reads ahead, and the pass leaves no cgroup behind. Needs root (swapon,
//! cgroups, process_madvise on another process); `scripts/test` runs it.

mod common;

use common::*;
use memgang_linux::cgroup::CgroupBackend;
use memgang_linux::faults::{self, Order};
use memgang_linux::swap::TestSwap;
use std::sync::Arc;

/// Enough pages that the counts are not noise, little enough for CI.
const BYTES: u64 = 64 * MIB;

/// The machine's memory backend (v1 or v2) and a test swap file of `swap` bytes, or None (skipped,
/// loudly) without root.
fn setup(test: &str, swap: u64) -> Option<(Arc<dyn CgroupBackend>, TestSwap)> {
    let backend = memory_backend(test, "needs root (swapon, cgroups, process_madvise)")?;
    Some((backend, TestSwap::new(swap).expect("a test swap file")))
}

fn assert_no_fault_groups(backend: &dyn CgroupBackend) {
    let left: Vec<_> = backend
        .list_groups("memgang-faults-")
        .unwrap()
        .into_iter()
        .map(|g| g.to_string())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
#[ignore = "needs root: swapon, cgroups, process_madvise on another process (scripts/test runs it as root)"]
fn random_faults_read_one_page_and_in_order_faults_read_ahead() {
    let Some((backend, _swap)) = setup(
        "random_faults_read_one_page_and_in_order_faults_read_ahead",
        4 * BYTES,
    ) else {
        return;
    };
    let pages = BYTES / memgang_linux::paging::page_size();

    let random = faults::measure(backend.as_ref(), BYTES, Order::Random, 7).unwrap();
    assert_eq!(random.pages, pages);
    assert!(random.swapped_bytes >= BYTES * 95 / 100, "{random:?}");
    // Each page its own fault: the kernel's readahead finds no pattern.
    assert!(random.major_faults >= pages * 9 / 10, "{random:?}");
    assert!(random.pages_per_fault() < 1.5, "{random:?}");

    let seq = faults::measure(backend.as_ref(), BYTES, Order::InOrder, 7).unwrap();
    // Swap readahead (2^page-cluster pages, 8 by default): far fewer
    // faults than pages, each reading several.
    assert!(seq.major_faults <= pages / 2, "{seq:?}");
    assert!(seq.pages_per_fault() >= 2.0, "{seq:?}");
    assert!(
        seq.wall < random.wall,
        "reading ahead beats page-at-a-time: {seq:?} {random:?}"
    );

    assert_no_fault_groups(backend.as_ref());
}

/// Two jobs taking turns in a pool of one and a half: each resume lacks
/// what the other's turn took, faults at least that back, and some of its
/// faults take its own pages (the pool's reclaim walks its group too).
#[test]
#[ignore = "needs root: swapon, cgroups (scripts/test runs it as root)"]
fn a_resumed_job_faults_back_what_it_lacks_and_some_of_its_own() {
    let Some((backend, _swap)) =
        // Room for both jobs twice over: the swap cache keeps the slots of
        // pages faulted back until swap is half full, and with too little
        // the pool's reclaim has nowhere to put the pages it takes.
        setup("a_resumed_job_faults_back_what_it_lacks_and_some_of_its_own", 8 * BYTES)
    else {
        return;
    };
    // Larger than BYTES: under small pools the OOM killer takes a job now
    // and then (own_share measures again, at most five times).
    let bytes = 2 * BYTES;
    let pool = (bytes as f64 * faults::POOL_PER_JOB) as u64;
    let o = faults::own_share(backend.as_ref(), bytes, pool, 3).unwrap();
    assert!((1..=5).contains(&o.attempts), "{o:?}");
    assert_eq!(o.turns.len(), 6, "{o:?}");
    assert_eq!(o.counted().len(), 4, "{o:?}");
    // Every resume lacks something (the other's turn took it) and runs a
    // pass; the pool holds one job and a half, so a resume lacks about
    // half a job on average. A single turn can lack more (pages in the
    // swap cache count as out and come back as minor faults), so the
    // faults are held against the lack over the turns: a share above 0.
    for t in o.counted() {
        assert!(t.lacked_bytes > 0 && t.passes >= 1, "{o:?}");
    }
    let lack = o.lack_share();
    assert!(lack > 0.25 && lack < 0.75, "{lack} {o:?}");
    let share = o.share();
    assert!(share > 0.0 && share < 0.95, "{share} {o:?}");
    assert_no_fault_groups(backend.as_ref());
}

#[test]
fn a_pass_over_nothing_is_refused_with_what_to_give() {
    // Refused before any cgroup is touched: a hierarchy that is not there.
    let backend =
        memgang_linux::cgroup::v1::V1::new(std::path::PathBuf::from("/nonexistent/memgang"), None);
    let e = faults::measure(&backend, 0, Order::Random, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("between one page"), "{e}");
    let e = faults::own_share(&backend, 4096, 8192, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("between 16 pages"), "{e}");
    // A pool that holds both jobs (or not one) measures nothing.
    for pool in [BYTES, 2 * BYTES] {
        let e = faults::own_share(&backend, BYTES, pool, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than one job and less than two"), "{e}");
    }
}
