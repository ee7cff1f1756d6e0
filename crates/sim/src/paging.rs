//! The paging model: what moving memory costs on a node's swap device, and
//! how much a job slows down when its memory does not fit.
//!
//! Deliberately coarse, so that a million jobs simulate in seconds:
//! memory is bytes per (job, node), not pages; a switch costs bytes out over
//! the device's write bandwidth plus bytes in over its read bandwidth
//! (sequential for a bulk page-in, 4 KiB random reads for demand faults);
//! a job whose memory exceeds the node's faults at a steady rate.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

pub const PAGE: f64 = 4096.0;

/// A node's swap device, as `memgang calibrate` measures it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// Sequential write bandwidth, bytes/s (page-out in bulk).
    pub write_bps: f64,
    /// Sequential read bandwidth, bytes/s (bulk page-in).
    pub read_bps: f64,
    /// Random 4 KiB reads per second (demand faults).
    pub random_read_iops: f64,
}

impl Default for Device {
    /// A SATA SSD: what memgang assumes without a calibration file.
    fn default() -> Self {
        Device {
            write_bps: 400e6,
            read_bps: 500e6,
            random_read_iops: 20_000.0,
        }
    }
}

impl Device {
    /// Service time of one demand fault: read the page at random, and
    /// write a dirty page out to make room for it.
    pub fn fault_s(&self) -> f64 {
        1.0 / self.random_read_iops + PAGE / self.write_bps
    }

    /// Demand faults bring pages in at this rate, bytes/s.
    pub fn demand_read_bps(&self) -> f64 {
        self.random_read_iops * PAGE
    }
}

/// The file `memgang sim --device` reads and `memgang calibrate` writes:
/// a [`Device`], and optionally how close the swap traffic of a real switch
/// came to the device's sequential bandwidths, and where the numbers came
/// from (kept, not read).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceFile {
    pub write_bps: f64,
    pub read_bps: f64,
    pub random_read_iops: f64,
    /// A real switch moves pages at this share of the sequential
    /// bandwidths (`memgang calibrate`: the switch time the model predicts
    /// from them over the time measured); default 1.
    #[serde(default = "one")]
    pub switch_efficiency: f64,
    /// Pages one demand fault brings in (the kernel's swap readahead);
    /// default [`READAHEAD_PAGES`].
    #[serde(default = "readahead")]
    pub readahead_pages: f64,
    /// What a fault that reads a readahead window costs, in random single
    /// reads: `memgang calibrate` times in-order faults against random
    /// ones on the fault path (`memgang_linux::faults`); default 1.
    #[serde(default = "one")]
    pub readahead_reads: f64,
    /// CPU seconds the kernel spends per page it moves in or out under
    /// memory pressure; default [`RECLAIM_CPU_S`].
    #[serde(default = "reclaim_cpu")]
    pub reclaim_cpu_s_per_page: f64,
    /// The share of a random toucher's faults that evict its own pages
    /// when memory is short and it lacks [`OWN_EVICT_AT_LACK`] of its
    /// memory (`memgang calibrate` measures it); default
    /// [`OWN_EVICT_SHARE`].
    #[serde(default = "own_evict")]
    pub own_evict_share: f64,
    /// How that share moves per unit of the share of its memory it lacks
    /// (`memgang calibrate`: from two pools); default [`OWN_EVICT_SLOPE`].
    #[serde(default = "own_evict_slope")]
    pub own_evict_slope: f64,
    /// How far the share leans towards the older of the jobs (`memgang
    /// calibrate`: half the first-made job's share less the other's);
    /// default [`OWN_EVICT_SPLIT`].
    #[serde(default = "own_evict_split")]
    pub own_evict_split: f64,
    /// Random 4 KiB reads per second with 8 in flight (`memgang
    /// calibrate`); when given, the device serves a thrashing node's
    /// readahead at this rate (see [`PagingModel::queue_read_iops`]).
    #[serde(default)]
    pub queue_read_iops: Option<f64>,
    /// Provenance (machine, date, device, sizes); not used by the model.
    #[serde(default)]
    pub calibration: Option<serde::de::IgnoredAny>,
}

/// Linux reads swap ahead in clusters of `2^vm.page-cluster` pages, and
/// the default `page-cluster` is 3: 8 pages. In the stored runs of this
/// project's machine (Linux 6.18; `bench/sim_paging_params.py`) the swept
/// workloads read 3.0 to 7.7 pages per major fault (thrashing `cosched`
/// and `lru`), the random one 1.0; the kernel's own number is kept as the
/// default, an upper bound.
pub const READAHEAD_PAGES: f64 = 8.0;

/// Kernel CPU per page moved (fault handling, reclaim scanning, swap I/O
/// submission), charged to the jobs: the stored measured runs' extra CPU
/// time over their batch runs, divided by the pages swapped in and out,
/// was 6 to 20 µs (`lru` 5.9 to 19.6, thrashing `cosched` 11.8 to 17.7;
/// `bench/sim_paging_params.py`); 12 µs is the middle.
pub const RECLAIM_CPU_S: f64 = 12e-6;

/// The share of a random toucher's faults that evict its own pages when
/// the node has no free memory ([`Refill`]). memgang puts each job in a
/// memory cgroup of its own under the pool, and the pool's reclaim walks
/// every group, the running job's too, so a resumed job keeps evicting
/// some of its own pages as it faults the others' out. Measured
/// (`bench/sim_paging_params.py`, its second table): the random pairs of
/// 700 MiB in the 1 GiB pool, which lacked 376 MiB at each resume,
/// faulted 670 MiB per resume on average at 20 s quanta and 694 at 30 s,
/// where the page-in had the time to finish (`adaptive-lru-20261127-q20`
/// and `-r2`): `1 - lack / faults` = 0.44 and 0.46; 0.45 is between. (At
/// 10 s the page-in is cut short and the share cannot be read off.) A
/// strict LRU over one group would give 0: what it lacks, once its old
/// pages are gone. `memgang calibrate` measures it on the node with two
/// processes of its own (`faults::own_share`): 0.47 on this machine
/// (`bench/results/calibrate-20261127T151044Z`).
pub const OWN_EVICT_SHARE: f64 = 0.45;

/// What a resumed job lacks of its memory where [`OWN_EVICT_SHARE`] holds:
/// 376 of 700 MiB, memgang's measured pairs.
pub const OWN_EVICT_AT_LACK: f64 = 0.54;

/// How the share moves with what the job lacks of its memory, per unit
/// of that share: the less it lacks, the more of its faults take its own
/// pages. Measured (`bench/own_share.sh`,
/// `bench/results/own-share-20261127-sweep`): two processes of 256 MiB
/// under pools from 282 to 486 MiB, lacking 0.11 to 0.91 of themselves,
/// shares 0.74 to 0.39, least squares -0.419. memgang's pairs agree: at
/// 600 MiB (lacking 0.29) their resumes read 0.52 to 0.58 against 0.44
/// and 0.46 at 700 (`bench/sim_paging_params.py`).
pub const OWN_EVICT_SLOPE: f64 = -0.42;

/// The share is not the same for the two jobs of a pair: the one whose
/// group was made first loses more of its own pages at every resume, at
/// every pool size. This is half the difference, added for a job older
/// than the others with memory on its node and taken off for one younger
/// than them all. Measured (`bench/own_share.sh`,
/// `bench/results/own-share-20261127-split`): two processes of 256 MiB
/// under seven pools from 282 to 486 MiB, half the difference 0.052 to
/// 0.086, mean 0.068. memgang's random pairs show it too: the first
/// job's resumes fault more at every quantum (`bench/sim_paging_params.py`,
/// its second table).
pub const OWN_EVICT_SPLIT: f64 = 0.07;

fn readahead() -> f64 {
    READAHEAD_PAGES
}

fn reclaim_cpu() -> f64 {
    RECLAIM_CPU_S
}

fn own_evict() -> f64 {
    OWN_EVICT_SHARE
}

fn own_evict_slope() -> f64 {
    OWN_EVICT_SLOPE
}

fn own_evict_split() -> f64 {
    OWN_EVICT_SPLIT
}

fn one() -> f64 {
    1.0
}

impl DeviceFile {
    /// The device the model pages with: the sequential bandwidths scaled
    /// by the switch efficiency, so that a switch of B bytes costs what
    /// the real one did. Demand faults keep the random read rate.
    pub fn device(&self) -> Result<Device, String> {
        // Ranges far around any real swap device (a floppy to RAM), so that
        // a typo is caught and no simulated switch or fault can take longer
        // than the clock holds.
        for (name, v, min, max) in [
            ("write_bps", self.write_bps, 1e5, 1e12),
            ("read_bps", self.read_bps, 1e5, 1e12),
            ("random_read_iops", self.random_read_iops, 1.0, 1e9),
            ("switch_efficiency", self.switch_efficiency, 1e-3, 1e3),
            // A readahead cluster is at most a few hundred pages (Linux caps
            // page-cluster far below 2^10); a page costs at most a second.
            ("readahead_pages", self.readahead_pages, 1.0, 1024.0),
            // At most one read per page of the window.
            ("readahead_reads", self.readahead_reads, 1e-3, 1024.0),
            (
                "reclaim_cpu_s_per_page",
                self.reclaim_cpu_s_per_page,
                0.0,
                1.0,
            ),
            // Under 1: at 1 every fault would evict a page of its own and
            // the job would never get its memory back.
            ("own_evict_share", self.own_evict_share, 0.0, 0.95),
            // The share goes from 0 to 0.95 as the lack goes from 0 to 1.
            ("own_evict_slope", self.own_evict_slope, -1.0, 1.0),
            // Half a difference between two shares of 0 to 0.95.
            ("own_evict_split", self.own_evict_split, -0.5, 0.5),
            (
                "queue_read_iops",
                self.queue_read_iops.unwrap_or(1.0),
                1.0,
                1e9,
            ),
        ] {
            if !(v.is_finite() && (min..=max).contains(&v)) {
                return Err(format!(
                    "{name} is {v}: it must be a number between {min:e} and {max:e}"
                ));
            }
        }
        let scaled = [
            self.write_bps * self.switch_efficiency,
            self.read_bps * self.switch_efficiency,
        ];
        if scaled.iter().any(|b| !(1e5..=1e12).contains(b)) {
            return Err(format!(
                "switch_efficiency {} scales the bandwidths to {scaled:?} bytes/s, outside 1e5..1e12",
                self.switch_efficiency
            ));
        }
        Ok(Device {
            write_bps: self.write_bps * self.switch_efficiency,
            read_bps: self.read_bps * self.switch_efficiency,
            random_read_iops: self.random_read_iops,
        })
    }

    /// The paging model the file describes: [`DeviceFile::device`] and
    /// the kernel's readahead and reclaim cost, the rest as in `base`.
    pub fn model(&self, base: PagingModel) -> Result<PagingModel, String> {
        Ok(PagingModel {
            device: self.device()?,
            readahead_pages: self.readahead_pages,
            readahead_reads: self.readahead_reads,
            reclaim_cpu_s: self.reclaim_cpu_s_per_page,
            own_evict_share: self.own_evict_share,
            own_evict_slope: self.own_evict_slope,
            own_evict_split: self.own_evict_split,
            queue_read_iops: self.queue_read_iops,
            ..base
        })
    }
}

/// What a job sees on one of its nodes while it runs there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeLoad {
    /// Paper 004's memory fraction: the node's memory over what its
    /// running jobs want, at most 1.
    pub c: f64,
    /// Bytes the node's running jobs want, together.
    pub want: u64,
    /// Ranks running on the node over its CPUs, at least 1.
    pub cpu_share: f64,
}

/// A random toucher's demand page-in under the pool's reclaim, as a
/// function of the sweeps of its memory it has touched since it resumed
/// (`x`): every touch of a page it lacks is a fault, and with no free
/// memory a fault evicts one of the job's own pages with probability
/// `own` (the pool's reclaim walks its group too), another job's
/// otherwise. What it lacks then falls as `lack · e^(-(1-own)·x)`, and it
/// faults `lack / (1 - own)` in all if it has the time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Refill {
    /// Pages it lacked at its resume.
    pub lack: f64,
    /// `1 - own`: the share of its faults that shrink its lack.
    pub rate: f64,
    /// Seconds a fault costs it: its read, and the kernel's work.
    pub fault_s: f64,
    /// Seconds of computing a sweep of its memory takes.
    pub sweep_s: f64,
    /// Sweeps until it lacks under a page, or its work is done.
    pub end_sweeps: f64,
}

impl Refill {
    /// Pages faulted after `x` sweeps.
    pub fn faults(&self, x: f64) -> f64 {
        self.lack / self.rate * (1.0 - (-self.rate * x).exp())
    }

    /// Pages still lacking after `x` sweeps.
    pub fn missing(&self, x: f64) -> f64 {
        self.lack * (-self.rate * x).exp()
    }

    /// Pages of its own faulted back after `x` sweeps (and evicted again):
    /// the faults beyond what its lack fell by.
    pub fn own(&self, x: f64) -> f64 {
        self.faults(x) - (self.lack - self.missing(x))
    }

    /// Seconds `x` sweeps take: their computing and their faults.
    pub fn time(&self, x: f64) -> f64 {
        x * self.sweep_s + self.faults(x) * self.fault_s
    }

    /// Sweeps done after `t` seconds (Newton on `time`, which is convex
    /// and increasing in x; no further than `end_sweeps`).
    pub fn sweeps_at(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        let mut x = t / (self.sweep_s + self.lack * self.fault_s);
        for _ in 0..64 {
            let e = (-self.rate * x).exp();
            let step = (t - self.time(x)) / (self.sweep_s + self.lack * self.fault_s * e);
            x += step;
            if step.abs() <= 1e-12 * (1.0 + x) {
                break;
            }
        }
        x.clamp(0.0, self.end_sweeps)
    }

    /// The whole page-in: (seconds, seconds of computing in it, pages
    /// faulted).
    pub fn whole(&self) -> (f64, f64, f64) {
        let x = self.end_sweeps;
        (self.time(x), x * self.sweep_s, self.faults(x))
    }
}

/// What a node does when a rank of a parallel job faults (paper 004 §3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultPolicy {
    /// The faulting node waits for the page; the job's other nodes wait as
    /// far as they synchronise with it (`F_pf` of the service time).
    #[default]
    Spin,
    /// The faulting node runs a local sequential job meanwhile. The parallel
    /// job is delayed as under SPIN plus a local context switch per fault;
    /// the local jobs' gain is not simulated (there are none).
    Lug,
    /// Every node of the job switches to another parallel job for the
    /// fault: each fault costs `T_pcs` instead (paper 004 eq. 1).
    Pcs,
}

impl FromStr for FaultPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "spin" => Ok(FaultPolicy::Spin),
            "lug" => Ok(FaultPolicy::Lug),
            "pcs" => Ok(FaultPolicy::Pcs),
            _ => Err(format!(
                "unknown page-fault policy {s:?}: expected spin, lug or pcs"
            )),
        }
    }
}

impl fmt::Display for FaultPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultPolicy::Spin => "spin",
            FaultPolicy::Lug => "lug",
            FaultPolicy::Pcs => "pcs",
        })
    }
}

/// How jobs touch their memory, which decides what their faults cost them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// In order, as paper 004's applications sweep their arrays: a fault's
    /// swap readahead brings the pages the job touches next, and the
    /// kernel reads them while the job computes on those it has.
    #[default]
    Sweep,
    /// At random: a fault brings one page the job uses (the kernel's
    /// readahead window shrinks to it), and the job waits for it.
    Random,
}

impl FromStr for Access {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sweep" => Ok(Access::Sweep),
            "random" => Ok(Access::Random),
            _ => Err(format!(
                "unknown access pattern {s:?}: expected sweep or random"
            )),
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Sweep => "sweep",
            Access::Random => "random",
        })
    }
}

/// A local context switch under LUG (paper 004: 100 µs to 1 ms).
const LUG_SWITCH_S: f64 = 0.5e-3;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PagingModel {
    pub device: Device,
    /// Share of its memory a job touches per second of computing: paper
    /// 004's applications touch all of it every 0.1 to 2 s.
    pub touch_per_s: f64,
    /// Paper 004's `F_pf`: the share of a fault's service time by which it
    /// delays the whole parallel job (1: every node waits; 1/P: none does).
    pub f_pf: f64,
    pub fault_policy: FaultPolicy,
    /// A parallel context switch, s (PCS); the CM-5 took 4 to 10 ms.
    pub t_pcs: f64,
    /// Pages a fault reads at once while a job thrashes (swap readahead).
    pub readahead_pages: f64,
    /// A swept fault's wait, in random single reads (`1 / random_read_iops`
    /// each): what its readahead window costs the faulting job. 1 by
    /// default, as if the window came at the price of one page; `memgang
    /// calibrate` measures it: 1.71 on this machine
    /// (`bench/results/calibrate-20261127T124054Z`).
    #[serde(default = "one")]
    pub readahead_reads: f64,
    /// Kernel CPU seconds per page moved in or out while memory is short.
    pub reclaim_cpu_s: f64,
    /// The share of a random toucher's faults that evict its own pages
    /// while the node has no free memory ([`Refill`]), where it lacks
    /// [`OWN_EVICT_AT_LACK`] of its memory; it moves by
    /// `own_evict_slope` per unit of what it lacks
    /// ([`PagingModel::own_evict_at`]).
    #[serde(default = "own_evict")]
    pub own_evict_share: f64,
    #[serde(default = "own_evict_slope")]
    pub own_evict_slope: f64,
    /// Added to that share for a job older than the others with memory on
    /// its node, taken off for one younger than them all
    /// ([`OWN_EVICT_SPLIT`]).
    #[serde(default = "own_evict_split")]
    pub own_evict_split: f64,
    /// Random reads per second the device serves with a readahead window
    /// in flight. When known, a thrashing node's device is busy
    /// `1 / queue_read_iops` per page read (each page of a readahead its
    /// own read); when not, a readahead costs what it costs the faulting
    /// job (`page_s`: `readahead_reads` single reads; with the default 1,
    /// as if 8 reads in flight went 8 times as fast as one):
    /// this machine's disk did 3.0 times (15,316 and 46,659 reads/s,
    /// `bench/results/calibrate-20261127T052634Z`). The faulting job's own
    /// wait is `readahead_reads` single reads either way.
    #[serde(default)]
    pub queue_read_iops: Option<f64>,
    /// How the jobs touch their memory.
    #[serde(default)]
    pub access: Access,
}

impl Default for PagingModel {
    fn default() -> Self {
        PagingModel {
            device: Device::default(),
            touch_per_s: 0.5,
            f_pf: 0.5,
            fault_policy: FaultPolicy::Spin,
            t_pcs: 0.01,
            readahead_pages: READAHEAD_PAGES,
            readahead_reads: 1.0,
            reclaim_cpu_s: RECLAIM_CPU_S,
            own_evict_share: OWN_EVICT_SHARE,
            own_evict_slope: OWN_EVICT_SLOPE,
            own_evict_split: OWN_EVICT_SPLIT,
            queue_read_iops: None,
            access: Access::Sweep,
        }
    }
}

impl PagingModel {
    /// The device's time per page a thrashing job faults in: a fault
    /// ([`PagingModel::fault_reads`] random reads) brings the pages of a
    /// fault ([`PagingModel::pages_per_fault`]), and each page read evicts
    /// one, written out.
    pub fn page_s(&self) -> f64 {
        self.fault_reads() / (self.device.random_read_iops * self.pages_per_fault())
            + PAGE / self.device.write_bps
    }

    /// What one fault costs the faulting job, in random single reads: a
    /// sweep's readahead window ([`PagingModel::readahead_reads`]), or the
    /// one page touched at random.
    pub fn fault_reads(&self) -> f64 {
        match self.access {
            Access::Sweep => self.readahead_reads,
            Access::Random => 1.0,
        }
    }

    /// Pages a fault brings that the job then uses: a sweep's readahead
    /// window, or one page touched at random.
    pub fn pages_per_fault(&self) -> f64 {
        match self.access {
            Access::Sweep => self.readahead_pages.max(1.0),
            Access::Random => 1.0,
        }
    }

    /// A sweeping job resumed under demand paging faults `share` of its
    /// memory back in, the device reading it in `read_s` and the kernel
    /// spending `cpu_s` of the job's CPU on the faults and the reclaim
    /// they cause: how long its page-in lasts, and the seconds of its
    /// computing it gets done meanwhile (what its sweep needs to touch
    /// those pages, `share / touch_per_s`). It computes while the kernel
    /// reads ahead, so the page-in lasts the longer of the reads and its
    /// CPU (its computing and the kernel's); a page-in cut short by the
    /// quantum's end has done its share of the computing. A job touching
    /// at random waits for each fault, its faults spread over its sweeps:
    /// [`PagingModel::random_refill`].
    pub fn demand_page_in(&self, share: f64, read_s: f64, cpu_s: f64) -> (f64, f64) {
        let work = share / self.touch_per_s;
        (read_s.max(work + cpu_s), work)
    }

    /// The share of its faults that evict its own pages for a job that
    /// lacks `lack_share` of its memory, with no free memory: the line
    /// through `own_evict_share` at [`OWN_EVICT_AT_LACK`] with slope
    /// `own_evict_slope`, kept between 0 and 0.95.
    pub fn own_evict_at(&self, lack_share: f64) -> f64 {
        (self.own_evict_share + self.own_evict_slope * (lack_share - OWN_EVICT_AT_LACK))
            .clamp(0.0, 0.95)
    }

    /// How a job touching its memory at random brings back the `missing`
    /// bytes it lacks of its `mem` on a node (`short`: no free memory for
    /// them, so each fault evicts), with `work_left` seconds of computing
    /// still to do: see [`Refill`]. `side` is 1 for a job older than the
    /// others with memory on the node, -1 for one younger than them all,
    /// else 0: its share of own evictions moves by `own_evict_split` that
    /// way.
    pub fn random_refill(
        &self,
        mem: u64,
        missing: u64,
        short: bool,
        work_left: f64,
        side: f64,
    ) -> Refill {
        let lack = missing as f64 / PAGE;
        let own = if short {
            (self.own_evict_at(missing as f64 / mem.max(1) as f64) + side * self.own_evict_split)
                .clamp(0.0, 0.95)
        } else {
            0.0
        };
        let rate = 1.0 - own;
        let moved = if short { 2.0 } else { 1.0 };
        let fault_s =
            self.fault_reads() / self.device.random_read_iops + moved * self.reclaim_cpu_s;
        let sweep_s = 1.0 / self.touch_per_s;
        let full = if lack > 1.0 { lack.ln() / rate } else { 0.0 };
        Refill {
            lack,
            rate,
            fault_s,
            sweep_s,
            end_sweeps: full.min(work_left.max(0.0) / sweep_s),
        }
    }

    /// Bytes a job resumed under demand paging faults in on a node where
    /// it lacks `missing` of its `mem` bytes and the node's free memory
    /// does not hold them (`short`: the faults must evict).
    ///
    /// The kernel's LRU evicts the oldest pages first, and the resumed job's
    /// own pages left from its last quantum are the oldest on the node (the
    /// others ran since). A sweep touches them in the order they aged, so
    /// each of its faults evicts the page it needs next, and it faults all
    /// of its memory back in, writing as much of its own out. Measured on
    /// this machine (`bench/sim_paging_params.py`): jobs of 700 MiB that
    /// lacked 376 MiB faulted 680 to 843 MiB in per resume in every swept
    /// lru run; jobs of 600 MiB that lacked 176 faulted 393 and 447, so
    /// the whole job over-counts there. A job touching at random hits some
    /// of its old pages before they go: here, what it lacks; the engine
    /// spreads its faults over its sweeps ([`PagingModel::random_refill`]),
    /// where its own evictions make it fault more.
    pub fn demand_faulted(&self, mem: u64, missing: u64, short: bool) -> u64 {
        match self.access {
            Access::Sweep if short && missing > 0 => mem,
            _ => missing,
        }
    }

    /// Seconds the device takes to read `bytes` by demand faults:
    /// [`PagingModel::fault_reads`] random reads per fault, a fault
    /// bringing [`PagingModel::pages_per_fault`] pages.
    pub fn demand_read_s(&self, bytes: u64) -> f64 {
        bytes as f64 * self.fault_reads() / (self.device.demand_read_bps() * self.pages_per_fault())
    }

    /// The kernel's CPU for `moved` bytes faulted in and evicted:
    /// [`PagingModel::reclaim_cpu_s`] per page.
    pub fn demand_cpu_s(&self, moved: u64) -> f64 {
        moved as f64 / PAGE * self.reclaim_cpu_s
    }

    /// The device's time per page read while a node thrashes (its
    /// capacity, not one job's wait): see [`PagingModel::queue_read_iops`].
    pub fn device_page_s(&self) -> f64 {
        match self.queue_read_iops {
            Some(q) => 1.0 / q + PAGE / self.device.write_bps,
            None => self.page_s(),
        }
    }

    /// Pages a job of `mem` bytes on a node faults in per second of its
    /// computing at memory fraction `c`: every touch of a page not
    /// resident faults, as under LRU with the sweeping access of paper
    /// 004's applications.
    pub fn faults_per_s(&self, mem: u64, c: f64) -> f64 {
        (1.0 - c.min(1.0)).max(0.0) * self.touch_per_s * mem as f64 / PAGE
    }

    /// How many times longer a job computes while memory is short: `c[i]`
    /// is the share of its working set on its i-th node that fits there
    /// (paper 004's memory fraction, at most 1), `mem` its bytes per node.
    /// A job alone on its nodes: see [`PagingModel::slowdown_on`].
    pub fn slowdown(&self, mem: u64, c: impl Iterator<Item = f64>) -> f64 {
        self.slowdown_on(
            mem,
            c.map(|c| NodeLoad {
                c,
                want: mem,
                cpu_share: 1.0,
            }),
        )
    }

    /// How many times longer a job computes than alone, given each of its
    /// nodes' load: the slowest of three limits.
    ///
    /// - Its own waits (paper 004 eq. 1 and 2): each fault delays it by
    ///   `F·T_pf` under SPIN, with `F = max(F_pf, 1/P)` (a job on one node
    ///   waits for all of it), plus a local context switch under LUG;
    ///   `T_pcs` under PCS. Plus the kernel's CPU for its own faults
    ///   (reclaim runs in the faulting task).
    /// - The node's CPUs: its ranks share them (`cpu_share`), and the
    ///   kernel's work for every page moved in and out takes from them too.
    /// - The node's device: every running job's faults queue at the one
    ///   swap device, so the node pages no faster than the device serves
    ///   them, however the jobs share the CPUs.
    pub fn slowdown_on(&self, mem: u64, nodes: impl Iterator<Item = NodeLoad>) -> f64 {
        self.slowdown_and_bytes(mem, nodes).0
    }

    /// [`PagingModel::slowdown_on`], and the bytes the job faults in per
    /// second of its computing over all its nodes, in one pass over them
    /// (the engine needs both for every job it re-times on a short node).
    pub fn slowdown_and_bytes(
        &self,
        mem: u64,
        nodes: impl Iterator<Item = NodeLoad>,
    ) -> (f64, f64) {
        let (mut faults, mut own_cpu, mut cpu, mut device) = (0.0, 0.0f64, 1.0f64, 0.0f64);
        let (mut count, mut bytes) = (0usize, 0.0f64);
        let device_page_s = self.device_page_s();
        for n in nodes {
            count += 1;
            let f = self.faults_per_s(mem, n.c);
            faults += f;
            bytes += f * PAGE;
            // In and out: a page read evicts one.
            let kernel = 2.0 * f * self.reclaim_cpu_s;
            own_cpu = own_cpu.max(kernel);
            cpu = cpu.max(n.cpu_share.max(1.0) * (1.0 + kernel));
            device = device.max(self.faults_per_s(n.want, n.c) * device_page_s);
        }
        if faults == 0.0 {
            return (cpu, bytes);
        }
        let f = self.f_pf.max(1.0 / count.max(1) as f64).min(1.0);
        // Counted in pages: a fault brings `pages_per_fault` of them, and
        // LUG's and PCS's context switches happen once per fault.
        let cluster = self.pages_per_fault();
        let per_page = match self.fault_policy {
            FaultPolicy::Spin => f * self.page_s(),
            FaultPolicy::Lug => f * self.page_s() + LUG_SWITCH_S / cluster,
            FaultPolicy::Pcs => self.t_pcs / cluster,
        };
        (
            (1.0 + faults * per_page + own_cpu).max(cpu).max(device),
            bytes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_file_scales_bulk_paging_by_its_switch_efficiency() {
        let f: DeviceFile =
            serde::de::Deserialize::deserialize(serde::de::value::MapDeserializer::<
                _,
                serde::de::value::Error,
            >::new(
                [
                    ("write_bps", 400e6),
                    ("read_bps", 800e6),
                    ("random_read_iops", 10_000.0),
                ]
                .into_iter(),
            ))
            .unwrap();
        assert_eq!(f.switch_efficiency, 1.0);
        let half = DeviceFile {
            switch_efficiency: 0.5,
            ..f
        };
        let d = half.device().unwrap();
        assert_eq!(
            (d.write_bps, d.read_bps, d.random_read_iops),
            (200e6, 400e6, 10_000.0)
        );
        let bad = DeviceFile {
            switch_efficiency: 0.0,
            ..f
        };
        assert!(bad.device().unwrap_err().contains("switch_efficiency"));
        assert_eq!(
            f.readahead_reads, 1.0,
            "absent: a window at one read's cost"
        );
        let slow = DeviceFile {
            readahead_reads: 2.0,
            ..f
        };
        let m = slow.model(PagingModel::default()).unwrap();
        assert_eq!(m.readahead_reads, 2.0);
        let zero = DeviceFile {
            readahead_reads: 0.0,
            ..f
        };
        assert!(zero.device().unwrap_err().contains("readahead_reads"));
        assert_eq!(
            f.own_evict_share, OWN_EVICT_SHARE,
            "absent: the measured share"
        );
        assert_eq!(f.own_evict_slope, OWN_EVICT_SLOPE);
        let flat = DeviceFile {
            own_evict_slope: 2.0,
            ..f
        };
        assert!(flat.device().unwrap_err().contains("own_evict_slope"));
        assert_eq!(f.own_evict_split, OWN_EVICT_SPLIT);
        let leaning = DeviceFile {
            own_evict_split: -0.6,
            ..f
        };
        assert!(leaning.device().unwrap_err().contains("own_evict_split"));
        let even = DeviceFile {
            own_evict_split: 0.0,
            ..f
        };
        assert_eq!(
            even.model(PagingModel::default()).unwrap().own_evict_split,
            0.0
        );
        let all_own = DeviceFile {
            own_evict_share: 1.0,
            ..f
        };
        assert!(all_own.device().unwrap_err().contains("own_evict_share"));
        let none = DeviceFile {
            own_evict_share: 0.0,
            ..f
        };
        assert_eq!(
            none.model(PagingModel::default()).unwrap().own_evict_share,
            0.0
        );
    }

    /// A random page-in with no free memory faults `lack / (1 - own)` in
    /// all, what it lacks falling as its own evictions allow; with room,
    /// or with no own evictions, it faults what it lacks. `sweeps_at`
    /// inverts `time`, and stops at the end of the page-in.
    #[test]
    fn a_random_refill_faults_more_than_it_lacks_when_it_evicts_its_own() {
        let m = PagingModel {
            access: Access::Random,
            ..PagingModel::default()
        };
        // Lacking 0.54 of itself, the share is the file's; lacking less,
        // more of its faults take its own pages, on the line, kept under
        // 0.95 and over 0.
        let (lack, mem): (u64, u64) = (189 << 20, 350 << 20);
        assert!((m.own_evict_at(0.54) - OWN_EVICT_SHARE).abs() < 1e-12);
        assert!((m.own_evict_at(0.29) - (OWN_EVICT_SHARE - OWN_EVICT_SLOPE * 0.25)).abs() < 1e-12);
        assert!(
            m.own_evict_at(0.1) > m.own_evict_at(0.54)
                && m.own_evict_at(0.54) > m.own_evict_at(0.9)
        );
        let steep = PagingModel {
            own_evict_slope: -1.0,
            ..m
        };
        assert_eq!(
            (steep.own_evict_at(0.0), steep.own_evict_at(1.0 + 0.45)),
            (0.95, 0.0)
        );
        let r = m.random_refill(mem, lack, true, 1e9, 0.0);
        let pages = lack as f64 / PAGE;
        assert!((r.rate - (1.0 - OWN_EVICT_SHARE)).abs() < 1e-12, "{r:?}");
        let (_, work, faults) = r.whole();
        assert!(
            r.missing(r.end_sweeps) <= 1.0 + 1e-9,
            "ends when under a page lacks"
        );
        assert!(
            (faults - (pages - 1.0) / r.rate).abs() < 1e-6 * pages,
            "{faults}"
        );
        assert!((work - r.end_sweeps * r.sweep_s).abs() < 1e-9);
        for x in [0.0, 0.3, 1.0, 4.0, r.end_sweeps] {
            assert!((r.sweeps_at(r.time(x)) - x).abs() < 1e-9, "x {x}");
            // Every fault either shrank the lack or took one of its own.
            let own = r.own(x);
            assert!(own >= -1e-6 && own <= r.faults(x) * OWN_EVICT_SHARE + 1e-6);
        }
        assert_eq!(r.sweeps_at(r.time(r.end_sweeps) + 100.0), r.end_sweeps);
        // A fault costs its read and the kernel's work for a page in and out.
        assert!(
            (r.fault_s - (1.0 / m.device.random_read_iops + 2.0 * m.reclaim_cpu_s)).abs() < 1e-15
        );

        let room = m.random_refill(mem, lack, false, 1e9, 0.0);
        assert_eq!(room.rate, 1.0);
        assert!((room.whole().2 - (pages - 1.0)).abs() < 1e-6 * pages);
        assert!((room.fault_s - (1.0 / m.device.random_read_iops + m.reclaim_cpu_s)).abs() < 1e-15);
        let strict = PagingModel {
            own_evict_share: 0.0,
            own_evict_slope: 0.0,
            ..m
        }
        .random_refill(mem, lack, true, 1e9, 0.0);
        assert!((strict.whole().2 - (pages - 1.0)).abs() < 1e-6 * pages);
        // Work left cuts it: 1 s of computing is half a sweep at 0.5/s.
        let short = m.random_refill(mem, lack, true, 1.0, 0.0);
        assert!((short.end_sweeps - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_older_job_of_a_pair_evicts_more_of_its_own() {
        let m = PagingModel {
            access: Access::Random,
            ..PagingModel::default()
        };
        let (lack, mem): (u64, u64) = (189 << 20, 350 << 20);
        let faults = |side: f64| m.random_refill(mem, lack, true, 1e9, side);
        let (older, alone, younger) = (faults(1.0), faults(0.0), faults(-1.0));
        let at = m.own_evict_at(lack as f64 / mem as f64);
        assert!((older.rate - (1.0 - at - OWN_EVICT_SPLIT)).abs() < 1e-12);
        assert!((younger.rate - (1.0 - at + OWN_EVICT_SPLIT)).abs() < 1e-12);
        assert!(older.whole().2 > alone.whole().2 && alone.whole().2 > younger.whole().2);
        // With room nothing of its own goes, whichever its age.
        assert_eq!(m.random_refill(mem, lack, false, 1e9, 1.0).rate, 1.0);
        // Kept within 0 to 0.95 however far it leans.
        let far = PagingModel {
            own_evict_split: 0.5,
            ..m
        };
        assert_eq!(
            far.random_refill(mem, lack, true, 1e9, 1.0).rate,
            1.0 - 0.95
        );
        assert_eq!(far.random_refill(mem, lack, true, 1e9, -1.0).rate, 1.0);
    }

    /// A readahead window that costs the faulting job two random reads
    /// doubles a sweep's read time per page, and leaves a random job's
    /// (one page, one read) and the device's capacity under a measured
    /// queue rate as they were.
    #[test]
    fn a_costlier_readahead_slows_sweeps_only() {
        let one = PagingModel::default();
        let two = PagingModel {
            readahead_reads: 2.0,
            ..one
        };
        let (iops, w) = (one.device.random_read_iops, PAGE / one.device.write_bps);
        assert!((two.page_s() - (2.0 / (iops * READAHEAD_PAGES) + w)).abs() < 1e-15);
        let bytes = 64 << 20;
        assert!((two.demand_read_s(bytes) - 2.0 * one.demand_read_s(bytes)).abs() < 1e-12);
        let random = |m: PagingModel| PagingModel {
            access: Access::Random,
            ..m
        };
        assert_eq!(random(two).page_s(), random(one).page_s());
        assert_eq!(
            random(two).demand_read_s(bytes),
            random(one).demand_read_s(bytes)
        );
        let queued = |m: PagingModel| PagingModel {
            queue_read_iops: Some(iops * 3.0),
            ..m
        };
        assert_eq!(queued(two).device_page_s(), queued(one).device_page_s());
        assert!(
            two.device_page_s() > one.device_page_s(),
            "none measured: page_s"
        );
    }

    /// Paper 004 Fig. 3's trend: slowdown climbs steeply as the memory
    /// fraction c drops below 1; Fig. 8's: a faster paging device cuts it.
    #[test]
    fn slowdown_grows_as_memory_shrinks_and_falls_with_a_faster_device() {
        // Paper 004's machine: a fault fetches one page, and its kernel
        // overhead is in the service time.
        let m = PagingModel {
            readahead_pages: 1.0,
            reclaim_cpu_s: 0.0,
            ..PagingModel::default()
        };
        let mem = 256 << 20;
        let at = |m: &PagingModel, c: f64| m.slowdown(mem, std::iter::repeat_n(c, 32));
        assert_eq!(at(&m, 1.0), 1.0);
        let curve: Vec<f64> = [0.95, 0.9, 0.85, 0.8, 0.75]
            .iter()
            .map(|c| at(&m, *c))
            .collect();
        assert!(curve.windows(2).all(|w| w[1] > w[0]), "{curve:?}");
        assert!(
            curve[1] > 2.0,
            "c = 0.9 at least doubles the time: {curve:?}"
        );
        let fast = PagingModel {
            device: Device {
                random_read_iops: 20.0 * m.device.random_read_iops,
                write_bps: 20.0 * m.device.write_bps,
                ..m.device
            },
            ..m
        };
        // Twenty times faster paging: a twentieth of the extra time.
        let extra = |m: &PagingModel| at(m, 0.9) - 1.0;
        assert!((extra(&fast) * 20.0 - extra(&m)).abs() < 1e-9 * extra(&m));
    }

    /// PCS pays when `T_pcs << F_pf·T_pf` (paper 004 eq. 5), else SPIN.
    #[test]
    fn pcs_beats_spin_only_when_the_context_switch_is_cheap() {
        let spin = PagingModel::default();
        let t_pf = spin.page_s() * spin.readahead_pages;
        let pcs = |t_pcs| PagingModel {
            fault_policy: FaultPolicy::Pcs,
            t_pcs,
            ..spin
        };
        let mem = 64 << 20;
        let run = |m: &PagingModel| m.slowdown(mem, std::iter::repeat_n(0.9, 16));
        assert!(run(&pcs(spin.f_pf * t_pf / 10.0)) < run(&spin));
        assert!(run(&pcs(spin.f_pf * t_pf * 10.0)) > run(&spin));
        let lug = PagingModel {
            fault_policy: FaultPolicy::Lug,
            ..spin
        };
        assert!(run(&lug) > run(&spin));
    }

    /// A device-bound setting: the kernel's CPU left out, jobs sweeping
    /// 5 times their memory a second.
    fn device_bound() -> PagingModel {
        PagingModel {
            touch_per_s: 5.0,
            reclaim_cpu_s: 0.0,
            ..PagingModel::default()
        }
    }

    /// The slowdown of a 200 MiB job on one node where `jobs` such jobs
    /// run with 80% of their memory resident.
    fn one_node_of(m: &PagingModel, jobs: u64) -> f64 {
        let mem = 200 << 20;
        m.slowdown_on(
            mem,
            std::iter::once(NodeLoad {
                c: 0.8,
                want: jobs * mem,
                cpu_share: 1.0,
            }),
        )
    }

    /// A device that serves a readahead window slower than 8 single reads'
    /// worth (as the measured one does) slows a node bound by its device,
    /// in proportion.
    #[test]
    fn a_measured_queue_rate_sets_the_device_limit_only() {
        let m = device_bound();
        let iops = m.device.random_read_iops;
        let q = PagingModel {
            queue_read_iops: Some(iops * 2.0),
            ..m
        };
        let w = PAGE / m.device.write_bps;
        assert!((q.device_page_s() - (1.0 / (iops * 2.0) + w)).abs() < 1e-15);
        assert_eq!(m.device_page_s(), m.page_s(), "none measured: as before");
        // Only the device's limit: a job's own wait for its faults (each a
        // readahead, one random read) keeps the depth-1 rate.
        assert_eq!(q.page_s(), m.page_s());
        // A job faulting lightly, far from the device's limit, computes as
        // fast with the rate as without it.
        let light = |m: &PagingModel| m.slowdown(200 << 20, std::iter::once(0.99));
        let d = PagingModel::default();
        let dq = PagingModel {
            queue_read_iops: Some(d.device.random_read_iops * 2.0),
            ..d
        };
        assert!(light(&d) > 1.0);
        assert_eq!(light(&dq), light(&d));
        let on = one_node_of;
        // 64 jobs: the device binds, each page's read 4 times as long.
        let ratio = (q.device_page_s()) / m.page_s();
        assert!((on(&q, 64) / on(&m, 64) - ratio).abs() < 1e-9);
        assert!(on(&q, 64) > on(&m, 64));
    }

    /// A job touching at random uses one page of each fault, where a sweep
    /// uses the whole readahead window: its faults cost it a random read
    /// per page, and thrashing slows it more; and it waits through a
    /// demand page-in, where a sweep computes on.
    #[test]
    fn random_access_pays_a_read_per_page_and_waits_for_it() {
        let sweep = PagingModel::default();
        let random = PagingModel {
            access: Access::Random,
            ..sweep
        };
        let (iops, w) = (sweep.device.random_read_iops, PAGE / sweep.device.write_bps);
        assert!((random.page_s() - (1.0 / iops + w)).abs() < 1e-15);
        assert!((sweep.page_s() - (1.0 / (iops * READAHEAD_PAGES) + w)).abs() < 1e-15);
        let mem = 200 << 20;
        let at = |m: &PagingModel| m.slowdown(mem, std::iter::once(0.8));
        assert!(at(&random) > at(&sweep) && at(&sweep) > 1.0);
        // A quarter of its memory, touching half of it a second: 0.5 s of
        // computing and 0.25 s of the kernel's, inside 2 s of reads; and a
        // sweep faster than its reads takes its CPU's time.
        assert_eq!(sweep.demand_page_in(0.25, 2.0, 0.25), (2.0, 0.5));
        assert_eq!(sweep.demand_page_in(0.25, 0.1, 0.25), (0.75, 0.5));
        // Short of memory, a sweep faults all of itself back (its own old
        // pages go first), a random job what it lacks; with room, both
        // only what they lack. A sweep's fault reads a readahead window.
        let (mem, lack) = (600 << 20, 176 << 20);
        assert_eq!(sweep.demand_faulted(mem, lack, true), mem);
        assert_eq!(random.demand_faulted(mem, lack, true), lack);
        assert_eq!(sweep.demand_faulted(mem, lack, false), lack);
        assert_eq!(sweep.demand_faulted(mem, 0, true), 0);
        let pages = lack as f64 / PAGE;
        assert!((random.demand_read_s(lack) - pages / iops).abs() < 1e-12);
        assert!((sweep.demand_read_s(lack) - pages / iops / READAHEAD_PAGES).abs() < 1e-12);
        assert!((sweep.demand_cpu_s(lack) - pages * RECLAIM_CPU_S).abs() < 1e-12);
        assert_eq!("random".parse::<Access>(), Ok(Access::Random));
        assert!("rand"
            .parse::<Access>()
            .unwrap_err()
            .contains("sweep or random"));
    }

    /// Jobs that thrash on one node queue at its one device: more of them
    /// (the same memory fraction) page no faster, so each slows down more,
    /// even with CPUs to spare.
    #[test]
    fn faulting_jobs_on_a_node_queue_at_its_device() {
        let m = device_bound();
        let mem = 200 << 20;
        let on = |jobs: u64| one_node_of(&m, jobs);
        let dev = |jobs: u64| m.faults_per_s(jobs * mem, 0.8) * m.page_s();
        assert!(on(1) > 1.0);
        assert!((on(64) - dev(64)).abs() < 1e-9, "{} {}", on(64), dev(64));
        assert!(on(64) > on(8) && on(8) >= on(1));
    }

    /// The kernel's work for each page moved takes CPU from the jobs that
    /// share the node's CPUs: with three ranks per CPU the job computes at
    /// a third of its speed, and slower still by the kernel's share.
    #[test]
    fn reclaim_takes_cpu_from_jobs_sharing_the_node() {
        let m = PagingModel::default();
        let mem = 200 << 20;
        let load = |c| NodeLoad {
            c,
            want: mem,
            cpu_share: 3.0,
        };
        assert_eq!(m.slowdown_on(mem, std::iter::once(load(1.0))), 3.0);
        let f = m.faults_per_s(mem, 0.9);
        let s = m.slowdown_on(mem, std::iter::once(load(0.9)));
        assert!(
            (s - 3.0 * (1.0 + 2.0 * f * m.reclaim_cpu_s)).abs() < 1e-9,
            "{s}"
        );
    }
}
