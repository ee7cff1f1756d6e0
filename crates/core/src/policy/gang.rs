//! `gang`: Ousterhout's matrix. Columns are nodes, rows are time slots; a
//! job occupies the columns of its nodes in one row. One row runs at a time,
//! and the rows take turns, quantum by quantum, round-robin. Jobs in other
//! rows are suspended with all their ranks, so a parallel job's ranks always
//! run together.
//!
//! A new job goes into the first row with enough free columns (first fit),
//! else into a new row. As jobs get whole nodes, a one-node cluster holds
//! one job per row: one job at a time, as Slurm's gang scheduling does with
//! exclusive nodes. A job placed by its spec
//! ([`JobSpec::placed`](crate::JobSpec::placed)) goes into the first row
//! where its nodes are free, else into a new row, on those nodes.

use super::{Decision, Policy, PolicyKind, Timer};
use crate::action::Action;
use crate::event::Event;
use crate::model::{JobId, NodeId, Time};
use crate::quantum::Quantum;
use crate::state::{JobStatus, State};
use crate::switching::Switching;
use std::collections::HashMap;
use std::time::Duration;

/// One time slot of the matrix: its jobs with their nodes, and which nodes
/// are still free, as a bitset, so that placing a job on a cluster of
/// thousands of nodes takes a word per 64 nodes, not a scan of every job.
#[derive(Debug)]
struct Row {
    /// Stable while rows come and go (see `Gang::row_of`).
    id: u64,
    jobs: Vec<(JobId, Vec<NodeId>)>,
    free: Vec<u64>,
    free_count: usize,
}

impl Row {
    fn new(id: u64, nodes: usize) -> Self {
        let mut free = vec![u64::MAX; nodes.div_ceil(64)];
        let tail = nodes % 64;
        if tail > 0 {
            *free.last_mut().expect("a cluster has nodes") = (1u64 << tail) - 1;
        }
        Row {
            id,
            jobs: Vec::new(),
            free,
            free_count: nodes,
        }
    }

    /// The `need` lowest-numbered free nodes, taken.
    fn take(&mut self, need: usize) -> Vec<NodeId> {
        let mut out = Vec::with_capacity(need);
        for (w, word) in self.free.iter_mut().enumerate() {
            while *word != 0 && out.len() < need {
                let bit = word.trailing_zeros();
                *word &= *word - 1;
                out.push(NodeId(w as u32 * 64 + bit));
            }
            if out.len() == need {
                break;
            }
        }
        self.free_count -= out.len();
        out
    }

    fn is_free(&self, n: NodeId) -> bool {
        self.free[n.0 as usize / 64] & (1 << (n.0 % 64)) != 0
    }

    /// `nodes`, free, taken.
    fn take_these(&mut self, nodes: &[NodeId]) {
        for n in nodes {
            self.free[n.0 as usize / 64] &= !(1 << (n.0 % 64));
        }
        self.free_count -= nodes.len();
    }

    fn give_back(&mut self, nodes: &[NodeId]) {
        for n in nodes {
            self.free[n.0 as usize / 64] |= 1 << (n.0 % 64);
        }
        self.free_count += nodes.len();
    }
}

/// The rows' free columns as a max tree over their positions, so that an
/// arrival finds the first row with room in a descent, not a scan of every
/// row: an overloaded cluster has thousands. Leaves hold free + 1 (0 past
/// the last row), from `tree.len() / 2` on.
#[derive(Debug, Default)]
struct FreeIndex {
    tree: Vec<u32>,
}

impl FreeIndex {
    fn leaves(&self) -> usize {
        self.tree.len() / 2
    }

    /// Rebuild over the rows as they are (after one went: the others moved).
    fn rebuild(&mut self, rows: &[Row]) {
        let leaves = rows.len().next_power_of_two().max(1);
        self.tree.clear();
        self.tree.resize(2 * leaves, 0);
        for (k, row) in rows.iter().enumerate() {
            self.tree[leaves + k] = row.free_count as u32 + 1;
        }
        for k in (1..leaves).rev() {
            self.tree[k] = self.tree[2 * k].max(self.tree[2 * k + 1]);
        }
    }

    /// Row `r` has `free` columns free now.
    fn set(&mut self, r: usize, free: usize, rows: &[Row]) {
        if r >= self.leaves() {
            return self.rebuild(rows);
        }
        let mut k = self.leaves() + r;
        self.tree[k] = free as u32 + 1;
        while k > 1 {
            k /= 2;
            self.tree[k] = self.tree[2 * k].max(self.tree[2 * k + 1]);
        }
    }

    /// The first row with at least `need` columns free.
    fn first(&self, need: usize) -> Option<usize> {
        let bound = need as u32 + 1;
        if self.tree.get(1).is_none_or(|m| *m < bound) {
            return None;
        }
        let mut k = 1;
        while k < self.leaves() {
            k = if self.tree[2 * k] >= bound {
                2 * k
            } else {
                2 * k + 1
            };
        }
        Some(k - self.leaves())
    }
}

#[derive(Debug)]
pub struct Gang {
    quantum: Quantum,
    /// The running quantum's length: the set length, or grown after a
    /// dear switch (`Quantum::after`).
    length: Duration,
    switching: Switching,
    rows: Vec<Row>,
    free: FreeIndex,
    /// The row of each job in the matrix, by row id: a job's end finds its
    /// row among the rows, not among all the jobs.
    row_of: HashMap<JobId, u64>,
    next_row: u64,
    /// The row running now, if any.
    current: Option<usize>,
    /// When the running row's quantum ends; the timer fires earlier, at
    /// the start of the background-writing window, when `bg` is on.
    quantum_end: Option<Time>,
    /// The timer set now is the start of the background-writing window.
    in_bg_window: bool,
}

impl Gang {
    pub fn new(quantum: impl Into<Quantum>, switching: Switching) -> Self {
        let quantum = quantum.into();
        assert!(
            !quantum.length.is_zero(),
            "gang scheduling needs a quantum > 0"
        );
        Gang {
            quantum,
            length: quantum.length,
            switching,
            rows: Vec::new(),
            free: FreeIndex::default(),
            row_of: HashMap::new(),
            next_row: 0,
            current: None,
            quantum_end: None,
            in_bg_window: false,
        }
    }

    fn place(&mut self, job: JobId, state: &State) -> usize {
        let all = state.cluster().nodes.len();
        let placed = state.job(job).spec.placed.as_deref();
        // A job wider than the cluster gets all of it, in a row of its own.
        let need = (state.cluster().nodes_needed(state.job(job).spec.ranks) as usize).min(all);
        let found = match placed {
            // A scan of the rows: only jobs taken back are placed.
            Some(on) => self
                .rows
                .iter()
                .position(|row| on.iter().all(|n| row.is_free(*n))),
            None => self.free.first(need),
        };
        let r = match found {
            Some(r) => r,
            None => {
                self.rows.push(Row::new(self.next_row, all));
                self.next_row += 1;
                self.rows.len() - 1
            }
        };
        self.row_of.insert(job, self.rows[r].id);
        let nodes = match placed {
            Some(on) => {
                self.rows[r].take_these(on);
                on.to_vec()
            }
            None => self.rows[r].take(need),
        };
        self.rows[r].jobs.push((job, nodes));
        self.free.set(r, self.rows[r].free_count, &self.rows);
        r
    }

    /// Start or resume every job of `row`. With `so/ao`, each incoming job
    /// first gets room made from the suspended jobs, the outgoing ones
    /// first (they run again last), then the others by how far off their
    /// turn is; with `so`, it is protected before it runs.
    fn activate(&mut self, row: usize, state: &State, actions: &mut Vec<Action>) {
        self.current = Some(row);
        let n = self.rows.len();
        // Rows in the order they will next run, after this one; reversed,
        // the job needed last comes first. Only `so/ao` asks for them.
        // Without `so/ao` no rows are listed: a switch then costs the two
        // rows it swaps, not a pass over every row of the matrix.
        let rounds = if self.switching.makes_room() { n } else { 1 };
        let victims: Vec<JobId> = (1..rounds)
            .rev()
            .flat_map(|k| self.rows[(row + k) % n].jobs.iter().map(|(j, _)| *j))
            // Jobs never started hold no memory; the running ones are being
            // suspended by this same decision.
            .filter(|j| {
                matches!(
                    state.job(*j).status,
                    JobStatus::Suspended | JobStatus::Running
                )
            })
            .collect();
        for (job, nodes) in &self.rows[row].jobs {
            let (job, suspended) = (*job, state.job(*job).status == JobStatus::Suspended);
            if self.switching.makes_room() && !victims.is_empty() {
                actions.push(Action::MakeRoom {
                    job,
                    from: victims.clone(),
                });
            }
            if suspended {
                if self.switching.so {
                    actions.push(Action::Protect { job, on: true });
                }
                actions.push(Action::Resume {
                    job,
                    page_in: self.switching.page_in(),
                });
            } else {
                actions.push(Action::Start {
                    job,
                    nodes: nodes.clone(),
                });
                // A new job's cgroup exists only once it is started.
                if self.switching.so {
                    actions.push(Action::Protect { job, on: true });
                }
            }
        }
    }

    /// Suspend every job of `row`.
    fn deactivate(&self, row: usize, actions: &mut Vec<Action>) {
        for (job, _) in &self.rows[row].jobs {
            actions.push(Action::Suspend {
                job: *job,
                page_out: self.switching.page_out(),
            });
            if self.switching.so {
                actions.push(Action::Protect {
                    job: *job,
                    on: false,
                });
            }
        }
    }

    /// A fresh quantum from `now`, grown to pay for the switch that just
    /// brought its row in (`after`, if asked to), else the set length: a
    /// quantum with no switch before it has nothing to pay for. The timer
    /// fires at its end, or first at the start of its background-writing
    /// window when there is someone to switch to.
    fn next_quantum(&mut self, now: Time, after: Option<Duration>) -> Timer {
        self.length = after.map_or(self.quantum.length, |took| self.quantum.after(took));
        let end = now + self.length;
        self.quantum_end = Some(end);
        match self.switching.bg_window(self.length) {
            Some(w) if self.rows.len() > 1 => {
                self.in_bg_window = true;
                Timer::At(end - w)
            }
            _ => {
                self.in_bg_window = false;
                Timer::At(end)
            }
        }
    }

    /// Arm the background-writing window of the running quantum if it has
    /// none yet and has not reached it.
    fn open_window_later(&mut self, now: Time) -> Timer {
        match (self.quantum_end, self.switching.bg_window(self.length)) {
            (Some(end), Some(w)) if !self.in_bg_window && end - w > now => {
                self.in_bg_window = true;
                Timer::At(end - w)
            }
            _ => Timer::Keep,
        }
    }
}

impl Policy for Gang {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Gang
    }

    fn on_event(&mut self, event: &Event, state: &State) -> Decision {
        let now = state.now();
        let mut actions = Vec::new();
        let timer = match event {
            Event::JobArrived(job) => {
                let row = self.place(*job, state);
                match self.current {
                    None => {
                        self.activate(row, state, &mut actions);
                        self.next_quantum(now, None)
                    }
                    // Joining the running slot: start at once, as its
                    // columns are free in this quantum.
                    Some(cur) if cur == row => {
                        let nodes = self.rows[row]
                            .jobs
                            .last()
                            .map(|(_, n)| n.clone())
                            .unwrap_or_default();
                        actions.push(Action::Start { job: *job, nodes });
                        if self.switching.so {
                            actions.push(Action::Protect {
                                job: *job,
                                on: true,
                            });
                        }
                        Timer::Keep
                    }
                    // Someone to switch to now: the running quantum may
                    // need its background-writing window after all.
                    Some(_) => self.open_window_later(now),
                }
            }
            Event::JobFinished(job) => {
                let found = self.row_of.remove(job).and_then(|id| {
                    // Ids grow along the rows: a row's place is a search.
                    let r = self.rows.binary_search_by_key(&id, |row| row.id).ok()?;
                    let k = self.rows[r].jobs.iter().position(|(j, _)| j == job)?;
                    Some((r, k))
                });
                let Some((r, k)) = found else {
                    return Decision::default();
                };
                let (_, nodes) = self.rows[r].jobs.remove(k);
                self.rows[r].give_back(&nodes);
                if !self.rows[r].jobs.is_empty() {
                    self.free.set(r, self.rows[r].free_count, &self.rows);
                    Timer::Keep
                } else {
                    self.rows.remove(r);
                    self.free.rebuild(&self.rows);
                    match self.current {
                        // The running slot emptied: the next one gets a
                        // fresh quantum now rather than waiting out the rest.
                        Some(cur) if cur == r => {
                            self.current = None;
                            if self.rows.is_empty() {
                                Timer::Cancel
                            } else {
                                self.activate(r % self.rows.len(), state, &mut actions);
                                self.next_quantum(now, None)
                            }
                        }
                        Some(cur) if cur > r => {
                            self.current = Some(cur - 1);
                            Timer::Keep
                        }
                        _ => Timer::Keep,
                    }
                }
            }
            // The background-writing window of the running row opens.
            Event::QuantumExpired if self.in_bg_window => {
                self.in_bg_window = false;
                if let (Some(cur), Some(end)) = (self.current, self.quantum_end) {
                    if self.rows.len() > 1 {
                        for (job, _) in &self.rows[cur].jobs {
                            actions.push(Action::WriteBack {
                                job: *job,
                                until: end,
                            });
                        }
                    }
                    Timer::At(end)
                } else {
                    Timer::Cancel
                }
            }
            Event::QuantumExpired => match self.current {
                Some(cur) if self.rows.len() > 1 => {
                    self.deactivate(cur, &mut actions);
                    self.activate((cur + 1) % self.rows.len(), state, &mut actions);
                    self.next_quantum(now, None)
                }
                // Alone in the matrix: no one to switch to, keep running.
                Some(_) => self.next_quantum(now, None),
                None => Timer::Cancel,
            },
            // A quantum is time to run: it starts when the switch that
            // brought the slot in is done, not when the switch began.
            // It lasts long enough to pay for that switch, if asked to.
            Event::SwitchDone { took } if self.current.is_some() => {
                self.next_quantum(now, Some(*took))
            }
            Event::SwitchDone { .. }
            | Event::MemoryPressure { .. }
            | Event::JobMemory { .. }
            | Event::JobTraffic { .. } => Timer::Keep,
        };
        Decision { actions, timer }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_free_index_finds_the_first_row_with_room() {
        let mut rows: Vec<Row> = Vec::new();
        let mut index = FreeIndex::default();
        let mut x: u64 = 3;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for step in 0..3000 {
            match next(4) {
                0 if !rows.is_empty() => {
                    rows.remove(next(rows.len() as u64) as usize);
                    index.rebuild(&rows);
                }
                1 | 2 if !rows.is_empty() => {
                    let r = next(rows.len() as u64) as usize;
                    let need = next(rows[r].free_count as u64 + 1) as usize;
                    rows[r].take(need);
                    index.set(r, rows[r].free_count, &rows);
                }
                _ => {
                    rows.push(Row::new(step, 100));
                    let r = rows.len() - 1;
                    index.set(r, rows[r].free_count, &rows);
                }
            }
            for need in [0, 1, 7, 50, 100, 101] {
                let scan = rows.iter().position(|row| row.free_count >= need);
                assert_eq!(index.first(need), scan, "step {step}, need {need}");
            }
        }
    }
}
