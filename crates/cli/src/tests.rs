//! The command line as clap builds it: every verb and every argument says
//! what it is (`--help`, the man pages and the completions show it).

use clap::CommandFactory;

/// `verb path: what lacks help`, for every verb and argument under `cmd`
/// without help text (clap's own --help and --version aside).
fn without_help(cmd: &clap::Command, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if matches!(id, "help" | "version") {
            continue;
        }
        if arg.get_help().is_none() && arg.get_long_help().is_none() {
            let name = arg
                .get_long()
                .map(|l| format!("--{l}"))
                .unwrap_or_else(|| format!("<{}>", id.to_uppercase()));
            out.push(format!("{path}: {name}"));
        }
    }
    for sub in cmd.get_subcommands() {
        let here = format!("{path} {}", sub.get_name());
        if sub.get_about().is_none() && sub.get_long_about().is_none() {
            out.push(format!("{here}: the verb itself"));
        }
        out.extend(without_help(sub, &here));
    }
    out
}

#[test]
fn every_verb_and_argument_has_help() {
    let missing = without_help(&crate::Cli::command(), "memgang");
    assert!(
        missing.is_empty(),
        "without help text (add a doc comment):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_help_check_finds_an_argument_without_help() {
    let cmd = clap::Command::new("x")
        .arg(clap::Arg::new("fine").long("fine").help("says what"))
        .subcommand(
            clap::Command::new("verb")
                .about("does")
                .arg(clap::Arg::new("id"))
                .arg(clap::Arg::new("json").long("json").long_help("long help")),
        )
        .subcommand(clap::Command::new("mute"));
    assert_eq!(
        without_help(&cmd, "x"),
        ["x verb: <ID>", "x mute: the verb itself"]
    );
}

/// The help of `--{arg}` of the verb at `path` (names from the top).
fn help_of(path: &[&str], arg: &str) -> String {
    let mut cmd = crate::Cli::command();
    for name in path {
        cmd = cmd
            .find_subcommand(name)
            .unwrap_or_else(|| panic!("no verb {name}"))
            .clone();
    }
    let a = cmd
        .get_arguments()
        .find(|a| a.get_id() == arg)
        .unwrap_or_else(|| panic!("{path:?} has no --{arg}"));
    let help = a.get_long_help().or(a.get_help());
    help.map(|h| h.to_string()).unwrap_or_default()
}

#[test]
fn the_switch_help_names_every_mechanism_the_parser_takes() {
    for path in [&["run"][..], &["sim"], &["slurm", "run"]] {
        let help = help_of(path, "switch");
        let words: Vec<&str> = help
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        for m in memgang_core::switching::MECHANISMS.iter().chain(&["lru"]) {
            assert!(
                words.contains(m),
                "{path:?} --switch does not name {m}: {help}"
            );
            assert!(m.parse::<memgang_core::Switching>().is_ok(), "{m}");
        }
        assert!(help.contains("so/ao/ai"), "{path:?}: {help}");
    }
}

#[test]
fn the_plot_help_names_both_formats_it_writes() {
    let cmd = crate::Cli::command();
    let plot = cmd.find_subcommand("plot").unwrap();
    let about = plot.get_about().unwrap().to_string();
    assert!(about.contains("SVG") && about.contains("PNG"), "{about}");
    for sub in plot.get_subcommands() {
        let help = help_of(&["plot", sub.get_name()], "output");
        assert!(help.contains(".svg") && help.contains(".png"), "{help}");
    }
}
