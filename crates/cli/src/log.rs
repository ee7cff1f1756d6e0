//! `memgang log` and `memgang follow`: a job's output files, read by
//! this client as its caller (the daemon never opens a user's path). A
//! job from before output files (none recorded) is read through the
//! daemon from its own log directory.

use crate::out::{emit, emit_to};
use anyhow::{bail, Context, Result};
use memgang_proto::{JobInfo, Request, Response, Stream};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The most `log` prints of a file without `--lines`: its last 64 MiB.
const MAX_PRINT: u64 = 64 << 20;

/// A job's files: stdout's, and stderr's when it has one of its own.
fn files(j: &JobInfo) -> Option<(PathBuf, Option<PathBuf>)> {
    Some((j.queue.stdout.clone()?, j.queue.stderr.clone()))
}

/// Open a job's file to read: a regular file only (a FIFO put in its
/// place must not hang the client); root reading another user's file
/// follows no symlink at its end.
fn open(p: &Path, j: &JobInfo) -> Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NONBLOCK;
    if nix::unistd::geteuid().is_root() && j.uid != 0 {
        flags |= libc::O_NOFOLLOW;
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(p)
    {
        Ok(f) if f.metadata()?.is_file() => Ok(Some(f)),
        Ok(_) => bail!("{} is not a regular file", p.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
    }
}

/// The last `lines` lines of the file (all of it, up to 64 MiB, when
/// None).
fn tail(f: &mut std::fs::File, lines: Option<usize>) -> Result<Vec<u8>> {
    let len = f.metadata()?.len();
    let Some(n) = lines else {
        f.seek(SeekFrom::Start(len.saturating_sub(MAX_PRINT)))?;
        let mut b = Vec::new();
        f.take(MAX_PRINT).read_to_end(&mut b)?;
        return Ok(b);
    };
    // Read backwards in blocks until n newlines (plus a last line's).
    let mut end = len;
    let mut buf: Vec<u8> = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(64 << 10);
        let mut block = vec![0; (end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut block)?;
        block.extend_from_slice(&buf);
        buf = block;
        end = start;
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if body.iter().filter(|&&b| b == b'\n').count() >= n || buf.len() as u64 > MAX_PRINT {
            break;
        }
    }
    let body_len = buf.strip_suffix(b"\n").map_or(buf.len(), <[u8]>::len);
    let cut = buf[..body_len]
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, &b)| b == b'\n')
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i + 1);
    Ok(if n == 0 {
        Vec::new()
    } else {
        buf[cut..].to_vec()
    })
}

/// `memgang log`: the job's files as they are now.
pub fn log(j: &JobInfo, lines: Option<usize>) -> Result<()> {
    let Some((out, err)) = files(j) else {
        bail!(
            "job {} has no output file (submitted before memgang wrote them); `memgang follow {}` reads its output",
            j.id,
            j.id
        );
    };
    for (p, to_stderr) in [(Some(out), false), (err, true)] {
        let Some(p) = p else { continue };
        let Some(mut f) = open(&p, j)? else {
            if j.started_unix_s.is_some() {
                crate::out::note!("{}: not there (moved or removed?)", p.display());
            }
            continue;
        };
        let data = tail(&mut f, lines)?;
        emit_stream(to_stderr, &data)?;
    }
    Ok(())
}

/// A job's stdout to ours, its stderr to ours.
fn emit_stream(to_stderr: bool, data: &[u8]) -> Result<()> {
    if to_stderr {
        emit_to(&mut std::io::stderr().lock(), data)
    } else {
        emit(data)
    }
}

/// After one round of a follow: true once the job has ended and its
/// streams gave nothing more; else waits a moment if nothing came.
fn followed_to_the_end(finished: bool, got: bool) -> bool {
    if !got && !finished {
        std::thread::sleep(crate::client::POLL);
    }
    finished && !got
}

/// `memgang follow`: the job's files as they grow, until it ends.
pub fn follow(id: u64, job: impl Fn() -> Result<JobInfo>) -> Result<()> {
    let j = job()?;
    let Some((out, err)) = files(&j) else {
        return follow_daemon(id);
    };
    let mut offsets = [0u64, 0u64];
    loop {
        let finished = job()?.state.is_final();
        let mut got = false;
        for (i, p) in [Some(&out), err.as_ref()].into_iter().enumerate() {
            let Some(mut f) = p.map(|p| open(p, &j)).transpose()?.flatten() else {
                continue;
            };
            f.seek(SeekFrom::Start(offsets[i]))?;
            let mut data = Vec::new();
            f.take(memgang_proto::OUTPUT_CHUNK).read_to_end(&mut data)?;
            offsets[i] += data.len() as u64;
            got |= !data.is_empty();
            emit_stream(i == 1, &data)?;
        }
        if followed_to_the_end(finished, got) {
            return Ok(());
        }
    }
}

/// A job from before output files: its output as the daemon kept it.
fn follow_daemon(id: u64) -> Result<()> {
    let mut offsets = [0u64, 0u64];
    loop {
        let mut got = false;
        let mut finished = false;
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            let Response::Output {
                data,
                next,
                finished: f,
            } = crate::client::ask(&Request::Output {
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
            emit_stream(stream == Stream::Stderr, &data)?;
        }
        if followed_to_the_end(finished, got) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_gives_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o");
        let text: String = (1..=100_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &text).unwrap();
        let mut f = std::fs::File::open(&p).unwrap();
        assert_eq!(tail(&mut f, Some(2)).unwrap(), b"line 99999\nline 100000\n");
        assert_eq!(tail(&mut f, Some(0)).unwrap(), b"");
        assert_eq!(tail(&mut f, None).unwrap().len(), text.len());
        std::fs::write(&p, "a\nb").unwrap();
        let mut f = std::fs::File::open(&p).unwrap();
        assert_eq!(tail(&mut f, Some(1)).unwrap(), b"b");
        assert_eq!(tail(&mut f, Some(5)).unwrap(), b"a\nb");
    }
}
