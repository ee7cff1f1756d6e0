//! Paging prevention (paper 003 §3): a node service starts a job only when
//! the memory it has promised to the jobs it admitted, plus this job, fits
//! in the pool plus the swap the jobs may use. The policy may then page a
//! suspended job out, but it never has to page out more than swap holds,
//! so no scheduling decision leaves the kernel an OOM kill as its only way
//! out.
//!
//! Strict first come, first served: a job never overtakes an earlier one
//! that waits for memory (no backfilling), so a big job cannot starve;
//! but a job that could not start even on an empty node now (swap used
//! outside memgang has grown) is held out of the line until it could
//! ([`hold_unfitting`]), so that it blocks no one meanwhile.
//! Pure: the caller measures swap and hands in numbers.

use crate::capacity::{self, Set};
pub use crate::capacity::{refuse, Capacity};
use crate::units::format_bytes;

/// What [`admit`] decided for the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission<K> {
    /// Start these now, in this order.
    pub admit: Vec<K>,
    /// The rest of the queue, in order, each with why it waits.
    pub wait: Vec<(K, String)>,
}

/// Decide which queued jobs (`(key, declared bytes)`, in submission order)
/// start, given the declared bytes of the jobs admitted and still alive
/// (`held`): a job starts when it and every job admitted before it fit by
/// the capacity model, a switch's exchange included
/// ([`capacity::job_may_start`]). `cap` is what paging prevention may
/// promise ([`Capacity::promised`]).
pub fn admit<K: Copy>(queue: &[(K, u64)], held: &[u64], cap: &Capacity) -> Admission<K> {
    let mut out = Admission {
        admit: Vec::new(),
        wait: Vec::new(),
    };
    let mut set = Set::of(held);
    let mut blocked = false;
    for (i, &(key, bytes)) in queue.iter().enumerate() {
        let with = set.with(bytes);
        if !blocked && capacity::job_may_start(set, bytes, cap) {
            set = with;
            out.admit.push(key);
            continue;
        }
        let reason = if blocked {
            format!("waits its turn: {i} earlier job(s) wait for memory (first come, first served)")
        } else {
            format!(
                "waits for memory: needs {}, {} of {} promised to running jobs, {} more for a \
                 switch's exchange; {}",
                format_bytes(bytes),
                format_bytes(set.sum),
                format_bytes(cap.total()),
                format_bytes(capacity::exchange(with, cap)),
                cap.describe()
            )
        };
        blocked = true;
        out.wait.push((key, reason));
    }
    out
}

/// The queue in fair turns between users: each turn goes to the user
/// with the fewest jobs running plus already placed in this order; ties
/// to the user served least recently (`served`: each user's last start,
/// any key that grows with time; none: never), then to the user whose
/// next job was submitted first; it takes that user's next job. So a
/// user with 100 queued jobs and one with 1 alternate: the second user's
/// job is second, not 101st. `queue` is `(key, user)` in submission
/// order; `running` is each user's running jobs.
pub fn fair_order<K: Copy>(
    queue: &[(K, u32)],
    running: &[(u32, usize)],
    served: &[(u32, u64)],
) -> Vec<K> {
    use std::collections::{BTreeMap, VecDeque};
    // Each user's jobs in order, as queue positions.
    let mut per_user: BTreeMap<u32, VecDeque<usize>> = BTreeMap::new();
    for (i, &(_, u)) in queue.iter().enumerate() {
        per_user.entry(u).or_default().push_back(i);
    }
    let mut load: BTreeMap<u32, usize> = per_user.keys().map(|&u| (u, 0)).collect();
    for &(u, n) in running {
        if let Some(l) = load.get_mut(&u) {
            *l += n;
        }
    }
    let mut last: BTreeMap<u32, Option<u64>> = per_user.keys().map(|&u| (u, None)).collect();
    for &(u, t) in served {
        if let Some(l) = last.get_mut(&u) {
            *l = (*l).max(Some(t));
        }
    }
    let mut out = Vec::with_capacity(queue.len());
    let mut turn = u64::MAX - queue.len() as u64;
    while out.len() < queue.len() {
        let (&user, _) = per_user
            .iter()
            .filter_map(|(u, q)| Some((u, (load[u], last[u], *q.front()?))))
            .min_by_key(|(_, k)| *k)
            .expect("a job is left");
        let i = per_user
            .get_mut(&user)
            .and_then(VecDeque::pop_front)
            .expect("non-empty");
        *load.get_mut(&user).expect("known") += 1;
        // Placed now: served after anything before.
        turn += 1;
        last.insert(user, Some(turn));
        out.push(queue[i].0);
    }
    out
}

/// The queued jobs (`(key, declared bytes)`, in submission order) that
/// could not start now even on an empty node ([`capacity::set_may_run`]
/// of the job alone against `cap`: what is promised now, less swap used
/// outside memgang, which comes and goes), each with why; and the rest of
/// the queue, for [`admit`]. A held job is left out of the first come,
/// first served line, so that it does not block every job behind it
/// while it cannot run anyway; as soon as it could start alone it is in
/// the line again at its own place, ahead of every later job, so none
/// passes it from then on (it cannot starve).
#[allow(clippy::type_complexity)]
pub fn hold_unfitting<K: Copy>(
    queue: &[(K, u64)],
    cap: &Capacity,
) -> (Vec<(K, u64)>, Vec<(K, String)>) {
    let (mut line, mut held) = (Vec::new(), Vec::new());
    for &(key, bytes) in queue {
        if capacity::set_may_run(Set::of(&[bytes]), cap) {
            line.push((key, bytes));
        } else {
            held.push((
                key,
                format!(
                    "held: needs {}, more than the node can promise now even with no job \
                     running ({}); later jobs go first until it fits",
                    format_bytes(bytes),
                    cap.describe()
                ),
            ));
        }
    }
    (line, held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{experiment_may_run, Holding};
    use crate::PolicyKind;

    const G: u64 = 1 << 30;

    fn cap(pool: u64, swap: u64) -> Capacity {
        Capacity::measured(pool, swap, 0, 0, 0)
    }

    #[test]
    fn admits_while_pool_plus_swap_holds_the_jobs_and_their_exchange() {
        // 1G + 1G + an exchange of 1G fits in 1G + 2G; a third does not.
        let a = admit(&[(1, G), (2, G), (3, G)], &[], &cap(G, 2 * G));
        assert_eq!(a.admit, vec![1, 2]);
        assert_eq!(a.wait.len(), 1);
        assert!(
            a.wait[0]
                .1
                .starts_with("waits for memory: needs 1G, 2G of 3G")
                && a.wait[0].1.contains("1G more for a switch's exchange"),
            "{}",
            a.wait[0].1
        );
        // Without swap for the exchange, the second waits.
        let a = admit(&[(1, G), (2, G)], &[], &cap(G, G));
        assert_eq!(a.admit, vec![1]);
    }

    #[test]
    fn users_take_turns_whatever_their_queue_length() {
        // User 1 queued 20 jobs first, user 2 one job after them.
        let mut q: Vec<(u32, u32)> = (0..20).map(|k| (k, 1)).collect();
        q.push((100, 2));
        let o = fair_order(&q, &[], &[]);
        assert_eq!(o.len(), 21);
        assert_eq!(&o[..3], &[0, 100, 1]);
        // One job at a time: user 1 was served last, so user 2 is next.
        assert_eq!(fair_order(&q, &[], &[(1, 7)])[0], 100);
        assert_eq!(fair_order(&q, &[], &[(1, 7), (2, 8)])[0], 0);
        // User 2 already runs two jobs: user 1 gets two turns first, then
        // they alternate.
        q.push((101, 2));
        let o = fair_order(&q, &[(2, 2), (3, 9)], &[]);
        assert_eq!(&o[..5], &[0, 1, 100, 2, 101]);
        // Alone, a user keeps submission order.
        assert_eq!(fair_order(&[(5, 7), (3, 7)], &[], &[]), vec![5, 3]);
    }

    #[test]
    fn strict_fcfs_no_backfilling() {
        // 3 would fit beside 1 but must not overtake 2.
        let a = admit(&[(1, G), (2, 3 * G), (3, G / 2)], &[], &cap(G, 2 * G));
        assert_eq!(a.admit, vec![1]);
        assert_eq!(a.wait.iter().map(|w| w.0).collect::<Vec<_>>(), vec![2, 3]);
        assert!(a.wait[1].1.contains("first come, first served"));
    }

    #[test]
    fn memory_held_by_running_jobs_counts() {
        // Held 2G (two jobs of 1G) and 1G more, exchange 1G: 4G.
        let a = admit(&[(1, G)], &[G, G], &cap(G, 3 * G));
        assert_eq!(a.admit, vec![1]);
        let a = admit(&[(1, G)], &[G, G + 1], &cap(G, 3 * G));
        assert!(a.admit.is_empty());
    }

    const M: u64 = 1 << 20;

    /// How memgangd judges a set of jobs submitted at once to an idle
    /// node: refused at submit, some wait, or all start at once.
    #[derive(Debug, PartialEq)]
    enum Daemon {
        Refused,
        SomeWait,
        AllStart,
    }

    /// As memgangd does: each job through [`refuse`] at submit, then the
    /// queue through [`admit`], both against what it may promise.
    fn memgangd(jobs: &[u64], room: Capacity, policy: PolicyKind) -> Daemon {
        let cap = room.promised(Holding::of(policy));
        if jobs.iter().any(|&b| refuse(b, &cap).is_some()) {
            return Daemon::Refused;
        }
        let queue: Vec<(usize, u64)> = jobs.iter().copied().enumerate().collect();
        if admit(&queue, &[], &cap).wait.is_empty() {
            Daemon::AllStart
        } else {
            Daemon::SomeWait
        }
    }

    /// As `memgang run` does (`check_pool`): true if the experiment runs.
    fn memgang_run(jobs: &[u64], room: Capacity, policy: PolicyKind) -> bool {
        experiment_may_run(jobs, &room, Holding::of(policy)).is_ok()
    }

    /// The same job sets through both entry points' rules: alike under
    /// the switching policies, and different only where the module doc of
    /// `capacity` says they mean to be (cosched: memgangd prevents paging;
    /// batch: memgangd promises memory from admission).
    #[test]
    fn memgang_run_and_memgangd_judge_alike_but_where_they_mean_to_differ() {
        use Daemon::*;
        use PolicyKind::*;
        // Pool 256M, swap 320M less the 64M reserve: 512M of room.
        let room = Capacity::measured(256 * M, 320 * M, 0, 0, 64 * M);
        let switching = [Gang, Hybrid, Auto];
        #[rustfmt::skip]
        let table: &[(&[u64], &[PolicyKind], bool, Daemon)] = &[
            // jobs (MiB)     policies    memgang run  memgangd
            (&[100, 100],      &[Batch, Cosched, Gang, Hybrid, Auto], true, AllStart),
            (&[600],           &[Batch, Cosched, Gang, Hybrid, Auto], false, Refused),
            // 420M and 210M read back at a switch: more than 512M.
            (&[210, 210],      &switching, false, SomeWait),
            (&[300],           &switching, true, AllStart),
            (&[100, 100, 100], &switching, true, AllStart),
            // Cosched: memgang run counts swap (it measures the paging),
            // memgangd the pool alone (it prevents it).
            (&[210, 210],      &[Cosched], true, SomeWait),
            (&[300],           &[Cosched], true, Refused),
            (&[100, 100, 100], &[Cosched], true, SomeWait),
            // Batch: one at a time for memgang run; memgangd promises
            // memory from admission, so the second waits in its queue.
            (&[210, 210],      &[Batch], true, SomeWait),
            (&[300],           &[Batch], true, AllStart),
        ];
        for (jobs, policies, run, daemon) in table {
            let jobs: Vec<u64> = jobs.iter().map(|m| m * M).collect();
            for &p in *policies {
                let why = format!("{jobs:?} under {p}");
                assert_eq!(memgang_run(&jobs, room, p), *run, "memgang run, {why}");
                assert_eq!(memgangd(&jobs, room, p), *daemon, "memgangd, {why}");
            }
        }
        // Over every small node and set: what memgangd starts at once,
        // memgang run runs; under the switching policies the converse too.
        for pool in 1..8u64 {
            for swap in 0..8u64 {
                let room = Capacity::measured(pool, swap, 0, 0, 1);
                for a in 1..8u64 {
                    for b in 0..8u64 {
                        for c in 0..8u64 {
                            let jobs: Vec<u64> = [a, b, c].into_iter().filter(|&j| j > 0).collect();
                            for p in PolicyKind::ALL {
                                let run = memgang_run(&jobs, room, p);
                                let all = memgangd(&jobs, room, p) == AllStart;
                                let why = format!("pool {pool} swap {swap} {jobs:?} {p}");
                                assert!(run || !all, "{why}");
                                if Holding::of(p) == Holding::Parked {
                                    assert_eq!(run, all, "{why}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// A job that cannot start even alone, for swap used outside
    /// memgang, is held out of the line: the jobs behind it start. Once
    /// it fits alone it is back at its place, and later jobs wait behind
    /// it again.
    #[test]
    fn a_job_that_cannot_start_alone_blocks_no_one() {
        let mut c = Capacity {
            pool_bytes: G,
            swap_total_bytes: 2 * G,
            swap_used_elsewhere_bytes: G,
            swap_reserve_bytes: 0,
        };
        let queue = [(1, 3 * G), (2, G / 2), (3, G / 2)];
        let (line, held) = hold_unfitting(&queue, &c);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].0, 1);
        assert!(held[0].1.starts_with("held: needs 3G"), "{}", held[0].1);
        assert_eq!(admit(&line, &[], &c).admit, vec![2, 3]);
        // The swap comes free: job 1 fits alone, and is first in line.
        c.swap_used_elsewhere_bytes = 0;
        let (line, held) = hold_unfitting(&queue, &c);
        assert!(held.is_empty());
        let a = admit(&line, &[G / 2], &c);
        assert!(a.admit.is_empty(), "{a:?}");
        assert!(a.wait[1].1.contains("first come, first served"));
    }

    #[test]
    fn reserve_and_foreign_swap_are_not_usable() {
        let c = Capacity {
            pool_bytes: G,
            swap_total_bytes: 4 * G,
            swap_used_elsewhere_bytes: G,
            swap_reserve_bytes: G,
        };
        assert_eq!(c.total(), 3 * G);
        assert_eq!(admit(&[(1, 3 * G)], &[], &c).admit, vec![1]);
        assert!(admit(&[(1, 3 * G + 1)], &[], &c).admit.is_empty());
    }
}
