//! Real tests of the swap testbed: they create, enable and remove swap files
//! on this machine, so they need root and skip (loudly) without it.
//! Run with `--test-threads=1`: they all watch the global /proc/swaps.

use memgang_linux::swap::{self, TestSwap};
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// Fails the test unless it runs as root (swapon(2) needs CAP_SYS_ADMIN).
/// These tests are `#[ignore]`d; scripts/test runs them as root.
fn require_root(test: &str) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "{test} needs root (swapon(2) needs CAP_SYS_ADMIN): run it as root, as scripts/test does"
    );
}

fn page() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

fn entries(path: &Path) -> Vec<swap::SwapArea> {
    swap::active()
        .unwrap()
        .into_iter()
        .filter(|a| a.path == path)
        .collect()
}

fn test_path(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "/var/tmp/memgang-test-{name}-{}.swap",
        std::process::id()
    ))
}

#[test]
#[ignore = "needs root: swapon(2) (scripts/test runs it as root)"]
fn up_down_is_idempotent() {
    require_root("up_down_is_idempotent");
    let path = test_path("updown");
    let size = 128 * MIB;

    let sf = swap::up(&path, size).unwrap();
    assert_eq!(sf.path, path);
    assert_eq!(sf.size_bytes, size);
    let e = entries(&path);
    assert_eq!(e.len(), 1, "{path:?} should be active once: {e:?}");
    // The kernel counts all pages but the header.
    assert_eq!(e[0].size_bytes, size - page());
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), size);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // Again: Ok, no duplicate.
    let again = swap::up(&path, size).unwrap();
    assert_eq!(again, sf);
    assert_eq!(entries(&path).len(), 1);

    // Another size while active: a clear error telling what to do.
    let err = swap::up(&path, 64 * MIB).unwrap_err().to_string();
    assert!(
        err.contains("testbed down") && err.contains(path.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(entries(&path).len(), 1);

    swap::down(&path).unwrap();
    assert!(entries(&path).is_empty());
    assert!(!path.exists());
    swap::down(&path).unwrap();
}

#[test]
#[ignore = "needs root: swapon(2) (scripts/test runs it as root)"]
fn up_refuses_foreign_file_and_down_refuses_foreign_swap() {
    require_root("up_refuses_foreign_file_and_down_refuses_foreign_swap");
    let path = test_path("foreign");
    std::fs::write(&path, b"not a swap file").unwrap();
    let err = swap::up(&path, 64 * MIB).unwrap_err().to_string();
    assert!(err.contains("refusing"), "{err}");
    let err = swap::down(&path).unwrap_err().to_string();
    assert!(err.contains("refusing"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"not a swap file");
    std::fs::remove_file(&path).unwrap();
}

#[test]
#[ignore = "needs root: swapon(2) (scripts/test runs it as root)"]
fn up_checks_free_space() {
    require_root("up_checks_free_space");
    let path = test_path("huge");
    let err = swap::up(&path, 1 << 43).unwrap_err().to_string();
    println!("{err}");
    assert!(
        err.contains(path.to_str().unwrap()) && err.contains("free"),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
#[ignore = "needs root: swapon(2) (scripts/test runs it as root)"]
fn test_swap_is_removed_when_dropped_during_panic() {
    require_root("test_swap_is_removed_when_dropped_during_panic");
    let mut seen: Option<PathBuf> = None;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let s = TestSwap::new(64 * MIB).unwrap();
        seen = Some(s.path().to_path_buf());
        assert_eq!(entries(s.path()).len(), 1);
        panic!("deliberate panic with an active TestSwap");
    }));
    assert!(r.is_err());
    let path = seen.expect("TestSwap was created");
    assert!(
        entries(&path).is_empty(),
        "{path:?} still active after panic"
    );
    assert!(!path.exists());
}

#[test]
fn bandwidth_on_var_tmp() {
    let dir = Path::new("/var/tmp");
    let before: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let bw = swap::measure_device(dir, 256 * MIB, Duration::from_millis(300)).unwrap();
    println!(
        "bandwidth on /var/tmp ({} MiB): write {:.0} MiB/s, read {:.0} MiB/s, {:?} random 4 KiB reads/s, {:?} at depth 8",
        bw.sample_bytes / MIB,
        bw.write_bytes_per_s / MIB as f64,
        bw.read_bytes_per_s / MIB as f64,
        bw.random_read_iops,
        bw.queue_read_iops
    );
    let iops = bw.random_read_iops.expect("asked for random reads");
    // One 4 KiB read at a time cannot beat the sequential 1 MiB reads.
    assert!(
        iops > 0.0 && iops * 4096.0 <= bw.read_bytes_per_s * 1.5,
        "{iops} random reads/s against {} B/s sequential",
        bw.read_bytes_per_s
    );
    let queue = bw.queue_read_iops.expect("asked for random reads");
    assert!(
        queue > 0.0 && queue * 4096.0 <= bw.read_bytes_per_s * 1.5,
        "{queue} reads/s at depth {} against {} B/s sequential",
        swap::QUEUE_DEPTH,
        bw.read_bytes_per_s
    );
    assert_eq!(bw.sample_bytes, 256 * MIB);
    assert!(bw.read_bytes_per_s > 0.0 && bw.read_bytes_per_s.is_finite());
    assert!(bw.write_bytes_per_s > 0.0 && bw.write_bytes_per_s.is_finite());
    let after: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let left: Vec<_> = after.iter().filter(|p| !before.contains(p)).collect();
    assert!(
        !left
            .iter()
            .any(|p| p.to_string_lossy().contains("memgang-bandwidth")),
        "probe file left behind: {left:?}"
    );
}

#[test]
fn bandwidth_on_missing_dir_names_it() {
    let err = swap::measure_bandwidth(Path::new("/nonexistent/memgang-test"), MIB)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/memgang-test"), "{err}");
}

#[test]
fn parses_proc_swaps() {
    let text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                /dev/vda2                               partition\t8388604\t\t1024\t\t-2\n\
                /var/tmp/my\\040swap\\134file            file\t\t131068\t\t0\t\t5\n";
    let a = swap::parse_proc_swaps(text).unwrap();
    assert_eq!(
        a,
        vec![
            swap::SwapArea {
                path: "/dev/vda2".into(),
                size_bytes: 8388604 * 1024,
                used_bytes: 1024 * 1024,
                priority: -2
            },
            swap::SwapArea {
                path: "/var/tmp/my swap\\file".into(),
                size_bytes: 131068 * 1024,
                used_bytes: 0,
                priority: 5
            },
        ]
    );
    // No swap: header only.
    assert!(
        swap::parse_proc_swaps("Filename\tType\tSize\tUsed\tPriority\n")
            .unwrap()
            .is_empty()
    );
    assert!(swap::parse_proc_swaps("").unwrap().is_empty());
    // Garbage is an error naming /proc/swaps and the line.
    let err = swap::parse_proc_swaps("Filename Type Size Used Priority\n/x file lots 0 -2\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("/proc/swaps") && err.contains("lots"), "{err}");
}
