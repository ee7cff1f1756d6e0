//! The socket: one thread per connection, one request per connection. The
//! caller is who the kernel says (SO_PEERCRED), never what it claims.

use crate::journal::Record;
use crate::service::Shared;
use anyhow::{Context, Result};
use memgang_proto::{JobInfo, JobState, Request, Response, MAX_REQUEST_BYTES, OUTPUT_CHUNK};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A client that connects and sends nothing must not hold a thread
/// forever; a person's request arrives in milliseconds.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Bind the socket: anyone may connect (0666), since every request is
/// checked against the caller's uid; its directory is 0755.
pub fn bind(path: &Path) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    // A socket left by a daemon that died: the state-dir lock says no
    // other daemon runs, so it is stale.
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(l)
}

pub fn serve(listener: UnixListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let shared = shared.clone();
        std::thread::spawn(move || {
            if let Err(e) = connection(conn, &shared) {
                tracing::debug!("connection: {e:#}");
            }
        });
    }
}

/// The caller: uid and gid as the kernel recorded them at connect.
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
}

fn peer(conn: &UnixStream) -> Result<Caller> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let c = getsockopt(conn, PeerCredentials).context("SO_PEERCRED")?;
    Ok(Caller {
        uid: c.uid(),
        gid: c.gid(),
    })
}

fn connection(conn: UnixStream, shared: &Shared) -> Result<()> {
    let caller = peer(&conn)?;
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&conn).take(MAX_REQUEST_BYTES)).read_line(&mut line)?;
    let resp = match serde_json::from_str::<Request>(&line) {
        Ok(req) => handle(req, &caller, shared).unwrap_or_else(|e| Response::Error {
            message: format!("{e:#}"),
        }),
        Err(e) => Response::Error {
            message: format!(
                "malformed request ({e}); expected one JSON object per line, e.g. {{\"op\":\"list\"}}"
            ),
        },
    };
    let mut out = serde_json::to_vec(&resp)?;
    out.push(b'\n');
    (&conn).write_all(&out)?;
    Ok(())
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
            let info = validate(caller, &command, memory_bytes, ranks, &cwd, &env)?;
            let (gid, groups) = user_groups(caller.uid)?;
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
                },
                env,
                gid: if caller.uid == 0 { caller.gid } else { gid },
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
            job: own(shared, caller, id)?.info,
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
                next: offset + data.len() as u64,
                data: String::from_utf8_lossy(&data).into_owned(),
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

/// Check a submission; returns the job's default name.
fn validate(
    caller: &Caller,
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
    if !cwd.is_absolute() || !cwd.is_dir() {
        anyhow::bail!(
            "working directory {} does not exist on this node",
            cwd.display()
        );
    }
    let found = resolve(program, cwd, env.get("PATH").map(String::as_str));
    match found {
        Some(p) if is_executable(&p) => {}
        Some(p) => anyhow::bail!("command {} is not executable", p.display()),
        None => anyhow::bail!(
            "command not found: {program:?} (not on the PATH you submitted with, nor relative to {})",
            cwd.display()
        ),
    }
    let _ = caller;
    Ok(Path::new(program)
        .file_name()
        .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned()))
}

fn resolve(program: &str, cwd: &Path, path: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = cwd.join(program);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(path.unwrap_or("/usr/local/bin:/usr/bin:/bin"))
        .map(|d| cwd.join(d).join(program))
        .find(|p| p.is_file())
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
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
