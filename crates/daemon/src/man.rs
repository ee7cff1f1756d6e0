//! `memgangd man`: memgangd(8), from the clap definition with the sections
//! clap has no notion of, and memgang.toml(5), from the configuration's
//! table of keys (`config::KEYS`), so that the page lists every key with
//! its unit and default (crates/cli/tests/man.rs checks both pages).

use crate::config::{KeyDefault, KEYS};
use std::io::Write;
use std::path::Path;

const MEMGANGD: &str = r#".SH "EXIT STATUS"
.TP
.B 0
stopped by SIGTERM, SIGINT or SIGHUP (every job thawed and left running
for the next start); with \fB\-\-check\-config\fR, the file is valid.
.TP
.B 1
an error, said on standard error: not root, a configuration refused (its
file, line and key), another memgangd holding the state directory, no
cgroup hierarchy with a memory controller.
.TP
.B 2
a bad command line (the usage is printed).
.SH ENVIRONMENT
.TP
.B RUST_LOG
log filter (\fBinfo\fR by default; e.g. \fBdebug\fR). Logs go to standard
error: under systemd to the journal, plain; on a terminal with colour and
time.
.TP
.B NOTIFY_SOCKET
set by systemd (\fBType=notify\fR): memgangd reports ready once its socket
accepts clients.
.TP
.B MEMGANG_CGROUP
\fBv1\fR or \fBv2\fR: the cgroup hierarchy to use where both are mounted.
.SH FILES
.TP
.I /etc/memgang/memgang.toml
the configuration, \fBmemgang.toml\fR(5); without it memgangd runs with the
defaults.
.TP
.I /var/lib/memgang/
the state directory: \fIjournal.jsonl\fR (every job, fsynced), \fIjobs/ID/\fR
(a job's output and status), \fIpools\fR (the pool cgroups this daemon
made), \fIlock\fR (one daemon per state directory).
.TP
.I /run/memgang/memgang.sock
the clients' socket, mode 0666.
.TP
.I /run/memgang/memgang.prom
the metrics, rewritten every 5 s.
.TP
.I /usr/lib/systemd/system/memgangd.service\fR, \fI/usr/lib/systemd/system/memgang\-jobs.service
the units: the daemon, and (cgroup v2) the delegated group its pools and
jobs live in, held by \fBmemgangd hold\fR.
.SH EXAMPLES
Check a configuration as any user before a restart, then restart:
.PP
.nf
.RS
memgangd \-\-check\-config /etc/memgang/memgang.toml
sudo systemctl restart memgangd
journalctl \-u memgangd
.RE
.fi
.PP
Run a second daemon by hand with its own state directory and socket
(both set in its file), in the foreground:
.PP
.nf
.RS
sudo memgangd \-\-config /tmp/test.toml
MEMGANG_SOCKET=/tmp/test.sock memgang status
.RE
.fi
.SH "SEE ALSO"
\fBmemgang.toml\fR(5), \fBmemgang\fR(1), \fBsystemctl\fR(1),
\fBjournalctl\fR(1), \fI/usr/share/doc/memgang/daemon.md\fR
"#;

const DESCRIPTION: &str = "memgangd runs users' jobs on one node: they submit with \
`memgang submit`, it admits a job only while the pool plus swap holds it (a job waits \
rather than be OOM-killed), runs it as its user in its own cgroup under the configured \
policy, and keeps every job in a journal so that a crash or restart loses none (running \
jobs are adopted). It runs as root, normally as memgangd.service; its settings are in \
memgang.toml(5).";

/// memgangd.8 and memgang.toml.5 into `out`.
pub fn write(cmd: clap::Command, out: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    // Its options without its internal subcommands (shim, hold, man).
    let page = clap::Command::new("memgangd")
        .version(env!("CARGO_PKG_VERSION"))
        .about(cmd.get_about().cloned().unwrap_or_default())
        .long_about(DESCRIPTION)
        .args(cmd.get_arguments().cloned());
    let man = clap_mangen::Man::new(page).section("8");
    let mut f = std::fs::File::create(out.join("memgangd.8"))?;
    man.render_title(&mut f)?;
    man.render_name_section(&mut f)?;
    man.render_synopsis_section(&mut f)?;
    man.render_description_section(&mut f)?;
    man.render_options_section(&mut f)?;
    f.write_all(MEMGANGD.as_bytes())?;
    man.render_version_section(&mut f)?;
    std::fs::write(out.join("memgang.toml.5"), config_page())
}

/// Text for roff: hyphens as minus signs (copyable options), backslashes
/// escaped.
fn roff(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

fn config_page() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut p = format!(
        r#".TH memgang.toml 5 "" "memgang {version}" "File Formats"
.SH NAME
memgang.toml \- memgangd's configuration
.SH SYNOPSIS
.I /etc/memgang/memgang.toml
.SH DESCRIPTION
A TOML file of \fIkey\fR = \fIvalue\fR lines; every key is optional and
the defaults work on a node with swap. An unknown key, or a value memgangd
cannot use, is refused at start with the file, the line and the key, and
so is it by \fBmemgangd \-\-check\-config\fR, which any user may run.
Changes take effect at the next start (\fBsystemctl restart memgangd\fR;
running jobs are adopted).
.SH KEYS
"#
    );
    for k in KEYS {
        let default = match k.default {
            KeyDefault::Value(v) => format!("\\fB{}\\fR", roff(v)),
            KeyDefault::Phrase(t) => roff(t),
        };
        p += &format!(
            ".TP\n.B {}\n{}\n.br\nUnit: {}.\n.br\nDefault: {default}.\n",
            k.name,
            roff(k.doc),
            roff(k.unit)
        );
    }
    p += r#".SH "EXIT STATUS"
\fBmemgangd \-\-check\-config\fR \fIFILE\fR exits 0 when the file is valid
and 1 when it is not, saying \fIFILE\fR:\fILINE\fR and the key at fault;
memgangd itself exits 1 at start on such a file.
.SH ENVIRONMENT
memgangd reads no variable for its settings: they are all in this file.
Clients reach a socket elsewhere with \fBMEMGANG_SOCKET\fR (\fBmemgang\fR(1)).
.SH FILES
.TP
.I /etc/memgang/memgang.toml
the file memgangd reads (\fB\-\-config\fR names another); the package installs
it with every key at its default, as a conffile.
.SH EXAMPLES
A node that keeps 4 GiB for itself out of 64, gang\-schedules with
10\-minute quanta, and exports metrics to node_exporter:
.PP
.nf
.RS
pool_memory = "60G"
policy = "gang"
quantum = "10min"
switch = "so/ao/ai"
swap_reserve = "2G"
metrics_file = "/var/lib/prometheus/node\-exporter/memgang.prom"
.RE
.fi
.PP
Check it without root:
.PP
.nf
.RS
memgangd \-\-check\-config /etc/memgang/memgang.toml
.RE
.fi
.SH "SEE ALSO"
\fBmemgangd\fR(8), \fBmemgang\fR(1), \fI/usr/share/doc/memgang/daemon.md\fR
"#;
    p
}
