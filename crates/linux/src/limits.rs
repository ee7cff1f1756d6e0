//! A user's resource limits as a login gives them, for a service (root)
//! that starts processes as that user: not the service's own limits
//! (a unit's `LimitMEMLOCK=infinity` must not reach users' jobs), but a
//! login's defaults with PAM's `/etc/security/limits.conf` and
//! `limits.d/*.conf` applied as `pam_limits` applies them: a line for the
//! user beats one for a group of theirs, which beats `*`; among equals
//! the later line wins; a soft limit above the hard one is cut to it.
//!
//! The parser is small and strict: a line it does not understand (an
//! unknown item, a value that is not a number, a domain form it does not
//! read) is left out with a warning, never half taken.

use std::path::Path;

/// Unlimited, as the kernel writes it.
pub const INFINITY: u64 = libc::RLIM_INFINITY;

/// One resource limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// `libc::RLIMIT_*`.
    pub resource: u32,
    pub soft: u64,
    pub hard: u64,
}

/// The resources, by their names in limits.conf, and the unit a value
/// is written in there (bytes per unit).
const ITEMS: &[(&str, u32, u64)] = &[
    ("core", libc::RLIMIT_CORE, 1024),
    ("data", libc::RLIMIT_DATA, 1024),
    ("fsize", libc::RLIMIT_FSIZE, 1024),
    ("memlock", libc::RLIMIT_MEMLOCK, 1024),
    ("nofile", libc::RLIMIT_NOFILE, 1),
    ("rss", libc::RLIMIT_RSS, 1024),
    ("stack", libc::RLIMIT_STACK, 1024),
    ("cpu", libc::RLIMIT_CPU, 60),
    ("nproc", libc::RLIMIT_NPROC, 1),
    ("as", libc::RLIMIT_AS, 1024),
    ("locks", libc::RLIMIT_LOCKS, 1),
    ("sigpending", libc::RLIMIT_SIGPENDING, 1),
    ("msgqueue", libc::RLIMIT_MSGQUEUE, 1),
    ("nice", libc::RLIMIT_NICE, 1),
    ("rtprio", libc::RLIMIT_RTPRIO, 1),
];

/// Items limits.conf has that are no resource limit of a process.
const NOT_RLIMITS: &[&str] = &[
    "maxlogins",
    "maxsyslogins",
    "priority",
    "chroot",
    "nonewprivs",
];

/// What a login gets before limits.conf: the kernel's defaults for a new
/// process tree, as systemd gives them to a session (`DefaultLimitNOFILE=
/// 1024:524288`, `DefaultLimitMEMLOCK=8M`), and RLIMIT_NPROC and
/// RLIMIT_SIGPENDING as the kernel sized them for init (`/proc/1/limits`,
/// else this process's own).
pub fn login_defaults() -> Vec<Limit> {
    let inf = |resource| Limit {
        resource,
        soft: INFINITY,
        hard: INFINITY,
    };
    let fixed = |resource, soft, hard| Limit {
        resource,
        soft,
        hard,
    };
    let mut out = vec![
        inf(libc::RLIMIT_CPU),
        inf(libc::RLIMIT_FSIZE),
        inf(libc::RLIMIT_DATA),
        fixed(libc::RLIMIT_STACK, 8 << 20, INFINITY),
        fixed(libc::RLIMIT_CORE, 0, INFINITY),
        inf(libc::RLIMIT_RSS),
        fixed(libc::RLIMIT_NOFILE, 1024, 524_288.min(nr_open())),
        inf(libc::RLIMIT_AS),
        inf(libc::RLIMIT_LOCKS),
        fixed(libc::RLIMIT_MEMLOCK, 8 << 20, 8 << 20),
        fixed(libc::RLIMIT_MSGQUEUE, 819_200, 819_200),
        fixed(libc::RLIMIT_NICE, 0, 0),
        fixed(libc::RLIMIT_RTPRIO, 0, 0),
        inf(libc::RLIMIT_RTTIME),
    ];
    let init = std::fs::read_to_string("/proc/1/limits").unwrap_or_default();
    for (resource, name) in [
        (libc::RLIMIT_NPROC, "Max processes"),
        (libc::RLIMIT_SIGPENDING, "Max pending signals"),
    ] {
        let (soft, hard) = init_limit(&init, name).unwrap_or_else(|| own(resource));
        out.push(Limit {
            resource,
            soft,
            hard,
        });
    }
    out
}

/// The largest RLIMIT_NOFILE the kernel takes.
fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

fn own(resource: u32) -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: INFINITY,
        rlim_max: INFINITY,
    };
    // SAFETY: getrlimit writes the struct given.
    unsafe { libc::getrlimit(resource as _, &mut r) };
    (r.rlim_cur, r.rlim_max)
}

/// A line of /proc/PID/limits: `Max processes  95000  95000  processes`.
fn init_limit(text: &str, name: &str) -> Option<(u64, u64)> {
    let rest = text.lines().find_map(|l| l.strip_prefix(name))?;
    let mut f = rest.split_whitespace();
    let v = |s: &str| match s {
        "unlimited" => Some(INFINITY),
        n => n.parse().ok(),
    };
    Some((v(f.next()?)?, v(f.next()?)?))
}

/// Who a line may be for, in pam_limits' order of precedence (lower
/// wins): the user by name or uid, a group of theirs, everyone.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Source {
    User,
    Group,
    All,
}

/// The user a login is for.
pub struct Login<'a> {
    pub name: &'a str,
    pub uid: u32,
    /// Their groups' names and gids (primary and supplementary).
    pub groups: &'a [(String, u32)],
}

/// Whether `domain` names `who`, and how closely.
fn matches(domain: &str, who: &Login) -> Result<Option<Source>, String> {
    let range = |spec: &str, id: u32| -> Result<bool, String> {
        let (lo, hi) = spec.split_once(':').ok_or("")?;
        let n = |s: &str| s.parse::<u32>().map_err(|_| format!("{s:?} is not an id"));
        let lo = if lo.is_empty() { 0 } else { n(lo)? };
        // `uid:` alone is that id only.
        let hi = if hi.is_empty() {
            if spec.starts_with(':') {
                u32::MAX
            } else {
                lo
            }
        } else {
            n(hi)?
        };
        Ok((lo..=hi).contains(&id))
    };
    Ok(if domain == "*" {
        Some(Source::All)
    } else if let Some(g) = domain.strip_prefix('@') {
        let hit = if g.contains(':') {
            let mut hit = false;
            for (_, gid) in who.groups {
                hit |= range(g, *gid)?;
            }
            hit
        } else {
            who.groups.iter().any(|(n, _)| n == g)
        };
        hit.then_some(Source::Group)
    } else if domain.starts_with('%') {
        // maxlogins' group form: no resource limit.
        None
    } else if domain.contains(':') {
        range(domain, who.uid)?.then_some(Source::User)
    } else {
        (domain == who.name).then_some(Source::User)
    })
}

/// A value as limits.conf writes it, in bytes (or the item's unit).
fn value(item: &str, text: &str, unit: u64) -> Result<u64, String> {
    if matches!(text, "unlimited" | "infinity" | "-1") {
        return Ok(INFINITY);
    }
    if item == "nice" {
        // A nice value, -20 to 19; the limit is 20 - nice.
        let n: i64 = text
            .parse()
            .map_err(|_| format!("{text:?} is not a nice value"))?;
        if !(-20..=19).contains(&n) {
            return Err(format!("nice {n} is not from -20 to 19"));
        }
        return Ok((20 - n) as u64);
    }
    let n: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number, unlimited or -1"))?;
    n.checked_mul(unit)
        .ok_or_else(|| format!("{text} is too large"))
}

/// Apply one file's lines for `who` to `limits` (with each limit's
/// source so far); warnings name the line.
fn apply(
    text: &str,
    file: &str,
    who: &Login,
    limits: &mut [(Limit, Option<Source>, Option<Source>)],
    warnings: &mut Vec<String>,
) {
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut warn =
            |why: String| warnings.push(format!("{file}:{}: {why}; line left out", n + 1));
        let f: Vec<&str> = line.split_whitespace().collect();
        let [domain, kind, item, val] = f[..] else {
            warn(format!("{line:?} is not `domain type item value`"));
            continue;
        };
        if NOT_RLIMITS.contains(&item) {
            continue;
        }
        let Some(&(_, resource, unit)) = ITEMS.iter().find(|(name, _, _)| *name == item) else {
            warn(format!("unknown item {item:?}"));
            continue;
        };
        let (soft, hard) = match kind {
            "soft" => (true, false),
            "hard" => (false, true),
            "-" => (true, true),
            k => {
                warn(format!("unknown type {k:?} (soft, hard or -)"));
                continue;
            }
        };
        let source = match matches(domain, who) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                warn(format!("domain {domain:?}: {e}"));
                continue;
            }
        };
        let v = match value(item, val, unit) {
            Ok(v) => v,
            Err(e) => {
                warn(e);
                continue;
            }
        };
        let Some((l, s_src, h_src)) = limits.iter_mut().find(|(l, ..)| l.resource == resource)
        else {
            continue;
        };
        if soft && s_src.is_none_or(|s| source <= s) {
            l.soft = v;
            *s_src = Some(source);
        }
        if hard && h_src.is_none_or(|s| source <= s) {
            l.hard = v;
            *h_src = Some(source);
        }
    }
}

/// `who`'s limits at login: `base` ([`login_defaults`]) with the files
/// of `dir` (`limits.conf`, then `limits.d/*.conf` in name order)
/// applied, each soft limit cut to its hard one; and what was left out.
pub fn login_limits(dir: &Path, who: &Login, base: Vec<Limit>) -> (Vec<Limit>, Vec<String>) {
    let mut limits: Vec<(Limit, Option<Source>, Option<Source>)> =
        base.into_iter().map(|l| (l, None, None)).collect();
    let mut warnings = Vec::new();
    let mut files = vec![dir.join("limits.conf")];
    if let Ok(d) = std::fs::read_dir(dir.join("limits.d")) {
        let mut more: Vec<_> = d
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "conf"))
            .collect();
        more.sort();
        files.extend(more);
    }
    for f in files {
        if let Ok(text) = std::fs::read_to_string(&f) {
            apply(
                &text,
                &f.display().to_string(),
                who,
                &mut limits,
                &mut warnings,
            );
        }
    }
    let out = limits
        .into_iter()
        .map(|(mut l, ..)| {
            l.soft = l.soft.min(l.hard);
            l
        })
        .collect();
    (out, warnings)
}

/// `limits` with RLIMIT_MEMLOCK, soft and hard, at most `cap`.
pub fn cap_memlock(limits: &mut [Limit], cap: u64) {
    for l in limits
        .iter_mut()
        .filter(|l| l.resource == libc::RLIMIT_MEMLOCK)
    {
        l.soft = l.soft.min(cap);
        l.hard = l.hard.min(cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(limits: &[Limit], resource: u32) -> (u64, u64) {
        let l = limits.iter().find(|l| l.resource == resource).unwrap();
        (l.soft, l.hard)
    }

    #[test]
    fn a_users_line_beats_a_groups_which_beats_everyones() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("limits.conf"),
            "# comment\n\
             *        soft nofile   4096\n\
             *        hard nofile   8192\n\
             @hpc     -    memlock  unlimited\n\
             alice    hard memlock  65536   # KiB\n\
             @hpc     soft stack    16384\n\
             1000:1999 soft core    1024\n\
             bob      soft nofile   99\n\
             *        -    maxlogins 4\n\
             @:100    hard nproc    50\n",
        )
        .unwrap();
        std::fs::create_dir(d.path().join("limits.d")).unwrap();
        std::fs::write(
            d.path().join("limits.d/90-late.conf"),
            "* soft nofile 2048\nalice - nice -5\nalice soft bogus 1\nalice soft nofile lots\n",
        )
        .unwrap();
        std::fs::write(d.path().join("limits.d/ignored.txt"), "* soft nofile 1\n").unwrap();
        let groups = [("alice".to_string(), 1000), ("hpc".to_string(), 2000)];
        let who = Login {
            name: "alice",
            uid: 1000,
            groups: &groups,
        };
        let (l, warnings) = login_limits(d.path(), &who, login_defaults());
        // `*` twice at the same rank: the later line wins.
        assert_eq!(get(&l, libc::RLIMIT_NOFILE), (2048, 8192));
        // Her own hard line beats her group's; the group's soft stays,
        // cut to the hard one.
        assert_eq!(get(&l, libc::RLIMIT_MEMLOCK), (64 << 20, 64 << 20));
        assert_eq!(get(&l, libc::RLIMIT_STACK).0, 16 << 20);
        assert_eq!(get(&l, libc::RLIMIT_CORE).0, 1 << 20);
        assert_eq!(get(&l, libc::RLIMIT_NICE).0, 25);
        // Not her gid range.
        assert_ne!(get(&l, libc::RLIMIT_NPROC).1, 50);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("90-late.conf:3") && warnings[0].contains("bogus"));
        assert!(warnings[1].contains("lots"));
        let mut l = l;
        cap_memlock(&mut l, 8 << 20);
        assert_eq!(get(&l, libc::RLIMIT_MEMLOCK), (8 << 20, 8 << 20));
        // Someone else: only `*`.
        let none = [("staff".to_string(), 50)];
        let carol = Login {
            name: "carol",
            uid: 3000,
            groups: &none,
        };
        let (l, _) = login_limits(d.path(), &carol, login_defaults());
        assert_eq!(get(&l, libc::RLIMIT_MEMLOCK), (8 << 20, 8 << 20));
        assert_eq!(get(&l, libc::RLIMIT_NPROC).1, 50);
        // No files: the defaults.
        let empty = tempfile::tempdir().unwrap();
        let (l, w) = login_limits(empty.path(), &carol, login_defaults());
        assert!(w.is_empty());
        assert_eq!(get(&l, libc::RLIMIT_STACK), (8 << 20, INFINITY));
        assert_eq!(get(&l, libc::RLIMIT_NOFILE).0, 1024);
    }

    #[test]
    fn bad_lines_are_left_out_whole() {
        for bad in [
            "alice soft",
            "alice sometimes nofile 10",
            "alice soft nofile 10x",
            "alice soft nice 40",
            "alice soft core 99999999999999999999",
            "x:y soft core 1",
        ] {
            let mut l: Vec<_> = login_defaults()
                .into_iter()
                .map(|l| (l, None, None))
                .collect();
            let before = l.clone();
            let mut w = Vec::new();
            let who = Login {
                name: "alice",
                uid: 1,
                groups: &[],
            };
            apply(bad, "f", &who, &mut l, &mut w);
            assert_eq!(w.len(), 1, "{bad}: {w:?}");
            assert_eq!(l, before, "{bad}");
        }
    }
}
