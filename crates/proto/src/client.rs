//! One round trip to memgangd.

use crate::{lines, Request, Response};
use std::os::unix::net::UnixStream;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot reach memgangd at {path}: {source} (is it running? `systemctl status memgangd`, or start it with `sudo memgangd`)")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("talking to memgangd: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "memgangd answered something unreadable ({0}); are client and daemon the same version?"
    )]
    Decode(serde_json::Error),
    #[error(
        "memgangd closed the connection without answering (see its log: `journalctl -u memgangd`)"
    )]
    NoAnswer,
    #[error(
        "memgangd did not answer within {ANSWER_TIMEOUT:?} (see its log: `journalctl -u memgangd`)"
    )]
    Timeout,
}

/// How long a client waits for an answer: the daemon answers in
/// milliseconds (a submission waits for one fsync); a daemon that does
/// not answer in this time is stuck, and the user is told so.
pub const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Largest answer a client reads: a job list of every user's jobs, or an
/// output chunk (`OUTPUT_CHUNK`, at most 6 bytes per byte as JSON).
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Send `req` to the daemon at `socket` and return its answer (an
/// [`Response::Error`] is an answer, not an `Err`).
pub fn call(socket: &Path, req: &Request) -> Result<Response, Error> {
    let stream = UnixStream::connect(socket).map_err(|source| Error::Connect {
        path: socket.display().to_string(),
        source,
    })?;
    let line = lines::call(
        &stream,
        &[&lines::encode(req)],
        MAX_ANSWER_BYTES,
        ANSWER_TIMEOUT,
    )
    .map_err(|e| match e {
        lines::Error::Timeout { .. } => Error::Timeout,
        lines::Error::Closed { .. } | lines::Error::Truncated { .. } => Error::NoAnswer,
        lines::Error::Io { source, .. } => Error::Io(source),
        e => Error::Io(std::io::Error::other(e)),
    })?;
    lines::decode(&line, "answer").map_err(|e| match e {
        lines::Error::Garbage { source, .. } => Error::Decode(source),
        e => Error::Io(std::io::Error::other(e)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;

    #[test]
    fn call_sends_a_line_and_reads_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            assert_eq!(line, "{\"op\":\"list\"}\n");
            (&s).write_all(b"{\"kind\":\"done\"}\n").unwrap();
        });
        assert_eq!(
            call(&path, &Request::List { after: None }).unwrap(),
            Response::Done
        );
        server.join().unwrap();
    }

    #[test]
    fn a_missing_socket_says_how_to_start_the_daemon() {
        let e = call(
            Path::new("/nonexistent/memgang.sock"),
            &Request::List { after: None },
        )
        .unwrap_err();
        assert!(e.to_string().contains("memgangd"), "{e}");
    }
}
