//! The verbs that talk to memgangd: submit, status (list), show, cancel,
//! follow, wait. The socket is `$MEMGANG_SOCKET`, else memgangd's default.

use anyhow::{bail, Result};
use clap::Subcommand;
use memgang_core::units::{format_bytes, parse_bytes};
use memgang_proto::{client::call, JobInfo, Request, Response, Stream};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// How often follow and wait ask again: a person notices half a second;
/// the daemon answers a request in well under a millisecond.
const POLL: Duration = Duration::from_millis(500);

#[derive(Subcommand)]
pub enum Verb {
    /// Submit a job to memgangd; prints its id. It runs as you, in this
    /// directory, with this environment.
    Submit {
        /// Its peak memory footprint, e.g. 2G: it starts only when the
        /// pool plus swap can hold it beside the jobs already running.
        #[arg(long, value_parser = parse_bytes)]
        memory: u64,
        #[arg(long, default_value_t = 1)]
        ranks: u32,
        /// A name for status (default: the program's name).
        #[arg(long)]
        name: Option<String>,
        /// The command, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Your jobs (root: everyone's) as a table, or JSON with --json.
    #[command(alias = "list")]
    Status {
        #[arg(long)]
        json: bool,
    },
    /// One job in full.
    Show {
        id: u64,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a job: killed if it runs or is suspended, never started if
    /// it waits.
    Cancel { id: u64 },
    /// Print a job's output (stdout and stderr) as it comes, until it ends.
    Follow { id: u64 },
    /// Wait until a job ends; exits with its exit code.
    Wait { id: u64 },
}

fn socket() -> PathBuf {
    std::env::var_os("MEMGANG_SOCKET").map_or_else(
        || PathBuf::from(memgang_proto::DEFAULT_SOCKET),
        PathBuf::from,
    )
}

fn ask(req: &Request) -> Result<Response> {
    match call(&socket(), req)? {
        Response::Error { message } => bail!("{message}"),
        r => Ok(r),
    }
}

fn job(id: u64) -> Result<JobInfo> {
    match ask(&Request::Show { id })? {
        Response::Job { job } => Ok(job),
        r => bail!("unexpected answer {r:?}"),
    }
}

pub fn run(verb: Verb) -> Result<ExitCode> {
    match verb {
        Verb::Submit {
            memory,
            ranks,
            name,
            command,
        } => {
            let req = Request::Submit {
                command,
                memory_bytes: memory,
                ranks,
                cwd: std::env::current_dir()?,
                env: std::env::vars().collect(),
                name,
            };
            let Response::Submitted { id } = ask(&req)? else {
                bail!("unexpected answer to submit");
            };
            println!("{id}");
        }
        Verb::Status { json } => {
            let Response::Jobs { jobs } = ask(&Request::List)? else {
                bail!("unexpected answer to list");
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&jobs)?);
            } else {
                let mut t = crate::report::table([
                    "id",
                    "user",
                    "name",
                    "state",
                    "memory",
                    "ranks",
                    "why / exit",
                ]);
                for j in &jobs {
                    t.add_row(vec![
                        j.id.to_string(),
                        user_name(j.uid),
                        j.name.clone(),
                        j.state.name().to_string(),
                        format_bytes(j.memory_bytes),
                        j.ranks.to_string(),
                        j.reason
                            .clone()
                            .or(j.exit_code.map(|c| format!("exit {c}")))
                            .unwrap_or_default(),
                    ]);
                }
                println!("{t}");
            }
        }
        Verb::Show { id, json } => {
            let j = job(id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&j)?);
            } else {
                println!(
                    "id:       {}\nuser:     {}\nname:     {}\ncommand:  {}\nstate:    {}",
                    j.id,
                    user_name(j.uid),
                    j.name,
                    j.command.join(" "),
                    j.state.name()
                );
                if let Some(r) = &j.reason {
                    println!("why:      {r}");
                }
                if let Some(c) = j.exit_code {
                    println!("exit:     {c}");
                }
                if let Some(s) = j.signal {
                    println!("signal:   {s}");
                }
                println!(
                    "memory:   {}\nranks:    {}\ncwd:      {}",
                    format_bytes(j.memory_bytes),
                    j.ranks,
                    j.cwd.display()
                );
            }
        }
        Verb::Cancel { id } => {
            ask(&Request::Cancel { id })?;
            println!("cancelled {id}");
        }
        Verb::Follow { id } => {
            let mut offsets = [0u64, 0u64];
            loop {
                let mut got = false;
                let mut finished = false;
                for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
                    let Response::Output {
                        data,
                        next,
                        finished: f,
                    } = ask(&Request::Output {
                        id,
                        stream,
                        offset: offsets[i],
                    })?
                    else {
                        bail!("unexpected answer to output");
                    };
                    got |= next > offsets[i];
                    offsets[i] = next;
                    finished = f;
                    // The job's bytes as they are: not text to decode.
                    if stream == Stream::Stdout {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&data)?;
                        out.flush()?;
                    } else {
                        std::io::stderr().lock().write_all(&data)?;
                    }
                }
                if finished && !got {
                    break;
                }
                if !got {
                    std::thread::sleep(POLL);
                }
            }
        }
        Verb::Wait { id } => loop {
            let j = job(id)?;
            if j.state.is_final() {
                eprintln!(
                    "job {id} {}{}",
                    j.state.name(),
                    j.reason.map(|r| format!(": {r}")).unwrap_or_default()
                );
                let code = j.exit_code.and_then(|c| u8::try_from(c).ok()).unwrap_or(1);
                return Ok(ExitCode::from(code));
            }
            std::thread::sleep(POLL);
        },
    }
    Ok(ExitCode::SUCCESS)
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}
