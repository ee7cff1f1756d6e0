//! Strings that users wrote (job names, commands, reasons quoting them),
//! made safe to print on someone else's terminal or in a log.

use std::borrow::Cow;

/// `s` with every control character escaped as Rust writes it (`\n`,
/// `\u{1b}`): an escape sequence or a newline in a job's name cannot
/// clear an admin's screen or forge a row of a table or a log line.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(
            printable("plain é 名"),
            Cow::Borrowed("plain é 名")
        ));
        assert_eq!(
            printable("a\u{1b}[2J\nFAKE | 999\r\u{7f}\u{9b}"),
            "a\\u{1b}[2J\\nFAKE | 999\\r\\u{7f}\\u{9b}"
        );
    }
}
