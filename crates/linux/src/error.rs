use std::path::PathBuf;

/// Every error names the file or object it concerns and what we were doing,
/// so that an admin can act on it without reading our source.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot parse {content:?}: {reason}")]
    Parse {
        path: PathBuf,
        content: String,
        reason: String,
    },
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    Permission(String),
}

impl Error {
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
