//! The verbs that talk to memgangd: submit, status (list), show, cancel,
//! follow, wait. The socket is `$MEMGANG_SOCKET`, else memgangd's default.

use crate::out::{emit, note};
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use memgang_core::text::printable;
use memgang_core::units::{format_bytes, parse_bytes};
use memgang_proto::JobState;
use memgang_proto::{client::call, JobInfo, Request, Response};
use memgang_results::JobAccount;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// How often follow and wait ask again: a person notices half a second;
/// the daemon answers a request in well under a millisecond.
pub(crate) const POLL: Duration = Duration::from_millis(500);

#[derive(Subcommand)]
pub enum Verb {
    /// Submit a job to memgangd; prints its id. It runs as you, in this
    /// directory, with this environment.
    Submit {
        /// Its peak memory footprint, e.g. 2G: it starts only when the
        /// pool plus swap can hold it beside the jobs already running.
        #[arg(long, value_parser = parse_bytes)]
        memory: u64,
        /// The processes it runs in parallel (its ranks): a job takes a
        /// node's processors by them, as many nodes as its ranks over the
        /// node's CPUs, rounded up.
        #[arg(long, default_value_t = 1)]
        ranks: u32,
        /// A name for status (default: the program's name).
        #[arg(long, short = 'J', alias = "job-name")]
        name: Option<String>,
        #[command(flatten)]
        queue: crate::submit::QueueArgs,
        /// The command, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Your jobs (root: everyone's) in progress, as a table that fits the
    /// terminal (long fields cut; `show` has them in full), or JSON.
    #[command(alias = "list")]
    Status {
        /// Every job memgangd keeps as JSON (ended ones too, unless -t or
        /// -u narrow it), each with `user` and `elapsed_s` added.
        #[arg(long)]
        json: bool,
        /// Ended jobs too (finished, failed, cancelled: memgangd keeps
        /// them 7 days by default, see `keep_finished_for`).
        #[arg(short, long)]
        all: bool,
        /// Only jobs in these states, comma-separated: queued, running,
        /// suspended, finished, failed, cancelled, timeout, all (or
        /// squeue's PD, R, S, CD, F, CA, TO).
        #[arg(short = 't', long = "states", value_delimiter = ',')]
        states: Vec<String>,
        /// Only these users' jobs, comma-separated names or uids.
        #[arg(short = 'u', long = "user", value_delimiter = ',')]
        users: Vec<String>,
    },
    /// One job in full.
    Show {
        /// The job's id (`submit` printed it; `status` lists them).
        id: u64,
        /// Print the job as JSON (its fields as memgangd keeps them).
        #[arg(long)]
        json: bool,
    },
    /// Cancel jobs, as scancel: killed if they run or are suspended,
    /// never started if they wait. Exits 1 if any was refused.
    Cancel {
        /// The jobs' ids (`submit` printed them; `status` lists them); an
        /// array's id cancels its tasks.
        ids: Vec<u64>,
        /// Only (or, without ids, every job of yours) in these states,
        /// comma-separated: queued, running, suspended (or PD, R, S).
        #[arg(short = 't', long = "state", value_delimiter = ',')]
        states: Vec<String>,
        /// Only (or, without ids, every job) of these users, names or
        /// uids; a user may cancel only their own.
        #[arg(short = 'u', long = "user", value_delimiter = ',')]
        users: Vec<String>,
    },
    /// Print a job's output files (its --output, and --error if apart).
    Log {
        /// The job's id (`submit` printed it; `status` lists them).
        id: u64,
        /// Only the last N lines of each file.
        #[arg(short = 'n', long, value_name = "N")]
        lines: Option<usize>,
    },
    /// Print a job's output (stdout and stderr) as it comes, until it ends.
    Follow {
        /// The job's id (`submit` printed it; `status` lists them).
        id: u64,
    },
    /// Wait until a job ends; exits with its exit code.
    Wait {
        /// The job's id (`submit` printed it; `status` lists them).
        id: u64,
    },
}

fn socket() -> PathBuf {
    std::env::var_os("MEMGANG_SOCKET").map_or_else(
        || PathBuf::from(memgang_proto::DEFAULT_SOCKET),
        PathBuf::from,
    )
}

pub(crate) fn ask(req: &Request) -> Result<Response> {
    match call(&socket(), req)? {
        Response::Error { message } => bail!("{message}"),
        r => Ok(r),
    }
}

/// Every job the daemon shows us, a page at a time (it answers as many
/// as fit its `max_answer_bytes` and where to go on).
pub(crate) fn list() -> Result<Vec<JobInfo>> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let Response::Jobs { jobs, next } = ask(&Request::List { after })? else {
            bail!("unexpected answer to list");
        };
        all.extend(jobs);
        match next {
            // Ids only grow: a daemon that answered otherwise would loop.
            Some(n) if after.is_none_or(|a| n > a) => after = Some(n),
            _ => return Ok(all),
        }
    }
}

pub(crate) fn job(id: u64) -> Result<JobInfo> {
    match ask(&Request::Show { id })? {
        Response::Job { job } => Ok(*job),
        r => bail!("unexpected answer {r:?}"),
    }
}

/// Runs `verb`. A reader that closes stdout early ends it quietly with
/// exit 0 (crates/cli/src/out.rs says why); `wait`'s exit code stays the
/// job's: it writes only to stderr.
pub fn run(verb: Verb) -> Result<ExitCode> {
    match verb {
        Verb::Submit {
            memory,
            ranks,
            name,
            queue,
            command,
        } => {
            let req = Request::Submit {
                command,
                memory_bytes: memory,
                ranks,
                cwd: std::env::current_dir()?,
                env: std::env::vars().collect(),
                name,
                queue: queue.options(),
            };
            let Response::Submitted { id } = ask(&req)? else {
                bail!("unexpected answer to submit");
            };
            emit(format!("{id}\n"))?;
        }
        Verb::Status {
            json,
            all,
            states,
            users,
        } => {
            let jobs = list()?;
            let filter = Filter::new(&states, &users, all || (json && states.is_empty()))?;
            let jobs: Vec<&JobInfo> = jobs.iter().filter(|j| filter.keeps(j)).collect();
            let now = unix_now();
            if json {
                let rows: Vec<JsonRow> = jobs
                    .iter()
                    .map(|j| JsonRow {
                        job: j,
                        user: user_name(j.uid),
                        elapsed_s: elapsed(j, now),
                    })
                    .collect();
                emit(serde_json::to_string_pretty(&rows)? + "\n")?;
            } else {
                emit(status_table(&jobs, now, terminal_width()))?;
            }
        }
        Verb::Show { id, json } => {
            let j = job(id)?;
            if json {
                emit(serde_json::to_string_pretty(&j)? + "\n")?;
            } else {
                emit(show_text(&j))?;
            }
        }
        // main.rs sends these to cancel.rs and log.rs, which ask through
        // this module.
        Verb::Cancel { .. } | Verb::Log { .. } | Verb::Follow { .. } => {
            unreachable!("dispatched in main.rs")
        }
        Verb::Wait { id } => loop {
            let j = job(id)?;
            if j.state.is_final() {
                // The job's exit code is the answer: a closed stderr
                // loses only this line.
                note!(
                    "job {id} {}{}",
                    j.state.name(),
                    j.reason
                        .map(|r| format!(": {}", printable(&r)))
                        .unwrap_or_default()
                );
                let code = j.exit_code.and_then(|c| u8::try_from(c).ok()).unwrap_or(1);
                return Ok(ExitCode::from(code));
            }
            std::thread::sleep(POLL);
        },
    }
    Ok(ExitCode::SUCCESS)
}

/// A user's name, looked up once per uid (a history of thousands of jobs
/// has few users).
/// `memgang show`'s text: one field a line.
fn show_text(j: &JobInfo) -> String {
    let mut s = format!(
        "id:       {}\nuser:     {}\nname:     {}\ncommand:  {}\nstate:    {}\n",
        j.id,
        user_name(j.uid),
        printable(&j.name),
        printable(&j.command.join(" ")),
        j.state.name()
    );
    if let Some(r) = &j.reason {
        s += &format!("why:      {}\n", printable(r));
    }
    if let Some(c) = j.exit_code {
        s += &format!("exit:     {c}\n");
    }
    if let Some(sig) = j.signal {
        s += &format!("signal:   {sig}\n");
    }
    s += &format!(
        "memory:   {}\nranks:    {}\ncwd:      {}\n",
        format_bytes(j.memory_bytes),
        j.ranks,
        printable(&j.cwd.display().to_string())
    );
    s += &queue_text(j);
    if let Some(a) = &j.account {
        // A daemon of another version may send an account this client
        // cannot read: then it is shown as sent.
        match serde_json::from_value::<JobAccount>(a.clone()) {
            Ok(a) => s += &format!("time:     {}", crate::report::job_account(&a)),
            Err(_) => s += &format!("time:     {a}\n"),
        }
    }
    s
}

/// `show`'s lines for the queue's options, those the job has.
fn queue_text(j: &JobInfo) -> String {
    let q = &j.queue;
    let mut s = String::new();
    let path = |p: &std::path::Path| printable(&p.display().to_string()).into_owned();
    if let Some(p) = &q.stdout {
        s += &format!("output:   {}\n", path(p));
    }
    if let Some(p) = &q.stderr {
        s += &format!("error:    {}\n", path(p));
    }
    if let Some(t) = q.time_limit_s {
        s += &format!(
            "limit:    {} ({} used)\n",
            format_elapsed(t as f64),
            format_elapsed(q.used_s)
        );
    }
    if !q.after.is_empty() {
        let deps: Vec<String> = q
            .after
            .iter()
            .map(|d| format!("{}:{}", d.kind.name(), d.id))
            .collect();
        s += &format!("after:    {}\n", deps.join(","));
    }
    if let (Some(a), Some(i)) = (q.array_id, q.array_index) {
        let limit = q
            .array_limit
            .map(|l| format!(" (at most {l} at once)"))
            .unwrap_or_default();
        s += &format!("array:    {a}_{i}{limit}\n");
    }
    s
}

pub(crate) fn user_name(uid: u32) -> String {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static NAMES: Mutex<Option<HashMap<u32, String>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    names
        .get_or_insert_with(HashMap::new)
        .entry(uid)
        .or_insert_with(|| look_up_user(uid))
        .clone()
}

fn look_up_user(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// A job as `status --json` prints it: its record and what the table adds.
#[derive(serde::Serialize)]
struct JsonRow<'a> {
    #[serde(flatten)]
    job: &'a JobInfo,
    user: String,
    elapsed_s: Option<f64>,
}

/// Which jobs `status` (and `cancel`) takes.
pub(crate) struct Filter {
    states: Vec<JobState>,
    uids: Vec<u32>,
}

impl Filter {
    pub(crate) fn new(states: &[String], users: &[String], all: bool) -> Result<Filter> {
        let mut want = Vec::new();
        for s in states.iter().map(|s| s.trim().to_ascii_lowercase()) {
            let found: &[JobState] = match s.as_str() {
                "all" => &JobState::ALL,
                "pd" | "pending" => &[JobState::Queued],
                "r" => &[JobState::Running],
                "s" => &[JobState::Suspended],
                "cd" | "completed" => &[JobState::Finished],
                "f" => &[JobState::Failed],
                "ca" => &[JobState::Cancelled],
                "to" => &[JobState::Timeout],
                name => match JobState::ALL.iter().find(|st| st.name() == name) {
                    Some(st) => std::slice::from_ref(st),
                    None => bail!(
                        "unknown state {s:?}: give queued, running, suspended, finished, failed, cancelled, timeout or all (or PD, R, S, CD, F, CA, TO)"
                    ),
                },
            };
            want.extend_from_slice(found);
        }
        if want.is_empty() {
            want = if all {
                JobState::ALL.to_vec()
            } else {
                JobState::ALL
                    .iter()
                    .copied()
                    .filter(|s| !s.is_final())
                    .collect()
            };
        }
        let mut uids = Vec::new();
        for u in users {
            let uid = match u.parse::<u32>() {
                Ok(uid) => uid,
                Err(_) => nix::unistd::User::from_name(u)
                    .ok()
                    .flatten()
                    .map(|u| u.uid.as_raw())
                    .with_context(|| format!("no user {u:?} on this node"))?,
            };
            uids.push(uid);
        }
        Ok(Filter { states: want, uids })
    }

    pub(crate) fn keeps(&self, j: &JobInfo) -> bool {
        self.states.contains(&j.state) && (self.uids.is_empty() || self.uids.contains(&j.uid))
    }
}

pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Time since it started (until it ended).
fn elapsed(j: &JobInfo, now: f64) -> Option<f64> {
    let start = j.started_unix_s?;
    Some((j.finished_unix_s.unwrap_or(now) - start).max(0.0))
}

/// `[D-]H:MM:SS` as squeue writes it (`M:SS` under an hour).
fn format_elapsed(s: f64) -> String {
    let s = s as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h) {
        (0, 0) => format!("{m}:{s:02}"),
        (0, h) => format!("{h}:{m:02}:{s:02}"),
        (d, h) => format!("{d}-{h:02}:{m:02}:{s:02}"),
    }
}

/// Local time: `HH:MM` today, `MM-DD` before.
fn format_when(t: f64, now: f64) -> String {
    let local = |t: f64| {
        let secs = t as libc::time_t;
        // SAFETY: a zeroed tm is valid; localtime_r writes it.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        unsafe { libc::localtime_r(&secs, &mut tm) };
        tm
    };
    let (a, b) = (local(t), local(now));
    if (a.tm_year, a.tm_yday) == (b.tm_year, b.tm_yday) {
        format!("{:02}:{:02}", a.tm_hour, a.tm_min)
    } else {
        format!("{:02}-{:02}", a.tm_mon + 1, a.tm_mday)
    }
}

/// The terminal's width; 80 when output is not a terminal (or $COLUMNS).
fn terminal_width() -> usize {
    // SAFETY: a zeroed winsize is valid; TIOCGWINSZ writes it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    if unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0
    {
        return ws.ws_col as usize;
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&c| c > 0)
        .unwrap_or(80)
}

/// `s` cut to `w` characters, the last one `~` when cut.
fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    if w > 0 {
        out.push('~');
    }
    out
}

/// The status table, one job a line, no line wider than `width` (the
/// name and the reason are cut to fit; control characters escaped).
fn status_table(jobs: &[&JobInfo], now: f64, width: usize) -> String {
    const HEAD: [&str; 9] = [
        "ID", "USER", "NAME", "STATE", "MEMORY", "SUBMIT", "START", "ELAPSED", "WHY/EXIT",
    ];
    // Widest a column may be before the reason gets the rest.
    const MAX: [usize; 8] = [10, 8, 16, 9, 6, 5, 5, 11];
    let rows: Vec<[String; 9]> = jobs
        .iter()
        .map(|j| {
            let why = match (j.state, &j.reason, j.exit_code, j.signal) {
                (JobState::Finished, _, _, _) => "exit 0".to_string(),
                (_, Some(r), _, _) => printable(r).into_owned(),
                (_, None, Some(c), _) => format!("exit {c}"),
                (_, None, None, Some(s)) => format!("signal {s}"),
                _ => String::new(),
            };
            [
                j.id.to_string(),
                printable(&user_name(j.uid)).into_owned(),
                printable(&j.name).into_owned(),
                j.state.name().to_string(),
                format_bytes(j.memory_bytes),
                format_when(j.submitted_unix_s, now),
                j.started_unix_s
                    .map(|t| format_when(t, now))
                    .unwrap_or_default(),
                elapsed(j, now).map(format_elapsed).unwrap_or_default(),
                why,
            ]
        })
        .collect();
    let mut w: Vec<usize> = (0..8)
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([HEAD[c].len()])
                .max()
                .unwrap_or(0)
                .min(MAX[c].max(HEAD[c].len()))
        })
        .collect();
    let used = |w: &[usize]| w.iter().sum::<usize>() + w.len();
    // Too narrow: the name gives way first, down to its header.
    if used(&w) + HEAD[8].len() > width {
        let over = used(&w) + HEAD[8].len() - width;
        w[2] = w[2].saturating_sub(over).max(HEAD[2].len());
    }
    let why_w = width.saturating_sub(used(&w));
    let mut out = String::new();
    for r in std::iter::once(HEAD.map(String::from)).chain(rows) {
        let mut line = String::new();
        for c in 0..8 {
            let v = cut(&r[c], w[c]);
            if c == 0 {
                line += &format!("{v:>width$} ", width = w[c]);
            } else {
                line += &format!("{v:<width$} ", width = w[c]);
            }
        }
        line += &cut(&r[8], why_w);
        out += line.trim_end();
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn job(id: u64, name: &str, state: JobState, reason: Option<&str>) -> JobInfo {
        JobInfo {
            id,
            uid: 0,
            name: name.into(),
            command: vec!["true".into()],
            memory_bytes: 700 << 20,
            ranks: 1,
            state,
            reason: reason.map(String::from),
            exit_code: None,
            signal: None,
            submitted_unix_s: 1000.0,
            started_unix_s: Some(1010.0),
            finished_unix_s: None,
            log_dir: "/x".into(),
            cwd: "/".into(),
            account: None,
            queue: Default::default(),
        }
    }

    #[test]
    fn the_table_fits_80_columns_and_escapes_what_users_wrote() {
        let long = "a-very-long-job-name-that-goes-on-and-on".repeat(3);
        let evil = "x\u{1b}[2J\nFAKE | 999 | root | running";
        let why = "waits for memory: needs 210M, 420M of 512M promised to running jobs";
        let jobs = [
            job(1, &long, JobState::Running, None),
            job(123456, evil, JobState::Queued, Some(why)),
        ];
        let refs: Vec<&JobInfo> = jobs.iter().collect();
        let t = status_table(&refs, 1010.0 + 3725.0, 80);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        for l in &lines {
            assert!(l.chars().count() <= 80, "{} wide: {l}", l.chars().count());
            assert!(!l.chars().any(char::is_control), "{l:?}");
        }
        assert!(lines[0].starts_with("    ID USER"), "{t}");
        assert!(lines[1].contains("1:02:05"), "elapsed: {t}");
        assert!(lines[2].contains("x\\u{1b}[2J\\n"), "{t}");
        assert!(lines[2].contains("waits for"), "{t}");
        // Wider terminals get the whole reason.
        let t = status_table(&refs, 2000.0, 200);
        assert!(t.contains(why), "{t}");
    }

    #[test]
    fn filters_take_names_and_squeue_codes() {
        let f = Filter::new(&[], &[], false).unwrap();
        assert!(f.keeps(&job(1, "a", JobState::Suspended, None)));
        assert!(!f.keeps(&job(1, "a", JobState::Finished, None)));
        let f = Filter::new(&[], &[], true).unwrap();
        assert!(f.keeps(&job(1, "a", JobState::Finished, None)));
        let f = Filter::new(&["CD".into(), "cancelled".into()], &["0".into()], false).unwrap();
        assert!(f.keeps(&job(1, "a", JobState::Finished, None)));
        assert!(f.keeps(&job(1, "a", JobState::Cancelled, None)));
        assert!(!f.keeps(&job(1, "a", JobState::Running, None)));
        assert!(Filter::new(&["done".into()], &[], false).is_err());
        assert_eq!(format_elapsed(59.0), "0:59");
        assert_eq!(format_elapsed(90_061.0), "1-01:01:01");
    }
}
