//! `memgangd --check-config` as a user (issue 46): it parses and checks a
//! configuration without root, prints the effective settings and what of
//! the node memgangd would use, and says the line and key at fault. As
//! root the test runs it as `nobody`; otherwise as the user running it.

mod common;

use common::daemon::memgangd_exe;
use common::text;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

/// memgangd with `args`, as a user who is not root.
fn as_user(args: &[&str]) -> Output {
    let mut c = Command::new(memgangd_exe());
    c.args(args).env_remove("RUST_LOG");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let nobody = nix::unistd::User::from_name("nobody")
            .unwrap()
            .expect("user nobody");
        c.uid(nobody.uid.as_raw()).gid(nobody.gid.as_raw());
    }
    c.output().unwrap()
}

#[test]
fn check_config_works_as_a_user() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let write = |name: &str, text: &str| -> String {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        p.display().to_string()
    };

    // Valid: the effective settings, the pool from the machine, swap, cgroups.
    let good = write(
        "good.toml",
        "policy = \"gang\"\nquantum = \"90s\"\nswap_reserve = \"1G\"\n",
    );
    let out = as_user(&["--check-config", &good]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    for want in [
        "policy = \"gang\"",
        "quantum = \"1m 30s\"",
        "swap_reserve = \"1G\"",
        "switch = \"so/ao/ai\"",
        "pool_memory = ",
        "RAM ",
        "swap",
        "cgroup v",
    ] {
        assert!(stdout.contains(want), "no {want:?} in:\n{stdout}");
    }
    let defaults = stdout
        .lines()
        .filter(|l| l.ends_with("# the default"))
        .count();
    assert!(defaults >= 8, "the defaults are marked:\n{stdout}");

    // A bad value: exit 1 with the file, the line and the key.
    let bad = write(
        "bad.toml",
        "# memgang\npolicy = \"gang\"\nquantum = \"0s\"\n",
    );
    let out = as_user(&["--check-config", &bad]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(stderr.contains(&format!("{bad}:3: quantum")), "{stderr}");

    // An unknown key: toml's message names the line and the key.
    let unknown = write("unknown.toml", "policy = \"gang\"\npool_memroy = \"1G\"\n");
    let out = as_user(&["--check-config", &unknown]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr.contains("line 2") && stderr.contains("pool_memroy"),
        "{stderr}"
    );

    // A file the user cannot read, or that is not there, is said so.
    let out = as_user(&["--check-config", "/nonexistent/memgang.toml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/memgang.toml"));

    // The daemon itself still refuses a user, and points at the check.
    let out = as_user(&["--config", &good]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr.contains("root") && stderr.contains("--check-config"),
        "{stderr}"
    );
}
