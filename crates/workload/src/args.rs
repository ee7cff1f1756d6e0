//! `memgang-workload`'s command line, here rather than in the binary so
//! that `memgang man` can write its man page (memgang-workload(1)).

use crate::Pattern;
use clap::Parser;

pub const AFTER_HELP: &str = "\
Exit codes:
  0  all ranks ran and verified every word
  1  other error (e.g. mmap failed), with errno text
  2  bad arguments
  3  data corruption found by the final self-check
  4  a rank failed or died, or the barrier broke

Memory is split evenly over the ranks; the remainder pages (of 4 KiB) go to
the last rank. Each rank forks from rank 0 before allocating, and dies with
it (PR_SET_PDEATHSIG). Rank 0 reaps all ranks, so wait4() on it reports the
CPU time and page faults of the whole job.";

#[derive(Parser, Debug)]
#[command(
    name = "memgang-workload",
    version,
    about = "Synthetic memory-hungry parallel job (NPB stand-in) with a self-check",
    after_help = AFTER_HELP
)]
pub struct Args {
    /// Total memory of the job in MiB, split over the ranks.
    #[arg(long, value_name = "F", value_parser = parse_mib)]
    pub mib: u64,

    /// Page visit order of every iteration.
    #[arg(long, value_enum)]
    pub pattern: Pattern,

    /// Iterations over the memory (0 = only initialise and verify).
    #[arg(long, value_name = "N")]
    pub iterations: u64,

    /// Extra CPU work per page visit, in units of 512 serially dependent
    /// xorshift-multiply rounds. One unit costs about 1 µs on a ~3 GHz x86
    /// core, roughly the same as one memory-bound 4 KiB page visit, so C=1
    /// about halves the memory traffic rate. 0 = memory-bound.
    #[arg(long, value_name = "C", default_value_t = 0)]
    pub compute: u64,

    /// Processes in the job; they meet at a barrier after every iteration.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub ranks: u64,

    /// Seed for the data and the random visit orders.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,

    /// Do not print the summary line.
    #[arg(long)]
    pub quiet: bool,

    /// Lock the memory (mlock) after initialising it, as some codes do for
    /// buffers a device reads: the page-out mechanisms cannot move it.
    #[arg(long)]
    pub lock: bool,

    /// For testing the self-check: flip one bit in the last rank's memory
    /// after the iterations, so verification must fail with exit code 3.
    #[arg(long)]
    pub corrupt_for_test: bool,
}

pub fn parse_mib(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("the job needs at least 1 MiB".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}
