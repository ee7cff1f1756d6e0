//! The agent's protocol over TCP, for a controller on another host: the
//! same [`Request`]s and [`Response`]s as over the Unix socket
//! ([`wire`](crate::wire)), each request preceded by its MUNGE credential
//! ([`auth`](crate::auth)). One request per connection:
//!
//! ```text
//! client: MUNGE:...:\n            the credential, at most 4 KiB
//! client: {"op":"hello"}\n        the request, one JSON line, at most 1 MiB
//! server: {"kind":"hello",...}\n  the answer, one JSON line
//! ```
//!
//! The lines are memgang's one transport ([`memgang_proto::lines`]); what
//! is Slurm's here is the credential line before the request.
//!
//! The credential's payload is a hash of the request line's exact bytes
//! and the agent's name ([`auth::payload`]). The server reads with a
//! deadline for the whole request (not per read: a client sending a byte a
//! second is cut off), checks the credential before it parses the request,
//! serves a bounded number of connections at once (one more is answered
//! "busy"), and answers every refusal with its reason, which it also logs.
//! Answers are not signed: a forged answer can make the controller believe
//! a switch failed or succeeded, not make an agent act.

use crate::auth::{Signer, Verifier};
use crate::wire::{self, Request, Response};
use anyhow::{anyhow, Context, Result};
use memgang_proto::lines;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The agents' TCP port unless configured: beside Slurm's own
/// (slurmctld 6817, slurmd 6818, slurmdbd 6819, slurmrestd 6820).
pub const DEFAULT_PORT: u16 = 6828;

/// The server's bounds.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_credential: usize,
    pub max_request: usize,
    /// To receive a whole request, and to send the answer.
    pub io_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_credential: 4 << 10,
            max_request: 1 << 20,
            io_timeout: Duration::from_secs(10),
            max_connections: 16,
        }
    }
}

/// Stops a running [`Server`].
#[derive(Clone)]
pub struct Stopper {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

impl Stopper {
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept(2).
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// An agent's TCP listener.
pub struct Server {
    listener: TcpListener,
    verifier: Arc<Verifier>,
    limits: Limits,
    stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
    log: Arc<Throttled>,
}

/// Warnings of a flood, at most one per [`LOG_EVERY`] with a count of
/// the others: a flood of connections must not flood the log.
#[derive(Default)]
struct Throttled(Mutex<(Option<Instant>, u64)>);

const LOG_EVERY: Duration = Duration::from_secs(10);

impl Throttled {
    fn warn(&self, msg: impl FnOnce() -> String) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (last, unlogged) = &mut *g;
        if last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            *unlogged += 1;
            return;
        }
        let more = std::mem::take(unlogged);
        let more = if more > 0 {
            format!(" (and {more} more like it since the last)")
        } else {
            String::new()
        };
        tracing::warn!("{}{more}", msg());
        *last = Some(Instant::now());
    }
}

/// Decrements the count of connections being served when one ends.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Server {
    pub fn bind(
        addr: impl ToSocketAddrs + std::fmt::Debug,
        verifier: Verifier,
        limits: Limits,
    ) -> Result<Server> {
        let listener = TcpListener::bind(&addr).with_context(|| {
            format!("cannot listen on {addr:?} (an address of this host? port in use?)")
        })?;
        Ok(Server {
            listener,
            verifier: Arc::new(verifier),
            limits,
            stop: Arc::default(),
            active: Arc::default(),
            log: Arc::default(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener")
    }

    pub fn stopper(&self) -> Stopper {
        let mut addr = self.local_addr();
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        Stopper {
            stop: self.stop.clone(),
            addr,
        }
    }

    /// Serves until stopped: each authenticated request goes to `handler`
    /// (in its own thread), whose answer goes back.
    pub fn run<H>(self, handler: H) -> Result<()>
    where
        H: Fn(Request) -> Response + Send + Sync + 'static,
    {
        let handler = Arc::new(handler);
        for conn in self.listener.incoming() {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    // EMFILE and the like: do not spin.
                    tracing::warn!("accepting a connection: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            let peer = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into());
            if self.active.fetch_add(1, Ordering::SeqCst) >= self.limits.max_connections {
                self.active.fetch_sub(1, Ordering::SeqCst);
                let max = self.limits.max_connections;
                self.log.warn(|| {
                    format!("refused a connection from {peer}: {max} already being served")
                });
                lines::refuse(
                    &stream,
                    &Response::Error {
                        message: format!(
                            "agent {} busy: {max} requests in progress, try again",
                            self.verifier.audience(),
                        ),
                    },
                );
                continue;
            }
            let active = Active(self.active.clone());
            let (verifier, limits, handler) =
                (self.verifier.clone(), self.limits.clone(), handler.clone());
            std::thread::spawn(move || {
                let _active = active;
                let reply = match receive(&stream, &verifier, &limits) {
                    Ok(req) => handler(req),
                    Err(e) => {
                        tracing::warn!("refused a request from {peer}: {e:#}");
                        Response::Error {
                            message: format!(
                                "agent {} refused the request: {e:#}",
                                verifier.audience()
                            ),
                        }
                    }
                };
                if let Err(e) = stream
                    .set_write_timeout(Some(limits.io_timeout))
                    .and_then(|()| lines::write(&stream, &reply))
                {
                    tracing::warn!("answering {peer}: {e}");
                }
                lines::close(&stream, Duration::from_secs(1));
            });
        }
        Ok(())
    }
}

/// Reads a request and its credential, and verifies the credential before
/// parsing the request.
fn receive(stream: &TcpStream, verifier: &Verifier, limits: &Limits) -> Result<Request> {
    let mut r = lines::reader(stream, limits.io_timeout);
    let cred = lines::read_line(&mut r, limits.max_credential, "credential")?;
    let cred = std::str::from_utf8(&cred).map_err(|_| anyhow!("the credential is not text"))?;
    let body = lines::read_line(&mut r, limits.max_request, "request")?;
    verifier.verify(cred, &body)?;
    lines::decode(&body, "request").context("not one of the agent's requests")
}

/// Sends `body` (one line) with `credential` to the agent at `addr` and
/// reads its answer, all within `timeout` once connected. The raw frame,
/// for tests and for [`Client::call`].
pub fn exchange(
    addr: &str,
    credential: &str,
    body: &str,
    connect_timeout: Duration,
    timeout: Duration,
) -> Result<Response> {
    let stream = connect(addr, connect_timeout)?;
    let cred = format!("{credential}\n");
    let body = format!("{body}\n");
    let line = lines::call(
        &stream,
        &[cred.as_bytes(), body.as_bytes()],
        wire::MAX_ANSWER,
        timeout,
    )
    .map_err(|e| wire::call_error(e, addr, timeout))?;
    wire::parse_response(&line, addr)
}

fn connect(addr: &str, timeout: Duration) -> Result<TcpStream> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .with_context(|| format!("agent address {addr:?}: not host:port, or the host is unknown"))?
        .collect();
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => anyhow!(
            "cannot reach the memgang agent at {addr}: {e} (is `memgang slurm agent` listening there, and does the firewall let the controller in?)"
        ),
        None => anyhow!("agent address {addr:?} resolves to nothing"),
    })
}

/// The controller's side: signed requests to agents.
pub struct Client {
    signer: Signer,
    pub connect_timeout: Duration,
}

impl Client {
    pub fn new(signer: Signer) -> Client {
        Client {
            signer,
            connect_timeout: Duration::from_secs(3),
        }
    }

    /// One round trip to the agent named `node` at `addr`, waiting at most
    /// `timeout` for the answer. An [`Response::Error`] comes back as an
    /// `Err` with the agent's message.
    pub fn call(
        &self,
        node: &str,
        addr: &str,
        req: &Request,
        timeout: Duration,
    ) -> Result<Response> {
        let body = serde_json::to_string(req).expect("requests serialize");
        let cred = self
            .signer
            .sign(node, body.as_bytes())
            .map_err(|e| anyhow!("signing the request to {node}: {e}"))?;
        exchange(addr, &cred, &body, self.connect_timeout, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::fake::Fake;
    use crate::auth::payload;
    use crate::auth::CredentialService;
    use std::io::{Read, Write};
    use std::net::Shutdown;
    use std::sync::mpsc;

    struct Running {
        addr: String,
        stopper: Stopper,
        thread: Option<std::thread::JoinHandle<Result<()>>>,
        handled: mpsc::Receiver<Request>,
        /// Ends a `Check` in its handler: the test holds it there, not a
        /// sleep a loaded machine could outlast.
        release: mpsc::Sender<()>,
    }

    impl Drop for Running {
        fn drop(&mut self) {
            self.stopper.stop();
            if let Some(t) = self.thread.take() {
                t.join().unwrap().unwrap();
            }
        }
    }

    fn serve(fake: Arc<Fake>, limits: Limits) -> Running {
        let v = Verifier::new(fake, "n1", Duration::from_secs(300), 100);
        let server = Server::bind("127.0.0.1:0", v, limits).unwrap();
        let addr = server.local_addr().to_string();
        let stopper = server.stopper();
        let (tx, handled) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let (release, held) = mpsc::channel::<()>();
        let held = std::sync::Mutex::new(held);
        let thread = std::thread::spawn(move || {
            server.run(move |req| {
                tx.lock().unwrap().send(req.clone()).unwrap();
                match req {
                    Request::Hello => Response::Hello {
                        node: "n1".into(),
                        pool_bytes: 1 << 30,
                    },
                    // Slow until released: for the connection bound.
                    Request::Check { .. } => {
                        let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(60));
                        Response::Ok
                    }
                    _ => Response::Ok,
                }
            })
        });
        Running {
            addr,
            stopper,
            thread: Some(thread),
            handled,
            release,
        }
    }

    fn client(fake: Arc<Fake>) -> Client {
        Client::new(Signer::new(fake, Duration::from_secs(60)))
    }

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_signed_request_is_served_and_a_replay_refused() {
        let fake = Arc::new(Fake::new("k"));
        let s = serve(fake.clone(), Limits::default());
        let c = client(fake.clone());
        let r = c.call("n1", &s.addr, &Request::Hello, T).unwrap();
        assert_eq!(
            r,
            Response::Hello {
                node: "n1".into(),
                pool_bytes: 1 << 30
            }
        );
        assert_eq!(s.handled.try_recv().unwrap(), Request::Hello);

        let body = serde_json::to_string(&Request::Hello).unwrap();
        let cred = fake.encode(&payload("n1", body.as_bytes()), T).unwrap();
        exchange(&s.addr, &cred, &body, T, T).unwrap();
        let e = exchange(&s.addr, &cred, &body, T, T).unwrap_err();
        assert!(e.to_string().contains("replayed"), "{e}");
        // Signed for another node, or by another key.
        let e = c.call("n2", &s.addr, &Request::Hello, T).unwrap_err();
        assert!(e.to_string().contains("another node"), "{e}");
        let e = client(Arc::new(Fake::new("other")))
            .call("n1", &s.addr, &Request::Hello, T)
            .unwrap_err();
        assert!(e.to_string().contains("another MUNGE key"), "{e}");
        s.handled.recv_timeout(T).unwrap();
        assert!(
            s.handled.try_recv().is_err(),
            "a refused request reached the handler"
        );
    }

    #[test]
    fn garbage_oversized_and_silent_clients_are_refused_and_the_server_lives() {
        let fake = Arc::new(Fake::new("k"));
        let limits = Limits {
            max_request: 1000,
            io_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let s = serve(fake.clone(), limits);
        let e = exchange(&s.addr, "garbage", "{}", T, T).unwrap_err();
        assert!(e.to_string().contains("not a credential"), "{e}");

        let big = format!("\"{}\"", "x".repeat(5000));
        let cred = fake.encode(&payload("n1", big.as_bytes()), T).unwrap();
        let e = exchange(&s.addr, &cred, &big, T, T).unwrap_err();
        assert!(e.to_string().contains("longer than 1000 bytes"), "{e}");

        // Authentic but not a request.
        let cred = fake.encode(&payload("n1", b"[1,2]"), T).unwrap();
        let e = exchange(&s.addr, &cred, "[1,2]", T, T).unwrap_err();
        assert!(e.to_string().contains("unreadable request"), "{e}");

        // A client that says nothing, or half a line, is cut off.
        for said in [&b""[..], b"MUNGE:abc"] {
            let mut raw = TcpStream::connect(&s.addr).unwrap();
            raw.write_all(said).unwrap();
            raw.set_read_timeout(Some(T)).unwrap();
            let mut got = String::new();
            raw.read_to_string(&mut got).unwrap();
            assert!(got.contains("timed out reading the credential"), "{got}");
        }
        // A credential line without a newline after it, then EOF.
        let mut raw = TcpStream::connect(&s.addr).unwrap();
        raw.write_all(b"MUNGE:abc\n{").unwrap();
        raw.shutdown(Shutdown::Write).unwrap();
        let mut got = String::new();
        raw.read_to_string(&mut got).unwrap();
        assert!(
            got.contains("closed before the end of the request"),
            "{got}"
        );

        client(fake)
            .call("n1", &s.addr, &Request::Hello, T)
            .unwrap();
        assert_eq!(s.handled.try_recv().unwrap(), Request::Hello);
        assert!(s.handled.try_recv().is_err());
    }

    #[test]
    fn connections_beyond_the_bound_are_told_busy() {
        let fake = Arc::new(Fake::new("k"));
        let s = serve(
            fake.clone(),
            Limits {
                max_connections: 1,
                ..Limits::default()
            },
        );
        let (addr, f2) = (s.addr.clone(), fake.clone());
        let slow = std::thread::spawn(move || {
            client(f2).call("n1", &addr, &Request::Check { incoming: vec![] }, T)
        });
        // The slow request is in its handler: the next connection is busy.
        assert!(matches!(
            s.handled.recv_timeout(T).unwrap(),
            Request::Check { .. }
        ));
        let e = client(fake.clone())
            .call("n1", &s.addr, &Request::Hello, T)
            .unwrap_err();
        assert!(e.to_string().contains("busy"), "{e}");
        s.release.send(()).unwrap();
        assert_eq!(slow.join().unwrap().unwrap(), Response::Ok);
        client(fake)
            .call("n1", &s.addr, &Request::Hello, T)
            .unwrap();
    }

    #[test]
    fn an_agent_that_is_not_there_is_a_clear_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let e = client(Arc::new(Fake::new("k")))
            .call("n1", &addr, &Request::Hello, T)
            .unwrap_err();
        assert!(
            e.to_string().contains("cannot reach the memgang agent"),
            "{e}"
        );
        let e = client(Arc::new(Fake::new("k")))
            .call("n1", "no port", &Request::Hello, T)
            .unwrap_err();
        assert!(e.to_string().contains("not host:port"), "{e}");
    }
}
