//! The controller's way to the nodes' agents: where each listens (the
//! node's `NodeAddr` as Slurm knows it, and the agents' port: an admin
//! configures each node's address once, in slurm.conf) and the
//! MUNGE-authenticated round trip ([`net::Client`]).

use crate::auth::{Munge, Signer};
use crate::net::Client;
use crate::wire::{Request, Response};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a request's credential lives: it is sent at once; a minute
/// covers clock skew between the controller's host and the nodes.
pub const CREDENTIAL_TTL: Duration = Duration::from_secs(60);

/// The nodes' agents, shared by the controller's threads (a clone is the
/// same book).
#[derive(Clone)]
pub struct Agents {
    inner: Arc<Inner>,
}

struct Inner {
    port: u16,
    client: Client,
    /// Node name -> host (NodeAddr), read from Slurm when a node is first
    /// called and again when a node is not in it.
    book: Mutex<BTreeMap<String, String>>,
    lookup: Box<dyn Fn() -> Result<BTreeMap<String, String>> + Send + Sync>,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents")
            .field("port", &self.inner.port)
            .field("book", &self.inner.book.lock().map(|b| b.clone()).ok())
            .finish()
    }
}

impl Agents {
    /// Agents on port `port` of each node's `NodeAddr`, called with
    /// credentials of the munged at `munge_socket` (None: MUNGE's default).
    pub fn from_slurm(port: u16, munge_socket: Option<PathBuf>) -> Agents {
        let signer = Signer::new(Arc::new(Munge::new(munge_socket)), CREDENTIAL_TTL);
        Agents::new(port, Client::new(signer), Box::new(node_addrs))
    }

    /// Agents whose hosts `lookup` gives (tests: a fixed book).
    pub fn new(
        port: u16,
        client: Client,
        lookup: Box<dyn Fn() -> Result<BTreeMap<String, String>> + Send + Sync>,
    ) -> Agents {
        Agents {
            inner: Arc::new(Inner {
                port,
                client,
                book: Mutex::default(),
                lookup,
            }),
        }
    }

    /// `host:port` of node `node`'s agent.
    pub fn addr(&self, node: &str) -> Result<String> {
        let mut book = self.inner.book.lock().unwrap_or_else(|p| p.into_inner());
        if !book.contains_key(node) {
            *book = (self.inner.lookup)()?;
        }
        match book.get(node) {
            Some(host) => Ok(host_port(host, self.inner.port)),
            None => bail!("Slurm knows no node {node} (see `scontrol show node {node}`)"),
        }
    }

    /// One authenticated round trip to node `node`'s agent, waiting at most
    /// `timeout` for the answer. An [`Response::Error`] comes back as an
    /// `Err` with the agent's message; every error is one sentence naming
    /// the agent's address.
    pub fn call(&self, node: &str, req: &Request, timeout: Duration) -> Result<Response> {
        let addr = self.addr(node)?;
        self.inner.client.call(node, &addr, req, timeout)
    }
}

/// `host:port`, an IPv6 address in brackets.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Every node's `NodeAddr` (its name when slurm.conf gives none), from
/// `sinfo -N -o '%N %o'`.
pub fn node_addrs() -> Result<BTreeMap<String, String>> {
    let out = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N %o"])
        .output()
        .context("running sinfo (is Slurm installed and SLURM_CONF set?)")?;
    if !out.status.success() {
        bail!(
            "sinfo -N -o '%N %o' failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_node_addrs(&String::from_utf8_lossy(&out.stdout))
}

pub fn parse_node_addrs(text: &str) -> Result<BTreeMap<String, String>> {
    let mut book = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut f = line.split_whitespace();
        match (f.next(), f.next(), f.next()) {
            (Some(node), Some(addr), None) => {
                book.insert(node.to_string(), addr.to_string());
            }
            _ => bail!("sinfo printed {line:?}, not `NODE NODEADDR`"),
        }
    }
    Ok(book)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::fake::Fake;
    use crate::auth::Verifier;
    use crate::net::{Limits, Server};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const T: Duration = Duration::from_secs(5);

    fn agents(fake: Arc<Fake>, port: u16, looked: Arc<AtomicUsize>) -> Agents {
        let client = Client::new(Signer::new(fake, Duration::from_secs(60)));
        Agents::new(
            port,
            client,
            Box::new(move || {
                looked.fetch_add(1, Ordering::SeqCst);
                parse_node_addrs("n1 127.0.0.1\nn2 127.0.0.1\n")
            }),
        )
    }

    #[test]
    fn sinfo_node_addresses_parse() {
        let b = parse_node_addrs("n1 10.77.0.1\nn2 n2\n\n").unwrap();
        assert_eq!(b["n1"], "10.77.0.1");
        assert_eq!(b["n2"], "n2");
        assert!(parse_node_addrs("n1\n").is_err());
        assert_eq!(host_port("fe80::1", 6828), "[fe80::1]:6828");
        assert_eq!(host_port("n1", 6828), "n1:6828");
    }

    #[test]
    fn nodes_are_called_by_their_slurm_address_and_unknown_ones_refused() {
        let fake = Arc::new(Fake::new("k"));
        let v = Verifier::new(fake.clone(), "n1", Duration::from_secs(300), 100);
        let server = Server::bind("127.0.0.1:0", v, Limits::default()).unwrap();
        let port = server.local_addr().port();
        let stopper = server.stopper();
        let t = std::thread::spawn(move || {
            server.run(|_| Response::Hello {
                node: "n1".into(),
                pool_bytes: 7,
            })
        });
        let looked = Arc::new(AtomicUsize::new(0));
        let a = agents(fake, port, looked.clone());
        assert_eq!(
            a.call("n1", &Request::Hello, T).unwrap(),
            Response::Hello {
                node: "n1".into(),
                pool_bytes: 7
            }
        );
        a.call("n1", &Request::Hello, T).unwrap();
        assert_eq!(looked.load(Ordering::SeqCst), 1, "the book is read once");
        // n2's credential is for n2: the agent of n1 refuses it.
        let e = a.call("n2", &Request::Hello, T).unwrap_err();
        assert!(e.to_string().contains("another node"), "{e}");
        let e = a.call("n9", &Request::Hello, T).unwrap_err();
        assert!(e.to_string().contains("no node n9"), "{e}");
        stopper.stop();
        t.join().unwrap().unwrap();
    }

    /// A hostile or broken agent: each failure is one sentence naming the
    /// agent's address, which the controller writes to the job's record.
    #[test]
    fn down_slow_and_garbage_agents_are_errors_that_say_so() {
        let fake = Arc::new(Fake::new("k"));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let a = agents(fake.clone(), port, Arc::default());
        let answers = ["", "{\"kind\":\"nonsense\"}\n", "not json at all\n"];
        let server = std::thread::spawn(move || {
            for answer in answers {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                if answer.is_empty() {
                    // Slow: says nothing until the client gave up.
                    std::thread::sleep(Duration::from_millis(1500));
                } else {
                    s.write_all(answer.as_bytes()).unwrap();
                }
            }
            l
        });
        let e = a
            .call("n1", &Request::Hello, Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "no answer from the agent at 127.0.0.1:{port} within 300ms"
            )),
            "{e}"
        );
        for _ in 0..2 {
            let e = a.call("n1", &Request::Hello, T).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "the agent at 127.0.0.1:{port} answered something unreadable"
                )),
                "{e}"
            );
        }
        drop(server.join().unwrap());
        // Down: nobody listens there any more.
        let e = a.call("n1", &Request::Hello, T).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "cannot reach the memgang agent at 127.0.0.1:{port}"
            )),
            "{e}"
        );
    }
}
