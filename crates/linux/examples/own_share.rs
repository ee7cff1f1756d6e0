//! The share of a resumed job's faults that evict its own pages
//! (`memgang_linux::faults::own_share`, what `memgang calibrate` writes as
//! `own_evict_share`) against the size of the pool: two jobs of MIB MiB
//! touching their memory at random take turns under pools that hold from
//! a little more than one of them to a little less than two. One line per
//! pool and round: what a resume lacked and faulted (mean over the counted
//! turns, each job's apart) and the share; then the least-squares line of
//! the share over what a resume lacked of its job (the simulator's
//! `own_evict_share` and `own_evict_slope`), and the mean split between
//! the two jobs (`own_evict_split`). Run as root, with swap, by
//! `bench/own_share.sh`.
//!
//!   own_share [MIB] [ROUNDS] [POOL_MIB...]    (defaults 256, 2, and the
//!                                              pools of memgang's 700 and
//!                                              600 MiB pairs in 1 GiB)

use memgang_linux::faults;

const MIB: u64 = 1 << 20;

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: u64 = args
        .next()
        .map_or(256, |a| a.parse().expect("MIB: a number"));
    let rounds: u64 = args
        .next()
        .map_or(2, |a| a.parse().expect("ROUNDS: a number"));
    let mut pools: Vec<u64> = args
        .map(|a| a.parse().expect("POOL_MIB: a number"))
        .collect();
    if pools.is_empty() {
        // 1024 MiB over 700 and over 600: the pairs measured under gang lru.
        pools = vec![mib * 1024 / 700, mib * 1024 / 600];
    }
    let backend = memgang_linux::cgroup::detect().expect("a cgroup hierarchy");
    println!(
        "{:>7} {:>8} {:>10} {:>5}  {:>10} {:>11} {:>6}  {:>16} {:>16}",
        "job_MiB",
        "pool_MiB",
        "lack/job",
        "round",
        "lacked_MiB",
        "faulted_MiB",
        "share",
        "faulted a, b",
        "share a, b"
    );
    let (mut points, mut splits) = (Vec::new(), Vec::new());
    for pool in pools {
        for round in 1..=rounds {
            let o = faults::own_share(backend.as_ref(), mib * MIB, pool * MIB, round)
                .unwrap_or_else(|e| panic!("{e} (bench/own_share.sh makes the swap)"));
            let turns = o.counted();
            let mean = |f: &dyn Fn(&faults::Turn) -> u64, every: usize, from: usize| {
                let t: Vec<u64> = turns.iter().skip(from).step_by(every).map(f).collect();
                t.iter().sum::<u64>() as f64 / t.len().max(1) as f64 / MIB as f64
            };
            let (lacked, faulted) = (
                mean(&|t| t.lacked_bytes, 1, 0),
                mean(&|t| t.faulted_bytes, 1, 0),
            );
            let (fa, fb) = (
                mean(&|t| t.faulted_bytes, 2, 0),
                mean(&|t| t.faulted_bytes, 2, 1),
            );
            let (sa, sb) = (o.job_share(0), o.job_share(1));
            points.push((o.lack_share(), o.share()));
            splits.push(o.split());
            println!(
                "{mib:>7} {pool:>8} {:>10.2} {round:>5}  {lacked:>10.0} {faulted:>11.0} {:>6.2}  {:>7.0} {:>8.0} {:>7.2} {:>8.2}",
                o.lack_share(),
                o.share(),
                fa,
                fb,
                sa,
                sb
            );
        }
    }
    if points.len() >= 2 {
        let n = points.len() as f64;
        let (mx, my) = (
            points.iter().map(|p| p.0).sum::<f64>() / n,
            points.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let slope = sxy / sxx;
        println!(
            "fit over {} points: share = {:.3} {:+.3} * (lack/job - 0.54); at 0.54 (memgang's 700 MiB pairs) {:.3}",
            points.len(),
            my + slope * (0.54 - mx),
            slope,
            my + slope * (0.54 - mx)
        );
    }
    if !splits.is_empty() {
        let mean = splits.iter().sum::<f64>() / splits.len() as f64;
        let (lo, hi) = splits
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), s| (l.min(*s), h.max(*s)));
        println!(
            "split (the first-made job's share less the other's, halved) over {} points: mean {mean:.3}, {lo:.3} to {hi:.3}",
            splits.len()
        );
    }
}
