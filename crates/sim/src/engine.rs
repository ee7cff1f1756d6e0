//! The discrete-event executor: the core's [`Scheduler`] on a simulated
//! clock. It carries out the policy's actions with the paging model and
//! reports back what the runtime would observe (`JobFinished`,
//! `SwitchDone`), exactly as the runtime does on a real node.

use crate::paging::{Access, NodeLoad, PagingModel, Refill, PAGE};
use crate::queue::FinishQueue;
use crate::report::{JobRecord, Report};
use crate::table::JobTable;
use crate::workload::{TraceJob, Workload, WorkloadError};
use memgang_core::{capacity, room};
use memgang_core::{
    Action, Cluster, Event, JobId, JobSpec, NodeId, Overlap, PageInPlan, PageOutPlan, PolicyKind,
    Quantum, Scheduler, Switching, Time,
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

    /// Carry out a decision. A decision that suspends or resumes is a
    /// switch: its nodes page in parallel, each one its share in order, and
    /// the switch is done when the slowest is; the policy then hears
    /// `SwitchDone`, as from the runtime.
    fn execute(&mut self, actions: Vec<memgang_core::Action>) {
        if actions.is_empty() {
            self.refresh();
            return;
        }
        let now = self.now;
        let dev = self.cfg.paging.device;
        let m = self.cfg.node_memory;
        let is_switch = actions.iter().any(Action::is_switch);
        // Jobs set to run, with their own demand-paging stall.
        let mut to_run: Vec<(JobId, f64, f64)> = Vec::new();
        // Nodes that page in this decision: those touched (a job leaving
        // or coming; before the first action, only the nodes of a job that
        // ended, which page nothing), and those `MakeRoom` takes from.
        let mut room_nodes: Vec<u32> = Vec::new();
        for action in &actions {
            match action {
                Action::Start { job, nodes } => {
                    self.t.node_actions += nodes.len() as u64;
                    let (want, cpu) = (self.jobs[job].mem, self.jobs[job].cpu_per_node);
                    let mem = want.min(m);
                    let mut stall: f64 = 0.0;
                    for n in nodes {
                        let free = m.saturating_sub(self.nodes[n.0 as usize].used);
                        let short = room::shortfall(mem, 0, free, capacity::EXACT);
                        let out = if short > 0 {
                            self.evict(n.0, *job, short, None)
                        } else {
                            0
                        };
                        let node = &mut self.nodes[n.0 as usize];
                        node.slots.push(Slot {
                            job: *job,
                            resident: mem,
                            pending_in: 0,
                        });
                        node.used += mem;
                        node.run(*job, want, cpu);
                        stall = stall.max(out as f64 / dev.write_bps);
                        self.touched.push(n.0);
                    }
                    let j = self.jobs.get_mut(job).expect("live");
                    j.nodes = nodes.clone();
                    j.running = true;
                    j.started = Some(now);
                    to_run.push((*job, stall, 0.0));
                }
                Action::Suspend { job, page_out } => {
                    let j = self.jobs.get_mut(job).expect("live");
                    self.t.node_actions += j.nodes.len() as u64;
                    let moved = Self::settle(j, now);
                    self.t.paged_in += moved;
                    self.t.paged_out += moved;
                    // Cut short in demand faulting: only part came in.
                    // (work done, share still lacking, share of its own
                    // traffic not done): a sweep's page-in goes at an even
                    // pace, a random one's as its `Refill` says.
                    let cut = j.active_from > now && j.active_from > j.stall_from;
                    let (work, undone, own_undone) = match (&j.refill, cut) {
                        (_, false) => (j.stall_work, 0.0, 0.0),
                        (Some(r), true) => {
                            let x = r.sweeps_at(now.saturating_sub(j.stall_from).as_secs_f64());
                            let own_end = r.own(r.end_sweeps);
                            (
                                x * r.sweep_s,
                                if r.lack > 0.0 {
                                    r.missing(x) / r.lack
                                } else {
                                    0.0
                                },
                                if own_end > 0.0 {
                                    1.0 - r.own(x) / own_end
                                } else {
                                    0.0
                                },
                            )
                        }
                        (None, true) => {
                            let undone = ((j.active_from - now).as_secs_f64()
                                / (j.active_from - j.stall_from).as_secs_f64())
                            .min(1.0);
                            (j.stall_work * (1.0 - undone), undone, undone)
                        }
                    };
                    j.remaining_s = (j.remaining_s - work).max(0.0);
                    j.refill = None;
                    let own_back = (j.own_moved as f64 * own_undone) as u64;
                    j.own_moved = 0;
                    self.t.paged_in -= own_back;
                    self.t.paged_out -= own_back;
                    j.stall_work = 0.0;
                    j.running = false;
                    j.active_from = now;
                    j.last_ran = now;
                    self.ends.remove(*job);
                    let (want, cpu) = (j.mem, j.cpu_per_node);
                    let mem = want.min(m);
                    if let Some(from) = j.bg_from.take() {
                        let wrote = (dev.write_bps * (now - from).as_secs_f64()).min(mem as f64);
                        j.clean = wrote / mem.max(1) as f64;
                        self.t.background += wrote as u64 * j.nodes.len() as u64;
                    }
                    let clean = j.clean;
                    let aggressive = matches!(page_out, PageOutPlan::Aggressive { .. });
                    // A job holds the same on most of its nodes: the bytes
                    // written and the seconds they take, for the last
                    // amount paged out, are reused rather than converted
                    // and divided again on every node (same values).
                    let mut last: Option<(u64, u64, f64)> = None;
                    for n in &j.nodes {
                        let node = &mut self.nodes[n.0 as usize];
                        node.stop(*job, want, cpu);
                        self.touched.push(n.0);
                        // No slot: nothing of it here to bring back or page out.
                        let Some(k) = node.slots.iter().position(|s| s.job == *job) else {
                            continue;
                        };
                        let s = &mut node.slots[k];
                        let back = if s.pending_in == 0 {
                            0
                        } else {
                            (s.pending_in as f64 * undone) as u64
                        };
                        s.resident -= back;
                        s.pending_in = 0;
                        // Never faulted in after all.
                        self.t.paged_in -= back;
                        let mut used = back;
                        if aggressive {
                            let out = s.resident;
                            s.resident = 0;
                            used += out;
                            let (written, secs) = match last {
                                Some((o, w, t)) if o == out => (w, t),
                                _ => {
                                    let w = (out as f64 * (1.0 - clean)) as u64;
                                    (w, w as f64 / dev.write_bps)
                                }
                            };
                            last = Some((out, written, secs));
                            self.cost[n.0 as usize] += secs;
                            self.t.paged_out += written;
                        }
                        node.used -= used;
                        if s.resident == 0 {
                            node.slots.swap_remove(k);
                        }
                    }
                }
                Action::MakeRoom { job, from } => {
                    let nodes = self.nodes_of(*job);
                    self.t.node_actions += nodes.len() as u64;
                    for n in nodes {
                        let mem = self.room_for(*job, n);
                        let node = &self.nodes[n as usize];
                        let have = node
                            .slots
                            .iter()
                            .find(|s| s.job == *job)
                            .map_or(0, |s| s.resident);
                        // Exact bytes in the model: no margin.
                        let short = room::shortfall(
                            mem,
                            have,
                            m.saturating_sub(node.used),
                            capacity::EXACT,
                        );
                        let out = self.evict(n, *job, short, Some(from));
                        self.cost[n as usize] += out as f64 / dev.write_bps;
                        room_nodes.push(n);
                    }
                }
                Action::Resume { job, page_in } => {
                    let (want, cpu) = (self.jobs[job].mem, self.jobs[job].cpu_per_node);
                    let mem = want.min(m);
                    let (mut stall, mut kernel, mut faulted): (f64, f64, u64) = (0.0, 0.0, 0);
                    let mut own_moved = 0;
                    // A random toucher's page-in on its slowest node.
                    let mut refill: Option<Refill> = None;
                    let work_left = self.jobs[job].remaining_s;
                    // As for a suspension: the seconds for the last (written,
                    // read) pair, reused while the next node pages the same.
                    let mut last: Option<(u64, u64, f64)> = None;
                    let nodes = std::mem::take(&mut self.jobs.get_mut(job).expect("live").nodes);
                    self.t.node_actions += nodes.len() as u64;
                    let random = matches!(page_in, PageInPlan::Demand)
                        && self.cfg.paging.access == Access::Random;
                    for n in &nodes {
                        let ws = self.room_for(*job, n.0);
                        let node = &mut self.nodes[n.0 as usize];
                        // Before the evictions below take the others' slots.
                        let side = if random { node.age_side(*job) } else { 0.0 };
                        let mut k = node.slot_index(*job);
                        let have = node.slots[k].resident;
                        let missing = mem.saturating_sub(have);
                        let free = m.saturating_sub(node.used);
                        let short = room::shortfall(ws, have, free, capacity::EXACT);
                        let out = if short > 0 {
                            let out = self.evict(n.0, *job, short, None);
                            // Evicted slots were swapped out of their places.
                            k = self.nodes[n.0 as usize].slot_index(*job);
                            out
                        } else {
                            0
                        };
                        let node = &mut self.nodes[n.0 as usize];
                        node.slots[k].resident = mem;
                        node.used += missing;
                        node.run(*job, want, cpu);
                        self.t.paged_in += missing;
                        match page_in {
                            // Overlapped is charged as Recorded: the model
                            // does not track the pool's free memory at the
                            // switch's start (docs/sim.md says so).
                            PageInPlan::Recorded | PageInPlan::Overlapped => {
                                let secs = match last {
                                    Some((o, mi, t)) if o == out && mi == missing => t,
                                    _ => out as f64 / dev.write_bps + missing as f64 / dev.read_bps,
                                };
                                last = Some((out, missing, secs));
                                self.cost[n.0 as usize] += secs;
                            }
                            PageInPlan::Demand if random => {
                                let r = self.cfg.paging.random_refill(
                                    mem,
                                    missing,
                                    short > 0,
                                    work_left,
                                    side,
                                );
                                let x = r.end_sweeps;
                                let own = (r.own(x) * PAGE) as u64;
                                self.t.paged_in += own;
                                self.t.paged_out += own;
                                own_moved += own;
                                node.slots[k].pending_in = missing;
                                faulted = faulted.max(missing);
                                if refill.is_none_or(|o: Refill| o.time(o.end_sweeps) < r.time(x)) {
                                    refill = Some(r);
                                }
                            }
                            PageInPlan::Demand => {
                                let paging = &self.cfg.paging;
                                let bytes = paging.demand_faulted(mem, missing, short > 0);
                                // Its own pages evicted ahead of its sweep
                                // come back too (`demand_faulted`).
                                let own = bytes - missing;
                                self.t.paged_in += own;
                                self.t.paged_out += own;
                                own_moved += own;
                                let w = (out + own) as f64 / dev.write_bps;
                                node.slots[k].pending_in = missing;
                                faulted = faulted.max(bytes);
                                // The eviction's writes queue at the
                                // device with the faults' reads and the
                                // faulting job waits for its reads only:
                                // reclaim writes asynchronously.
                                stall = stall.max(w.max(paging.demand_read_s(bytes)));
                                // The kernel's work for the pages moved
                                // in and out, in the faulting ranks. Not
                                // divided among them: the reclaim of one
                                // memory cgroup takes its LRU's lock, and
                                // measured, a 2-rank job lost more to a
                                // resume than a 1-rank one (7.2 s against
                                // 6.3, 4.4 against 3.6 s on another day;
                                // `bench/sim_paging_params.py`).
                                let moved = bytes + short + own;
                                kernel = kernel.max(paging.demand_cpu_s(moved));
                            }
                        }
                        self.touched.push(n.0);
                    }
                    self.jobs.get_mut(job).expect("live").nodes = nodes;
                    let j = self.jobs.get_mut(job).expect("live");
                    j.running = true;
                    j.clean = 0.0;
                    j.own_moved = own_moved;
                    let (span, work) = match refill {
                        Some(r) => {
                            let (span, work, _) = r.whole();
                            (span, work)
                        }
                        None => self.cfg.paging.demand_page_in(
                            faulted as f64 / mem.max(1) as f64,
                            stall,
                            kernel,
                        ),
                    };
                    j.refill = refill;
                    to_run.push((*job, span, work));
                }
                Action::WriteBack { job, .. } => {
                    self.jobs.get_mut(job).expect("live").bg_from = Some(now);
                }
                // A prefetch is a hint an executor may ignore: the resume
                // then brings everything back (docs/sim.md).
                Action::PageIn { .. }
                | Action::Protect { .. }
                | Action::Boost { .. }
                | Action::Defer { .. } => {}
            }
        }
        // Nodes page in parallel; the switch lasts as long as the slowest.
        let mut took: f64 = 0.0;
        for n in self.touched.iter().chain(&room_nodes) {
            let cost = &mut self.cost[*n as usize];
            took = took.max(*cost);
            *cost = 0.0;
        }
        let took = Duration::from_secs_f64(took);
        for (id, stall, work) in to_run {
            let j = self.jobs.get_mut(&id).expect("live");
            j.stall_work = work;
            j.stall_from = now + took;
            j.active_from = now + took + Duration::from_secs_f64(stall);
            self.t.paging_node_s += (j.active_from - now).as_secs_f64() * j.nodes.len() as f64;
            self.dirty.push(id);
        }
        if is_switch {
            self.t.switches += 1;
            self.t.switch_s += took.as_secs_f64();
            self.switching += 1;
            self.schedule_switch_done(now + took, SwitchDone { took });
        }
        self.refresh();
    }

    /// The working set a switch makes room for on `node` when it brings
    /// `job` in: the runtime's rule (`room::room_for`) on the model's
    /// bytes. The model's jobs touch all their memory every quantum (paper
    /// 004's sweeps), so what a job touched, kept and declared are its
    /// memory here, and the rule gives its memory: a model of jobs whose
    /// phases touch less than their peak would pass less.
    fn room_for(&self, job: JobId, node: u32) -> u64 {
        let m = self.cfg.node_memory;
        let est = |j: &JobId| {
            let b = Some(self.jobs[j].mem.min(m));
            room::Estimate {
                touched: b,
                kept: b,
                declared: b,
            }
        };
        let others = self.nodes[node as usize]
            .slots
            .iter()
            .filter(|s| s.job != job)
            .fold(0u64, |t, s| t.saturating_add(est(&s.job).touches()));
        room::room_for(est(&job), others, m, capacity::EXACT)
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
