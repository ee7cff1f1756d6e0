//! `cosched`: every job runs as soon as it arrives; the kernel shares the
//! CPUs and the memory among them. A job is placed on the nodes that host
//! the fewest running jobs.

use super::{Decision, Policy, PolicyKind};
use crate::action::Action;
use crate::event::Event;
use crate::state::{JobStatus, State};

#[derive(Debug, Default)]
pub struct Cosched;

impl Policy for Cosched {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Cosched
    }

    fn on_event(&mut self, event: &Event, state: &State) -> Decision {
        let Event::JobArrived(job) = event else {
            return Decision::default();
        };
        let mut load = vec![0usize; state.cluster().nodes.len()];
        for j in state.with_status(JobStatus::Running) {
            for n in &j.nodes {
                load[n.0 as usize] += 1;
            }
        }
        let mut nodes: Vec<_> = state.cluster().nodes.iter().map(|n| n.id).collect();
        nodes.sort_by_key(|n| (load[n.0 as usize], *n));
        let need = state.cluster().nodes_needed(state.job(*job).spec.ranks) as usize;
        nodes.truncate(need);
        Decision {
            actions: vec![Action::Start { job: *job, nodes }],
            ..Decision::default()
        }
    }
}
