//! `memgang calibrate` end to end: a quick calibration on the real swap
//! device and a real switch run, and the simulator reading its file. Root
//! (cgroups, swap); run serially (--test-threads=1).

mod common;
use common::*;
use serde_json::Value;

/// Runs `cmd` to its end, its output captured: its pid and its output.
fn run_with_pid(cmd: &mut std::process::Command) -> (u32, std::process::Output) {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child.id(), child.wait_with_output().unwrap())
}

/// The fault-timing groups (`memgang_linux::faults`) that process `pid`
/// made and left in the v1 memory hierarchy.
fn fault_groups(pid: u32) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup/memory")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("memgang-faults-{pid}-"))
        })
        .map(|e| e.path())
        .collect()
}

#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn calibrate_writes_a_device_file_the_simulator_reads() {
    require_root("calibrate_writes_a_device_file_the_simulator_reads");
    let bed = Bed::new();
    let file = bed.dir.path().join("device.json");
    let (pid, out) = run_with_pid(
        memgang()
            .arg("calibrate")
            .arg("-o")
            .arg(&file)
            .args([
                "--sample",
                "128M",
                "--random-for",
                "1s",
                "--fault-sample",
                "32M",
                "--own-sample",
                "128M",
            ])
            .args([
                "--pool-memory",
                "128M",
                "--quantum",
                "1s",
                // Too short for a quantum on a fast node: calibrate must
                // lengthen the jobs until gang switches them.
                "--iterations",
                "2",
            ]),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        leftover_cgroups(pid).is_empty(),
        "cgroups left: {:?}",
        leftover_cgroups(pid)
    );
    let left = fault_groups(pid);
    assert!(left.is_empty(), "fault-timing groups left: {left:?}");
    let v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    for k in [
        "write_bps",
        "read_bps",
        "random_read_iops",
        "queue_read_iops",
        "switch_efficiency",
    ] {
        let x = v[k].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x > 0.0, "{k} = {x} in {v}");
    }
    // One page at a time cannot beat 1 MiB sequential reads by much.
    assert!(
        v["random_read_iops"].as_f64().unwrap() * 4096.0 < 1.5 * v["read_bps"].as_f64().unwrap(),
        "{v}"
    );
    // Eight reads in flight cannot beat the sequential reads by much either.
    assert!(
        v["queue_read_iops"].as_f64().unwrap() * 4096.0 < 1.5 * v["read_bps"].as_f64().unwrap(),
        "{v}"
    );
    let c = &v["calibration"];
    assert_eq!(c["queue_depth"].as_u64(), Some(8), "{v}");
    // The fault passes: a random fault reads its page alone, an in-order
    // one a readahead window of several, at some cost.
    let random = &c["faults"]["random"];
    assert!(random["pages_per_fault"].as_f64().unwrap() < 1.5, "{v}");
    assert!(
        random["major_faults"].as_u64().unwrap() >= random["pages"].as_u64().unwrap() * 9 / 10,
        "{v}"
    );
    assert!(v["readahead_pages"].as_f64().unwrap() >= 2.0, "{v}");
    let reads = v["readahead_reads"].as_f64().unwrap();
    assert!(reads.is_finite() && reads > 0.0, "{v}");
    // Its own evictions under two pools, six turns each, a resume lacking
    // more under the smaller pool. Each pool's measured share is checked
    // raw: a turn that faulted back no more than it lacked (pages counted
    // out but still in the swap cache) gives 0 or less, and the share is
    // below 1 whenever something was lacked. The device file's two fields
    // are then the line through the two pools, clamped to the ranges the
    // simulator accepts (so checking only those ranges could not fail).
    let pools = c["own_evictions"]["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2, "{v}");
    let mut points = Vec::new();
    for p in pools {
        assert_eq!(p["turns"].as_array().unwrap().len(), 6, "{v}");
        let (lack, share) = (
            p["lack_share"].as_f64().unwrap(),
            p["share"].as_f64().unwrap(),
        );
        assert!(lack > 0.0 && lack < 1.0, "lack {lack}: {v}");
        assert!(share > 0.0 && share < 1.0, "share {share}: {v}");
        points.push((lack, share));
    }
    let [(la, sa), (lb, sb)] = points[..] else {
        unreachable!()
    };
    assert!(la > lb, "{v}");
    let slope = (sa - sb) / (la - lb);
    let at = c["own_evictions"]["at_lack"].as_f64().unwrap();
    let close = |k: &str, want: f64| {
        let got = v[k].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "{k} = {got}, the pools give {want}: {v}"
        );
    };
    close("own_evict_slope", slope.clamp(-1.0, 1.0));
    close("own_evict_share", (sa + slope * (at - la)).clamp(0.0, 0.95));
    // The split: half the first-made job's share less the other's, per
    // pool, each job's share in [0, 1); the file holds their mean.
    let mut splits = 0.0;
    for p in pools {
        let js: Vec<f64> = p["job_shares"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert!(
            js.len() == 2 && js.iter().all(|s| (0.0..1.0).contains(s)),
            "{v}"
        );
        let split = p["split"].as_f64().unwrap();
        assert!((split - (js[0] - js[1]) / 2.0).abs() < 1e-9, "{v}");
        splits += split / 2.0;
    }
    close("own_evict_split", splits.clamp(-0.5, 0.5));
    assert!(!c["kernel"].as_str().unwrap().is_empty(), "{v}");
    assert!(c["switch_run"]["switches"].as_u64().unwrap() > 0, "{v}");
    assert!(
        c["switch_run"]["paged_out_bytes"].as_u64().unwrap() > 0,
        "{v}"
    );

    let swf = bed.write(
        "t.swf",
        "1 0 0 100 1 -1 131072 1 100 -1 1 1 1 -1 1 -1 -1 -1\n\
         2 0 0 100 1 -1 131072 1 100 -1 1 1 1 -1 1 -1 -1 -1\n",
    );
    let sim = memgang()
        .args(["sim", "--swf"])
        .arg(&swf)
        .args(["--nodes", "1", "--node-memory", "200M", "--policy", "gang"])
        .args(["--quantum", "10s", "--switch", "ao/ai", "--device"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(sim.status.success(), "{}", text(&sim));
    assert!(text(&sim).contains("switches"), "{}", text(&sim));
}

/// Ctrl-C while the disk is probed: the probe finishes, nothing is
/// written, the probe file is gone and no switch run starts.
#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn calibrate_interrupted_writes_nothing_and_leaves_nothing() {
    require_root("calibrate_interrupted_writes_nothing_and_leaves_nothing");
    let bed = Bed::new();
    let file = bed.dir.path().join("device.json");
    let probes = || -> Vec<std::path::PathBuf> {
        ["/var/tmp", "/var/lib/memgang"]
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains(".memgang-bandwidth-"))
            .collect()
    };
    let child = memgang()
        .arg("calibrate")
        .arg("-o")
        .arg(&file)
        .args(["--sample", "256M", "--random-for", "3s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill has no memory-safety preconditions; pid is our child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("interrupted"), "{}", text(&out));
    assert!(!text(&out).contains("switch run:"), "{}", text(&out));
    assert!(!file.exists(), "{} written", file.display());
    let left: Vec<_> = probes()
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&format!("-{pid}-")))
        .collect();
    assert!(left.is_empty(), "probe files left: {left:?}");
    assert!(
        leftover_cgroups(pid).is_empty(),
        "{:?}",
        leftover_cgroups(pid)
    );
}

/// `testbed bandwidth --faults` adds the fault passes that benches store
/// beside their runs (random-reads.json): a random fault reads one page,
/// an in-order one a readahead window; and leaves no group behind. Too
/// small a sample is refused with what to give.
#[test]
#[ignore = "needs root: cgroups, swap (scripts/test runs it as root)"]
fn testbed_bandwidth_times_faults_when_asked() {
    require_root("testbed_bandwidth_times_faults_when_asked");
    let _bed = Bed::new();
    let (pid, out) = run_with_pid(memgang().args([
        "testbed",
        "bandwidth",
        "--dir",
        "/var/tmp",
        "--json",
        "--faults",
        "32M",
    ]));
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["readahead_pages"].as_f64().unwrap() >= 2.0, "{v}");
    let reads = v["readahead_reads"].as_f64().unwrap();
    assert!(reads.is_finite() && reads > 0.0, "{v}");
    assert!(
        v["faults"]["random"]["pages_per_fault"].as_f64().unwrap() < 1.5,
        "{v}"
    );
    let left = fault_groups(pid);
    assert!(left.is_empty(), "fault-timing groups left: {left:?}");

    let small = memgang()
        .args([
            "testbed",
            "bandwidth",
            "--dir",
            "/var/tmp",
            "--faults",
            "1M",
        ])
        .output()
        .unwrap();
    assert!(!small.status.success());
    assert!(text(&small).contains("at least 16M"), "{}", text(&small));
}
