//! memadapt: lets an application adapt its own in-memory cache of data
//! panels to memory pressure, instead of leaving the kernel to thrash it.
//!
//! The approach is paper 002's (§3, §4): the data set is cut into P panels,
//! kept in a file and memory-mapped on demand. At every panel access the
//! library compares the program's resident set size (RSS) with what it
//! expects it to be, unmaps panels when memory was taken away, and now and
//! then maps one panel more to find out whether memory has come back.
//! Only the program's own RSS is needed: no global memory figures, which
//! operating systems do not report reliably (§4). Beyond the paper, the
//! store asks `mincore(2)` whether its mapped panels are resident when
//! RSS stays off its expected value, to tell its own memory paged out
//! for good from panels still paged out ([`Verdict::Rebase`];
//! [`Options::rss_only`] turns that off).
//!
//! Three layers, each usable alone:
//!
//! - [`file`](mod@file): the data-set file (a 64-byte header, then the panels at
//!   page-aligned offsets), created from the application's arrays
//!   ([`file::create`], [`file::from_slices`]) and opened with checks
//!   ([`DataFile`]).
//! - [`store`]: the [`PanelStore`] applications use: it maps panels on
//!   demand, hands them out as slices (`&[f64]`, ...), unmaps the victims,
//!   writes changed panels back, and records a [`Timeline`] to plot.
//! - [`adapt`]: the algorithm as pure code. The [`Adapter`] is a
//!   deterministic state machine fed with the time and the RSS its caller
//!   measured; it answers which panels to unmap and which to map, does no
//!   I/O and reads no clock, so it is tested against scripted RSS
//!   sequences, and the store drives it unchanged.
//!
//! ```no_run
//! # fn main() -> memadapt::Result<()> {
//! let panels: Vec<Vec<f64>> = vec![vec![1.0; 1 << 16]; 10];
//! let slices: Vec<&[f64]> = panels.iter().map(Vec::as_slice).collect();
//! memadapt::file::from_slices("matrix.panels", &slices)?;
//!
//! let mut store = memadapt::PanelStore::open("matrix.panels")?;
//! let mut sum = 0.0;
//! for _ in 0..store.panels() {
//!     let i = store.next_index();
//!     sum += store.panel_as::<f64>(i)?.iter().sum::<f64>();
//! }
//! store.timeline().write_csv(std::fs::File::create("timeline.csv").unwrap()).unwrap();
//! # let _ = sum; Ok(()) }
//! ```
//!
//! [`capi`] is the C ABI over the store (`include/memadapt.h`, built as
//! `libmemadapt.so` and `libmemadapt.a`); the Python package comes next.

pub mod adapt;
pub mod capi;
mod element;
pub mod error;
pub mod file;
pub mod store;

/// The algorithm's error ([`adapt::Error`]); [`Error`] is the store's and
/// the file's, which wraps it.
pub use adapt::Error as AdaptError;
pub use adapt::{
    probe_delay, Adapter, Config, Policy, Residency, Stats, Step, Verdict, DEFAULT_TOLERANCE,
    MAX_DELAY_FACTOR, MIN_PANELS,
};
pub use error::{Error, Result};
pub use file::{DataFile, Element, ElementType, Header, Writer};
pub use store::{
    Adaptation, Clock, Mode, Options, PanelStore, RssSource, Sample, Statm, StoreStats, Timeline,
};
