//! The requests: what each verb does for its caller (submit, list,
//! show, cancel, output, top), a submission checked as the user who will run
//! it. The socket (`server.rs`) hands each request line here and writes
//! back the answer line.

use super::queue;
use crate::config::Budgets;
use crate::journal::Record;
use crate::service::Shared;
use anyhow::{Context, Result};
use memgang_linux::cgroup::Credentials;
use memgang_linux::process::Lookup;
use memgang_proto::lines;
use memgang_proto::{JobInfo, JobState, Request, Response, OUTPUT_CHUNK};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

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
        req @ Request::Submit { .. } => submit(req, caller, shared),
        Request::List { after } => {
            let (jobs, next) = shared.list_page(
                |r| caller.uid == 0 || r.info.uid == caller.uid,
                after,
                shared.budgets.answer_bytes,
            );
            Ok(Response::Jobs { jobs, next })
        }
        Request::Top => Ok(Response::Top {
            view: Box::new(shared.top(caller.uid)),
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

/// A submission: checked as its user, then its job (or its array's
/// tasks) recorded.
fn submit(req: Request, caller: &Caller, shared: &Shared) -> Result<Response> {
    let Request::Submit {
        command,
        memory_bytes,
        ranks,
        cwd,
        env,
        name,
        queue: q,
    } = req
    else {
        unreachable!("submit is called with a submission")
    };
    let budgets = &shared.budgets;
    check_sizes(&command, &env, &cwd, name.as_deref(), budgets)?;
    let (user, gid, groups) = user_groups(caller.uid)?;
    let gid = if caller.uid == 0 { caller.gid } else { gid };
    let creds = Credentials {
        uid: caller.uid,
        gid,
        groups: groups.clone(),
        limits: Vec::new(),
    };
    let info = validate(&creds, &command, memory_bytes, ranks, &cwd, &env, budgets)?;
    queue::check(&q, caller.uid, shared)?;
    let name = name.unwrap_or(info);
    let indexes = q.array.as_ref().map(|a| a.indexes.clone());
    let n = indexes.as_ref().map_or(1, Vec::len);
    let mut array_id = None;
    let id = shared.submit(n, |id, k, log_dir| {
        let array = indexes.as_ref().map(|ix| {
            let first = *array_id.get_or_insert(id);
            (first, ix[k])
        });
        let mut env = env.clone();
        if let Some((a, i)) = array {
            for (k, v) in [
                ("MEMGANG_ARRAY_JOB_ID", a),
                ("MEMGANG_ARRAY_TASK_ID", u64::from(i)),
                ("SLURM_ARRAY_JOB_ID", a),
                ("SLURM_ARRAY_TASK_ID", u64::from(i)),
            ] {
                env.insert(k.into(), v.to_string());
            }
        }
        env.insert("MEMGANG_JOB_ID".into(), id.to_string());
        Ok(Record {
            info: JobInfo {
                id,
                uid: caller.uid,
                name: name.clone(),
                command: command.clone(),
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
                cwd: cwd.clone(),
                account: None,
                queue: queue::settle(&q, id, &name, &user, &cwd, array)?,
            },
            env,
            gid,
            groups: groups.clone(),
            admitted: false,
            group: None,
        })
    })?;
    Ok(Response::Submitted { id })
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
    budgets: &Budgets,
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
    match memgang_linux::process::lookup_as(Some(user), cwd, &candidates, budgets.lookup_timeout)?
    {
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

/// A submission within the budgets of one job: its name, command and
/// working directory together, and its environment, at most so many
/// bytes; and no NUL byte anywhere, which no program can be given (exec
/// takes C strings): refused here rather than failing at its start.
fn check_sizes(
    command: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: &Path,
    name: Option<&str>,
    budgets: &Budgets,
) -> Result<()> {
    use memgang_core::units::format_bytes;
    use std::os::unix::ffi::OsStrExt;
    let cwd = cwd.as_os_str().as_bytes();
    let text = command
        .iter()
        .map(String::as_bytes)
        .chain(name.map(str::as_bytes));
    let mut all = text
        .chain(std::iter::once(cwd))
        .chain(env.iter().flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()]));
    if all.any(|b| b.contains(&0)) {
        anyhow::bail!(
            "the job's command, name, working directory or environment holds a NUL byte, which \
             no program can be given; remove it"
        );
    }
    if env.keys().any(|k| k.is_empty() || k.contains('=')) {
        anyhow::bail!("an environment variable's name is empty or holds '=': remove it");
    }
    let command_bytes = (name.map_or(0, str::len)
        + command.iter().map(|a| a.len() + 1).sum::<usize>()
        + cwd.len()) as u64;
    if command_bytes > budgets.job_command {
        anyhow::bail!(
            "the job's name, command and working directory take {}, more than the {} a job may \
             (max_job_command); pass long input in a file",
            format_bytes(command_bytes),
            format_bytes(budgets.job_command)
        );
    }
    let env_bytes: u64 = env
        .iter()
        .map(|(k, v)| (k.len() + v.len() + 2) as u64)
        .sum();
    if env_bytes > budgets.job_environment {
        anyhow::bail!(
            "the job's environment takes {}, more than the {} a job may \
             (max_job_environment); unset what the job does not need (`env -u NAME memgang \
             submit ...`)",
            format_bytes(env_bytes),
            format_bytes(budgets.job_environment)
        );
    }
    Ok(())
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

/// The user's name, primary group and supplementary groups, from the
/// user database as login would set them.
fn user_groups(uid: u32) -> Result<(String, u32, Vec<u32>)> {
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
        user.name.clone(),
        user.gid.as_raw(),
        groups.into_iter().map(|g| g.as_raw()).collect(),
    ))
}
