//! Errors of the data file and the panel store.
//!
//! Every error names the file it concerns and, where there is one, the
//! panel, and says what to do: the users are application developers who
//! should be able to act on the message without reading this crate.

use crate::adapt;
use crate::element::ElementType;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "data file {path} does not exist: check the path, or create the file first \
         (memadapt::file::create or memadapt::file::from_slices)"
    )]
    NotFound { path: PathBuf },

    #[error("cannot {action} {path}: {source}")]
    Io {
        action: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// ENOSPC or EDQUOT: told apart from other I/O errors because the
    /// remedy is the user's, not a bug.
    #[error(
        "cannot {action} {path}: the disk is full ({source}); free space on its file \
         system (or raise the quota) and try again"
    )]
    DiskFull {
        action: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("{path} is not a memadapt data file: {reason}")]
    NotDataFile { path: PathBuf, reason: String },

    #[error(
        "{path} is a memadapt data file of format version {found}, but this library \
         reads version {supported}: recreate it with this version of memadapt"
    )]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    /// The header has the magic and version but values that cannot be
    /// right (P = 0, unknown flags, an element size that does not divide
    /// the panel, ...).
    #[error("data file {path} has a damaged header: {reason}; recreate it")]
    Corrupt { path: PathBuf, reason: String },

    #[error(
        "data file {path} is truncated: its header describes {expected} bytes but the \
         file has {actual}; it was cut short while being written or copied: recreate \
         it or copy it again"
    )]
    Truncated {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },

    #[error(
        "data file {path} was not completely written (its writer stopped before \
         `finish`, for example on a full disk or a crash): recreate it"
    )]
    Incomplete { path: PathBuf },

    #[error(
        "data file {path} holds {element} data in {file_order}-endian byte order but \
         this machine is {native}-endian: recreate the file on this machine"
    )]
    ByteOrder {
        path: PathBuf,
        element: ElementType,
        file_order: &'static str,
        native: &'static str,
    },

    #[error("cannot create data file {path}: a data set needs at least one panel, got 0")]
    NoPanels { path: PathBuf },

    #[error("cannot create data file {path}: the panel size is 0 bytes")]
    ZeroPanelSize { path: PathBuf },

    /// A layout the file cannot have: too large for 64-bit offsets, an
    /// alignment that is not a power of two, an element size that does not
    /// divide the panel.
    #[error("cannot create data file {path}: {reason}")]
    BadLayout { path: PathBuf, reason: String },

    #[error("panel {panel} of {path} must be {expected} bytes, got {actual}")]
    PanelLength {
        path: PathBuf,
        panel: usize,
        expected: u64,
        actual: u64,
    },

    #[error("panel {panel} does not exist: {path} has panels 0..{panels}")]
    PanelOutOfRange {
        path: PathBuf,
        panel: usize,
        panels: usize,
    },

    #[error(
        "{path} is open read-only: panel {panel} cannot be written; open the store \
         with Options::read_write() to change panels"
    )]
    ReadOnly { path: PathBuf, panel: usize },

    #[error(
        "panel {panel} of {path} is not pinned: unpin only a panel pinned before, \
         once per pin"
    )]
    NotPinned { path: PathBuf, panel: usize },

    #[error(
        "panels of {path} hold {stored}, not {requested}: access them as {stored} \
         (or as bytes)"
    )]
    ElementMismatch {
        path: PathBuf,
        stored: ElementType,
        requested: ElementType,
    },

    #[error(
        "panels of {path} are {panel_size} bytes, not a whole number of {requested} \
         ({size} bytes each)"
    )]
    ElementSize {
        path: PathBuf,
        panel_size: u64,
        requested: ElementType,
        size: usize,
    },

    #[error(
        "data file {path} aligns its panels to {align} bytes, not a multiple of this \
         machine's page size ({page_size} bytes), so they cannot be memory-mapped: \
         recreate the file on this machine (or with Header::with_align({page_size}))"
    )]
    Alignment {
        path: PathBuf,
        align: u64,
        page_size: u64,
    },

    #[error("{path}: a fixed number of panels in memory must be 1..={panels}, got {fixed}")]
    FixedPanels {
        path: PathBuf,
        fixed: usize,
        panels: usize,
    },

    #[error("cannot {op} panel {panel} of {path}: {source}")]
    Mmap {
        op: &'static str,
        panel: usize,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "writing back panel {panel} of {path} failed: {source}; its changes may not be on disk"
    )]
    WriteBack {
        panel: usize,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "cannot measure the program's resident set size (RSS), which memadapt adapts \
         to: {source}"
    )]
    Rss {
        #[source]
        source: io::Error,
    },

    /// The adaptation algorithm refused a setting or a call.
    #[error("{path}: {source}")]
    Adapter {
        path: PathBuf,
        #[source]
        source: adapt::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error of `action` (a verb phrase: "write panel 3 to") on
    /// `path`, with a full disk told apart.
    pub(crate) fn io(
        action: impl Into<String>,
        path: impl Into<PathBuf>,
        source: io::Error,
    ) -> Error {
        let (action, path) = (action.into(), path.into());
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Error::DiskFull {
                action,
                path,
                source,
            },
            _ => Error::Io {
                action,
                path,
                source,
            },
        }
    }

    /// True for [`Error::DiskFull`].
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::DiskFull { .. })
    }
}
