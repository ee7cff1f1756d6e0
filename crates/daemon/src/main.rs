//! `memgangd`: memgang's node service. Users submit jobs with `memgang
//! submit`; the daemon admits them while pool plus swap holds them (paging
//! prevention), runs them as their users under the configured policy, and
//! keeps every job in a journal so that a restart loses nothing.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod check;
mod config;
mod http;
mod journal;
mod man;
mod server;
mod service;

#[derive(Parser)]
#[command(
    name = "memgangd",
    version,
    about = "memgang's node service: runs users' jobs, durably, without paging them to death"
)]
struct Cli {
    /// Configuration file (TOML; memgang.toml(5)). A missing file at the
    /// default path means the documented defaults.
    #[arg(long, value_name = "FILE", default_value = config::DEFAULT_CONFIG)]
    config: PathBuf,
    /// Check a configuration file (default: --config's) and print the
    /// effective settings and what memgangd would use of this node (pool,
    /// swap, cgroup hierarchy), then exit: 0 when memgangd would accept
    /// it, 1 with the line and key at fault. Needs no root.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    check_config: Option<Option<PathBuf>>,
    /// cgroup v2: make the pools in this group (a path below the cgroup2
    /// root, e.g. system.slice/memgang-jobs.service) instead of beside the
    /// daemon in its own group. memgangd.service points it at the
    /// delegated group of memgang-jobs.service, whose only process
    /// (`memgangd hold`) sits in a leaf, so that systemd can restart
    /// memgangd while jobs run (/usr/share/doc/memgang/install.md says why).
    #[arg(long, value_name = "GROUP")]
    jobs_cgroup: Option<String>,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// (internal) Run a job's command and record how it ended in the
    /// file on standard input (opened by the daemon, as root), so that a
    /// restarted daemon learns the exit status of a job it did not start;
    /// end the same way the command did.
    #[command(hide = true)]
    Shim {
        /// The file the command's stdout goes to, made by the shim as
        /// the job's user (default: the shim's own stdout).
        #[arg(long)]
        stdout: Option<PathBuf>,
        /// The command's stderr's file (default: the stdout's).
        #[arg(long)]
        stderr: Option<PathBuf>,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// (internal) Hold the delegated group of memgang-jobs.service: move
    /// into a `holder` leaf of it (cgroup v2 allows no processes beside
    /// the pools), tell systemd it is ready, and sleep until stopped.
    #[command(hide = true)]
    Hold,
    /// Write the man page memgangd.8 into a directory (the package's
    /// build does).
    #[command(hide = true)]
    Man {
        #[arg(short, long, default_value = ".")]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Cmd::Shim {
            stdout,
            stderr,
            command,
        }) => return shim(stdout.as_deref(), stderr.as_deref(), &command),
        Some(Cmd::Man { out }) => return man(&out),
        Some(Cmd::Hold) => {
            init_logging();
            return match hold() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("memgangd hold: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        None => {}
    }
    let explicit = cli.config != Path::new(config::DEFAULT_CONFIG);
    if let Some(file) = cli.check_config {
        let explicit = explicit || file.is_some();
        return check::check(&file.unwrap_or(cli.config), explicit);
    }
    init_logging();
    match daemon(&cli.config, explicit, cli.jobs_cgroup.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memgangd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Colour and timestamps only on a terminal: under systemd (or into a
/// file) stderr gets plain lines, and journald adds the time itself.
/// NO_COLOR (set, not empty) turns colour off there too (no-color.org).
fn init_logging() {
    use std::io::IsTerminal;
    let tty = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()));
    if tty {
        builder.init();
    } else {
        builder.without_time().init();
    }
}

/// Tell systemd (Type=notify) how the daemon is doing; a no-op when not
/// started by systemd (no $NOTIFY_SOCKET).
fn notify(state: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(false, state) {
        tracing::warn!("telling systemd (sd_notify): {e}");
    }
}

/// memgang-jobs.service's main process. systemd removes an empty unit
/// group, so the group that holds the pools needs a process of its own,
/// and v2 wants that process in a leaf before memgangd enables memory
/// beside it. It never exits on its own (SIGTERM ends it).
fn hold() -> Result<()> {
    let backend = memgang_linux::cgroup::detect()
        .context("finding a cgroup hierarchy with a memory controller")?;
    protect_from_oom();
    let v2 = backend.version() == memgang_linux::cgroup::CgroupVersion::V2;
    if v2 {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|t| service::own_cgroup(&t, true))
            .context("reading this process's cgroup from /proc/self/cgroup")?;
        let leaf = own.join("holder")?;
        backend.create_leaf(&leaf)?;
        memgang_linux::cgroup::join(backend.as_ref(), &leaf, std::process::id() as i32)
            .with_context(|| format!("moving into cgroup {leaf}"))?;
        tracing::info!("holding cgroup {own} for memgangd's pools (this process: {leaf})");
    }
    notify(&[sd_notify::NotifyState::Ready]);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

fn man(out: &Path) -> ExitCode {
    match man::write(<Cli as clap::CommandFactory>::command(), out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memgangd: writing man pages into {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

/// The kernel's OOM killer must pick a job, not the service that holds
/// every job's state (nor the process that holds their cgroup): memgangd
/// and `memgangd hold` run with a negative oom_score_adj. The units set
/// it (OOMScoreAdjust=); this asserts it when they did not (started by
/// hand, an old unit). Jobs go back to 0 when spawned
/// (memgang_linux::cgroup::spawn_into_as).
const OOM_SCORE_ADJ: i32 = -900;

fn protect_from_oom() {
    use memgang_linux::process::{oom_score_adj, set_oom_score_adj};
    match oom_score_adj() {
        Ok(v) if v < 0 => tracing::info!("oom_score_adj {v}: the OOM killer picks jobs first"),
        _ => match set_oom_score_adj(OOM_SCORE_ADJ) {
            Ok(()) => tracing::info!(
                "oom_score_adj set to {OOM_SCORE_ADJ}: the OOM killer picks jobs first"
            ),
            Err(e) => tracing::warn!("cannot protect memgangd from the OOM killer: {e}"),
        },
    }
}

/// The shim runs as the job's user, between the daemon and the command.
/// Its status file comes as its standard input, opened read-write by the
/// daemon as root in root's job directory: the job (the same user) cannot
/// open that file, and, the shim being made non-dumpable first, can
/// neither trace the shim nor reach its descriptors through /proc. The
/// command gets /dev/null instead. The shim ends as the command did
/// (the same signal, raised again, or the same exit code), so the daemon,
/// its parent, reads the job's end from the kernel; the file is for a
/// daemon that restarted meanwhile. It first stops itself until the
/// daemon has attached the job's counters (`Launch::gate`). It writes to stderr without
/// panicking: a full disk must not change how the job is recorded.
/// The command's output files (`--output`, `--error`) are made here, as
/// the user, in the job's directory: root never opens a user's path. A
/// file the user cannot make fails the job with exit 1 and the shim's
/// word on it, which the daemon takes as the job's reason.
fn shim(stdout: Option<&Path>, stderr: Option<&Path>, command: &[String]) -> ExitCode {
    use std::io::Write;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    let say = |msg: String| {
        let _ = writeln!(std::io::stderr(), "memgangd shim: {msg}");
    };
    // SAFETY: prctl(PR_SET_DUMPABLE) takes plain integers.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    // The status file, out of fd 0 and close-on-exec, so that nothing the
    // command runs inherits it.
    let status = nix::fcntl::fcntl(0, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3))
        .ok()
        // SAFETY: a descriptor just made by F_DUPFD_CLOEXEC, ours alone.
        .map(|fd| std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
    if status.is_none() {
        say("no status file on standard input: how the command ends is not recorded".into());
    }
    // The gate (`Launch::gate`): the daemon attaches the job's counters
    // to the stopped shim and continues it, so they inherit into the
    // command forked below instead of racing the fork.
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    let files = match output_files(stdout, stderr) {
        Ok(f) => f,
        Err(e) => {
            say(e);
            if let Some(f) = &status {
                let _ = std::os::unix::fs::FileExt::write_all_at(f, b"exit 1\n", 0);
            }
            return ExitCode::from(1);
        }
    };
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]).stdin(std::process::Stdio::null());
    if let Some((out, err)) = files {
        cmd.stdout(out).stderr(err);
    }
    let (line, end) = match cmd.status() {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(c), _) => (format!("exit {c}\n"), Ok(c as u8)),
            (_, Some(s)) => (format!("signal {s}\n"), Err(s)),
            _ => ("exit 1\n".into(), Ok(1)),
        },
        Err(e) => {
            say(format!("cannot start {:?}: {e}", command[0]));
            // 127: the shell's "command not found".
            ("exit 127\n".into(), Ok(127))
        }
    };
    if let Some(f) = &status {
        let write = || -> std::io::Result<()> {
            f.set_len(0)?;
            std::os::unix::fs::FileExt::write_all_at(f, line.as_bytes(), 0)?;
            f.sync_all()
        };
        if let Err(e) = write() {
            say(format!("recording the exit status: {e}"));
        }
    }
    drop(status);
    match end {
        Ok(code) => ExitCode::from(code),
        Err(sig) => die_of(sig),
    }
}

/// The command's stdout and stderr files, made (or emptied) as the
/// user; None: the shim's own.
fn output_files(
    stdout: Option<&Path>,
    stderr: Option<&Path>,
) -> Result<Option<(std::fs::File, std::fs::File)>, String> {
    let open = |p: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(p)
            .map_err(|e| {
                format!(
                    "cannot write the output file {} as uid {}: {e}; give --output a path you may write",
                    p.display(),
                    nix::unistd::getuid()
                )
            })
    };
    let Some(out) = stdout.map(open).transpose()? else {
        return Ok(None);
    };
    let err = match stderr {
        Some(p) => open(p)?,
        None => out.try_clone().map_err(|e| format!("{e}"))?,
    };
    Ok(Some((out, err)))
}

/// End by signal `sig`, as the command did: default action, no core file
/// (the command's own core, if any, is written already). A signal that
/// does not end a process by default ends with 128 + its number, the
/// shell's convention.
fn die_of(sig: i32) -> ExitCode {
    use nix::sys::signal::{self, SigHandler, SigSet, Signal};
    if let Ok(s) = Signal::try_from(sig) {
        let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
        // SAFETY: restoring the default action installs no handler.
        let _ = unsafe { signal::signal(s, SigHandler::SigDfl) };
        let mut set = SigSet::empty();
        set.add(s);
        let _ = set.thread_unblock();
        let _ = signal::raise(s);
    }
    ExitCode::from(128u8.wrapping_add(sig as u8))
}

fn daemon(config_path: &Path, explicit: bool, jobs_cgroup: Option<&str>) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("memgangd runs as root (it creates cgroups and runs jobs as their users); start it with sudo or systemd (memgangd.service); `memgangd --check-config` checks a configuration as any user");
    }
    protect_from_oom();
    // Job output and the journal are for the daemon only.
    // SAFETY: umask has no preconditions.
    unsafe { libc::umask(0o077) };
    let cfg = config::Config::load(config_path, explicit)?;
    let jobs_dir = state_dirs(&cfg.state_dir)?;
    let _lock = lock(&cfg.state_dir)?;
    let (journal, jobs) = journal::Journal::open(&cfg.state_dir)?;

    let backend: Arc<dyn memgang_linux::cgroup::CgroupBackend> = Arc::from(
        memgang_linux::cgroup::detect()
            .context("finding a cgroup hierarchy with a memory controller")?,
    );
    let v2 = backend.version() == memgang_linux::cgroup::CgroupVersion::V2;
    if let (Some(g), false) = (jobs_cgroup, v2) {
        // One unit file serves both: v1 has no "no internal processes" rule.
        tracing::info!("--jobs-cgroup {g} is for cgroup v2; on this v1 node the pools go below the daemon's own group");
    }
    let parent = match jobs_cgroup.filter(|_| v2) {
        Some(g) => Some(jobs_parent(backend.as_ref(), g)?),
        None => std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|t| service::own_cgroup(&t, v2))
            .map(|p| leaf_for_v2(backend.as_ref(), p, v2))
            .transpose()?,
    };
    if let Some(p) = &parent {
        tracing::info!("pools go in cgroup {p} ({})", backend.describe());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let env = memgang_runtime::executor::Env {
        freezer: memgang_linux::freeze::choose(backend.clone(), false),
        paging: Arc::new(memgang_linux::paging::Madvise),
        counters: Arc::new(memgang_linux::counters::ProcCounters),
        machine: memgang_runtime::machine(backend.as_ref(), false),
        backend,
        logs: jobs_dir,
        stop: stop.clone(),
        progress: None,
    };
    let placeholder = memgang_core::admission::Capacity {
        pool_bytes: cfg.pool_memory,
        swap_total_bytes: 0,
        swap_used_elsewhere_bytes: 0,
        swap_reserve_bytes: 0,
    };
    let shared = Arc::new(
        service::Shared::new(journal, jobs, cfg.state_dir.clone(), placeholder)
            .with_budgets(cfg.budgets()),
    );
    let metrics = http::Latest::default();
    let svc = service::Service {
        cfg: cfg.clone(),
        shared: shared.clone(),
        env,
        parent,
        metrics: metrics.clone(),
    };
    shared.set_capacity(svc.initial_capacity());
    let listener = server::bind(&cfg.socket)?;
    tracing::info!("memgangd listening on {}", cfg.socket.display());
    {
        let shared = shared.clone();
        let limits = server::Limits {
            per_user_workers: cfg.user_request_workers,
            ..server::LIMITS
        };
        std::thread::spawn(move || server::serve(listener, shared, limits));
    }
    if let Some(addr) = cfg.metrics_listen {
        let l = std::net::TcpListener::bind(addr).with_context(|| {
            format!("metrics_listen = \"{addr}\": binding the metrics listener")
        })?;
        tracing::info!("memgangd serves metrics on http://{addr}/metrics");
        std::thread::spawn(move || http::serve(l, metrics));
    }
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("accepting jobs"),
    ]);
    let result = svc.run(&stop);
    notify(&[sd_notify::NotifyState::Stopping]);
    // A stale metrics file would show the last numbers as current to
    // Prometheus. Both are removed by name in their directory, which may
    // be another user's: never through a link.
    for path in std::iter::once(&cfg.socket).chain(&cfg.metrics_file) {
        if let Ok((dir, name)) = memgang_linux::files::split(path) {
            let _ = memgang_linux::files::Dir::open(&dir).and_then(|d| d.remove(&name));
        }
    }
    result
}

/// The state directory (0711: jobs pass through it to their allowance
/// files), `jobs/` (0700: output and status files, root's alone) and
/// `allowance/` (0711, not listable: each job's file has a name no one
/// else can guess); the job directory returned. Made or set through no
/// link; the state directory itself is memgang's (the unit's
/// StateDirectory), so its mode is set even when it was there.
fn state_dirs(state_dir: &Path) -> Result<PathBuf> {
    let made = |e: std::io::Error, p: &Path| {
        anyhow::Error::from(e).context(format!("making the state directory {}", p.display()))
    };
    let (state, _) =
        memgang_linux::files::make_dirs(state_dir, 0o711).map_err(|e| made(e, state_dir))?;
    state.set_mode(0o711).map_err(|e| made(e, state_dir))?;
    for (name, mode) in [("jobs", 0o700), (service::ALLOWANCE_DIR, 0o711)] {
        let path = state_dir.join(name);
        let (d, _) = state.make_dir(name, mode).map_err(|e| made(e, &path))?;
        d.set_mode(mode).map_err(|e| made(e, &path))?;
    }
    Ok(state_dir.join("jobs"))
}

/// The group named by --jobs-cgroup: it must exist (systemd made it for
/// memgang-jobs.service).
fn jobs_parent(
    backend: &dyn memgang_linux::cgroup::CgroupBackend,
    group: &str,
) -> Result<memgang_linux::cgroup::GroupPath> {
    let g = memgang_linux::cgroup::GroupPath::new(group.trim_matches('/'))
        .with_context(|| format!("--jobs-cgroup {group}"))?;
    if !backend.exists(&g) {
        bail!(
            "--jobs-cgroup {group}: no such cgroup in {}; start memgang-jobs.service first (dist/memgang-jobs.service makes it)",
            backend.describe()
        );
    }
    Ok(g)
}

/// Under cgroup v2 a group with processes cannot hand controllers to
/// children (no internal processes): the daemon moves itself into a
/// `daemon` leaf of its group and makes its pools beside it. The leaf is
/// made without controllers, so nothing is enabled in the group until the
/// daemon has left it (the pools' `create` enables memory then).
fn leaf_for_v2(
    backend: &dyn memgang_linux::cgroup::CgroupBackend,
    own: memgang_linux::cgroup::GroupPath,
    v2: bool,
) -> Result<memgang_linux::cgroup::GroupPath> {
    if !v2 {
        return Ok(own);
    }
    let leaf = own.join("daemon")?;
    backend.create_leaf(&leaf)?;
    memgang_linux::cgroup::join(backend, &leaf, std::process::id() as i32)
        .context("moving memgangd into its own leaf group")?;
    Ok(own)
}

/// One daemon per state directory: a POSIX lock on `<dir>/lock`, released
/// by the kernel however the daemon ends.
fn lock(dir: &Path) -> Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: a zeroed flock is a valid argument; fcntl on our own fd.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) } != 0 {
        bail!(
            "another memgangd runs with the state directory {} (its lock {} is held); stop it first",
            dir.display(),
            path.display()
        );
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgang_linux::cgroup::{v2::V2, CgroupBackend, GroupPath};

    /// Under systemd with Delegate=yes on a v2 host the daemon's group
    /// holds the daemon; v2 forbids processes in a group that hands
    /// controllers down, so the daemon moves into a `daemon` leaf and its
    /// pools go beside it. Played on a fake v2 tree (files named like the
    /// kernel's): this kernel has no v2 memory controller.
    #[test]
    fn v2_daemon_moves_into_a_leaf_of_its_delegated_group() {
        let root = tempfile::tempdir().unwrap();
        let unit = root.path().join("system.slice/memgangd.service");
        std::fs::create_dir_all(&unit).unwrap();
        for dir in [
            root.path(),
            root.path().join("system.slice").as_path(),
            &unit,
        ] {
            std::fs::write(dir.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
            std::fs::write(dir.join("cgroup.subtree_control"), "memory\n").unwrap();
            std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        }
        // systemd enables nothing below a delegated unit: the kernel
        // refuses +memory there while the daemon is in it (EBUSY), so
        // making the leaf must not write it.
        std::fs::write(unit.join("cgroup.subtree_control"), "").unwrap();
        let v2 = V2::new(root.path());
        let own = service::own_cgroup("0::/system.slice/memgangd.service\n", true).unwrap();
        let parent = leaf_for_v2(&v2, own.clone(), true).unwrap();
        assert_eq!(parent, own);
        let procs = unit.join("daemon/cgroup.procs");
        assert_eq!(
            std::fs::read_to_string(&procs).unwrap().trim(),
            std::process::id().to_string(),
            "the daemon's pid goes to {}",
            procs.display()
        );
        assert_eq!(
            std::fs::read_to_string(unit.join("cgroup.subtree_control")).unwrap(),
            "",
            "nothing enabled in the unit's group before the daemon left it"
        );
        // v1: no leaf, the group is the parent as it is.
        let v1_own = GroupPath::new("system.slice/memgangd.service").unwrap();
        assert_eq!(leaf_for_v2(&v2, v1_own.clone(), false).unwrap(), v1_own);
        assert!(v2.exists(&GroupPath::new("system.slice/memgangd.service/daemon").unwrap()));
    }
}
