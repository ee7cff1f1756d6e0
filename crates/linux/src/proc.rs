//! Glue to the `procfs` crate, which parses the /proc files memgang reads
//! (`/proc/vmstat`, `/proc/meminfo`, PSI files, `/proc/<pid>/stat` and
//! `status`, `/proc/self/mountinfo`).
//!
//! We read a file's bytes ourselves and hand them to procfs's `FromRead`
//! parser, rather than calling its `from_file`/`current()`: that way an I/O
//! error keeps its errno and a parse error quotes the content, both naming
//! the file (procfs drops the path of open errors), and the very same code
//! parses cgroup v2 `memory.pressure` files and the texts of unit tests.

use crate::error::{Error, Result};
use crate::sysfs::truncate_for_error;
use procfs::{FromRead, ProcError};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

/// Read `path` and parse it with procfs.
pub(crate) fn read<T: FromRead>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("reading", path, e))?;
    parse_bytes(path, &bytes)
}

/// The text of `path`, for callers that quote it in their own errors.
pub(crate) fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io("reading", path, e))
}

/// Parse `text` as the content of `path` (which only names it in errors).
pub(crate) fn parse<T: FromRead>(path: &Path, text: &str) -> Result<T> {
    parse_bytes(path, text.as_bytes())
}

pub(crate) fn parse_bytes<T: FromRead>(path: &Path, bytes: &[u8]) -> Result<T> {
    T::from_read(bytes).map_err(|e| parse_error(path, &String::from_utf8_lossy(bytes), e))
}

/// A procfs error while parsing `content` of `path`. procfs reports a
/// malformed or incomplete file as an "internal error"; say where it
/// stopped instead of asking to report a procfs bug.
pub(crate) fn parse_error(path: &Path, content: &str, e: ProcError) -> Error {
    let reason = match e {
        ProcError::InternalError(ie) => {
            let file = ie.file.rsplit_once("/src/").map_or(ie.file, |(_, f)| f);
            let msg = ie.msg.trim_start_matches("Internal Unwrap Error: ");
            format!(
                "not in the format procfs expects (procfs {file}:{}: {msg})",
                ie.line
            )
        }
        e => e.to_string(),
    };
    Error::Parse {
        path: path.to_path_buf(),
        content: truncate_for_error(content),
        reason,
    }
}

/// Undo the kernel's `\ooo` escaping of space, tab, newline and backslash
/// in paths (`/proc/self/mountinfo`, `/proc/swaps`; the kernel's
/// `seq_escape`). procfs leaves these escapes in place.
pub(crate) fn unescape_octal(s: &str) -> OsString {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    OsString::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::process::Stat;

    #[test]
    fn unescape() {
        assert_eq!(unescape_octal("a\\040b\\134c"), "a b\\c");
        assert_eq!(unescape_octal("\\011tab\\012"), "\ttab\n");
        // Not an escape: too short, not octal, or above 255.
        assert_eq!(unescape_octal("trailing\\04"), "trailing\\04");
        assert_eq!(unescape_octal("x\\08y"), "x\\08y");
        assert_eq!(unescape_octal("\\777"), "\\777");
    }

    #[test]
    fn errors_name_the_file_and_quote_it() {
        let e = parse::<Stat>(Path::new("/proc/1/stat"), "garbage")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/proc/1/stat") && e.contains("garbage") && !e.contains("report"),
            "{e}"
        );
        let e = read::<Stat>(Path::new("/nonexistent/stat"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reading /nonexistent/stat") && e.contains("os error 2"),
            "{e}"
        );
    }
}
