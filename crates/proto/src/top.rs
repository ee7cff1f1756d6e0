//! `memgang top`'s answer ([`crate::Request::Top`]): the node as memgangd's
//! node loop last published it (at most one turn of the loop old, a few
//! hundred milliseconds, or a switch's length), with what the switch in
//! progress is paging as it goes. Any user may ask: they see their own
//! jobs in detail and the others' as counts (root sees every job), as
//! `status` shows each user their own jobs only.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    /// When memgangd answered (unix s).
    pub at_unix_s: f64,
    /// The policy (`gang`, `hybrid`, ...) and its quantum.
    pub policy: String,
    pub quantum_s: f64,
    pub pool_limit_bytes: u64,
    /// Memory charged to the pool (None: unreadable).
    pub pool_usage_bytes: Option<u64>,
    /// The node's swap, what is in use of it, and what admission lets
    /// jobs fill.
    pub swap_total_bytes: u64,
    pub swap_used_bytes: Option<u64>,
    pub swap_usable_bytes: u64,
    /// The switch in progress: since when (unix s).
    pub switching_since_unix_s: Option<f64>,
    /// When the policy next acts (the end of the quantum, or a window
    /// before it for background writing or an early page-in), while a
    /// job on the node waits for its turn (unix s).
    pub next_switch_unix_s: Option<f64>,
    /// The last switches, oldest first.
    pub switches: Vec<SwitchView>,
    /// The jobs in progress the caller may see, by id.
    pub jobs: Vec<JobView>,
    /// Other users' jobs in progress, counted by activity (empty for
    /// root, who sees them in `jobs`).
    pub others: Vec<Count>,
    /// The caller's jobs past the first [`MAX_JOBS`] in `jobs` (running
    /// ones first, then paging, frozen, queued), counted by activity: an
    /// answer's size is bounded whatever the queue's length.
    #[serde(default)]
    pub more: Vec<Count>,
}

/// The most jobs a [`NodeView`] lists one by one.
pub const MAX_JOBS: usize = 100;
/// A job's name is cut to this many characters in a [`NodeView`].
pub const MAX_NAME: usize = 64;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwitchView {
    pub at_unix_s: f64,
    pub took_s: f64,
    /// The caller's jobs it suspended and resumed (or started).
    pub out: Vec<u64>,
    pub into: Vec<u64>,
    /// Other users' jobs it suspended or resumed.
    pub others: u32,
    pub paged_out_bytes: u64,
    pub paged_in_bytes: u64,
}

/// What a job in progress is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    /// Running, not being paged.
    Running,
    /// A switch is bringing its memory back; it runs once it is thawed.
    PagingIn,
    /// A switch froze it and is paging it out.
    PagingOut,
    /// Frozen, waiting for its turn.
    Frozen,
    /// Not started: waiting for memory, or admitted and waiting for the
    /// policy to start it (`reason` says which).
    Queued,
}

impl Activity {
    pub const ALL: [Activity; 5] = [
        Activity::Running,
        Activity::PagingIn,
        Activity::PagingOut,
        Activity::Frozen,
        Activity::Queued,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Activity::Running => "running",
            Activity::PagingIn => "paging in",
            Activity::PagingOut => "paging out",
            Activity::Frozen => "frozen",
            Activity::Queued => "queued",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: u64,
    pub uid: u32,
    pub name: String,
    pub activity: Activity,
    /// Why it waits (a queued job).
    pub reason: Option<String>,
    /// Its declared memory.
    pub memory_bytes: u64,
    /// Its resident anonymous memory and its bytes in swap at the last
    /// sample (every second, between switches); None before it runs, or
    /// where the kernel does not say.
    pub resident_bytes: Option<u64>,
    pub swapped_bytes: Option<u64>,
    /// The share of its time since it started that it has run: its share
    /// of the node's turns.
    pub run_share: Option<f64>,
    pub started_unix_s: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Count {
    pub activity: Activity,
    pub jobs: u32,
}

impl Count {
    /// Jobs counted by activity, in [`Activity`]'s order; none at 0.
    pub fn of(activities: impl IntoIterator<Item = Activity>) -> Vec<Count> {
        let mut n = [0u32; Activity::ALL.len()];
        for a in activities {
            n[a as usize] += 1;
        }
        (Activity::ALL.iter().zip(n))
            .filter(|(_, jobs)| *jobs > 0)
            .map(|(&activity, jobs)| Count { activity, jobs })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Request, Response};

    #[test]
    fn top_asks_in_one_short_line_and_its_view_round_trips() {
        let line = serde_json::to_string(&Request::Top).unwrap();
        assert_eq!(line, r#"{"op":"top"}"#);
        let view = NodeView {
            at_unix_s: 1.5,
            policy: "gang".into(),
            quantum_s: 1.0,
            pool_limit_bytes: 256 << 20,
            pool_usage_bytes: Some(200 << 20),
            swap_total_bytes: 1 << 30,
            swap_used_bytes: None,
            swap_usable_bytes: 512 << 20,
            switching_since_unix_s: Some(1.0),
            next_switch_unix_s: None,
            switches: vec![SwitchView {
                at_unix_s: 0.5,
                took_s: 0.25,
                out: vec![1],
                into: vec![],
                others: 1,
                paged_out_bytes: 10,
                paged_in_bytes: 0,
            }],
            jobs: vec![JobView {
                id: 1,
                uid: 1000,
                name: "a".into(),
                activity: Activity::PagingOut,
                reason: None,
                memory_bytes: 1,
                resident_bytes: Some(2),
                swapped_bytes: None,
                run_share: Some(0.5),
                started_unix_s: Some(0.1),
            }],
            others: vec![Count {
                activity: Activity::Running,
                jobs: 1,
            }],
            more: Vec::new(),
        };
        let r = Response::Top {
            view: Box::new(view),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(r#""activity":"paging_out""#), "{line}");
        assert_eq!(serde_json::from_str::<Response>(&line).unwrap(), r);
    }

    #[test]
    fn counts_come_in_activity_order_without_zeros() {
        use Activity::*;
        let c = Count::of([Queued, Running, Queued, Frozen]);
        let got: Vec<_> = c.iter().map(|c| (c.activity, c.jobs)).collect();
        assert_eq!(got, [(Running, 1), (Frozen, 1), (Queued, 2)]);
        assert!(Count::of([]).is_empty());
    }
}
