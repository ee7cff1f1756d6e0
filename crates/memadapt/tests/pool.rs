//! memadapt in a real memory pool: the C CG example (`mema`) runs in a
//! memory cgroup with a limit and a test swap file; a competing process
//! that keeps touching its memory joins the pool for a while, and the
//! store's timeline must show Panels_in dropping while it runs and rising
//! again after it exits. Also a full disk (a small tmpfs) while writing
//! panels. Needs root (cgroups, swapon, mount); skips loudly otherwise.
//! Run serially (scripts/test does): the test fills the machine's swap
//! and page cache paths with its own pressure.

mod common;
#[path = "../../linux/tests/common/mod.rs"]
mod linux;

use common::{c_compiler, compile, compile_cg};
use linux::{spawn_in, test_group, v1_backend, Cleanup, MIB};
use memgang_linux::swap::TestSwap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The CG problem: 60^3 unknowns, 10 panels of 6.6 MB (66 MB of matrix)
/// and 8.6 MB of vectors.
const N: &str = "60";
const PANELS: usize = 10;
/// The pool holds the CG job with room to spare, but not the job and the
/// competitor: with it, about 20 MB are left for panels.
const POOL: u64 = 128 * MIB;
const COMPETITOR_MIB: u64 = 96;
const SWAP: u64 = 512 * MIB;
/// Phases, in seconds from the start of the solver: alone, with the
/// competitor, alone again.
const COMPETITOR_FROM: f64 = 6.0;
const COMPETITOR_TO: f64 = 16.0;
const RUN: f64 = 28.0;

/// Takes `mib` MiB and locks them (root may), so that they stay taken
/// for as long as it runs. One that only kept writing its pages, like the
/// paper's dummy job (§5.2), loses them here: the kernel prefers to swap
/// its anonymous pages out over reclaiming the solver's mapped file
/// pages, and the solver gets its panels back while the competitor is
/// still there, which would not show what this test is about.
const COMPETITOR_C: &str = r#"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 2) return 64;
    size_t bytes = (size_t)atol(argv[1]) << 20;
    char *p = malloc(bytes);
    if (!p) return 1;
    memset(p, 1, bytes);
    if (mlock(p, bytes) != 0) return 2;
    for (;;) pause();
}
"#;

fn wait(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    status
}

/// (t, panels_in) from the store's timeline CSV.
fn timeline(path: &Path) -> Vec<(f64, usize)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the solver wrote no timeline {}: {e}", path.display()));
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[4].parse().unwrap())
        })
        .collect()
}

fn panels_in(samples: &[(f64, usize)], from: f64, to: f64) -> Vec<usize> {
    samples
        .iter()
        .filter(|(t, _)| (from..to).contains(t))
        .map(|&(_, p)| p)
        .collect()
}

#[test]
#[ignore = "needs root: memory cgroup, swapon, mount (scripts/test runs it as root)"]
fn panels_drop_under_a_competitor_and_come_back_after_it() {
    let test = "panels_drop_under_a_competitor_and_come_back_after_it";
    let Some(backend) = v1_backend(test, "needs root (memory cgroup, swapon)") else {
        return;
    };
    let Some(cc) = c_compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (cg, hog) = (dir.path().join("cg"), dir.path().join("competitor"));
    compile_cg(&cc, &cg);
    let hog_c = dir.path().join("competitor.c");
    std::fs::write(&hog_c, COMPETITOR_C).unwrap();
    compile(&cc, &[&hog_c], &[], &hog);

    let _swap = TestSwap::new(SWAP).expect("a test swap file");
    let mut cleanup = Cleanup::new(backend.clone());
    let group = test_group("memadapt-pool");
    backend.create(&group).unwrap();
    cleanup.groups.push(group.clone());
    backend.set_memory_limit(&group, Some(POOL)).unwrap();

    // The matrix file is written from inside the pool, so that its page
    // cache is charged to the pool (pages cached outside it would not
    // count against its limit, and nothing would press on the panels).
    let file = dir.path().join("A.panels");
    let create = spawn_in(
        backend.as_ref(),
        &group,
        Command::new(&cg)
            .arg("create")
            .arg(&file)
            .args([N, &PANELS.to_string()]),
    );
    cleanup.children.push(create);
    assert_eq!(wait(create), 0, "cg create failed");

    let csv = dir.path().join("timeline.csv");
    let start = Instant::now();
    let solver = spawn_in(
        backend.as_ref(),
        &group,
        Command::new(&cg)
            .arg("mema")
            .arg(&file)
            .args(["--seconds", &RUN.to_string(), "--timeline"])
            .arg(&csv),
    );
    cleanup.children.push(solver);
    let sleep_until = |t: f64| {
        let left = Duration::from_secs_f64(t).saturating_sub(start.elapsed());
        std::thread::sleep(left);
    };
    sleep_until(COMPETITOR_FROM);
    let competitor = spawn_in(
        backend.as_ref(),
        &group,
        Command::new(&hog).arg(COMPETITOR_MIB.to_string()),
    );
    cleanup.children.push(competitor);
    sleep_until(COMPETITOR_TO);
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(competitor, libc::SIGKILL) };
    let status = wait(competitor);
    assert!(
        libc::WIFSIGNALED(status),
        "the competitor ended by itself (wait status {status}): 1 no memory, 2 mlock failed"
    );
    let status = wait(solver);
    assert_eq!(status, 0, "the solver failed (wait status {status})");

    let samples = timeline(&csv);
    let before = panels_in(&samples, COMPETITOR_FROM - 3.0, COMPETITOR_FROM);
    let dropped = panels_in(&samples, COMPETITOR_FROM, COMPETITOR_TO);
    let during = panels_in(&samples, COMPETITOR_TO - 4.0, COMPETITOR_TO);
    let after = panels_in(&samples, RUN - 6.0, RUN);
    let summary = format!(
        "Panels_in of {PANELS}: before max {:?}, with the competitor min {:?}, its last 4 s \
         max {:?}, last 6 s after it max {:?} ({} samples)",
        before.iter().max(),
        dropped.iter().min(),
        during.iter().max(),
        after.iter().max(),
        samples.len()
    );
    eprintln!("{summary}");
    assert!(
        !before.is_empty() && !during.is_empty() && !after.is_empty(),
        "{summary}"
    );
    let (before, during, after) = (
        *before.iter().max().unwrap(),
        *during.iter().max().unwrap(),
        *after.iter().max().unwrap(),
    );
    // Alone, the pool holds the whole job: every panel comes in.
    assert_eq!(before, PANELS, "{summary}");
    // With the competitor it cannot: the job must have given panels back,
    // and kept them given back.
    assert!(*dropped.iter().min().unwrap() <= PANELS - 3, "{summary}");
    assert!(during <= PANELS - 3, "{summary}");
    // After, memory is free again and the probes take it back.
    assert!(after >= PANELS - 1, "{summary}");
}

/// A full disk while the panels are reserved is an error that says so,
/// not a SIGBUS later: a 1 MiB tmpfs and a 4 MiB data file.
#[test]
#[ignore = "needs root: memory cgroup, swapon, mount (scripts/test runs it as root)"]
fn a_full_disk_while_creating_panels_is_reported() {
    let test = "a_full_disk_while_creating_panels_is_reported";
    // SAFETY: geteuid cannot fail.
    linux::require_root(test, "needs root (mount)");
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path();
    let target = std::ffi::CString::new(mnt.to_str().unwrap()).unwrap();
    // SAFETY: valid C strings; a tmpfs mount on our own empty directory.
    let rc = unsafe {
        libc::mount(
            c"memgang-test".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            c"size=1m".as_ptr().cast(),
        )
    };
    assert_eq!(rc, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
    struct Unmount(std::ffi::CString);
    impl Drop for Unmount {
        fn drop(&mut self) {
            // SAFETY: the mount made above.
            unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
        }
    }
    let _unmount = Unmount(target);

    let path = mnt.join("big.panels");
    let Err(err) = memadapt::file::create(&path, 1 << 20, 4) else {
        panic!("4 MiB of panels cannot fit in 1 MiB");
    };
    assert!(err.is_disk_full(), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("big.panels") && msg.contains("disk is full"),
        "{msg}"
    );
}
