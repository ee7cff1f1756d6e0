//! Man pages and completions are generated from the same clap definition
//! as the command, so they name every verb that exists; the sections clap
//! has no notion of are checked here, and memgang.toml(5) against the
//! configuration's code (crates/daemon/src/config.rs): a key added there
//! must be documented, with its default, before this passes.

mod common;
use common::daemon::memgangd_exe;
use common::memgang;
use std::path::Path;
use std::process::Command;

/// The sections every page of ours has besides clap's.
const SECTIONS: [&str; 4] = ["EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"];

/// The page's text as read: roff's escapes and fonts taken out.
fn plain(roff: &str) -> String {
    roff.replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "")
        .replace("\\e", "\\")
}

fn has_section(page: &str, name: &str) -> bool {
    page.lines().any(|l| {
        l.strip_prefix(".SH ")
            .is_some_and(|h| h.trim_matches('"') == name)
    })
}

fn read(dir: &Path, page: &str) -> String {
    std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"))
}

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
        "memgang-workload.1",
    ] {
        let text = read(dir.path(), page);
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: {text}"
        );
    }
    let main = read(dir.path(), "memgang.1");
    // Every visible verb, from the command's own help.
    let help = memgang().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    let verbs: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A verb at two spaces; its wrapped help deeper.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .collect();
    assert!(verbs.len() >= 15, "{verbs:?}");
    for v in &verbs {
        assert!(
            main.contains(&format!("memgang\\-{v}(1)")),
            "memgang.1 does not name the verb {v}"
        );
    }
    assert!(!main.contains("memgang\\-help"), "no help page: {main}");
    for page in ["memgang.1", "memgang-workload.1"] {
        let text = read(dir.path(), page);
        for s in SECTIONS {
            assert!(has_section(&text, s), "{page} has no {s} section:\n{text}");
        }
    }
    let workload = plain(&read(dir.path(), "memgang-workload.1"));
    for flag in ["--mib", "--pattern", "--iterations", "--ranks"] {
        assert!(workload.contains(flag), "memgang-workload.1 lacks {flag}");
    }
}

/// The fields of `struct File` in crates/daemon/src/config.rs: the keys
/// the daemon accepts.
fn config_keys() -> Vec<String> {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../daemon/src/config.rs"),
    )
    .unwrap();
    let body = src
        .split("struct File {")
        .nth(1)
        .and_then(|b| b.split('}').next())
        .expect("struct File in config.rs");
    body.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.is_empty() && !k.starts_with("//"))
        .collect()
}

#[test]
fn daemon_pages_document_every_key_with_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(memgangd_exe())
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let daemon = read(dir.path(), "memgangd.8");
    let conf = read(dir.path(), "memgang.toml.5");
    for (page, text) in [("memgangd.8", &daemon), ("memgang.toml.5", &conf)] {
        for s in SECTIONS {
            assert!(has_section(text, s), "{page} has no {s} section:\n{text}");
        }
    }
    // Pointers that once led nowhere.
    assert!(!daemon.contains("memgangd\\-help"), "{daemon}");
    assert!(!plain(&daemon).contains("dist/"), "{daemon}");
    assert!(plain(&daemon).contains("--check-config"), "{daemon}");

    // Every key, each with its unit and default; a literal default is the
    // code's: a file holding only `key = default` reads the same as none
    // (memgangd --check-config prints the effective settings).
    let keys = config_keys();
    assert!(keys.len() >= 14, "{keys:?}");
    let conf = plain(&conf);
    let entries: Vec<&str> = conf.split(".TP\n.B ").skip(1).collect();
    let effective = |text: &str| -> String {
        let file = dir.path().join("check.toml");
        std::fs::write(&file, text).unwrap();
        let out = Command::new(memgangd_exe())
            .arg("--check-config")
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{text}: {out:?}");
        // The settings, without the notes (which say "the default").
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .map(|l| l.split(" # ").next().unwrap().trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let none = effective("");
    for key in &keys {
        let entry = entries
            .iter()
            .find(|e| e.lines().next() == Some(key.as_str()))
            .unwrap_or_else(|| panic!("memgang.toml(5) does not document the key {key}"));
        assert!(entry.contains("Unit: "), "{key} has no unit: {entry}");
        let default = entry
            .lines()
            .find_map(|l| l.strip_prefix("Default: "))
            .unwrap_or_else(|| panic!("{key} has no default: {entry}"))
            .trim_end_matches('.');
        if default.starts_with('"')
            || default.parse::<f64>().is_ok()
            || default == "true"
            || default == "false"
        {
            assert_eq!(
                effective(&format!("{key} = {default}\n")),
                none,
                "memgang.toml(5) says {key} defaults to {default}; memgangd disagrees"
            );
        }
    }
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
