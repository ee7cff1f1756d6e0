//! The backends against fake cgroup trees: plain files named like the
//! kernel's in a temporary directory. This is how the cgroup v2 memory code
//! is tested, since this project's CI kernel has no v2 memory controller.
//! The test plays the kernel: it makes the files a mkdir would, and writes
//! the state (cgroup.events, freezer.state) the kernel would report.

use memgang_linux::cgroup::v1::V1;
use memgang_linux::cgroup::v2::V2;
use memgang_linux::cgroup::{self, CgroupBackend, CgroupVersion, GroupPath, MemoryStat};
use memgang_linux::counters::Psi;
use memgang_linux::freeze;
use memgang_linux::Error;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Replace the file's contents in one step, as the kernel does for the
/// files it owns: a reader polling it never sees it empty half-written
/// (`fs::write` truncates first, and a poll in that moment read no
/// "frozen" key and failed the test now and then).
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    write(&tmp, text);
    fs::rename(&tmp, path).unwrap_or_else(|e| panic!("renaming onto {}: {e}", path.display()));
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The files the kernel makes in a v2 group; memory files only if the
/// parent enabled the memory controller.
fn kernel_v2_files(dir: &Path, with_memory: bool) {
    write(
        &dir.join("cgroup.controllers"),
        if with_memory { "memory\n" } else { "\n" },
    );
    write(&dir.join("cgroup.subtree_control"), "\n");
    write(&dir.join("cgroup.procs"), "");
    write(&dir.join("cgroup.freeze"), "0\n");
    write(&dir.join("cgroup.events"), "populated 0\nfrozen 0\n");
    if with_memory {
        write(&dir.join("memory.max"), "max\n");
        write(&dir.join("memory.low"), "0\n");
        // Write-only in the kernel; empty here so a test sees our write.
        write(&dir.join("memory.reclaim"), "");
        write(&dir.join("memory.current"), "0\n");
        write(&dir.join("memory.stat"), "anon 0\nfile 0\npgmajfault 0\n");
        write(&dir.join("memory.swap.current"), "0\n");
        write(&dir.join("memory.pressure"), "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    }
}

/// A v2 root as on a pure v2 host: memory available, not yet enabled.
fn fake_v2_root() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    );
    write(&tmp.path().join("cgroup.subtree_control"), "\n");
    write(&tmp.path().join("cgroup.procs"), "1\n");
    tmp
}

fn g(s: &str) -> GroupPath {
    GroupPath::new(s).unwrap()
}

/// Pool and job, created one level at a time with the test writing the
/// kernel's files after each mkdir.
fn pool_and_job(v2: &V2) -> (GroupPath, GroupPath) {
    let pool = g("memgang-test-fake");
    let job = pool.join("job-a").unwrap();
    v2.create(&pool).unwrap();
    kernel_v2_files(&pool.under(v2.root()), true);
    v2.create(&job).unwrap();
    kernel_v2_files(&job.under(v2.root()), true);
    (pool, job)
}

#[test]
fn v2_create_enables_memory_in_parents() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path());
    assert_eq!(v2.version(), CgroupVersion::V2);
    let (pool, job) = pool_and_job(&v2);
    assert!(v2.exists(&pool) && v2.exists(&job));
    assert_eq!(read(&tmp.path().join("cgroup.subtree_control")), "+memory");
    assert_eq!(
        read(&pool.under(tmp.path()).join("cgroup.subtree_control")),
        "+memory"
    );
    // The leaf keeps its subtree_control empty: a v2 group with
    // controllers enabled for children may not hold processes.
    assert_eq!(
        read(&job.under(tmp.path()).join("cgroup.subtree_control")),
        "\n"
    );

    // Idempotent, and an already enabled controller (kernel format) is not
    // written again.
    write(
        &pool.under(tmp.path()).join("cgroup.subtree_control"),
        "cpu memory\n",
    );
    v2.create(&job).unwrap();
    assert_eq!(
        read(&pool.under(tmp.path()).join("cgroup.subtree_control")),
        "cpu memory\n"
    );
    assert!(v2.describe().contains("cgroup v2") && v2.describe().contains("memory"));
}

#[test]
fn v2_create_leaves_parent_without_memory_alone() {
    let tmp = fake_v2_root();
    write(&tmp.path().join("cgroup.controllers"), "cpu pids\n");
    let v2 = V2::new(tmp.path());
    let pool = g("memgang-test-nomem");
    v2.create(&pool).unwrap();
    assert_eq!(read(&tmp.path().join("cgroup.subtree_control")), "\n");
    kernel_v2_files(&pool.under(tmp.path()), false);
    // The memory calls then say what is missing, naming the file.
    let e = v2
        .set_memory_limit(&pool, Some(1 << 20))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("memory.max") && e.contains("memory controller is not enabled"),
        "{e}"
    );
    let e = v2.memory_stat(&pool).unwrap_err().to_string();
    assert!(
        e.contains("memory.stat") && e.contains("subtree_control"),
        "{e}"
    );
}

#[test]
fn v2_create_in_a_non_cgroup_directory_fails_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let e = V2::new(tmp.path())
        .create(&g("memgang-test-x"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cgroup.controllers") && e.contains("not a cgroup2 directory"),
        "{e}"
    );
}

#[test]
fn v2_memory_limit() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path());
    let (pool, _job) = pool_and_job(&v2);
    let max = pool.under(tmp.path()).join("memory.max");
    v2.set_memory_limit(&pool, Some(64 << 20)).unwrap();
    assert_eq!(read(&max), "67108864");
    assert_eq!(v2.memory_limit(&pool).unwrap(), Some(64 << 20));
    v2.set_memory_limit(&pool, None).unwrap();
    assert_eq!(read(&max), "max");
    assert_eq!(v2.memory_limit(&pool).unwrap(), None);
    write(&max, "lots\n");
    let e = v2.memory_limit(&pool).unwrap_err();
    assert!(
        matches!(e, Error::Parse { .. }) && e.to_string().contains("memory.max"),
        "{e}"
    );
}

#[test]
fn v2_protect_sets_memory_low() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path());
    let (_pool, job) = pool_and_job(&v2);
    let low = job.under(tmp.path()).join("memory.low");
    v2.protect(&job, true).unwrap();
    assert_eq!(read(&low), "max");
    v2.protect(&job, false).unwrap();
    assert_eq!(read(&low), "0");

    let missing = g("memgang-test-fake/job-missing");
    let e = v2.protect(&missing, true).unwrap_err().to_string();
    assert!(
        e.contains("memgang-test-fake/job-missing/memory.low"),
        "{e}"
    );
    // The group exists but its parent did not enable the controller.
    fs::remove_file(&low).unwrap();
    let e = v2.protect(&job, true).unwrap_err().to_string();
    assert!(
        e.contains("memory.low") && e.contains("memory controller is not enabled"),
        "{e}"
    );
}

#[test]
fn v2_reclaim_writes_memory_reclaim() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path());
    let (_pool, job) = pool_and_job(&v2);
    let dir = job.under(tmp.path());
    write(&dir.join("memory.current"), "268435456\n");
    // Nothing on a fake tree frees memory: the usage stays, so 0 was freed.
    assert_eq!(v2.reclaim(&job, 128 << 20).unwrap(), 0);
    assert_eq!(read(&dir.join("memory.reclaim")), "134217728");

    // Nothing to reclaim: the kernel is not asked.
    write(&dir.join("memory.reclaim"), "untouched");
    assert_eq!(v2.reclaim(&job, 0).unwrap(), 0);
    assert_eq!(read(&dir.join("memory.reclaim")), "untouched");

    let missing = g("memgang-test-fake/job-missing");
    let e = v2.reclaim(&missing, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("memgang-test-fake/job-missing/memory."), "{e}");

    // A kernel before 5.19 has memory.current but no memory.reclaim.
    fs::remove_file(dir.join("memory.reclaim")).unwrap();
    let e = v2.reclaim(&job, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("memory.reclaim") && e.contains("5.19"), "{e}");
}

#[test]
fn v2_freeze_writes_cgroup_freeze_and_waits_for_events() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path()).with_freeze_timeout(Duration::from_millis(300));
    let (_pool, job) = pool_and_job(&v2);
    let dir = job.under(tmp.path());
    assert!(v2.can_freeze(), "a child has cgroup.freeze");

    // The "kernel" has already frozen it.
    write(&dir.join("cgroup.events"), "populated 1\nfrozen 1\n");
    v2.set_frozen(&job, true).unwrap();
    assert_eq!(read(&dir.join("cgroup.freeze")), "1");
    assert!(v2.is_frozen(&job).unwrap());

    // The kernel never confirms: bounded wait, error names cgroup.events.
    write(&dir.join("cgroup.events"), "populated 1\nfrozen 1\n");
    let t = Instant::now();
    let e = v2.set_frozen(&job, false).unwrap_err().to_string();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "waited {:?}",
        t.elapsed()
    );
    assert!(
        e.contains("cgroup.events") && e.contains("not thawed"),
        "{e}"
    );
    assert_eq!(read(&dir.join("cgroup.freeze")), "0");

    // The kernel confirms while we wait.
    write(&dir.join("cgroup.events"), "populated 1\nfrozen 0\n");
    let events = dir.join("cgroup.events");
    let kernel = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        write_atomic(&events, "populated 1\nfrozen 1\n");
    });
    v2.set_frozen(&job, true).unwrap();
    kernel.join().unwrap();

    // Old kernels: no "frozen" key.
    write(&dir.join("cgroup.events"), "populated 1\n");
    let e = v2.is_frozen(&job).unwrap_err().to_string();
    assert!(e.contains("cgroup.events") && e.contains("5.2"), "{e}");
}

#[test]
fn v2_can_freeze_needs_cgroup_freeze() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path());
    assert!(
        !v2.can_freeze(),
        "plain directory, no cgroup.freeze anywhere"
    );
    let e = v2
        .set_frozen(&g("memgang-test-missing"), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cgroup.freeze"), "{e}");
}

#[test]
fn v2_memory_stat_and_pressure() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path());
    let (_pool, job) = pool_and_job(&v2);
    let dir = job.under(tmp.path());
    write(
        &dir.join("memory.stat"),
        "anon 33554432\nfile 1048576\nkernel 8192\nshmem 0\nanon_thp 4194304\npgfault 9000\npgmajfault 42\npswpin 7\npswpout 900\n",
    );
    write(&dir.join("memory.current"), "35651584\n");
    write(&dir.join("memory.swap.current"), "3686400\n");
    write(&dir.join("memory.pressure"), "some avg10=12.50 avg60=3.00 avg300=1.00 total=500000\nfull avg10=10.00 avg60=2.00 avg300=0.50 total=400000\n");
    assert_eq!(
        v2.memory_stat(&job).unwrap(),
        MemoryStat {
            anon_bytes: 32 << 20,
            file_bytes: 1 << 20,
            usage_bytes: 34 << 20,
            swap_bytes: Some(3686400),
            major_faults: 42,
            swap_ins: Some(7),
            swap_outs: Some(900),
            anon_huge_bytes: Some(4 << 20),
            unevictable_bytes: None,
        }
    );
    assert_eq!(
        v2.memory_pressure(&job),
        Some(Psi {
            some_avg10: 12.5,
            full_avg10: 10.0,
            some_total_us: 500000,
            full_total_us: 400000
        })
    );

    // Kernel without swap: no memory.swap.current, no pswp* fields.
    fs::remove_file(dir.join("memory.swap.current")).unwrap();
    write(&dir.join("memory.stat"), "anon 1\nfile 2\npgmajfault 3\n");
    let s = v2.memory_stat(&job).unwrap();
    assert_eq!((s.swap_bytes, s.swap_ins, s.swap_outs), (None, None, None));
    fs::remove_file(dir.join("memory.pressure")).unwrap();
    assert_eq!(v2.memory_pressure(&job), None);
}

#[test]
fn v2_procs_lists_and_remove() {
    let tmp = fake_v2_root();
    let v2 = V2::new(tmp.path());
    let (pool, job) = pool_and_job(&v2);
    let sub = job.join("inner").unwrap();
    v2.create(&sub).unwrap();
    kernel_v2_files(&sub.under(tmp.path()), true);
    write(&job.under(tmp.path()).join("cgroup.procs"), "300\n100\n");
    write(&sub.under(tmp.path()).join("cgroup.procs"), "200\n");
    assert_eq!(
        v2.procs_files(&job),
        vec![job.under(tmp.path()).join("cgroup.procs")]
    );
    assert_eq!(v2.procs(&job).unwrap(), vec![300, 100]);
    assert_eq!(v2.procs(&pool).unwrap(), Vec::<i32>::new());
    assert_eq!(v2.procs_recursive(&pool).unwrap(), vec![100, 200, 300]);
    assert!(v2.procs_recursive(&g("memgang-test-none")).is_err());
    write(&sub.under(tmp.path()).join("cgroup.procs"), "x\n");
    let e = v2.procs(&sub).unwrap_err().to_string();
    assert!(e.contains("cgroup.procs"), "{e}");
    // join writes the pid where the kernel takes it; a missing group is
    // an error naming the file.
    cgroup::join(&v2, &sub, 4242).unwrap();
    assert_eq!(read(&sub.under(tmp.path()).join("cgroup.procs")), "4242");
    assert_eq!(cgroup::open_procs(&v2, &sub).unwrap().len(), 1);
    let none = g("memgang-test-none");
    let e = cgroup::join(&v2, &none, 4242).unwrap_err().to_string();
    assert!(e.contains("memgang-test-none/cgroup.procs"), "{e}");
    assert!(cgroup::open_procs(&v2, &none).is_err());

    fs::create_dir(tmp.path().join("memgang-other")).unwrap();
    fs::create_dir(tmp.path().join("system.slice")).unwrap();
    write(&tmp.path().join("memgang-file"), "not a group");
    assert_eq!(
        v2.list_groups("memgang").unwrap(),
        vec![g("memgang-other"), g("memgang-test-fake")]
    );
    assert_eq!(v2.list_groups("memgang-test").unwrap(), vec![pool.clone()]);
    assert_eq!(v2.list_children(&pool).unwrap(), vec![job.clone()]);
    assert_eq!(v2.list_children(&job).unwrap(), vec![sub]);

    // Removing a group that is gone is fine; a group of directories goes
    // deepest first (a fake tree's files would make rmdir fail, as they
    // are not kernel files, so use bare directories).
    v2.remove(&g("memgang-test-none")).unwrap();
    let bare = g("memgang-bare");
    fs::create_dir_all(tmp.path().join("memgang-bare/job-a/x")).unwrap();
    fs::create_dir_all(tmp.path().join("memgang-bare/job-b")).unwrap();
    v2.remove(&bare).unwrap();
    assert!(!v2.exists(&bare));
    v2.remove(&bare).unwrap();
}

#[test]
fn v1_fake_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let (mem, frz) = (tmp.path().join("memory"), tmp.path().join("freezer"));
    fs::create_dir_all(&mem).unwrap();
    fs::create_dir_all(&frz).unwrap();
    let v1 = V1::new(&mem, Some(frz.clone())).with_freeze_timeout(Duration::from_millis(200));
    assert_eq!(v1.version(), CgroupVersion::V1);
    assert!(v1.describe().contains("memory at") && v1.describe().contains("freezer at"));
    let job = g("memgang-test-v1fake/job-a");
    v1.create(&job).unwrap();
    v1.create(&job).unwrap();
    assert!(
        mem.join("memgang-test-v1fake/job-a").is_dir()
            && frz.join("memgang-test-v1fake/job-a").is_dir()
    );
    assert_eq!(
        v1.procs_files(&job),
        vec![
            mem.join("memgang-test-v1fake/job-a/cgroup.procs"),
            frz.join("memgang-test-v1fake/job-a/cgroup.procs")
        ]
    );
    // Both hierarchies get the pid, or a process would be charged in one
    // and frozen in neither.
    cgroup::join(&v1, &job, 77).unwrap();
    assert_eq!(
        read(&mem.join("memgang-test-v1fake/job-a/cgroup.procs")),
        "77"
    );
    assert_eq!(
        read(&frz.join("memgang-test-v1fake/job-a/cgroup.procs")),
        "77"
    );

    let limit = mem.join("memgang-test-v1fake/job-a/memory.limit_in_bytes");
    write(&limit, "9223372036854771712\n");
    assert_eq!(v1.memory_limit(&job).unwrap(), None);
    v1.set_memory_limit(&job, Some(64 << 20)).unwrap();
    assert_eq!(read(&limit), "67108864");
    assert_eq!(v1.memory_limit(&job).unwrap(), Some(64 << 20));
    v1.set_memory_limit(&job, None).unwrap();
    assert_eq!(read(&limit), "-1");

    // Protection is the group's swappiness; off copies the parent's.
    let swappiness = mem.join("memgang-test-v1fake/job-a/memory.swappiness");
    write(&swappiness, "60\n");
    write(&mem.join("memgang-test-v1fake/memory.swappiness"), "30\n");
    v1.protect(&job, true).unwrap();
    assert_eq!(read(&swappiness), "1");
    v1.protect(&job, false).unwrap();
    assert_eq!(read(&swappiness), "30");
    let e = v1
        .protect(&g("memgang-test-v1fake/job-missing"), true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("memgang-test-v1fake/job-missing/memory.swappiness"),
        "{e}"
    );

    // Reclaim lowers the limit to usage - bytes and puts it back; a plain
    // file's usage does not drop, so 0 was freed.
    write(
        &mem.join("memgang-test-v1fake/job-a/memory.usage_in_bytes"),
        "268435456\n",
    );
    write(&limit, "9223372036854771712\n");
    assert_eq!(v1.reclaim(&job, 128 << 20).unwrap(), 0);
    assert_eq!(read(&limit), "-1", "unlimited again");
    v1.set_memory_limit(&job, Some(512 << 20)).unwrap();
    assert_eq!(v1.reclaim(&job, 1 << 40).unwrap(), 0);
    assert_eq!(read(&limit), "536870912");
    write(&limit, "garbage");
    assert_eq!(v1.reclaim(&job, 0).unwrap(), 0, "bytes == 0 reads nothing");
    let e = v1.reclaim(&job, 1 << 20).unwrap_err().to_string();
    assert!(e.contains("memory.limit_in_bytes"), "{e}");
    assert_eq!(
        read(&limit),
        "garbage",
        "nothing written after a failed read"
    );
    v1.set_memory_limit(&job, None).unwrap();

    // Processes in either hierarchy count (union), once.
    write(
        &mem.join("memgang-test-v1fake/job-a/cgroup.procs"),
        "5\n6\n",
    );
    write(
        &frz.join("memgang-test-v1fake/job-a/cgroup.procs"),
        "6\n7\n",
    );
    write(&mem.join("memgang-test-v1fake/cgroup.procs"), "");
    write(&frz.join("memgang-test-v1fake/cgroup.procs"), "");
    assert_eq!(v1.procs(&job).unwrap(), vec![5, 6]);
    assert_eq!(
        v1.procs_recursive(&g("memgang-test-v1fake")).unwrap(),
        vec![5, 6, 7]
    );

    // No freezer.state (the group is not in the freezer hierarchy): the
    // error names the file.
    let e = v1.set_frozen(&job, true).unwrap_err().to_string();
    assert!(e.contains("freezer.state"), "{e}");
    // On a plain file our write is what reads back, so this only checks
    // the value written and that the wait accepts it.
    let state = frz.join("memgang-test-v1fake/job-a/freezer.state");
    write(&state, "THAWED\n");
    v1.set_frozen(&job, true).unwrap();
    assert_eq!(read(&state), "FROZEN");
    assert!(v1.is_frozen(&job).unwrap());
    v1.set_frozen(&job, false).unwrap();
    assert_eq!(read(&state), "THAWED");

    let stat = mem.join("memgang-test-v1fake/job-a/memory.stat");
    write(&stat, "rss 1\ntotal_cache 4096\ntotal_rss 8192\ntotal_rss_huge 0\ntotal_swap 0\ntotal_pgmajfault 3\n");
    write(
        &mem.join("memgang-test-v1fake/job-a/memory.usage_in_bytes"),
        "12288\n",
    );
    let s = v1.memory_stat(&job).unwrap();
    assert_eq!(
        (
            s.anon_bytes,
            s.file_bytes,
            s.usage_bytes,
            s.swap_bytes,
            s.major_faults
        ),
        (8192, 4096, 12288, Some(0), 3)
    );
    assert_eq!(v1.memory_pressure(&job), None);

    assert_eq!(
        v1.list_groups("memgang-test").unwrap(),
        vec![g("memgang-test-v1fake")]
    );
    assert_eq!(
        v1.list_children(&g("memgang-test-v1fake")).unwrap(),
        vec![job.clone()]
    );
    v1.remove(&g("memgang-test-gone")).unwrap();
}

#[test]
fn v1_without_freezer_uses_signals() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = V1::new(tmp.path(), None);
    assert!(!v1.can_freeze());
    assert!(v1.describe().contains("no freezer"));
    let e = v1
        .set_frozen(&g("memgang-test-x"), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("freezer") && e.contains("--signals"), "{e}");
    let backend: Arc<dyn CgroupBackend> = Arc::new(v1);
    assert_eq!(freeze::choose(backend.clone(), false).name(), "signals");
    assert_eq!(freeze::choose(backend, true).name(), "signals");
}
