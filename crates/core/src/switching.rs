//! Which switch mechanisms a time-sharing policy asks for (paper 000 §3),
//! named as the paper names its runs: `lru` (the kernel alone), or
//! mechanisms joined by `/`, such as `so/ao/ai/bg`.
//!
//! | name | paper | what the policy asks for |
//! |------|-------|--------------------------|
//! | `so` | §3.1, Fig. 2 | the running job is protected, so reclaim takes the suspended jobs' pages first, oldest first |
//! | `ao` | §3.2, Fig. 3 | memory is freed eagerly at the switch, in bulk: with `so` only the incoming job's shortfall, from the suspended jobs; alone, the outgoing job's whole resident set |
//! | `ai` | §3.3, Fig. 4 | resident pages are recorded as runs at suspension and brought back in bulk before the job resumes |
//! | `bg` | §3.4 | the running job's pages are written out in the background during the last part of its quantum (10% unless `bg=N` says N%) |

use crate::action::{PageInPlan, PageOutPlan};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The paper's background-writing window: "the last 10% of the time
/// quantum minimizes the repeated writing of pages" (§3.4).
pub const DEFAULT_BG_PERCENT: u8 = 10;
/// A window over half the quantum would write pages the job is still
/// going to dirty again many times over.
const MAX_BG_PERCENT: u8 = 50;

/// The mechanisms a name joins with '/' (besides `lru` alone), as the
/// parser takes them; `bg` also as `bg=N`. The cli's help lists them all.
pub const MECHANISMS: [&str; 4] = ["so", "ao", "ai", "bg"];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Switching {
    /// Selective page-out: memory for the running job comes from the
    /// suspended jobs first.
    #[serde(default)]
    pub so: bool,
    /// Aggressive page-out: memory is freed at the switch, in bulk.
    pub ao: bool,
    /// Adaptive page-in: recorded pages come back in bulk before resuming.
    pub ai: bool,
    /// Background writing in the last `bg`% of each quantum.
    #[serde(default)]
    pub bg: Option<u8>,
}

impl Switching {
    pub const LRU: Switching = Switching {
        so: false,
        ao: false,
        ai: false,
        bg: None,
    };

    /// What happens to an outgoing job's memory. With `so/ao` the page-out
    /// is a [`crate::Action::MakeRoom`] for the incoming job instead, sized
    /// to its need, so the suspension itself only records.
    pub fn page_out(self) -> PageOutPlan {
        match (self.ao && !self.so, self.ai) {
            (true, record) => PageOutPlan::Aggressive { record },
            (false, true) => PageOutPlan::Record,
            (false, false) => PageOutPlan::Lru,
        }
    }

    pub fn page_in(self) -> PageInPlan {
        if self.ai {
            PageInPlan::Recorded
        } else {
            PageInPlan::Demand
        }
    }

    /// Whether the switch frees the incoming job's shortfall explicitly.
    pub fn makes_room(self) -> bool {
        self.so && self.ao
    }

    /// How long before the end of a quantum background writing starts.
    pub fn bg_window(self, quantum: Duration) -> Option<Duration> {
        self.bg
            .map(|pct| quantum.mul_f64(f64::from(pct) / 100.0))
            .filter(|w| !w.is_zero())
    }
}

impl fmt::Display for Switching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bg = match self.bg {
            Some(DEFAULT_BG_PERCENT) => Some("bg".to_string()),
            Some(p) => Some(format!("bg={p}")),
            None => None,
        };
        let names: Vec<String> = [(self.so, "so"), (self.ao, "ao"), (self.ai, "ai")]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, name)| name.to_string())
            .chain(bg)
            .collect();
        if names.is_empty() {
            f.write_str("lru")
        } else {
            f.write_str(&names.join("/"))
        }
    }
}

impl FromStr for Switching {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = Switching::LRU;
        if s == "lru" {
            return Ok(out);
        }
        for name in s.split('/') {
            match name {
                "so" => out.so = true,
                "ao" => out.ao = true,
                "ai" => out.ai = true,
                "bg" => out.bg = Some(DEFAULT_BG_PERCENT),
                _ if name.starts_with("bg=") => {
                    let pct = name[3..].trim_end_matches('%');
                    match pct.parse::<u8>() {
                        Ok(p) if (1..=MAX_BG_PERCENT).contains(&p) => out.bg = Some(p),
                        _ => {
                            return Err(format!(
                                "bad background-writing window {name:?} in {s:?}: \
                                 use bg=N with N a percentage of the quantum from 1 to {MAX_BG_PERCENT}"
                            ))
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown switch mechanism {name:?} in {s:?}: use lru, or {} joined \
                         by '/' (e.g. so/ao/ai/bg)",
                        MECHANISMS.join(", ")
                    ))
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> Switching {
        t.parse().unwrap()
    }

    #[test]
    fn names_parse_and_print_as_in_the_paper() {
        for t in [
            "lru",
            "ao",
            "ai",
            "ao/ai",
            "so",
            "so/ao",
            "so/ao/bg",
            "so/ao/ai/bg",
            "so/bg=20",
        ] {
            assert_eq!(s(t).to_string(), t);
        }
        assert_eq!(s("bg/ai/ao/so").to_string(), "so/ao/ai/bg");
        assert_eq!(s("bg=10%").to_string(), "bg");
        assert!("xx".parse::<Switching>().unwrap_err().contains("unknown"));
        for bad in ["bg=0", "bg=51", "bg=x"] {
            assert!(bad.parse::<Switching>().unwrap_err().contains("bg=N"));
        }
    }

    #[test]
    fn plans_follow_the_mechanisms() {
        assert_eq!(s("lru").page_out(), PageOutPlan::Lru);
        assert_eq!(s("ai").page_out(), PageOutPlan::Record);
        assert_eq!(
            s("ao").page_out(),
            PageOutPlan::Aggressive { record: false }
        );
        assert_eq!(
            s("ao/ai").page_out(),
            PageOutPlan::Aggressive { record: true }
        );
        // With so, ao pages out only the shortfall, as MakeRoom.
        assert_eq!(s("so/ao").page_out(), PageOutPlan::Lru);
        assert_eq!(s("so/ao/ai").page_out(), PageOutPlan::Record);
        assert!(s("so/ao").makes_room() && !s("ao").makes_room() && !s("so").makes_room());
        assert_eq!(s("ao").page_in(), PageInPlan::Demand);
        assert_eq!(s("ao/ai").page_in(), PageInPlan::Recorded);
    }

    #[test]
    fn background_window_is_a_share_of_the_quantum() {
        let q = Duration::from_secs(30);
        assert_eq!(s("bg").bg_window(q), Some(Duration::from_secs(3)));
        assert_eq!(s("bg=20").bg_window(q), Some(Duration::from_secs(6)));
        assert_eq!(s("so").bg_window(q), None);
    }
}
