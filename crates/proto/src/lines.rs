//! memgang's one transport: JSON lines over a stream socket (Unix or
//! TCP), one request per connection. A frame is one JSON value on one
//! line; a peer reads a line with a byte cap and a deadline for the whole
//! line (not per read: a peer sending a byte a second is cut off), and a
//! peer that sends too much, garbage or nothing gets an [`Error`] that
//! says which. memgangd (`memgang` client and daemon) and the Slurm
//! agents and controller speak it; what they put in the lines is theirs.
//!
//! A server that is "busy" answers an error line at once, before it reads
//! the request, and closes: [`call`] still reads that answer when its own
//! write failed.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Why a line was not read (or not written).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `what`: "request", "answer", "credential": what the line was to be.
    #[error("the {what} is longer than {cap} bytes")]
    TooLong { what: &'static str, cap: usize },
    #[error("the connection closed before the end of the {what}")]
    Truncated { what: &'static str },
    #[error("the connection closed without a {what}")]
    Closed { what: &'static str },
    #[error("timed out reading the {what}")]
    Timeout { what: &'static str },
    #[error("unreadable {what} ({})", short(source))]
    Garbage {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: io::Error,
    },
}

/// serde's message, which quotes the offending value, cut to a sentence's
/// length: a hostile peer's megabyte must not come back in an answer.
fn short(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

/// `v` as one line, newline included. The protocols' types always
/// encode; should one not, the line is an error answer in both
/// protocols' shape (`{"kind":"error","message":...}`).
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec(v).unwrap_or_else(|e| {
        let message = format!("answer not encodable: {e}");
        serde_json::to_vec(&serde_json::json!({"kind": "error", "message": message}))
            .expect("a string encodes")
    });
    out.push(b'\n');
    out
}

/// One line's value; a trailing `\r` (a person typing at `nc`) is allowed.
pub fn decode<T: DeserializeOwned>(line: &[u8], what: &'static str) -> Result<T, Error> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    serde_json::from_slice(line).map_err(|source| Error::Garbage { what, source })
}

/// Write `v` as one line.
pub fn write<T: Serialize>(mut w: impl Write, v: &T) -> io::Result<()> {
    w.write_all(&encode(v))
}

/// Gathers a line from what arrives in pieces: the one framing rule, for
/// blocking readers ([`read_line`]) and for a poll loop (memgangd's).
#[derive(Debug, Default)]
pub struct LineBuf {
    data: Vec<u8>,
}

/// What [`LineBuf::push`] made of the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// No newline yet, and under the cap.
    More,
    /// A whole line, without its newline (bytes after it are dropped:
    /// one request per connection).
    Line(Vec<u8>),
    /// `cap` bytes without a newline.
    TooLong,
}

impl LineBuf {
    pub fn push(&mut self, bytes: &[u8], cap: usize) -> Frame {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        let end = self.data[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| start + i);
        if end.unwrap_or(self.data.len()) > cap {
            self.data.clear();
            return Frame::TooLong;
        }
        if let Some(end) = end {
            self.data.truncate(end);
            return Frame::Line(std::mem::take(&mut self.data));
        }
        if self.data.len() > cap {
            self.data.clear();
            return Frame::TooLong;
        }
        Frame::More
    }

    /// What came before the peer closed its end.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.data)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// A stream whose reads can be given a timeout: the sockets the
/// protocols run over.
pub trait Timed {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn shutdown_write(&self) -> io::Result<()>;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
}

macro_rules! timed {
    ($t:ty) => {
        impl Timed for $t {
            fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
                <$t>::set_read_timeout(self, t)
            }
            fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
                <$t>::set_write_timeout(self, t)
            }
            fn shutdown_write(&self) -> io::Result<()> {
                self.shutdown(Shutdown::Write)
            }
            fn set_nonblocking(&self, on: bool) -> io::Result<()> {
                <$t>::set_nonblocking(self, on)
            }
        }
    };
}
timed!(TcpStream);
timed!(UnixStream);

/// A stream whose reads all end by one deadline.
pub struct Deadline<'a, S> {
    stream: &'a S,
    until: Instant,
}

impl<'a, S> Deadline<'a, S> {
    pub fn new(stream: &'a S, within: Duration) -> Self {
        Deadline {
            stream,
            until: Instant::now() + within,
        }
    }
}

impl<S: Timed> Read for Deadline<'_, S>
where
    for<'s> &'s S: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// One line of at most `cap` bytes, without its newline.
pub fn read_line(r: &mut impl BufRead, cap: usize, what: &'static str) -> Result<Vec<u8>, Error> {
    let mut buf = LineBuf::default();
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                return Err(Error::Timeout { what })
            }
            Err(source) => return Err(Error::Io { what, source }),
        };
        if chunk.is_empty() {
            return Err(if buf.is_empty() {
                Error::Closed { what }
            } else {
                Error::Truncated { what }
            });
        }
        // Consume up to the newline only: a second line stays for the
        // next read_line (a credential, then its request).
        let n = chunk
            .iter()
            .position(|&b| b == b'\n')
            .map_or(chunk.len(), |i| i + 1);
        let frame = buf.push(&chunk[..n], cap);
        r.consume(n);
        match frame {
            Frame::More => {}
            Frame::Line(l) => return Ok(l),
            Frame::TooLong => return Err(Error::TooLong { what, cap }),
        }
    }
}

/// A reader of `stream` whose lines must all arrive `within`.
pub fn reader<S: Timed>(stream: &S, within: Duration) -> BufReader<Deadline<'_, S>>
where
    for<'s> &'s S: Read,
{
    BufReader::new(Deadline::new(stream, within))
}

/// Closes after an answer, reading what the peer still sends for a moment
/// first: closing with unread input resets the connection, and the peer
/// could lose the answer (a refusal's reason) to the reset.
pub fn close<S: Timed>(stream: &S, linger: Duration)
where
    for<'s> &'s S: Read,
{
    let _ = stream.shutdown_write();
    let mut rest = Deadline::new(stream, linger).take(MAX_DRAIN);
    let _ = io::copy(&mut rest, &mut io::sink());
}

/// What [`close`] reads at most before it gives up on a peer.
const MAX_DRAIN: u64 = 2 << 20;

/// Refuse a connection with `answer` (e.g. "busy") before reading it,
/// without waiting on the peer (a flood's refusals must not hold the
/// accepting thread): a short line into an empty socket buffer, then what
/// the peer has sent so far is read (so that the close does not reset the
/// connection and lose the answer) and the connection closed.
pub fn refuse<S: Timed, T: Serialize>(stream: &S, answer: &T)
where
    for<'s> &'s S: Read + Write,
{
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let _ = write(stream, answer);
    let _ = stream.shutdown_write();
    let mut r = stream.take(MAX_DRAIN);
    let _ = io::copy(&mut r, &mut io::sink());
}

/// The client's side of one round trip on a connected `stream`: send
/// `lines` (each one line, newline included: see [`encode`]), then read
/// one answer line of at most `cap` bytes, all within `timeout`. The
/// answer is read even when sending failed: a busy server answers and
/// closes before it reads.
pub fn call<S: Timed>(
    stream: &S,
    lines: &[&[u8]],
    cap: usize,
    timeout: Duration,
) -> Result<Vec<u8>, Error>
where
    for<'s> &'s S: Read + Write,
{
    let io = |source| Error::Io {
        what: "sending the request",
        source,
    };
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut w = stream;
    let sent = lines.iter().try_for_each(|l| w.write_all(l));
    let answer = read_line(&mut reader(stream, timeout), cap, "answer");
    match (answer, sent) {
        (Ok(line), _) => Ok(line),
        (Err(Error::Closed { .. } | Error::Io { .. }), Err(e)) => Err(io(e)),
        (Err(e), _) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_line_splits_at_its_newline_and_respects_the_cap() {
        let mut b = LineBuf::default();
        assert_eq!(b.push(b"{\"a\"", 10), Frame::More);
        assert_eq!(b.push(b":1}\nrest", 10), Frame::Line(b"{\"a\":1}".to_vec()));
        assert_eq!(b.push(b"0123456789", 10), Frame::More);
        assert_eq!(b.push(b"x", 10), Frame::TooLong);
        // A whole line that arrives at once is held to the cap too.
        assert_eq!(b.push(&[b'x'; 11], 10), Frame::TooLong);
        assert_eq!(
            b.push(b"0123456789\n", 10),
            Frame::Line(b"0123456789".to_vec())
        );
    }

    #[test]
    fn two_lines_read_one_at_a_time() {
        let mut r = io::Cursor::new(b"cred\nbody\n".to_vec());
        assert_eq!(read_line(&mut r, 10, "credential").unwrap(), b"cred");
        assert_eq!(read_line(&mut r, 10, "request").unwrap(), b"body");
        let e = read_line(&mut r, 10, "request").unwrap_err();
        assert!(matches!(e, Error::Closed { .. }), "{e}");
        let mut r = io::Cursor::new(b"half".to_vec());
        let e = read_line(&mut r, 10, "request").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the connection closed before the end of the request"
        );
        let mut r = io::Cursor::new(vec![b'x'; 100]);
        let e = read_line(&mut r, 10, "request").unwrap_err();
        assert_eq!(e.to_string(), "the request is longer than 10 bytes");
    }

    #[test]
    fn garbage_says_what_it_was_to_be() {
        let e = decode::<u32>(b"{nope", "answer").unwrap_err();
        assert!(e.to_string().starts_with("unreadable answer ("), "{e}");
        assert_eq!(decode::<u32>(b"7\r", "answer").unwrap(), 7);
        assert_eq!(encode(&7u32), b"7\n");
    }

    #[test]
    fn a_silent_peer_is_a_timeout_within_the_deadline() {
        let (a, _b) = UnixStream::pair().unwrap();
        let t = Instant::now();
        let e = call(&a, &[b"1\n"], 100, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, Error::Timeout { what: "answer" }), "{e}");
        assert!(t.elapsed() < T);
    }

    #[test]
    fn a_busy_answer_is_read_though_the_request_was_not() {
        let (a, b) = UnixStream::pair().unwrap();
        refuse(&b, &"busy");
        drop(b);
        // A request far bigger than the socket's buffer: the write fails
        // (the peer is gone), the answer is there.
        let big = vec![b'x'; 8 << 20];
        let line = call(&a, &[&big], 100, T).unwrap();
        assert_eq!(decode::<String>(&line, "answer").unwrap(), "busy");
    }
}
