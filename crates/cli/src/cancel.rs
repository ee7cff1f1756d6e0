//! `memgang cancel`, as scancel: several ids (an array's id cancels its
//! tasks), or every job of yours in given states (`-t`) or of given users
//! (`-u`, root). The daemon checks each id against the caller: another
//! user's job reads as no job.

use crate::client::{ask, list, Filter};
use crate::out::{emit, note};
use anyhow::{bail, Result};
use memgang_proto::{JobInfo, Request};

/// The jobs to cancel: those named (and the tasks of named arrays), or
/// with no ids all of the caller's; kept if they match the filters.
pub fn targets(
    ids: &[u64],
    states: &[String],
    users: &[String],
    jobs: &[JobInfo],
) -> Result<Vec<u64>> {
    if ids.is_empty() && states.is_empty() && users.is_empty() {
        bail!("cancel what? give job ids, or -t STATE / -u USER to cancel every job of yours in those states or of those users");
    }
    let filter = Filter::new(states, users, false)?;
    let mut out: Vec<u64> = Vec::new();
    for j in jobs.iter().filter(|j| filter.keeps(j)) {
        let named = ids.contains(&j.id) || j.queue.array_id.is_some_and(|a| ids.contains(&a));
        if ids.is_empty() || named {
            out.push(j.id);
        }
    }
    // A named id the list does not hold: the daemon says why.
    for id in ids {
        if !out.contains(id) && !jobs.iter().any(|j| j.id == *id) {
            out.push(*id);
        }
    }
    if out.is_empty() {
        bail!("no job of yours in progress matches (see `memgang status`)");
    }
    out.sort_unstable();
    Ok(out)
}

/// Cancel each; an error for one does not stop the others. Ok(false) if
/// any was refused.
pub fn cancel(ids: &[u64], states: &[String], users: &[String]) -> Result<bool> {
    let jobs = list()?;
    let mut ok = true;
    for id in targets(ids, states, users, &jobs)? {
        match ask(&Request::Cancel { id }) {
            Ok(_) => emit(format!("cancelled {id}\n"))?,
            Err(e) => {
                note!("memgang: job {id}: {e:#}");
                ok = false;
            }
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgang_proto::JobState;

    fn job(id: u64, uid: u32, state: JobState, array: Option<u64>) -> JobInfo {
        let mut j = crate::client::tests::job(id, "a", state, None);
        j.uid = uid;
        j.queue.array_id = array;
        j
    }

    #[test]
    fn ids_arrays_states_and_users_pick_the_jobs() {
        let jobs = [
            job(1, 0, JobState::Running, None),
            job(2, 0, JobState::Queued, Some(2)),
            job(3, 0, JobState::Queued, Some(2)),
            job(4, 1000, JobState::Queued, None),
            job(5, 0, JobState::Finished, None),
        ];
        let t = |ids: &[u64], s: &[&str], u: &[&str]| {
            let s: Vec<String> = s.iter().map(|x| x.to_string()).collect();
            let u: Vec<String> = u.iter().map(|x| x.to_string()).collect();
            targets(ids, &s, &u, &jobs)
        };
        assert_eq!(t(&[2], &[], &[]).unwrap(), vec![2, 3]);
        assert_eq!(t(&[1, 3, 9], &[], &[]).unwrap(), vec![1, 3, 9]);
        assert_eq!(t(&[], &["PD"], &[]).unwrap(), vec![2, 3, 4]);
        assert_eq!(t(&[], &["queued"], &["1000"]).unwrap(), vec![4]);
        assert_eq!(t(&[], &[], &["0"]).unwrap(), vec![1, 2, 3]);
        assert!(t(&[], &[], &[])
            .unwrap_err()
            .to_string()
            .contains("cancel what?"));
        assert!(t(&[], &["CD"], &["1000"]).is_err());
    }
}
