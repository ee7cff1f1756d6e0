//! The discrete-event executor: the core's [`Scheduler`] on a simulated
//! clock. It carries out the policy's actions with the paging model and
//! reports back what the runtime would observe (`JobFinished`,
//! `SwitchDone`), exactly as the runtime does on a real node. The actions
//! are carried out in `actions`, one method each.

mod actions;

use crate::paging::{NodeLoad, PagingModel, Refill};
use crate::queue::FinishQueue;
use crate::report::{JobRecord, Report};
use crate::table::JobTable;
use crate::workload::{TraceJob, Workload, WorkloadError};
use memgang_core::{
    Cluster, Event, JobId, JobSpec, NodeId, Overlap, PolicyKind, Quantum, Scheduler, Switching,
    Time,
};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// What to simulate on.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub nodes: u32,
    pub cpus_per_node: u32,
    pub node_memory: u64,
    pub policy: PolicyKind,
    /// The quantum, fixed or growing after a dear switch.
    pub quantum: Quantum,
    pub switching: Switching,
    /// How `hybrid` and `auto` overlap a set switch's page-in.
    pub overlap: Overlap,
    pub paging: PagingModel,
}

/// A job of the simulation, alive from its arrival to its end.
struct Job {
    arrival: Time,
    runtime_s: f64,
    /// Seconds of computing still to do.
    remaining_s: f64,
    /// Bytes per node it wants resident.
    mem: u64,
    /// The CPUs it keeps busy on each of its nodes: its ranks there times
    /// the share of its time alone a rank computes (`TraceJob::cpu_share`).
    cpu_per_node: f64,
    nodes: Vec<NodeId>,
    running: bool,
    /// While running: when it computes again (after its switch and demand
    /// faults), and from when `remaining_s` is counted down.
    active_from: Time,
    /// Demand faulting began here and ends at `active_from`.
    stall_from: Time,
    /// Seconds of its work done while it faults its pages back in: it
    /// touches them as it computes (paper 004's sweeps), so a job whose
    /// page-in outlasts its quantum still progresses. Credited when the
    /// faulting ends, or in part when it is cut short.
    stall_work: f64,
    slowdown: f64,
    /// Bytes it faults in per second of computing while memory is short
    /// (all its nodes), for the paging volume.
    thrash_bps: f64,
    last_ran: Time,
    /// Share of its resident memory that background writing made clean.
    clean: f64,
    bg_from: Option<Time>,
    /// A random toucher's page-in under way (its slowest node's): how far
    /// it got when cut short, and when a job ends inside it.
    refill: Option<Refill>,
    /// Bytes of its own a swept page-in faulted back and evicted again, on
    /// all its nodes: counted in the traffic at the resume, and given back
    /// in the share undone if the quantum cuts the page-in short.
    own_moved: u64,
    started: Option<Time>,
    /// The refresh that last put it in its list of jobs to look at: a set
    /// switch lists each incoming job once per node, and sorting those
    /// repeats cost more than marking them (first in a hash set; here, a
    /// field of a job the listing has found anyway).
    listed: u64,
}

/// A job's memory on one node.
#[derive(Clone, Copy)]
struct Slot {
    job: JobId,
    resident: u64,
    /// Still to be faulted in (demand page-in under way).
    pending_in: u64,
}

/// A node: the jobs with memory on it, and the jobs running on it. Kept
/// so that an event costs the jobs on the nodes it touches, not the jobs
/// alive: a job paged out completely leaves no slot behind, and the running
/// ones are listed apart with the memory they want. What only the end of a
/// switch or a refresh reads is in arrays of its own (`Simulator::cost`,
/// `Simulator::seen`).
#[derive(Default)]
struct NodeState {
    /// Jobs with memory resident (or coming in) here.
    slots: Vec<Slot>,
    used: u64,
    runners: Vec<JobId>,
    /// Memory the running jobs want here, together, and the CPUs they
    /// keep busy (their ranks, less the time those wait alone).
    want: u64,
    cpu: f64,
}

impl NodeState {
    /// Where the job's slot is, made empty if it has none (it was paged
    /// out whole).
    fn slot_index(&mut self, job: JobId) -> usize {
        match self.slots.iter().position(|s| s.job == job) {
            Some(k) => k,
            None => {
                self.slots.push(Slot {
                    job,
                    resident: 0,
                    pending_in: 0,
                });
                self.slots.len() - 1
            }
        }
    }

    /// 1 when `job` is older (made first: a lower id) than every other job
    /// with memory here, -1 when younger than them all, else 0: the way a
    /// resumed random toucher's own evictions lean (measured: the older of
    /// a pair loses more of its own pages; `PagingModel::random_refill`).
    fn age_side(&self, job: JobId) -> f64 {
        let (mut newer, mut older) = (false, false);
        for s in &self.slots {
            if s.job != job && s.resident > 0 {
                if s.job > job {
                    newer = true;
                } else {
                    older = true;
                }
            }
        }
        match (newer, older) {
            (true, false) => 1.0,
            (false, true) => -1.0,
            _ => 0.0,
        }
    }

    fn run(&mut self, job: JobId, mem: u64, cpu: f64) {
        self.runners.push(job);
        self.want += mem;
        self.cpu += cpu;
    }

    fn stop(&mut self, job: JobId, mem: u64, cpu: f64) {
        if let Some(k) = self.runners.iter().position(|j| *j == job) {
            self.runners.swap_remove(k);
            self.want -= mem;
            // Sums of fractions leave a residue once the last runner goes.
            self.cpu = if self.runners.is_empty() {
                0.0
            } else {
                self.cpu - cpu
            };
        }
    }
}

/// A switch's end. Jobs' ends are in the [`FinishQueue`]; the two share
/// the sequence numbers, so that between them events go in the order they
/// were scheduled at the same instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SwitchDone {
    took: Duration,
}

/// Totals kept as the run goes, so that finished jobs need not be.
#[derive(Default)]
struct Totals {
    jobs: u64,
    first_arrival: Option<Time>,
    last_finish: Time,
    response_s: f64,
    bounded_slowdown: f64,
    work_node_s: f64,
    paging_node_s: f64,
    overcommitted_node_s: f64,
    switches: u64,
    switch_s: f64,
    paged_out: u64,
    paged_in: u64,
    background: u64,
    clamped: u64,
    events: u64,
    node_actions: u64,
    peak_alive: usize,
}

/// Bounded slowdown's threshold (Feitelson): jobs shorter than this count
/// as this long.
pub const BSLD_BOUND_S: f64 = 10.0;

pub struct Simulator<'a> {
    cfg: Config,
    sched: Scheduler,
    jobs: JobTable<Job>,
    nodes: Vec<NodeState>,
    /// Seconds of paging each node does in the switch being carried out.
    cost: Vec<f64>,
    /// The refresh that last listed each node's runners: a switch touches
    /// a node once per job leaving or coming, and sorting those touches
    /// cost more than the refresh itself.
    seen: Vec<u64>,
    /// Per node, since when (s) its running jobs want more memory than it
    /// has; NaN while they do not.
    over_since: Vec<f64>,
    heap: BinaryHeap<Reverse<(Time, u64, SwitchDone)>>,
    ends: FinishQueue,
    /// Switches under way. The runtime carries a switch out before it
    /// looks at its timer or arrivals again; so does the simulator.
    switching: u32,
    seq: u64,
    now: Time,
    workload: &'a mut dyn Workload,
    lookahead: Option<TraceJob>,
    t: Totals,
    touched: Vec<u32>,
    /// Counts refreshes, to mark the nodes one has seen (`seen`).
    refreshes: u64,
    dirty: Vec<JobId>,
    on_job: Option<&'a mut dyn FnMut(&JobRecord)>,
    on_progress: Option<&'a mut dyn FnMut(Time, u64)>,
}

impl<'a> Simulator<'a> {
    pub fn new(cfg: Config, workload: &'a mut dyn Workload) -> Self {
        let cluster = Cluster::uniform(cfg.nodes, cfg.cpus_per_node, cfg.node_memory);
        let policy = cfg
            .policy
            .build_with(cfg.quantum, cfg.switching, cfg.overlap);
        let nodes = (0..cfg.nodes).map(|_| NodeState::default()).collect();
        let count = cfg.nodes as usize;
        Simulator {
            sched: Scheduler::new(cluster, Vec::new(), policy),
            cfg,
            jobs: JobTable::new(),
            nodes,
            cost: vec![0.0; count],
            seen: vec![0; count],
            over_since: vec![f64::NAN; count],
            heap: BinaryHeap::new(),
            ends: FinishQueue::new(),
            switching: 0,
            seq: 0,
            now: Time::ZERO,
            workload,
            lookahead: None,
            t: Totals::default(),
            touched: Vec::new(),
            refreshes: 0,
            dirty: Vec::new(),
            on_job: None,
            on_progress: None,
        }
    }

    /// Called with each job as it ends (for a per-job CSV).
    pub fn on_job(mut self, f: &'a mut dyn FnMut(&JobRecord)) -> Self {
        self.on_job = Some(f);
        self
    }

    /// Called every 2^16 events with the simulated time and jobs done.
    pub fn on_progress(mut self, f: &'a mut dyn FnMut(Time, u64)) -> Self {
        self.on_progress = Some(f);
        self
    }

    pub fn run(mut self) -> Result<Report, WorkloadError> {
        let began = Instant::now();
        self.lookahead = self.workload.next_job()?;
        loop {
            let switch = self.heap.peek().map(|Reverse((t, seq, _))| (*t, *seq));
            let end = self.ends.peek().map(|(t, seq, _)| (t, seq));
            let ev = match (switch, end) {
                (Some(a), Some(b)) => Some(a.min(b).0),
                (a, b) => a.or(b).map(|(t, _)| t),
            };
            let busy = self.switching > 0;
            let arrival = self.lookahead.as_ref().map(|j| j.arrival).filter(|_| !busy);
            let timer = self.sched.next_wakeup().filter(|_| !busy);
            // On a tie: ends and switches, then arrivals, then the timer
            // (the scheduler itself delivers arrivals before its timer).
            let first = [ev, arrival, timer]
                .into_iter()
                .enumerate()
                .filter_map(|(k, t)| t.map(|t| (t, k)))
                .min();
            let Some((at, kind)) = first else { break };
            if kind != 0 && self.lookahead.is_none() && self.sched.all_finished() {
                // Only a lone gang row's quantum timer is left.
                break;
            }
            self.now = self.now.max(at);
            let now = self.now;
            match kind {
                0 => {
                    if end.is_some_and(|e| switch.is_none_or(|s| e < s)) {
                        let (_, _, job) = self.ends.pop().expect("peeked");
                        self.finish(job)?;
                    } else {
                        let Reverse((_, _, SwitchDone { took })) = self.heap.pop().expect("peeked");
                        self.switching -= 1;
                        let acts = self.sched.handle(now, Event::SwitchDone { took });
                        self.execute(acts);
                    }
                }
                1 => {
                    while let Some(j) = self.lookahead.take_if(|j| j.arrival <= now) {
                        self.submit(j);
                        self.lookahead = self.workload.next_job()?;
                    }
                    let acts = self.sched.advance(now);
                    self.execute(acts);
                }
                _ => {
                    let acts = self.sched.advance(now);
                    self.execute(acts);
                }
            }
            self.t.events += 1;
            if self.t.events & 0xFFFF == 0 {
                if let Some(f) = self.on_progress.as_mut() {
                    f(self.now, self.t.jobs);
                }
            }
        }
        let wall_s = began.elapsed().as_secs_f64();
        let unfinished = self.jobs.len() as u64;
        Ok(self.report(wall_s, unfinished))
    }

    fn submit(&mut self, tj: TraceJob) {
        let max_ranks = self.cfg.nodes.saturating_mul(self.cfg.cpus_per_node);
        if tj.ranks > max_ranks {
            self.t.clamped += 1;
        }
        let ranks = tj.ranks.clamp(1, max_ranks);
        let per_node = ranks.min(self.cfg.cpus_per_node);
        let mem = tj.memory_per_rank.saturating_mul(u64::from(per_node));
        self.t.first_arrival.get_or_insert(tj.arrival);
        let nodes = u64::from(ranks.div_ceil(self.cfg.cpus_per_node.max(1)));
        let id = self
            .sched
            .submit(JobSpec {
                name: tj.name,
                ranks,
                // The whole job's, as the runtime declares it: the core's hybrid
                // places `mem` on each of the job's nodes.
                memory_bytes: Some(mem.saturating_mul(nodes)),
                arrival: tj.arrival,
                placed: None,
            })
            // The core refuses only a job placed on nodes it cannot be on; a
            // trace's job is placed by the policy.
            .expect("a job without placed nodes is refused by nothing");
        self.jobs.insert(
            id,
            Job {
                arrival: tj.arrival,
                runtime_s: tj.runtime_s,
                remaining_s: tj.runtime_s,
                mem,
                cpu_per_node: f64::from(per_node) * tj.cpu_share,
                nodes: Vec::new(),
                running: false,
                active_from: Time::ZERO,
                stall_from: Time::ZERO,
                stall_work: 0.0,
                slowdown: 1.0,
                thrash_bps: 0.0,
                last_ran: Time::ZERO,
                clean: 0.0,
                bg_from: None,
                refill: None,
                own_moved: 0,
                started: None,
                listed: 0,
            },
        );
        self.t.peak_alive = self.t.peak_alive.max(self.jobs.len());
    }

    fn finish(&mut self, id: JobId) -> Result<(), WorkloadError> {
        let now = self.now;
        let mut job = self.jobs.remove(&id).expect("a live job");
        let moved = Self::settle(&mut job, now);
        self.t.paged_in += moved;
        self.t.paged_out += moved;
        for n in &job.nodes {
            let node = &mut self.nodes[n.0 as usize];
            if let Some(k) = node.slots.iter().position(|s| s.job == id) {
                node.used -= node.slots.swap_remove(k).resident;
            }
            if job.running {
                node.stop(id, job.mem, job.cpu_per_node);
            }
            self.touch(n.0);
        }
        let acts = self.sched.handle(now, Event::JobFinished(id));
        self.execute(acts);
        self.ends.retire(id);
        let st = self.sched.retire(id);
        let response = (now - job.arrival).as_secs_f64();
        let bsld = (response / job.runtime_s.max(BSLD_BOUND_S)).max(1.0);
        let t = &mut self.t;
        t.jobs += 1;
        t.last_finish = now;
        t.response_s += response;
        t.bounded_slowdown += bsld;
        t.work_node_s += job.runtime_s * job.nodes.len() as f64;
        if let Some(f) = self.on_job.as_mut() {
            f(&JobRecord {
                name: st.spec.name,
                arrival_s: job.arrival.as_secs_f64(),
                start_s: job.started.map_or(0.0, |s| s.as_secs_f64()),
                finish_s: now.as_secs_f64(),
                nodes: job.nodes.len() as u32,
                memory_per_node: job.mem,
                runtime_s: job.runtime_s,
                response_s: response,
                bounded_slowdown: bsld,
            });
        }
        if let Some(next) = self.workload.job_finished(now) {
            self.submit(next);
        }
        Ok(())
    }

    fn touch(&mut self, node: u32) {
        self.touched.push(node);
    }

    fn schedule_switch_done(&mut self, at: Time, ev: SwitchDone) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    /// Count down a running job's work to now; returns the bytes it
    /// faulted in (and so evicted) meanwhile while memory was short.
    fn settle(job: &mut Job, now: Time) -> u64 {
        if job.running && job.stall_work > 0.0 && now >= job.active_from {
            job.remaining_s = (job.remaining_s - job.stall_work).max(0.0);
            job.stall_work = 0.0;
        }
        if job.running && now > job.active_from {
            let before = job.remaining_s;
            job.remaining_s =
                (job.remaining_s - (now - job.active_from).as_secs_f64() / job.slowdown).max(0.0);
            job.active_from = now;
            return ((before - job.remaining_s) * job.thrash_bps) as u64;
        }
        0
    }

    /// Free `need` bytes on `node` for `me`, taking them from the suspended
    /// jobs in `order` (or least recently run first); returns the bytes
    /// written (dirty ones: background writing made some clean).
    fn evict(&mut self, node: u32, me: JobId, need: u64, order: Option<&[JobId]>) -> u64 {
        if need == 0 {
            return 0;
        }
        let mut victims: Vec<(Time, JobId)> = Vec::new();
        match order {
            Some(from) => victims.extend(from.iter().map(|j| (Time::ZERO, *j))),
            None => {
                for s in self.nodes[node as usize].slots.iter() {
                    let j = &self.jobs[&s.job];
                    if s.job != me && !j.running && s.resident > 0 {
                        victims.push((j.last_ran, s.job));
                    }
                }
                victims.sort_unstable();
            }
        }
        let (mut left, mut written) = (need, 0u64);
        for (_, v) in victims {
            if left == 0 {
                break;
            }
            let clean = self.jobs[&v].clean;
            let n = &mut self.nodes[node as usize];
            let Some(k) = n.slots.iter().position(|s| s.job == v) else {
                continue;
            };
            let s = &mut n.slots[k];
            let take = s.resident.min(left);
            s.resident -= take;
            n.used -= take;
            left -= take;
            written += (take as f64 * (1.0 - clean)) as u64;
            if s.resident == 0 && s.pending_in == 0 {
                n.slots.swap_remove(k);
            }
        }
        self.t.paged_out += written;
        written
    }

    fn nodes_of(&self, job: JobId) -> Vec<u32> {
        self.jobs[&job].nodes.iter().map(|n| n.0).collect()
    }

    /// Recompute the speed of the running jobs on the nodes whose running
    /// set changed, and when they will end.
    fn refresh(&mut self) {
        let now = self.now;
        self.refreshes += 1;
        let stamp = self.refreshes;
        for id in &self.dirty {
            if let Some(j) = self.jobs.get_mut(id) {
                j.listed = stamp;
            }
        }
        let now_s = now.as_secs_f64();
        for n in self.touched.drain(..) {
            let node = &self.nodes[n as usize];
            if self.seen[n as usize] != self.refreshes {
                self.seen[n as usize] = self.refreshes;
                // The nodes whose running set changed are these: the only
                // ones that can start or stop being overcommitted.
                let since = &mut self.over_since[n as usize];
                match (node.want > self.cfg.node_memory, since.is_nan()) {
                    (true, true) => *since = now_s,
                    (false, false) => {
                        self.t.overcommitted_node_s += now_s - *since;
                        *since = f64::NAN;
                    }
                    _ => {}
                }
                // Nodes come a job at a time: most repeats are next to each
                // other and are dropped without a lookup.
                for r in node.runners.iter() {
                    if self.dirty.last() == Some(r) {
                        continue;
                    }
                    let j = self.jobs.get_mut(r).expect("a runner is alive");
                    if j.listed != stamp {
                        j.listed = stamp;
                        self.dirty.push(*r);
                    }
                }
            }
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        let m = self.cfg.node_memory as f64;
        let cpus = f64::from(self.cfg.cpus_per_node);
        for id in &dirty {
            let Some(j) = self.jobs.get(id) else { continue };
            if !j.running {
                continue;
            }
            // Ranks sharing a node share its CPUs (cosched: more ranks
            // than CPUs slow each other); memory short on a node makes it
            // fault.
            // A node where the running jobs want no more than it has adds
            // no faults: the paging model is asked only when one is short
            // (its answer is 1 otherwise), and the CPU share is the most
            // CPUs kept busy on a node over its CPUs (one division, same
            // value).
            let (mut busy, mut short) = (0f64, false);
            for n in &j.nodes {
                let node = &self.nodes[n.0 as usize];
                busy = busy.max(node.cpu);
                short |= node.want > self.cfg.node_memory;
            }
            let (slowdown, thrash) = if short {
                let nodes = &self.nodes;
                let paging = &self.cfg.paging;
                let load = |n: &NodeId| {
                    let node = &nodes[n.0 as usize];
                    NodeLoad {
                        c: (m / node.want.max(1) as f64).min(1.0),
                        want: node.want,
                        cpu_share: node.cpu / cpus,
                    }
                };
                paging.slowdown_and_bytes(j.mem, j.nodes.iter().map(load))
            } else {
                ((busy / cpus).max(1.0), 0.0)
            };
            let j = self.jobs.get_mut(id).expect("live");
            let moved = Self::settle(j, now);
            self.t.paged_in += moved;
            self.t.paged_out += moved;
            j.slowdown = slowdown;
            j.thrash_bps = thrash;
            let at = if let (Some(r), true) = (&j.refill, j.remaining_s < j.stall_work) {
                // Done while still faulting at random: after the sweeps
                // its work left takes.
                (j.stall_from + Duration::from_secs_f64(r.time(j.remaining_s / r.sweep_s))).max(now)
            } else if j.remaining_s < j.stall_work {
                // Done while still faulting: its sweep touches the pages
                // at an even pace over the page-in.
                let span = (j.active_from - j.stall_from).as_secs_f64();
                (j.stall_from + Duration::from_secs_f64(span * j.remaining_s / j.stall_work))
                    .max(now)
            } else {
                j.active_from.max(now)
                    + Duration::from_secs_f64((j.remaining_s - j.stall_work) * slowdown)
            };
            self.seq += 1;
            self.ends.set(*id, at, self.seq);
        }
        dirty.clear();
        self.dirty = dirty;
    }

    fn report(&self, wall_s: f64, unfinished: u64) -> Report {
        let t = &self.t;
        let first = t.first_arrival.unwrap_or_default();
        let makespan = t.last_finish.saturating_sub(first).as_secs_f64();
        let n = t.jobs.max(1) as f64;
        let (skipped, reasons) = self.workload.skipped();
        Report {
            policy: self.cfg.policy.to_string(),
            switching: self.cfg.switching.to_string(),
            nodes: self.cfg.nodes,
            node_memory: self.cfg.node_memory,
            quantum_s: self.cfg.quantum.length.as_secs_f64(),
            max_switch_share: self.cfg.quantum.max_switch_share,
            fault_policy: self.cfg.paging.fault_policy.to_string(),
            jobs: t.jobs,
            unfinished,
            clamped: t.clamped,
            skipped_lines: skipped,
            skipped_reasons: reasons.to_vec(),
            unusable: self.workload.unusable(),
            makespan_s: makespan,
            utilization: if makespan > 0.0 {
                t.work_node_s / (makespan * f64::from(self.cfg.nodes))
            } else {
                0.0
            },
            mean_response_s: t.response_s / n,
            mean_bounded_slowdown: t.bounded_slowdown / n,
            switches: t.switches,
            switch_s: t.switch_s,
            paging_node_s: t.paging_node_s,
            overcommitted_node_s: t.overcommitted_node_s,
            switching_overhead: if t.work_node_s + t.paging_node_s > 0.0 {
                t.paging_node_s / (t.work_node_s + t.paging_node_s)
            } else {
                0.0
            },
            paged_out_bytes: t.paged_out,
            paged_in_bytes: t.paged_in,
            background_bytes: t.background,
            peak_jobs_alive: t.peak_alive as u64,
            events: t.events,
            node_actions: t.node_actions,
            wall_s,
            events_per_s: t.events as f64 / wall_s.max(1e-9),
        }
    }
}
