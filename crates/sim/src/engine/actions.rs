//! Carrying a decision out on the simulated cluster: one method per
//! action (start, suspend, make-room, resume, background writing), each
//! charging its nodes' paging to the switch, and the switch's end.

use super::{Simulator, Slot, SwitchDone};
use crate::paging::{Access, Refill, PAGE};
use memgang_core::{capacity, room};
use memgang_core::{Action, JobId, NodeId, PageInPlan, PageOutPlan};
use std::time::Duration;

/// A job set to run: its id, its own demand-paging stall (s) and the work
/// (s) it does while it faults its pages back in.
type ToRun = (JobId, f64, f64);

/// What a suspension does on each of the job's nodes.
struct Leaving {
    job: JobId,
    /// Memory it wants per node, and the CPUs it kept busy.
    want: u64,
    cpu: f64,
    /// Share of a cut-short page-in it had still to bring.
    undone: f64,
    /// Share of its memory background writing made clean.
    clean: f64,
    /// Its memory is paged out now (`ao`), not left to the kernel.
    aggressive: bool,
}

/// A resumed job, as each of its nodes pages it in.
struct Coming {
    job: JobId,
    page_in: PageInPlan,
    want: u64,
    cpu: f64,
    /// `want`, at most a node's memory.
    mem: u64,
    /// Seconds of its work left.
    work_left: f64,
    /// A random toucher faulting on demand.
    random: bool,
}

/// A resume's cost, gathered over its nodes.
#[derive(Default)]
struct ComingCost {
    stall: f64,
    kernel: f64,
    faulted: u64,
    own_moved: u64,
    /// A random toucher's page-in on its slowest node.
    refill: Option<Refill>,
    /// The seconds for the last (written, read) pair, reused while the
    /// next node pages the same.
    last: Option<(u64, u64, f64)>,
}

impl Simulator<'_> {
    /// Carry out a decision. A decision that suspends or resumes is a
    /// switch: its nodes page in parallel, each one its share in order, and
    /// the switch is done when the slowest is; the policy then hears
    /// `SwitchDone`, as from the runtime.
    pub(super) fn execute(&mut self, actions: Vec<Action>) {
        if actions.is_empty() {
            self.refresh();
            return;
        }
        let is_switch = actions.iter().any(Action::is_switch);
        // Jobs set to run, with their own demand-paging stall.
        let mut to_run: Vec<ToRun> = Vec::new();
        // Nodes that page in this decision: those touched (a job leaving
        // or coming; before the first action, only the nodes of a job that
        // ended, which page nothing), and those `MakeRoom` takes from.
        let mut room_nodes: Vec<u32> = Vec::new();
        for action in &actions {
            match action {
                Action::Start { job, nodes } => to_run.push(self.start(*job, nodes)),
                Action::Suspend { job, page_out } => self.suspend(*job, *page_out),
                Action::MakeRoom { job, from } => self.make_room(*job, from, &mut room_nodes),
                Action::Resume { job, page_in } => to_run.push(self.resume(*job, *page_in)),
                Action::WriteBack { job, .. } => {
                    self.jobs.get_mut(job).expect("live").bg_from = Some(self.now);
                }
                // A prefetch is a hint an executor may ignore: the resume
                // then brings everything back (docs/sim.md).
                Action::PageIn { .. }
                | Action::Protect { .. }
                | Action::Boost { .. }
                | Action::Defer { .. } => {}
            }
        }
        self.end_decision(is_switch, to_run, &room_nodes);
        self.refresh();
    }

    /// `Start`: the job's memory on each of its nodes, what it lacks there
    /// evicted from the others first.
    fn start(&mut self, job: JobId, nodes: &[NodeId]) -> ToRun {
        let (m, dev) = (self.cfg.node_memory, self.cfg.paging.device);
        self.t.node_actions += nodes.len() as u64;
        let (want, cpu) = (self.jobs[&job].mem, self.jobs[&job].cpu_per_node);
        let mem = want.min(m);
        let mut stall: f64 = 0.0;
        for n in nodes {
            let free = m.saturating_sub(self.nodes[n.0 as usize].used);
            let short = room::shortfall(mem, 0, free, capacity::EXACT);
            let out = if short > 0 {
                self.evict(n.0, job, short, None)
            } else {
                0
            };
            let node = &mut self.nodes[n.0 as usize];
            node.slots.push(Slot {
                job,
                resident: mem,
                pending_in: 0,
            });
            node.used += mem;
            node.run(job, want, cpu);
            stall = stall.max(out as f64 / dev.write_bps);
            self.touched.push(n.0);
        }
        let j = self.jobs.get_mut(&job).expect("live");
        j.nodes = nodes.to_vec();
        j.running = true;
        j.started = Some(self.now);
        (job, stall, 0.0)
    }

    /// `Suspend`: its work counted to now, a page-in cut short undone in
    /// the share it had not done, background writing's clean share kept;
    /// then its nodes ([`Self::leave_nodes`]).
    fn suspend(&mut self, job: JobId, page_out: PageOutPlan) {
        let (now, m, dev) = (self.now, self.cfg.node_memory, self.cfg.paging.device);
        let j = self.jobs.get_mut(&job).expect("live");
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
        self.ends.remove(job);
        let (want, cpu) = (j.mem, j.cpu_per_node);
        let mem = want.min(m);
        if let Some(from) = j.bg_from.take() {
            let wrote = (dev.write_bps * (now - from).as_secs_f64()).min(mem as f64);
            j.clean = wrote / mem.max(1) as f64;
            self.t.background += wrote as u64 * j.nodes.len() as u64;
        }
        let leaving = Leaving {
            job,
            want,
            cpu,
            undone,
            clean: j.clean,
            aggressive: matches!(page_out, PageOutPlan::Aggressive { .. }),
        };
        let nodes = std::mem::take(&mut j.nodes);
        self.leave_nodes(&nodes, &leaving);
        self.jobs.get_mut(&job).expect("live").nodes = nodes;
    }

    /// A suspended job on each of its nodes: it stops running there, what
    /// a cut-short page-in had not brought goes back, and an aggressive
    /// page-out writes the rest now, charged to the node.
    fn leave_nodes(&mut self, nodes: &[NodeId], l: &Leaving) {
        let dev = self.cfg.paging.device;
        // A job holds the same on most of its nodes: the bytes
        // written and the seconds they take, for the last
        // amount paged out, are reused rather than converted
        // and divided again on every node (same values).
        let mut last: Option<(u64, u64, f64)> = None;
        for n in nodes {
            let node = &mut self.nodes[n.0 as usize];
            node.stop(l.job, l.want, l.cpu);
            self.touched.push(n.0);
            // No slot: nothing of it here to bring back or page out.
            let Some(k) = node.slots.iter().position(|s| s.job == l.job) else {
                continue;
            };
            let s = &mut node.slots[k];
            let back = if s.pending_in == 0 {
                0
            } else {
                (s.pending_in as f64 * l.undone) as u64
            };
            s.resident -= back;
            s.pending_in = 0;
            // Never faulted in after all.
            self.t.paged_in -= back;
            let mut used = back;
            if l.aggressive {
                let out = s.resident;
                s.resident = 0;
                used += out;
                let (written, secs) = match last {
                    Some((o, w, t)) if o == out => (w, t),
                    _ => {
                        let w = (out as f64 * (1.0 - l.clean)) as u64;
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

    /// `MakeRoom`: on each of the job's nodes, what it is short of evicted
    /// from the suspended jobs `from`, in order, charged to the node.
    fn make_room(&mut self, job: JobId, from: &[JobId], room_nodes: &mut Vec<u32>) {
        let (m, dev) = (self.cfg.node_memory, self.cfg.paging.device);
        let nodes = self.nodes_of(job);
        self.t.node_actions += nodes.len() as u64;
        for n in nodes {
            let mem = self.room_for(job, n);
            let node = &self.nodes[n as usize];
            let have = node
                .slots
                .iter()
                .find(|s| s.job == job)
                .map_or(0, |s| s.resident);
            // Exact bytes in the model: no margin.
            let short = room::shortfall(mem, have, m.saturating_sub(node.used), capacity::EXACT);
            let out = self.evict(n, job, short, Some(from));
            self.cost[n as usize] += out as f64 / dev.write_bps;
            room_nodes.push(n);
        }
    }

    /// `Resume`: each of its nodes pages it in by `page_in`
    /// ([`Self::come_back_on`]); its demand-paging stall and the work it
    /// does meanwhile from the slowest.
    fn resume(&mut self, job: JobId, page_in: PageInPlan) -> ToRun {
        let (want, cpu) = (self.jobs[&job].mem, self.jobs[&job].cpu_per_node);
        let coming = Coming {
            job,
            page_in,
            want,
            cpu,
            mem: want.min(self.cfg.node_memory),
            work_left: self.jobs[&job].remaining_s,
            random: matches!(page_in, PageInPlan::Demand)
                && self.cfg.paging.access == Access::Random,
        };
        let mut cost = ComingCost::default();
        let nodes = std::mem::take(&mut self.jobs.get_mut(&job).expect("live").nodes);
        self.t.node_actions += nodes.len() as u64;
        for n in &nodes {
            self.come_back_on(n.0, &coming, &mut cost);
        }
        self.jobs.get_mut(&job).expect("live").nodes = nodes;
        let j = self.jobs.get_mut(&job).expect("live");
        j.running = true;
        j.clean = 0.0;
        j.own_moved = cost.own_moved;
        let (span, work) = match cost.refill {
            Some(r) => {
                let (span, work, _) = r.whole();
                (span, work)
            }
            None => self.cfg.paging.demand_page_in(
                cost.faulted as f64 / coming.mem.max(1) as f64,
                cost.stall,
                cost.kernel,
            ),
        };
        j.refill = cost.refill;
        (job, span, work)
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

    /// A resumed job on node `n`: room made for it, its memory back, the
    /// page-in charged to the node (recorded) or to the job (on demand).
    fn come_back_on(&mut self, n: u32, c: &Coming, cost: &mut ComingCost) {
        let (m, dev) = (self.cfg.node_memory, self.cfg.paging.device);
        let (job, mem) = (c.job, c.mem);
        let ws = self.room_for(job, n);
        let node = &mut self.nodes[n as usize];
        // Before the evictions below take the others' slots.
        let side = if c.random { node.age_side(job) } else { 0.0 };
        let mut k = node.slot_index(job);
        let have = node.slots[k].resident;
        let missing = mem.saturating_sub(have);
        let free = m.saturating_sub(node.used);
        let short = room::shortfall(ws, have, free, capacity::EXACT);
        let out = if short > 0 {
            let out = self.evict(n, job, short, None);
            // Evicted slots were swapped out of their places.
            k = self.nodes[n as usize].slot_index(job);
            out
        } else {
            0
        };
        let node = &mut self.nodes[n as usize];
        node.slots[k].resident = mem;
        node.used += missing;
        node.run(job, c.want, c.cpu);
        self.t.paged_in += missing;
        match c.page_in {
            // Overlapped is charged as Recorded: the model
            // does not track the pool's free memory at the
            // switch's start (docs/sim.md says so).
            PageInPlan::Recorded | PageInPlan::Overlapped => {
                let secs = match cost.last {
                    Some((o, mi, t)) if o == out && mi == missing => t,
                    _ => out as f64 / dev.write_bps + missing as f64 / dev.read_bps,
                };
                cost.last = Some((out, missing, secs));
                self.cost[n as usize] += secs;
            }
            PageInPlan::Demand if c.random => {
                let r = self
                    .cfg
                    .paging
                    .random_refill(mem, missing, short > 0, c.work_left, side);
                let x = r.end_sweeps;
                let own = (r.own(x) * PAGE) as u64;
                self.t.paged_in += own;
                self.t.paged_out += own;
                cost.own_moved += own;
                node.slots[k].pending_in = missing;
                cost.faulted = cost.faulted.max(missing);
                if cost
                    .refill
                    .is_none_or(|o: Refill| o.time(o.end_sweeps) < r.time(x))
                {
                    cost.refill = Some(r);
                }
            }
            PageInPlan::Demand => {
                node.slots[k].pending_in = missing;
                self.fault_in(mem, missing, short, out, cost);
            }
        }
        self.touched.push(n);
    }

    /// A sweeping job faulting `missing` bytes back on demand on a node
    /// that evicted `out` (it was `short` of memory): the job's stall and
    /// the kernel's work.
    fn fault_in(&mut self, mem: u64, missing: u64, short: u64, out: u64, cost: &mut ComingCost) {
        let dev = self.cfg.paging.device;
        let paging = &self.cfg.paging;
        let bytes = paging.demand_faulted(mem, missing, short > 0);
        // Its own pages evicted ahead of its sweep
        // come back too (`demand_faulted`).
        let own = bytes - missing;
        self.t.paged_in += own;
        self.t.paged_out += own;
        cost.own_moved += own;
        let w = (out + own) as f64 / dev.write_bps;
        cost.faulted = cost.faulted.max(bytes);
        // The eviction's writes queue at the
        // device with the faults' reads and the
        // faulting job waits for its reads only:
        // reclaim writes asynchronously.
        cost.stall = cost.stall.max(w.max(paging.demand_read_s(bytes)));
        // The kernel's work for the pages moved
        // in and out, in the faulting ranks. Not
        // divided among them: the reclaim of one
        // memory cgroup takes its LRU's lock, and
        // measured, a 2-rank job lost more to a
        // resume than a 1-rank one (7.2 s against
        // 6.3, 4.4 against 3.6 s on another day;
        // `bench/sim_paging_params.py`).
        let moved = bytes + short + own;
        cost.kernel = cost.kernel.max(paging.demand_cpu_s(moved));
    }

    /// The decision's end: its nodes paged in parallel, so a switch lasts
    /// as long as the slowest; the jobs set to run compute after it and
    /// their own stall, and the policy hears of the switch at its end.
    fn end_decision(&mut self, is_switch: bool, to_run: Vec<ToRun>, room_nodes: &[u32]) {
        let now = self.now;
        let mut took: f64 = 0.0;
        for n in self.touched.iter().chain(room_nodes) {
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
    }
}
