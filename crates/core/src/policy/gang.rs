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
}

impl Gang {
    pub fn new(quantum: Duration, switching: Switching) -> Self {
        assert!(!quantum.is_zero(), "gang scheduling needs a quantum > 0");
        Gang {
            quantum,
            switching,
            rows: Vec::new(),
            current: None,
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

    /// Start or resume every job of `row`.
    fn activate(&mut self, row: usize, state: &State, actions: &mut Vec<Action>) {
        self.current = Some(row);
        for (job, nodes) in &self.rows[row] {
            actions.push(match state.job(*job).status {
                JobStatus::Suspended => Action::Resume {
                    job: *job,
                    page_in: self.switching.page_in(),
                },
                _ => Action::Start {
                    job: *job,
                    nodes: nodes.clone(),
                },
            });
        }
    }

    fn next_quantum(&self, now: Time) -> Timer {
        Timer::At(now + self.quantum)
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
                        Timer::Keep
                    }
                    Some(_) => Timer::Keep,
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
            Event::QuantumExpired => match self.current {
                Some(cur) if self.rows.len() > 1 => {
                    for (job, _) in &self.rows[cur] {
                        actions.push(Action::Suspend {
                            job: *job,
                            page_out: self.switching.page_out(),
                        });
                    }
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
            Event::SwitchDone { .. } | Event::MemoryPressure { .. } => Timer::Keep,
        };
        Decision { actions, timer }
    }
}
