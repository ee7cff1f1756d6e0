//! Linux delay accounting through taskstats (generic netlink "TASKSTATS"):
//! how long each task waited for a CPU, for block I/O, for swap-ins, for
//! reclaim, for thrashing pages, and how long it lived.
//!
//! A task's data vanishes when it is reaped, and a query on a zombie
//! thread-group leader by TGID counts only its threads that exited while
//! other threads were alive (the kernel keeps no group total for a
//! single-threaded process; see the tests). So the executor does not query:
//! it registers a [`Listener`] for every CPU, and the kernel sends it one
//! record per task (thread) as the task exits, before its parent can reap
//! it. Summing a job's threads' records gives the job's exact totals.
//!
//! The delay counters only run while `kernel.task_delayacct` is 1;
//! [`DelayAcct`] turns it on for as long as it is held, and puts the old
//! value back when the last holder on the machine lets go.

use crate::error::{Error, Result};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_NEW: u8 = 2;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;
const TASKSTATS_TYPE_AGGR_TGID: u16 = 5;
const TASKSTATS_CMD_ATTR_PID: u16 = 1;
const TASKSTATS_CMD_ATTR_TGID: u16 = 2;
const TASKSTATS_CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
const TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK: u16 = 4;

const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The sysctl that switches the delay counters on.
pub const DELAYACCT_SYSCTL: &str = "/proc/sys/kernel/task_delayacct";

/// `struct taskstats` (include/uapi/linux/taskstats.h) up to version 14,
/// for its field offsets: later versions only append fields, and a record
/// shorter than a field leaves it 0.
#[repr(C)]
struct RawTaskstats {
    version: u16,
    ac_exitcode: u32,
    ac_flag: u8,
    ac_nice: u8,
    cpu_count: u64,
    cpu_delay_total: u64,
    blkio_count: u64,
    blkio_delay_total: u64,
    swapin_count: u64,
    swapin_delay_total: u64,
    cpu_run_real_total: u64,
    cpu_run_virtual_total: u64,
    ac_comm: [u8; 32],
    ac_sched: u8,
    ac_pad: [u8; 3],
    // `aligned(8)` in the header.
    _align: u32,
    ac_uid: u32,
    ac_gid: u32,
    ac_pid: u32,
    ac_ppid: u32,
    ac_btime: u32,
    ac_etime: u64,
    ac_utime: u64,
    ac_stime: u64,
    ac_minflt: u64,
    ac_majflt: u64,
    coremem: u64,
    virtmem: u64,
    hiwater_rss: u64,
    hiwater_vm: u64,
    read_char: u64,
    write_char: u64,
    read_syscalls: u64,
    write_syscalls: u64,
    read_bytes: u64,
    write_bytes: u64,
    cancelled_write_bytes: u64,
    nvcsw: u64,
    nivcsw: u64,
    ac_utimescaled: u64,
    ac_stimescaled: u64,
    cpu_scaled_run_real_total: u64,
    freepages_count: u64,
    freepages_delay_total: u64,
    thrashing_count: u64,
    thrashing_delay_total: u64,
    ac_btime64: u64,
    compact_count: u64,
    compact_delay_total: u64,
    ac_tgid: u32,
    ac_tgetime: u64,
    ac_exe_dev: u64,
    ac_exe_inode: u64,
    wpcopy_count: u64,
    wpcopy_delay_total: u64,
    irq_count: u64,
    irq_delay_total: u64,
}

/// What memgang reads of one task's (or thread group's) `struct
/// taskstats`. Times in nanoseconds unless named otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskStats {
    /// The struct's version (13 on 6.1's headers; this kernel may send more).
    pub version: u16,
    pub pid: u32,
    /// The parent's thread-group id at exit.
    pub ppid: u32,
    pub tgid: u32,
    pub comm: [u8; 32],
    /// Elapsed time since the task started, in µs.
    pub etime_us: u64,
    /// User and system CPU time, in µs.
    pub utime_us: u64,
    pub stime_us: u64,
    /// Time on a CPU as the scheduler measures it (`sum_exec_runtime`,
    /// the field named `cpu_run_virtual_total`): exact, where
    /// `cpu_run_real_total` is utime + stime, sampled at ticks.
    pub cpu_ns: u64,
    /// Runnable, waiting for a CPU (schedstat's run_delay).
    pub cpu_delay_ns: u64,
    /// Asleep in I/O wait (`in_iowait`): block I/O, swap-in reads included.
    pub blkio_delay_ns: u64,
    /// Submitting swap-in reads (`swap_read_folio`).
    pub swapin_delay_ns: u64,
    /// Direct reclaim (`try_to_free_pages`, memcg reclaim).
    pub freepages_delay_ns: u64,
    /// Waiting on pages that were evicted while in the working set.
    pub thrashing_delay_ns: u64,
    pub compact_delay_ns: u64,
    pub wpcopy_delay_ns: u64,
    pub irq_delay_ns: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl TaskStats {
    /// Parse a `TASKSTATS_TYPE_STATS` attribute's payload.
    pub fn parse(b: &[u8]) -> Option<TaskStats> {
        use std::mem::offset_of;
        if b.len() < offset_of!(RawTaskstats, ac_comm) {
            return None;
        }
        let u64_at = |off: usize| -> u64 {
            b.get(off..off + 8)
                .map_or(0, |s| u64::from_ne_bytes(s.try_into().unwrap()))
        };
        let u32_at = |off: usize| -> u32 {
            b.get(off..off + 4)
                .map_or(0, |s| u32::from_ne_bytes(s.try_into().unwrap()))
        };
        macro_rules! f64_ {
            ($f:ident) => {
                u64_at(offset_of!(RawTaskstats, $f))
            };
        }
        macro_rules! f32_ {
            ($f:ident) => {
                u32_at(offset_of!(RawTaskstats, $f))
            };
        }
        let version = u16::from_ne_bytes([b[0], b[1]]);
        let mut comm = [0u8; 32];
        let c = offset_of!(RawTaskstats, ac_comm);
        if let Some(s) = b.get(c..c + 32) {
            comm.copy_from_slice(s);
        }
        Some(TaskStats {
            version,
            pid: f32_!(ac_pid),
            ppid: f32_!(ac_ppid),
            tgid: f32_!(ac_tgid),
            comm,
            etime_us: f64_!(ac_etime),
            utime_us: f64_!(ac_utime),
            stime_us: f64_!(ac_stime),
            cpu_ns: f64_!(cpu_run_virtual_total),
            cpu_delay_ns: f64_!(cpu_delay_total),
            blkio_delay_ns: f64_!(blkio_delay_total),
            swapin_delay_ns: f64_!(swapin_delay_total),
            freepages_delay_ns: f64_!(freepages_delay_total),
            thrashing_delay_ns: f64_!(thrashing_delay_total),
            compact_delay_ns: f64_!(compact_delay_total),
            wpcopy_delay_ns: f64_!(wpcopy_delay_total),
            irq_delay_ns: if version >= 14 {
                f64_!(irq_delay_total)
            } else {
                0
            },
            major_faults: f64_!(ac_majflt),
            voluntary_switches: f64_!(nvcsw),
            involuntary_switches: f64_!(nivcsw),
        })
    }

    /// The command name, as the kernel keeps it (15 bytes at most).
    pub fn comm(&self) -> String {
        let end = self.comm.iter().position(|&c| c == 0).unwrap_or(32);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// One record the kernel sent: a task's own (`Pid`) or, when the last
/// thread of a multi-threaded group exits, the group's sum (`Tgid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    Pid(TaskStats),
    Tgid(TaskStats),
}

fn err(action: &'static str, e: std::io::Error) -> Error {
    Error::io(action, PathBuf::from("netlink taskstats"), e)
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Append one netlink attribute.
fn put_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align4(buf.len()), 0);
}

/// A generic netlink request: header, genl header, attributes.
fn request(family: u16, flags: u16, cmd: u8, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&family.to_ne_bytes());
    b.extend_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
    b.extend_from_slice(&1u32.to_ne_bytes()); // seq
    b.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel
    b.extend_from_slice(&[cmd, 1, 0, 0]); // genl cmd, version, reserved
    b.extend_from_slice(attrs);
    b
}

/// The attributes in `b`, as (type, payload).
fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let kind = u16::from_ne_bytes([b[2], b[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            break;
        }
        out.push((kind, &b[4..len]));
        b = &b[align4(len).min(b.len())..];
    }
    out
}

/// One netlink message of a datagram: its type and its payload, or an
/// error code (`NLMSG_ERROR`, 0 for an acknowledgement).
enum Message<'a> {
    Data(u16, &'a [u8]),
    Error(i32),
}

fn messages(mut b: &[u8]) -> Vec<Message<'_>> {
    let mut out = Vec::new();
    while b.len() >= 16 {
        let len = u32::from_ne_bytes(b[0..4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes([b[4], b[5]]);
        if len < 16 || len > b.len() {
            break;
        }
        let payload = &b[16..len];
        if kind == NLMSG_ERROR && payload.len() >= 4 {
            out.push(Message::Error(i32::from_ne_bytes(
                payload[0..4].try_into().unwrap(),
            )));
        } else {
            out.push(Message::Data(kind, payload));
        }
        b = &b[align4(len).min(b.len())..];
    }
    out
}

/// The records in the payload of a TASKSTATS_CMD_NEW message (after its
/// genl header).
fn records(genl: &[u8]) -> Vec<Record> {
    if genl.len() < 4 || genl[0] != TASKSTATS_CMD_NEW {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (kind, nested) in attrs(&genl[4..]) {
        let stats = attrs(nested)
            .into_iter()
            .find(|(k, _)| *k == TASKSTATS_TYPE_STATS)
            .and_then(|(_, s)| TaskStats::parse(s));
        match (kind, stats) {
            (TASKSTATS_TYPE_AGGR_PID, Some(s)) => out.push(Record::Pid(s)),
            (TASKSTATS_TYPE_AGGR_TGID, Some(s)) => out.push(Record::Tgid(s)),
            _ => {}
        }
    }
    out
}

fn open() -> Result<(Socket, u16)> {
    let mut socket = Socket::new(NETLINK_GENERIC).map_err(|e| err("opening", e))?;
    socket.bind_auto().map_err(|e| err("binding", e))?;
    socket
        .connect(&SocketAddr::new(0, 0))
        .map_err(|e| err("connecting to", e))?;
    let mut name = b"TASKSTATS".to_vec();
    name.push(0);
    let mut a = Vec::new();
    put_attr(&mut a, CTRL_ATTR_FAMILY_NAME, &name);
    socket
        .send(&request(GENL_ID_CTRL, 0, CTRL_CMD_GETFAMILY, &a), 0)
        .map_err(|e| err("asking the family id of", e))?;
    let (reply, _) = socket
        .recv_from_full()
        .map_err(|e| err("reading the family id of", e))?;
    for m in messages(&reply) {
        match m {
            Message::Data(GENL_ID_CTRL, p) if p.len() >= 4 => {
                for (k, v) in attrs(&p[4..]) {
                    if k == CTRL_ATTR_FAMILY_ID && v.len() >= 2 {
                        return Ok((socket, u16::from_ne_bytes([v[0], v[1]])));
                    }
                }
            }
            Message::Error(e) if e != 0 => {
                return Err(Error::Unsupported(format!(
                    "the kernel has no taskstats (generic netlink family TASKSTATS: {}); \
                     it needs CONFIG_TASKSTATS",
                    std::io::Error::from_raw_os_error(-e)
                )))
            }
            _ => {}
        }
    }
    Err(Error::Unsupported(
        "the kernel did not name the TASKSTATS family's id".into(),
    ))
}

/// Ask for the stats of one live (or zombie) task by pid, or of a thread
/// group by tgid (`tgid = true`).
pub fn query(id: u32, tgid: bool) -> Result<Option<TaskStats>> {
    Querier::open()?.query(id, tgid)
}

/// One socket for many queries: a job's processes sampled at each of its
/// freezes and thaws (two round trips fewer per query than [`query`]).
pub struct Querier {
    socket: Socket,
    family: u16,
}

impl Querier {
    pub fn open() -> Result<Querier> {
        let (socket, family) = open()?;
        Ok(Querier { socket, family })
    }

    /// As [`query`]. A thread group's sum covers its live threads and
    /// those that have exited (the kernel keeps their totals in the group).
    pub fn query(&self, id: u32, tgid: bool) -> Result<Option<TaskStats>> {
        let mut a = Vec::new();
        let kind = if tgid {
            TASKSTATS_CMD_ATTR_TGID
        } else {
            TASKSTATS_CMD_ATTR_PID
        };
        put_attr(&mut a, kind, &id.to_ne_bytes());
        self.socket
            .send(&request(self.family, 0, TASKSTATS_CMD_GET, &a), 0)
            .map_err(|e| err("asking", e))?;
        let (reply, _) = self
            .socket
            .recv_from_full()
            .map_err(|e| err("reading", e))?;
        for m in messages(&reply) {
            match m {
                Message::Data(k, p) if k == self.family => {
                    if let Some(Record::Pid(s) | Record::Tgid(s)) = records(p).into_iter().next() {
                        return Ok(Some(s));
                    }
                }
                Message::Error(e) if e != 0 => {
                    if -e == libc::ESRCH {
                        return Ok(None);
                    }
                    return Err(err("asking", std::io::Error::from_raw_os_error(-e)));
                }
                _ => {}
            }
        }
        Ok(None)
    }
}

/// Receives a record for every task that exits on the machine, from its
/// registration on ([`Listener::register`]) to its drop.
pub struct Listener {
    socket: Socket,
    family: u16,
    cpus: String,
    /// Datagrams the kernel could not deliver (the socket's buffer was
    /// full): records are missing.
    pub lost: u64,
}

/// The socket's receive buffer: a record is about 400 bytes, so 8 MiB
/// holds some 20,000 exits between two reads.
const RECV_BUFFER: usize = 8 << 20;

impl Listener {
    /// Register for the exit records of every possible CPU.
    pub fn register() -> Result<Listener> {
        let possible = Path::new("/sys/devices/system/cpu/possible");
        let cpus = std::fs::read_to_string(possible)
            .map_err(|e| Error::io("reading", possible, e))?
            .trim()
            .to_string();
        let (socket, family) = open()?;
        // Root may raise the buffer past rmem_max; others get what they get.
        if nix::sys::socket::setsockopt(
            &socket,
            nix::sys::socket::sockopt::RcvBufForce,
            &RECV_BUFFER,
        )
        .is_err()
        {
            let _ = socket.set_rx_buf_sz(RECV_BUFFER);
        }
        let listener = Listener {
            socket,
            family,
            cpus,
            lost: 0,
        };
        listener.cpumask(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK)?;
        Ok(listener)
    }

    fn cpumask(&self, which: u16) -> Result<()> {
        let mut mask = self.cpus.as_bytes().to_vec();
        mask.push(0);
        let mut a = Vec::new();
        put_attr(&mut a, which, &mask);
        self.socket
            .send(&request(self.family, NLM_F_ACK, TASKSTATS_CMD_GET, &a), 0)
            .map_err(|e| err("registering a listener with", e))?;
        // The acknowledgement; exit records may come before it.
        Ok(())
    }

    /// Wait up to `timeout` for records and return those that came.
    pub fn recv(&mut self, timeout: Duration) -> Result<Vec<Record>> {
        // The first read waits (SO_RCVTIMEO), the rest drain what came.
        let tv = nix::sys::time::TimeVal::new(
            timeout.as_secs() as _,
            timeout.subsec_micros().max(1) as _,
        );
        nix::sys::socket::setsockopt(&self.socket, nix::sys::socket::sockopt::ReceiveTimeout, &tv)
            .map_err(|e| err("setting a timeout on", e.into()))?;
        let mut flags = 0;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let mut slice = &mut buf[..];
            let got = self.socket.recv(&mut slice, flags);
            flags = libc::MSG_DONTWAIT;
            match got {
                Ok(n) => {
                    for m in messages(&buf[..n]) {
                        match m {
                            Message::Data(k, p) if k == self.family => out.extend(records(p)),
                            Message::Error(e) if e != 0 => {
                                return Err(err(
                                    "registering a listener with",
                                    std::io::Error::from_raw_os_error(-e),
                                ))
                            }
                            _ => {}
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.lost += 1,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err("reading", e)),
            }
        }
        Ok(out)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.cpumask(TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK);
    }
}

/// `kernel.task_delayacct` on while held. Several memgang processes may
/// hold it at once: the first one's old value is kept in a state file
/// (`<dir>/delayacct`, under an exclusive lock) with the pids of the
/// holders, and the last holder to let go (or the first to find all other
/// holders dead) writes it back.
pub struct DelayAcct {
    state: PathBuf,
    sysctl: PathBuf,
    /// What the sysctl was when this holder came: for a test.
    pub was: String,
}

/// The state file's directory: shared by every memgang on the machine.
pub const DELAYACCT_STATE_DIR: &str = "/run/memgang";

fn with_lock<T>(state: &Path, f: impl FnOnce(&mut String) -> Result<T>) -> Result<T> {
    use std::io::{Read, Seek, Write};
    if let Some(dir) = state.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state)
        .map_err(|e| Error::io("opening", state, e))?;
    let mut lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| Error::io("locking", state, e.into()))?;
    let mut text = String::new();
    lock.read_to_string(&mut text)
        .map_err(|e| Error::io("reading", state, e))?;
    let out = f(&mut text)?;
    lock.set_len(0)
        .and_then(|()| lock.rewind())
        .and_then(|()| lock.write_all(text.as_bytes()))
        .map_err(|e| Error::io("writing", state, e))?;
    Ok(out)
}

fn alive(pid: i32) -> bool {
    pid == std::process::id() as i32 || Path::new(&format!("/proc/{pid}")).exists()
}

impl DelayAcct {
    /// Turn the delay counters on (as root); the old value comes back when
    /// the last holder drops its guard.
    pub fn enable() -> Result<DelayAcct> {
        DelayAcct::enable_at(
            Path::new(DELAYACCT_STATE_DIR).join("delayacct"),
            DELAYACCT_SYSCTL.into(),
        )
    }

    /// One holder for the whole process: every node of it shares it, and
    /// the last one dropped lets go.
    pub fn shared() -> Result<std::sync::Arc<DelayAcct>> {
        static SHARED: std::sync::Mutex<std::sync::Weak<DelayAcct>> =
            std::sync::Mutex::new(std::sync::Weak::new());
        let mut held = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = held.upgrade() {
            return Ok(h);
        }
        let h = std::sync::Arc::new(DelayAcct::enable()?);
        *held = std::sync::Arc::downgrade(&h);
        Ok(h)
    }

    fn enable_at(state: PathBuf, sysctl: PathBuf) -> Result<DelayAcct> {
        let me = std::process::id() as i32;
        let was = std::fs::read_to_string(&sysctl)
            .map_err(|e| Error::io("reading", &sysctl, e))?
            .trim()
            .to_string();
        let held = with_lock(&state, |text| {
            // Line 1: the value to restore; then one holder pid per line.
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let holders: Vec<i32> = lines
                .iter()
                .skip(1)
                .filter_map(|l| l.parse().ok())
                .filter(|p| alive(*p))
                .collect();
            // A holder killed before it let go left the original value
            // behind: it stays the one to restore.
            if lines.is_empty() {
                lines = vec![was.clone()];
            } else {
                lines.truncate(1);
                lines.extend(holders.iter().map(i32::to_string));
            }
            lines.push(me.to_string());
            std::fs::write(&sysctl, "1").map_err(|e| Error::io("writing", &sysctl, e))?;
            *text = lines.join("\n") + "\n";
            Ok(())
        });
        if let Err(e) = held {
            // Not recorded as a holder: nothing would put it back.
            let _ = std::fs::write(&sysctl, &was);
            return Err(e);
        }
        Ok(DelayAcct { state, sysctl, was })
    }

    fn release(&self) -> Result<()> {
        let me = std::process::id() as i32;
        let (sysctl, state) = (&self.sysctl, &self.state);
        let last = with_lock(state, |text| {
            let lines: Vec<&str> = text.lines().collect();
            let Some(old) = lines.first().map(|s| s.to_string()) else {
                return Ok(false);
            };
            let others: Vec<String> = lines
                .iter()
                .skip(1)
                .filter_map(|l| l.parse::<i32>().ok())
                .filter(|p| *p != me && alive(*p))
                .map(|p| p.to_string())
                .collect();
            if others.is_empty() {
                std::fs::write(sysctl, &old).map_err(|e| Error::io("writing", sysctl, e))?;
                text.clear();
                Ok(true)
            } else {
                *text = std::iter::once(old)
                    .chain(others)
                    .collect::<Vec<_>>()
                    .join("\n")
                    + "\n";
                Ok(false)
            }
        })?;
        if last {
            let _ = std::fs::remove_file(state);
        }
        Ok(())
    }
}

impl Drop for DelayAcct {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            tracing::error!("restoring {}: {e}", self.sysctl.display());
        }
    }
}

/// Whether the delay counters are on now.
pub fn delayacct_on() -> bool {
    std::fs::read_to_string(DELAYACCT_SYSCTL).is_ok_and(|s| s.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_struct_offsets_are_the_headers() {
        use std::mem::offset_of;
        // From include/uapi/linux/taskstats.h (version 13) on x86-64.
        assert_eq!(offset_of!(RawTaskstats, cpu_count), 16);
        assert_eq!(offset_of!(RawTaskstats, ac_comm), 80);
        assert_eq!(offset_of!(RawTaskstats, ac_uid), 120);
        assert_eq!(offset_of!(RawTaskstats, ac_etime), 144);
        assert_eq!(offset_of!(RawTaskstats, freepages_delay_total), 320);
        assert_eq!(offset_of!(RawTaskstats, ac_ppid), 132);
        assert_eq!(offset_of!(RawTaskstats, ac_majflt), 176);
        assert_eq!(offset_of!(RawTaskstats, nvcsw), 272);
        assert_eq!(offset_of!(RawTaskstats, thrashing_delay_total), 336);
        assert_eq!(offset_of!(RawTaskstats, ac_tgid), 368);
        assert_eq!(offset_of!(RawTaskstats, ac_tgetime), 376);
        assert_eq!(offset_of!(RawTaskstats, wpcopy_delay_total), 408);
        // Version 14 appends irq_count and irq_delay_total.
        assert_eq!(offset_of!(RawTaskstats, irq_delay_total), 424);
    }

    #[test]
    fn a_record_is_parsed_from_its_nested_attributes() {
        let mut raw = vec![0u8; 416];
        raw[0..2].copy_from_slice(&13u16.to_ne_bytes());
        raw[24..32].copy_from_slice(&7_000u64.to_ne_bytes()); // cpu_delay_total
        raw[80..84].copy_from_slice(b"job\0");
        raw[132..136].copy_from_slice(&42u32.to_ne_bytes()); // ac_ppid
        raw[144..152].copy_from_slice(&5u64.to_ne_bytes()); // ac_etime
        raw[368..372].copy_from_slice(&41u32.to_ne_bytes()); // ac_tgid
        let mut nested = Vec::new();
        put_attr(&mut nested, 1, &43u32.to_ne_bytes()); // TASKSTATS_TYPE_PID
        put_attr(&mut nested, TASKSTATS_TYPE_STATS, &raw);
        let mut genl = vec![TASKSTATS_CMD_NEW, 1, 0, 0];
        put_attr(&mut genl, TASKSTATS_TYPE_AGGR_PID, &nested);
        let r = records(&genl);
        let [Record::Pid(s)] = r.as_slice() else {
            panic!("{r:?}")
        };
        assert_eq!(
            (s.cpu_delay_ns, s.ppid, s.etime_us, s.tgid, s.irq_delay_ns),
            (7_000, 42, 5, 41, 0)
        );
        assert_eq!(s.comm(), "job");
        assert_eq!(TaskStats::parse(&raw[..40]), None);
    }

    #[test]
    fn the_last_holder_restores_the_old_value() {
        let dir = tempfile::tempdir().unwrap();
        let (state, sysctl) = (dir.path().join("run/delayacct"), dir.path().join("sysctl"));
        std::fs::write(&sysctl, "0\n").unwrap();
        let a = DelayAcct::enable_at(state.clone(), sysctl.clone()).unwrap();
        assert_eq!(std::fs::read_to_string(&sysctl).unwrap(), "1");
        // A second holder (same pid here) finds it on and keeps the first's 0.
        let b = DelayAcct::enable_at(state.clone(), sysctl.clone()).unwrap();
        assert_eq!(b.was, "1");
        let text = std::fs::read_to_string(&state).unwrap();
        assert_eq!(text.lines().next(), Some("0"), "{text}");
        // A dead holder's line does not keep it on.
        std::fs::write(&state, format!("{text}{}\n", i32::MAX)).unwrap();
        drop(a);
        assert_eq!(std::fs::read_to_string(&sysctl).unwrap(), "0");
        assert!(!state.exists());
        drop(b);
        assert_eq!(std::fs::read_to_string(&sysctl).unwrap(), "0");
        // A holder killed with it on: the next one restores the original.
        std::fs::write(&sysctl, "1").unwrap();
        std::fs::write(&state, format!("0\n{}\n", i32::MAX)).unwrap();
        let c = DelayAcct::enable_at(state.clone(), sysctl.clone()).unwrap();
        drop(c);
        assert_eq!(std::fs::read_to_string(&sysctl).unwrap(), "0");
    }

    /// Root: a listener gets the exit record of every thread of a child,
    /// and a query on the zombie by TGID finds nothing of a
    /// single-threaded process (the reason memgang listens).
    #[test]
    #[ignore]
    fn a_listener_gets_every_exit_and_a_zombie_tgid_query_does_not() {
        let _on = DelayAcct::enable().unwrap();
        let mut listener = Listener::register().unwrap();
        // A process with a second thread (sh runs sleep as a child).
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.2",
            ])
            .spawn()
            .unwrap();
        let pid = child.id();
        // Wait for its exit without reaping it: it stays a zombie.
        let id = nix::sys::wait::Id::Pid(nix::unistd::Pid::from_raw(pid as i32));
        let flags = nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT;
        nix::sys::wait::waitid(id, flags).unwrap();
        let by_pid = query(pid, false)
            .unwrap()
            .expect("a zombie is still there by pid");
        let by_tgid = query(pid, true).unwrap().expect("and by tgid");
        assert!(by_pid.cpu_ns > 0, "{by_pid:?}");
        assert_eq!(by_tgid.cpu_ns, 0, "{by_tgid:?}");
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while std::time::Instant::now() < deadline
            && !got
                .iter()
                .any(|r| matches!(r, Record::Pid(s) if s.pid == pid))
        {
            got.extend(listener.recv(Duration::from_millis(100)).unwrap());
        }
        let mine: Vec<_> = got
            .iter()
            .filter_map(|r| match r {
                Record::Pid(s) if s.pid == pid || s.ppid == pid => Some(*s),
                _ => None,
            })
            .collect();
        assert!(mine.iter().any(|s| s.pid == pid), "{got:?}");
        assert!(mine.iter().any(|s| s.comm() == "sleep"), "{mine:?}");
        let sh = mine.iter().find(|s| s.pid == pid).unwrap();
        // The record is taken early in its exit, the query after it: the
        // rest of the exit (milliseconds at most) runs in between.
        assert!(
            sh.cpu_ns <= by_pid.cpu_ns && by_pid.cpu_ns - sh.cpu_ns < 5_000_000,
            "{sh:?} vs {by_pid:?}"
        );
        // sh's lifetime: its CPU time and its sleep on the child.
        assert!(sh.etime_us >= 200_000, "{sh:?}");
        child.wait().unwrap();
        assert_eq!(listener.lost, 0);
    }
}
