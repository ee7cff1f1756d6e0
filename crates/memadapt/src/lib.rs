//! memadapt: lets an application adapt its own in-memory cache of data
//! panels to memory pressure, instead of leaving the kernel to thrash it.
//!
//! The approach is paper 002's (§3, §4): the data set is cut into P panels,
//! kept in a file and memory-mapped on demand. At every panel access the
//! library compares the program's resident set size (RSS) with what it
//! expects it to be, unmaps panels when memory was taken away, and now and
//! then maps one panel more to find out whether memory has come back.
//! Only the program's own RSS is needed: no global memory figures, which
//! operating systems do not report reliably (§4).
//!
//! This crate currently holds the algorithm alone, as pure code: the
//! [`Adapter`] is a deterministic state machine fed with the time and the
//! RSS the caller measured, and it answers which panels to unmap and which
//! to map. It does no I/O, reads no clock and maps nothing, so it is tested
//! against scripted RSS sequences and will be driven unchanged by the panel
//! store. The panel store (files, `mmap`, write-back), the C ABI and the
//! Python package come next.

pub mod adapt;

pub use adapt::{
    probe_delay, Adapter, Config, Error, Policy, Residency, Stats, Step, Verdict,
    DEFAULT_TOLERANCE, MAX_DELAY_FACTOR, MIN_PANELS,
};
