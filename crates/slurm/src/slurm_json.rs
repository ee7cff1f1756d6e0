//! Slurm's JSON output, in place of `squeue`'s and `sinfo`'s text.
//!
//! Debian 12's Slurm 22.05 prints JSON out of the box: `squeue --json` and
//! `sinfo --json` (the `serializer/json` plugin, in `slurm-wlm-basic-plugins`,
//! which `slurm-wlm` installs; data_parser `openapi/v0.0.38`). Two limits of
//! 22.05, seen on 22.05.8:
//! - `scontrol show job --json` does not exist (`scontrol: unrecognized
//!   option '--json'`; it came with 23.02): `squeue --json` has every field
//!   the controller needs, `AdminComment` included.
//! - `squeue --json` ignores the filters (`-p`, `-t`, `-j`): it prints every
//!   job slurmctld still knows, ended ones included, and [`jobs`] filters by
//!   partition itself; `sinfo --json` likewise prints every node.
//!
//! Later data parsers (v0.0.39 on) write numbers as `{"set":..,
//! "infinite":.., "number":..}` and states as lists; [`number`] and
//! [`state`] read both. Debian 13's Slurm 24.11 (data_parser v0.0.42, seen
//! on 24.11.5) honours `squeue`'s filters with `--json`: without
//! `--states=all` it leaves out the jobs that ended, so [`jobs`] asks for
//! them (22.05 takes the option and ignores it).

use crate::slurmctl::JobInfo;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::process::Command;

/// A job as `squeue --json` shows it: what the controller reads from the
/// text today ([`JobInfo`]), and what a restarted controller needs to
/// take its jobs back.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub info: JobInfo,
    /// The nodes it runs (or ran) on, a Slurm host list (`n[1-2]`); empty
    /// while pending.
    pub node_list: String,
    /// The nodes it was told to run on (`scontrol update ReqNodeList=`).
    pub required_nodes: String,
    /// What memgang (or an admin) wrote with `AdminComment=`.
    pub admin_comment: String,
    /// Why a pending job waits (`PartitionDown`...); empty otherwise.
    pub reason: String,
}

/// A number as any data parser writes it: plain, or `{"set": true,
/// "infinite": false, "number": N}`. None: unset, infinite, null or absent.
pub fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::Object(o) => {
            let set = o.get("set").and_then(Value::as_bool).unwrap_or(true);
            let inf = o.get("infinite").and_then(Value::as_bool).unwrap_or(false);
            if set && !inf {
                o.get("number").and_then(Value::as_u64)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A job's state: a string (22.05) or a list whose first is the base
/// state (23.02 on).
pub fn state(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => a.first().and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

fn text(j: &Value, key: &str) -> String {
    j.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The JSON document's `errors`, if Slurm reported any.
fn check_errors(doc: &Value, what: &str) -> Result<()> {
    let errors: Vec<String> = doc
        .get("errors")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|e| e.to_string()).collect())
        .unwrap_or_default();
    if !errors.is_empty() {
        bail!("{what} reported errors: {}", errors.join("; "));
    }
    Ok(())
}

/// Every job of `squeue --json`'s output.
pub fn parse_jobs(json: &str) -> Result<Vec<Job>> {
    let doc: Value = serde_json::from_str(json).context("squeue --json printed no JSON")?;
    check_errors(&doc, "squeue --json")?;
    let jobs = doc
        .get("jobs")
        .and_then(Value::as_array)
        .context("squeue --json printed no \"jobs\" list")?;
    jobs.iter().map(parse_job).collect()
}

fn parse_job(j: &Value) -> Result<Job> {
    let id = number(j.get("job_id"))
        .and_then(|n| u32::try_from(n).ok())
        .with_context(|| format!("a job without a job_id in squeue --json: {j:.200}"))?;
    let job_state = state(j.get("job_state"))
        .with_context(|| format!("job {id}: no job_state in squeue --json"))?;
    let nodes = number(j.get("node_count")).unwrap_or(1).max(1);
    Ok(Job {
        info: JobInfo {
            id,
            state: job_state,
            nodes: u32::try_from(nodes).unwrap_or(u32::MAX),
            mem_per_node: mem_per_node(j, nodes),
            partition: text(j, "partition"),
            name: text(j, "name"),
        },
        node_list: text(j, "nodes"),
        required_nodes: text(j, "required_nodes"),
        admin_comment: text(j, "admin_comment"),
        reason: match text(j, "state_reason").as_str() {
            "None" => String::new(),
            r => r.to_string(),
        },
    })
}

/// `--mem` (MiB per node), or `--mem-per-cpu` times the job's CPUs per
/// node; None when the job asked neither.
fn mem_per_node(j: &Value, nodes: u64) -> Option<u64> {
    let mib = match number(j.get("memory_per_node")) {
        Some(m) => m,
        None => {
            let per_cpu = number(j.get("memory_per_cpu"))?;
            let cpus = number(j.get("cpus")).unwrap_or(1).max(1);
            per_cpu * cpus.div_ceil(nodes)
        }
    };
    (mib > 0).then_some(mib << 20)
}

/// The nodes of `partition` in `sinfo --json`'s output, in its order:
/// 22.05's list of nodes with their partitions, or (23.02 on) the
/// `sinfo` list of partition-and-state lines, each with its nodes.
pub fn parse_nodes(json: &str, partition: &str) -> Result<Vec<String>> {
    let doc: Value = serde_json::from_str(json).context("sinfo --json printed no JSON")?;
    check_errors(&doc, "sinfo --json")?;
    let mut names: Vec<String> = if let Some(lines) = doc.get("sinfo").and_then(Value::as_array) {
        lines
            .iter()
            .filter(|l| l.pointer("/partition/name").and_then(Value::as_str) == Some(partition))
            .filter_map(|l| l.pointer("/nodes/nodes").and_then(Value::as_array))
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    } else {
        let nodes = doc
            .get("nodes")
            .and_then(Value::as_array)
            .context("sinfo --json printed neither a \"sinfo\" nor a \"nodes\" list")?;
        nodes
            .iter()
            .filter(|n| {
                n.get("partitions")
                    .and_then(Value::as_array)
                    .is_some_and(|p| p.iter().any(|p| p.as_str() == Some(partition)))
            })
            .map(|n| text(n, "name"))
            .filter(|n| !n.is_empty())
            .collect()
    };
    // One node may be on several state lines.
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    if names.is_empty() {
        bail!("Slurm partition {partition} has no nodes (see `sinfo -p {partition}`)");
    }
    Ok(names)
}

/// A Slurm host list (`n[1-3,5],gpu7`) as names, in order.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // One item: up to a comma outside brackets.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let item = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or("");
        let Some((prefix, ranges)) = item.split_once('[') else {
            out.push(item.to_string());
            continue;
        };
        let (ranges, suffix) = ranges
            .split_once(']')
            .with_context(|| format!("host list {list:?}: unclosed '[' in {item:?}"))?;
        for r in ranges.split(',') {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let bad = || format!("host list {list:?}: {r:?} is not a number or a range");
            let (lo, hi): (u64, u64) = (a.parse().with_context(bad)?, b.parse().with_context(bad)?);
            if hi < lo || hi - lo > 100_000 {
                bail!("host list {list:?}: range {r:?} runs backwards or is too long");
            }
            for n in lo..=hi {
                // Zero-padded as written: n[01-10].
                out.push(format!("{prefix}{n:0width$}{suffix}", width = a.len()));
            }
        }
    }
    Ok(out)
}

fn run_json(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .arg("--json")
        .args(args)
        .output()
        .with_context(|| {
            format!("running {cmd} --json (is Slurm installed and SLURM_CONF set?)")
        })?;
    if !out.status.success() {
        bail!(
            "{cmd} --json failed: {} (Slurm 22.05 or later with the serializer/json plugin, slurm-wlm-basic-plugins)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every job of `partitions` slurmctld still knows, ended ones included
/// (as [`slurmctl::jobs`](crate::slurmctl::jobs), from JSON).
pub fn jobs(partitions: &[&str]) -> Result<Vec<Job>> {
    let mut jobs = parse_jobs(&run_json("squeue", &["--all", "--states=all"])?)?;
    jobs.retain(|j| partitions.contains(&j.info.partition.as_str()));
    Ok(jobs)
}

/// The nodes of `partition`, in Slurm's order.
pub fn nodes(partition: &str) -> Result<Vec<String>> {
    parse_nodes(&run_json("sinfo", &[])?, partition)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from Debian 12's Slurm 22.05.8 on scripts/slurm-cluster
    /// (memgang mode, two nodes): a job pending in the DOWN partition, one
    /// running with an admin comment, one suspended, one completed, one
    /// with --mem-per-cpu, one cancelled.
    const SQUEUE: &str = include_str!("../tests/data/squeue-22.05.8.json");
    const SINFO: &str = include_str!("../tests/data/sinfo-22.05.8.json");

    /// The six jobs of a capture, each as `text` (what `squeue -o
    /// %i|%T|%D|%m|%P|%j` printed at the same time) shows it; job
    /// `pending` waits on its DOWN partition and `running` (on `nodes`)
    /// has memgang's admin comment.
    fn jobs_as_text(
        json: &str,
        text: &[&str],
        pending: u32,
        running: u32,
        nodes: &str,
    ) -> Vec<Job> {
        let jobs = parse_jobs(json).unwrap();
        let by_id = |id: u32| jobs.iter().find(|j| j.info.id == id).unwrap();
        assert_eq!(jobs.len(), 6);
        for line in text {
            let t = crate::slurmctl::parse_job(line).unwrap();
            assert_eq!(by_id(t.id).info, t, "{line}");
        }
        let (pending, running) = (by_id(pending), by_id(running));
        assert_eq!(
            (pending.reason.as_str(), pending.node_list.as_str()),
            ("PartitionDown", "")
        );
        assert_eq!(running.admin_comment, "memgang: hello");
        assert_eq!(
            (running.reason.as_str(), running.node_list.as_str()),
            ("", nodes)
        );
        jobs
    }

    #[test]
    fn squeue_json_of_slurm_22_05_parses_as_its_text_does() {
        let text = [
            "6|CANCELLED|1|0|memgang|cancelled",
            "1|PENDING|2|120M|memgang|pend a|b",
            "4|COMPLETED|1|0|memgang-run|done",
            "2|RUNNING|2|100M|memgang-run|run",
            "3|SUSPENDED|1|0|memgang-run|susp",
        ];
        let jobs = jobs_as_text(SQUEUE, &text, 1, 2, "n[1-2]");
        let by_id = |id: u32| jobs.iter().find(|j| j.info.id == id).unwrap();
        // --mem-per-cpu=50M on a node of 2 CPUs (select/linear: the whole node).
        assert_eq!(by_id(5).info.mem_per_node, Some(100 << 20));
        assert!(by_id(6).info.is_over() && by_id(4).info.is_over());
        assert!(!by_id(3).info.is_over());
    }

    /// Captured from Debian 13's Slurm 24.11.5 (data_parser v0.0.42,
    /// `squeue --json --states=all`) in the Slurm VM lane's root file
    /// system, one node: one job completed, one pending in the DOWN
    /// partition, one running with an admin comment, one suspended, one
    /// pending with --mem-per-cpu, one cancelled.
    const SQUEUE_24_11: &str = include_str!("../tests/data/squeue-24.11.5.json");
    const SINFO_24_11: &str = include_str!("../tests/data/sinfo-24.11.5.json");

    #[test]
    fn squeue_json_of_slurm_24_11_parses_as_its_text_does() {
        let text = [
            "2|PENDING|1|120M|memgang|pend a|b",
            "6|CANCELLED|1|0|memgang-run|cancelled",
            "1|COMPLETED|1|0|memgang-run|done",
            "3|RUNNING|1|100M|memgang-run|run",
            "4|SUSPENDED|1|10M|memgang-run|susp",
        ];
        let jobs = jobs_as_text(SQUEUE_24_11, &text, 2, 3, "memgang-vm");
        let by_id = |id: u32| jobs.iter().find(|j| j.info.id == id).unwrap();
        // -c 2 --mem-per-cpu=50M: 100M on its node (the text says 50M).
        let per_cpu = by_id(5);
        assert_eq!(per_cpu.info.mem_per_node, Some(100 << 20));
        assert_eq!(
            (per_cpu.info.state.as_str(), per_cpu.reason.as_str()),
            ("PENDING", "Resources")
        );

        assert!(by_id(6).info.is_over() && by_id(1).info.is_over());
        assert!(!by_id(4).info.is_over());
        assert_eq!(
            parse_nodes(SINFO_24_11, "memgang-run").unwrap(),
            ["memgang-vm"]
        );
        assert_eq!(parse_nodes(SINFO_24_11, "memgang").unwrap(), ["memgang-vm"]);
    }

    #[test]
    fn sinfo_json_gives_a_partitions_nodes() {
        assert_eq!(parse_nodes(SINFO, "memgang").unwrap(), ["n1", "n2"]);
        assert_eq!(parse_nodes(SINFO, "memgang-run").unwrap(), ["n1", "n2"]);
        let e = parse_nodes(SINFO, "gpu").unwrap_err();
        assert!(e.to_string().contains("has no nodes"), "{e}");
    }

    #[test]
    fn later_data_parsers_and_bad_documents() {
        let v39 = r#"{"errors": [], "jobs": [{"job_id": 7, "job_state": ["RUNNING", "COMPLETING"],
            "node_count": {"set": true, "infinite": false, "number": 2},
            "memory_per_node": {"set": true, "infinite": false, "number": 64},
            "memory_per_cpu": {"set": false, "infinite": false, "number": 0},
            "partition": "p", "name": "x", "nodes": "n[1-2]"}]}"#;
        let j = &parse_jobs(v39).unwrap()[0];
        assert_eq!(j.info.state, "RUNNING");
        assert_eq!(j.info.nodes, 2);
        assert_eq!(j.info.mem_per_node, Some(64 << 20));
        assert_eq!(j.admin_comment, "");

        let e = parse_jobs(r#"{"errors": [{"error": "boom"}], "jobs": []}"#).unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
        assert!(parse_jobs("squeue: error: x").is_err());
        assert!(parse_jobs(r#"{"jobs": [{"job_state": "RUNNING"}]}"#).is_err());
        assert!(parse_jobs(r#"{"jobs": [{"job_id": 3}]}"#).is_err());
        assert!(parse_jobs(r#"{"meta": {}}"#).is_err());
    }

    #[test]
    fn host_lists_expand() {
        assert_eq!(expand_hostlist("n[1-2]").unwrap(), ["n1", "n2"]);
        assert_eq!(
            expand_hostlist("n[1-3,5],gpu7,c[08-10]x").unwrap(),
            ["n1", "n2", "n3", "n5", "gpu7", "c08x", "c09x", "c10x"]
        );
        assert!(expand_hostlist("").unwrap().is_empty());
        assert!(expand_hostlist("n[1-").is_err());
        assert!(expand_hostlist("n[3-1]").is_err());
        assert!(expand_hostlist("n[a]").is_err());
    }
}
