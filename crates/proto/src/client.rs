//! One round trip to memgangd.

use crate::{Request, Response};
use std::io::{BufRead, BufReader, Write};
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

/// Send `req` to the daemon at `socket` and return its answer (an
/// [`Response::Error`] is an answer, not an `Err`).
pub fn call(socket: &Path, req: &Request) -> Result<Response, Error> {
    let mut stream = UnixStream::connect(socket).map_err(|source| Error::Connect {
        path: socket.display().to_string(),
        source,
    })?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    stream.set_write_timeout(Some(ANSWER_TIMEOUT))?;
    let mut line = serde_json::to_string(req).expect("requests serialize");
    line.push('\n');
    // A busy daemon answers and closes before it reads: its answer is
    // still there to read when the write fails.
    let sent = stream.write_all(line.as_bytes());
    let mut answer = String::new();
    let read = BufReader::new(stream).read_line(&mut answer);
    if answer.is_empty() {
        sent?;
        return Err(match read {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Error::Timeout
            }
            Err(e) => Error::Io(e),
            Ok(_) => Error::NoAnswer,
        });
    }
    serde_json::from_str(&answer).map_err(Error::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(call(&path, &Request::List).unwrap(), Response::Done);
        server.join().unwrap();
    }

    #[test]
    fn a_missing_socket_says_how_to_start_the_daemon() {
        let e = call(Path::new("/nonexistent/memgang.sock"), &Request::List).unwrap_err();
        assert!(e.to_string().contains("memgangd"), "{e}");
    }
}
