//! Every command in README.md's command blocks is run or checked, so that
//! an example cannot rot (issue 34: the service example exited 2 for
//! months because `memgang-workload --pattern` had become required).
//!
//! Each command is classified: run (`memgang-workload` here with its real
//! arguments; the client verbs against a memgangd in the root test),
//! argument-checked (`memgang`/`memgangd` with `--help` after the README's
//! own arguments, so clap parses every flag and value; synopses by each
//! flag and value they name; scripts and paths by existence), named only
//! (with the reason it cannot run here), or output. A command that fits
//! none fails the test: a new example must be handled here. The `memgang`
//! commands in docs/*.md are argument-checked too.

mod common;

use common::daemon::{is_final, memgangd_exe, output_within, Daemon};
use common::{memgang, require_root, text};
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memgang"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// One command line of a document, its comment apart.
#[derive(Debug, Clone)]
struct Line {
    file: String,
    line: usize,
    cmd: String,
    comment: String,
}

/// `cmd` and its `# comment` (a `#` at the start or after a blank, outside quotes).
fn split_comment(s: &str) -> (String, String) {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => {
                return (s[..i].trim().to_string(), s[i + 1..].trim().to_string())
            }
            _ => {}
        }
        prev = c;
    }
    (s.trim().to_string(), String::new())
}

/// The command lines of a markdown file's shell blocks: indented blocks
/// and fenced blocks without a language (or sh/bash); of toml blocks, the
/// jobs' `command = [...]` arrays. Continuations (`\`, a synopsis line
/// starting with `[`, a comment-only line) join the line before.
fn command_lines(file: &str) -> Vec<Line> {
    let body = std::fs::read_to_string(repo().join(file)).unwrap();
    // (line number, block number, text)
    let mut raw: Vec<(usize, usize, String)> = Vec::new();
    let mut fence: Option<String> = None;
    let (mut prev_blank, mut indented, mut block) = (true, false, 0);
    for (i, l) in body.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = l.trim_start().strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(rest.trim().to_string()),
            };
            block += 1;
            (prev_blank, indented) = (false, false);
            continue;
        }
        if let Some(lang) = &fence {
            match lang.as_str() {
                "" | "sh" | "bash" | "shell" | "console" => raw.push((n, block, l.to_string())),
                "toml" => {
                    if let Some(arr) = l.trim().strip_prefix("command = ") {
                        let arr = split_comment(arr).0;
                        let words: Vec<String> = serde_json::from_str(&arr)
                            .unwrap_or_else(|e| panic!("{file}:{n}: command array: {e}"));
                        raw.push((n, block, words.join(" ")));
                        block += 1;
                    }
                }
                _ => {}
            }
            continue;
        }
        if l.trim().is_empty() {
            prev_blank = true;
            continue;
        }
        if l.starts_with("    ") && (prev_blank || indented) {
            if !indented {
                block += 1;
            }
            indented = true;
            raw.push((n, block, l[4..].to_string()));
        } else {
            indented = false;
        }
        prev_blank = false;
    }
    let mut out: Vec<(usize, Line)> = Vec::new();
    for (n, b, l) in raw {
        let (cmd, comment) = split_comment(&l);
        let t = l.trim_start();
        if let Some((_, last)) = out.last_mut().filter(|(lb, _)| *lb == b) {
            if cmd.is_empty() {
                last.comment = format!("{} {comment}", last.comment);
                continue;
            }
            if t.starts_with('[') || last.cmd.ends_with('\\') {
                last.cmd = format!("{} {cmd}", last.cmd.trim_end_matches('\\').trim_end());
                last.comment = format!("{} {comment}", last.comment);
                continue;
            }
        }
        if cmd.is_empty() {
            continue;
        }
        out.push((
            b,
            Line {
                file: file.to_string(),
                line: n,
                cmd,
                comment,
            },
        ));
    }
    out.into_iter().map(|(_, l)| l).collect()
}

/// Shell words (quotes removed; no expansion).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quote, mut any, mut depth, mut prev) = (None, false, 0, ' ');
    for c in s.chars() {
        // `$(...)` stays one word.
        if quote.is_none() && c == '(' && prev == '$' {
            depth += 1;
        } else if quote.is_none() && c == ')' && depth > 0 {
            depth -= 1;
        }
        prev = c;
        match (quote, c) {
            (_, c) if depth > 0 => {
                cur.push(c);
                any = true;
            }
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// The commands of a line: split at `&&`, a trailing `&` dropped, then
/// `sudo [-E]` and `VAR=value` prefixes dropped.
fn commands(cmd: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for part in words(cmd).split(|w| w == "&&") {
        let mut w: Vec<String> = part.to_vec();
        if w.last().is_some_and(|l| l == "&") {
            w.pop();
        }
        while let Some(first) = w.first() {
            let env = first.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            });
            if first == "sudo" || first == "-E" || env {
                w.remove(0);
            } else {
                break;
            }
        }
        if !w.is_empty() {
            out.push(w);
        }
    }
    out
}

/// A placeholder such as EXPERIMENT.toml, COMMAND..., PID2, FILE.
fn placeholder(w: &str) -> bool {
    let stem = w.split('.').next().unwrap_or("");
    stem.len() >= 2
        && stem.chars().any(|c| c.is_ascii_uppercase())
        && stem
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[derive(Debug, Clone, PartialEq)]
enum How {
    Run,
    ArgChecked,
    Named(&'static str),
    Output,
}

const CLIENT_VERBS: &[&str] = &["submit", "status", "show", "follow", "wait", "cancel"];

#[derive(Default)]
struct Checker {
    helps: HashMap<Vec<String>, String>,
    errors: Vec<String>,
    table: Vec<(String, How, String)>,
}

impl Checker {
    fn help(&mut self, path: &[String]) -> String {
        if let Some(h) = self.helps.get(path) {
            return h.clone();
        }
        let out = memgang().args(path).arg("--help").output().unwrap();
        assert!(
            out.status.success(),
            "memgang {path:?} --help: {}",
            text(&out)
        );
        let h = String::from_utf8_lossy(&out.stdout).to_string();
        self.helps.insert(path.to_vec(), h.clone());
        h
    }

    fn subcommands(&mut self, path: &[String]) -> Vec<String> {
        let h = self.help(path);
        h.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    }

    fn error(&mut self, at: &Line, what: String) {
        self.errors
            .push(format!("{}:{}: `{}`: {what}", at.file, at.line, at.cmd));
    }

    /// Relative paths into the repository that an example names exist.
    fn paths_exist(&mut self, at: &Line, args: &[String]) {
        for a in args {
            let a = a.trim_matches(|c| c == '[' || c == ']');
            let top = a.split('/').next().unwrap_or("");
            let ours = ["examples", "scripts", "docs", "bench", "dist", "crates"].contains(&top);
            if ours && a.contains('/') && !a.contains('*') && !repo().join(a).exists() {
                self.error(at, format!("{a} does not exist"));
            }
        }
    }

    /// `memgang ARGS`: the verb path must exist; a concrete line is parsed
    /// by clap itself (`--help` after its arguments: every flag and value
    /// before it is checked); a synopsis by each flag it names and each
    /// value alternative. Flags named in the comment must exist too.
    /// Returns the verb path.
    fn memgang(&mut self, at: &Line, args: &[String]) -> Vec<String> {
        let mut path: Vec<String> = Vec::new();
        let mut i = 0;
        while i < args.len() && self.subcommands(&path).contains(&args[i]) {
            path.push(args[i].clone());
            i += 1;
        }
        if path.is_empty() {
            self.error(at, "no memgang verb".into());
            return path;
        }
        let rest = &args[i..];
        let synopsis = rest.iter().any(|w| {
            w.contains('[') || w.contains(']') || w.contains("...") || w == "|" || placeholder(w)
        });
        let help = self.help(&path);
        let has_flag = |f: &str| {
            help.match_indices(f).any(|(k, _)| {
                let after = help[k + f.len()..].chars().next().unwrap_or(' ');
                let before = help[..k].chars().last().unwrap_or(' ');
                !(after.is_alphanumeric() || after == '-' || before.is_alphanumeric())
            })
        };
        let mut missing = Vec::new();
        for w in at.comment.split_whitespace() {
            let f = w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '-'));
            if f.starts_with("--") && !has_flag(f) {
                missing.push(f.to_string());
            }
        }
        if synopsis {
            let mut j = 0;
            // `testbed status | down | bandwidth`: siblings of the last verb.
            while j + 1 < rest.len() && rest[j] == "|" {
                let siblings = self.subcommands(&path[..path.len() - 1]);
                if !siblings.contains(&rest[j + 1]) {
                    missing.push(format!("verb {}", rest[j + 1]));
                }
                j += 2;
            }
            let mut flag: Option<String> = None;
            for w in &rest[j..] {
                let w = w.trim_matches(|c| c == '[' || c == ']');
                if w == "--" {
                    break;
                }
                if w.starts_with('-') && w.len() > 1 && !w.starts_with("-o=") {
                    let f = w.split('=').next().unwrap();
                    if !has_flag(f) {
                        missing.push(f.to_string());
                    }
                    flag = Some(f.to_string());
                    continue;
                }
                if let Some(f) = flag.take() {
                    for alt in w.split('|') {
                        if alt.contains("...") || placeholder(alt) || alt.is_empty() {
                            continue;
                        }
                        let out = memgang()
                            .args(&path)
                            .args([f.as_str(), alt, "--help"])
                            .output()
                            .unwrap();
                        if !out.status.success() {
                            self.error(at, format!("{f} {alt}: {}", text(&out)));
                        }
                    }
                }
            }
        } else {
            let mut argv: Vec<String> = args.to_vec();
            let at_dashes = argv.iter().position(|w| w == "--").unwrap_or(argv.len());
            argv.insert(at_dashes, "--help".into());
            let out = memgang().args(&argv).output().unwrap();
            if !out.status.success() {
                self.error(at, format!("clap refuses it: {}", text(&out)));
            }
        }
        if !missing.is_empty() {
            self.error(
                at,
                format!("not in `memgang {} --help`: {missing:?}", path.join(" ")),
            );
        }
        self.paths_exist(at, rest);
        path
    }

    /// Classify (and check) one README command; None: not classifiable.
    fn readme(&mut self, at: &Line, w: &[String]) -> Option<How> {
        let prog = w[0].as_str();
        let how = match prog {
            "memgang" | "target/release/memgang" => {
                let path = self.memgang(at, &w[1..]);
                if path.len() == 1 && path[0] == "submit" {
                    // The job's own command is an example too.
                    if let Some(k) = w.iter().position(|x| x == "--") {
                        let inner = &w[k + 1..];
                        let how = self.readme(at, inner);
                        self.record(at, inner, how);
                    }
                }
                if path.len() == 1 && CLIENT_VERBS.contains(&path[0].as_str()) {
                    How::Run
                } else {
                    How::ArgChecked
                }
            }
            "memgang-workload" => {
                let mut c = Command::new(bin_dir().join("memgang-workload"));
                c.args(&w[1..]);
                let out = output_within(c, Duration::from_secs(120));
                if !out.status.success() || !String::from_utf8_lossy(&out.stdout).contains(": ok") {
                    self.error(at, format!("the workload failed: {}", text(&out)));
                }
                How::Run
            }
            "target/release/memgangd" | "memgangd"
                if w.get(1).is_some_and(|a| a == "--check-config") =>
            {
                // Needs no root: run as written.
                let out = Command::new(memgangd_exe()).args(&w[1..]).output().unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() || !stdout.contains("pool_memory = ") {
                    self.error(
                        at,
                        format!("memgangd --check-config failed: {}", text(&out)),
                    );
                }
                How::Run
            }
            "install" => {
                // The release build copied onto PATH: each a binary this
                // workspace builds, into a directory on every user's PATH.
                let bins: Vec<&String> = w
                    .iter()
                    .filter(|a| a.starts_with("target/release/"))
                    .collect();
                for b in &bins {
                    let name = b.trim_start_matches("target/release/");
                    if !bin_dir().join(name).exists() {
                        self.error(at, format!("{b}: the workspace builds no binary {name}"));
                    }
                }
                let dest = w.last().unwrap().trim_end_matches('/');
                if bins.is_empty() || !["/usr/local/bin", "/usr/bin"].contains(&dest) {
                    self.error(
                        at,
                        format!("install of the build into {dest}: not a directory on PATH"),
                    );
                }
                How::Named("copies the release build into /usr/local/bin as root; the tests run the same binaries from target/")
            }
            "target/release/memgangd" | "memgangd" => {
                let out = Command::new(memgangd_exe())
                    .args(&w[1..])
                    .arg("--help")
                    .output()
                    .unwrap();
                if !out.status.success() {
                    self.error(at, format!("memgangd refuses it: {}", text(&out)));
                }
                How::ArgChecked
            }
            "cargo" => {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let sub = w.get(1)?.clone();
                let out = Command::new(cargo)
                    .args([sub.as_str(), "--help"])
                    .output()
                    .unwrap();
                let help = String::from_utf8_lossy(&out.stdout).to_string();
                for f in w[2..].iter().filter(|f| f.starts_with("--")) {
                    if !help.contains(f.as_str()) {
                        self.error(at, format!("not in `cargo {sub} --help`: {f}"));
                    }
                }
                if sub == "install" {
                    let Some(k) = w.iter().position(|x| x == "--path") else {
                        self.error(at, "cargo install without --path".into());
                        return Some(How::ArgChecked);
                    };
                    let manifest = repo().join(&w[k + 1]).join("Cargo.toml");
                    let toml = std::fs::read_to_string(&manifest).unwrap_or_default();
                    // The comment's first `name` is the binary it installs.
                    let bin = at.comment.split('`').nth(1).unwrap_or("");
                    if bin.is_empty() || !toml.contains(&format!("name = \"{bin}\"")) {
                        self.error(
                            at,
                            format!("{} builds no binary `{bin}`", manifest.display()),
                        );
                    }
                } else if sub != "build" {
                    return None;
                }
                How::ArgChecked
            }
            p if p.starts_with("scripts/") => {
                let script = repo().join(p);
                let exec = std::fs::metadata(&script)
                    .map(|m| m.permissions().mode() & 0o111 != 0)
                    .unwrap_or(false);
                if !exec {
                    self.error(at, format!("{p} is missing or not executable"));
                }
                let body = std::fs::read_to_string(&script).unwrap_or_default();
                for a in &w[1..] {
                    let word = a.starts_with("--") || a.chars().all(|c| c.is_ascii_lowercase());
                    if word && !body.contains(a.as_str()) {
                        self.error(at, format!("{p} knows no {a}"));
                    }
                }
                How::ArgChecked
            }
            "apt" | "apt-get"
                if matches!(w.get(1).map(String::as_str), Some("remove" | "purge")) =>
            {
                let deb = std::fs::read_to_string(repo().join("scripts/deb")).unwrap_or_default();
                for pkg in &w[2..] {
                    let ours = pkg == "memgang" || deb.contains(&format!("lib_files {pkg}"));
                    if !ours {
                        self.error(at, format!("{pkg}: not a package scripts/deb builds"));
                    }
                }
                How::Named(
                    "removes the packages as root; scripts/vm removes and purges them in its VM",
                )
            }
            "apt" | "apt-get" => {
                let deb = std::fs::read_to_string(repo().join("scripts/deb")).unwrap_or_default();
                let meta = std::fs::read_to_string(repo().join("crates/cli/Cargo.toml")).unwrap();
                let pkg = w.last().unwrap();
                if !(pkg.starts_with("./target/debian/memgang_")
                    && deb.contains("target/debian")
                    && meta.contains("[package.metadata.deb]"))
                {
                    self.error(at, "not the package scripts/deb builds".into());
                }
                How::Named("needs scripts/deb's release build and root apt on this host; scripts/vm installs the .deb in its VM")
            }
            "export" => {
                let script = std::fs::read_to_string(repo().join("scripts/slurm-cluster")).unwrap();
                if !(w[1].starts_with("SLURM_CONF=/run/memgang-slurm/")
                    && script.contains("/run/memgang-slurm")
                    && script.contains("slurm.conf"))
                {
                    self.error(at, "not the slurm.conf scripts/slurm-cluster writes".into());
                }
                How::Named(
                    "a shell setting for the Slurm example; the file is scripts/slurm-cluster's",
                )
            }
            "sbatch" => {
                // The Slurm tests' cluster harness (tests/slurm.rs and
                // tests/slurm_crash.rs) submits their jobs.
                let t = std::fs::read_to_string(repo().join("crates/cli/tests/common/slurm.rs"))
                    .unwrap();
                if !t.contains("\"sbatch\"") {
                    self.error(
                        at,
                        "tests/common/slurm.rs (the Slurm tests' harness) no longer submits through sbatch".into(),
                    );
                }
                How::Named(
                "Slurm's own, against the emulated cluster of scripts/slurm-cluster (the Slurm tests submit through sbatch, tests/common/slurm.rs)",
                )
            }
            "systemctl" | "journalctl" => {
                let unit = w.last().unwrap().trim_end_matches(".service");
                if !repo().join(format!("dist/{unit}.service")).exists() {
                    self.error(at, format!("no dist/{unit}.service"));
                }
                How::Named("systemd's; the VM lane (scripts/vm) runs memgangd under systemd")
            }
            p if p.starts_with('|') => How::Output,
            _ => return None,
        };
        Some(how)
    }

    fn record(&mut self, at: &Line, w: &[String], how: Option<How>) {
        match how {
            Some(h) => self
                .table
                .push((w.join(" "), h, format!("{}:{}", at.file, at.line))),
            None => self.error(
                at,
                format!(
                    "cannot classify `{}`: handle it in crates/cli/tests/readme.rs",
                    w.join(" ")
                ),
            ),
        }
    }
}

fn readme_commands() -> Vec<(Line, Vec<String>)> {
    let mut out = Vec::new();
    for l in command_lines("README.md") {
        if l.cmd.starts_with('|') {
            out.push((l.clone(), vec![l.cmd.clone()]));
            continue;
        }
        for w in commands(&l.cmd) {
            out.push((l.clone(), w));
        }
    }
    out
}

#[test]
fn every_readme_command_is_classified_and_checked() {
    let mut c = Checker::default();
    let cmds = readme_commands();
    for (at, w) in &cmds {
        let how = c.readme(at, w);
        c.record(at, w, how);
    }
    for (cmd, how, at) in &c.table {
        println!("{at:<16} {how:<60?} {cmd}");
    }
    assert!(c.errors.is_empty(), "README.md:\n{}", c.errors.join("\n"));
    // The extraction itself: the examples this test was written for.
    let runs: Vec<&String> = c
        .table
        .iter()
        .filter(|(_, h, _)| *h == How::Run)
        .map(|(cmd, _, _)| cmd)
        .collect();
    assert!(
        runs.iter().any(|r| r.starts_with("memgang-workload ")),
        "no workload example found: {runs:?}"
    );
    for verb in ["submit", "status", "follow", "wait", "cancel"] {
        assert!(
            runs.iter()
                .any(|r| r.starts_with(&format!("memgang {verb}"))),
            "no `memgang {verb}` found: {runs:?}"
        );
    }
}

#[test]
fn docs_memgang_commands_name_existing_flags() {
    let mut c = Checker::default();
    let mut n = 0;
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    for f in files {
        let name = format!("docs/{}", f.file_name().unwrap().to_string_lossy());
        for l in command_lines(&name) {
            for w in commands(&l.cmd) {
                if w[0] == "memgang" || w[0] == "target/release/memgang" {
                    let path = c.memgang(&l, &w[1..]);
                    println!(
                        "{}:{:<5} memgang {:<12} {}",
                        l.file,
                        l.line,
                        path.join(" "),
                        l.cmd
                    );
                    n += 1;
                }
            }
        }
    }
    assert!(c.errors.is_empty(), "docs:\n{}", c.errors.join("\n"));
    assert!(n >= 5, "only {n} memgang commands found in docs/*.md");
}

/// The README's service example as written, in its order, against a
/// memgangd of the test's own, as user nobody: the job id its comment shows (1) is the
/// one `submit` printed; `cancel` (after `wait`, the job has ended) is
/// given a job still running, submitted for it.
#[test]
#[ignore]
fn readme_client_verbs_run_against_memgangd() {
    require_root("readme_client_verbs_run_against_memgangd");
    let d = Daemon::new("pool_memory = \"1G\"\nswap_reserve = \"0\"\n");
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // "Then, as any user": nobody, whom Debian always has.
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("user nobody");
    // A directory of nobody's own: `submit` writes memgang-ID.out there.
    let home = d.dir.path().join("nobody");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(nobody.uid.as_raw()), Some(nobody.gid.as_raw())).unwrap();
    let run = |args: &[String]| -> Output {
        let mut c = memgang();
        c.args(args)
            .env("MEMGANG_SOCKET", d.socket())
            .env("PATH", &path)
            .env("HOME", "/")
            .uid(nobody.uid.as_raw())
            .gid(nobody.gid.as_raw())
            .current_dir(&home);
        output_within(c, Duration::from_secs(120))
    };
    let mut ids: Vec<String> = Vec::new();
    let mut ran = Vec::new();
    for (at, w) in readme_commands() {
        if w[0] != "memgang" || !CLIENT_VERBS.contains(&w[1].as_str()) {
            continue;
        }
        let verb = w[1].clone();
        let mut args: Vec<String> = w[1..].to_vec();
        let mut target = ids.first().cloned();
        if verb == "cancel" {
            let out = run(&[
                "submit".into(),
                "--memory".into(),
                "100M".into(),
                "--".into(),
                "sleep".into(),
                "600".into(),
            ]);
            assert!(out.status.success(), "{}", text(&out));
            target = Some(String::from_utf8_lossy(&out.stdout).trim().to_string());
        }
        if verb != "submit" {
            for a in args.iter_mut().skip(1) {
                if a.parse::<u64>().is_ok() {
                    *a = target.clone().expect("a job id before it is used");
                }
            }
        }
        let out = run(&args);
        let where_ = format!(
            "{}:{}: `{}`\n{}\n{}",
            at.file,
            at.line,
            w.join(" "),
            text(&out),
            d.log()
        );
        assert!(out.status.success(), "{where_}");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        match verb.as_str() {
            "submit" => ids.push(stdout.trim().parse::<u64>().expect(&where_).to_string()),
            "status" => {
                // It lists jobs in progress: the job, unless it ended already.
                let id = ids.first().expect(&where_);
                let ended = is_final(&d.job(id.parse().unwrap()));
                assert!(stdout.contains(id.as_str()) || ended, "{where_}");
            }
            "follow" => assert!(stdout.contains("memgang-workload: ok"), "{where_}"),
            "cancel" => {
                let id: u64 = target.unwrap().parse().unwrap();
                let deadline = Instant::now() + Duration::from_secs(30);
                while d.job(id)["state"] != "cancelled" {
                    assert!(Instant::now() < deadline, "{where_}\n{:#?}", d.job(id));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            _ => {}
        }
        ran.push(verb);
    }
    for verb in ["submit", "status", "follow", "wait", "cancel"] {
        assert!(
            ran.contains(&verb.to_string()),
            "README has no `memgang {verb}` example: {ran:?}"
        );
    }
}
