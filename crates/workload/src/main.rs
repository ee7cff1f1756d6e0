//! `memgang-workload` binary: process, barrier and exit-code plumbing around
//! the kernels in the library. See the crate README for usage.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use clap::{CommandFactory, Parser};
use memgang_workload::{rank_pages, Args, Rank, Region, PAGES_PER_MIB, WORDS_PER_PAGE};

const EXIT_OTHER: i32 = 1;
const EXIT_CORRUPT: i32 = 3;
const EXIT_RANK_FAILED: i32 = 4;

/// How many mismatching words each rank prints before summarising.
const MAX_REPORT: usize = 5;

fn main() {
    let args = Args::parse();
    let total_pages = args.mib.saturating_mul(PAGES_PER_MIB);
    if total_pages < args.ranks {
        Args::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "--mib {} is {} pages of 4 KiB, fewer than --ranks {}: every rank needs at least one page",
                    args.mib, total_pages, args.ranks
                ),
            )
            .exit();
    }
    std::process::exit(run(&args, total_pages));
}

macro_rules! report {
    ($($fmt:tt)*) => { eprintln!("memgang-workload: {}", format_args!($($fmt)*)) };
}

/// A rank's view of the barrier.
enum Barrier {
    /// `--ranks 1`.
    Solo,
    /// Rank 0: one socket per child rank.
    Coordinator(Vec<ChildRank>),
    /// Ranks 1..K: a socket to rank 0.
    Member { rank: u64, sock: UnixStream },
}

struct ChildRank {
    rank: u64,
    pid: libc::pid_t,
    sock: UnixStream,
}

/// Why a rank stopped before verification.
enum Failure {
    /// The barrier broke; for rank 0, `Some(i)` names the child (index into
    /// the coordinator's list) that went away.
    Barrier(String, Option<usize>),
    /// Anything else, e.g. mmap failed.
    Other(String),
}

impl Barrier {
    /// Barrier round `round`. Each side sends the round number (mod 256) so
    /// that a protocol slip is detected instead of silently desynchronising.
    fn wait(&mut self, round: u64) -> Result<(), Failure> {
        let token = [round as u8];
        match self {
            Barrier::Solo => Ok(()),
            Barrier::Member { rank, sock } => {
                let broken = |what: String| {
                    Failure::Barrier(format!("rank {rank}: barrier broken: {what}"), None)
                };
                sock.write_all(&token)
                    .map_err(|e| broken(format!("rank 0 went away ({e})")))?;
                let mut got = [0u8];
                match sock.read_exact(&mut got) {
                    Ok(()) if got == token => Ok(()),
                    Ok(()) => Err(broken(format!("protocol error in round {round}"))),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        Err(broken("rank 0 went away".into()))
                    }
                    Err(e) => Err(broken(format!("rank 0 went away ({e})"))),
                }
            }
            Barrier::Coordinator(children) => {
                gather(children, token[0])?;
                for (i, c) in children.iter_mut().enumerate() {
                    if let Err(e) = c.sock.write_all(&token) {
                        return Err(Failure::Barrier(
                            format!("barrier broken: rank {} went away ({e})", c.rank),
                            Some(i),
                        ));
                    }
                }
                Ok(())
            }
        }
    }
}

/// Waits for one token from every child. poll() rather than reading in rank
/// order so that a dead rank is noticed even while an earlier one is still
/// working (or stopped by the scheduler).
fn gather(children: &mut [ChildRank], token: u8) -> Result<(), Failure> {
    let mut waiting: Vec<usize> = (0..children.len()).collect();
    while !waiting.is_empty() {
        let mut fds: Vec<libc::pollfd> = waiting
            .iter()
            .map(|&i| libc::pollfd {
                fd: children[i].sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid, correctly sized array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Failure::Other(format!("poll: {e}")));
        }
        let mut still = Vec::with_capacity(waiting.len());
        for (pfd, &i) in fds.iter().zip(&waiting) {
            if pfd.revents == 0 {
                still.push(i);
                continue;
            }
            let c = &mut children[i];
            let mut got = [0u8];
            let what = match c.sock.read(&mut got) {
                Ok(1) if got[0] == token => {
                    continue;
                }
                Ok(1) => "protocol error".to_string(),
                Ok(_) => "went away".to_string(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    still.push(i);
                    continue;
                }
                Err(e) => format!("went away ({e})"),
            };
            return Err(Failure::Barrier(
                format!("barrier broken: rank {} {what}", c.rank),
                Some(i),
            ));
        }
        waiting = still;
    }
    Ok(())
}

/// One rank's life after forking: allocate, initialise, iterate, verify.
/// Returns the exit code of this rank.
fn work(args: &Args, rank: u64, pages: u64, barrier: &mut Barrier) -> Result<i32, Failure> {
    let mut region = Region::new(pages).map_err(|e| {
        Failure::Other(format!(
            "rank {rank}: cannot map {} MiB: {e}",
            pages as f64 / PAGES_PER_MIB as f64
        ))
    })?;
    let r = Rank::new(args.seed, rank, pages);
    let mem = region.as_mut_slice();
    r.init(mem);
    if args.lock {
        // SAFETY: mem is this process's own mapping, valid for its length.
        let rc = unsafe { libc::mlock(mem.as_ptr().cast(), std::mem::size_of_val(mem)) };
        if rc != 0 {
            return Err(Failure::Other(format!(
                "rank {rank}: --lock: mlock failed: {} (needs CAP_IPC_LOCK or a large enough \
                 `ulimit -l`)",
                io::Error::last_os_error()
            )));
        }
    }
    // Round 0 lines the ranks up after initialisation so the iterations start
    // together, like a real code's setup phase followed by a time-step loop.
    barrier.wait(0)?;
    for t in 0..args.iterations {
        r.run_iteration(mem, args.pattern, t, args.compute);
        barrier.wait(t + 1)?;
    }
    if args.corrupt_for_test && rank + 1 == args.ranks {
        let (p, j) = r.corrupt_for_test(mem);
        report!("rank {rank}: --corrupt-for-test: flipped bit 0 of page {p} word {j}");
    }
    let v = r.verify(mem, args.iterations, MAX_REPORT);
    if v.ok() {
        return Ok(0);
    }
    for m in &v.first {
        report!(
            "rank {rank}: data corruption: page {} word {}: expected {:#018x} found {:#018x}",
            m.page,
            m.word,
            m.expected,
            m.found
        );
    }
    report!(
        "rank {rank}: data corruption: {} of {} words wrong, in {} of {} pages",
        v.bad_words,
        v.checked_words,
        v.bad_pages,
        pages
    );
    Ok(EXIT_CORRUPT)
}

fn run(args: &Args, total_pages: u64) -> i32 {
    let start = Instant::now();
    let parent = std::process::id() as libc::pid_t;
    let mut children: Vec<ChildRank> = Vec::new();

    // Fork before allocating so that every rank owns (and faults in) only its
    // own share, as the processes of an MPI job would.
    for rank in 1..args.ranks {
        let (ours, theirs) = match UnixStream::pair() {
            Ok(p) => p,
            Err(e) => return abort(children, &format!("socketpair: {e}"), EXIT_OTHER),
        };
        // SAFETY: single-threaded here, so the child may run arbitrary code.
        match unsafe { libc::fork() } {
            -1 => {
                let e = io::Error::last_os_error();
                return abort(children, &format!("fork: {e}"), EXIT_OTHER);
            }
            0 => {
                // Only our own socket end may stay open here: any other copy
                // would keep a peer from seeing EOF when a rank dies.
                drop(ours);
                drop(children);
                std::process::exit(child_main(args, rank, total_pages, parent, theirs));
            }
            pid => {
                drop(theirs);
                children.push(ChildRank {
                    rank,
                    pid,
                    sock: ours,
                });
            }
        }
    }

    let pages = rank_pages(total_pages, args.ranks, 0);
    let mut barrier = if children.is_empty() {
        Barrier::Solo
    } else {
        Barrier::Coordinator(children)
    };
    let outcome = work(args, 0, pages, &mut barrier);
    let children = match barrier {
        Barrier::Coordinator(c) => c,
        _ => Vec::new(),
    };

    match outcome {
        Err(Failure::Other(msg)) => abort(children, &msg, EXIT_OTHER),
        Err(Failure::Barrier(msg, failed)) => {
            report!("{msg}");
            let mut children = children;
            if let Some(i) = failed {
                // Its socket is closed, so it is exiting: this does not block.
                let c = children.remove(i);
                let status = reap(c.pid);
                report!("rank {} (pid {}) {}", c.rank, c.pid, describe(status));
            }
            abort(children, "aborting the job", EXIT_RANK_FAILED)
        }
        Ok(own) => {
            let mut code = own;
            for c in children {
                drop(c.sock);
                let status = reap(c.pid);
                let child_code = exit_code(status);
                if child_code == Some(0) {
                    continue;
                }
                if child_code == Some(EXIT_CORRUPT) {
                    // The rank has already said what was wrong.
                    code = EXIT_CORRUPT;
                    continue;
                }
                report!("rank {} (pid {}) {}", c.rank, c.pid, describe(status));
                if code == 0 {
                    code = EXIT_RANK_FAILED;
                }
            }
            if code == 0 && !args.quiet {
                println!(
                    "memgang-workload: ok ranks={} mib={} pattern={} iterations={} compute={} seconds={:.2} checked_words={}",
                    args.ranks,
                    args.mib,
                    args.pattern.name(),
                    args.iterations,
                    args.compute,
                    start.elapsed().as_secs_f64(),
                    total_pages * WORDS_PER_PAGE as u64,
                );
            }
            code
        }
    }
}

fn child_main(
    args: &Args,
    rank: u64,
    total_pages: u64,
    parent: libc::pid_t,
    sock: UnixStream,
) -> i32 {
    // A rank must never outlive rank 0: the scheduler only tracks rank 0, and
    // an orphaned rank would hold its memory forever. getppid() covers rank 0
    // dying before prctl() took effect.
    // SAFETY: plain syscalls without pointers.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            report!(
                "rank {rank}: prctl(PR_SET_PDEATHSIG): {}",
                io::Error::last_os_error()
            );
            return EXIT_OTHER;
        }
        if libc::getppid() != parent {
            report!("rank {rank}: rank 0 died during startup");
            return EXIT_RANK_FAILED;
        }
    }
    let pages = rank_pages(total_pages, args.ranks, rank);
    let mut barrier = Barrier::Member { rank, sock };
    match work(args, rank, pages, &mut barrier) {
        Ok(code) => code,
        Err(Failure::Barrier(msg, _)) => {
            report!("{msg}");
            EXIT_RANK_FAILED
        }
        Err(Failure::Other(msg)) => {
            report!("{msg}");
            EXIT_OTHER
        }
    }
}

/// Stops the job: kills and reaps the remaining ranks (SIGKILL also works on
/// ranks the scheduler has stopped), so rank 0 never leaves orphans or
/// zombies behind.
fn abort(children: Vec<ChildRank>, msg: &str, code: i32) -> i32 {
    report!("{msg}");
    for c in &children {
        // SAFETY: signalling a child we have not reaped, so the pid is ours.
        unsafe {
            libc::kill(c.pid, libc::SIGKILL);
        }
    }
    for c in children {
        reap(c.pid);
    }
    code
}

fn reap(pid: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return status;
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            report!("waitpid({pid}): {}", io::Error::last_os_error());
            return -1;
        }
    }
}

fn exit_code(status: libc::c_int) -> Option<i32> {
    (status != -1 && libc::WIFEXITED(status)).then(|| libc::WEXITSTATUS(status))
}

fn describe(status: libc::c_int) -> String {
    if status == -1 {
        "could not be reaped".into()
    } else if libc::WIFEXITED(status) {
        format!("exited with code {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: strsignal returns a static or thread-local C string.
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) };
        format!("was killed by signal {sig} ({})", name.to_string_lossy())
    } else {
        format!("ended with wait status {status:#x}")
    }
}
