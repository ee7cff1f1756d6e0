//! memgang-results: the results of a run, one JSON document (schema in
//! docs/results.md) from which every table, plot and report is made. The
//! executor (memgang-runtime) records its jobs, switches and samples in
//! these types, `memgang run` (memgang-experiment) writes the document,
//! and `memgang report`/`plot` and the batch-baseline cache read it back.
//! Types only, with the few derived counts that read the document
//! (`faults_after`); no I/O.

use serde::{Deserialize, Serialize};

/// Bumped when a field changes meaning or is removed; adding fields keeps it.
pub const SCHEMA_VERSION: u32 = 1;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn lru() -> String {
    "lru".into()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: u32,
    pub memgang_version: String,
    pub experiment: String,
    pub policy: String,
    pub quantum_s: f64,
    /// The most of the time switching may take: quanta after a dearer
    /// switch were longer than `quantum_s`; null: fixed quanta.
    #[serde(default)]
    pub max_switch_share: Option<f64>,
    /// Switch mechanisms: "lru" or e.g. "ao/ai" (paper 000's names).
    #[serde(default = "lru")]
    pub switch: String,
    /// Set-switch overlap of `hybrid`/`auto`: "sequential", "overlapped"
    /// or "prefetch"; null for the other policies.
    #[serde(default)]
    pub overlap: Option<String>,
    /// Paper 003's dynamic coscheduling was on.
    #[serde(default)]
    pub dynamic_coscheduling: bool,
    pub pool_memory_bytes: u64,
    pub machine: Machine,
    /// Unix time (s) at which the run started.
    pub started_unix_s: u64,
    /// From the first arrival to the last completion.
    pub makespan_s: f64,
    /// Paper 000 §4.1: (makespan - batch makespan) / makespan; null when no
    /// batch reference was used.
    pub switching_overhead: Option<f64>,
    pub batch_makespan_s: Option<f64>,
    /// Where the batch reference came from: "self", "cache <file>", "run",
    /// "file <path>" or "none".
    pub baseline: String,
    /// Paper 001: makespan over the standard deviation of completion times;
    /// null with fewer than two jobs or equal completion times.
    pub fairness: Option<f64>,
    /// Paper 001 Fig. 8: the mean and standard deviation over the jobs of
    /// their major page faults per minute (`major_faults_per_min`); null
    /// when no job finished.
    #[serde(default)]
    pub major_faults_per_min_mean: Option<f64>,
    #[serde(default)]
    pub major_faults_per_min_std: Option<f64>,
    /// Node-wide pages swapped in and out during the run (/proc/vmstat).
    pub swap_in_pages: u64,
    pub swap_out_pages: u64,
    /// Switches and the time the mechanisms took for them, in total.
    pub switch_count: usize,
    pub switch_time_s: f64,
    /// Of `switch_time_s`, the time account's samples (the switches'
    /// `steps.sampling_s`, summed); 0 in results written before it was measured.
    #[serde(default)]
    pub switch_sampling_s: f64,
    /// True when the run was stopped by a signal before all jobs ended.
    pub interrupted: bool,
    pub jobs: Vec<JobResult>,
    /// Which job ran when: one interval per stretch of running.
    pub timeline: Vec<Interval>,
    pub switches: Vec<Switch>,
    pub samples: Vec<Sample>,
    /// Where the makespan went (memgang-runtime's `account`); absent in results written
    /// before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<RunAccount>,
    /// What memgang's own process used over the run; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorUsage>,
}

/// memgang's own process over a run (`getrusage(RUSAGE_SELF)` at its end):
/// all its threads (the switches, the samplers, the page-in and restore
/// threads, the exit-record listener), not its jobs. The system part holds
/// the kernel's work done in its calls: a page-out's reclaim and writes
/// submitted, a page-in's faults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutorUsage {
    pub user_cpu_s: f64,
    pub system_cpu_s: f64,
    /// Its peak resident memory (`ru_maxrss`).
    pub max_rss_bytes: u64,
}

/// A job's time account: its wall time from start to end, split into
/// parts that add up to it (docs/results.md). Times in seconds of the
/// job's wall time: a part measured per task (thread) is summed over its
/// tasks and divided by `width`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobAccount {
    /// From its start to its end (memgang's clock).
    pub wall_s: f64,
    /// On a CPU (the scheduler's run time of its tasks).
    pub cpu_s: f64,
    /// Runnable, waiting for a CPU (run_delay: schedstat's second field).
    pub run_queue_s: f64,
    /// Asleep in I/O wait (taskstats blkio_delay): the swap-ins it faulted
    /// on, the writeback its reclaim waited for, its own file I/O.
    pub io_wait_s: f64,
    /// Frozen by the policy, outside the switches that froze and thawed it.
    pub frozen_s: f64,
    /// Frozen inside the switch that suspended it (its page-out) and
    /// inside the one that resumed it (its page-in and thaw).
    pub switch_out_s: f64,
    pub switch_in_s: f64,
    /// The rest: time the job slept by itself (a barrier, a message, a
    /// pipe) and what nothing measured. Near 0 for a job that only computes.
    pub unaccounted_s: f64,
    /// What the kernel counted while the job was frozen, measured by
    /// sampling its processes' taskstats right after each freeze and each
    /// thaw: I/O wait (a task the freezer caught inside a swap-in wait
    /// keeps its wait open until the thaw), CPU (a task on its way into
    /// the freezer) and run-queue wait. That time is already the freeze's
    /// (`frozen_s`, the switches'), so it is taken out of `io_wait_s`,
    /// `cpu_s`, `run_queue_s` and shown here; `frozen_samples` freeze-thaw
    /// pairs were sampled.
    #[serde(default)]
    pub io_wait_while_frozen_s: f64,
    #[serde(default)]
    pub cpu_while_frozen_s: f64,
    #[serde(default)]
    pub run_queue_while_frozen_s: f64,
    #[serde(default)]
    pub frozen_samples: u32,
    /// Block-I/O delay the kernel added to a thread that no wait can have
    /// had: grown between two readings of the thread by more than the time
    /// since it was last seen out of a wait or its job's previous running
    /// stretch began (this kernel adds the time since boot at times),
    /// summed over its threads: left out of `io_wait_s` and
    /// `io_wait_while_frozen_s` (docs/results.md).
    #[serde(default)]
    pub io_wait_dropped_s: f64,
    /// The job's running time in which some thread's block-I/O delay grew by more
    /// than its other states left room for (the growth is in
    /// `io_wait_dropped_s`, with the real waits that ended beside it): for
    /// that long `io_wait_s` was not measured, and what the job waited then
    /// is in `unaccounted_s`. 0 where the counters held throughout (and in
    /// older files).
    #[serde(default)]
    pub io_wait_untrusted_s: f64,
    /// Memory stalls, overlapping the parts above (the kernel counts them
    /// as wall time around work that is also on a CPU or in I/O wait):
    /// submitting swap-in reads, waiting on evicted working-set pages
    /// (thrashing), direct reclaim (freepages), compaction.
    pub swapin_delay_s: f64,
    pub thrashing_delay_s: f64,
    pub reclaim_delay_s: f64,
    pub compact_delay_s: f64,
    /// User and system CPU time of all its processes, in CPU seconds
    /// (rusage), as in `cpu_s` of the job.
    pub user_cpu_s: f64,
    pub system_cpu_s: f64,
    /// Tasks (threads of all its processes) whose exit records it sums,
    /// and the mean number of them active at once (on a CPU, queued or in
    /// I/O wait) over its running time, at least 1.
    pub tasks: u32,
    pub width: f64,
    /// "taskstats", or why the delays are missing ("rusage only: ...";
    /// then `cpu_s` is rusage's, `width` 1, and the waits are in
    /// `unaccounted_s`).
    pub source: String,
    /// Hardware counters of its processes and threads (`perf_event_open`,
    /// inherited); null where the kernel refused (`RunAccount::hw_counters`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw: Option<HwCounts>,
    /// Why there are no hardware counters, where the kernel refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_missing: Option<String>,
    /// The kernel's software counters of its processes and threads
    /// (`perf_event_open`, inherited), and why not where refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sw: Option<SwCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sw_missing: Option<String>,
    /// Its anonymous huge pages (its cgroup's counter: v1 `total_rss_huge`,
    /// v2 `anon_thp`) at the end of each quantum, just after its freeze and
    /// before its page-out, and at every sample while it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anon_huge_quantum_end: Option<HugeStat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anon_huge_running: Option<HugeStat>,
    /// The machine's mTHP event counters (hugepages-SIZE/stats, e.g.
    /// anon_fault_alloc, swpout, split) grown over the job's life, by
    /// size, nonzero only: machine-wide, so they include the other jobs'.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub mthp: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
    /// Exit records lost on the node up to the job's end (the kernel could
    /// not deliver them, or more were held than memgang keeps): when not
    /// 0, its delays may be short of some tasks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_lost: u64,
    /// The same job in the batch reference (the baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchJob>,
}

impl JobAccount {
    /// The parts, in order, with the names tables use.
    pub fn parts(&self) -> [(&'static str, f64); 7] {
        [
            ("cpu", self.cpu_s),
            ("run queue", self.run_queue_s),
            ("io wait", self.io_wait_s),
            ("frozen", self.frozen_s),
            ("switch out", self.switch_out_s),
            ("switch in", self.switch_in_s),
            ("unaccounted", self.unaccounted_s),
        ]
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HwCounts {
    pub cycles: u64,
    pub instructions: u64,
    pub llc_misses: u64,
    pub dtlb_misses: u64,
}

/// The kernel's software perf events of a job: faults, context switches,
/// CPU migrations; its task and CPU clocks in ns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwCounts {
    pub page_faults: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub context_switches: u64,
    pub cpu_migrations: u64,
    pub task_clock_ns: u64,
    pub cpu_clock_ns: u64,
}

/// Readings of a job's anonymous huge pages, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HugeStat {
    pub samples: u32,
    pub mean_bytes: u64,
    pub min_bytes: u64,
    pub max_bytes: u64,
}

/// A job's numbers in the batch run it is compared with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchJob {
    pub wall_s: f64,
    /// User plus system CPU seconds (rusage), and the system part.
    pub cpu_s: f64,
    pub system_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw: Option<HwCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sw: Option<SwCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anon_huge_running: Option<HugeStat>,
}

/// Where the run's makespan went: the node's time split into switches,
/// idle (no job running, none switching) and the running jobs' parts,
/// a stretch run by k jobs at once counting 1/k for each.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunAccount {
    pub makespan_s: f64,
    pub cpu_s: f64,
    pub run_queue_s: f64,
    pub io_wait_s: f64,
    pub switch_s: f64,
    pub idle_s: f64,
    pub unaccounted_s: f64,
    /// Summed over the jobs, beside the split (overlapping it).
    pub jobs_frozen_s: f64,
    pub swapin_delay_s: f64,
    pub thrashing_delay_s: f64,
    pub reclaim_delay_s: f64,
    /// The jobs' user and system CPU seconds (rusage), and the same in
    /// the batch reference (null without one).
    pub user_cpu_s: f64,
    pub system_cpu_s: f64,
    #[serde(default)]
    pub batch_cpu_s: Option<f64>,
    /// "on", or why not: delay accounting (taskstats) and hardware counters.
    pub delay_accounting: String,
    pub hw_counters: String,
    /// Exit records the kernel could not deliver (a full socket buffer).
    pub records_lost: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub swap_bytes: u64,
    pub cgroup: String,
    pub freezer: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct JobResult {
    pub name: String,
    pub command: Vec<String>,
    pub ranks: u32,
    pub declared_memory_bytes: Option<u64>,
    pub arrival_s: f64,
    pub start_s: Option<f64>,
    pub finish_s: Option<f64>,
    /// Finish minus arrival: the time the user waited for the job.
    pub completion_s: Option<f64>,
    /// User plus system CPU time of all its processes (wait4 rusage).
    pub cpu_s: f64,
    /// The system part of `cpu_s`: page faults and the reclaim the kernel
    /// does in the job's context when its cgroup is full, the part of a
    /// job's time that paging adds to (issue 12). Absent in results
    /// written before it was recorded.
    #[serde(default)]
    pub system_cpu_s: Option<f64>,
    pub major_faults: u64,
    /// Major faults per minute from its start to its finish, or to the
    /// interruption (paper 001 Fig. 8); null for a job that never started.
    #[serde(default)]
    pub major_faults_per_min: Option<f64>,
    /// Pages swapped in and out on the job's behalf. Exact where the cgroup
    /// counts them (v2 with pswpin/pswpout); otherwise the node's counts
    /// attributed per 100 ms sample by the job's share of major faults
    /// (swap-in) and of swap growth (swap-out). See docs/results.md.
    pub swap_in_pages: u64,
    pub swap_out_pages: u64,
    pub peak_anon_bytes: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Why the job could not run or was stopped, if it did not exit by itself.
    pub error: Option<String>,
    /// The last lines the job wrote to stderr, when it failed.
    pub stderr_tail: Option<String>,
    pub log_dir: Option<String>,
    /// Dynamic coscheduling: the largest CPU priority boost the job got,
    /// in nice steps (0: never raised).
    #[serde(default)]
    pub max_boost: u32,
    /// Dynamic coscheduling: seconds of its run it spent boosted.
    #[serde(default)]
    pub boosted_s: f64,
    /// Bytes put back on huge pages (`MADV_COLLAPSE`) after its page-ins:
    /// what huge pages mapped at its page-outs and came back whole.
    #[serde(default)]
    pub huge_restored_bytes: u64,
    /// Where its time went (memgang-runtime's `account`); null for a job that never
    /// ran to its end and in results written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<JobAccount>,
}

/// What "before its exit" leaves out of a job that ends in a quantum: its
/// last half second, its teardown. A Python job frees its arrays and then
/// walks its objects within about 0.3 s here (the samples of
/// `bench/results/realapps-share-20261126b/cg-q10s-so-ao-ai.json`: anon
/// 364 -> 5 MiB, then about 3,000 major faults in 0.3 s), reading back
/// pages it left in swap long before and no record covers.
pub const EXIT_MARGIN_S: f64 = 0.5;

impl RunResult {
    /// Major faults of the jobs switch `k` resumed, from the switch's end
    /// to the next switch (or the run's end): what its page-in left to
    /// fault back (issue 12's target: at most 1% of the pages it brought
    /// in). `None` when no sample falls in that quantum.
    pub fn faults_after_switch(&self, k: usize) -> Option<u64> {
        self.faults_in_quantum(k, false)
    }

    /// The same, without the last [`EXIT_MARGIN_S`] of a job that ends in
    /// the quantum: the page-in's misses apart from a teardown's.
    pub fn faults_after_switch_before_exit(&self, k: usize) -> Option<u64> {
        self.faults_in_quantum(k, true)
    }

    /// Stores both counts in each switch (`faults_after`,
    /// `faults_after_before_exit`), so that tables made from the JSON read
    /// them instead of counting again.
    pub fn count_faults_after_switches(&mut self) {
        for k in 0..self.switches.len() {
            let (all, before_exit) = (
                self.faults_after_switch(k),
                self.faults_after_switch_before_exit(k),
            );
            let s = &mut self.switches[k];
            s.faults_after = all;
            s.faults_after_before_exit = before_exit;
        }
    }

    fn faults_in_quantum(&self, k: usize, before_exit: bool) -> Option<u64> {
        let s = self.switches.get(k)?;
        let start = s.at_s + s.took_s;
        let next = self.switches.get(k + 1).map_or(self.makespan_s, |n| n.at_s);
        let mut total = None;
        for job in &s.resumed {
            let finish = self
                .jobs
                .iter()
                .find(|j| &j.name == job)
                .and_then(|j| j.finish_s);
            let end = match finish {
                Some(f) if before_exit => next.min(f - EXIT_MARGIN_S),
                _ => next,
            };
            let series = self.samples.iter().filter(|x| !x.in_switch).flat_map(|x| {
                x.jobs
                    .iter()
                    .filter(|j| &j.job == job)
                    .map(|j| (x.t_s, j.major_faults))
            });
            let (mut before, mut first, mut last) = (None, None, None);
            for (t, f) in series {
                if t <= start {
                    before = Some(f);
                } else if t <= end {
                    first.get_or_insert(f);
                    last = Some(f);
                }
            }
            if let (Some(last), Some(first)) = (last, first) {
                *total.get_or_insert(0) += last.saturating_sub(before.unwrap_or(first));
            }
        }
        total
    }
}

impl JobResult {
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0) && self.error.is_none()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Interval {
    pub job: String,
    pub start_s: f64,
    pub end_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Switch {
    pub at_s: f64,
    pub took_s: f64,
    pub suspended: Vec<String>,
    pub resumed: Vec<String>,
    /// Bytes the switch paged out and in itself (0 under `lru`, where the
    /// kernel pages on demand after the switch).
    #[serde(default)]
    pub paged_out_bytes: u64,
    #[serde(default)]
    pub paged_in_bytes: u64,
    /// Time spent paging out (suspensions, making room) and paging in. A
    /// page-in that overlapped the page-out counts its own duration, so
    /// the two can add up to more than `took_s`.
    #[serde(default)]
    pub page_out_s: f64,
    #[serde(default)]
    pub page_in_s: f64,
    /// Node pages swapped in and out during the switch (/proc/vmstat): the
    /// disk traffic the switch caused, for its physical limit. Page-out
    /// writes are counted when submitted.
    #[serde(default)]
    pub swap_in_pages: u64,
    #[serde(default)]
    pub swap_out_pages: u64,
    /// Bytes background writing (`bg`) paged out of the suspended jobs in
    /// their quantum's last part, before this switch.
    #[serde(default)]
    pub background_bytes: u64,
    /// What went wrong without stopping the switch (a nearly full swap
    /// device, a mechanism the kernel refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Major faults of the resumed jobs in the quantum after this switch
    /// ([`RunResult::faults_after_switch`]), and the same without a job's
    /// exit ([`RunResult::faults_after_switch_before_exit`]); absent in
    /// results written before they were stored, or without samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults_after: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults_after_before_exit: Option<u64>,
    /// Where the switch's time went, step by step ([`SwitchSteps`]);
    /// absent in results written before 2026-11-29.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<SwitchSteps>,
}

/// A switch's time by step, in seconds, measured by the switch engine and
/// the executor around each call (docs/results.md): the steps the switch's
/// own thread waited in, one after another, so that they and `other_s` add
/// up to the switch's `took_s`. A page-in streamed beside the page-out
/// runs in another thread: only the wait for its end shows
/// (`stream_wait_s`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SwitchSteps {
    /// Freezing the outgoing jobs (the cgroup freezer, or signals).
    pub freeze_s: f64,
    /// The time account's samples: listing a frozen job's processes once
    /// (its page-out reuses the list), their taskstats and the cgroup's
    /// huge pages after the freeze, their taskstats after the thaw.
    pub sampling_s: f64,
    /// Waiting for the outgoing jobs' huge pages to go back (the restore
    /// started at their last resume).
    pub huge_wait_s: f64,
    /// Reading which pages are resident (PAGEMAP_SCAN), per process.
    pub scan_s: f64,
    /// The working set over the quantum: reading what an outgoing job
    /// referenced (smaps_rollup) and clearing an incoming job's accessed
    /// bits (clear_refs) for its next (issue 47).
    pub wss_s: f64,
    /// Cgroup reclaim of the stopped jobs, oldest pages first (`so`'s
    /// make-room, before its MADV_PAGEOUT).
    pub reclaim_s: f64,
    /// MADV_PAGEOUT calls (process_madvise): unmapping and submitting the
    /// writes.
    pub advise_s: f64,
    /// Waiting for the page-out's writes to leave the pool (a reclaim of
    /// the stopped group).
    pub drain_s: f64,
    /// At resume: waiting for a page-in started earlier (streamed beside
    /// the page-out, overlapped, or a prefetch) to end.
    pub stream_wait_s: f64,
    /// At resume: paging in what was left of the records.
    pub page_in_s: f64,
    /// Thawing the incoming jobs.
    pub thaw_s: f64,
    /// The rest of `took_s`: cgroup reads, the policy's bookkeeping,
    /// starting jobs, the switch sampler.
    pub other_s: f64,
}

impl SwitchSteps {
    /// Run `f`, adding its time to the step `slot` (a field of a
    /// `SwitchSteps`).
    pub fn time<T>(slot: &mut f64, f: impl FnOnce() -> T) -> T {
        let t = std::time::Instant::now();
        let r = f();
        *slot += t.elapsed().as_secs_f64();
        r
    }

    /// The measured steps together.
    pub fn measured_s(&self) -> f64 {
        self.freeze_s
            + self.sampling_s
            + self.huge_wait_s
            + self.scan_s
            + self.wss_s
            + self.reclaim_s
            + self.advise_s
            + self.drain_s
            + self.stream_wait_s
            + self.page_in_s
            + self.thaw_s
    }

    /// Set `other_s` to what of a switch of `took_s` no step measured.
    pub fn close(mut self, took_s: f64) -> SwitchSteps {
        self.other_s = (took_s - self.measured_s()).max(0.0);
        self
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub t_s: f64,
    /// Node pages swapped in / out since the previous sample.
    pub swap_in: u64,
    pub swap_out: u64,
    pub pool_usage_bytes: u64,
    /// Node memory PSI "some" avg10 (%), when the kernel has PSI.
    pub psi_some_avg10: Option<f64>,
    /// Taken while a switch ran, by a thread beside it: node swap traffic
    /// and pool usage only, `jobs` is empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_switch: bool,
    pub jobs: Vec<JobSample>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobSample {
    pub job: String,
    /// What the kernel says: "running" or "frozen" (by the freezer or by
    /// SIGSTOP), read at the sample instant, not what memgang intended.
    pub state: String,
    pub anon_bytes: u64,
    pub swap_bytes: Option<u64>,
    pub major_faults: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Two switches at 1 s and 3 s (0.5 s each) resuming "b" then "a"; a
    /// sample every 0.5 s with the jobs' cumulative major faults.
    fn run() -> RunResult {
        let samples: Vec<_> = (1..=10)
            .map(|i| {
                let t = i as f64 * 0.5;
                json!({"t_s": t, "swap_in": 0, "swap_out": 0, "pool_usage_bytes": 0,
                       "psi_some_avg10": null, "jobs": [
                    {"job": "a", "state": "running", "anon_bytes": 0, "swap_bytes": null,
                     "major_faults": 100 * i},
                    {"job": "b", "state": "running", "anon_bytes": 0, "swap_bytes": null,
                     "major_faults": i * i},
                ]})
            })
            .collect();
        let sw = |at: f64, out: &str, inn: &str| json!({"at_s": at, "took_s": 0.5, "suspended": [out], "resumed": [inn]});
        serde_json::from_value(json!({
            "schema": 1, "memgang_version": "t", "experiment": "t", "policy": "gang",
            "quantum_s": 1.0, "switch": "so/ao/ai", "dynamic_coscheduling": false,
            "pool_memory_bytes": 0,
            "machine": {"hostname": "t", "kernel": "t", "cpus": 2, "memory_bytes": 0,
                        "swap_bytes": 0, "cgroup": "v1", "freezer": "t"},
            "started_unix_s": 0, "makespan_s": 5.0, "switching_overhead": null,
            "batch_makespan_s": null, "baseline": "none", "fairness": null,
            "swap_in_pages": 0, "swap_out_pages": 0, "switch_count": 2,
            "switch_time_s": 1.0, "interrupted": false, "jobs": [], "timeline": [],
            "switches": [sw(1.0, "a", "b"), sw(3.0, "b", "a")],
            "samples": samples,
        }))
        .unwrap()
    }

    #[test]
    fn faults_after_a_switch_count_the_resumed_jobs_quantum_only() {
        let r = run();
        // "b" from 1.5 s (9 faults) to 3 s (36): 27.
        assert_eq!(r.faults_after_switch(0), Some(27));
        // "a" from 3.5 s (700) to the run's end at 5 s (1000): 300.
        assert_eq!(r.faults_after_switch(1), Some(300));
        assert_eq!(r.faults_after_switch(2), None);
    }

    #[test]
    fn faults_before_an_exit_leave_out_the_jobs_last_half_second() {
        let mut r = run();
        let job = |name: &str, finish: f64| {
            serde_json::from_value::<JobResult>(json!({
                "name": name, "command": [], "ranks": 1, "declared_memory_bytes": null,
                "arrival_s": 0.0, "start_s": 0.0, "finish_s": finish, "completion_s": finish,
                "cpu_s": 0.0, "major_faults": 0, "swap_in_pages": 0, "swap_out_pages": 0,
                "peak_anon_bytes": 0, "exit_code": 0, "signal": null, "error": null,
                "stderr_tail": null, "log_dir": null}))
            .unwrap()
        };
        // "a" ends at 4.5 s: before its exit is up to 4.0 s (800 faults),
        // from 3.5 s (700): 100. "b" ends after its quantum: all 27 count.
        r.jobs = vec![job("a", 4.5), job("b", 5.0)];
        assert_eq!(r.faults_after_switch_before_exit(1), Some(100));
        assert_eq!(r.faults_after_switch_before_exit(0), Some(27));
        r.count_faults_after_switches();
        let stored: Vec<_> = r
            .switches
            .iter()
            .map(|s| (s.faults_after, s.faults_after_before_exit))
            .collect();
        assert_eq!(stored, [(Some(27), Some(27)), (Some(300), Some(100))]);
    }

    /// A switch's steps and `other_s` add up to its time; a switch record
    /// written before the steps were has none, and one with only some
    /// steps reads the others as 0.
    #[test]
    fn steps_close_to_the_switch_time_and_older_records_have_none() {
        let mut steps = SwitchSteps::default();
        SwitchSteps::time(&mut steps.scan_s, || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        steps.reclaim_s += 0.3;
        let closed = steps.close(0.5);
        assert!(
            (closed.measured_s() + closed.other_s - 0.5).abs() < 1e-9,
            "{closed:?}"
        );
        assert!(closed.scan_s >= 0.002, "{closed:?}");
        assert!(run().switches.iter().all(|s| s.steps.is_none()));
        let partial: SwitchSteps = serde_json::from_value(json!({"drain_s": 0.1})).unwrap();
        assert_eq!(partial.drain_s, 0.1);
        assert_eq!(partial.measured_s(), 0.1);
    }
}
