//! `cosched`: every job runs as soon as it arrives; the kernel shares the
//! CPUs and the memory among them. A job is placed on the nodes that host
//! the fewest running jobs, or on the nodes its spec places it on
//! ([`JobSpec::placed`](crate::JobSpec::placed)).

use super::{Decision, Policy, PolicyKind};
use crate::action::Action;
use crate::event::Event;
use crate::state::State;

#[derive(Debug, Default)]
pub struct Cosched;

impl Policy for Cosched {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Cosched
    }

    fn reads_node_load(&self) -> bool {
        true
    }

    fn on_event(&mut self, event: &Event, state: &State) -> Decision {
        let Event::JobArrived(job) = event else {
            return Decision::default();
        };
        let nodes = match &state.job(*job).spec.placed {
            Some(placed) => placed.clone(),
            None => super::least_loaded_nodes(state, *job),
        };
        Decision {
            actions: vec![Action::Start { job: *job, nodes }],
            ..Decision::default()
        }
    }
}
