//! `memgang slurm`: memgang on a Slurm cluster (see crates/slurm and
//! docs/slurm.md): the node `agent`, the task prolog's `adopt`, and the
//! controller `run`.

use crate::out::note;
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use memgang_core::units::parse_bytes;
use memgang_core::{PolicyKind, Switching};
use memgang_slurm::{agent, controller, wire};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Subcommand)]
pub enum Slurm {
    /// The node agent (root): this node's memory pool, and the memory work
    /// of switches on the Slurm jobs in it.
    Agent {
        /// The Slurm node name this agent serves ($SLURMD_NODENAME of its tasks).
        #[arg(long)]
        node: String,
        /// The node's memory for jobs, e.g. 8G: the pool's limit.
        #[arg(long, value_parser = parse_bytes)]
        pool: u64,
        /// Where the controller reaches this agent: ADDR[:PORT] (port
        /// 6828 unless given), TCP; every request needs a MUNGE credential
        /// of root for this node.
        #[arg(long, default_value = "0.0.0.0")]
        listen: String,
        /// munged's socket (default: MUNGE's own, /run/munge/munge.socket.2).
        #[arg(long)]
        munge_socket: Option<PathBuf>,
        /// The local socket the tasks' prolog adopts them through.
        #[arg(long, default_value = DEFAULT_LOCAL_SOCKET)]
        socket: PathBuf,
        /// Write the agent's pid here once it listens.
        #[arg(long)]
        pid_file: Option<PathBuf>,
        /// This node's slurm.conf (cgroup.conf beside it): which of
        /// Slurm's plugins track the jobs, so where their cgroups are.
        #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
        slurm_conf: PathBuf,
    },
    /// Slurm's TaskProlog: ask this node's agent to adopt the task (the
    /// prolog's parent process) into its job's group. Fails the task if the
    /// agent cannot: a rank outside the pool would escape memgang.
    Adopt {
        /// The agent's local socket (its --socket).
        #[arg(long, default_value = DEFAULT_LOCAL_SOCKET)]
        socket: PathBuf,
        /// The process to adopt; default: the caller's parent.
        #[arg(long)]
        pid: Option<i32>,
        /// The Slurm job; default: $SLURM_JOB_ID.
        #[arg(long, env = "SLURM_JOB_ID")]
        job: u32,
    },
    /// The controller: gang-schedule the jobs of a Slurm partition with
    /// their memory (run once per cluster, as root or SlurmUser).
    Run {
        /// The partition users submit to (State=DOWN in slurm.conf).
        #[arg(long, default_value = "memgang")]
        partition: String,
        /// The hidden partition jobs run in (State=UP, OverSubscribe=FORCE).
        #[arg(long, default_value = "memgang-run")]
        run_partition: String,
        /// The agents' TCP port; each node's agent is reached at the
        /// node's NodeAddr in Slurm (`sinfo -N -o '%N %o'`).
        #[arg(long, default_value_t = memgang_slurm::net::DEFAULT_PORT)]
        agent_port: u16,
        /// munged's socket (default: MUNGE's own, /run/munge/munge.socket.2).
        #[arg(long)]
        munge_socket: Option<PathBuf>,
        /// batch | cosched | gang | hybrid | auto.
        #[arg(long, default_value = "gang")]
        policy: PolicyKind,
        /// Time slice of gang scheduling.
        #[arg(long, default_value = "10s", value_parser = crate::args::duration)]
        quantum: Duration,
        /// Switch mechanisms, as for `memgang run --switch`: lru, or so,
        /// ao, ai, bg joined by '/', e.g. so/ao/ai/bg.
        #[arg(long, default_value = "so/ao/ai")]
        switch: Switching,
        /// One node's part of a switch may take this long; then its jobs
        /// stay stopped and the switch is reported failed.
        #[arg(long, default_value = "120s", value_parser = crate::args::duration)]
        switch_timeout: Duration,
        /// How often the controller reads the partitions' jobs from Slurm and
        /// squares them with the policy.
        #[arg(long, default_value = "500ms", value_parser = crate::args::duration)]
        poll: Duration,
        /// Exit once every job seen has ended and none waits.
        #[arg(long)]
        exit_when_idle: bool,
        /// Write the run's record (jobs, switches) as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

/// The agent's local socket unless configured.
const DEFAULT_LOCAL_SOCKET: &str = "/run/memgang/slurm-agent.sock";

/// `ADDR[:PORT]` with the agents' port when none is given.
fn listen_addr(s: &str) -> String {
    use std::net::{IpAddr, SocketAddr};
    if s.parse::<SocketAddr>().is_ok() {
        return s.to_string();
    }
    match s.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, memgang_slurm::net::DEFAULT_PORT).to_string(),
        // A host name, with or without its port.
        Err(_) if s.contains(':') => s.to_string(),
        Err(_) => format!("{s}:{}", memgang_slurm::net::DEFAULT_PORT),
    }
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    Ok(stop)
}

pub fn run(cmd: Slurm) -> Result<()> {
    match cmd {
        Slurm::Agent {
            node,
            pool,
            listen,
            munge_socket,
            socket,
            pid_file,
            slurm_conf,
        } => {
            if !nix::unistd::geteuid().is_root() {
                bail!(
                    "memgang slurm agent needs root: it makes cgroups and pages other users' jobs"
                );
            }
            // Where this node's Slurm keeps its jobs; a layout memgang
            // does not know stops the agent here, naming the setting.
            let site = memgang_slurm::site::Site::detect(&node, &slurm_conf)?;
            let stop = stop_flag()?;
            let agent = Arc::new(agent::Agent::new(&node, pool, site)?);
            if let Some(p) = pid_file {
                std::fs::write(&p, format!("{}\n", std::process::id()))
                    .with_context(|| format!("writing {}", p.display()))?;
            }
            let munge = Arc::new(memgang_slurm::auth::Munge::new(munge_socket));
            let listen = agent::Listen {
                tcp: listen_addr(&listen),
                // MUNGE's default lifetime (300 s) at most; the replay
                // cache holds every credential seen until it expires.
                verifier: memgang_slurm::auth::Verifier::new(
                    munge,
                    &node,
                    Duration::from_secs(300),
                    100_000,
                ),
                limits: memgang_slurm::net::Limits::default(),
                local: socket,
            };
            agent::serve(agent, listen, stop)
        }
        Slurm::Adopt { socket, pid, job } => {
            let pid = pid.unwrap_or_else(|| nix::unistd::getppid().as_raw());
            wire::call_local(
                &socket,
                &wire::Request::Adopt { pid, job },
                Duration::from_secs(30),
            )
            .with_context(|| format!("memgang could not adopt task {pid} into its node's pool"))?;
            Ok(())
        }
        Slurm::Run {
            partition,
            run_partition,
            agent_port,
            munge_socket,
            policy,
            quantum,
            switch,
            switch_timeout,
            poll,
            exit_when_idle,
            json,
        } => {
            let stop = stop_flag()?;
            let settings = controller::Settings {
                partition,
                run_partition,
                agents: memgang_slurm::agents::Agents::from_slurm(agent_port, munge_socket),
                policy,
                quantum,
                switching: switch,
                switch_timeout,
                poll,
                exit_when_idle,
                json,
            };
            let rec = controller::run(settings, stop)?;
            note!(
                "{} jobs, {} switches, makespan {:.1} s",
                rec.jobs.len(),
                rec.switches.len(),
                rec.makespan_s
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn listen_addresses_get_the_agents_port() {
        use super::listen_addr;
        assert_eq!(listen_addr("10.0.0.1"), "10.0.0.1:6828");
        assert_eq!(listen_addr("10.0.0.1:7000"), "10.0.0.1:7000");
        assert_eq!(listen_addr("::"), "[::]:6828");
        assert_eq!(listen_addr("[::1]:7000"), "[::1]:7000");
        assert_eq!(listen_addr("node1"), "node1:6828");
        assert_eq!(listen_addr("node1:7000"), "node1:7000");
    }
}
