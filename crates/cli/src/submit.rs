//! `memgang submit`'s queue options as sbatch spells them: output file
//! patterns, `--time`, `--after`/`--dependency`, `--array`.

use clap::Args;
use memgang_proto::{ArraySpec, Dependency, DependencyKind, QueueOptions, MAX_ARRAY_TASKS};

#[derive(Args, Debug, Default)]
pub struct QueueArgs {
    /// File for the job's stdout (and stderr, unless --error), made by
    /// the job as you, relative to this directory: %j id, %x name, %u
    /// user, %a array index, %A array id, %% a percent sign. Default
    /// memgang-%j.out (memgang-%A_%a.out in an array), as sbatch.
    #[arg(short, long, value_name = "PATTERN")]
    output: Option<String>,
    /// File for the job's stderr (default: the --output file); the same
    /// patterns.
    #[arg(short, long, value_name = "PATTERN")]
    error: Option<String>,
    /// Running time allowed (frozen time does not count); at it, the job
    /// is stopped and ends `timeout`. sbatch's forms: MINUTES, MM:SS,
    /// HH:MM:SS, D-HH[:MM[:SS]], or with a unit: 90s, 2h.
    #[arg(short, long, value_name = "TIME", value_parser = time_limit)]
    time: Option<u64>,
    /// Start only after these jobs of yours end: ID[:ID...] waits for
    /// them to finish with exit 0 (afterok), afterany:ID[:ID] for them to
    /// end however they end; kinds comma-separated, as sbatch's
    /// --dependency. A job whose afterok job fails ends `cancelled`.
    #[arg(short = 'd', long, alias = "dependency", value_name = "DEPS", value_parser = dependencies)]
    after: Option<Deps>,
    /// Run as an array of tasks: 1-100, 0-20:2 (a step), 1,3,5, and %8
    /// after it to run at most 8 at once. Each task gets
    /// MEMGANG_ARRAY_TASK_ID (and SLURM_ARRAY_TASK_ID); `submit` prints
    /// the array's id, its first task's.
    #[arg(short, long, value_name = "INDEXES", value_parser = array)]
    array: Option<ArraySpec>,
}

impl QueueArgs {
    /// The options to send: sbatch's default output file unless one is
    /// given.
    pub fn options(self) -> QueueOptions {
        let default = if self.array.is_some() {
            "memgang-%A_%a.out"
        } else {
            "memgang-%j.out"
        };
        QueueOptions {
            output: self.output.or_else(|| Some(default.into())),
            error: self.error,
            time_limit_s: self.time,
            after: self.after.map(|d| d.0).unwrap_or_default(),
            array: self.array,
        }
    }
}

/// A time limit in seconds, as sbatch's `--time` takes it (a bare
/// number is minutes), or with a unit (`90s`, `2h`).
pub fn time_limit(s: &str) -> Result<u64, String> {
    let hint = "write MINUTES, MM:SS, HH:MM:SS, D-HH:MM:SS or e.g. 90s, 2h";
    let t = s.trim();
    let secs = if t.ends_with(|c: char| c.is_ascii_alphabetic()) {
        humantime::parse_duration(t)
            .map_err(|e| format!("{s:?}: {e}; {hint}"))?
            .as_secs()
    } else {
        let (days, rest) = match t.split_once('-') {
            Some((d, r)) => (Some(d), r),
            None => (None, t),
        };
        let num = |x: &str| {
            x.parse::<u64>()
                .map_err(|_| format!("{s:?} is not a time: {x:?} is no number; {hint}"))
        };
        let parts: Vec<u64> = rest.split(':').map(num).collect::<Result<_, _>>()?;
        let (d, h, m, sec) = match (days.map(num).transpose()?, parts.as_slice()) {
            (None, [m]) => (0, 0, *m, 0),
            (None, [m, s]) => (0, 0, *m, *s),
            (d, [h, m, s]) => (d.unwrap_or(0), *h, *m, *s),
            (Some(d), [h]) => (d, *h, 0, 0),
            (Some(d), [h, m]) => (d, *h, *m, 0),
            _ => return Err(format!("{s:?} is not a time; {hint}")),
        };
        d.checked_mul(86_400)
            .and_then(|x| x.checked_add(h.checked_mul(3600)?))
            .and_then(|x| x.checked_add(m.checked_mul(60)?))
            .and_then(|x| x.checked_add(sec))
            .ok_or_else(|| format!("{s:?} is too long a time; {hint}"))?
    };
    if secs == 0 {
        return Err(format!(
            "{s:?} is no time at all: give more than zero ({hint}), or leave --time out for no limit"
        ));
    }
    Ok(secs)
}

/// One `--after`'s dependencies (a type of its own: clap takes a `Vec`
/// for an option given many times).
#[derive(Clone, Debug, Default)]
pub struct Deps(pub Vec<Dependency>);

/// `ID[:ID]`, `afterok:ID[:ID]`, `afterany:ID`, comma-separated.
pub fn dependencies(s: &str) -> Result<Deps, String> {
    let hint = "write e.g. 12 or 12:13 (afterok) or afterany:12,afterok:13";
    let mut out = Vec::new();
    for part in s.split(',') {
        let (kind, ids) = match part.split_once(':') {
            Some(("afterok", ids)) => (DependencyKind::Afterok, ids),
            Some(("afterany", ids)) => (DependencyKind::Afterany, ids),
            Some((k, _)) if k.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                return Err(format!(
                    "{k:?} is not a dependency memgang knows (afterok, afterany); {hint}"
                ))
            }
            _ => (DependencyKind::Afterok, part),
        };
        for id in ids.split(':') {
            let id = id
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("{id:?} in {s:?} is not a job id; {hint}"))?;
            out.push(Dependency { id, kind });
        }
    }
    Ok(Deps(out))
}

/// `1-100%8`, `0-20:2`, `1,3,5%2`: the indexes (sorted, once each) and
/// the limit, at most [`MAX_ARRAY_TASKS`] tasks.
pub fn array(s: &str) -> Result<ArraySpec, String> {
    let hint = "write e.g. 1-100, 0-20:2 or 1,3,5, with %8 after it to run at most 8 at once";
    let (list, limit) = match s.split_once('%') {
        Some((l, n)) => (
            l,
            Some(
                n.parse::<u32>()
                    .map_err(|_| format!("%{n} in {s:?} is not a number; {hint}"))?,
            ),
        ),
        None => (s, None),
    };
    if limit == Some(0) {
        return Err(format!("{s:?}: %0 would run no task; give %1 or more"));
    }
    let num = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|_| format!("{x:?} in {s:?} is not an index (0 to {}); {hint}", u32::MAX))
    };
    let mut indexes = std::collections::BTreeSet::new();
    for part in list.split(',') {
        let (range, step) = match part.split_once(':') {
            Some((r, st)) => (r, num(st)?),
            None => (part, 1),
        };
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(range)?, num(range)?),
        };
        if a > b || step == 0 {
            return Err(format!("{part:?} in {s:?} is an empty range; {hint}"));
        }
        let n = u64::from(b - a) / u64::from(step) + 1;
        if n + indexes.len() as u64 > MAX_ARRAY_TASKS as u64 {
            return Err(format!(
                "{s:?} has more than {MAX_ARRAY_TASKS} tasks, the most in one array: split it"
            ));
        }
        indexes.extend((a..=b).step_by(step as usize));
    }
    Ok(ArraySpec {
        indexes: indexes.into_iter().collect(),
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_sbatch_writes_them() {
        assert_eq!(time_limit("10"), Ok(600));
        assert_eq!(time_limit("1:30"), Ok(90));
        assert_eq!(time_limit("1:00:05"), Ok(3605));
        assert_eq!(time_limit("2-1"), Ok(2 * 86_400 + 3600));
        assert_eq!(time_limit("1-0:0:1"), Ok(86_401));
        assert_eq!(time_limit("90s"), Ok(90));
        assert!(time_limit("0").unwrap_err().contains("no time at all"));
        assert!(time_limit("0s").unwrap_err().contains("no time at all"));
        assert!(time_limit("99999999999999999:00:00")
            .unwrap_err()
            .contains("too long"));
        assert!(time_limit("ten").unwrap_err().contains("write MINUTES"));
        assert!(time_limit("1:2:3:4").is_err());
    }

    #[test]
    fn dependencies_as_sbatch_spells_them() {
        let d = dependencies("3:4,afterany:5").unwrap().0;
        assert_eq!(d.len(), 3);
        assert_eq!(d[2].kind, DependencyKind::Afterany);
        assert_eq!(d[0].kind, DependencyKind::Afterok);
        assert!(dependencies("after:3")
            .unwrap_err()
            .contains("afterok, afterany"));
        assert!(dependencies("x").unwrap_err().contains("not a job id"));
    }

    #[test]
    fn arrays_and_their_limits() {
        let a = array("1-10%3").unwrap();
        assert_eq!(a.indexes, (1..=10).collect::<Vec<_>>());
        assert_eq!(a.limit, Some(3));
        assert_eq!(array("0-6:3,5").unwrap().indexes, vec![0, 3, 5, 6]);
        assert!(array("1-4294967295")
            .unwrap_err()
            .contains("more than 1000"));
        assert!(array("5-1").unwrap_err().contains("empty range"));
        assert!(array("1-3%0").unwrap_err().contains("%1 or more"));
        assert!(array("a").is_err());
    }
}
