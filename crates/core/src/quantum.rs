//! How long a quantum lasts: a fixed length, or one that grows with what
//! the switch before it cost, so that switching takes at most a chosen
//! share of the time (issue 12: a quantum that grows with the measured
//! switch cost).
//!
//! A switch that took `s` followed by a quantum `q` spends `s / (s + q)`
//! of that stretch switching; at most a share `m` of it when
//! `q >= s * (1 - m) / m`. The switch before a quantum is the best guess
//! of the next one: the same jobs take turns, so their pages move again.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A grown quantum is at most this many times the set length: a job in a
/// matrix of r rows waits at most r - 1 quanta for its turn, and an admin
/// who chose 10 s did not choose to wait minutes. A switch dearer than a
/// tenth of the set length (at 5%: 0.5 s for 10 s) then costs more than
/// the chosen share.
pub const MAX_STRETCH: u32 = 10;

/// A gang or hybrid quantum: its set length and, if asked for, the share
/// of time switching may take before the quantum grows.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quantum {
    /// The length set; never shorter.
    pub length: Duration,
    /// The most of the time switching may take (0 < share < 1), or None
    /// for a fixed length.
    pub max_switch_share: Option<f64>,
}

impl From<Duration> for Quantum {
    fn from(length: Duration) -> Self {
        Quantum {
            length,
            max_switch_share: None,
        }
    }
}

impl Quantum {
    /// The quantum after a switch that took `took`.
    pub fn after(&self, took: Duration) -> Duration {
        match self.max_switch_share {
            Some(m) if m > 0.0 && m < 1.0 => {
                let grown = took.mul_f64((1.0 - m) / m);
                grown.clamp(self.length, self.length * MAX_STRETCH)
            }
            _ => self.length,
        }
    }

    /// `share` as an admin writes it: "5%" or 0.05; what is wrong, else.
    pub fn parse_share(share: &str) -> Result<f64, String> {
        let s = share.trim();
        let v = match s.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
            None => s.parse::<f64>(),
        }
        .map_err(|_| format!("switch share {share:?}: expected a percentage such as \"5%\" or a fraction such as 0.05"))?;
        if !(v > 0.0 && v < 1.0) {
            return Err(format!(
                "switch share {share:?}: must be above 0% and below 100%"
            ));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(f64) -> Duration = Duration::from_secs_f64;

    #[test]
    fn a_fixed_quantum_ignores_the_switch() {
        let q = Quantum::from(S(10.0));
        assert_eq!(q.after(S(3.0)), S(10.0));
    }

    #[test]
    fn a_growing_quantum_keeps_switching_to_its_share() {
        let q = Quantum {
            length: S(10.0),
            max_switch_share: Some(0.05),
        };
        // Cheap switch: the set length stands.
        assert_eq!(q.after(S(0.2)), S(10.0));
        // 0.8 s switch: 15.2 s of quantum, 0.8 / 16 = 5% switching.
        let after = q.after(S(0.8));
        assert!((after.as_secs_f64() - 15.2).abs() < 1e-9, "{after:?}");
        assert!((0.8 / (0.8 + after.as_secs_f64()) - 0.05).abs() < 1e-9);
        // A very dear switch: capped.
        assert_eq!(q.after(S(60.0)), S(10.0) * MAX_STRETCH);
    }

    #[test]
    fn shares_parse_as_admins_write_them_and_nonsense_is_refused() {
        assert_eq!(Quantum::parse_share("5%"), Ok(0.05));
        assert_eq!(Quantum::parse_share(" 0.1 "), Ok(0.1));
        for bad in ["0%", "100%", "1.5", "-1", "five", ""] {
            let e = Quantum::parse_share(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
