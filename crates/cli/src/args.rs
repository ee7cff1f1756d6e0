//! Parsers of argument values that several verbs share (clap's
//! `value_parser`s), in one place so that no verb's module reaches back
//! into `main.rs` for them. Sizes are `memgang_core::units::parse_bytes`.

use std::time::Duration;

/// A duration as people write it (`10s`, `500ms`, `2m`), more than zero.
pub fn duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e}; write e.g. 10s or 500ms"))?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_a_length() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(duration("10").unwrap_err().contains("write e.g. 10s"));
        assert_eq!(duration("0s").unwrap_err(), "must be greater than zero");
    }
}
