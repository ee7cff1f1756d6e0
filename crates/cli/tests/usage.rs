//! What a user meets first, without root: output into a pipe whose reader
//! has gone, NO_COLOR, sizes without a unit.

mod common;

use common::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// memgang alone (`common::memgang` wants the workload built too).
fn memgang() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memgang"))
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The write end of a pipe whose reader is gone: every write fails with
/// EPIPE, as when `head -1` has read its line and exited.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

/// Before: `memgang run --check | head -1` and `memgang completions bash
/// | head -1` panicked ("failed printing to stdout", exit 101). Every verb
/// that prints now ends quietly with exit 0 when its reader has gone
/// (crates/cli/src/out.rs says why 0 and not a SIGPIPE death).
#[test]
fn no_verb_panics_when_the_reader_of_its_output_has_gone() {
    let root = workspace();
    let dir = tempfile::tempdir().unwrap();
    let exp = root.join("examples/two-jobs.toml");
    let result = root.join("bench/results/baseline/2rank-batch.json");
    let svg = dir.path().join("makespan.svg");
    let (exp, result, svg) = (
        exp.to_str().unwrap(),
        result.to_str().unwrap(),
        svg.to_str().unwrap(),
    );
    let man = dir.path().join("man");
    let man = man.to_str().unwrap();
    let sim = [
        "sim",
        "--generate",
        "20",
        "--nodes",
        "2",
        "--node-memory",
        "4G",
    ];
    let verbs: Vec<Vec<&str>> = vec![
        vec!["run", "--check", exp],
        vec!["completions", "bash"],
        vec!["completions", "zsh"],
        vec!["report", result],
        vec!["report", "--json", result, result],
        vec!["plot", "makespan", result, "-o", svg],
        sim.to_vec(),
        [&sim[..], &["--json", "-"]].concat(),
        vec!["figures", "paper004"],
        vec!["testbed", "status"],
        vec!["man", "--out", man],
        vec!["--help"],
        vec!["run", "--help"],
        vec!["--version"],
    ];
    for verb in &verbs {
        let out = memgang()
            .args(verb)
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{verb:?}: {err}");
        assert!(err.is_empty(), "{verb:?}: {err}");
    }
    // What the verbs were asked to write besides stdout is written.
    assert!(Path::new(svg).is_file() && Path::new(man).join("memgang.1").is_file());

    // stderr gone as well: an error still ends the verb with its code
    // (1), not a panic (101); a check still succeeds.
    let out = memgang()
        .args(["report", "/no/such/results.json"])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = memgang()
        .args(["run", "--check", exp])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

/// `args` run in a pseudo-terminal (util-linux's `script`), so that clap
/// and the log colour as they would for a person; `no_color` sets
/// NO_COLOR. Everything the terminal got.
fn on_a_terminal(args: &str, no_color: bool) -> String {
    let exe = env!("CARGO_BIN_EXE_memgang");
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &format!("{exe} {args}"), "/dev/null"])
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null());
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd
        .output()
        .expect("util-linux's `script` runs the test in a pseudo-terminal: install util-linux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An SGR escape (`ESC [ ... m`): colour or bold.
fn has_colour(s: &str) -> bool {
    s.split('\x1b').skip(1).any(|rest| {
        rest.strip_prefix('[').is_some_and(|r| {
            let end = r.find(|c: char| !(c.is_ascii_digit() || c == ';'));
            end.is_some_and(|i| r[i..].starts_with('m'))
        })
    })
}

/// no-color.org: with NO_COLOR set, nothing is coloured; without it, on a
/// terminal, clap colours its help and errors (which shows the terminal
/// was one: the check can fail).
#[test]
fn no_color_turns_colour_off() {
    for args in ["run --help", "run --no-such-flag", "report --json"] {
        let coloured = on_a_terminal(args, false);
        assert!(
            has_colour(&coloured),
            "{args}: no colour on a terminal: {coloured:?}"
        );
        let plain = on_a_terminal(args, true);
        assert!(
            !has_colour(&plain),
            "{args}: colour under NO_COLOR: {plain:?}"
        );
        assert!(
            plain.contains("memgang") || plain.contains("error"),
            "{plain:?}"
        );
    }
    // Tables (comfy-table) are never coloured, terminal or not.
    let table = on_a_terminal("figures paper004", false);
    assert!(table.contains("Fig. 3") && !has_colour(&table), "{table:?}");
}

/// A size without its unit is refused, saying what and where, not read
/// as bytes.
#[test]
fn a_size_without_a_unit_is_refused_with_a_hint() {
    let out = memgang()
        .args([
            "sim",
            "--generate",
            "5",
            "--nodes",
            "1",
            "--node-memory",
            "700",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        err.contains("'--node-memory <NODE_MEMORY>'")
            && err.contains("\"700\" has no unit: write 700M, 700MiB or 700G"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("bare.toml");
    std::fs::write(
        &exp,
        "pool_memory = \"1G\"\n[[job]]\nname = \"a\"\ncommand = [\"true\"]\nmemory = \"700\"\n",
    )
    .unwrap();
    let out = memgang()
        .args(["run", "--check"])
        .arg(&exp)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        err.contains(&format!(
            "{}:5: job \"a\": memory \"700\" has no unit: write 700M, 700MiB or 700G",
            exp.display()
        )),
        "{err}"
    );
}
