//! `batch`: first come, first served, each job on dedicated nodes until it
//! ends. Strict FCFS (no backfilling): a job never overtakes an earlier one,
//! which is what the switching-overhead reference of paper 000 assumes.
//! A job placed by its spec ([`JobSpec::placed`](crate::JobSpec::placed))
//! starts on its nodes once they are all idle, and the queue behind it
//! waits until then.

use super::{Decision, Policy, PolicyKind};
use crate::action::Action;
use crate::event::Event;
use crate::model::JobId;
use crate::state::State;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct Batch {
    queue: VecDeque<JobId>,
}

impl Policy for Batch {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Batch
    }

    fn reads_node_load(&self) -> bool {
        true
    }

    fn on_event(&mut self, event: &Event, state: &State) -> Decision {
        match event {
            Event::JobArrived(job) => self.queue.push_back(*job),
            Event::JobFinished(_) => {}
            _ => return Decision::default(),
        }
        // The count first: most events of a long queue start nothing, and
        // the list costs a pass over the nodes.
        let mut free = state.idle_node_count();
        let mut idle = Vec::new();
        let mut actions = Vec::new();
        while let Some(&job) = self.queue.front() {
            let spec = &state.job(job).spec;
            let need = state.cluster().nodes_needed(spec.ranks) as usize;
            if need > free {
                break;
            }
            if actions.is_empty() {
                idle = state.idle_nodes();
            }
            let nodes = match &spec.placed {
                Some(placed) if !placed.iter().all(|n| idle.contains(n)) => break,
                Some(placed) => {
                    idle.retain(|n| !placed.contains(n));
                    placed.clone()
                }
                None => idle.drain(..need).collect(),
            };
            self.queue.pop_front();
            free -= need;
            actions.push(Action::Start { job, nodes });
        }
        Decision {
            actions,
            ..Decision::default()
        }
    }
}
