//! Memory sizes as admins write them: `700M`, `1G`, `1.5GiB`, `4096`.
//! Suffixes are binary (K = 1024), as in Slurm, free(1) and cgroup files.

/// Parse a size in bytes. Accepts an optional K/M/G/T suffix, optionally
/// followed by `i`/`iB`/`B`, case-insensitive, and a decimal fraction.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let bad = || {
        format!("invalid size {text:?}: expected a number with an optional unit, like 700M, 1G or 1.5GiB")
    };
    let value: f64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        _ => return Err(bad()),
    };
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(format!("size {text:?} is too large"));
    }
    Ok(bytes.round() as u64)
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
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("700M"), Ok(700 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes(" 2 kb "), Ok(2048));
        assert!(parse_bytes("1X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("-1G").is_err());
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_bytes(700 << 20), "700M");
        assert_eq!(format_bytes(3 << 29), "1.5G");
        assert_eq!(parse_bytes(&format_bytes(1 << 30)), Ok(1 << 30));
    }
}
