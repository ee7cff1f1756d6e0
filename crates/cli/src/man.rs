//! `memgang man`: memgang(1), a page per verb, and memgang-workload(1),
//! from the clap definitions (so they name every verb and flag that
//! exists), with the sections clap has no notion of (EXIT STATUS,
//! ENVIRONMENT, FILES, EXAMPLES, SEE ALSO) written here in roff and put
//! before the VERSION section. crates/cli/tests/man.rs checks that each
//! page has them.

use anyhow::{Context, Result};
use std::path::Path;

const MEMGANG: &str = r#".SH "EXIT STATUS"
.TP
.B 0
success; for \fBrun\fR, every job succeeded.
.TP
.B 1
an error, said on standard error: a bad experiment file (with its line), no
cgroup hierarchy with a memory controller, memgangd not reachable.
.TP
.B 2
a bad command line (the usage is printed).
.TP
.B 3
\fBrun\fR: some job failed (each is reported with its exit status and the
tail of its stderr).
.TP
.B 130
\fBrun\fR: interrupted (SIGINT or SIGTERM); every job was killed, none left
frozen, every cgroup removed.
.PP
\fBmemgang wait\fR exits with the job's own exit code (1 when it was killed
by a signal or cancelled).
.SH ENVIRONMENT
.TP
.B MEMGANG_SOCKET
memgangd's socket for the client verbs (\fBsubmit\fR, \fBstatus\fR,
\fBshow\fR, \fBfollow\fR, \fBwait\fR, \fBcancel\fR); default
\fI/run/memgang/memgang.sock\fR.
.TP
.B MEMGANG_CACHE
where \fBrun\fR keeps its batch baselines; default
\fI$XDG_CACHE_HOME/memgang\fR or \fI~/.cache/memgang\fR.
.TP
.B MEMGANG_CGROUP
\fBv1\fR or \fBv2\fR: the cgroup hierarchy to use where both are mounted.
.TP
.B MEMGANG_LOG
log filter (\fBinfo\fR by default; e.g. \fBdebug\fR).
.TP
.B COLUMNS
the width \fBstatus\fR fits its table to (80 when output is not a terminal).
.TP
.B NO_COLOR
set to anything but empty: no colour on a terminal either (\fBtop\fR, logs).
.SH FILES
.TP
.I /run/memgang/memgang.sock
memgangd's socket (see \fBMEMGANG_SOCKET\fR).
.TP
.I /usr/share/doc/memgang/
README.md, install.md and daemon.md: installation, the service, recovery,
metrics.
.SH EXAMPLES
Submit a job of 700 MiB to memgangd, follow its output and wait for its end:
.PP
.nf
.RS
id=$(memgang submit \-\-memory 700M \-\- memgang\-workload \-\-mib 600 \-\-pattern seq \-\-iterations 20)
memgang follow $id
memgang wait $id
memgang status \-\-all
.RE
.fi
.PP
Watch the node: which jobs run, are frozen, paging out or in, or wait,
and when the next switch comes (\fBq\fR quits); or print one frame:
.PP
.nf
.RS
memgang top
memgang top \-\-once
.RE
.fi
.PP
Run an experiment file on this node as root (no daemon), gang\-scheduled
with memgang's switch, and print its table:
.PP
.nf
.RS
sudo memgang testbed up \-\-swap 8G
sudo memgang run EXPERIMENT.toml \-\-policy gang \-\-switch so/ao/ai \-\-json out.json
memgang report out.json
.RE
.fi
.SH "SEE ALSO"
\fBmemgangd\fR(8), \fBmemgang.toml\fR(5), \fBmemgang\-workload\fR(1),
\fBsystemd.unit\fR(5)
"#;

const WORKLOAD: &str = r#".SH "EXIT STATUS"
.TP
.B 0
all ranks ran and verified every word.
.TP
.B 1
another error (e.g. mmap failed), with the errno text.
.TP
.B 2
bad arguments.
.TP
.B 3
data corruption found by the final self\-check.
.TP
.B 4
a rank failed or died, or the barrier broke.
.SH ENVIRONMENT
None is read.
.SH FILES
None: it allocates anonymous memory only.
.SH EXAMPLES
600 MiB visited in order 20 times, one rank (the examples' job):
.PP
.nf
.RS
memgang\-workload \-\-mib 600 \-\-pattern seq \-\-iterations 20
.RE
.fi
.PP
Four ranks meeting at a barrier after each of 10 random passes over 1 GiB,
with compute between page visits, submitted to memgangd:
.PP
.nf
.RS
memgang submit \-\-memory 1100M \-\- memgang\-workload \-\-mib 1024 \-\-ranks 4 \-\-pattern random \-\-iterations 10 \-\-compute 1
.RE
.fi
.SH "SEE ALSO"
\fBmemgang\fR(1), \fBmemgangd\fR(8)
"#;

/// memgang.1 and a page per verb, and memgang-workload.1, into `out`.
pub fn write(out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let cli = <crate::Cli as clap::CommandFactory>::command();
    clap_mangen::generate_to(cli.clone(), out)
        .with_context(|| format!("writing man pages to {}", out.display()))?;
    let cli = cli.disable_help_subcommand(true);
    let workload = <memgang_workload::Args as clap::CommandFactory>::command();
    for (cmd, sections) in [(cli, MEMGANG), (workload, WORKLOAD)] {
        let man = clap_mangen::Man::new(cmd);
        let path = out.join(man.get_filename());
        let mut page = Vec::new();
        man.render(&mut page)?;
        let page = with_sections(&String::from_utf8_lossy(&page), sections);
        std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `sections` put before clap's VERSION section (or at the end).
fn with_sections(page: &str, sections: &str) -> String {
    let at = page.find(".SH VERSION").unwrap_or(page.len());
    format!("{}{sections}{}", &page[..at], &page[at..])
}
