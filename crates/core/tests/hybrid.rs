//! `hybrid` and `auto` driven through the Scheduler: sets that fit in the
//! pool, set switches, re-packing, overlap policies.

use memgang_core::{
    Action, Cluster, Event, JobId, JobSpec, Overlap, PageInPlan, PageOutPlan, PolicyKind,
    Scheduler, Switching,
};
use std::time::Duration;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// Jobs of these declared sizes (MiB), all arriving at 0, in a 1 GiB pool
/// on one 2-CPU node, quantum 10 s.
fn sched(kind: PolicyKind, overlap: Overlap, mib: &[u64]) -> Scheduler {
    let jobs = mib
        .iter()
        .enumerate()
        .map(|(i, m)| JobSpec {
            name: format!("j{i}"),
            ranks: 1,
            memory_bytes: Some(m * MIB),
            arrival: s(0),
        })
        .collect();
    Scheduler::new(
        Cluster::uniform(1, 2, GIB),
        jobs,
        kind.build_with(s(10), Switching::LRU, overlap),
    )
}

fn hybrid(mib: &[u64]) -> Scheduler {
    sched(PolicyKind::Hybrid, Overlap::Sequential, mib)
}

/// "start j0", "suspend j1", "resume j2", "pagein j3".
fn show(sc: &Scheduler, actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| {
            let verb = match a {
                Action::Start { .. } => "start",
                Action::Suspend { .. } => "suspend",
                Action::Resume { .. } => "resume",
                Action::PageIn { .. } => "pagein",
                other => panic!("hybrid does not ask for {other:?}"),
            };
            format!("{verb} {}", sc.state().job(a.job()).spec.name)
        })
        .collect()
}

fn adv(sc: &mut Scheduler, t: Duration) -> Vec<String> {
    let a = sc.advance(t);
    show(sc, &a)
}

#[test]
fn hybrid_coschedules_what_fits_and_rotates_the_sets() {
    // Five jobs of ~20% of the pool: four fit (4 x 204M <= 960M).
    let mut sc = hybrid(&[200, 200, 200, 200, 200]);
    let a = sc.advance(s(0));
    assert_eq!(
        show(&sc, &a),
        ["start j0", "start j1", "start j2", "start j3"]
    );
    assert_eq!(sc.next_wakeup(), Some(s(10)));
    let a = sc.advance(s(10));
    assert_eq!(
        show(&sc, &a),
        [
            "suspend j0",
            "suspend j1",
            "suspend j2",
            "suspend j3",
            "start j4"
        ]
    );
    // The outgoing set leaves memory completely, recorded for its return.
    assert!(a.iter().all(|x| match x {
        Action::Suspend { page_out, .. } => *page_out == PageOutPlan::Aggressive { record: true },
        _ => true,
    }));
    // The quantum starts when the switch is done.
    assert!(sc
        .handle(s(13), Event::SwitchDone { took: s(3) })
        .is_empty());
    assert_eq!(sc.next_wakeup(), Some(s(23)));
    let a = sc.advance(s(23));
    assert_eq!(
        show(&sc, &a),
        [
            "suspend j4",
            "resume j0",
            "resume j1",
            "resume j2",
            "resume j3"
        ]
    );
    assert!(a.iter().all(|x| match x {
        Action::Resume { page_in, .. } => *page_in == PageInPlan::Recorded,
        _ => true,
    }));
}

#[test]
fn a_job_larger_than_the_pool_runs_alone() {
    let mut sc = hybrid(&[2048, 100, 100]);
    let a = sc.advance(s(0));
    assert_eq!(show(&sc, &a), ["start j0"]);
    let a = sc.advance(s(10));
    assert_eq!(show(&sc, &a), ["suspend j0", "start j1", "start j2"]);
}

#[test]
fn auto_is_cosched_when_everything_fits() {
    let mut auto = sched(PolicyKind::Auto, Overlap::Sequential, &[300, 300, 300]);
    let mut co = sched(PolicyKind::Cosched, Overlap::Sequential, &[300, 300, 300]);
    let (a, c) = (auto.advance(s(0)), co.advance(s(0)));
    assert_eq!(a, c);
    assert_eq!(show(&auto, &a), ["start j0", "start j1", "start j2"]);
    // No timer: nothing to switch to, nothing wakes up.
    assert_eq!(auto.next_wakeup(), None);
    for j in 0..3 {
        let t = s(5 + j);
        assert_eq!(
            auto.handle(t, Event::JobFinished(JobId(j as u32))),
            co.handle(t, Event::JobFinished(JobId(j as u32)))
        );
    }
    assert!(auto.all_finished());
}

#[test]
fn auto_switches_to_sets_when_jobs_do_not_fit() {
    let mut sc = sched(PolicyKind::Auto, Overlap::Sequential, &[600, 600]);
    assert_eq!(adv(&mut sc, s(0)), ["start j0"]);
    assert_eq!(sc.next_wakeup(), Some(s(10)));
}

#[test]
fn a_job_grown_past_its_estimate_is_repacked() {
    // Declared 300M each, they run together until j1 measures 800M.
    let mut sc = hybrid(&[300, 300]);
    assert_eq!(adv(&mut sc, s(0)), ["start j0", "start j1"]);
    assert_eq!(sc.next_wakeup(), None);
    // Growth that still fits changes nothing.
    let a = sc.handle(
        s(1),
        Event::JobMemory {
            job: JobId(1),
            peak_bytes: 400 * MIB,
            resident_bytes: 400 * MIB,
        },
    );
    assert!(a.is_empty());
    let a = sc.handle(
        s(2),
        Event::JobMemory {
            job: JobId(1),
            peak_bytes: 800 * MIB,
            resident_bytes: 800 * MIB,
        },
    );
    // The set with most of the running memory (j1's) keeps running.
    assert_eq!(show(&sc, &a), ["suspend j0"]);
    sc.handle(s(3), Event::SwitchDone { took: s(1) });
    assert_eq!(sc.next_wakeup(), Some(s(13)));
    assert_eq!(adv(&mut sc, s(13)), ["suspend j1", "resume j0"]);
}

#[test]
fn a_finished_job_lets_the_sets_merge() {
    // [j0 j1] [j2]; j0 ends: j1 and j2 fit together and run at once.
    let mut sc = hybrid(&[400, 400, 400]);
    assert_eq!(adv(&mut sc, s(0)), ["start j0", "start j1"]);
    let a = sc.handle(s(4), Event::JobFinished(JobId(0)));
    assert_eq!(show(&sc, &a), ["start j2"]);
    assert_eq!(sc.next_wakeup(), None, "one set: no quantum");
}

#[test]
fn when_the_running_set_empties_the_next_runs_at_once() {
    let mut sc = hybrid(&[600, 600]);
    sc.advance(s(0));
    let a = sc.handle(s(4), Event::JobFinished(JobId(0)));
    assert_eq!(show(&sc, &a), ["start j1"]);
    assert_eq!(sc.next_wakeup(), None);
}

#[test]
fn a_late_arrival_joins_the_running_set_when_it_fits() {
    let mut sc = Scheduler::new(
        Cluster::uniform(1, 2, GIB),
        vec![
            JobSpec {
                name: "big".into(),
                ranks: 2,
                memory_bytes: Some(600 * MIB),
                arrival: s(0),
            },
            JobSpec {
                name: "small".into(),
                ranks: 1,
                memory_bytes: Some(100 * MIB),
                arrival: s(5),
            },
            JobSpec {
                name: "mid".into(),
                ranks: 1,
                memory_bytes: Some(400 * MIB),
                arrival: s(6),
            },
        ],
        PolicyKind::Hybrid.build(s(10), Switching::LRU),
    );
    assert_eq!(adv(&mut sc, s(0)), ["start big"]);
    assert_eq!(adv(&mut sc, s(5)), ["start small"]);
    assert!(sc.advance(s(6)).is_empty(), "mid does not fit beside them");
    assert_eq!(sc.next_wakeup(), Some(s(16)));
    assert_eq!(
        adv(&mut sc, s(16)),
        ["suspend big", "suspend small", "start mid"]
    );
}

#[test]
fn overlapped_resumes_with_concurrent_page_in() {
    let mut sc = sched(PolicyKind::Hybrid, Overlap::Overlapped, &[600, 600]);
    sc.advance(s(0));
    sc.advance(s(10));
    sc.handle(s(11), Event::SwitchDone { took: s(1) });
    let a = sc.advance(s(21));
    assert_eq!(show(&sc, &a), ["suspend j1", "resume j0"]);
    assert!(matches!(
        a[1],
        Action::Resume {
            page_in: PageInPlan::Overlapped,
            ..
        }
    ));
}

#[test]
fn prefetch_pages_the_next_set_in_before_the_quantum_ends() {
    let mut sc = sched(PolicyKind::Hybrid, Overlap::Prefetch, &[600, 600]);
    sc.advance(s(0));
    // No switch measured yet: no prediction, no prefetch.
    assert_eq!(sc.next_wakeup(), Some(s(10)));
    assert_eq!(adv(&mut sc, s(10)), ["suspend j0", "start j1"]);
    sc.handle(s(12), Event::SwitchDone { took: s(2) });
    // Quantum 12..22, predicted switch 2 s: prefetch at 20.
    assert_eq!(sc.next_wakeup(), Some(s(20)));
    assert_eq!(adv(&mut sc, s(20)), ["pagein j0"]);
    assert_eq!(sc.next_wakeup(), Some(s(22)));
    assert_eq!(adv(&mut sc, s(22)), ["suspend j1", "resume j0"]);
    // The prediction is the mean of the switches so far: (2 + 4) / 2.
    sc.handle(s(26), Event::SwitchDone { took: s(4) });
    assert_eq!(sc.next_wakeup(), Some(s(33)));
}

#[test]
fn overlap_names_parse() {
    for o in Overlap::ALL {
        assert_eq!(o.name().parse::<Overlap>(), Ok(o));
    }
    assert!("eager"
        .parse::<Overlap>()
        .unwrap_err()
        .contains("sequential"));
    assert_eq!("hybrid".parse::<PolicyKind>(), Ok(PolicyKind::Hybrid));
    assert_eq!("auto".parse::<PolicyKind>(), Ok(PolicyKind::Auto));
}
