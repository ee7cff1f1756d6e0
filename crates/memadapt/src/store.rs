//! The panel store: what applications use. It opens a data file, maps the
//! panels the program asks for with `mmap(2)`, and follows the
//! [`Adapter`]'s protocol at every access (measure RSS, decide, unmap,
//! measure again, settle, map), so the number of panels kept mapped
//! follows memory pressure (paper 002 §3, §4).
//!
//! Panels are mapped `MAP_SHARED` straight from the file: read-only
//! stores map them `PROT_READ`; read-write stores write a changed ("dirty")
//! panel back with `msync(MS_SYNC)` before unmapping it, and all of them
//! at [`PanelStore::flush`], [`PanelStore::close`] and drop, so a panel
//! written and then evicted is on disk, never lost.
//!
//! An access borrows the store mutably and the panel it returns borrows
//! the store: any access may unmap any other panel, so the borrow checker
//! is what stops a program from holding a slice of a panel that is gone.
//!
//! The RSS and the clock are injectable ([`RssSource`], [`Clock`]), so
//! tests and simulations can script memory pressure deterministically; by
//! default they are `/proc/self/statm` ([`Statm`]) and a monotonic clock.
//!
//! As with any memory-mapped file, the data file must not be truncated or
//! changed by another program while the store is open: a mapped page past
//! the end of the file faults with SIGBUS.

use crate::adapt::{Adapter, Config, Policy, Residency, Verdict};
use crate::error::{Error, Result};
use crate::file::{page_size, reserve_panels, DataFile, Element, ElementType, Header};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

/// The default RSS tolerance: RSS differences up to this many bytes are
/// noise, not pressure (see [`Config::tolerance`]). 256 KiB is twice
/// glibc's default trim and mmap thresholds (128 KiB): a program's heap
/// hands blocks of that size back to the system and takes them again
/// without meaning anything about memory pressure. A program whose own
/// RSS moves more between panel accesses sets a larger tolerance. Never
/// more than half a panel ([`default_tolerance`]), so that losing half a
/// panel or more is always answered.
pub const DEFAULT_STORE_TOLERANCE: u64 = 256 << 10;

/// Samples the timeline holds by default before it thins itself out.
/// 8192 is enough for any plot (a few thousand points) and at 80 bytes a
/// sample takes 640 KiB, which the store allocates and touches at open so
/// that it is part of the "other memory" measured then, not growth that
/// would read as RSS above dRSS later.
pub const DEFAULT_TIMELINE_CAPACITY: usize = 8192;

/// The tolerance used unless one is set: [`DEFAULT_STORE_TOLERANCE`],
/// capped at half of what a mapped panel adds to RSS.
pub fn default_tolerance(resident_panel: u64) -> u64 {
    DEFAULT_STORE_TOLERANCE.min(resident_panel / 2)
}

/// Where the store gets the program's RSS from, in bytes.
///
/// `mapped_bytes` is what the store's mapped panels take in memory right
/// now, if all their pages are in: a real source ignores it, a simulated
/// one (tests, what-if studies) models the RSS from it.
pub trait RssSource: Send {
    fn rss(&mut self, mapped_bytes: u64) -> io::Result<u64>;
}

impl<F: FnMut(u64) -> io::Result<u64> + Send> RssSource for F {
    fn rss(&mut self, mapped_bytes: u64) -> io::Result<u64> {
        self(mapped_bytes)
    }
}

/// The program's RSS from `/proc/self/statm`: resident pages (the second
/// field) × the page size. The file stays open and is re-read with
/// `pread`, a few microseconds: an RSS reading per panel access costs
/// nothing next to the work on a panel.
#[derive(Debug)]
pub struct Statm {
    file: File,
    /// The process that opened `file`: `/proc/self` was resolved then, so
    /// a forked child must reopen it or it would read its parent's RSS.
    pid: u32,
    page_size: u64,
}

impl Statm {
    const PATH: &'static str = "/proc/self/statm";

    pub fn open() -> io::Result<Statm> {
        Ok(Statm {
            file: File::open(Statm::PATH).map_err(|e| context(Statm::PATH, e))?,
            pid: std::process::id(),
            page_size: page_size(),
        })
    }

    /// The RSS in bytes.
    pub fn read(&mut self) -> io::Result<u64> {
        if self.pid != std::process::id() {
            *self = Statm::open()?;
        }
        // Seven decimal numbers of at most 20 digits each, with spaces.
        let mut buf = [0u8; 160];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| context(Statm::PATH, e))?;
        parse_statm(&buf[..n])
            .map(|pages| pages * self.page_size)
            .ok_or_else(|| {
                let text = String::from_utf8_lossy(&buf[..n]);
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: no resident page count in {text:?}", Statm::PATH),
                )
            })
    }
}

impl RssSource for Statm {
    fn rss(&mut self, _mapped_bytes: u64) -> io::Result<u64> {
        self.read()
    }
}

/// The second field of statm: resident pages.
fn parse_statm(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

fn context(path: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{path}: {e}"))
}

/// Time since the store opened, for the probe delay (§4.2) and the
/// timeline. Must not go backwards.
pub trait Clock: Send {
    fn now(&mut self) -> Duration;
}

impl<F: FnMut() -> Duration + Send> Clock for F {
    fn now(&mut self) -> Duration {
        self()
    }
}

/// The default clock: monotonic, from when the store opened.
struct Monotonic(Instant);

impl Clock for Monotonic {
    fn now(&mut self) -> Duration {
        self.0.elapsed()
    }
}

/// How the store may use the data file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// `PROT_READ`: panels cannot be changed, the file is opened read-only
    /// (so it may be on a read-only file system or shared).
    #[default]
    ReadOnly,
    /// Panels may be changed through [`PanelStore::panel_mut`]; changes go
    /// to the file.
    ReadWrite,
}

/// How many panels the store keeps mapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Adaptation {
    /// As many as memory allows, from the RSS (Figure 2).
    #[default]
    Adaptive,
    /// Always this many (at most; fewer until that many were accessed):
    /// the static scheme of §4.3 (Figure 3, left) and a budget for tests.
    /// RSS is still measured, for the timeline.
    Fixed(usize),
}

/// How to open a [`PanelStore`]: `PanelStore::options().read_write().open(path)`.
pub struct Options {
    mode: Mode,
    policy: Policy,
    adaptation: Adaptation,
    initial_panels: Option<usize>,
    tolerance: Option<u64>,
    other_memory: Option<u64>,
    timeline_capacity: usize,
    rss_only: bool,
    rss: Option<Box<dyn RssSource>>,
    clock: Option<Box<dyn Clock>>,
    allowance_file: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            mode: Mode::default(),
            policy: Policy::default(),
            adaptation: Adaptation::default(),
            initial_panels: None,
            tolerance: None,
            other_memory: None,
            timeline_capacity: DEFAULT_TIMELINE_CAPACITY,
            allowance_file: None,
            rss_only: false,
            rss: None,
            clock: None,
        }
    }
}

impl Options {
    pub fn new() -> Options {
        Options::default()
    }

    pub fn mode(mut self, mode: Mode) -> Options {
        self.mode = mode;
        self
    }

    pub fn read_write(self) -> Options {
        self.mode(Mode::ReadWrite)
    }

    pub fn read_only(self) -> Options {
        self.mode(Mode::ReadOnly)
    }

    /// Which panel to unmap first (MRU by default, optimal for sweeps).
    pub fn policy(mut self, policy: Policy) -> Options {
        self.policy = policy;
        self
    }

    pub fn adaptation(mut self, adaptation: Adaptation) -> Options {
        self.adaptation = adaptation;
        self
    }

    /// Keep `panels` panels mapped, whatever the memory pressure.
    pub fn fixed(self, panels: usize) -> Options {
        self.adaptation(Adaptation::Fixed(panels))
    }

    /// The paper's Figure 2 on RSS alone: never ask `mincore` whether the
    /// mapped panels are resident, so never re-measure the other memory
    /// ([`Verdict::Rebase`]). For comparison; not what a program wants.
    pub fn rss_only(mut self) -> Options {
        self.rss_only = true;
        self
    }

    /// `Panels_in` at the start ([`Config::initial_panels`], 1 by default).
    pub fn initial_panels(mut self, panels: usize) -> Options {
        self.initial_panels = Some(panels);
        self
    }

    /// RSS noise to ignore, in bytes (default [`default_tolerance`]).
    pub fn tolerance(mut self, bytes: u64) -> Options {
        self.tolerance = Some(bytes);
        self
    }

    /// The program's memory besides the panels. By default the RSS
    /// measured when the store opens: open the store after allocating the
    /// program's other large arrays, or tell it with
    /// [`PanelStore::set_other_memory`].
    pub fn other_memory(mut self, bytes: u64) -> Options {
        self.other_memory = Some(bytes);
        self
    }

    /// Samples the timeline holds (default [`DEFAULT_TIMELINE_CAPACITY`]);
    /// 0 records none.
    pub fn timeline_capacity(mut self, samples: usize) -> Options {
        self.timeline_capacity = samples;
        self
    }

    pub fn rss_source(mut self, source: impl RssSource + 'static) -> Options {
        self.rss = Some(Box::new(source));
        self
    }

    pub fn clock(mut self, clock: impl Clock + 'static) -> Options {
        self.clock = Some(Box::new(clock));
        self
    }

    /// A file holding the bytes a scheduler allows the program (default:
    /// the one memgang names in `$MEMGANG_ALLOWANCE_FILE`). The adaptive
    /// store never keeps more panels than fit in it.
    pub fn allowance_file(mut self, path: impl Into<PathBuf>) -> Options {
        self.allowance_file = Some(path.into());
        self
    }

    pub fn open(self, path: impl AsRef<Path>) -> Result<PanelStore> {
        PanelStore::open_with(path.as_ref(), self)
    }
}

/// One panel access, for plots: what the store saw and decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Time since the store opened.
    pub t: Duration,
    /// The panel accessed.
    pub panel: usize,
    /// RSS before the access, in bytes: what the algorithm judged.
    pub rss: u64,
    /// dRSS after the decision: other memory + `Panels_in` × panel size.
    pub drss: u64,
    pub panels_in: usize,
    /// Panels mapped after the access.
    pub mapped: usize,
    /// Shortage, probe or neither ([`Verdict::Keep`]; always so when the
    /// number of panels is fixed).
    pub verdict: Verdict,
}

impl Sample {
    /// A filler whose bytes are not all zero, so that filling the buffer
    /// with it cannot be turned into a lazily zeroed allocation (and the
    /// pages really are touched at open).
    const FILLER: Sample = Sample {
        t: Duration::ZERO,
        panel: usize::MAX,
        rss: u64::MAX,
        drss: u64::MAX,
        panels_in: 0,
        mapped: 0,
        verdict: Verdict::Keep,
    };

    /// "none", "probe", "shortage" or "rebase".
    pub fn event(&self) -> &'static str {
        match self.verdict {
            Verdict::Keep => "none",
            Verdict::Probe => "probe",
            Verdict::Rebase { .. } => "rebase",
            Verdict::Shortage { .. } => "shortage",
        }
    }
}

/// The store's timeline: a [`Sample`] per panel access, in bounded memory.
/// When full it thins itself out: it keeps one sample of each pair
/// (the one with an event if either has one) and from then on records
/// every second access (every fourth after the next thinning, ...), plus
/// every access with an event. So a long run is covered end to end with
/// at most `capacity` samples; [`StoreStats`] keeps exact counts.
#[derive(Clone, Debug)]
pub struct Timeline {
    samples: Vec<Sample>,
    capacity: usize,
    /// Record every `stride`-th access (and every event).
    stride: u64,
    accesses: u64,
}

impl Timeline {
    fn new(capacity: usize) -> Timeline {
        // Thinning halves pairs, so one sample would never make room.
        let capacity = if capacity == 0 { 0 } else { capacity.max(2) };
        let mut samples = Vec::with_capacity(capacity);
        // Touch the pages now (see DEFAULT_TIMELINE_CAPACITY).
        samples.resize(capacity, Sample::FILLER);
        std::hint::black_box(samples.as_mut_ptr());
        samples.clear();
        Timeline {
            samples,
            capacity,
            stride: 1,
            accesses: 0,
        }
    }

    fn record(&mut self, sample: Sample) {
        let k = self.accesses;
        self.accesses += 1;
        if self.capacity == 0 || (k % self.stride != 0 && sample.verdict == Verdict::Keep) {
            return;
        }
        if self.samples.len() == self.capacity {
            let mut kept = 0;
            for i in (0..self.samples.len()).step_by(2) {
                let first = self.samples[i];
                let pick = match self.samples.get(i + 1) {
                    Some(&second)
                        if first.verdict == Verdict::Keep && second.verdict != Verdict::Keep =>
                    {
                        second
                    }
                    _ => first,
                };
                self.samples[kept] = pick;
                kept += 1;
            }
            self.samples.truncate(kept);
            self.stride *= 2;
        }
        self.samples.push(sample);
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// Every how many accesses a sample is kept (1 until the first
    /// thinning); accesses with events are always kept.
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// Writes the samples as CSV with a header line:
    /// `t_s,panel,rss_bytes,drss_bytes,panels_in,mapped,event,drop_bytes,shed_panels`.
    pub fn write_csv(&self, mut out: impl Write) -> io::Result<()> {
        writeln!(
            out,
            "t_s,panel,rss_bytes,drss_bytes,panels_in,mapped,event,drop_bytes,shed_panels"
        )?;
        for s in &self.samples {
            let (drop, shed) = match s.verdict {
                Verdict::Shortage { drop, panels } => (drop, panels),
                _ => (0, 0),
            };
            writeln!(
                out,
                "{:.6},{},{},{},{},{},{},{},{}",
                s.t.as_secs_f64(),
                s.panel,
                s.rss,
                s.drss,
                s.panels_in,
                s.mapped,
                s.event(),
                drop,
                shed
            )?;
        }
        Ok(())
    }

    pub fn to_csv(&self) -> String {
        let mut out = Vec::new();
        self.write_csv(&mut out).expect("writing to a Vec");
        String::from_utf8(out).expect("CSV is ASCII")
    }
}

/// Counts over the store's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub accesses: u64,
    pub maps: u64,
    pub unmaps: u64,
    /// Dirty panels written back (`msync`), at eviction or flush.
    pub write_backs: u64,
    pub shortages: u64,
    pub panels_shed: u64,
    pub probes: u64,
    /// Re-measurements of the other memory ([`Verdict::Rebase`]).
    pub rebases: u64,
}

/// One mapped panel.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// Handed out mutably since the last write-back.
    dirty: bool,
}

// SAFETY: a Mapping owns its range of the address space exclusively (the
// store never hands out a pointer that outlives a borrow of the store);
// mappings have no thread affinity.
unsafe impl Send for Mapping {}

enum Control {
    Adaptive(Box<Adapter>),
    /// [`Adaptation::Fixed`]: replacement alone, with the same victim
    /// choice as the adapter's.
    Fixed {
        residency: Residency,
        panels: usize,
        other_memory: u64,
    },
}

/// A data set of P panels, mapped on demand, as many as memory allows.
///
/// ```no_run
/// # fn main() -> memadapt::Result<()> {
/// let mut store = memadapt::PanelStore::open("matrix.panels")?;
/// for _sweep in 0..100 {
///     for _ in 0..store.panels() {
///         let i = store.next_index();
///         let panel: &[f64] = store.panel_as(i)?;
///         // work on panel i
/// #       let _ = panel;
///     }
/// }
/// # Ok(()) }
/// ```
pub struct PanelStore {
    data: DataFile,
    mode: Mode,
    control: Control,
    maps: Vec<Option<Mapping>>,
    mapped: usize,
    /// Bytes a mapped panel adds to RSS: the panel size rounded up to
    /// whole pages, since the last, partial page is resident whole.
    resident_panel: u64,
    rss: Box<dyn RssSource>,
    clock: Box<dyn Clock>,
    timeline: Timeline,
    /// mincore's answer for one panel, allocated at open with the other
    /// memory (see `panels_resident`).
    residency_scratch: Vec<u8>,
    rss_only: bool,
    cursor: usize,
    /// memgang's allowance file, if the program runs as a memgang job.
    allowance: Option<Allowance>,
    stats: StoreStats,
}

/// The environment variable memgang sets for its jobs: a file holding the
/// bytes the job may keep in memory, rewritten at switches and as the
/// other jobs' memory changes.
pub const ALLOWANCE_ENV: &str = "MEMGANG_ALLOWANCE_FILE";
/// How often the allowance file is read again: memgang rewrites it at its
/// samples (every 100 ms under `memgang run`, every second under
/// memgangd), so reading it more often finds nothing new; an access costs
/// microseconds, a read of a small file a few.
const ALLOWANCE_CHECK: Duration = Duration::from_millis(100);

struct Allowance {
    path: PathBuf,
    next_check: Duration,
}

impl Allowance {
    /// The allowance now, if due to be read; `Some(None)`: no allowance
    /// (the file is gone or unreadable: no limit rather than a wrong one).
    fn check(&mut self, now: Duration) -> Option<Option<u64>> {
        if now < self.next_check {
            return None;
        }
        self.next_check = now + ALLOWANCE_CHECK;
        Some(
            std::fs::read_to_string(&self.path)
                .ok()
                .and_then(|t| t.trim().parse().ok()),
        )
    }
}

impl PanelStore {
    /// Opens the data file at `path` read-only, adaptive, with the default
    /// options.
    pub fn open(path: impl AsRef<Path>) -> Result<PanelStore> {
        Options::new().open(path)
    }

    pub fn options() -> Options {
        Options::new()
    }

    fn open_with(path: &Path, options: Options) -> Result<PanelStore> {
        let data = DataFile::open(path, options.mode == Mode::ReadWrite)?;
        let header = *data.header();
        let page = page_size();
        if header.align % page != 0 {
            return Err(Error::Alignment {
                path: path.to_owned(),
                align: header.align,
                page_size: page,
            });
        }
        if usize::try_from(header.panel_size).is_err() {
            return Err(Error::Corrupt {
                path: path.to_owned(),
                reason: format!(
                    "panels of {} bytes do not fit this machine's address space",
                    header.panel_size
                ),
            });
        }
        if options.mode == Mode::ReadWrite {
            // Files made by other tools may be sparse: see reserve_panels.
            reserve_panels(data.file(), &header, path)?;
        }
        let resident_panel = header.panel_size.div_ceil(page) * page;
        // Before measuring the other memory: the timeline is part of it,
        // and so is mincore's buffer.
        let timeline = Timeline::new(options.timeline_capacity);
        let residency_scratch = vec![1u8; (resident_panel / page) as usize];
        let mut rss = match options.rss {
            Some(source) => source,
            None => Box::new(Statm::open().map_err(|source| Error::Rss { source })?),
        };
        let other_memory = match options.other_memory {
            Some(bytes) => bytes,
            None => rss.rss(0).map_err(|source| Error::Rss { source })?,
        };
        let control = match options.adaptation {
            Adaptation::Adaptive => {
                let defaults = Config::new(header.panels, resident_panel);
                let adapter = Adapter::new(Config {
                    other_memory,
                    initial_panels: options.initial_panels.unwrap_or(defaults.initial_panels),
                    tolerance: options
                        .tolerance
                        .unwrap_or_else(|| default_tolerance(resident_panel)),
                    policy: options.policy,
                    ..defaults
                })
                .map_err(|source| Error::Adapter {
                    path: path.to_owned(),
                    source,
                })?;
                Control::Adaptive(Box::new(adapter))
            }
            Adaptation::Fixed(panels) => {
                if !(1..=header.panels).contains(&panels) {
                    return Err(Error::FixedPanels {
                        path: path.to_owned(),
                        fixed: panels,
                        panels: header.panels,
                    });
                }
                Control::Fixed {
                    residency: Residency::new(header.panels, options.policy),
                    panels,
                    other_memory,
                }
            }
        };
        Ok(PanelStore {
            mode: options.mode,
            control,
            maps: (0..header.panels).map(|_| None).collect(),
            mapped: 0,
            resident_panel,
            rss,
            clock: options
                .clock
                .unwrap_or_else(|| Box::new(Monotonic(Instant::now()))),
            timeline,
            residency_scratch,
            rss_only: options.rss_only,
            cursor: 0,
            allowance: options
                .allowance_file
                .or_else(|| std::env::var_os(ALLOWANCE_ENV).map(PathBuf::from))
                .map(|path| Allowance {
                    path,
                    next_check: Duration::ZERO,
                }),
            stats: StoreStats::default(),
            data,
        })
    }

    /// Panel `panel`'s bytes, mapped if need be (unmapping others if
    /// memory is short).
    pub fn panel(&mut self, panel: usize) -> Result<&[u8]> {
        self.panel_as(panel)
    }

    /// Panel `panel`'s bytes for writing; the panel is written back to the
    /// file before it is unmapped. Read-write stores only.
    pub fn panel_mut(&mut self, panel: usize) -> Result<&mut [u8]> {
        self.panel_as_mut(panel)
    }

    /// Panel `panel` as elements of `T`: the file's element type, or any
    /// if the file is untyped, and the panel a whole number of them.
    /// Mapped panels start on a page boundary, aligned for any `T`.
    pub fn panel_as<T: Element>(&mut self, panel: usize) -> Result<&[T]> {
        self.check_element::<T>()?;
        let m = self.access(panel, false)?;
        // SAFETY: the mapping is `len` readable bytes, page-aligned (so
        // aligned for T), every bit pattern is a T (`Element`), and the
        // slice borrows the store, which alone can unmap it.
        Ok(unsafe {
            std::slice::from_raw_parts(m.ptr.as_ptr().cast::<T>(), m.len / size_of::<T>())
        })
    }

    /// [`panel_as`](PanelStore::panel_as) for writing.
    pub fn panel_as_mut<T: Element>(&mut self, panel: usize) -> Result<&mut [T]> {
        self.check_element::<T>()?;
        let m = self.access(panel, true)?;
        // SAFETY: as in `panel_as`, and the mapping is writable (read-write
        // stores only reach here) and borrowed mutably with the store.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(m.ptr.as_ptr().cast::<T>(), m.len / size_of::<T>())
        })
    }

    /// The panel a cyclic sweep accesses next: 0, 1, …, P−1, 0, … (the
    /// paper's `get_next_panel`), advancing the cursor.
    pub fn next_index(&mut self) -> usize {
        let i = self.cursor;
        self.cursor = (i + 1) % self.panels();
        i
    }

    /// The next panel of a cyclic sweep and its number.
    pub fn next_panel(&mut self) -> Result<(usize, &[u8])> {
        let i = self.next_index();
        self.panel(i).map(|p| (i, p))
    }

    /// The next panel of a cyclic sweep for writing, and its number.
    pub fn next_panel_mut(&mut self) -> Result<(usize, &mut [u8])> {
        let i = self.next_index();
        self.panel_mut(i).map(|p| (i, p))
    }

    fn check_element<T: Element>(&self) -> Result<()> {
        let header = self.data.header();
        if !header.element.admits(T::TYPE) {
            return Err(Error::ElementMismatch {
                path: self.data.path().to_owned(),
                stored: header.element,
                requested: T::TYPE,
            });
        }
        let size = size_of::<T>();
        if header.panel_size % size as u64 != 0 {
            return Err(Error::ElementSize {
                path: self.data.path().to_owned(),
                panel_size: header.panel_size,
                requested: T::TYPE,
                size,
            });
        }
        Ok(())
    }

    fn check_panel(&self, panel: usize) -> Result<()> {
        let panels = self.panels();
        if panel >= panels {
            return Err(Error::PanelOutOfRange {
                path: self.data.path().to_owned(),
                panel,
                panels,
            });
        }
        Ok(())
    }

    /// One panel access: Figure 2's protocol around the mapping.
    fn access(&mut self, panel: usize, write: bool) -> Result<&mut Mapping> {
        self.check_panel(panel)?;
        if write && self.mode == Mode::ReadOnly {
            return Err(Error::ReadOnly {
                path: self.data.path().to_owned(),
                panel,
            });
        }
        let now = self.clock.now();
        if let (Some(a), Control::Adaptive(adapter)) = (&mut self.allowance, &mut self.control) {
            if let Some(limit) = a.check(now) {
                adapter.set_limit(limit);
            }
        }
        let rss = self.measure()?;
        let off_drss = match &self.control {
            Control::Adaptive(a) => rss.abs_diff(a.desired_rss()) > a.tolerance(),
            Control::Fixed { .. } => false,
        };
        // Only then does the adapter need to know (and mincore cost time).
        let resident = off_drss && !self.rss_only && self.panels_resident();
        let (verdict, victims) = match &mut self.control {
            Control::Adaptive(adapter) => {
                if resident {
                    adapter.panels_resident();
                }
                let step = adapter
                    .access(now, panel, rss)
                    .map_err(|source| Error::Adapter {
                        path: self.data.path().to_owned(),
                        source,
                    })?;
                (step.verdict, step.unmap)
            }
            Control::Fixed {
                residency, panels, ..
            } => (Verdict::Keep, replace(residency, *panels, panel)),
        };

        // From here on the adapter waits for `settle`: every error is
        // kept until the access is complete, so the store stays usable.
        let mut first_error = None;
        let mut unmapped = 0u64;
        for victim in victims {
            if let Some(mapping) = self.maps[victim].take() {
                self.mapped -= 1;
                unmapped += 1;
                if let Err(e) = self.release(victim, mapping) {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Control::Adaptive(_) = self.control {
            let settled = if unmapped == 0 {
                rss
            } else {
                self.measure().unwrap_or_else(|e| {
                    first_error.get_or_insert(e);
                    // What the unmappings should have left.
                    rss.saturating_sub(unmapped * self.resident_panel)
                })
            };
            if let Control::Adaptive(adapter) = &mut self.control {
                adapter
                    .settle(settled)
                    .expect("settle follows a successful access");
            }
        }
        // Map the panel if the store does not have it, whatever the
        // adapter thinks: after a failed mapping it counts the panel as
        // mapped, and this is where the store catches up.
        let mapped = match self.maps[panel] {
            Some(_) => Ok(()),
            None => self.map(panel).map(|m| {
                self.maps[panel] = Some(m);
                self.mapped += 1;
            }),
        };

        self.stats.accesses += 1;
        self.stats.unmaps += unmapped;
        match verdict {
            Verdict::Keep => {}
            Verdict::Probe => self.stats.probes += 1,
            Verdict::Rebase { .. } => self.stats.rebases += 1,
            Verdict::Shortage { panels, .. } => {
                self.stats.shortages += 1;
                self.stats.panels_shed += panels as u64;
            }
        }
        self.timeline.record(Sample {
            t: now,
            panel,
            rss,
            drss: self.desired_rss(),
            panels_in: self.panels_in(),
            mapped: self.mapped,
            verdict,
        });

        mapped?;
        if let Some(e) = first_error {
            return Err(e);
        }
        let m = self.maps[panel]
            .as_mut()
            .expect("mapped just above, or the error returned");
        m.dirty |= write;
        Ok(m)
    }

    /// Whether every page of every mapped panel is in memory (`mincore`:
    /// in the page cache, which for a shared file mapping the program
    /// touches is what its RSS counts). An error answers no: the adapter
    /// then just keeps Figure 2's behaviour.
    fn panels_resident(&mut self) -> bool {
        let page = page_size() as usize;
        for m in self.maps.iter().flatten() {
            let pages = m.len.div_ceil(page);
            self.residency_scratch.resize(pages, 0);
            // SAFETY: a live mapping of `len` bytes; the vector has one
            // byte per page of it.
            let rc = unsafe {
                libc::mincore(
                    m.ptr.as_ptr().cast(),
                    m.len,
                    self.residency_scratch.as_mut_ptr(),
                )
            };
            if rc != 0 || self.residency_scratch.iter().any(|&b| b & 1 == 0) {
                return false;
            }
        }
        true
    }

    fn measure(&mut self) -> Result<u64> {
        self.rss
            .rss(self.mapped as u64 * self.resident_panel)
            .map_err(|source| Error::Rss { source })
    }

    fn map(&mut self, panel: usize) -> Result<Mapping> {
        let header = self.data.header();
        let len = header.panel_size as usize;
        let prot = match self.mode {
            Mode::ReadOnly => libc::PROT_READ,
            Mode::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        };
        // SAFETY: a fresh mapping chosen by the kernel (no address given),
        // of a file range checked against the file size at open; the
        // offset is a multiple of the alignment, itself of the page size.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                self.data.file().as_raw_fd(),
                header.panel_offset(panel) as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::Mmap {
                op: "map",
                panel,
                path: self.data.path().to_owned(),
                source: io::Error::last_os_error(),
            });
        }
        // Start reading the whole panel now, in large requests, rather
        // than page by page as the program faults (§3: panel-granularity
        // I/O is the point of mapping panels). Advice only: a failure
        // costs speed, not data, so it is not reported.
        // SAFETY: the range was just mapped.
        unsafe { libc::madvise(ptr, len, libc::MADV_WILLNEED) };
        // Then fault the whole panel in (Linux 5.14+). dRSS counts every
        // mapped panel as wholly resident, but only the pages a program
        // touches enter its RSS: a panel with an untouched tail (padding,
        // a last block shorter than the others) would leave RSS below
        // dRSS for good, beyond the tolerance, and no probe would ever
        // come. Advice again: an older kernel (EINVAL) keeps the old
        // behaviour, and a read error shows when the program reads.
        // SAFETY: as above.
        unsafe { libc::madvise(ptr, len, libc::MADV_POPULATE_READ) };
        self.stats.maps += 1;
        Ok(Mapping {
            ptr: NonNull::new(ptr.cast()).expect("mmap does not return null for a hint-less map"),
            len,
            dirty: false,
        })
    }

    /// Writes a dirty panel back, then unmaps it. Unmaps it even if the
    /// write-back failed: MAP_SHARED changes stay in the page cache for
    /// the kernel to write, and keeping the panel mapped would only make
    /// the store's mapped set differ from the adapter's; the error says
    /// the changes may not be on disk.
    fn release(&mut self, panel: usize, mapping: Mapping) -> Result<()> {
        let written = self.write_back(panel, &mapping);
        // SAFETY: `mapping` was mapped by `map` with this length and is
        // unmapped once: it was taken out of `maps`, and no slice of it
        // outlives the `&mut self` borrow this runs under.
        let rc = unsafe { libc::munmap(mapping.ptr.as_ptr().cast(), mapping.len) };
        written?;
        if rc != 0 {
            return Err(Error::Mmap {
                op: "unmap",
                panel,
                path: self.data.path().to_owned(),
                source: io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    fn write_back(&mut self, panel: usize, mapping: &Mapping) -> Result<()> {
        if !mapping.dirty {
            return Ok(());
        }
        // SAFETY: the range is mapped (msync does not touch the memory).
        let rc = unsafe { libc::msync(mapping.ptr.as_ptr().cast(), mapping.len, libc::MS_SYNC) };
        if rc != 0 {
            return Err(Error::WriteBack {
                panel,
                path: self.data.path().to_owned(),
                source: io::Error::last_os_error(),
            });
        }
        self.stats.write_backs += 1;
        Ok(())
    }

    /// Writes every changed panel back to the file, keeping it mapped.
    pub fn flush(&mut self) -> Result<()> {
        let mut first_error = None;
        for panel in 0..self.maps.len() {
            let Some(mapping) = self.maps[panel].take() else {
                continue;
            };
            let written = self.write_back(panel, &mapping);
            let clean = written.is_ok();
            self.maps[panel] = Some(Mapping {
                dirty: mapping.dirty && !clean,
                ..mapping
            });
            if let Err(e) = written {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes changed panels back and unmaps everything; the first error.
    /// Dropping the store does the same but cannot report errors.
    pub fn close(mut self) -> Result<StoreStats> {
        self.release_all()?;
        Ok(self.stats)
    }

    fn release_all(&mut self) -> Result<()> {
        let mut first_error = None;
        for panel in 0..self.maps.len() {
            if let Some(mapping) = self.maps[panel].take() {
                self.mapped -= 1;
                if let Err(e) = self.release(panel, mapping) {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Changes the memory the program has besides its panels (it
    /// allocated or freed a large array), so that the change is not read
    /// as memory pressure or surplus.
    pub fn set_other_memory(&mut self, bytes: u64) -> Result<()> {
        match &mut self.control {
            Control::Adaptive(adapter) => {
                adapter
                    .set_other_memory(bytes)
                    .map_err(|source| Error::Adapter {
                        path: self.data.path().to_owned(),
                        source,
                    })
            }
            Control::Fixed { other_memory, .. } => {
                *other_memory = bytes;
                Ok(())
            }
        }
    }

    /// Sets the RSS tolerance ([`Options::tolerance`]) after opening; no
    /// effect with a fixed panel count.
    pub fn set_tolerance(&mut self, bytes: u64) {
        if let Control::Adaptive(adapter) = &mut self.control {
            adapter.set_tolerance(bytes);
        }
    }

    /// Maps `panel` if need be (an access, which may unmap others) and
    /// keeps it mapped until as many [`unpin`](PanelStore::unpin)s: it
    /// is never a victim, whatever the policy or the memory pressure.
    /// For callers that hold a raw pointer to the panel across accesses
    /// (the C ABI); Rust code cannot keep a slice across accesses and
    /// has no use for it. Pins nest. Pinned panels stay mapped even
    /// when memory is short, beyond `Panels_in` if need be: pin few,
    /// briefly.
    pub fn pin(&mut self, panel: usize) -> Result<()> {
        self.access(panel, false)?;
        self.pin_accessed(panel);
        Ok(())
    }

    /// Pins `panel`, which the last access just mapped: the C ABI's
    /// `memadapt_pin_panel` hands out a pinned panel's address in one
    /// access, so that pinning every panel it gives out (as the Python
    /// package does) does not double the accesses the adapter counts.
    pub(crate) fn pin_accessed(&mut self, panel: usize) {
        match &mut self.control {
            Control::Adaptive(adapter) => adapter.pin(panel).expect("accessed just above"),
            Control::Fixed { residency, .. } => residency.pin(panel),
        }
    }

    /// Releases one pin of `panel`, which stays mapped until an access
    /// picks it as a victim. An error if it holds no pin.
    pub fn unpin(&mut self, panel: usize) -> Result<()> {
        self.check_panel(panel)?;
        let released = match &mut self.control {
            Control::Adaptive(adapter) => adapter.unpin(panel).expect("panel checked above"),
            Control::Fixed { residency, .. } => residency.unpin(panel),
        };
        if !released {
            return Err(Error::NotPinned {
                path: self.data.path().to_owned(),
                panel,
            });
        }
        Ok(())
    }

    /// Whether `panel` holds a pin.
    pub fn is_pinned(&self, panel: usize) -> bool {
        panel < self.panels() && self.residency().is_pinned(panel)
    }

    /// Panels holding a pin.
    pub fn pinned_count(&self) -> usize {
        self.residency().pinned_count()
    }

    fn residency(&self) -> &Residency {
        match &self.control {
            Control::Adaptive(adapter) => adapter.residency(),
            Control::Fixed { residency, .. } => residency,
        }
    }

    /// Sets a panel's priority for [`Policy::Priority`]: lower goes first.
    pub fn set_priority(&mut self, panel: usize, priority: u32) -> Result<()> {
        self.check_panel(panel)?;
        match &mut self.control {
            Control::Adaptive(adapter) => adapter
                .set_priority(panel, priority)
                .expect("panel checked above"),
            Control::Fixed { residency, .. } => residency.set_priority(panel, priority),
        }
        Ok(())
    }

    /// P.
    pub fn panels(&self) -> usize {
        self.data.header().panels
    }

    /// Bytes of one panel's data.
    pub fn panel_size(&self) -> u64 {
        self.data.header().panel_size
    }

    /// Bytes a mapped panel adds to RSS: its size rounded up to pages.
    pub fn resident_panel_size(&self) -> u64 {
        self.resident_panel
    }

    pub fn header(&self) -> &Header {
        self.data.header()
    }

    pub fn element(&self) -> ElementType {
        self.data.header().element
    }

    pub fn path(&self) -> &Path {
        self.data.path()
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Opened with [`Options::rss_only`].
    pub fn is_rss_only(&self) -> bool {
        self.rss_only
    }

    /// Which panels go first when some must be unmapped.
    pub fn policy(&self) -> Policy {
        self.residency().policy()
    }

    /// `Panels_in`: how many panels may be mapped now.
    pub fn panels_in(&self) -> usize {
        match &self.control {
            Control::Adaptive(adapter) => adapter.panels_in(),
            Control::Fixed { panels, .. } => *panels,
        }
    }

    /// Panels mapped now.
    pub fn mapped_count(&self) -> usize {
        self.mapped
    }

    pub fn is_mapped(&self, panel: usize) -> bool {
        self.maps.get(panel).is_some_and(Option::is_some)
    }

    /// dRSS: other memory + `Panels_in` × resident panel size.
    pub fn desired_rss(&self) -> u64 {
        match &self.control {
            Control::Adaptive(adapter) => adapter.desired_rss(),
            Control::Fixed {
                panels,
                other_memory,
                ..
            } => other_memory + *panels as u64 * self.resident_panel,
        }
    }

    /// The adaptation algorithm's state; `None` with a fixed panel count.
    pub fn adapter(&self) -> Option<&Adapter> {
        match &self.control {
            Control::Adaptive(adapter) => Some(adapter),
            Control::Fixed { .. } => None,
        }
    }

    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    pub fn stats(&self) -> StoreStats {
        self.stats
    }
}

impl Drop for PanelStore {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; `close` reports them.
        let _ = self.release_all();
    }
}

/// Fixed-count replacement: the victims that make room for `panel` within
/// `limit` mapped panels, taken off `residency`, which then records the
/// access.
fn replace(residency: &mut Residency, limit: usize, panel: usize) -> Vec<usize> {
    let room = usize::from(!residency.is_mapped(panel));
    let mut victims = Vec::new();
    while residency.mapped_count() + room > limit {
        // limit >= 1, so another panel is mapped, but it may be pinned:
        // then the budget is exceeded until it is unpinned.
        let Some(victim) = residency.victim(Some(panel)) else {
            break;
        };
        residency.unmap(victim);
        victims.push(victim);
    }
    residency.touch(panel);
    victims
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_second_field_is_resident_pages() {
        assert_eq!(parse_statm(b"765 446 418 5 0 123 0\n"), Some(446));
        assert_eq!(parse_statm(b"765"), None);
        assert_eq!(parse_statm(b""), None);
        let rss = Statm::open().unwrap().read().unwrap();
        assert!(rss > 0 && rss % page_size() == 0, "{rss}");
    }

    /// The C and Python layers may move a store to another thread (a
    /// Python object is not tied to one).
    #[test]
    fn a_store_can_move_between_threads() {
        fn send<T: Send>() {}
        send::<PanelStore>();
    }

    fn sample(panel: usize, verdict: Verdict) -> Sample {
        Sample {
            panel,
            verdict,
            ..Sample::FILLER
        }
    }

    #[test]
    fn a_full_timeline_thins_out_but_keeps_events() {
        let mut t = Timeline::new(4);
        for p in 0..4 {
            t.record(sample(p, Verdict::Keep));
        }
        t.record(sample(4, Verdict::Keep));
        // [0 1 2 3] -> [0 2] + 4; stride 2.
        let panels = |t: &Timeline| t.samples().iter().map(|s| s.panel).collect::<Vec<_>>();
        assert_eq!((panels(&t), t.stride()), (vec![0, 2, 4], 2));
        t.record(sample(5, Verdict::Keep)); // odd: skipped
        t.record(sample(6, Verdict::Probe)); // event: kept, fills up
        t.record(sample(7, Verdict::Probe)); // thins [0 2 4 6] -> [0 6]
        assert_eq!((panels(&t), t.stride()), (vec![0, 6, 7], 4));
        let csv = t.to_csv();
        assert!(csv.starts_with("t_s,panel,rss_bytes"), "{csv}");
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.lines().nth(2).unwrap().contains(",probe,"), "{csv}");
        assert!(Timeline::new(0).samples.capacity() == 0);
    }
}
