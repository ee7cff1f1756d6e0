//! Demand faults timed on the fault path (`memgang_linux::faults`): a lone
//! process's swapped-out pages touched back one byte each, in a random
//! order and in order, with room to spare. Per round and order: wall and
//! CPU time, major faults and pages read from swap; per fault its wall and
//! CPU time, and the fault rate over the disk's random 4 KiB reads per
//! second at depth 1 (FAULT_RATE_DISK_IOPS, if given). Run as root, with
//! swap, by `bench/fault_rate.sh`.
//!
//!   fault_rate [MIB] [ROUNDS]     (defaults 512, 3)

use memgang_linux::cgroup::{self, CgroupBackend};
use memgang_linux::faults::{self, Order};

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: u64 = args
        .next()
        .map_or(512, |a| a.parse().expect("MIB: a number of MiB"));
    let rounds: u64 = args
        .next()
        .map_or(3, |a| a.parse().expect("ROUNDS: a number"));
    let disk: Option<f64> = std::env::var("FAULT_RATE_DISK_IOPS")
        .ok()
        .map(|v| v.parse().expect("FAULT_RATE_DISK_IOPS: reads per second"));
    let backend: Box<dyn CgroupBackend> =
        cgroup::detect().expect("a cgroup memory hierarchy (run as root)");
    println!(
        "{:<8} {:>5} {:>5} {:>7} {:>7} {:>6} {:>7} {:>7} {:>9} {:>11} {:>12} {:>8} {:>6}",
        "order",
        "round",
        "MiB",
        "pages",
        "wall_s",
        "cpu_s",
        "pswpin",
        "majflt",
        "faults/s",
        "pages/fault",
        "cpu_us/fault",
        "us/fault",
        "x disk"
    );
    for n in 1..=rounds {
        for order in [Order::Random, Order::InOrder] {
            let p = faults::measure(backend.as_ref(), mib << 20, order, n)
                .unwrap_or_else(|e| panic!("{e} (bench/fault_rate.sh makes the swap)"));
            let per_s = p.major_faults as f64 / p.wall.as_secs_f64();
            println!(
                "{:<8} {n:>5} {mib:>5} {:>7} {:>7.2} {:>6.2} {:>7} {:>7} {per_s:>9.0} {:>11.2} {:>12.1} {:>8.1} {:>6}",
                if order == Order::Random { "random" } else { "seq" },
                p.pages,
                p.wall.as_secs_f64(),
                p.cpu.as_secs_f64(),
                p.pages_read,
                p.major_faults,
                p.pages_per_fault(),
                1e6 * p.cpu_s_per_fault(),
                1e6 * p.s_per_fault(),
                disk.map_or("-".into(), |d| format!("{:.2}", per_s / d)),
            );
        }
    }
}
