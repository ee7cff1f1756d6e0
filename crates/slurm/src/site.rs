//! Where a node's Slurm keeps its jobs, and so where the agent's pool and
//! job groups are (docs/slurm.md, "Slurm's cgroups").
//!
//! - **Slurm's cgroups** (`ProctrackType=proctrack/cgroup`,
//!   `TaskPlugin=task/cgroup`): every task stays where Slurm put it, and
//!   the pool is Slurm's cgroup of all the node's jobs: on v1 the memory
//!   hierarchy's `slurm_<node>` (or `slurm`), jobs at
//!   `uid_<uid>/job_<id>`; on v2 `<slurmd's slice>/slurmstepd.scope` (or
//!   `<node>_slurmstepd.scope`), jobs at `job_<id>`. The agent sets the
//!   pool's limit there and pages Slurm's job cgroups; it makes no cgroup.
//! - **No Slurm cgroups** (`proctrack/linuxproc` or `proctrack/pgid`,
//!   `task/none` or `task/affinity`): memgang's own pool
//!   `memgang-slurm-<node>`, a group `job-<id>` per job, tasks moved in by
//!   Slurm's `TaskProlog` (`memgang slurm adopt`).
//!
//! Anything else (one plugin of Slurm's cgroups without the other, a
//! cgroup plugin that is not the node's hierarchy, swap forbidden to
//! jobs) is a layout the agent does not know: it refuses to start, naming
//! the setting.

use crate::wire::SlurmJob;
use anyhow::{bail, Context, Result};
use memgang_linux::cgroup::v1::V1;
use memgang_linux::cgroup::v2::V2;
use memgang_linux::cgroup::{CgroupBackend, CgroupVersion, GroupPath};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A Slurm configuration file's top-level settings (slurm.conf,
/// cgroup.conf): the first `Key=Value` of each line, keys lower-cased, the
/// last one given winning as in Slurm; `Include` files read in place.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conf {
    settings: BTreeMap<String, String>,
}

impl Conf {
    /// `path`; a missing file is an empty configuration when `optional`
    /// (cgroup.conf: Slurm's defaults).
    pub fn read(path: &Path, optional: bool) -> Result<Conf> {
        let mut conf = Conf::default();
        if optional && !path.exists() {
            return Ok(conf);
        }
        conf.read_into(path, 0)?;
        Ok(conf)
    }

    fn read_into(&mut self, path: &Path, depth: usize) -> Result<()> {
        if depth > 8 {
            bail!("{}: Include nested more than 8 deep", path.display());
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading Slurm's configuration {}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("/"));
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            if first.eq_ignore_ascii_case("include") {
                let Some(file) = words.next() else { continue };
                self.read_into(&dir.join(file), depth + 1)?;
            } else if let Some((k, v)) = first.split_once('=') {
                self.settings
                    .insert(k.to_ascii_lowercase(), v.trim_matches('"').to_string());
            }
        }
        Ok(())
    }

    pub fn parse(text: &str) -> Conf {
        let mut conf = Conf::default();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some((k, v)) = line
                .split_whitespace()
                .next()
                .and_then(|w| w.split_once('='))
            {
                conf.settings
                    .insert(k.to_ascii_lowercase(), v.trim_matches('"').to_string());
            }
        }
        conf
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings
            .get(&key.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// `key`'s value, or Slurm's default for it.
    fn or<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.get(key).unwrap_or(default)
    }

    fn yes(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| v.eq_ignore_ascii_case("yes"))
    }
}

/// Which tree a node's Slurm runs, from its settings and the node's
/// mounted hierarchy (`v2`: the cgroup mountpoint is cgroup2).
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// memgang's own pool, tasks adopted by the `TaskProlog`.
    Own,
    /// Slurm's cgroups under `mountpoint`, of this version.
    Slurm {
        version: CgroupVersion,
        mountpoint: PathBuf,
    },
}

/// The plan for a node whose slurm.conf is `slurm` and cgroup.conf
/// `cgroup`, with the cgroup mountpoint of cgroup version 2 when `v2`;
/// an error names the setting memgang does not know.
pub fn plan(slurm: &Conf, cgroup: &Conf, v2: bool) -> Result<Plan> {
    // Slurm's defaults (slurm.conf(5)).
    let proctrack = slurm.or("ProctrackType", "proctrack/cgroup");
    let task = slurm.or("TaskPlugin", "task/none");
    let acct = slurm.or("JobAcctGatherType", "jobacct_gather/none");
    let task_cgroup = task.split(',').any(|t| t.trim() == "task/cgroup");
    if let Some(other) = task
        .split(',')
        .map(str::trim)
        .find(|t| !matches!(*t, "task/cgroup" | "task/affinity" | "task/none"))
    {
        bail!("TaskPlugin={task}: memgang knows task/cgroup, task/affinity and task/none, not {other}; see docs/slurm.md, \"Site configuration\"");
    }
    let uses_cgroups =
        proctrack == "proctrack/cgroup" || task_cgroup || acct == "jobacct_gather/cgroup";
    if !uses_cgroups {
        return match proctrack {
            "proctrack/linuxproc" | "proctrack/pgid" => Ok(Plan::Own),
            other => bail!("ProctrackType={other}: memgang knows proctrack/cgroup, proctrack/linuxproc and proctrack/pgid; see docs/slurm.md, \"Site configuration\""),
        };
    }
    if proctrack != "proctrack/cgroup" || !task_cgroup {
        bail!(
            "ProctrackType={proctrack} with TaskPlugin={task} and JobAcctGatherType={acct}: \
             Slurm's cgroups are used in part, a layout memgang does not know; set both \
             ProctrackType=proctrack/cgroup and TaskPlugin=task/cgroup (Slurm's recommended \
             setup), or neither and JobAcctGatherType other than jobacct_gather/cgroup \
             (docs/slurm.md, \"Site configuration\")"
        );
    }
    if cgroup.yes("ConstrainSwapSpace") {
        bail!(
            "ConstrainSwapSpace=yes in cgroup.conf: Slurm forbids its jobs the swap memgang \
             pages them out to, so the kernel would kill a job at its switch; set \
             ConstrainSwapSpace=no (docs/slurm.md, \"Site configuration\")"
        );
    }
    let version = match (cgroup.or("CgroupPlugin", "autodetect"), v2) {
        ("autodetect", false) | ("cgroup/v1", false) => CgroupVersion::V1,
        ("autodetect", true) | ("cgroup/v2", true) => CgroupVersion::V2,
        (p @ ("cgroup/v1" | "cgroup/v2"), v2) => bail!(
            "CgroupPlugin={p} in cgroup.conf, but this node mounts cgroup {}: Slurm's plugin \
             and the node disagree; fix CgroupPlugin",
            if v2 { "v2" } else { "v1" }
        ),
        (other, _) => bail!("CgroupPlugin={other} in cgroup.conf: memgang knows cgroup/v1, cgroup/v2 and autodetect"),
    };
    let mountpoint = PathBuf::from(cgroup.or("CgroupMountpoint", "/sys/fs/cgroup"));
    Ok(Plan::Slurm {
        version,
        mountpoint,
    })
}

/// The node's jobs' tree: the pool, its jobs' groups, and the backend
/// that drives them.
#[derive(Debug)]
pub struct Site {
    pub backend: Arc<dyn CgroupBackend>,
    pub pool: GroupPath,
    /// Slurm's tree (else memgang's own pool).
    slurm: bool,
    /// The cgroup mountpoint (Slurm's CgroupMountpoint): v1's
    /// hierarchies are directories in it.
    mountpoint: PathBuf,
    /// v2 under systemd: the pool is a unit (Slurm's transient scope),
    /// whose limit is set through systemd so that a reload keeps it.
    unit: Option<String>,
}

impl Site {
    /// memgang's own pool `memgang-slurm-<node>` on `backend`.
    pub fn own(node: &str, backend: Arc<dyn CgroupBackend>) -> Result<Site> {
        let pool = GroupPath::new(&format!("memgang-slurm-{node}"))
            .with_context(|| format!("node name {node:?} cannot name a cgroup"))?;
        Ok(Site {
            backend,
            pool,
            slurm: false,
            mountpoint: "/sys/fs/cgroup".into(),
            unit: None,
        })
    }

    /// Slurm's tree on `backend` (mounted at `mountpoint`) with its pool
    /// at `pool`.
    pub fn slurm(backend: Arc<dyn CgroupBackend>, mountpoint: &Path, pool: GroupPath) -> Site {
        Site {
            backend,
            pool,
            slurm: true,
            mountpoint: mountpoint.to_path_buf(),
            unit: None,
        }
    }

    /// The node's site from its slurm.conf (cgroup.conf beside it) and
    /// its mounted cgroups.
    pub fn detect(node: &str, slurm_conf: &Path) -> Result<Site> {
        let slurm = Conf::read(slurm_conf, false)?;
        let cgroup_conf = slurm_conf.with_file_name("cgroup.conf");
        let cgroup = Conf::read(&cgroup_conf, true)?;
        let mount = PathBuf::from(cgroup.or("CgroupMountpoint", "/sys/fs/cgroup"));
        let v2 = is_cgroup2(&mount);
        let why = || {
            format!(
                "{} and {}: where this node's Slurm keeps its jobs",
                slurm_conf.display(),
                cgroup_conf.display()
            )
        };
        match plan(&slurm, &cgroup, v2).with_context(why)? {
            Plan::Own => {
                let backend =
                    memgang_linux::cgroup::detect().context("finding a memory cgroup hierarchy")?;
                Site::own(node, Arc::from(backend))
            }
            Plan::Slurm {
                version: CgroupVersion::V1,
                mountpoint,
            } => {
                let memory = mountpoint.join("memory");
                let freezer = mountpoint.join("freezer");
                let pool = wait_for_slurm(|| v1_pool(&memory, node))?;
                let backend = V1::new(memory, freezer.is_dir().then_some(freezer));
                Ok(Site::slurm(Arc::new(backend), &mountpoint, pool))
            }
            Plan::Slurm { mountpoint, .. } => {
                let pool = wait_for_slurm(|| v2_pool(&mountpoint, node))?;
                let unit = (Path::new("/run/systemd/system").is_dir()
                    && pool.name().ends_with(".scope"))
                .then(|| pool.name().to_string());
                let mut site = Site::slurm(Arc::new(V2::new(&mountpoint)), &mountpoint, pool);
                site.unit = unit;
                Ok(site)
            }
        }
    }

    /// Under Slurm's cgroups (tasks stay where Slurm puts them).
    pub fn is_slurm(&self) -> bool {
        self.slurm
    }

    pub fn describe(&self) -> String {
        if self.slurm {
            format!(
                "Slurm's cgroups, pool {} ({})",
                self.pool,
                self.backend.describe()
            )
        } else {
            format!(
                "memgang's own pool {}, tasks adopted by the TaskProlog ({})",
                self.pool,
                self.backend.describe()
            )
        }
    }

    /// Give the pool its limit (making memgang's own pool first).
    pub fn open_pool(&self, bytes: u64) -> Result<()> {
        if !self.slurm {
            self.backend.create(&self.pool)?;
        }
        self.set_pool_limit(Some(bytes))
    }

    fn set_pool_limit(&self, bytes: Option<u64>) -> Result<()> {
        if let Some(unit) = &self.unit {
            let value = bytes.map_or("infinity".to_string(), |b| b.to_string());
            let out = std::process::Command::new("systemctl")
                .args(["set-property", "--runtime", unit])
                .arg(format!("MemoryMax={value}"))
                .output();
            match out {
                Ok(o) if o.status.success() => return Ok(()),
                Ok(o) => tracing::warn!(
                    "systemctl set-property {unit} MemoryMax={value}: {}; writing memory.max instead",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                Err(e) => tracing::warn!("systemctl: {e}; writing memory.max instead"),
            }
        }
        self.backend
            .set_memory_limit(&self.pool, bytes)
            .with_context(|| format!("setting the limit of the pool {}", self.pool))
    }

    /// Job `job`'s group: where it is, or (a job not started here yet)
    /// where it will be.
    pub fn job_group(&self, job: SlurmJob) -> GroupPath {
        if !self.slurm {
            return self
                .pool
                .join(&format!("job-{job}"))
                .expect("job ids name groups");
        }
        let name = format!("job_{job}");
        if self.backend.version() == CgroupVersion::V1 {
            for uid in self.backend.list_children(&self.pool).unwrap_or_default() {
                if uid.name().starts_with("uid_") {
                    let g = uid.join(&name).expect("job ids name groups");
                    if self.backend.exists(&g) {
                        return g;
                    }
                }
            }
        }
        self.pool.join(&name).expect("job ids name groups")
    }

    /// Every job with a group in the pool.
    pub fn jobs(&self) -> Vec<(SlurmJob, GroupPath)> {
        let children = self.backend.list_children(&self.pool).unwrap_or_default();
        let groups: Vec<GroupPath> = if self.slurm && self.backend.version() == CgroupVersion::V1 {
            children
                .iter()
                .filter(|u| u.name().starts_with("uid_"))
                .flat_map(|u| self.backend.list_children(u).unwrap_or_default())
                .collect()
        } else {
            children
        };
        let prefix = if self.slurm { "job_" } else { "job-" };
        groups
            .into_iter()
            .filter_map(|g| {
                let job = g.name().strip_prefix(prefix)?.parse().ok()?;
                Some((job, g))
            })
            .collect()
    }

    /// The processes of a job's group, less Slurm's own (slurmstepd,
    /// which runs while its job is suspended).
    pub fn job_procs(&self, group: &GroupPath) -> Vec<i32> {
        let pids = self.backend.procs_recursive(group).unwrap_or_default();
        if !self.slurm {
            return pids;
        }
        pids.into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .map_or(true, |c| c.trim() != "slurmstepd")
            })
            .collect()
    }

    /// Every one of `pids` stopped: by SIGSTOP (state `T`), or frozen in
    /// its cgroup (Slurm's suspend under proctrack/cgroup); one that is
    /// gone counts as stopped.
    pub fn all_stopped(&self, pids: &[i32]) -> bool {
        !pids.is_empty()
            && pids.iter().all(|&p| {
                memgang_linux::process::state(p).is_none_or(|s| s == 'T') || self.frozen(p)
            })
    }

    fn frozen(&self, pid: i32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return true;
        };
        let line = |want: &dyn Fn(&str) -> bool| {
            text.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
                want(ctrl).then(|| path.trim_start_matches('/').to_string())
            })
        };
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        match self.backend.version() {
            CgroupVersion::V1 => {
                let Some(path) = line(&|c| c.split(',').any(|c| c == "freezer")) else {
                    return false;
                };
                let root = self.mountpoint.join("freezer");
                read(root.join(path).join("freezer.state")).trim() == "FROZEN"
            }
            CgroupVersion::V2 => {
                let Some(path) = line(&|c| c.is_empty()) else {
                    return false;
                };
                read(self.mountpoint.join(path).join("cgroup.events"))
                    .lines()
                    .any(|l| l == "frozen 1")
            }
        }
    }

    /// Why Slurm's own memory limit on job `job` would kill it with
    /// `declared` bytes in use on this node (its RAM limit and the swap it
    /// may use together below that), naming the limit; None when it
    /// would not, or the job is not in Slurm's cgroups here.
    pub fn slurm_limit(&self, job: SlurmJob, declared: u64) -> Option<String> {
        if !self.slurm {
            return None;
        }
        let group = self.job_group(job);
        if !self.backend.exists(&group) {
            return None;
        }
        let dir = self
            .backend
            .procs_files(&group)
            .first()?
            .parent()?
            .to_path_buf();
        let read = |f: &str| -> Option<u64> {
            let t = std::fs::read_to_string(dir.join(f)).ok()?;
            let t = t.trim();
            // v1's "unlimited" is a page-rounded i64::MAX.
            t.parse::<u64>().ok().filter(|&b| b < 1 << 60)
        };
        let (ram_file, swap_file) = match self.backend.version() {
            CgroupVersion::V1 => ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
            CgroupVersion::V2 => ("memory.max", "memory.swap.max"),
        };
        let ram = read(ram_file)?;
        let total = match (self.backend.version(), read(swap_file)) {
            (_, None) => return None,
            // v1's memsw limit is RAM and swap together.
            (CgroupVersion::V1, Some(both)) => both,
            (CgroupVersion::V2, Some(swap)) => ram + swap,
        };
        (declared > total).then(|| {
            format!(
                "job {job} asks {} on this node, over Slurm's memory limit on its cgroup {group} \
                 ({ram_file} {} and {swap_file} {}: Slurm's ConstrainRAMSpace and \
                 ConstrainSwapSpace): the kernel would kill it; give it --mem of its use, or let \
                 its cgroup swap",
                memgang_core::units::format_bytes(declared),
                memgang_core::units::format_bytes(ram),
                memgang_core::units::format_bytes(total.saturating_sub(ram)),
            )
        })
    }

    /// Put task `pid` of job `job` in its job's group: memgang's own pool
    /// moves it in; under Slurm's cgroups it stays where Slurm put it.
    pub fn adopt(&self, pid: i32, job: SlurmJob) -> Result<GroupPath> {
        let group = self.job_group(job);
        if self.slurm {
            tracing::debug!("job {job}: process {pid} stays in Slurm's {group}");
            return Ok(group);
        }
        self.backend.create(&group)?;
        memgang_linux::cgroup::join(self.backend.as_ref(), &group, pid)
            .with_context(|| format!("moving process {pid} into job {job}'s group"))?;
        Ok(group)
    }

    /// A job's group whose processes have all ended: memgang's own is
    /// removed; Slurm removes its own.
    pub fn ended(&self, group: &GroupPath) -> Result<()> {
        if self.slurm {
            return Ok(());
        }
        self.backend.remove(group)?;
        Ok(())
    }

    /// On the agent's exit: every job's protection off, and the pool's
    /// limit lifted (Slurm's) or the pool removed, its processes given
    /// back to the root group (memgang's own: Slurm's jobs are not ours
    /// to kill).
    pub fn release(&self) -> Result<()> {
        let backend = self.backend.as_ref();
        for (_, job) in self.jobs() {
            // Protection (swappiness 1) must not outlive memgang's use.
            let _ = backend.protect(&job, false);
        }
        if self.slurm {
            return self.set_pool_limit(None);
        }
        let pids = backend.procs_recursive(&self.pool).unwrap_or_default();
        for file in backend.procs_files(&self.pool) {
            // <root>/memgang-slurm-<node>/cgroup.procs -> <root>/cgroup.procs
            let Some(root) = file.parent().and_then(Path::parent) else {
                continue;
            };
            for pid in &pids {
                if let Err(e) = std::fs::write(root.join("cgroup.procs"), pid.to_string()) {
                    tracing::debug!("moving {pid} out of the pool: {e}");
                }
            }
        }
        backend.remove(&self.pool)?;
        Ok(())
    }
}

/// How long an agent started with (or before) slurmd waits for slurmd to
/// make its cgroup of all jobs.
const SLURM_TREE_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// `find` Slurm's cgroup of all jobs, retried until slurmd has made it
/// (at most [`SLURM_TREE_WAIT`]); then its error.
fn wait_for_slurm(find: impl Fn() -> Result<GroupPath>) -> Result<GroupPath> {
    let t = std::time::Instant::now();
    let mut said = false;
    loop {
        match find() {
            Ok(pool) => return Ok(pool),
            Err(e) if t.elapsed() >= SLURM_TREE_WAIT => {
                return Err(e.context(format!(
                    "waited {} for slurmd",
                    humantime::format_duration(SLURM_TREE_WAIT)
                )))
            }
            Err(e) => {
                if !said {
                    tracing::info!("{e:#}; waiting for it");
                    said = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        }
    }
}

fn is_cgroup2(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
}

/// Slurm's cgroup of all jobs in the v1 memory hierarchy at `memory`:
/// `slurm_<node>` (Slurm built for several slurmd per host, as Debian's
/// is) or `slurm`.
fn v1_pool(memory: &Path, node: &str) -> Result<GroupPath> {
    let names = [format!("slurm_{node}"), "slurm".to_string()];
    for n in &names {
        if memory.join(n).is_dir() {
            return GroupPath::new(n)
                .with_context(|| format!("node name {node:?} cannot name a cgroup"));
        }
    }
    Err(not_made("cgroup/v1", memory, &names))
}

/// slurmd (its cgroup `plugin`) has made none of `names` in `dir` yet.
fn not_made(plugin: &str, dir: &Path, names: &[String; 2]) -> anyhow::Error {
    anyhow::anyhow!(
        "no Slurm cgroup in {}: neither {} nor {} exists; slurmd ({plugin}) makes it when it \
         starts: start the agent with or after slurmd",
        dir.display(),
        names[0],
        names[1]
    )
}

/// Slurm's scope of all jobs in the v2 tree at `root`: a directory
/// `<node>_slurmstepd.scope` or `slurmstepd.scope` beside slurmd's own
/// cgroup (a slice), searched at most three levels down.
fn v2_pool(root: &Path, node: &str) -> Result<GroupPath> {
    let names = [
        format!("{node}_slurmstepd.scope"),
        "slurmstepd.scope".to_string(),
    ];
    let mut found = Vec::new();
    let mut level = vec![root.to_path_buf()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                if names.contains(&name) {
                    found.push(e.path());
                } else {
                    next.push(e.path());
                }
            }
        }
        level = next;
    }
    // The node's own scope wins over the unnamed one.
    found.sort_by_key(|p| !p.ends_with(&names[0]));
    let Some(scope) = found.first() else {
        return Err(not_made("cgroup/v2", root, &names));
    };
    let rel = scope.strip_prefix(root).unwrap_or(scope);
    GroupPath::new(&rel.to_string_lossy())
        .with_context(|| format!("Slurm's scope {} cannot name a cgroup", scope.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(s: &str) -> Conf {
        Conf::parse(s)
    }

    #[test]
    fn slurm_conf_reads_the_first_setting_of_each_line_and_includes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("memgang.conf"),
            "proctracktype=proctrack/cgroup # ours\nTaskPlugin=task/cgroup,task/affinity\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("slurm.conf"),
            "# a site\nProctrackType=proctrack/linuxproc\nNodeName=n1 CPUs=2\nInclude memgang.conf\n",
        )
        .unwrap();
        let c = Conf::read(&dir.path().join("slurm.conf"), false).unwrap();
        assert_eq!(c.get("ProctrackType"), Some("proctrack/cgroup"));
        assert_eq!(c.get("nodename"), Some("n1"));
        assert_eq!(c.get("CPUs"), None);
        let missing = Conf::read(&dir.path().join("cgroup.conf"), true).unwrap();
        assert_eq!(missing, Conf::default());
        let err = Conf::read(&dir.path().join("nope.conf"), false).unwrap_err();
        assert!(format!("{err:#}").contains("nope.conf"), "{err:#}");
    }

    #[test]
    fn the_layouts_memgang_knows() {
        let cg = "ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\n";
        let v1 = conf("CgroupPlugin=cgroup/v1\nConstrainRAMSpace=yes");
        assert_eq!(
            plan(&conf(cg), &v1, false).unwrap(),
            Plan::Slurm {
                version: CgroupVersion::V1,
                mountpoint: "/sys/fs/cgroup".into()
            }
        );
        let auto = conf("CgroupMountpoint=/cg");
        assert_eq!(
            plan(&conf(cg), &auto, true).unwrap(),
            Plan::Slurm {
                version: CgroupVersion::V2,
                mountpoint: "/cg".into()
            }
        );
        let own = "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n";
        assert_eq!(plan(&conf(own), &Conf::default(), true).unwrap(), Plan::Own);
        let pgid = "ProctrackType=proctrack/pgid\nTaskPlugin=task/affinity\n";
        assert_eq!(
            plan(&conf(pgid), &Conf::default(), false).unwrap(),
            Plan::Own
        );
    }

    #[test]
    fn a_layout_memgang_does_not_know_is_refused_naming_the_setting() {
        let cg = "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup";
        // slurm.conf, cgroup.conf, v2 mounted, what the refusal names.
        let cases = [
            // Slurm's defaults: proctrack/cgroup, task/none.
            (
                "",
                "",
                false,
                "ProctrackType=proctrack/cgroup with TaskPlugin=task/none",
            ),
            (
                "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/cgroup",
                "",
                false,
                "in part",
            ),
            (
                "ProctrackType=proctrack/linuxproc\nJobAcctGatherType=jobacct_gather/cgroup",
                "",
                false,
                "JobAcctGatherType=jobacct_gather/cgroup",
            ),
            (
                "ProctrackType=proctrack/cray_aries",
                "",
                false,
                "ProctrackType=proctrack/cray_aries",
            ),
            (
                "TaskPlugin=task/cray_aries",
                "",
                false,
                "TaskPlugin=task/cray_aries",
            ),
            (
                cg,
                "CgroupPlugin=cgroup/v1",
                true,
                "CgroupPlugin=cgroup/v1 in cgroup.conf, but this node mounts cgroup v2",
            ),
            (
                cg,
                "CgroupPlugin=cgroup/v2",
                false,
                "CgroupPlugin=cgroup/v2",
            ),
            (cg, "CgroupPlugin=cgroup/v3", true, "CgroupPlugin=cgroup/v3"),
            (
                cg,
                "ConstrainSwapSpace=yes",
                false,
                "ConstrainSwapSpace=yes",
            ),
        ];
        for (slurm, cgroup, v2, named) in cases {
            let e = format!("{:#}", plan(&conf(slurm), &conf(cgroup), v2).unwrap_err());
            assert!(e.contains(named), "{slurm:?} {cgroup:?}: {e}");
        }
    }

    #[test]
    fn slurms_trees_are_found_and_their_jobs_listed() {
        let dir = tempfile::tempdir().unwrap();
        let memory = dir.path().join("memory");
        let e = v1_pool(&memory, "n1").unwrap_err().to_string();
        assert!(e.contains("slurm_n1") && e.contains("after slurmd"), "{e}");
        for d in [
            "slurm_n1/uid_1000/job_7/step_0",
            "slurm_n1/uid_0/job_8",
            "slurm_n1/system",
        ] {
            std::fs::create_dir_all(memory.join(d)).unwrap();
        }
        let pool = v1_pool(&memory, "n1").unwrap();
        assert_eq!(pool.as_str(), "slurm_n1");
        let site = Site::slurm(Arc::new(V1::new(&memory, None)), dir.path(), pool);
        assert_eq!(site.job_group(7).as_str(), "slurm_n1/uid_1000/job_7");
        assert_eq!(site.job_group(9).as_str(), "slurm_n1/job_9");
        let jobs: Vec<_> = site
            .jobs()
            .into_iter()
            .map(|(j, g)| (j, g.to_string()))
            .collect();
        assert_eq!(
            jobs,
            [
                (8, "slurm_n1/uid_0/job_8".into()),
                (7, "slurm_n1/uid_1000/job_7".into())
            ]
        );

        // Slurm's limit on a job: RAM 100 MiB and no swap (v1: memsw is
        // both together) kills a job of 170 MiB, not one of 90.
        let job7 = memory.join("slurm_n1/uid_1000/job_7");
        std::fs::write(
            job7.join("memory.limit_in_bytes"),
            (100u64 << 20).to_string(),
        )
        .unwrap();
        std::fs::write(
            job7.join("memory.memsw.limit_in_bytes"),
            (100u64 << 20).to_string(),
        )
        .unwrap();
        let why = site.slurm_limit(7, 170 << 20).unwrap();
        assert!(
            why.contains("memory.limit_in_bytes 100M") && why.contains("ConstrainSwapSpace"),
            "{why}"
        );
        assert_eq!(site.slurm_limit(7, 90 << 20), None);
        // Swap allowed (no memsw limit): the kernel pages it, no kill.
        std::fs::write(
            job7.join("memory.memsw.limit_in_bytes"),
            "9223372036854771712",
        )
        .unwrap();
        assert_eq!(site.slurm_limit(7, 170 << 20), None);
        assert_eq!(site.slurm_limit(9, 170 << 20), None);

        let v2 = dir.path().join("v2");
        let e = v2_pool(&v2, "n1").unwrap_err().to_string();
        assert!(e.contains("n1_slurmstepd.scope"), "{e}");
        for d in [
            "system.slice/slurmd.service",
            "system.slice/slurmstepd.scope/job_3/step_0",
        ] {
            std::fs::create_dir_all(v2.join(d)).unwrap();
        }
        assert_eq!(
            v2_pool(&v2, "n1").unwrap().as_str(),
            "system.slice/slurmstepd.scope"
        );
        std::fs::create_dir_all(v2.join("system.slice/n1_slurmstepd.scope")).unwrap();
        assert_eq!(
            v2_pool(&v2, "n1").unwrap().as_str(),
            "system.slice/n1_slurmstepd.scope"
        );
    }
}
