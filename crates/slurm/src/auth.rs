//! Who may drive an agent over the network: root on a host of the
//! cluster, proven by a MUNGE credential (every Slurm cluster runs munged
//! with one shared key).
//!
//! The controller encodes a credential per request whose payload is
//! [`payload`]: the agent's name and a SHA-256 of the request's exact
//! bytes, so a credential cannot be reused for another request or another
//! node. The agent decodes it ([`Verifier::verify`]) and refuses, each with
//! its own [`AuthError`]: a credential of another key or not one at all
//! (`unmunge` fails), an expired one, one of a user other than root, one
//! made for another request or node, one living longer than the agent
//! allows, and one it has seen before (a replay cache keyed by the
//! credential, each entry kept until the credential expires, bounded in
//! size: full, it refuses rather than forget a live credential).
//!
//! MUNGE is reached through its `munge`/`unmunge` tools (Debian's `munge`
//! package, which every node running munged has) rather than libmunge:
//! no C library or headers to link against at build time, no `unsafe`, and
//! the cost (a process per request, a few milliseconds) is nothing beside a
//! switch that pages hundreds of MiB. [`CredentialService`] is the seam:
//! the unit tests use a fake one.

use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a credential service tells of a credential it decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The encoding process's user and group, on the encoding host.
    pub uid: u32,
    pub gid: u32,
    /// Seconds since the epoch, on the encoding host's clock.
    pub encode_time: u64,
    /// Seconds it stays valid after `encode_time`.
    pub ttl: u64,
    pub payload: Vec<u8>,
}

/// Why a request's credential was refused (or could not be made).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("MUNGE is not available: {0} (is munged running, and is its socket the one given?)")]
    Unavailable(String),
    #[error("not a credential of this cluster ({0}): encoded with another MUNGE key, or not a MUNGE credential at all")]
    Foreign(String),
    #[error("expired credential ({0}): check that the hosts' clocks agree")]
    Expired(String),
    #[error("replayed credential: this credential was already used for a request")]
    Replayed,
    #[error(
        "credential of uid {uid}: only root (uid 0) on a host of the cluster may drive an agent"
    )]
    NotRoot { uid: u32 },
    #[error("the credential was made for another request or another node (its payload is not this request's)")]
    WrongRequest,
    #[error("the credential lives {ttl} s, more than the {max} s an agent accepts")]
    TtlTooLong { ttl: u64, max: u64 },
    #[error(
        "{0} live credentials already seen: the replay cache is full, refusing until some expire"
    )]
    CacheFull(usize),
}

/// Encodes and decodes credentials: MUNGE ([`Munge`]), or a fake in tests.
pub trait CredentialService: Send + Sync {
    fn encode(&self, payload: &[u8], ttl: Duration) -> Result<String, AuthError>;
    fn decode(&self, credential: &str) -> Result<Decoded, AuthError>;
}

/// What a request's credential carries: the node it is for and a hash of
/// the request's bytes.
pub fn payload(audience: &str, body: &[u8]) -> Vec<u8> {
    format!("memgang-slurm-v1 {audience} {:x}", Sha256::digest(body)).into_bytes()
}

/// MUNGE through its command-line tools.
#[derive(Clone, Debug, Default)]
pub struct Munge {
    /// munged's socket; None: the tools' default (/run/munge/munge.socket.2).
    pub socket: Option<PathBuf>,
}

/// Longest a `munge` or `unmunge` may take (they talk to the local munged).
const TOOL_TIMEOUT: Duration = Duration::from_secs(10);

impl Munge {
    pub fn new(socket: Option<PathBuf>) -> Munge {
        Munge { socket }
    }

    /// Runs `tool` with `input` on stdin: its exit code, stdout and stderr.
    fn run(
        &self,
        tool: &str,
        args: &[&str],
        input: &[u8],
    ) -> Result<(i32, Vec<u8>, String), AuthError> {
        let mut cmd = Command::new(tool);
        if let Some(s) = &self.socket {
            cmd.arg("--socket").arg(s);
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                AuthError::Unavailable(format!(
                    "cannot run {tool}: {e} (install Debian's munge package)"
                ))
            })?;
        // Credentials and payloads are a few hundred bytes: they fit the
        // pipes, so writing all before reading cannot deadlock.
        let mut stdin = child.stdin.take().expect("piped");
        let wrote = stdin.write_all(input);
        drop(stdin);
        let t = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if t.elapsed() < TOOL_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(AuthError::Unavailable(format!(
                        "{tool} did not answer within {}",
                        humantime::format_duration(TOOL_TIMEOUT)
                    )));
                }
                Err(e) => return Err(AuthError::Unavailable(format!("waiting for {tool}: {e}"))),
            }
        };
        let mut out = Vec::new();
        let mut err = String::new();
        child
            .stdout
            .take()
            .expect("piped")
            .read_to_end(&mut out)
            .ok();
        child
            .stderr
            .take()
            .expect("piped")
            .read_to_string(&mut err)
            .ok();
        if let Err(e) = wrote {
            if status.success() {
                return Err(AuthError::Unavailable(format!("writing to {tool}: {e}")));
            }
        }
        Ok((status.code().unwrap_or(-1), out, err.trim().to_string()))
    }
}

// unmunge's exit codes are libmunge's munge_err_t (munge.h).
const EMUNGE_SOCKET: i32 = 6;
const EMUNGE_TIMEOUT: i32 = 7;
const EMUNGE_CRED_EXPIRED: i32 = 15;
const EMUNGE_CRED_REWOUND: i32 = 16;
const EMUNGE_CRED_REPLAYED: i32 = 17;

impl CredentialService for Munge {
    fn encode(&self, payload: &[u8], ttl: Duration) -> Result<String, AuthError> {
        let ttl = ttl.as_secs().max(1).to_string();
        let (code, out, err) = self.run("munge", &["--ttl", &ttl], payload)?;
        if code != 0 {
            return Err(AuthError::Unavailable(format!("munge failed: {err}")));
        }
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    fn decode(&self, credential: &str) -> Result<Decoded, AuthError> {
        let (code, out, err) = self.run("unmunge", &["--numeric"], credential.as_bytes())?;
        match code {
            0 => parse_unmunge(&out),
            EMUNGE_SOCKET | EMUNGE_TIMEOUT => Err(AuthError::Unavailable(err)),
            EMUNGE_CRED_EXPIRED | EMUNGE_CRED_REWOUND => Err(AuthError::Expired(err)),
            EMUNGE_CRED_REPLAYED => Err(AuthError::Replayed),
            _ => Err(AuthError::Foreign(if err.is_empty() {
                format!("unmunge exited {code}")
            } else {
                err
            })),
        }
    }
}

/// `unmunge --numeric`'s output: `KEY: value` lines, an empty line, the
/// payload.
fn parse_unmunge(out: &[u8]) -> Result<Decoded, AuthError> {
    let bad = |what: &str| AuthError::Foreign(format!("unmunge printed no {what}"));
    let split = out
        .windows(2)
        .position(|w| w == b"\n\n")
        .ok_or_else(|| bad("metadata"))?;
    let meta = String::from_utf8_lossy(&out[..split]);
    let payload = out[split + 2..].to_vec();
    let mut fields = HashMap::new();
    for line in meta.lines() {
        if let Some((k, v)) = line.split_once(':') {
            fields.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    let num = |k: &str| -> Result<u64, AuthError> {
        fields
            .get(k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad(k))
    };
    Ok(Decoded {
        uid: num("UID")? as u32,
        gid: num("GID")? as u32,
        encode_time: num("ENCODE_TIME")?,
        ttl: num("TTL")?,
        payload,
    })
}

/// The controller's side: a credential per request.
pub struct Signer {
    service: Arc<dyn CredentialService>,
    ttl: Duration,
}

impl Signer {
    /// Credentials living `ttl` (a request is sent right after it is
    /// signed: a minute covers clock skew between hosts).
    pub fn new(service: Arc<dyn CredentialService>, ttl: Duration) -> Signer {
        Signer { service, ttl }
    }

    /// A credential for `body` sent to the agent named `audience`.
    pub fn sign(&self, audience: &str, body: &[u8]) -> Result<String, AuthError> {
        self.service.encode(&payload(audience, body), self.ttl)
    }
}

/// The agent's side: is this request from root on a host of the cluster,
/// for this node, and new?
pub struct Verifier {
    service: Arc<dyn CredentialService>,
    audience: String,
    max_ttl: u64,
    seen: Mutex<ReplayCache>,
}

/// Credentials seen, each until it expires (then munged refuses it
/// anyway). Keyed by a hash of the credential.
#[derive(Debug, Default)]
struct ReplayCache {
    expiry: HashMap<[u8; 32], u64>,
    by_expiry: BTreeSet<(u64, [u8; 32])>,
    capacity: usize,
}

/// Slack on a credential's expiry, for the seconds between munged's clock
/// reading and ours.
const EXPIRY_SLACK_S: u64 = 5;

impl ReplayCache {
    /// Remember `key` until `expires`; Err if it is already there.
    fn insert(&mut self, key: [u8; 32], expires: u64, now: u64) -> Result<(), AuthError> {
        while let Some(&(t, k)) = self.by_expiry.first() {
            if t > now {
                break;
            }
            self.by_expiry.pop_first();
            self.expiry.remove(&k);
        }
        if self.expiry.contains_key(&key) {
            return Err(AuthError::Replayed);
        }
        if self.expiry.len() >= self.capacity {
            return Err(AuthError::CacheFull(self.capacity));
        }
        self.expiry.insert(key, expires);
        self.by_expiry.insert((expires, key));
        Ok(())
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Verifier {
    /// Accepts credentials for `audience` (the node's name) living at most
    /// `max_ttl`, remembering up to `capacity` of them.
    pub fn new(
        service: Arc<dyn CredentialService>,
        audience: &str,
        max_ttl: Duration,
        capacity: usize,
    ) -> Verifier {
        Verifier {
            service,
            audience: audience.to_string(),
            max_ttl: max_ttl.as_secs(),
            seen: Mutex::new(ReplayCache {
                capacity,
                ..ReplayCache::default()
            }),
        }
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The credential's identity if it may send `body` to this agent.
    pub fn verify(&self, credential: &str, body: &[u8]) -> Result<Decoded, AuthError> {
        self.verify_at(credential, body, unix_now())
    }

    fn verify_at(&self, credential: &str, body: &[u8], now: u64) -> Result<Decoded, AuthError> {
        let d = self.service.decode(credential.trim())?;
        if d.uid != 0 {
            return Err(AuthError::NotRoot { uid: d.uid });
        }
        if d.payload != payload(&self.audience, body) {
            return Err(AuthError::WrongRequest);
        }
        if d.ttl > self.max_ttl {
            return Err(AuthError::TtlTooLong {
                ttl: d.ttl,
                max: self.max_ttl,
            });
        }
        let key: [u8; 32] = Sha256::digest(credential.trim().as_bytes()).into();
        let expires = (d.encode_time + d.ttl).max(now) + EXPIRY_SLACK_S;
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, expires, now)?;
        Ok(d)
    }
}

/// A credential service for tests: credentials are readable text, signed
/// by a "key" (a string) and checked against a clock the test sets.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    pub struct Fake {
        pub key: String,
        pub uid: u32,
        pub now: AtomicU64,
        serial: AtomicU64,
    }

    impl Fake {
        pub fn new(key: &str) -> Fake {
            Fake {
                key: key.to_string(),
                uid: 0,
                now: AtomicU64::new(1_000_000),
                serial: AtomicU64::new(0),
            }
        }
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn unhex(s: &str) -> Option<Vec<u8>> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
            .collect()
    }

    impl CredentialService for Fake {
        fn encode(&self, payload: &[u8], ttl: Duration) -> Result<String, AuthError> {
            let n = self.serial.fetch_add(1, Ordering::Relaxed);
            Ok(format!(
                "FAKE:{}:{}:{n}:{}:{}:{}",
                self.key,
                self.uid,
                self.now.load(Ordering::Relaxed),
                ttl.as_secs(),
                hex(payload)
            ))
        }

        fn decode(&self, credential: &str) -> Result<Decoded, AuthError> {
            let f: Vec<&str> = credential.split(':').collect();
            let foreign = || AuthError::Foreign("not a fake credential of this key".into());
            if f.len() != 7 || f[0] != "FAKE" || f[1] != self.key {
                return Err(foreign());
            }
            let num = |s: &str| s.parse::<u64>().map_err(|_| foreign());
            let d = Decoded {
                uid: num(f[2])? as u32,
                gid: 0,
                encode_time: num(f[4])?,
                ttl: num(f[5])?,
                payload: unhex(f[6]).ok_or_else(foreign)?,
            };
            if self.now.load(Ordering::Relaxed) > d.encode_time + d.ttl {
                return Err(AuthError::Expired("fake".into()));
            }
            Ok(d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::Fake;
    use super::*;
    use std::sync::atomic::Ordering;

    fn pair(key: &str) -> (Arc<Fake>, Signer, Verifier) {
        let f = Arc::new(Fake::new(key));
        let s = Signer::new(f.clone(), Duration::from_secs(60));
        let v = Verifier::new(f.clone(), "n1", Duration::from_secs(300), 4);
        (f, s, v)
    }

    #[test]
    fn a_credential_is_good_once_for_its_own_request_and_node() {
        let (f, s, v) = pair("k");
        let now = f.now.load(Ordering::Relaxed);
        let c = s.sign("n1", b"{\"op\":\"hello\"}").unwrap();
        assert_eq!(v.verify_at(&c, b"{\"op\":\"hello\"}", now).unwrap().uid, 0);
        assert_eq!(
            v.verify_at(&c, b"{\"op\":\"hello\"}", now),
            Err(AuthError::Replayed)
        );
        let c = s.sign("n1", b"{\"op\":\"hello\"}").unwrap();
        assert_eq!(
            v.verify_at(&c, b"{\"op\":\"switch\"}", now),
            Err(AuthError::WrongRequest)
        );
        let c = s.sign("n2", b"{\"op\":\"hello\"}").unwrap();
        assert_eq!(
            v.verify_at(&c, b"{\"op\":\"hello\"}", now),
            Err(AuthError::WrongRequest)
        );
    }

    #[test]
    fn foreign_non_root_and_long_lived_credentials_are_refused() {
        let (_, _, v) = pair("k");
        let (_, other, _) = pair("another key");
        let c = other.sign("n1", b"x").unwrap();
        assert!(matches!(v.verify(&c, b"x"), Err(AuthError::Foreign(_))));
        assert!(matches!(
            v.verify("garbage", b"x"),
            Err(AuthError::Foreign(_))
        ));

        let mut f = Fake::new("k");
        f.uid = 1000;
        let c = Signer::new(Arc::new(f), Duration::from_secs(60))
            .sign("n1", b"x")
            .unwrap();
        let e = v.verify(&c, b"x").unwrap_err();
        assert_eq!(e, AuthError::NotRoot { uid: 1000 });
        assert!(e.to_string().contains("only root"), "{e}");

        let long = Signer::new(Arc::new(Fake::new("k")), Duration::from_secs(3600));
        let c = long.sign("n1", b"x").unwrap();
        assert_eq!(
            v.verify(&c, b"x"),
            Err(AuthError::TtlTooLong {
                ttl: 3600,
                max: 300
            })
        );
    }

    #[test]
    fn the_replay_cache_forgets_only_expired_credentials_and_is_bounded() {
        let (f, s, v) = pair("k");
        let t0 = f.now.load(Ordering::Relaxed);
        let creds: Vec<String> = (0..5).map(|_| s.sign("n1", b"x").unwrap()).collect();
        for c in &creds[..4] {
            v.verify_at(c, b"x", t0).unwrap();
        }
        // Full of live credentials: a fifth is refused, not let in by
        // forgetting one.
        assert_eq!(
            v.verify_at(&creds[4], b"x", t0),
            Err(AuthError::CacheFull(4))
        );
        assert_eq!(
            v.verify_at(&creds[0], b"x", t0 + 30),
            Err(AuthError::Replayed)
        );
        // Past their expiry (ttl 60 s + slack) they are dropped, and munged
        // (here the fake) refuses them as expired.
        let later = t0 + 60 + EXPIRY_SLACK_S + 1;
        f.now.store(later, Ordering::Relaxed);
        assert!(matches!(
            v.verify_at(&creds[0], b"x", later),
            Err(AuthError::Expired(_))
        ));
        let fresh = s.sign("n1", b"x").unwrap();
        v.verify_at(&fresh, b"x", later).unwrap();
        assert_eq!(v.seen.lock().unwrap().expiry.len(), 1);
    }

    #[test]
    fn unmunge_output_parses() {
        let out = b"STATUS:          0\nENCODE_HOST:     1.2.3.4\nENCODE_TIME:     1795818081\nDECODE_TIME:     1795818082\nTTL:             300\nCIPHER:          4\nMAC:             5\nZIP:             0\nUID:             1000\nGID:             0\nLENGTH:          1\n\nx";
        let d = parse_unmunge(out).unwrap();
        assert_eq!(
            d,
            Decoded {
                uid: 1000,
                gid: 0,
                encode_time: 1795818081,
                ttl: 300,
                payload: b"x".to_vec()
            }
        );
        assert!(parse_unmunge(b"STATUS: 0\nUID: 0\n\n").is_err());
        assert!(parse_unmunge(b"nothing").is_err());
    }

    #[test]
    fn payloads_bind_node_and_bytes() {
        assert_ne!(payload("n1", b"a"), payload("n2", b"a"));
        assert_ne!(payload("n1", b"a"), payload("n1", b"b"));
        let p = String::from_utf8(payload("n1", b"a")).unwrap();
        assert!(p.starts_with("memgang-slurm-v1 n1 "), "{p}");
        assert_eq!(p.len(), "memgang-slurm-v1 n1 ".len() + 64);
    }
}
