//! Dynamic coscheduling (paper 003 §4.1): a layer over any policy that
//! raises the CPU priority of jobs that communicate, so that a parallel
//! job's ranks run when their messages arrive instead of waiting behind
//! sequential jobs for their time slice.
//!
//! Every [`TRAFFIC_PERIOD`] the executor reports each running job's
//! messages in that period ([`Event::JobTraffic`], per rank; the runtime
//! counts the times its processes slept and woke other than for a page
//! fault, which is what a receive waiting for a message does). The boost is
//! the paper's formula (1),
//!
//! ```text
//!     b_t = (1/W) · (N·L_{t-1} + L_t) / (N + 1)
//! ```
//!
//! with L the messages per period, N = [`DECAY`] and W = [`MESSAGES_PER_STEP`],
//! applied as a nice value `-min(round(b_t), MAX_BOOST)`. Paging prevention
//! comes first (paper 003 §4.2): only a running job is boosted; a job the
//! inner policy suspended or holds back for memory is never raised, and a
//! boost ends when the traffic does.

use super::{Decision, Policy, PolicyKind};
use crate::action::Action;
use crate::event::Event;
use crate::model::JobId;
use crate::state::{JobStatus, State};
use std::collections::HashMap;
use std::time::Duration;

/// The sampling period of the traffic, the paper's 100 ms: short enough
/// that a rank waiting for a message is raised within a scheduler slice or
/// two, long enough that the count is not noise.
pub const TRAFFIC_PERIOD: Duration = Duration::from_millis(100);
/// The paper's decay factor N = 1: the boost follows the last 200 ms.
pub const DECAY: f64 = 1.0;
/// W: messages per period (per rank) that earn one nice step. One message
/// every 100 ms is already a communicating process (the paper's sequential
/// jobs send none), so one step each.
pub const MESSAGES_PER_STEP: f64 = 1.0;
/// The largest boost, nice -5: weight 3.05× a nice-0 process (CFS/EEVDF
/// weights grow 1.25× a step), enough to run first on wake-up against the
/// sequential jobs sharing its CPU without starving them the way -20 would.
pub const MAX_BOOST: i32 = 5;

/// The boost (a nice value, 0 or negative) of a job whose last two
/// periods carried `previous` and `current` messages per rank.
pub fn boost(previous: f64, current: f64) -> i32 {
    let b = (DECAY * previous + current) / (DECAY + 1.0) / MESSAGES_PER_STEP;
    -(b.round().clamp(0.0, MAX_BOOST as f64) as i32)
}

#[derive(Debug)]
pub struct DynamicCosched {
    inner: Box<dyn Policy>,
    /// L_{t-1} per job.
    last: HashMap<JobId, f64>,
    /// The nice value last asked for, per job (absent: 0).
    nice: HashMap<JobId, i32>,
}

impl DynamicCosched {
    pub fn new(inner: Box<dyn Policy>) -> DynamicCosched {
        DynamicCosched {
            inner,
            last: HashMap::new(),
            nice: HashMap::new(),
        }
    }
}

impl Policy for DynamicCosched {
    fn kind(&self) -> PolicyKind {
        self.inner.kind()
    }

    fn reads_node_load(&self) -> bool {
        self.inner.reads_node_load()
    }

    fn on_event(&mut self, event: &Event, state: &State) -> Decision {
        match event {
            Event::JobTraffic { job, messages } => {
                let current = *messages as f64;
                let previous = self.last.insert(*job, current).unwrap_or(0.0);
                // Prevention first: a suspended or queued job stays where
                // the inner policy put it.
                if state.job(*job).status != JobStatus::Running {
                    return Decision::default();
                }
                let nice = boost(previous, current);
                if self.nice.get(job).copied().unwrap_or(0) == nice {
                    return Decision::default();
                }
                self.nice.insert(*job, nice);
                Decision {
                    actions: vec![Action::Boost { job: *job, nice }],
                    ..Decision::default()
                }
            }
            Event::JobFinished(job) => {
                self.last.remove(job);
                self.nice.remove(job);
                self.inner.on_event(event, state)
            }
            _ => {
                let d = self.inner.on_event(event, state);
                // A job the inner policy suspends loses its boost: when it
                // resumes, its traffic earns it again.
                for a in &d.actions {
                    if let Action::Suspend { job, .. } = a {
                        self.nice.remove(job);
                        self.last.remove(job);
                    }
                }
                d
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Cluster, JobSpec};
    use crate::policy::Cosched;
    use crate::scheduler::Scheduler;

    #[test]
    fn the_boost_follows_formula_one() {
        assert_eq!(boost(0.0, 0.0), 0);
        // (1·0 + 1)/2 = 0.5 rounds to 1 step.
        assert_eq!(boost(0.0, 1.0), -1);
        assert_eq!(boost(2.0, 4.0), -3);
        assert_eq!(boost(100.0, 100.0), -MAX_BOOST);
        // Traffic stops: half the last period's boost, then none.
        assert_eq!(boost(4.0, 0.0), -2);
        assert_eq!(boost(0.0, 0.0), 0);
    }

    fn two_jobs() -> Scheduler {
        let cluster = Cluster::uniform(1, 2, 1 << 30);
        let job = |name: &str, ranks| JobSpec {
            name: name.into(),
            ranks,
            memory_bytes: Some(100 << 20),
            arrival: Duration::ZERO,
            placed: None,
        };
        let jobs = vec![job("parallel", 2), job("seq", 1)];
        Scheduler::new(
            cluster,
            jobs,
            Box::new(DynamicCosched::new(Box::new(Cosched))),
        )
    }

    /// The layer reads node load as its inner policy does, so the state
    /// keeps the running counts for cosched beneath it.
    #[test]
    fn the_layer_asks_for_node_load_as_its_inner_policy() {
        assert!(DynamicCosched::new(Box::new(Cosched)).reads_node_load());
        let gang =
            crate::policy::PolicyKind::Gang.build(Duration::from_secs(10), Default::default());
        assert!(!DynamicCosched::new(gang).reads_node_load());
    }

    #[test]
    fn a_communicating_job_is_raised_and_let_down() {
        let mut s = two_jobs();
        s.advance(Duration::ZERO);
        let (p, q) = (JobId(0), JobId(1));
        let traffic = |s: &mut Scheduler, job, messages| {
            s.handle(Duration::ZERO, Event::JobTraffic { job, messages })
        };
        assert_eq!(
            traffic(&mut s, p, 6),
            vec![Action::Boost { job: p, nice: -3 }]
        );
        // Unchanged boost: no action. The silent job is never touched.
        assert_eq!(
            traffic(&mut s, p, 3),
            vec![Action::Boost { job: p, nice: -5 }]
        );
        assert!(traffic(&mut s, q, 0).is_empty());
        assert_eq!(
            traffic(&mut s, p, 0),
            vec![Action::Boost { job: p, nice: -2 }]
        );
        assert_eq!(
            traffic(&mut s, p, 0),
            vec![Action::Boost { job: p, nice: 0 }]
        );
        assert!(traffic(&mut s, p, 0).is_empty());
    }
}
