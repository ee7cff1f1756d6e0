//! detect() on this machine, and MEMGANG_CGROUP forcing. One test function,
//! since the environment is shared by the whole test process.

use memgang_linux::cgroup::{self, CgroupVersion};

#[test]
fn detect_on_this_machine() {
    std::env::remove_var("MEMGANG_CGROUP");
    let mounts = cgroup::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let v1_memory = mounts
        .iter()
        .any(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "memory"));
    let v2_memory = mounts
        .iter()
        .any(|m| m.fstype == "cgroup2" && cgroup::v2::has_controller(&m.mount_point, "memory"));
    eprintln!("v1 memory mounted: {v1_memory}; cgroup2 with memory: {v2_memory}");

    match cgroup::detect() {
        Ok(b) => {
            eprintln!("detected: {}", b.describe());
            let want = if v2_memory {
                CgroupVersion::V2
            } else {
                CgroupVersion::V1
            };
            assert_eq!(b.version(), want);
        }
        Err(e) => assert!(
            !v1_memory && !v2_memory,
            "detect failed although a memory controller exists: {e}"
        ),
    }

    std::env::set_var("MEMGANG_CGROUP", "v1");
    assert_eq!(cgroup::detect().is_ok(), v1_memory);
    std::env::set_var("MEMGANG_CGROUP", "v2");
    match cgroup::detect() {
        Ok(b) => assert_eq!(b.version(), CgroupVersion::V2),
        Err(e) => {
            assert!(!v2_memory);
            assert!(e.to_string().contains("MEMGANG_CGROUP=v2"), "{e}");
        }
    }
    std::env::set_var("MEMGANG_CGROUP", "v7");
    assert!(cgroup::detect().is_err());
    std::env::remove_var("MEMGANG_CGROUP");
}
