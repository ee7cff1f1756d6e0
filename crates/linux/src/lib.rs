//! memgang-linux: the mechanisms memgang uses on a real Linux node, each
//! behind a small interface. The kernel does the work (cgroups limit and
//! account memory, the freezer stops jobs, swap holds what does not fit);
//! this crate only knows *how* to ask for it. What to do and when is decided
//! by `memgang-core`.

pub mod cgroup;
pub mod counters;
pub mod criu;
pub mod error;
pub mod faults;
pub mod files;
pub mod freeze;
pub mod limits;
pub mod paging;
pub mod perf;
pub mod pidfd;
mod proc;
pub mod process;
pub mod runs;
pub mod sockets;
pub mod swap;
pub mod sysfs;
pub mod taskstats;
#[cfg(feature = "testing")]
pub mod testing;
pub mod wss;

pub use error::{Error, Result};
