//! `gang`: Ousterhout's matrix. Columns are nodes, rows are time slots; a
//! job occupies the columns of its nodes in one row. One row runs at a time,
//! and the rows take turns, quantum by quantum, round-robin. Jobs in other
//! rows are suspended with all their ranks, so a parallel job's ranks always
//! run together.
//!
//! A new job goes into the first row with enough free columns (first fit),
//! else into a new row. As jobs get whole nodes, a one-node cluster holds
//! one job per row: one job at a time, as Slurm's gang scheduling does with
//! exclusive nodes.

use super::{Decision, Policy, PolicyKind, Timer};
use crate::action::Action;
use crate::event::Event;
use crate::model::{JobId, NodeId, Time};
use crate::state::{JobStatus, State};
use crate::switching::Switching;
use std::time::Duration;

#[derive(Debug)]
pub struct Gang {
    quantum: Duration,
    switching: Switching,
    /// rows[r] lists the jobs of slot r with the nodes they occupy.
    rows: Vec<Vec<(JobId, Vec<NodeId>)>>,
    /// The row running now, if any.
    current: Option<usize>,
    /// When the running row's quantum ends; the timer fires earlier, at
    /// the start of the background-writing window, when `bg` is on.
    quantum_end: Option<Time>,
    /// The timer set now is the start of the background-writing window.
    in_bg_window: bool,
}

impl Gang {
    pub fn new(quantum: Duration, switching: Switching) -> Self {
        assert!(!quantum.is_zero(), "gang scheduling needs a quantum > 0");
        Gang {
            quantum,
            switching,
            rows: Vec::new(),
            current: None,
            quantum_end: None,
            in_bg_window: false,
        }
    }

    fn place(&mut self, job: JobId, state: &State) -> usize {
        let need = state.cluster().nodes_needed(state.job(job).spec.ranks) as usize;
        let all = state.cluster().nodes.len();
        for (r, row) in self.rows.iter_mut().enumerate() {
            let free: Vec<NodeId> = (0..all as u32)
                .map(NodeId)
                .filter(|n| !row.iter().any(|(_, ns)| ns.contains(n)))
                .collect();
            if free.len() >= need {
                row.push((job, free[..need].to_vec()));
                return r;
            }
        }
        let nodes = (0..need.min(all) as u32).map(NodeId).collect();
        self.rows.push(vec![(job, nodes)]);
        self.rows.len() - 1
    }

    /// Start or resume every job of `row`. With `so/ao`, each incoming job
    /// first gets room made from the suspended jobs, the outgoing ones
    /// first (they run again last), then the others by how far off their
    /// turn is; with `so`, it is protected before it runs.
    fn activate(&mut self, row: usize, state: &State, actions: &mut Vec<Action>) {
        self.current = Some(row);
        let n = self.rows.len();
        // Rows in the order they will next run, after this one; reversed,
        // the job needed last comes first.
        let victims: Vec<JobId> = (1..n)
            .rev()
            .flat_map(|k| self.rows[(row + k) % n].iter().map(|(j, _)| *j))
            // Jobs never started hold no memory; the running ones are being
            // suspended by this same decision.
            .filter(|j| {
                matches!(
                    state.job(*j).status,
                    JobStatus::Suspended | JobStatus::Running
                )
            })
            .collect();
        for (job, nodes) in &self.rows[row] {
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
        for (job, _) in &self.rows[row] {
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

    /// A fresh quantum from `now`. The timer fires at its end, or first at
    /// the start of its background-writing window when there is someone
    /// to switch to.
    fn next_quantum(&mut self, now: Time) -> Timer {
        let end = now + self.quantum;
        self.quantum_end = Some(end);
        match self.switching.bg_window(self.quantum) {
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
        match (self.quantum_end, self.switching.bg_window(self.quantum)) {
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
                        self.next_quantum(now)
                    }
                    // Joining the running slot: start at once, as its
                    // columns are free in this quantum.
                    Some(cur) if cur == row => {
                        let nodes = self.rows[row]
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
                let Some(r) = self
                    .rows
                    .iter()
                    .position(|row| row.iter().any(|(j, _)| j == job))
                else {
                    return Decision::default();
                };
                self.rows[r].retain(|(j, _)| j != job);
                if !self.rows[r].is_empty() {
                    Timer::Keep
                } else {
                    self.rows.remove(r);
                    match self.current {
                        // The running slot emptied: the next one gets a
                        // fresh quantum now rather than waiting out the rest.
                        Some(cur) if cur == r => {
                            self.current = None;
                            if self.rows.is_empty() {
                                Timer::Cancel
                            } else {
                                self.activate(r % self.rows.len(), state, &mut actions);
                                self.next_quantum(now)
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
                        for (job, _) in &self.rows[cur] {
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
                    self.next_quantum(now)
                }
                // Alone in the matrix: no one to switch to, keep running.
                Some(_) => self.next_quantum(now),
                None => Timer::Cancel,
            },
            // A quantum is time to run: it starts when the switch that
            // brought the slot in is done, not when the switch began.
            Event::SwitchDone { .. } if self.current.is_some() => self.next_quantum(now),
            Event::SwitchDone { .. } | Event::MemoryPressure { .. } | Event::JobMemory { .. } => {
                Timer::Keep
            }
        };
        Decision { actions, timer }
    }
}
