//! Policy behaviour driven through the Scheduler, with time as plain values.

use memgang_core::metrics::{fairness, mean_std, switching_overhead};
use memgang_core::{
    Action, Cluster, Event, JobId, JobSpec, JobStatus, NodeId, Overlap, PageInPlan, PageOutPlan,
    PolicyKind, Quantum, Scheduler, Switching,
};
use std::time::Duration;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

fn jobs(arrivals: &[u64]) -> Vec<JobSpec> {
    arrivals
        .iter()
        .enumerate()
        .map(|(i, a)| JobSpec {
            name: format!("j{i}"),
            ranks: 1,
            memory_bytes: None,
            arrival: s(*a),
            placed: None,
        })
        .collect()
}

fn sched(kind: PolicyKind, nodes: u32, arrivals: &[u64]) -> Scheduler {
    Scheduler::new(
        Cluster::uniform(nodes, 2, GIB),
        jobs(arrivals),
        kind.build(s(10), Switching::LRU),
    )
}

/// Actions rendered compactly: "start j0", "suspend j1", "resume j2",
/// "room j0 from j2,j1".
fn show(s: &Scheduler, actions: &[Action]) -> Vec<String> {
    let name = |j: JobId| s.state().job(j).spec.name.clone();
    actions
        .iter()
        .map(|a| {
            let verb = match a {
                Action::Start { .. } => "start",
                Action::Suspend { .. } => "suspend",
                Action::Resume { .. } => "resume",
                Action::Protect { on: true, .. } => "protect",
                Action::Protect { on: false, .. } => "unprotect",
                Action::MakeRoom { from, .. } => {
                    let from: Vec<String> = from.iter().map(|j| name(*j)).collect();
                    return format!("room {} from {}", name(a.job()), from.join(","));
                }
                Action::WriteBack { .. } => "writeback",
                Action::PageIn { .. } => "pagein",
                Action::Boost { .. } => "boost",
                Action::Defer { .. } => "defer",
            };
            format!("{verb} {}", name(a.job()))
        })
        .collect()
}

#[test]
fn batch_runs_one_job_at_a_time_in_arrival_order() {
    let mut sc = sched(PolicyKind::Batch, 1, &[0, 0, 5]);
    let a = sc.advance(s(0));
    assert_eq!(show(&sc, &a), ["start j0"]);
    assert_eq!(sc.next_wakeup(), Some(s(5)));
    assert!(sc.advance(s(5)).is_empty(), "j2 waits behind j1");
    let a = sc.handle(s(7), Event::JobFinished(JobId(0)));
    assert_eq!(show(&sc, &a), ["start j1"]);
    let a = sc.handle(s(9), Event::JobFinished(JobId(1)));
    assert_eq!(show(&sc, &a), ["start j2"]);
    sc.handle(s(12), Event::JobFinished(JobId(2)));
    assert!(sc.all_finished());
    assert_eq!(sc.next_wakeup(), None);
}

#[test]
fn batch_fills_idle_nodes_without_overtaking() {
    let mut sc = Scheduler::new(
        Cluster::uniform(2, 2, GIB),
        vec![
            JobSpec {
                name: "wide".into(),
                ranks: 4,
                memory_bytes: None,
                arrival: s(0),
                placed: None,
            },
            JobSpec {
                name: "wide2".into(),
                ranks: 4,
                memory_bytes: None,
                arrival: s(0),
                placed: None,
            },
            JobSpec {
                name: "small".into(),
                ranks: 1,
                memory_bytes: None,
                arrival: s(0),
                placed: None,
            },
        ],
        PolicyKind::Batch.build(s(10), Switching::LRU),
    );
    let a = sc.advance(s(0));
    assert_eq!(show(&sc, &a), ["start wide"]);
    let a = sc.handle(s(3), Event::JobFinished(JobId(0)));
    assert_eq!(
        show(&sc, &a),
        ["start wide2"],
        "small must not overtake wide2"
    );
    let a = sc.handle(s(4), Event::JobFinished(JobId(1)));
    assert_eq!(show(&sc, &a), ["start small"]);
}

#[test]
fn cosched_starts_everything_and_spreads_load() {
    let mut sc = sched(PolicyKind::Cosched, 2, &[0, 0, 0]);
    let a = sc.advance(s(0));
    assert_eq!(show(&sc, &a), ["start j0", "start j1", "start j2"]);
    let nodes: Vec<_> = sc.state().jobs().iter().map(|j| j.nodes[0].0).collect();
    assert_eq!(nodes, [0, 1, 0]);
    assert_eq!(sc.next_wakeup(), None, "cosched never time-slices");
}

#[test]
fn gang_rotates_round_robin_every_quantum() {
    let mut sc = sched(PolicyKind::Gang, 1, &[0, 0, 0]);
    let a = sc.advance(s(0));
    assert_eq!(show(&sc, &a), ["start j0"]);
    assert_eq!(sc.next_wakeup(), Some(s(10)));
    assert!(
        sc.advance(s(9)).is_empty(),
        "no switch before the quantum ends"
    );
    let a = sc.advance(s(10));
    assert_eq!(show(&sc, &a), ["suspend j0", "start j1"]);
    let a = sc.advance(s(20));
    assert_eq!(show(&sc, &a), ["suspend j1", "start j2"]);
    let a = sc.advance(s(30));
    assert_eq!(show(&sc, &a), ["suspend j2", "resume j0"]);
    let running: Vec<_> = sc
        .state()
        .with_status(JobStatus::Running)
        .map(|j| j.id)
        .collect();
    assert_eq!(running, [JobId(0)]);
}

#[test]
fn gang_gives_the_next_slot_a_fresh_quantum_when_the_running_job_ends() {
    let mut sc = sched(PolicyKind::Gang, 1, &[0, 0]);
    sc.advance(s(0));
    let a = sc.handle(s(4), Event::JobFinished(JobId(0)));
    assert_eq!(show(&sc, &a), ["start j1"]);
    assert_eq!(sc.next_wakeup(), Some(s(14)));
    assert!(sc.advance(s(14)).is_empty(), "a lone job is not switched");
    sc.handle(s(20), Event::JobFinished(JobId(1)));
    assert!(sc.all_finished());
    assert_eq!(sc.next_wakeup(), None);
}

#[test]
fn gang_packs_rows_by_node_and_keeps_ranks_together() {
    // Two nodes: j0 and j1 take one node each in slot 0; j2 needs both.
    let mut sc = Scheduler::new(
        Cluster::uniform(2, 2, GIB),
        vec![
            JobSpec {
                name: "a".into(),
                ranks: 2,
                memory_bytes: None,
                arrival: s(0),
                placed: None,
            },
            JobSpec {
                name: "b".into(),
                ranks: 1,
                memory_bytes: None,
                arrival: s(0),
                placed: None,
            },
            JobSpec {
                name: "wide".into(),
                ranks: 3,
                memory_bytes: None,
                arrival: s(0),
                placed: None,
            },
        ],
        PolicyKind::Gang.build(s(10), Switching::LRU),
    );
    let a = sc.advance(s(0));
    assert_eq!(show(&sc, &a), ["start a", "start b"]);
    let a = sc.advance(s(10));
    assert_eq!(show(&sc, &a), ["suspend a", "suspend b", "start wide"]);
    assert_eq!(sc.state().job(JobId(2)).nodes.len(), 2);
}

#[test]
fn gang_late_arrival_waits_for_its_slot() {
    let mut sc = sched(PolicyKind::Gang, 1, &[0, 15]);
    sc.advance(s(0));
    assert!(
        sc.advance(s(10)).is_empty(),
        "alone: quantum renewed without a switch"
    );
    assert_eq!(sc.next_wakeup(), Some(s(15)));
    assert!(sc.advance(s(15)).is_empty());
    assert_eq!(sc.state().job(JobId(1)).status, JobStatus::Queued);
    let a = sc.advance(s(20));
    assert_eq!(show(&sc, &a), ["suspend j0", "start j1"]);
}

#[test]
fn advance_delivers_overdue_events_in_time_order() {
    // The executor woke late, at 25 s: the quantum at 10 s switched to j1,
    // and the one at 20 s back to j0.
    let mut sc = sched(PolicyKind::Gang, 1, &[0, 0]);
    sc.advance(s(0));
    let a = sc.advance(s(25));
    assert_eq!(
        show(&sc, &a),
        ["suspend j0", "start j1", "suspend j1", "resume j0"]
    );
    assert_eq!(sc.next_wakeup(), Some(s(30)));
}

#[test]
fn fairness_is_makespan_over_std_of_completion_times() {
    assert_eq!(fairness(100.0, &[50.0, 100.0]), Some(4.0));
    assert_eq!(fairness(100.0, &[100.0, 100.0]), None);
    assert_eq!(fairness(100.0, &[100.0]), None);
    let (mean, std) = mean_std(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
    assert_eq!((mean, std), (5.0, 2.0));
}

#[test]
fn switching_overhead_is_the_fraction_of_time_not_spent_on_the_work() {
    assert_eq!(switching_overhead(200.0, 100.0), Some(0.5));
    assert_eq!(switching_overhead(100.0, 100.0), Some(0.0));
    assert_eq!(switching_overhead(80.0, 100.0), Some(-0.25));
    assert_eq!(switching_overhead(0.0, 100.0), None);
}

#[test]
fn policy_names_parse() {
    for k in PolicyKind::ALL {
        assert_eq!(k.name().parse::<PolicyKind>(), Ok(k));
    }
    assert!("fifo"
        .parse::<PolicyKind>()
        .unwrap_err()
        .contains("batch, cosched, gang, hybrid, auto"));
}

#[test]
fn gang_quantum_starts_when_the_switch_is_done() {
    let mut sc = sched(PolicyKind::Gang, 1, &[0, 0]);
    sc.advance(s(0));
    sc.advance(s(10));
    // The executor took 3 s to page j0 out and j1 in.
    let a = sc.handle(s(13), Event::SwitchDone { took: s(3) });
    assert!(a.is_empty());
    assert_eq!(
        sc.next_wakeup(),
        Some(s(23)),
        "j1 gets a full quantum of running"
    );
}

/// Two 800 MiB jobs on one 1 GiB node (they take turns), under `kind`
/// with a 10 s quantum that grows to keep switching at most 10%.
fn pair_with_growing_quantum(kind: PolicyKind) -> Scheduler {
    let quantum = Quantum {
        length: s(10),
        max_switch_share: Some(0.1),
    };
    Scheduler::new(
        Cluster::uniform(1, 2, GIB),
        jobs(&[0, 0])
            .into_iter()
            .map(|j| JobSpec {
                memory_bytes: Some(800 * MIB),
                ..j
            })
            .collect(),
        kind.build(quantum, Switching::LRU),
    )
}

#[test]
fn a_gang_quantum_grows_to_pay_for_a_dear_switch() {
    for kind in [PolicyKind::Gang, PolicyKind::Hybrid] {
        let mut sc = pair_with_growing_quantum(kind);
        sc.advance(s(0));
        sc.advance(s(10));
        // 3 s of switching: 27 s of quantum keep it to 10% (3 / 30).
        sc.handle(s(13), Event::SwitchDone { took: s(3) });
        assert_eq!(sc.next_wakeup(), Some(s(40)), "{kind}");
        // A cheap switch: back to the length set.
        sc.advance(s(40));
        sc.handle(s(40), Event::SwitchDone { took: s(0) });
        assert_eq!(sc.next_wakeup(), Some(s(50)), "{kind}");
    }
}

#[test]
fn a_gang_quantum_with_no_switch_before_it_is_the_set_length() {
    let mut sc = pair_with_growing_quantum(PolicyKind::Gang);
    sc.advance(s(0));
    sc.advance(s(10));
    sc.handle(s(13), Event::SwitchDone { took: s(3) });
    assert_eq!(sc.next_wakeup(), Some(s(40)));
    // j0, suspended, is cancelled: j1 is alone in the matrix. Its next
    // quantum follows no switch and must not keep the grown length.
    sc.handle(s(20), Event::JobFinished(JobId(0)));
    let a = sc.advance(s(40));
    assert!(a.is_empty(), "nothing to switch: {a:?}");
    assert_eq!(sc.next_wakeup(), Some(s(50)));
}

#[test]
fn gang_asks_for_the_switch_mechanisms_it_was_given() {
    let mut sc = Scheduler::new(
        Cluster::uniform(1, 2, GIB),
        jobs(&[0, 0]),
        PolicyKind::Gang.build(s(10), "ao/ai".parse().unwrap()),
    );
    sc.advance(s(0));
    let a = sc.advance(s(10));
    assert!(matches!(
        a[0],
        Action::Suspend {
            page_out: memgang_core::PageOutPlan::Aggressive { record: true },
            ..
        }
    ));
    let a = sc.advance(s(20));
    assert!(matches!(
        a[1],
        Action::Resume {
            page_in: memgang_core::PageInPlan::Recorded,
            ..
        }
    ));
}

#[test]
fn gang_with_all_mechanisms_protects_makes_room_and_writes_back() {
    let mut sc = Scheduler::new(
        Cluster::uniform(1, 2, GIB),
        jobs(&[0, 0, 0]),
        PolicyKind::Gang.build(s(10), "so/ao/ai/bg".parse().unwrap()),
    );
    let a = sc.advance(s(0));
    assert_eq!(show(&sc, &a), ["start j0", "protect j0"]);
    // The last 10% of the quantum is the background-writing window.
    assert_eq!(sc.next_wakeup(), Some(s(9)));
    let a = sc.advance(s(9));
    assert_eq!(show(&sc, &a), ["writeback j0"]);
    assert_eq!(sc.next_wakeup(), Some(s(10)));
    let a = sc.advance(s(10));
    // so/ao: the suspension only records; the room is made for the
    // incoming job, from the job that ran last.
    assert!(matches!(
        a[0],
        Action::Suspend {
            page_out: memgang_core::PageOutPlan::Record,
            ..
        }
    ));
    assert_eq!(
        show(&sc, &a),
        [
            "suspend j0",
            "unprotect j0",
            "room j1 from j0",
            "start j1",
            "protect j1"
        ]
    );
    sc.handle(s(11), Event::SwitchDone { took: s(1) });
    assert_eq!(sc.next_wakeup(), Some(s(20)), "window opens 1 s before 21");
    sc.advance(s(20));
    let a = sc.advance(s(21));
    // j1 out, j2 in: j1 ran last and will run again last, then j0.
    assert_eq!(
        show(&sc, &a),
        [
            "suspend j1",
            "unprotect j1",
            "room j2 from j1,j0",
            "start j2",
            "protect j2"
        ]
    );
    sc.handle(s(21), Event::SwitchDone { took: s(0) });
    sc.advance(s(30));
    let a = sc.advance(s(31));
    assert_eq!(
        show(&sc, &a),
        [
            "suspend j2",
            "unprotect j2",
            "room j0 from j2,j1",
            "protect j0",
            "resume j0"
        ]
    );
}

#[test]
fn gang_alone_in_the_matrix_writes_nothing_back() {
    let mut sc = Scheduler::new(
        Cluster::uniform(1, 2, GIB),
        jobs(&[0]),
        PolicyKind::Gang.build(s(10), "bg".parse().unwrap()),
    );
    sc.advance(s(0));
    assert_eq!(
        sc.next_wakeup(),
        Some(s(10)),
        "no window: no one to switch to"
    );
    assert!(sc.advance(s(10)).is_empty());
}

// hybrid and auto: sets that fit in the pool, set switches, re-packing,
// overlap policies.

/// Jobs of these declared sizes (MiB), all arriving at 0, in a 1 GiB pool
/// on one 2-CPU node, quantum 10 s.
fn sized(kind: PolicyKind, overlap: Overlap, mib: &[u64]) -> Scheduler {
    let jobs = mib
        .iter()
        .enumerate()
        .map(|(i, m)| JobSpec {
            name: format!("j{i}"),
            ranks: 1,
            memory_bytes: Some(m * MIB),
            arrival: s(0),
            placed: None,
        })
        .collect();
    Scheduler::new(
        Cluster::uniform(1, 2, GIB),
        jobs,
        kind.build_with(s(10), Switching::LRU, overlap),
    )
}

fn hybrid(mib: &[u64]) -> Scheduler {
    sized(PolicyKind::Hybrid, Overlap::Sequential, mib)
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
    let mut auto = sized(PolicyKind::Auto, Overlap::Sequential, &[300, 300, 300]);
    let mut co = sized(PolicyKind::Cosched, Overlap::Sequential, &[300, 300, 300]);
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
    let mut sc = sized(PolicyKind::Auto, Overlap::Sequential, &[600, 600]);
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
                placed: None,
            },
            JobSpec {
                name: "small".into(),
                ranks: 1,
                memory_bytes: Some(100 * MIB),
                arrival: s(5),
                placed: None,
            },
            JobSpec {
                name: "mid".into(),
                ranks: 1,
                memory_bytes: Some(400 * MIB),
                arrival: s(6),
                placed: None,
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
    let mut sc = sized(PolicyKind::Hybrid, Overlap::Overlapped, &[600, 600]);
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
    let mut sc = sized(PolicyKind::Hybrid, Overlap::Prefetch, &[600, 600]);
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

#[test]
fn jobs_stream_in_and_retire_so_the_state_holds_only_the_live_ones() {
    let mut sc = Scheduler::new(
        Cluster::uniform(2, 1, GIB),
        Vec::new(),
        PolicyKind::Gang.build(s(10), Switching::LRU),
    );
    assert!(sc.all_finished() && sc.next_wakeup().is_none());
    let spec = |name: &str, at: u64| JobSpec {
        name: name.into(),
        ranks: 2,
        memory_bytes: None,
        arrival: s(at),
        placed: None,
    };
    let a = sc.submit(spec("a", 0)).unwrap();
    assert_eq!(sc.next_wakeup(), Some(s(0)));
    let acts = sc.advance(s(0));
    assert_eq!(show(&sc, &acts), ["start a"]);
    let b = sc.submit(spec("b", 4)).unwrap();
    assert_eq!(b, JobId(1), "ids follow submission order");
    assert_eq!(sc.next_wakeup(), Some(s(4)));
    sc.advance(s(4));
    let acts = sc.advance(s(10));
    assert_eq!(show(&sc, &acts), ["suspend a", "start b"]);
    sc.handle(s(11), Event::SwitchDone { took: s(1) });
    let acts = sc.handle(s(15), Event::JobFinished(b));
    assert_eq!(show(&sc, &acts), ["resume a"]);
    let gone = sc.retire(b);
    assert_eq!(
        (gone.spec.name.as_str(), gone.finished_at),
        ("b", Some(s(15)))
    );
    assert_eq!(sc.state().jobs().len(), 1);
    let c = sc.submit(spec("c", 15)).unwrap();
    assert_eq!(c, JobId(2));
    assert!(!sc.all_finished());
    sc.advance(s(15));
    sc.handle(s(20), Event::JobFinished(a));
    sc.retire(a);
    assert_eq!(sc.state().job(c).spec.name, "c");
    assert_eq!(sc.state().jobs().len(), 1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sc.state().job(a).id));
    assert!(r.is_err(), "a retired job is gone");
}

#[test]
fn gang_places_first_fit_over_many_nodes() {
    // 130 nodes: rows span three bitset words.
    let widths = [100u32, 40, 30, 130, 1];
    let specs = widths
        .iter()
        .enumerate()
        .map(|(i, w)| JobSpec {
            name: format!("j{i}"),
            ranks: *w,
            memory_bytes: None,
            arrival: s(0),
            placed: None,
        })
        .collect();
    let mut sc = Scheduler::new(
        Cluster::uniform(130, 1, GIB),
        specs,
        PolicyKind::Gang.build(s(10), Switching::LRU),
    );
    sc.advance(s(0));
    let nodes = |sc: &Scheduler, j: u32| {
        let n = &sc.state().job(JobId(j)).nodes;
        (n.len(), n.first().map(|n| n.0), n.last().map(|n| n.0))
    };
    // Row 0: j0 on 0..100, j2 on 100..130, j4 does not fit (row full).
    assert_eq!(nodes(&sc, 0), (100, Some(0), Some(99)));
    assert_eq!(nodes(&sc, 2), (30, Some(100), Some(129)));
    let acts = sc.advance(s(10));
    sc.handle(s(10), Event::SwitchDone { took: s(0) });
    // Row 1: j1 on 0..40 and j4 on 40; row 2: j3 on all.
    assert_eq!(nodes(&sc, 1), (40, Some(0), Some(39)));
    assert_eq!(nodes(&sc, 4), (1, Some(40), Some(40)));
    assert_eq!(
        show(&sc, &acts),
        ["suspend j0", "suspend j2", "start j1", "start j4"]
    );
    sc.advance(s(20));
    assert_eq!(nodes(&sc, 3), (130, Some(0), Some(129)));
}

#[test]
fn a_job_that_exits_during_a_set_switch_does_not_stop_it_for_the_others() {
    // [j0] [j1] [j2]. The switch to j1 begins at 10 s and j1 dies at once;
    // the executor reports the exit after the switch is done (it handles
    // one thing at a time). The next set runs then, not a quantum later.
    let mut sc = hybrid(&[600, 600, 600]);
    assert_eq!(adv(&mut sc, s(0)), ["start j0"]);
    assert_eq!(adv(&mut sc, s(10)), ["suspend j0", "start j1"]);
    assert!(sc
        .handle(s(11), Event::SwitchDone { took: s(1) })
        .is_empty());
    let a = sc.handle(s(11), Event::JobFinished(JobId(1)));
    assert_eq!(show(&sc, &a), ["start j2"]);
    // A suspended job killed meanwhile drops out of the rotation.
    assert!(sc.handle(s(15), Event::JobFinished(JobId(0))).is_empty());
    assert_eq!(sc.next_wakeup(), None, "one job left: nothing to rotate");
}

// hybrid on a cluster: sets are placements on nodes.

/// Jobs of (ranks, MiB for the whole job), arriving at 0, under hybrid on
/// `nodes` one-CPU nodes of 1 GiB (960 MiB each in a set), quantum 10 s.
fn hybrid_on(nodes: u32, jobs: &[(u32, u64)]) -> Scheduler {
    let specs = jobs
        .iter()
        .enumerate()
        .map(|(i, (ranks, m))| JobSpec {
            name: format!("j{i}"),
            ranks: *ranks,
            memory_bytes: Some(m * MIB),
            arrival: s(0),
            placed: None,
        })
        .collect();
    Scheduler::new(
        Cluster::uniform(nodes, 1, GIB),
        specs,
        PolicyKind::Hybrid.build(s(10), Switching::LRU),
    )
}

fn node_ids(sc: &Scheduler, j: u32) -> Vec<u32> {
    sc.state().job(JobId(j)).nodes.iter().map(|n| n.0).collect()
}

#[test]
fn hybrid_on_two_nodes_fills_the_memory_of_both() {
    // Four 400M jobs: one node holds two of them, two nodes all four, so
    // they run at once, two per node, and nothing needs a quantum.
    let mut sc = hybrid_on(2, &[(1, 400); 4]);
    assert_eq!(
        adv(&mut sc, s(0)),
        ["start j0", "start j1", "start j2", "start j3"]
    );
    assert_eq!(sc.next_wakeup(), None, "one set: no quantum");
    let nodes: Vec<Vec<u32>> = (0..4).map(|j| node_ids(&sc, j)).collect();
    assert_eq!(nodes, [vec![0], vec![1], vec![0], vec![1]]);
    // The same jobs on one node: two sets that take turns.
    let mut one = hybrid_on(1, &[(1, 400); 4]);
    assert_eq!(adv(&mut one, s(0)), ["start j0", "start j1"]);
    assert_eq!(one.next_wakeup(), Some(s(10)));
}

#[test]
fn hybrid_a_two_node_job_takes_room_on_both_nodes() {
    // j0 spans both nodes with 1200M (604M each, with its overhead): a
    // 400M job fits beside it on neither node, a 300M one does.
    let mut sc = hybrid_on(2, &[(2, 1200), (1, 400), (1, 300)]);
    assert_eq!(adv(&mut sc, s(0)), ["start j0", "start j2"]);
    assert_eq!(node_ids(&sc, 0), [0, 1]);
    assert_eq!(sc.next_wakeup(), Some(s(10)));
    assert_eq!(
        adv(&mut sc, s(10)),
        ["suspend j0", "suspend j2", "start j1"]
    );
    sc.handle(s(11), Event::SwitchDone { took: s(1) });
    // j0 ends while suspended: j1 and j2 fit together, and run at once.
    let a = sc.handle(s(12), Event::JobFinished(JobId(0)));
    assert_eq!(show(&sc, &a), ["resume j2"]);
    assert_eq!(sc.next_wakeup(), None);
}

#[test]
fn hybrid_with_many_alive_a_job_end_empties_the_smallest_set() {
    // One node. j0 (600M) and 25 jobs of 10M (14M with the overhead) fill
    // the first set; 15 more make a second. Over 32 jobs alive, a job's end
    // tries to move the smallest set into the others rather than pack all
    // afresh: when j0 ends they all fit, and run at once.
    let mut jobs = vec![(1, 600)];
    jobs.extend([(1, 10); 40]);
    let mut sc = hybrid_on(1, &jobs);
    let a = sc.advance(s(0));
    assert_eq!(a.len(), 26);
    assert_eq!(sc.next_wakeup(), Some(s(10)));
    let a = sc.handle(s(4), Event::JobFinished(JobId(0)));
    let started: Vec<String> = (26..=40).map(|j| format!("start j{j}")).collect();
    assert_eq!(show(&sc, &a), started);
    assert_eq!(sc.next_wakeup(), None, "one set: no quantum");
}

/// The idle nodes and running counts a policy reads are kept as jobs
/// start, stop and end; here they are checked against a count from every
/// running job's nodes, after each step of every policy on mixed widths.
#[test]
fn idle_nodes_and_running_counts_follow_every_status_change() {
    for kind in PolicyKind::ALL {
        let specs: Vec<JobSpec> = (0..12u64)
            .map(|i| JobSpec {
                name: format!("j{i}"),
                ranks: [1, 2, 4, 8][(i % 4) as usize],
                memory_bytes: Some((300 + 100 * (i % 5)) * MIB),
                arrival: s(3 * i),
                placed: None,
            })
            .collect();
        let mut sc = Scheduler::new(
            Cluster::uniform(4, 2, GIB),
            specs,
            kind.build(s(10), Switching::LRU),
        );
        let check = |sc: &Scheduler, when: &str| {
            let st = sc.state();
            let mut count = [0u32; 4];
            for j in st.with_status(JobStatus::Running) {
                for n in &j.nodes {
                    count[n.0 as usize] += 1;
                }
            }
            assert_eq!(&st.running_per_node()[..], &count[..], "{kind} {when}");
            let idle: Vec<u32> = st.idle_nodes().iter().map(|n| n.0).collect();
            let want: Vec<u32> = (0..4).filter(|n| count[*n as usize] == 0).collect();
            assert_eq!(idle, want, "{kind} {when}");
            assert_eq!(st.idle_node_count(), want.len(), "{kind} {when}");
        };
        let mut t = 0;
        let mut ended = 0;
        while !sc.all_finished() && t < 2000 {
            let a = sc.advance(s(t));
            check(&sc, &format!("advance at {t}"));
            if a.iter().any(Action::is_switch) {
                sc.handle(s(t), Event::SwitchDone { took: s(0) });
                check(&sc, &format!("switch done at {t}"));
            }
            // Every 7 s the first running job (every third time a
            // suspended one, if there is one) ends.
            if t % 7 == 0 {
                let status = if ended % 3 == 2 {
                    JobStatus::Suspended
                } else {
                    JobStatus::Running
                };
                let st = sc.state();
                let first = st
                    .with_status(status)
                    .chain(st.with_status(JobStatus::Running))
                    .next()
                    .map(|j| j.id);
                if let Some(j) = first {
                    ended += 1;
                    let a = sc.handle(s(t), Event::JobFinished(j));
                    check(&sc, &format!("end of {} at {t}", j.0));
                    if a.iter().any(Action::is_switch) {
                        sc.handle(s(t), Event::SwitchDone { took: s(0) });
                        check(&sc, &format!("switch done after an end at {t}"));
                    }
                }
            }
            t += 1;
        }
        assert!(sc.all_finished(), "{kind}: jobs left after {t} s");
        assert!(ended >= 12, "{kind}: {ended} ends");
    }
}

// A job placed by its spec (taken back by a restarted controller) on two
// nodes of one CPU and 1 GiB each: every policy starts it on its node,
// where its own choice would have been the other.

/// Jobs arriving at 0, one rank each: `(MiB declared, node placed on)`.
fn placed(kind: PolicyKind, jobs: &[(u64, Option<u32>)]) -> Scheduler {
    let specs = jobs
        .iter()
        .enumerate()
        .map(|(i, (mib, on))| JobSpec {
            name: format!("j{i}"),
            ranks: 1,
            memory_bytes: Some(mib * MIB),
            arrival: s(0),
            placed: on.map(|n| vec![NodeId(n)]),
        })
        .collect();
    Scheduler::new(
        Cluster::uniform(2, 1, GIB),
        specs,
        kind.build(s(10), Switching::LRU),
    )
}

/// The nodes job `j` was started on.
fn on(sc: &Scheduler, j: u32) -> Vec<u32> {
    sc.state().job(JobId(j)).nodes.iter().map(|n| n.0).collect()
}

#[test]
fn batch_starts_a_placed_job_on_its_nodes_or_waits() {
    // j1 runs on node 0: it waits for j0 to leave it though node 1 is
    // idle, and j2 waits behind it (first come, first served).
    let mut sc = placed(
        PolicyKind::Batch,
        &[(100, None), (100, Some(0)), (100, None)],
    );
    assert_eq!(adv(&mut sc, s(0)), ["start j0"]);
    assert_eq!(on(&sc, 0), [0]);
    let a = sc.handle(s(3), Event::JobFinished(JobId(0)));
    assert_eq!(show(&sc, &a), ["start j1", "start j2"]);
    assert_eq!((on(&sc, 1), on(&sc, 2)), (vec![0], vec![1]));
}

#[test]
fn cosched_starts_a_placed_job_on_its_nodes() {
    // The least loaded node would be 1.
    let mut sc = placed(PolicyKind::Cosched, &[(100, None), (100, Some(0))]);
    assert_eq!(adv(&mut sc, s(0)), ["start j0", "start j1"]);
    assert_eq!((on(&sc, 0), on(&sc, 1)), (vec![0], vec![0]));
}

#[test]
fn gang_puts_a_placed_job_in_a_row_where_its_nodes_are_free() {
    // j0 takes node 0 of row 0. j1 runs on node 0: a new row (first fit
    // would put it on node 1 of row 0). j2 runs on node 1: row 0, where
    // node 1 is free, so it starts at once.
    let mut sc = placed(
        PolicyKind::Gang,
        &[(100, None), (100, Some(0)), (100, Some(1))],
    );
    assert_eq!(adv(&mut sc, s(0)), ["start j0", "start j2"]);
    assert_eq!((on(&sc, 0), on(&sc, 2)), (vec![0], vec![1]));
    assert_eq!(
        adv(&mut sc, s(10)),
        ["suspend j0", "suspend j2", "start j1"]
    );
    assert_eq!(on(&sc, 1), [0]);
}

#[test]
fn hybrid_packs_a_placed_job_on_its_nodes() {
    for kind in [PolicyKind::Hybrid, PolicyKind::Auto] {
        // j1 fits beside j0 on node 0 (the set's emptier node would be 1).
        // j2 does not fit there: a set of its own, on node 0 (node 1 of
        // the running set would have taken it).
        let mut sc = placed(kind, &[(300, None), (300, Some(0)), (800, Some(0))]);
        assert_eq!(adv(&mut sc, s(0)), ["start j0", "start j1"]);
        assert_eq!((on(&sc, 0), on(&sc, 1)), (vec![0], vec![0]), "{kind}");
        // A job's end packs the rest afresh: j2 stays on node 0, where j0
        // leaves no room, so nothing changes.
        assert!(sc.handle(s(1), Event::JobFinished(JobId(1))).is_empty());
        assert_eq!(adv(&mut sc, s(10)), ["suspend j0", "start j2"], "{kind}");
        assert_eq!(on(&sc, 2), [0], "{kind}");
    }
}

#[test]
fn a_job_placed_where_the_cluster_cannot_take_it_is_refused() {
    let mut sc = placed(PolicyKind::Gang, &[]);
    let spec = |ranks, on: &[u32]| JobSpec {
        name: "x".into(),
        ranks,
        memory_bytes: None,
        arrival: s(0),
        placed: Some(on.iter().map(|n| NodeId(*n)).collect()),
    };
    let e = sc.submit(spec(2, &[0])).unwrap_err();
    assert!(
        e.contains("placed on 1 node(s), but its 2 rank(s) take 2"),
        "{e}"
    );
    let e = sc.submit(spec(1, &[2])).unwrap_err();
    assert!(
        e.contains("node 2, which the cluster does not have (nodes 0 to 1)"),
        "{e}"
    );
    let e = sc.submit(spec(2, &[1, 1])).unwrap_err();
    assert!(e.contains("node 1 twice"), "{e}");
    assert_eq!(sc.submit(spec(2, &[1, 0])), Ok(JobId(0)));
}
