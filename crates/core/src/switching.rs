//! Which switch mechanisms a time-sharing policy asks for (paper 000 §3),
//! named as the paper names its runs: `lru` (the kernel alone), or
//! mechanisms joined by `/`, such as `ao/ai`.

use crate::action::{PageInPlan, PageOutPlan};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Switching {
    /// Aggressive page-out: the outgoing job's resident set goes out in
    /// bulk at the switch.
    pub ao: bool,
    /// Adaptive page-in: what the job had resident is recorded at
    /// page-out and brought back in bulk at its next switch-in.
    pub ai: bool,
}

impl Switching {
    pub const LRU: Switching = Switching {
        ao: false,
        ai: false,
    };

    pub fn page_out(self) -> PageOutPlan {
        match (self.ao, self.ai) {
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
}

impl fmt::Display for Switching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [(self.ao, "ao"), (self.ai, "ai")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
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
                "ao" => out.ao = true,
                "ai" => out.ai = true,
                "so" | "bg" => {
                    return Err(format!(
                        "switch mechanism {name:?} is not available yet: use lru, ao, ai or ao/ai"
                    ))
                }
                _ => {
                    return Err(format!(
                        "unknown switch mechanism {name:?} in {s:?}: use lru, or ao and ai joined by '/'"
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

    #[test]
    fn names_parse_and_print_as_in_the_paper() {
        for s in ["lru", "ao", "ai", "ao/ai"] {
            assert_eq!(s.parse::<Switching>().unwrap().to_string(), s);
        }
        assert_eq!("ai/ao".parse::<Switching>().unwrap().to_string(), "ao/ai");
        assert!("so/ao"
            .parse::<Switching>()
            .unwrap_err()
            .contains("not available yet"));
        assert!("xx".parse::<Switching>().unwrap_err().contains("unknown"));
    }

    #[test]
    fn plans_follow_the_mechanisms() {
        let s = |t: &str| t.parse::<Switching>().unwrap();
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
        assert_eq!(s("ao").page_in(), PageInPlan::Demand);
        assert_eq!(s("ao/ai").page_in(), PageInPlan::Recorded);
    }
}
