//! cgroup v1 on the real kernel: limits, membership, freezer, memory
//! accounting, reclaim, protection and teardown. Needs root and a v1 memory
//! hierarchy; skips loudly otherwise. Run with `--test-threads=1`: the
//! reclaim tests enable a test swap, which changes what the OOM test sees.

mod common;

use common::*;
use memgang_linux::cgroup::{CgroupBackend, GroupPath, MemoryStat};
use memgang_linux::counters;
use memgang_linux::freeze;
use memgang_linux::swap::TestSwap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Swap for the reclaim and protection tests: they page out at most the
/// 256 MiB one job holds, so half of it is spare.
const TEST_SWAP: u64 = 512 * MIB;
/// How long touching (or paging out) a few hundred MiB may take on a slow
/// CI disk before the test calls it stuck.
const SETTLE: Duration = Duration::from_secs(60);

fn backend(test: &str) -> Option<Arc<dyn CgroupBackend>> {
    v1_backend(test, "needs root to create cgroups")
}

#[test]
#[ignore = "needs root: creates cgroups, swapon (scripts/test runs it as root)"]
fn v1_pool_job_limits_membership_freeze_and_stats() {
    let Some(backend) = backend("v1_pool_job_limits_membership_freeze_and_stats") else {
        return;
    };
    let pool = test_group("v1");
    let job = pool.join("job-a").unwrap();
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![pool.clone(), job.clone()];

    backend.create(&pool).unwrap();
    backend.create(&pool).unwrap(); // idempotent
    backend.set_memory_limit(&pool, Some(64 * MIB)).unwrap();
    assert_eq!(backend.memory_limit(&pool).unwrap(), Some(64 * MIB));
    backend.create(&job).unwrap();
    assert_eq!(
        backend.memory_limit(&job).unwrap(),
        None,
        "a new group is unlimited"
    );
    backend.set_memory_limit(&job, Some(48 * MIB)).unwrap();
    backend.set_memory_limit(&job, None).unwrap();
    assert_eq!(backend.memory_limit(&job).unwrap(), None);

    // A process that touches 32 MiB, and a CPU burner.
    let alloc = fork_allocator(backend.as_ref(), &job, 32 * MIB as usize);
    guard.children.push(alloc);
    let burner = spawn_in(
        backend.as_ref(),
        &job,
        Command::new("sh").args(["-c", "while :; do :; done"]),
    );
    guard.children.push(burner);

    assert!(
        eventually(Duration::from_secs(10), || backend
            .memory_stat(&job)
            .is_ok_and(|s| s.anon_bytes >= 30 * MIB)),
        "allocator's memory never showed up: {:?}",
        backend.memory_stat(&job)
    );
    let stat = backend.memory_stat(&job).unwrap();
    assert!(stat.usage_bytes >= stat.anon_bytes, "{stat:?}");
    assert!(stat.usage_bytes <= 64 * MIB, "{stat:?}");
    let pool_stat = backend.memory_stat(&pool).unwrap();
    assert!(
        pool_stat.anon_bytes >= 30 * MIB,
        "pool figures include the job: {pool_stat:?}"
    );
    let (rss, _swap) = memgang_linux::counters::process_rss_swap(alloc).unwrap();
    assert!(rss >= 30 * MIB, "rss {rss}");

    let mut procs = backend.procs(&job).unwrap();
    procs.sort();
    let mut expect = vec![alloc, burner];
    expect.sort();
    assert_eq!(procs, expect);
    assert!(backend.procs(&pool).unwrap().is_empty());
    assert_eq!(backend.procs_recursive(&pool).unwrap(), expect);

    // Cgroup freezer through the Freezer interface.
    assert!(backend.can_freeze());
    let freezer = freeze::choose(backend.clone(), false);
    assert_eq!(freezer.name(), "cgroup-freezer");
    freezer.freeze(&job).unwrap();
    assert!(backend.is_frozen(&job).unwrap());
    for &pid in &expect {
        let s = state(pid).unwrap();
        assert_ne!(s, 'R', "pid {pid} runs while frozen");
    }
    let before = cpu_ticks(burner);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cpu_ticks(burner), before, "a frozen process used CPU");
    freezer.thaw(&job).unwrap();
    assert!(!backend.is_frozen(&job).unwrap());
    assert!(
        eventually(Duration::from_secs(5), || cpu_ticks(burner) > before),
        "thawed burner never ran"
    );

    // Leftover listing, as `memgang cleanup` uses it.
    assert_eq!(
        backend.list_groups(pool.as_str()).unwrap(),
        vec![pool.clone()]
    );
    assert_eq!(backend.list_children(&pool).unwrap(), vec![job.clone()]);

    // Removing a group with processes fails and says why.
    let e = backend.remove(&pool).unwrap_err().to_string();
    assert!(e.contains("job-a") && e.contains("still in it"), "{e}");

    guard.kill_all();
    assert!(backend.procs_recursive(&pool).unwrap().is_empty());
    backend.remove(&pool).unwrap();
    assert!(!backend.exists(&pool) && !backend.exists(&job));
    backend.remove(&pool).unwrap(); // already gone: fine
}

#[test]
#[ignore = "needs root: creates cgroups, swapon (scripts/test runs it as root)"]
fn v1_limit_is_enforced() {
    let Some(backend) = backend("v1_limit_is_enforced") else {
        return;
    };
    let have_swap =
        memgang_linux::counters::SwapStatus::read().is_ok_and(|s| s.total_bytes > s.used_bytes);
    if skip_unless(
        !have_swap,
        "v1_limit_is_enforced",
        "swap is on; the group would swap instead of hitting OOM",
    ) {
        return;
    }
    let pool = test_group("v1-oom");
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![pool.clone()];
    backend.create(&pool).unwrap();
    backend.set_memory_limit(&pool, Some(16 * MIB)).unwrap();
    let pid = fork_allocator(backend.as_ref(), &pool, 64 * MIB as usize);
    guard.children.push(pid);
    let mut status = 0;
    // SAFETY: blocking wait on our own child, which the OOM killer ends.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    let read = |f: &str| std::fs::read_to_string(memory_file(&pool, f)).unwrap_or_default();
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
        "the allocator was not OOM-killed: {} (exit 1: could not join the group, 2: mmap \
         failed); the group's failcnt {}, max usage {}, oom_control {:?}; swap {:?}",
        if libc::WIFSIGNALED(status) {
            format!("killed by signal {}", libc::WTERMSIG(status))
        } else {
            format!("exited {}", libc::WEXITSTATUS(status))
        },
        read("memory.failcnt").trim(),
        read("memory.max_usage_in_bytes").trim(),
        read("memory.oom_control"),
        memgang_linux::counters::SwapStatus::read().ok(),
    );
    guard.children.clear();
}

#[test]
fn v1_group_names_are_checked() {
    // No kernel needed: a bad name never reaches the file system.
    assert!(GroupPath::new("memgang-x/../../etc").is_err());
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// A file of `group` in this machine's v1 memory hierarchy, read directly
/// to check what the backend wrote.
fn memory_file(group: &GroupPath, file: &str) -> PathBuf {
    let (root, _) = v1_roots().expect("v1 memory hierarchy");
    group.under(&root).join(file)
}

fn read_trimmed(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .trim()
        .to_string()
}

/// Wait until `group` has at least `bytes` of anonymous memory in RAM.
fn wait_for_anon(backend: &dyn CgroupBackend, group: &GroupPath, bytes: u64) -> MemoryStat {
    assert!(
        eventually(SETTLE, || backend
            .memory_stat(group)
            .is_ok_and(|s| s.anon_bytes >= bytes)),
        "{group} never reached {:.0} MiB anon: {:?}",
        mib(bytes),
        backend.memory_stat(group)
    );
    backend.memory_stat(group).unwrap()
}

/// Wait until a [`fork_allocator`] child has touched all its `bytes` and
/// sleeps in pause(): resident or swapped, its pages are all there. (Its
/// RSS also counts the test binary's pages it shares since fork, so the
/// size alone would say "done" a few MiB early.)
fn wait_for_allocator(pid: i32, bytes: u64) {
    assert!(
        eventually(SETTLE, || {
            let touched =
                counters::process_rss_swap(pid).is_ok_and(|(rss, swap)| rss + swap >= bytes);
            touched && state(pid) == Some('S')
        }),
        "allocator {pid} never finished touching {:.0} MiB (state {:?}, rss/swap {:?})",
        mib(bytes),
        state(pid),
        counters::process_rss_swap(pid)
    );
}

#[test]
#[ignore = "needs root: creates cgroups, swapon (scripts/test runs it as root)"]
fn v1_reclaim_pages_out_the_shortfall_and_restores_the_limit() {
    let test = "v1_reclaim_pages_out_the_shortfall_and_restores_the_limit";
    let Some(backend) = v1_backend(test, "needs root (cgroups, swapon)") else {
        return;
    };
    /// The job's memory, and what is asked back: half of it, so a reclaim
    /// that took everything would show.
    const JOB: u64 = 256 * MIB;
    const ASK: u64 = 128 * MIB;
    // Declared before the guard, so dropped after it: processes die before
    // their swap goes away.
    let _swap = TestSwap::new(TEST_SWAP).expect("creating the test swap");
    let job = test_group("v1-reclaim");
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![job.clone()];
    backend.create(&job).unwrap();
    let limit_file = memory_file(&job, "memory.limit_in_bytes");
    let limit_before = read_trimmed(&limit_file);
    assert_eq!(backend.memory_limit(&job).unwrap(), None, "{limit_before}");

    let pid = fork_allocator(backend.as_ref(), &job, JOB as usize);
    guard.children.push(pid);
    wait_for_allocator(pid, JOB);
    let before = wait_for_anon(backend.as_ref(), &job, JOB - 2 * MIB);

    let t = Instant::now();
    let freed = backend.reclaim(&job, ASK).unwrap();
    let took = t.elapsed();
    let after = backend.memory_stat(&job).unwrap();
    let anon_drop = before.anon_bytes.saturating_sub(after.anon_bytes);
    eprintln!(
        "  reclaim({:.0} MiB) by shrinking the v1 limit: freed {:.1} MiB (usage {:.1} -> {:.1}, \
         mapped anon {:.1} -> {:.1} MiB, swap {:?} -> {:?}) in {took:?} = {:.0} MiB/s",
        mib(ASK),
        mib(freed),
        mib(before.usage_bytes),
        mib(after.usage_bytes),
        mib(before.anon_bytes),
        mib(after.anon_bytes),
        before.swap_bytes.map(mib),
        after.swap_bytes.map(mib),
        mib(freed) / took.as_secs_f64().max(1e-9)
    );
    assert!(freed >= ASK / 2, "freed only {freed} of {ASK}");
    assert!(anon_drop >= ASK / 2, "anon dropped only {anon_drop}");
    // Only about the shortfall left RAM, not the whole job. (Judged by
    // the usage: v1's total_rss counts mapped pages only, and when the
    // swap device is slow, reclaim unmaps pages well beyond the target
    // whose write-back it then does not wait for. They stay in the swap
    // cache, in RAM and charged, until the next reclaim frees them.)
    assert!(
        after.usage_bytes + ASK + 32 * MIB >= before.usage_bytes,
        "reclaim freed far more than asked: {before:?} -> {after:?}"
    );
    if let (Some(s0), Some(s1)) = (before.swap_bytes, after.swap_bytes) {
        assert!(s1 >= s0 + ASK / 2, "pages went nowhere: swap {s0} -> {s1}");
    }
    assert_eq!(read_trimmed(&limit_file), limit_before, "limit restored");
    assert!(
        matches!(state(pid), Some(s) if s != 'Z'),
        "the job must survive its reclaim: {:?}",
        state(pid)
    );

    // A top-level group's parent is the hierarchy root, whose
    // memory.swappiness shows vm.swappiness; protecting it does not stop
    // its own reclaim.
    let swappiness = memory_file(&job, "memory.swappiness");
    let (root, _) = v1_roots().unwrap();
    backend.protect(&job, true).unwrap();
    assert_eq!(read_trimmed(&swappiness), "1");
    let freed = backend.reclaim(&job, 16 * MIB).unwrap();
    assert!(
        freed >= 8 * MIB,
        "a protected group's own reclaim freed {freed}"
    );
    backend.protect(&job, false).unwrap();
    assert_eq!(
        read_trimmed(&swappiness),
        read_trimmed(&root.join("memory.swappiness"))
    );

    // Nothing asked: the kernel is not touched.
    assert_eq!(backend.reclaim(&job, 0).unwrap(), 0);

    // More than the group has: the kernel stops short of the impossible
    // target (EBUSY), which is a result, not an error.
    let usage = backend.memory_stat(&job).unwrap().usage_bytes;
    let t = Instant::now();
    let freed = backend.reclaim(&job, 4 * JOB).unwrap();
    let took = t.elapsed();
    let rest = backend.memory_stat(&job).unwrap();
    eprintln!(
        "  reclaim({:.0} MiB) of a group using {:.1} MiB: freed {:.1} MiB in {took:?} = {:.0} MiB/s; \
         {:.1} MiB anon left",
        mib(4 * JOB),
        mib(usage),
        mib(freed),
        mib(freed) / took.as_secs_f64().max(1e-9),
        mib(rest.anon_bytes)
    );
    assert!(freed <= usage, "freed {freed} of a usage of {usage}");
    assert!(
        rest.anon_bytes <= 16 * MIB,
        "the job's pages should all be out: {rest:?}"
    );
    assert_eq!(read_trimmed(&limit_file), limit_before, "limit restored");

    // A group with a limit of its own gets exactly that limit back.
    backend.set_memory_limit(&job, Some(512 * MIB)).unwrap();
    backend.reclaim(&job, MIB).unwrap();
    assert_eq!(backend.memory_limit(&job).unwrap(), Some(512 * MIB));
}

/// What the pool squeeze of [`v1_protect_makes_the_siblings_page_out_first`]
/// cost each job: anonymous memory lost from RAM.
struct Squeeze {
    a_lost: u64,
    b_lost: u64,
}

/// A pool with jobs A and B holding [`SQUEEZE_JOB`] each; B (protected if
/// `protect`) then grows by as much again, past the pool's limit, so the
/// kernel must page out at least the excess somewhere in the pool.
///
/// B is created first. Limit reclaim on this kernel walks the pool's
/// children in creation order and stops once it has freed what the charge
/// needs, so without protection the first child pays for the excess, its
/// pages' age notwithstanding: B, the job that grows, pages itself out.
/// That is the case protection has to turn around.
fn squeeze(backend: &Arc<dyn CgroupBackend>, what: &str, protect: bool) -> Squeeze {
    let pool = test_group(what);
    let (a, b) = (pool.join("job-a").unwrap(), pool.join("job-b").unwrap());
    let mut guard = Cleanup::new(backend.clone());
    guard.groups = vec![pool.clone(), a.clone(), b.clone()];
    backend.create(&b).unwrap();
    backend.create(&a).unwrap();
    backend.set_memory_limit(&pool, Some(SQUEEZE_POOL)).unwrap();
    for g in [&a, &b] {
        let pid = fork_allocator(backend.as_ref(), g, SQUEEZE_JOB as usize);
        guard.children.push(pid);
        wait_for_allocator(pid, SQUEEZE_JOB);
    }
    let pool_swappiness = read_trimmed(&memory_file(&pool, "memory.swappiness"));
    let b_swappiness = memory_file(&b, "memory.swappiness");
    assert_eq!(read_trimmed(&b_swappiness), pool_swappiness, "inherited");
    if protect {
        backend.protect(&b, true).unwrap();
        assert_eq!(read_trimmed(&b_swappiness), "1");
    }
    let a0 = backend.memory_stat(&a).unwrap();
    let b0 = backend.memory_stat(&b).unwrap();

    let t = Instant::now();
    let grow = fork_allocator(backend.as_ref(), &b, SQUEEZE_JOB as usize);
    guard.children.push(grow);
    wait_for_allocator(grow, SQUEEZE_JOB);
    let took = t.elapsed();
    let a1 = backend.memory_stat(&a).unwrap();
    let b1 = backend.memory_stat(&b).unwrap();
    let result = Squeeze {
        a_lost: a0.anon_bytes.saturating_sub(a1.anon_bytes),
        b_lost: (b0.anon_bytes + SQUEEZE_JOB).saturating_sub(b1.anon_bytes),
    };
    eprintln!(
        "  {}: B grew by {:.0} MiB in {took:?} in a {:.0} MiB pool; A lost {:.1} MiB, B {:.1} MiB \
         (A anon {:.1} -> {:.1}, B anon {:.1} -> {:.1} MiB)",
        if protect {
            "B protected"
        } else {
            "no protection"
        },
        mib(SQUEEZE_JOB),
        mib(SQUEEZE_POOL),
        mib(result.a_lost),
        mib(result.b_lost),
        mib(a0.anon_bytes),
        mib(a1.anon_bytes),
        mib(b0.anon_bytes),
        mib(b1.anon_bytes)
    );
    if protect {
        backend.protect(&b, false).unwrap();
        assert_eq!(
            read_trimmed(&b_swappiness),
            pool_swappiness,
            "off restores the parent's swappiness"
        );
    }
    result
}

/// Each job's memory in the squeeze; the pool holds both jobs with room to
/// spare, but not B's growth by as much again: at least 64 MiB must go.
const SQUEEZE_JOB: u64 = 128 * MIB;
const SQUEEZE_POOL: u64 = 320 * MIB;

#[test]
#[ignore = "needs root: creates cgroups, swapon (scripts/test runs it as root)"]
fn v1_protect_makes_the_siblings_page_out_first() {
    let test = "v1_protect_makes_the_siblings_page_out_first";
    let Some(backend) = v1_backend(test, "needs root (cgroups, swapon)") else {
        return;
    };
    let _swap = TestSwap::new(TEST_SWAP).expect("creating the test swap");
    let excess = 2 * SQUEEZE_JOB + SQUEEZE_JOB - SQUEEZE_POOL;

    // The same squeeze without protection, to show that B would lose
    // pages: all of the excess on this kernel (see `squeeze`), and still a
    // share of it were the kernel to walk the children round-robin.
    let plain = squeeze(&backend, "v1-unprotected", false);
    let protected = squeeze(&backend, "v1-protected", true);
    assert!(
        plain.b_lost >= excess / 4,
        "unprotected, B should lose a share of the {:.0} MiB: lost {:.1} MiB",
        mib(excess),
        mib(plain.b_lost)
    );
    assert!(
        protected.a_lost >= excess * 3 / 4,
        "A should pay for B's growth: lost {:.1} MiB of {:.0}",
        mib(protected.a_lost),
        mib(excess)
    );
    assert!(
        protected.b_lost <= 8 * MIB && protected.b_lost * 4 <= protected.a_lost,
        "protected B lost {:.1} MiB (A {:.1} MiB)",
        mib(protected.b_lost),
        mib(protected.a_lost)
    );
}
