//! The Slurm commands the controller runs to act (`scontrol suspend`,
//! `resume`, `update`) and `squeue`'s text, which the controller no longer
//! reads (it reads Slurm's JSON, [`crate::slurm_json`]) but the cluster
//! tests check the JSON against. Slurm's own client commands rather than
//! its C API or REST daemon: they come with every Slurm install and need
//! no plugin built against one Slurm release.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// A job as `squeue` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobInfo {
    pub id: u32,
    /// PENDING, RUNNING, SUSPENDED, COMPLETED, ...
    pub state: String,
    pub nodes: u32,
    /// `--mem`: memory per node, if the job asked for it.
    pub mem_per_node: Option<u64>,
    pub partition: String,
    pub name: String,
}

impl JobInfo {
    /// Ended, one way or another (Slurm keeps them in `squeue` a while);
    /// COMPLETING counts: its ranks have exited.
    pub fn is_over(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING" | "CONFIGURING" | "RUNNING" | "SUSPENDED" | "REQUEUED"
        )
    }
}

fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd} (is Slurm installed and SLURM_CONF set?)"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

const SQUEUE_FORMAT: &str = "%i|%T|%D|%m|%P|%j";

/// Every job of `partitions` Slurm still knows, ended ones included.
pub fn jobs(partitions: &[&str]) -> Result<Vec<JobInfo>> {
    let parts = partitions.join(",");
    let text = run(
        "squeue",
        &["-h", "-a", "-t", "all", "-p", &parts, "-o", SQUEUE_FORMAT],
    )?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(parse_job)
        .collect()
}

pub fn parse_job(line: &str) -> Result<JobInfo> {
    let f: Vec<&str> = line.splitn(6, '|').collect();
    if f.len() != 6 {
        bail!("squeue printed {line:?}, not {SQUEUE_FORMAT}");
    }
    let id = f[0]
        .trim()
        .parse()
        .with_context(|| format!("job id {:?} in squeue's {line:?}", f[0]))?;
    Ok(JobInfo {
        id,
        state: f[1].trim().to_string(),
        nodes: f[2].trim().parse().unwrap_or(1),
        mem_per_node: parse_memory(f[3].trim()),
        partition: f[4].trim().to_string(),
        name: f[5].trim().to_string(),
    })
}

/// Slurm's memory sizes: a number of MiB, or with K/M/G/T (binary). 0 (no
/// request) is None.
pub fn parse_memory(s: &str) -> Option<u64> {
    let (num, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "M"),
    };
    let v: f64 = num.parse().ok()?;
    let mult = match unit.to_ascii_uppercase().as_str() {
        "K" => 1u64 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    let bytes = (v * mult as f64) as u64;
    (bytes > 0).then_some(bytes)
}

fn ids(jobs: &[u32]) -> String {
    jobs.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Stop the jobs' ranks on every node (SIGSTOP).
pub fn suspend(jobs: &[u32]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    run("scontrol", &["suspend", &ids(jobs)]).map(drop)
}

/// Let the jobs' ranks run again on every node (SIGCONT).
pub fn resume(jobs: &[u32]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    run("scontrol", &["resume", &ids(jobs)]).map(drop)
}

/// Let a job waiting in the DOWN partition start: move it to the run
/// partition, on the nodes the policy chose.
pub fn start(job: u32, run_partition: &str, nodes: &[String]) -> Result<()> {
    run(
        "scontrol",
        &[
            "update",
            &format!("JobId={job}"),
            &format!("Partition={run_partition}"),
            &format!("ReqNodeList={}", nodes.join(",")),
        ],
    )
    .map(drop)
}

/// How every `AdminComment` the controller writes on a job it keeps
/// stopped begins: its mark. Slurm's record cannot otherwise tell the
/// controller's `scontrol suspend` from an administrator's, so the
/// controller marks a job before it suspends it and clears the mark after
/// it resumes it; a job Slurm has SUSPENDED without the mark was suspended
/// by someone else (see [`crate::controller`]).
pub const STOPPED: &str = "memgang: stopped";

/// Whether an `AdminComment` carries the controller's mark ([`STOPPED`]).
pub fn is_marked(admin_comment: &str) -> bool {
    admin_comment.starts_with(STOPPED)
}

/// Mark jobs about to be suspended as the controller's ([`STOPPED`]), in
/// one `scontrol update` of them all.
pub fn mark_stopped(jobs: &[u32]) -> Result<()> {
    set_comment(
        jobs,
        &format!("{STOPPED} at its turn's end; memgang resumes it at its next"),
    )
}

/// Take the mark (and any reason) off jobs the controller let go.
pub fn clear_comment(jobs: &[u32]) -> Result<()> {
    set_comment(jobs, "")
}

fn set_comment(jobs: &[u32], text: &str) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    run(
        "scontrol",
        &[
            "update",
            &format!("JobId={}", ids(jobs)),
            &format!("AdminComment={text}"),
        ],
    )
    .map(drop)
}

/// Say something to the job's owner and admins in Slurm's own record of
/// the job (`scontrol show job` shows it): `memgang: ` and `text`. Why
/// the controller keeps a job stopped begins `stopped`, which keeps its
/// mark ([`STOPPED`]).
pub fn comment(job: u32, text: &str) {
    let text: String = text.chars().filter(|c| *c != '"' && *c != '\n').collect();
    if let Err(e) = set_comment(&[job], &format!("memgang: {text}")) {
        tracing::warn!("job {job}: could not write the admin comment: {e:#}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_parse() {
        let j = parse_job("12|SUSPENDED|2|190M|memgang-run|cg a|b").unwrap();
        assert_eq!(j.id, 12);
        assert_eq!(j.state, "SUSPENDED");
        assert_eq!(j.nodes, 2);
        assert_eq!(j.mem_per_node, Some(190 << 20));
        assert_eq!(j.partition, "memgang-run");
        assert_eq!(j.name, "cg a|b");
        assert!(!j.is_over());
        assert!(parse_job("12|RUNNING").is_err());
        assert!(parse_job("x|RUNNING|1|0|p|n").is_err());
        assert!(parse_job("3|COMPLETED|1|0|p|n").unwrap().is_over());
    }

    #[test]
    fn the_controllers_mark_is_its_stopped_comments_only() {
        assert!(is_marked(STOPPED));
        assert!(is_marked("memgang: stopped: switch refused: n2: no agent"));
        assert!(!is_marked(""));
        assert!(!is_marked("memgang: suspended by an administrator"));
        assert!(!is_marked("maintenance, ask bob"));
    }

    #[test]
    fn slurm_memory_sizes() {
        assert_eq!(parse_memory("190M"), Some(190 << 20));
        assert_eq!(parse_memory("2G"), Some(2 << 30));
        assert_eq!(parse_memory("1.5G"), Some(3 << 29));
        assert_eq!(parse_memory("512"), Some(512 << 20));
        assert_eq!(parse_memory("0"), None);
        assert_eq!(parse_memory("lots"), None);
    }
}
