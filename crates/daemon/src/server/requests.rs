//! The requests: what each verb does for its caller (submit, list,
//! show, cancel, output), a submission checked as the user who will run
//! it. The socket (`server.rs`) hands each request line here and writes
//! back the answer line.

use crate::journal::Record;
use crate::service::Shared;
use anyhow::{Context, Result};
use memgang_linux::cgroup::Credentials;
use memgang_linux::process::Lookup;
use memgang_proto::lines;
use memgang_proto::{JobInfo, JobState, Request, Response, OUTPUT_CHUNK};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a submission's checks, made as the user in a child process,
/// may take: a working directory on a hung mount must not hold a worker.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) fn answer_line(resp: &Response) -> Vec<u8> {
    lines::encode(resp)
}

/// The answer line to one request line.
pub(super) fn respond(line: &[u8], caller: &Caller, shared: &Shared) -> Vec<u8> {
    let resp = match lines::decode::<Request>(line, "request") {
        Ok(req) => handle(req, caller, shared).unwrap_or_else(|e| Response::Error {
            message: format!("{e:#}"),
        }),
        Err(lines::Error::Garbage { source, .. }) => Response::Error {
            message: format!(
                "malformed request ({source}); expected one JSON object per line, e.g. {{\"op\":\"list\"}}"
            ),
        },
        Err(e) => Response::Error {
            message: format!("malformed request: {e}"),
        },
    };
    answer_line(&resp)
}

/// The caller: uid and gid as the kernel recorded them at connect.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
}

fn handle(req: Request, caller: &Caller, shared: &Shared) -> Result<Response> {
    match req {
        Request::Submit {
            command,
            memory_bytes,
            ranks,
            cwd,
            env,
            name,
        } => {
            let (gid, groups) = user_groups(caller.uid)?;
            let gid = if caller.uid == 0 { caller.gid } else { gid };
            let creds = Credentials {
                uid: caller.uid,
                gid,
                groups: groups.clone(),
            };
            let info = validate(&creds, &command, memory_bytes, ranks, &cwd, &env)?;
            let id = shared.submit(|id, log_dir| Record {
                info: JobInfo {
                    id,
                    uid: caller.uid,
                    name: name.unwrap_or_else(|| info.clone()),
                    command,
                    memory_bytes,
                    ranks,
                    state: JobState::Queued,
                    reason: Some("just submitted".into()),
                    exit_code: None,
                    signal: None,
                    submitted_unix_s: crate::service::unix_now(),
                    started_unix_s: None,
                    finished_unix_s: None,
                    log_dir,
                    cwd,
                    account: None,
                },
                env,
                gid,
                groups,
                admitted: false,
                group: None,
            })?;
            Ok(Response::Submitted { id })
        }
        Request::List => Ok(Response::Jobs {
            jobs: shared.list(|r| caller.uid == 0 || r.info.uid == caller.uid),
        }),
        Request::Show { id } => Ok(Response::Job {
            job: Box::new(own(shared, caller, id)?.info),
        }),
        Request::Cancel { id } => {
            let r = own(shared, caller, id)?;
            if r.info.state.is_final() {
                anyhow::bail!("job {id} has already ended ({})", r.info.state.name());
            }
            shared.cancel(id);
            Ok(Response::Done)
        }
        Request::Output { id, stream, offset } => {
            let r = own(shared, caller, id)?;
            let path = r.info.log_dir.join(stream.file_name());
            let mut data = Vec::new();
            if let Ok(mut f) = std::fs::File::open(&path) {
                f.seek(SeekFrom::Start(offset))?;
                f.take(OUTPUT_CHUNK).read_to_end(&mut data)?;
            }
            Ok(Response::Output {
                next: offset.saturating_add(data.len() as u64),
                data,
                finished: r.info.state.is_final(),
            })
        }
    }
}

/// The job, if the caller may see it; another user's job reads as no job,
/// so ids do not tell who runs what.
fn own(shared: &Shared, caller: &Caller, id: u64) -> Result<Record> {
    shared
        .get(id)
        .filter(|r| caller.uid == 0 || r.info.uid == caller.uid)
        .with_context(|| format!("no job {id} of yours (see `memgang status`)"))
}

/// Check a submission; returns the job's default name. The working
/// directory and the command are checked as the user who will run them
/// ([`memgang_linux::process::lookup_as`]): what the error says is what
/// the user's own shell would say, and nothing about files they cannot
/// reach.
fn validate(
    user: &Credentials,
    command: &[String],
    memory: u64,
    ranks: u32,
    cwd: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<String> {
    let Some(program) = command.first() else {
        anyhow::bail!("empty command: give the program to run, e.g. `memgang submit --memory 1G -- ./solver in.dat`");
    };
    if memory == 0 {
        anyhow::bail!("the job declares no memory: give --memory, its peak footprint (e.g. 2G)");
    }
    if ranks == 0 {
        anyhow::bail!("ranks must be at least 1");
    }
    if !cwd.is_absolute() {
        anyhow::bail!(
            "the working directory {} is not an absolute path",
            cwd.display()
        );
    }
    let candidates = candidates(program, env.get("PATH").map(String::as_str));
    match memgang_linux::process::lookup_as(Some(user), cwd, &candidates, LOOKUP_TIMEOUT)? {
        Lookup::Found(_) => {}
        Lookup::NoDir(errno) => anyhow::bail!(
            "cannot enter the working directory {} as uid {}: {} (a job runs as you, where you submit it)",
            cwd.display(),
            user.uid,
            std::io::Error::from_raw_os_error(errno)
        ),
        Lookup::NotExecutable(i) => {
            anyhow::bail!("command {} is not executable", candidates[i].display())
        }
        Lookup::NotFound => anyhow::bail!(
            "command not found: {program:?} (not on the PATH you submitted with, nor relative to {})",
            cwd.display()
        ),
    }
    Ok(Path::new(program)
        .file_name()
        .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned()))
}

/// Where exec looks for `program`, in order: itself if it has a slash,
/// else each PATH directory (relative ones, and an empty one, are
/// relative to the working directory).
fn candidates(program: &str, path: Option<&str>) -> Vec<PathBuf> {
    if program.contains('/') {
        return vec![PathBuf::from(program)];
    }
    std::env::split_paths(path.unwrap_or("/usr/local/bin:/usr/bin:/bin"))
        .map(|d| d.join(program))
        .collect()
}

/// The user's primary group and supplementary groups, from the user
/// database as login would set them.
fn user_groups(uid: u32) -> Result<(u32, Vec<u32>)> {
    use nix::unistd::{getgrouplist, Uid, User};
    let user = User::from_uid(Uid::from_raw(uid))
        .context("looking the caller up in the user database")?
        .with_context(|| {
            format!("uid {uid} has no entry in the user database; jobs run as a known user")
        })?;
    let name = std::ffi::CString::new(user.name.clone())?;
    let groups =
        getgrouplist(&name, user.gid).with_context(|| format!("the groups of {}", user.name))?;
    Ok((
        user.gid.as_raw(),
        groups.into_iter().map(|g| g.as_raw()).collect(),
    ))
}
