//! The simulator against runs worked out by hand, and its determinism.

use memgang_core::{Overlap, PolicyKind, Switching};
use memgang_sim::{
    Access, Arrivals, BadLines, Config, Device, Generator, GeneratorSpec, PagingModel, Report,
    Simulator, Swf, TraceJob, Workload, WorkloadError,
};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// A fixed list of jobs.
struct Jobs(std::vec::IntoIter<TraceJob>);

impl Workload for Jobs {
    fn next_job(&mut self) -> Result<Option<TraceJob>, WorkloadError> {
        Ok(self.0.next())
    }
}

fn job(name: &str, runtime_s: f64, mib: u64) -> TraceJob {
    TraceJob {
        name: name.into(),
        arrival: Duration::ZERO,
        ranks: 1,
        runtime_s,
        memory_per_rank: mib * MIB,
        cpu_share: 1.0,
    }
}

/// One node of 1 GiB; the device writes 100 MiB/s, reads 200 MiB/s in bulk
/// and 50 MiB/s by demand faults (12,800 random 4 KiB reads/s).
fn one_node(policy: PolicyKind, switching: &str) -> Config {
    Config {
        nodes: 1,
        cpus_per_node: 1,
        node_memory: 1024 * MIB,
        policy,
        quantum: Duration::from_secs(10).into(),
        switching: switching.parse().unwrap(),
        overlap: Overlap::default(),
        paging: PagingModel {
            device: Device {
                write_bps: (100 * MIB) as f64,
                read_bps: (200 * MIB) as f64,
                random_read_iops: 12_800.0,
            },
            ..PagingModel::default()
        },
    }
}

fn two_jobs(cfg: Config) -> Report {
    let mut w = Jobs(vec![job("a", 25.0, 600), job("b", 15.0, 600)].into_iter());
    Simulator::new(cfg, &mut w).run().unwrap()
}

fn close(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-3, "got {got}, want {want}");
}

#[test]
fn batch_runs_the_two_jobs_back_to_back() {
    let r = two_jobs(one_node(PolicyKind::Batch, "lru"));
    close(r.makespan_s, 40.0);
    assert_eq!((r.jobs, r.switches, r.paged_out_bytes), (2, 0, 0));
    close(r.mean_response_s, (25.0 + 40.0) / 2.0);
    close(r.utilization, 1.0);
}

/// Gang, lru, 10 s quantum; 600 MiB each in 1 GiB, so a switch evicts
/// 176 MiB of the other job. The resumed job's own 424 MiB left from its
/// last quantum are the oldest pages, and its sweep faults each of them
/// after the kernel evicted it: it faults all 600 MiB back, by readahead
/// (8 pages a read, 400 MiB/s: 1.5 s), and 600 MiB go out (176 of the
/// other's, 424 of its own) at 100 MiB/s: 6 s, the writes queued with the
/// reads. The kernel's 12 µs per page moved (1200 MiB, 3.6864 s) and the
/// 1/0.5 = 2 s its sweep needs to touch 600 MiB fit in those 6 s.
///   0      a runs 0..10                          a: 15 left
///  10      b starts, evicting 176 MiB of a: 1.76 b runs 11.76..20, 6.76 left
///  20      a resumes: 6 s, 2 s of work in them   a: 15 - 2 - 4 = 9
///  30      b resumes, the same                   b: 6.76 - 6 = 0.76
///  40      a resumes, the same                   a: 9 - 6 = 3
///  50      b resumes and ends inside its page-in, after its 0.76 s of the
///          2 s of work there: at 50 + 6 · 0.76 / 2 = 52.28
///  52.28   a resumes alone: b's memory is free, so only its 176 MiB come
///          back (0.44 s of reads) and nothing goes out; the kernel's
///          0.5407 s and 0.5867 s of work, then 3 - 0.5867: a ends 55.8207
#[test]
fn gang_lru_two_jobs_on_one_node_by_hand() {
    let r = two_jobs(one_node(PolicyKind::Gang, "lru"));
    let page = 4096.0;
    let kernel = |mib: f64| mib * MIB as f64 / page * 12e-6;
    assert!(kernel(1200.0) + 2.0 < 6.0 && 600.0 / 400.0 < 6.0);
    let b_end = 50.0 + 6.0 * 0.76 / 2.0;
    let w = 176.0 / 600.0 / 0.5;
    let a_end = b_end + w + kernel(176.0) + (3.0 - w);
    close(b_end, 52.28);
    close(a_end, 55.8207);
    close(r.makespan_s, a_end);
    assert_eq!(r.switches, 6, "at 10, 20, 30, 40, 50 and when b ends");
    assert_eq!(r.paged_out_bytes, (176 + 4 * 600) * MIB);
    assert_eq!(r.paged_in_bytes, (4 * 600 + 176) * MIB);
    close(r.mean_response_s, (b_end + a_end) / 2.0);
    // Stalls: 1.76 + 4 × 6 + the last page-in.
    close(
        r.paging_node_s,
        1.76 + 4.0 * 6.0 + (a_end - b_end - (3.0 - w)),
    );
}

/// Jobs touching their memory at random (a 13 s, b 15 s). A resumed job
/// faults a page it lacks at each touch of it, and with no free memory a
/// share `own` of its faults evict its own pages: lacking 176 of 600 MiB,
/// 0.45 - 0.42 · (176/600 - 0.54) = 0.5536 (`OWN_EVICT_SHARE`, `_SLOPE`,
/// `_AT_LACK`), and 0.07 more for a, the older of the two
/// (`OWN_EVICT_SPLIT`): 0.6236. What it lacks falls as `L · e^(-(1-own) x)` over the
/// sweeps x it touches (one per 2 s of computing), its faults are
/// `L / (1-own) · (1 - e^(-(1-own) x))`, and
/// each costs a read (1/12,800 s) and the kernel's work for a page in and
/// one out (24 µs); it waits for each.
///   0      a runs 0..10                             a: 3 left
///  10      b starts, evicting 176 MiB of a: 1.76    b runs 11.76..20, 6.76 left
///  20      a resumes lacking 176 MiB (b's 176 go): its 3 s of work are
///          1.5 sweeps, and it ends inside its page-in, at 20 + 3 + its
///          faults' time; its own pages faulted and evicted again are the
///          faults less what its lack fell by
///  a's end b resumes alone with room: no page of its own goes (the rate
///          is 1), each fault costs a read and 12 µs; its 6.76 s of work
///          are 3.38 sweeps, again inside its page-in
#[test]
fn gang_lru_random_access_waits_for_its_faults() {
    let mut cfg = one_node(PolicyKind::Gang, "lru");
    cfg.paging.access = Access::Random;
    let mut w = Jobs(vec![job("a", 13.0, 600), job("b", 15.0, 600)].into_iter());
    let r = Simulator::new(cfg, &mut w).run().unwrap();
    let lack = (176 * MIB) as f64 / 4096.0;
    let faults = |rate: f64, x: f64| lack / rate * (1.0 - (-rate * x).exp());
    let (short_s, room_s) = (1.0 / 12_800.0 + 24e-6, 1.0 / 12_800.0 + 12e-6);
    // a, made first, resumes beside b's pages: its share leans up by the
    // split. b resumes after a's end, with room: none of its own goes.
    let rate = 1.0 - (0.45 - 0.42 * (176.0 / 600.0 - 0.54) + 0.07);
    let a_end = 20.0 + 3.0 + faults(rate, 1.5) * short_s;
    let b_end = a_end + 6.76 + faults(1.0, 3.38) * room_s;
    close(a_end, 28.2739);
    close(b_end, 38.9563);
    close(r.makespan_s, b_end);
    assert_eq!(r.switches, 3, "at 10, 20 and when a ends");
    let own = faults(rate, 1.5) - lack * (1.0 - (-rate * 1.5).exp());
    let moved = (176.0 * 2.0) + own * 4096.0 / MIB as f64;
    let mib = |b: u64| b as f64 / MIB as f64;
    assert!(
        (mib(r.paged_in_bytes) - moved).abs() < 1e-3,
        "{} {moved}",
        mib(r.paged_in_bytes)
    );
    assert!(
        (mib(r.paged_out_bytes) - moved).abs() < 1e-3,
        "{} {moved}",
        mib(r.paged_out_bytes)
    );
}

/// Gang, ao/ai: a switch writes the outgoing job's 600 MiB (6 s) and reads
/// the incoming one's back in bulk (3 s); the quantum starts when it is done.
///   0   a runs 0..10                       a: 15 left
///  10   switch 6 s (b is new), b 16..26    b: 5 left
///  26   switch 6 + 3 s, a 35..45           a: 5 left
///  45   switch 9 s, b 54..59, ends
///  59   a comes back alone: 3 s, 62..67
#[test]
fn gang_aggressive_and_adaptive_two_jobs_by_hand() {
    let r = two_jobs(one_node(PolicyKind::Gang, "ao/ai"));
    close(r.makespan_s, 67.0);
    assert_eq!(r.switches, 4);
    close(r.switch_s, 6.0 + 9.0 + 9.0 + 3.0);
    assert_eq!(r.paged_out_bytes, 3 * 600 * MIB);
    assert_eq!(r.paged_in_bytes, 3 * 600 * MIB);
}

/// Cosched, five 1-rank jobs of 100 s that fit in memory on one node of 2
/// CPUs: five ranks on two CPUs, each computes at 2/5 of its speed, all
/// end at 250 s. Two jobs on it do not slow each other at all.
#[test]
fn cosched_ranks_share_the_node_cpus_not_one_cpu() {
    let cfg = || Config {
        cpus_per_node: 2,
        ..one_node(PolicyKind::Cosched, "lru")
    };
    let five: Vec<_> = (0..5).map(|i| job(&format!("j{i}"), 100.0, 100)).collect();
    let r = Simulator::new(cfg(), &mut Jobs(five.into_iter()))
        .run()
        .unwrap();
    close(r.makespan_s, 250.0);
    let two: Vec<_> = (0..2).map(|i| job(&format!("j{i}"), 100.0, 100)).collect();
    let r = Simulator::new(cfg(), &mut Jobs(two.into_iter()))
        .run()
        .unwrap();
    close(r.makespan_s, 100.0);
}

/// Cosched runs the two jobs of 600 MiB together on the 1 GiB node, so
/// they thrash alike until b (15 s of work) ends; a, with 15 of its 25 s
/// done by then, fits alone and runs its last 10 s at full speed. The node
/// was overcommitted until b ended: the makespan less 10 s. Gang runs one
/// job at a time, and never overcommits the node.
#[test]
fn overcommitted_node_time_is_the_time_running_jobs_do_not_fit() {
    let r = two_jobs(one_node(PolicyKind::Cosched, "lru"));
    assert!(
        r.makespan_s > 40.0,
        "thrashing slows both: {}",
        r.makespan_s
    );
    close(r.overcommitted_node_s, r.makespan_s - 10.0);
    assert_eq!(
        two_jobs(one_node(PolicyKind::Gang, "lru")).overcommitted_node_s,
        0.0
    );
    assert_eq!(
        two_jobs(one_node(PolicyKind::Batch, "lru")).overcommitted_node_s,
        0.0
    );
}

/// Ranks that wait leave CPU to the others: three 2-rank jobs that keep
/// their CPUs busy 3/4 of their time alone want 4.5 CPUs of a node's 2,
/// so each runs 2.25 times longer than alone (not 3 times, as jobs that
/// compute all the time would).
#[test]
fn cosched_jobs_that_wait_share_the_cpus_by_what_they_use() {
    let cfg = Config {
        cpus_per_node: 2,
        ..one_node(PolicyKind::Cosched, "lru")
    };
    let jobs = |share: f64| -> Vec<TraceJob> {
        (0..3)
            .map(|i| TraceJob {
                ranks: 2,
                cpu_share: share,
                ..job(&format!("j{i}"), 100.0, 100)
            })
            .collect()
    };
    let r = Simulator::new(cfg.clone(), &mut Jobs(jobs(0.75).into_iter()))
        .run()
        .unwrap();
    close(r.makespan_s, 225.0);
    let r = Simulator::new(cfg, &mut Jobs(jobs(1.0).into_iter()))
        .run()
        .unwrap();
    close(r.makespan_s, 300.0);
}

fn generated(seed: u64, jobs: u64) -> Report {
    let mut w = Generator::new(GeneratorSpec {
        jobs,
        arrivals: Arrivals::Poisson { mean_gap_s: 200.0 },
        mean_runtime_s: 600.0,
        runtime_shape: 1.5,
        mean_memory: 4 << 30,
        memory_shape: 1.5,
        max_memory: 64 << 30,
        max_ranks: 32,
        seed,
    });
    let cfg = Config {
        nodes: 64,
        cpus_per_node: 1,
        node_memory: 64 << 30,
        policy: PolicyKind::Gang,
        quantum: Duration::from_secs(60).into(),
        switching: Switching::LRU,
        overlap: Overlap::default(),
        paging: PagingModel::default(),
    };
    Simulator::new(cfg, &mut w).run().unwrap()
}

#[test]
fn a_seed_gives_the_same_run() {
    let strip = |mut r: Report| {
        (r.wall_s, r.events_per_s) = (0.0, 0.0);
        r
    };
    let a = strip(generated(7, 2000));
    assert_eq!(a, strip(generated(7, 2000)));
    assert_ne!(a, strip(generated(8, 2000)));
    assert_eq!((a.jobs, a.unfinished), (2000, 0));
    assert!(a.switches > 0 && a.paged_out_bytes > 0, "{a:?}");
    // Jobs are forgotten as they end.
    assert!(a.peak_jobs_alive < 200, "{}", a.peak_jobs_alive);
}

#[test]
fn closed_loop_keeps_the_same_number_of_jobs_in_the_system() {
    let mut w = Generator::new(GeneratorSpec {
        jobs: 300,
        arrivals: Arrivals::Closed { jobs: 5 },
        mean_runtime_s: 60.0,
        runtime_shape: 2.0,
        mean_memory: 100 * MIB,
        memory_shape: 2.0,
        max_memory: 1024 * MIB,
        max_ranks: 1,
        seed: 1,
    });
    let r = Simulator::new(one_node(PolicyKind::Gang, "lru"), &mut w)
        .run()
        .unwrap();
    assert_eq!((r.jobs, r.peak_jobs_alive), (300, 5));
}

const TRACE: &str = "\
; Version: 2.2
; Computer: test
1 0 5 100 4 -1 2048 4 200 -1 1 1 1 -1 1 -1 -1 -1
2 10 0 50 -1 30 -1 8 60 4096 1 1 1 -1 1 -1 -1 -1

3 20 0 -1 2 -1 -1 2 60 -1 5 1 1 -1 1 -1 -1 -1
";

fn swf(text: &str, bad: BadLines) -> Swf<&[u8]> {
    Swf::new("t.swf", text.as_bytes(), bad, 7 * MIB)
}

#[test]
fn swf_reads_the_fields_memgang_needs() {
    let mut r = swf(TRACE, BadLines::Refuse);
    let a = r.next_job().unwrap().unwrap();
    assert_eq!(
        (
            a.name.as_str(),
            a.arrival,
            a.ranks,
            a.runtime_s,
            a.memory_per_rank
        ),
        ("1", Duration::ZERO, 4, 100.0, 2048 * 1024)
    );
    // Allocated processors unknown: requested (field 8); used memory
    // unknown: requested (field 10).
    assert_eq!(a.cpu_share, 1.0, "field 6 unknown: all the time");
    let b = r.next_job().unwrap().unwrap();
    assert_eq!((b.ranks, b.memory_per_rank), (8, 4096 * 1024));
    // Field 6, 30 s of CPU per processor over a run of 50 s.
    assert_eq!(b.cpu_share, 0.6);
    // Job 3 never ran (run time -1): passed over, counted.
    assert!(r.next_job().unwrap().is_none());
    assert_eq!(r.unusable(), 1);
    assert_eq!(r.skipped().0, 0);
}

#[test]
fn swf_bad_lines_are_refused_with_their_number_or_skipped() {
    let text = format!("{TRACE}4 30 0 10 1 -1 -1\n5 40 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 x\n6 50 0 10 1 -1 100 1 10 -1 1 1 1 -1 1 -1 -1 -1\n");
    let mut r = swf(&text, BadLines::Refuse);
    let err = loop {
        match r.next_job() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the bad line went through"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(
        err.starts_with("t.swf:7: expected 18 fields, found 7"),
        "{err}"
    );
    assert!(err.contains("--skip-bad-lines"), "{err}");

    let mut r = swf(&text, BadLines::Skip);
    let mut names = Vec::new();
    while let Some(j) = r.next_job().unwrap() {
        names.push(j.name);
    }
    assert_eq!(names, ["1", "2", "6"]);
    let (n, reasons) = r.skipped();
    assert_eq!(n, 2);
    assert!(
        reasons[1].starts_with("line 8: field 18 is \"x\""),
        "{reasons:?}"
    );

    let unsorted = "1 50 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n2 40 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n";
    let err = swf(unsorted, BadLines::Refuse).nth_err();
    assert!(err.contains("t.swf:2: submit time 40 is before"), "{err}");
}

#[test]
fn swf_load_factor_divides_the_submit_times_only() {
    // Job 2 arrives at 10 s; offered three times the load it arrives at
    // 10/3 s with the same run time. Equal submit times stay in order
    // after the division (no spurious "before the previous job").
    let mut r = swf(TRACE, BadLines::Refuse).with_load_factor(3.0);
    let a = r.next_job().unwrap().unwrap();
    let b = r.next_job().unwrap().unwrap();
    assert_eq!(a.arrival, Duration::ZERO);
    assert_eq!(b.arrival, Duration::from_secs_f64(10.0 / 3.0));
    assert_eq!((b.runtime_s, b.ranks), (50.0, 8));
    let same = "1 7 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n2 7 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n";
    let mut r = swf(same, BadLines::Refuse).with_load_factor(0.3);
    assert!(r.next_job().unwrap().is_some());
    assert!(r.next_job().unwrap().is_some());
}

trait NthErr {
    fn nth_err(self) -> String;
}

impl<R: std::io::BufRead> NthErr for Swf<R> {
    fn nth_err(mut self) -> String {
        loop {
            match self.next_job() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error"),
                Err(e) => return e.to_string(),
            }
        }
    }
}

#[test]
fn a_trace_runs_under_every_policy() {
    for policy in PolicyKind::ALL {
        let cfg = Config {
            nodes: 8,
            cpus_per_node: 2,
            ..one_node(policy, "lru")
        };
        let mut w = swf(TRACE, BadLines::Refuse);
        let r = Simulator::new(cfg, &mut w).run().unwrap();
        assert_eq!((r.jobs, r.unfinished, r.unusable), (2, 0, 1), "{policy}");
    }
}

/// A trace without memory, drawn: a seed gives the same sizes, they
/// differ from job to job, stay under the cap, and a job whose trace
/// gives its memory keeps it.
#[test]
fn swf_memory_drawn_for_jobs_without_it_is_seeded_and_capped() {
    let mut text = String::new();
    for i in 1..=400 {
        text.push_str(&format!(
            "{i} {i} 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n"
        ));
    }
    text.push_str("401 500 0 10 1 -1 2048 1 10 -1 1 1 1 -1 1 -1 -1 -1\n");
    let sizes = |seed: u64| -> Vec<u64> {
        let mut r = swf(&text, BadLines::Refuse).with_memory_draw(seed, 1.5, 64 * MIB);
        std::iter::from_fn(|| r.next_job().unwrap())
            .map(|j| j.memory_per_rank)
            .collect()
    };
    let (a, b, c) = (sizes(1), sizes(1), sizes(2));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a[400], 2048 * 1024, "the trace's own memory");
    let drawn = &a[..400];
    assert!(drawn.iter().all(|m| *m > 0 && *m <= 64 * MIB));
    let distinct: std::collections::BTreeSet<_> = drawn.iter().collect();
    assert!(distinct.len() > 300, "{} sizes", distinct.len());
    // Mean 7 MiB (the default of `swf`): a heavy tail, so loosely.
    let mean = drawn.iter().sum::<u64>() as f64 / 400.0 / MIB as f64;
    assert!((4.0..12.0).contains(&mean), "mean {mean} MiB");
}

/// A swept page-in cut short by the quantum counts the traffic it did,
/// its own pages' included. The device writes 50 MiB/s, so a's page-in at
/// 20 (176 MiB of b out, its own 424 MiB out and back, 600 in) lasts
/// 600 / 50 = 12 s and the quantum cuts it at 10 s, 1/6 undone: 500 MiB
/// came in and 176 + 424 · 5/6 went out. b resumes at 30 lacking 176 MiB
/// with 29.33 free (a's undone share), evicts 146.67 of a, faults its 600
/// back (146.67 + 424 out: 11.413 s) and ends inside that page-in, after
/// the 1 s of work it had left of the 2 s there: at 30 + 11.413 / 2. a
/// then comes back alone: 176 MiB in, nothing out.
#[test]
fn gang_lru_a_page_in_cut_short_counts_what_it_moved() {
    let mut cfg = one_node(PolicyKind::Gang, "lru");
    cfg.paging.device.write_bps = (50 * MIB) as f64;
    let mut w = Jobs(vec![job("a", 15.0, 600), job("b", 7.48, 600)].into_iter());
    let r = Simulator::new(cfg, &mut w).run().unwrap();
    let mib = |b: u64| b as f64 / MIB as f64;
    let b_end = 30.0 + (146.0 + 2.0 / 3.0 + 424.0) / 50.0 / 2.0;
    let kernel = |mib: f64| mib * MIB as f64 / 4096.0 * 12e-6;
    let back = 176.0 / 600.0 / 0.5;
    let a_end = b_end + back + kernel(176.0) + (15.0 - 10.0 - 2.0 * 10.0 / 12.0 - back);
    close(r.makespan_s, a_end);
    assert_eq!(r.switches, 4, "at 10, 20, 30 and when b ends");
    let moved = 176.0 + 500.0 + 600.0;
    assert!(
        (mib(r.paged_in_bytes) - moved).abs() < 1e-5,
        "{}",
        mib(r.paged_in_bytes)
    );
    assert!(
        (mib(r.paged_out_bytes) - moved).abs() < 1e-5,
        "{}",
        mib(r.paged_out_bytes)
    );
}
