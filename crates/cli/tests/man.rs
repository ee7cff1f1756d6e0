//! Man pages and completions are generated from the same clap definition
//! as the command, so they name every verb that exists.

mod common;
use common::memgang;

#[test]
fn man_pages_cover_every_verb() {
    let dir = tempfile::tempdir().unwrap();
    let out = memgang()
        .args(["man", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for page in [
        "memgang.1",
        "memgang-run.1",
        "memgang-sim.1",
        "memgang-testbed-up.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page))
            .unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: {text}"
        );
    }
    let main = std::fs::read_to_string(dir.path().join("memgang.1")).unwrap();
    assert!(
        main.contains("calibrate") && main.contains("report"),
        "{main}"
    );
}

#[test]
fn completions_name_the_verbs_and_bad_shells_are_refused() {
    let out = memgang().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(
        script.contains("memgang") && script.contains("testbed"),
        "{script}"
    );
    let out = memgang().args(["completions", "tcsh"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}
