//! The socket. One thread does all of its I/O without blocking (poll):
//! it accepts, reads each request line, and writes each answer, with a
//! deadline on both; a few workers answer the requests, root's first, and
//! one of them only root's. So a client that connects and sends nothing,
//! or sends a byte at a time, or does not read its answer, costs a
//! descriptor and a buffer until its deadline, never a thread; the
//! connections of each user and of all users are capped; and root is
//! answered whatever the users do. One request per connection. The caller
//! is who the kernel says (SO_PEERCRED), never what it claims.

mod queue;
mod requests;

use crate::service::Shared;
use anyhow::{Context, Result};
use memgang_proto::lines::{self, Frame, LineBuf};
use memgang_proto::{Response, MAX_REQUEST_BYTES};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use requests::{answer_line, respond, Caller};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the socket holds at most, and how long a client has.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open connections of one user (root: no such cap).
    pub per_user: usize,
    /// Open connections of all users but root together.
    pub total: usize,
    /// Root's connections beyond `total`: root is served when users have
    /// taken every place.
    pub root_extra: usize,
    /// From connect to the whole request line, and from the answer being
    /// ready to its last byte written: a person's client takes
    /// milliseconds.
    pub timeout: Duration,
    /// Threads answering requests; one of them answers root only.
    pub workers: usize,
    /// Of the others, how many one user's requests may hold at once
    /// (`user_request_workers`): a user's slow requests (a lookup on a
    /// PATH of link mazes, up to `lookup_timeout` each) wait for each
    /// other, not the other users.
    pub per_user_workers: usize,
}

/// 16 per user, 256 in all: a user's scripts may submit in parallel, and
/// 256 descriptors leave most of systemd's default limit (1,024) to the
/// jobs' cgroup files and pidfds. Each connection buffers at most one
/// request line (1 MiB).
pub const LIMITS: Limits = Limits {
    per_user: 16,
    total: 256,
    root_extra: 16,
    timeout: Duration::from_secs(10),
    workers: 4,
    per_user_workers: 1,
};

/// Pause between accepts that fail for want of descriptors or memory:
/// doubled up to the maximum while they keep failing, instead of a loop
/// that spins on the same error.
const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Refusals and accept errors are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Bind the socket: anyone may connect (0666), since every request is
/// checked against the caller's uid. A directory memgang makes for it is
/// 0755; one that was there keeps its mode (a sticky /tmp stays sticky).
/// The stale socket is removed and the new one's mode set by name in the
/// directory, never through a link a user may have put there.
pub fn bind(path: &Path) -> Result<UnixListener> {
    let (dir, name) = memgang_linux::files::split(path)?;
    let (d, _) = memgang_linux::files::make_dirs(&dir, 0o755)
        .with_context(|| format!("making the socket's directory {}", dir.display()))?;
    // A socket left by a daemon that died: the state-dir lock says no
    // other daemon runs, so it is stale.
    d.remove(&name)
        .with_context(|| format!("removing the stale socket {}", path.display()))?;
    let l = UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
    d.set_mode_of(&name, 0o666)
        .with_context(|| format!("making {} 0666", path.display()))?;
    Ok(l)
}

/// Serve the socket until the process ends.
pub fn serve(listener: UnixListener, shared: Arc<Shared>, limits: Limits) {
    if let Err(e) = Server::new(listener, shared, limits).and_then(Server::run) {
        tracing::error!("the socket stopped serving: {e:#}");
    }
}

enum State {
    /// The request line so far.
    Reading(LineBuf),
    /// With a worker.
    Working,
    /// The answer and how much of it is written.
    Writing(Vec<u8>, usize),
}

struct Conn {
    stream: UnixStream,
    caller: Caller,
    /// None while a worker has it (a worker's time is bounded by the
    /// request, not by the client).
    deadline: Option<Instant>,
    state: State,
}

struct Task {
    token: u64,
    caller: Caller,
    line: Vec<u8>,
}

/// The requests waiting for a worker: root's, then the users' in turns,
/// one request of each user with requests waiting in turn, and none of a
/// user who holds `per_user_workers` already.
#[derive(Default)]
struct Queue {
    root: VecDeque<Task>,
    /// Each user's requests waiting, by uid.
    users: HashMap<u32, VecDeque<Task>>,
    /// The users with requests waiting, in the order they are served.
    turns: VecDeque<u32>,
    /// Workers on each user's requests now.
    busy: HashMap<u32, usize>,
}

impl Queue {
    fn push(&mut self, task: Task) {
        let uid = task.caller.uid;
        if uid == 0 {
            self.root.push_back(task);
            return;
        }
        let q = self.users.entry(uid).or_default();
        if q.is_empty() {
            self.turns.push_back(uid);
        }
        q.push_back(task);
    }

    /// The request a worker takes next, if it may take one: root's first;
    /// then (unless `root_only`) the first user in turn who holds fewer
    /// than `per_user` workers, who goes to the back of the turns.
    fn take(&mut self, root_only: bool, per_user: usize) -> Option<Task> {
        if let Some(t) = self.root.pop_front() {
            return Some(t);
        }
        if root_only {
            return None;
        }
        let busy = |uid: &u32| self.busy.get(uid).copied().unwrap_or(0);
        let at = self.turns.iter().position(|u| busy(u) < per_user)?;
        let uid = self.turns.remove(at)?;
        let q = self.users.get_mut(&uid)?;
        let task = q.pop_front()?;
        if q.is_empty() {
            self.users.remove(&uid);
        } else {
            self.turns.push_back(uid);
        }
        *self.busy.entry(uid).or_default() += 1;
        Some(task)
    }

    /// A worker is done with a request of `uid`.
    fn done(&mut self, uid: u32) {
        if let Some(n) = self.busy.get_mut(&uid) {
            *n -= 1;
            if *n == 0 {
                self.busy.remove(&uid);
            }
        }
    }
}

struct Work {
    queue: Mutex<Queue>,
    ready: Condvar,
}

struct Server {
    listener: UnixListener,
    limits: Limits,
    conns: HashMap<u64, Conn>,
    next_token: u64,
    work: Arc<Work>,
    answers: mpsc::Receiver<(u64, Vec<u8>)>,
    /// Workers write a byte here when an answer is ready (self-pipe).
    wake: UnixStream,
    backoff: Duration,
    paused_until: Option<Instant>,
    logged: Option<Instant>,
    unlogged: u64,
}

impl Server {
    fn new(listener: UnixListener, shared: Arc<Shared>, limits: Limits) -> Result<Server> {
        listener.set_nonblocking(true)?;
        let (wake, wake_tx) = UnixStream::pair().context("making the workers' wake-up pipe")?;
        wake.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let work = Arc::new(Work {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
        });
        let (tx, answers) = mpsc::channel();
        let per_user = limits.per_user_workers.max(1);
        for n in 0..limits.workers.max(2) {
            let (work, shared, tx) = (work.clone(), shared.clone(), tx.clone());
            let wake_tx = wake_tx.try_clone()?;
            std::thread::Builder::new()
                .name(format!("memgangd-worker-{n}"))
                .spawn(move || worker(&work, &shared, &tx, &wake_tx, n == 0, per_user))
                .context("starting the socket's workers")?;
        }
        Ok(Server {
            listener,
            limits,
            conns: HashMap::new(),
            next_token: 0,
            work,
            answers,
            wake,
            backoff: Duration::ZERO,
            paused_until: None,
            logged: None,
            unlogged: 0,
        })
    }

    fn run(mut self) -> Result<()> {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let now = Instant::now();
            // Past its deadline: closed, answered or not.
            self.conns.retain(|_, c| c.deadline.is_none_or(|d| now < d));
            let listening = self.paused_until.is_none_or(|t| now >= t);
            let (woken, incoming, ready) = self.poll(now, listening)?;
            if woken {
                let mut sink = [0u8; 256];
                while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
            }
            let now = Instant::now();
            while let Ok((token, answer)) = self.answers.try_recv() {
                if let Some(c) = self.conns.get_mut(&token) {
                    c.state = State::Writing(answer, 0);
                    c.deadline = Some(now + self.limits.timeout);
                    if write_some(c) {
                        self.conns.remove(&token);
                    }
                }
            }
            for token in ready {
                self.ready(token, &mut buf);
            }
            if incoming {
                self.accept();
            }
        }
    }

    /// Wait for something to do: the wake pipe, the listener (unless
    /// accepts are paused), each connection that reads or writes.
    fn poll(&self, now: Instant, listening: bool) -> Result<(bool, bool, Vec<u64>)> {
        let mut fds = Vec::with_capacity(self.conns.len() + 2);
        fds.push(PollFd::new(self.wake.as_fd(), PollFlags::POLLIN));
        if listening {
            fds.push(PollFd::new(self.listener.as_fd(), PollFlags::POLLIN));
        }
        let mut tokens = Vec::with_capacity(self.conns.len());
        let mut until = now + Duration::from_secs(1);
        if let Some(t) = self.paused_until.filter(|_| !listening) {
            until = until.min(t);
        }
        for (&token, c) in &self.conns {
            let events = match c.state {
                State::Reading(_) => PollFlags::POLLIN,
                State::Writing(..) => PollFlags::POLLOUT,
                State::Working => continue,
            };
            if let Some(d) = c.deadline {
                until = until.min(d);
            }
            fds.push(PollFd::new(c.stream.as_fd(), events));
            tokens.push(token);
        }
        // Rounded up: a deadline a fraction of a millisecond away must
        // not make a busy loop of zero timeouts.
        let ms = until.saturating_duration_since(now).as_millis() + 1;
        match nix::poll::poll(
            &mut fds,
            PollTimeout::from(u16::try_from(ms).unwrap_or(u16::MAX)),
        ) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("poll on the socket's connections"),
        }
        let fired = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let woken = fired(&fds[0]);
        let first = if listening { 2 } else { 1 };
        let incoming = listening && fired(&fds[1]);
        let ready = tokens
            .into_iter()
            .zip(&fds[first..])
            .filter(|(_, f)| fired(f))
            .map(|(t, _)| t)
            .collect();
        Ok((woken, incoming, ready))
    }

    fn ready(&mut self, token: u64, buf: &mut [u8]) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        let close = match c.state {
            State::Reading(_) => match read_some(c, buf) {
                Step::Wait => false,
                Step::Close => true,
                Step::Answer(out) => {
                    c.state = State::Writing(out, 0);
                    c.deadline = Some(Instant::now() + self.limits.timeout);
                    write_some(c)
                }
                Step::Request(line) => {
                    c.state = State::Working;
                    c.deadline = None;
                    let task = Task {
                        token,
                        caller: c.caller,
                        line,
                    };
                    let mut q = self.work.queue.lock().unwrap_or_else(|p| p.into_inner());
                    q.push(task);
                    self.work.ready.notify_all();
                    false
                }
            },
            State::Writing(..) => write_some(c),
            State::Working => false,
        };
        if close {
            self.conns.remove(&token);
        }
    }

    /// Accept what is waiting (a bounded batch, so that reading and
    /// writing go on during a flood).
    fn accept(&mut self) {
        for _ in 0..64 {
            match self.listener.accept() {
                Ok((s, _)) => {
                    self.backoff = Duration::ZERO;
                    self.paused_until = None;
                    self.admit(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    ) =>
                {
                    self.backoff = (self.backoff * 2).clamp(MIN_BACKOFF, MAX_BACKOFF);
                    self.paused_until = Some(Instant::now() + self.backoff);
                    let open = self.conns.len();
                    self.log(|| {
                        format!("accepting a connection: {e} ({open} open); accepts paused")
                    });
                    return;
                }
                // The client left before it was accepted, or a signal.
                Err(_) => continue,
            }
        }
    }

    /// Keep a new connection, or refuse it with a one-line answer when
    /// its user (or all users) hold the most they may.
    fn admit(&mut self, s: UnixStream) {
        let Ok(caller) = peer(&s) else {
            return;
        };
        if s.set_nonblocking(true).is_err() {
            return;
        }
        let l = self.limits;
        let users = self.conns.values().filter(|c| c.caller.uid != 0).count();
        let mine = self
            .conns
            .values()
            .filter(|c| c.caller.uid == caller.uid)
            .count();
        let refuse = if caller.uid == 0 {
            (self.conns.len() >= l.total + l.root_extra).then(|| {
                format!(
                    "memgangd is busy: {} connections are open; try again",
                    self.conns.len()
                )
            })
        } else if mine >= l.per_user {
            Some(format!(
                "memgangd is busy: you have {mine} connections open, the most a user may; close some or try again"
            ))
        } else if users >= l.total {
            Some(format!(
                "memgangd is busy: users have {users} connections open, the most it takes; try again"
            ))
        } else {
            None
        };
        if let Some(message) = refuse {
            // The socket's buffer is empty: a line this short fits.
            let _ = (&s).write_all(&answer_line(&Response::Error { message }));
            let uid = caller.uid;
            self.log(|| format!("refused a connection of uid {uid}: at its limit"));
            return;
        }
        let token = self.next_token;
        self.next_token += 1;
        self.conns.insert(
            token,
            Conn {
                stream: s,
                caller,
                deadline: Some(Instant::now() + l.timeout),
                state: State::Reading(LineBuf::default()),
            },
        );
    }

    /// A warning at most every LOG_EVERY, with how many were not logged:
    /// a flood must not flood the log.
    fn log(&mut self, msg: impl FnOnce() -> String) {
        let now = Instant::now();
        if self
            .logged
            .is_some_and(|t| now.saturating_duration_since(t) < LOG_EVERY)
        {
            self.unlogged += 1;
            return;
        }
        let more = std::mem::take(&mut self.unlogged);
        let more = if more > 0 {
            format!(" (and {more} more like it since the last)")
        } else {
            String::new()
        };
        tracing::warn!("{}{more}", msg());
        self.logged = Some(now);
    }
}

enum Step {
    Wait,
    Close,
    Request(Vec<u8>),
    /// Refused before a worker sees it (too long).
    Answer(Vec<u8>),
}

/// Read what the client has sent: a whole line (without its newline) is
/// a request; so is what came before the client closed its end. A line
/// longer than MAX_REQUEST_BYTES is answered so, unread.
fn read_some(c: &mut Conn, buf: &mut [u8]) -> Step {
    let State::Reading(data) = &mut c.state else {
        return Step::Wait;
    };
    let max = MAX_REQUEST_BYTES as usize;
    // At most four reads: the other connections get their turn.
    for _ in 0..4 {
        match (&c.stream).read(buf) {
            Ok(0) if data.is_empty() => return Step::Close,
            Ok(0) => return Step::Request(data.take()),
            Ok(n) => match data.push(&buf[..n], max) {
                Frame::More => {}
                Frame::Line(line) => return Step::Request(line),
                Frame::TooLong => {
                    let e = lines::Error::TooLong {
                        what: "request",
                        cap: max,
                    };
                    return Step::Answer(answer_line(&Response::Error {
                        message: format!("malformed request: {e}"),
                    }));
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Step::Wait,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Close,
        }
    }
    Step::Wait
}

/// Write what the socket takes; true once the answer is out (or the
/// client is gone): the connection is done.
fn write_some(c: &mut Conn) -> bool {
    let State::Writing(out, done) = &mut c.state else {
        return false;
    };
    while *done < out.len() {
        match (&c.stream).write(&out[*done..]) {
            Ok(0) => return true,
            Ok(n) => *done += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
    true
}

fn worker(
    work: &Work,
    shared: &Shared,
    answers: &mpsc::Sender<(u64, Vec<u8>)>,
    wake: &UnixStream,
    root_only: bool,
    per_user: usize,
) {
    loop {
        let task = {
            let mut q = work.queue.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(t) = q.take(root_only, per_user) {
                    break t;
                }
                q = work.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        // A bug met by one request answers that request, and leaves the
        // worker (and the connection's place) to the next ones.
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            respond(&task.line, &task.caller, shared)
        }))
        .unwrap_or_else(|_| {
            answer_line(&Response::Error {
                message: "memgangd failed on this request (a bug: see its log)".into(),
            })
        });
        {
            let mut q = work.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.done(task.caller.uid);
        }
        // The user's next request may go to a worker now.
        work.ready.notify_all();
        if answers.send((task.token, answer)).is_err() {
            return;
        }
        // Full: the server is awake already.
        let _ = (&*wake).write(&[1]);
    }
}

fn peer(conn: &UnixStream) -> Result<Caller> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let c = getsockopt(conn, PeerCredentials).context("SO_PEERCRED")?;
    Ok(Caller {
        uid: c.uid(),
        gid: c.gid(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::path::PathBuf;

    fn server(limits: Limits) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (journal, jobs) = crate::journal::Journal::open(dir.path()).unwrap();
        let shared = Arc::new(Shared::new(
            journal,
            jobs,
            dir.path().to_path_buf(),
            memgang_core::admission::Capacity {
                pool_bytes: 1 << 30,
                swap_total_bytes: 0,
                swap_used_elsewhere_bytes: 0,
                swap_reserve_bytes: 0,
            },
        ));
        let path = dir.path().join("s.sock");
        let listener = bind(&path).unwrap();
        let server = Server::new(listener, shared, limits).unwrap();
        std::thread::spawn(move || server.run());
        (dir, path)
    }

    fn limits() -> Limits {
        Limits {
            per_user: 2,
            total: 2,
            root_extra: 1,
            timeout: Duration::from_millis(500),
            workers: 2,
            per_user_workers: 1,
        }
    }

    /// Root first; then users in turns, none holding more than their
    /// share of the workers: a user's pile of requests waits behind each
    /// other, not in front of another user's.
    #[test]
    fn users_take_workers_in_turns_within_their_share() {
        let task = |token, uid| Task {
            token,
            caller: Caller { uid, gid: uid },
            line: Vec::new(),
        };
        let mut q = Queue::default();
        for t in 0..5 {
            q.push(task(t, 1000));
        }
        q.push(task(10, 1001));
        q.push(task(20, 0));
        let take = |q: &mut Queue, root_only| q.take(root_only, 1).map(|t| t.token);
        assert_eq!(take(&mut q, true), Some(20));
        assert_eq!(take(&mut q, true), None);
        assert_eq!(take(&mut q, false), Some(0));
        // 1000 holds its one worker: 1001 is next, then nobody.
        assert_eq!(take(&mut q, false), Some(10));
        assert_eq!(take(&mut q, false), None);
        q.done(1000);
        assert_eq!(take(&mut q, false), Some(1));
        q.push(task(11, 1001));
        q.done(1001);
        assert_eq!(take(&mut q, false), Some(11));
        // Two workers each.
        q.done(1000);
        q.done(1001);
        assert_eq!(q.take(false, 2).map(|t| t.token), Some(2));
        assert_eq!(q.take(false, 2).map(|t| t.token), Some(3));
        assert!(q.take(false, 2).is_none());
        assert!(!q.busy.contains_key(&1001));
    }

    fn answer(s: &UnixStream) -> String {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(s).read_line(&mut line).unwrap();
        line
    }

    /// A request is answered; a client that sends nothing, or a byte at a
    /// time, is closed at its deadline instead of holding its place.
    #[test]
    fn requests_are_answered_and_idle_or_slow_clients_closed() {
        let (_dir, path) = server(limits());
        let s = UnixStream::connect(&path).unwrap();
        (&s).write_all(b"{\"op\":\"list\"}\n").unwrap();
        assert_eq!(answer(&s), "{\"kind\":\"jobs\",\"jobs\":[]}\n");
        // Without a newline, the end of what the client sends ends it.
        let s = UnixStream::connect(&path).unwrap();
        (&s).write_all(b"{\"op\":\"show\",\"id\":7}").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(answer(&s).contains("no job 7 of yours"));
        let idle = UnixStream::connect(&path).unwrap();
        assert_eq!(answer(&idle), "", "an idle client was answered");
        let slow = UnixStream::connect(&path).unwrap();
        let closed = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            (&slow).write_all(b" ").is_err()
        });
        assert!(
            closed,
            "a client sending a byte every 100 ms was never closed"
        );
        // Bytes that are no UTF-8 are a malformed request, answered.
        let s = UnixStream::connect(&path).unwrap();
        (&s).write_all(b"\xff\xfe\n").unwrap();
        assert!(answer(&s).contains("malformed request"));
        // More than a request may be: answered so, not read as a request.
        let s = UnixStream::connect(&path).unwrap();
        let w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = (&w).write_all(&vec![b'x'; MAX_REQUEST_BYTES as usize + 1]);
        });
        assert!(
            answer(&s).contains("the request is longer than 1048576 bytes"),
            "an over-long request"
        );
        writer.join().unwrap();
    }

    /// Beyond the caps a connection is answered "busy" and closed; root
    /// has places of its own beyond the users' total.
    #[test]
    fn connections_beyond_the_caps_are_refused_with_an_answer() {
        let l = Limits {
            timeout: Duration::from_secs(30),
            ..limits()
        };
        let (_dir, path) = server(l);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let places = if root {
            l.total + l.root_extra
        } else {
            l.per_user
        };
        let mut held = Vec::new();
        for n in 0..places + 3 {
            let s = UnixStream::connect(&path).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut b = [0u8; 512];
            match (&s).read(&mut b) {
                Ok(k) if k > 0 => {
                    let text = String::from_utf8_lossy(&b[..k]);
                    assert!(n >= places, "connection {n} refused: {text}");
                    assert!(text.contains("memgangd is busy"), "{text}");
                }
                _ => assert!(n < places, "connection {n} of at most {places} kept"),
            }
            held.push(s);
        }
        // Closing one frees its place.
        held.truncate(places - 1);
        std::thread::sleep(Duration::from_millis(200));
        let s = UnixStream::connect(&path).unwrap();
        (&s).write_all(b"{\"op\":\"list\"}\n").unwrap();
        assert!(answer(&s).contains("\"jobs\""));
    }
}
