//! Memory sizes as admins write them: `700M`, `1G`, `1.5GiB`, `4096B`.
//! Suffixes are binary (K = 1024), as in Slurm, free(1) and cgroup files.
//! A number needs its unit: `700` could be bytes, KiB (ulimit) or MiB
//! (Slurm's `--mem`), so it is refused with the ways to write it, as
//! durations without a unit are. Zero needs none.

/// Parse a size in bytes: a number, a decimal fraction allowed, and a
/// unit, K/M/G/T optionally followed by `i`/`iB`/`B`, or `B` for bytes,
/// case-insensitive. Errors begin with the text quoted, so that a caller
/// can put what the size is of before it ([`parse_size`]).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let bad =
        || format!("{text:?} is not a size: write a number with a unit, like 700M, 1G or 1.5GiB");
    let value: f64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" if value == 0.0 => 0,
        "" => {
            return Err(format!(
                "{text:?} has no unit: write {num}M, {num}MiB or {num}G ({num}B if bytes are meant)"
            ))
        }
        "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        _ => return Err(bad()),
    };
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is too large for a size"));
    }
    Ok(bytes.round() as u64)
}

/// [`parse_bytes`] of the size of `what` (a setting, `job "a": memory`),
/// which its errors name first: `memory "700" has no unit: write 700M,
/// 700MiB or 700G (700B if bytes are meant)`.
pub fn parse_size(what: &str, text: &str) -> Result<u64, String> {
    parse_bytes(text).map_err(|e| format!("{what} {e}"))
}

/// Format bytes for people: `700M`, `1.5G`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("T", 40), ("G", 30), ("M", 20), ("K", 10)];
    for (name, shift) in UNITS {
        let unit = 1u64 << shift;
        if bytes >= unit {
            let v = bytes as f64 / unit as f64;
            return if v.fract() == 0.0 || v >= 100.0 {
                format!("{v:.0}{name}")
            } else {
                format!("{v:.1}{name}")
            };
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_units() {
        assert_eq!(parse_bytes("4096B"), Ok(4096));
        assert_eq!(parse_bytes("4096b"), Ok(4096));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("700M"), Ok(700 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes(" 2 kb "), Ok(2048));
        assert!(parse_bytes("1X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("-1G").is_err());
    }

    #[test]
    fn a_number_without_a_unit_is_refused_with_the_ways_to_write_it() {
        assert_eq!(
            parse_size("memory", "700"),
            Err(
                "memory \"700\" has no unit: write 700M, 700MiB or 700G (700B if bytes are meant)"
                    .into()
            )
        );
        assert!(parse_bytes(" 1.5 ")
            .unwrap_err()
            .contains("write 1.5M, 1.5MiB or 1.5G"));
        assert_eq!(
            parse_size("pool_memory", "lots"),
            Err("pool_memory \"lots\" is not a size: write a number with a unit, like 700M, 1G or 1.5GiB".into())
        );
        assert!(parse_bytes("1e30T").is_err());
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_bytes(700 << 20), "700M");
        assert_eq!(format_bytes(3 << 29), "1.5G");
        assert_eq!(parse_bytes(&format_bytes(1 << 30)), Ok(1 << 30));
    }
}
