//! A submission's queue options checked and settled: output file
//! patterns expanded (`%j %x %u %a %A %%`), the time limit, dependencies
//! (only on the caller's own jobs that exist and can still be met) and
//! arrays (bounded). The files themselves are made by the job, as its
//! user (`memgangd shim`); the daemon never opens them.

use crate::service::Shared;
use anyhow::{bail, Result};
use memgang_proto::{
    ArraySpec, DependencyKind, JobState, QueueInfo, QueueOptions, MAX_ARRAY_TASKS,
};
use std::path::{Path, PathBuf};

/// Longest time limit: a year. More is a typo, not a plan.
pub const MAX_TIME_LIMIT_S: u64 = 366 * 86_400;
/// Most dependencies of one job.
pub const MAX_DEPENDENCIES: usize = 100;
/// Longest pattern or expanded path (PATH_MAX).
const MAX_PATH: usize = 4096;

/// The options checked before any id is given.
pub fn check(q: &QueueOptions, caller_uid: u32, shared: &Shared) -> Result<()> {
    if let Some(t) = q.time_limit_s {
        if t == 0 {
            bail!("--time 0: a job needs some time to run; give e.g. --time 10:00 (10 minutes) or leave it out for no limit");
        }
        if t > MAX_TIME_LIMIT_S {
            bail!("--time of {t} s is more than a year ({MAX_TIME_LIMIT_S} s), the longest memgangd takes; leave it out for no limit");
        }
    }
    if let Some(a) = &q.array {
        check_array(a)?;
    }
    if q.after.len() > MAX_DEPENDENCIES {
        bail!(
            "{} dependencies: at most {MAX_DEPENDENCIES} (make an array and depend on it)",
            q.after.len()
        );
    }
    for d in &q.after {
        let Some(r) = shared
            .get(d.id)
            .filter(|r| caller_uid == 0 || r.info.uid == caller_uid)
        else {
            bail!(
                "--after {}: no job {} of yours (see `memgang status -a`); a job may wait only for your own jobs",
                d.id,
                d.id
            );
        };
        let s = r.info.state;
        if d.kind == DependencyKind::Afterok && s.is_final() && s != JobState::Finished {
            bail!(
                "--after {}: job {} ended {}, so afterok can never be met (use afterany to run after it however it ended)",
                d.id,
                d.id,
                s.name()
            );
        }
    }
    for p in [&q.output, &q.error].into_iter().flatten() {
        expand(p, 1, "x", "u", Some((1, 1)))?;
    }
    Ok(())
}

fn check_array(a: &ArraySpec) -> Result<()> {
    if a.indexes.is_empty() {
        bail!("--array has no index: write e.g. --array 1-100 or --array 1,3,5 (%8 after it: at most 8 at once)");
    }
    if a.indexes.len() > MAX_ARRAY_TASKS {
        bail!(
            "--array of {} tasks: at most {MAX_ARRAY_TASKS} in one array; split it",
            a.indexes.len()
        );
    }
    if a.limit == Some(0) {
        bail!("--array ...%0: at most 0 tasks at once would never run one; give %1 or more");
    }
    Ok(())
}

/// One job's queue settings: its files' paths (relative patterns from
/// its working directory), its limit and dependencies, its array place.
pub fn settle(
    q: &QueueOptions,
    id: u64,
    name: &str,
    user: &str,
    cwd: &Path,
    array: Option<(u64, u32)>,
) -> Result<QueueInfo> {
    let files = q.output.is_some() || q.error.is_some();
    let default = if array.is_some() {
        "memgang-%A_%a.out"
    } else {
        "memgang-%j.out"
    };
    let out = expand(
        q.output.as_deref().unwrap_or(default),
        id,
        name,
        user,
        array,
    )?;
    let err = q
        .error
        .as_deref()
        .map(|p| expand(p, id, name, user, array))
        .transpose()?;
    let stdout = cwd.join(out);
    let stderr = err.map(|e| cwd.join(e)).filter(|e| *e != stdout);
    Ok(QueueInfo {
        stdout: files.then_some(stdout),
        stderr: stderr.filter(|_| files),
        time_limit_s: q.time_limit_s,
        used_s: 0.0,
        after: q.after.clone(),
        array_id: array.map(|a| a.0),
        array_index: array.map(|a| a.1),
        array_limit: q.array.as_ref().and_then(|a| a.limit),
    })
}

/// `pattern` with sbatch's escapes replaced: `%j` the id, `%x` the
/// name, `%u` the user, `%a` the array index, `%A` the array's id (the
/// job's own outside an array), `%%` a percent sign.
pub fn expand(
    pattern: &str,
    id: u64,
    name: &str,
    user: &str,
    array: Option<(u64, u32)>,
) -> Result<PathBuf> {
    let bad = |why: String| -> Result<PathBuf> {
        bail!("--output/--error {pattern:?}: {why}; write e.g. --output out-%j.txt (%j id, %x name, %u user, %a array index, %A array id, %% a percent sign)")
    };
    if pattern.is_empty() {
        return bad("an empty file name".into());
    }
    if pattern.len() > MAX_PATH || pattern.contains('\0') {
        return bad(format!("longer than {MAX_PATH} bytes or holds a NUL"));
    }
    let mut s = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            s.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => s += &id.to_string(),
            Some('x') => s += name,
            Some('u') => s += user,
            Some('%') => s.push('%'),
            Some('A') => s += &array.map_or(id, |a| a.0).to_string(),
            Some('a') => match array {
                Some((_, i)) => s += &i.to_string(),
                None => return bad("%a is a task's index, and this job is no array".into()),
            },
            Some(o) => return bad(format!("%{o} is not a pattern memgang knows")),
            None => return bad("it ends with a lone %".into()),
        }
    }
    if s.len() > MAX_PATH {
        return bad(format!("longer than {MAX_PATH} bytes once expanded"));
    }
    if s.ends_with('/') {
        return bad("it names a directory, not a file".into());
    }
    Ok(PathBuf::from(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand_as_sbatch_does_and_bad_ones_say_why() {
        let e = |p: &str, a| expand(p, 42, "sim", "ann", a).map(|p| p.display().to_string());
        assert_eq!(e("memgang-%j.out", None).unwrap(), "memgang-42.out");
        assert_eq!(
            e("%x-%u-%A_%a.%%", Some((40, 3))).unwrap(),
            "sim-ann-40_3.%"
        );
        assert_eq!(e("o-%A", None).unwrap(), "o-42");
        for (p, why) in [
            ("o-%a", "no array"),
            ("o-%q", "%q is not"),
            ("o-%", "lone %"),
            ("", "empty"),
            ("dir/", "directory"),
        ] {
            let err = format!("{:#}", e(p, None).unwrap_err());
            assert!(
                err.contains(why) && err.contains("write e.g."),
                "{p}: {err}"
            );
        }
        assert!(e(&"x".repeat(5000), None).is_err());
        assert!(e("a\0b", None).is_err());
        // A request without files (a raw client): output in memgangd's
        // directory, as before output files.
        let q = QueueOptions::default();
        let s = settle(&q, 7, "n", "u", Path::new("/home/u"), None).unwrap();
        assert_eq!((s.stdout, s.stderr), (None, None));
        let q = QueueOptions {
            error: Some("e".into()),
            ..q
        };
        let s = settle(&q, 7, "n", "u", Path::new("/home/u"), None).unwrap();
        assert_eq!(s.stdout.unwrap(), Path::new("/home/u/memgang-7.out"));
        assert_eq!(s.stderr.unwrap(), Path::new("/home/u/e"));
        let q = QueueOptions {
            output: Some("/tmp/o".into()),
            error: Some("e-%a".into()),
            ..q
        };
        let s = settle(&q, 7, "n", "u", Path::new("/w"), Some((5, 2))).unwrap();
        assert_eq!(s.stdout.unwrap(), Path::new("/tmp/o"));
        assert_eq!(s.stderr.unwrap(), Path::new("/w/e-2"));
        assert_eq!(s.array_id, Some(5));
    }

    #[test]
    fn arrays_and_limits_are_bounded() {
        let a = |n: u32, limit| ArraySpec {
            indexes: (0..n).collect(),
            limit,
        };
        assert!(check_array(&a(10, Some(2))).is_ok());
        assert!(format!("{:#}", check_array(&a(1001, None)).unwrap_err()).contains("at most 1000"));
        assert!(check_array(&a(0, None)).is_err());
        assert!(format!("{:#}", check_array(&a(3, Some(0))).unwrap_err()).contains("%1 or more"));
    }
}
