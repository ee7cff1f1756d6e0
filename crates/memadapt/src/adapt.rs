//! The adaptation algorithm of paper 002 (§4, Figure 2) and the choice of
//! which panels to unmap (§3), as pure code.
//!
//! Figure 2, run before every panel access:
//!
//! ```text
//! RSS = Get current RSS
//! if (RSS < lastRSS) & (Panels_in > 1)                  -- shortage, §4.1
//!     diff = (lastRSS-RSS) / Panel_size
//!     unmap diff panels, Panels_in -= diff, dRSS -= diff * Panel_size
//! else if (dRSS == RSS) & (Panels_in < P)               -- surplus, §4.2
//!     peakRSS = max(peakRSS, RSS)
//!     delay = Time to access the last P panels
//!     if (Time since last unmap > delay * min(10, peakRSS/(peakRSS-RSS)))
//!         Panels_in++, dRSS += Panel_size, peakRSS = RSS
//! lastRSS = Get current RSS
//! ```
//!
//! [`Adapter::access`] is everything up to the last line, plus the panel
//! replacement the figure leaves implicit; [`Adapter::settle`] is the last
//! line, fed with the RSS the caller measures after carrying out the
//! unmappings. Where the figure is ambiguous, the choice made here is
//! written where it is made (look for "Paper:").

use std::cmp::Reverse;
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// Cap on the probe delay factor `peakRSS/(peakRSS-RSS)`: Figure 2's
/// `min(10, …)`. The factor is the ratio of the penalty of a failed probe
/// to that of staying put (§4.2); it is infinite when RSS is at its peak,
/// and uncapped the program would never look for memory again.
pub const MAX_DELAY_FACTOR: u32 = 10;

/// Panels the adapter never goes below: "we can only unmap down to a
/// minimum of one panel, so that the program can still perform work"
/// (§4.1).
pub const MIN_PANELS: usize = 1;

/// RSS differences the adapter ignores, in bytes, unless configured
/// otherwise. Zero is Figure 2's exact comparisons (`RSS < lastRSS`,
/// `dRSS == RSS`); a real process's RSS also moves by a few pages for
/// reasons of its own, so the panel store will set a measured tolerance.
pub const DEFAULT_TOLERANCE: u64 = 0;

/// Which mapped panel goes first when panels must be unmapped (§3: "The
/// policy for selecting panels to evict … is application-specific").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The most recently used panel. The default because the programs the
    /// library is for sweep their panels cyclically, where "MRU is the
    /// optimal policy, whereas the LRU approximations used in most virtual
    /// memory systems would completely fail" (§3).
    #[default]
    Mru,
    /// The least recently used panel, for programs that revisit recent
    /// panels (not cyclic sweeps).
    Lru,
    /// The panel with the lowest priority ([`Residency::set_priority`],
    /// 0 unless set); among equal priorities the most recently used, as
    /// [`Policy::Mru`], because the sweep is still the common pattern.
    Priority,
}

#[derive(Clone, Copy, Debug, Default)]
struct PanelState {
    mapped: bool,
    /// Access stamp of the last access (0: never). Stamps are unique, so
    /// the victim choice never depends on iteration order.
    last_use: u64,
    priority: u32,
    /// Pins held ([`Residency::pin`]): while above 0 the panel is never a
    /// victim. A count, not a flag, so that two parts of a program can
    /// pin the same panel independently.
    pins: u32,
}

/// Which of the P panels are mapped, in which order they were used, and
/// which one to unmap next under a [`Policy`]. Pure bookkeeping: mapping
/// and unmapping are the caller's.
///
/// Panels are numbered `0..P`; methods panic on a number out of range, as
/// slice indexing does ([`Adapter`] checks numbers and returns errors).
#[derive(Clone, Debug)]
pub struct Residency {
    policy: Policy,
    panels: Vec<PanelState>,
    mapped: usize,
    /// Last access stamp handed out.
    stamp: u64,
}

impl Residency {
    pub fn new(panels: usize, policy: Policy) -> Residency {
        Residency {
            policy,
            panels: vec![PanelState::default(); panels],
            mapped: 0,
            stamp: 0,
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// P, the number of panels.
    pub fn panels(&self) -> usize {
        self.panels.len()
    }

    pub fn is_mapped(&self, panel: usize) -> bool {
        self.panels[panel].mapped
    }

    pub fn mapped_count(&self) -> usize {
        self.mapped
    }

    /// The mapped panels, in panel order.
    pub fn mapped(&self) -> impl Iterator<Item = usize> + '_ {
        self.panels
            .iter()
            .enumerate()
            .filter(|(_, p)| p.mapped)
            .map(|(i, _)| i)
    }

    pub fn priority(&self, panel: usize) -> u32 {
        self.panels[panel].priority
    }

    /// Sets a panel's priority for [`Policy::Priority`]: lower goes first.
    pub fn set_priority(&mut self, panel: usize, priority: u32) {
        self.panels[panel].priority = priority;
    }

    /// Records an access to `panel`, which is mapped from now on and the
    /// most recently used.
    pub fn touch(&mut self, panel: usize) {
        self.stamp += 1;
        let p = &mut self.panels[panel];
        if !p.mapped {
            p.mapped = true;
            self.mapped += 1;
        }
        p.last_use = self.stamp;
    }

    /// Keeps `panel` out of the victims until as many
    /// [`unpin`](Residency::unpin)s: a C or Python caller holding a raw
    /// pointer to it across accesses needs it to stay mapped. Pinned
    /// panels may hold the mapped count above what a policy would allow
    /// ([`Adapter::access`] unmaps what it can and no more); pins are for
    /// a few panels, briefly. Pinning an unmapped panel is the caller's
    /// mistake: it is not mapped by this.
    pub fn pin(&mut self, panel: usize) {
        let p = &mut self.panels[panel];
        // A pin count beyond u32 is a leak in the caller, not a use.
        p.pins = p
            .pins
            .checked_add(1)
            .expect("fewer than 2^32 pins of one panel");
    }

    /// Releases one pin of `panel`; false if it held none.
    pub fn unpin(&mut self, panel: usize) -> bool {
        let p = &mut self.panels[panel];
        match p.pins.checked_sub(1) {
            Some(pins) => {
                p.pins = pins;
                true
            }
            None => false,
        }
    }

    pub fn is_pinned(&self, panel: usize) -> bool {
        self.panels[panel].pins > 0
    }

    /// Panels holding at least one pin.
    pub fn pinned_count(&self) -> usize {
        self.panels.iter().filter(|p| p.pins > 0).count()
    }

    /// Records that `panel` is no longer mapped.
    pub fn unmap(&mut self, panel: usize) {
        let p = &mut self.panels[panel];
        if p.mapped {
            p.mapped = false;
            self.mapped -= 1;
        }
    }

    /// The mapped panel the policy would unmap first, never `keep` (the
    /// panel about to be accessed) nor a pinned one; `None` when there is
    /// no other unpinned mapped panel.
    pub fn victim(&self, keep: Option<usize>) -> Option<usize> {
        let candidates = self
            .panels
            .iter()
            .enumerate()
            .filter(|&(i, p)| p.mapped && p.pins == 0 && Some(i) != keep);
        let chosen = match self.policy {
            Policy::Mru => candidates.max_by_key(|(_, p)| p.last_use),
            Policy::Lru => candidates.min_by_key(|(_, p)| p.last_use),
            Policy::Priority => candidates.min_by_key(|(_, p)| (p.priority, Reverse(p.last_use))),
        };
        chosen.map(|(i, _)| i)
    }
}

/// What the adapter is set up with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// P: the number of panels in the data set.
    pub panels: usize,
    /// Bytes of one panel (`Panel_size`).
    pub panel_size: u64,
    /// Bytes the program has resident besides its panels: "Other Program
    /// Memory" in dRSS (§4.1). The program knows it, or the panel store
    /// measures it as the RSS before any panel is mapped.
    pub other_memory: u64,
    /// `Panels_in` at the start. Default [`MIN_PANELS`]: starting small
    /// cannot overcommit, and before any shortage nothing delays the
    /// probes, so without pressure the program holds all P panels by the
    /// end of its first sweep.
    pub initial_panels: usize,
    /// RSS differences to ignore, in bytes ([`DEFAULT_TOLERANCE`]): a drop
    /// must exceed it to be a shortage, and RSS within it of dRSS counts
    /// as equal.
    pub tolerance: u64,
    pub policy: Policy,
}

impl Config {
    /// P panels of `panel_size` bytes, with every other setting at its
    /// default.
    pub fn new(panels: usize, panel_size: u64) -> Config {
        Config {
            panels,
            panel_size,
            other_memory: 0,
            initial_panels: MIN_PANELS,
            tolerance: DEFAULT_TOLERANCE,
            policy: Policy::default(),
        }
    }

    fn validate(&self) -> Result<(), Error> {
        if self.panels == 0 {
            return Err(Error::NoPanels);
        }
        if self.panel_size == 0 {
            return Err(Error::ZeroPanelSize {
                panels: self.panels,
            });
        }
        if !(MIN_PANELS..=self.panels).contains(&self.initial_panels) {
            return Err(Error::InitialPanels {
                initial: self.initial_panels,
                panels: self.panels,
            });
        }
        max_desired_rss(self.panels, self.panel_size, self.other_memory)?;
        Ok(())
    }
}

/// dRSS with all P panels in: the largest value dRSS can take, so checking
/// it once lets every later dRSS be computed without overflow checks.
fn max_desired_rss(panels: usize, panel_size: u64, other_memory: u64) -> Result<u64, Error> {
    (panels as u64)
        .checked_mul(panel_size)
        .and_then(|panels_bytes| panels_bytes.checked_add(other_memory))
        .ok_or(Error::TooLarge {
            panels,
            panel_size,
            other_memory,
        })
}

/// Why the adapter refused a configuration or a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    NoPanels,
    ZeroPanelSize {
        panels: usize,
    },
    InitialPanels {
        initial: usize,
        panels: usize,
    },
    TooLarge {
        panels: usize,
        panel_size: u64,
        other_memory: u64,
    },
    PanelOutOfRange {
        panel: usize,
        panels: usize,
    },
    /// `access` called again before `settle` reported the RSS after the
    /// previous access's unmappings.
    Unsettled {
        panel: usize,
    },
    /// `settle` called with no access waiting for it.
    NothingToSettle,
    TimeWentBack {
        now: Duration,
        previous: Duration,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoPanels => write!(f, "a data set needs at least one panel, got 0"),
            Error::ZeroPanelSize { panels } => {
                write!(f, "panel size is 0 bytes (for {panels} panels)")
            }
            Error::InitialPanels { initial, panels } => write!(
                f,
                "initial panels in memory must be {MIN_PANELS}..={panels}, got {initial}"
            ),
            Error::TooLarge {
                panels,
                panel_size,
                other_memory,
            } => write!(
                f,
                "{panels} panels of {panel_size} bytes plus {other_memory} bytes of other \
                 memory do not fit in 64 bits"
            ),
            Error::PanelOutOfRange { panel, panels } => {
                write!(
                    f,
                    "panel {panel} does not exist: the data set has panels 0..{panels}"
                )
            }
            Error::Unsettled { panel } => write!(
                f,
                "access to panel {panel} was not settled: report the RSS after its \
                 unmappings (settle) before the next access"
            ),
            Error::NothingToSettle => write!(f, "settle called with no panel access pending"),
            Error::TimeWentBack { now, previous } => write!(
                f,
                "time went backwards: access at {now:?} after one at {previous:?}"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// What Figure 2 concluded at one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Neither shortage nor a probe: `Panels_in` unchanged.
    Keep,
    /// RSS fell `drop` bytes below lastRSS during the previous access:
    /// `Panels_in` went down by `panels`.
    Shortage { drop: u64, panels: usize },
    /// RSS held at dRSS long enough: `Panels_in` went up by one, so one
    /// panel more will be mapped without replacement.
    Probe,
    /// RSS held steady off dRSS for a whole sweep with every panel of
    /// `Panels_in` mapped: "Other Program Memory" was wrong (part of it
    /// paged out and never touched again, or grown) and is now
    /// `other_memory`, so that RSS = dRSS again (see [`Adapter`]).
    Rebase { other_memory: u64 },
}

/// What the caller does for one access, in this order: unmap `unmap`,
/// report the RSS to [`Adapter::settle`], map `map`, use the panel.
#[must_use = "the unmappings must be carried out and the RSS settled"]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub verdict: Verdict,
    /// Panels to unmap before the access, in the policy's order: those a
    /// shortage sheds, and the one the accessed panel replaces.
    pub unmap: Vec<usize>,
    /// The accessed panel, when it is not mapped yet.
    pub map: Option<usize>,
}

/// Counters over the adapter's life, for the statistics users plot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub accesses: u64,
    /// Accesses at which a shortage was detected.
    pub shortages: u64,
    /// Panels taken off `Panels_in` by shortages.
    pub panels_shed: u64,
    pub probes: u64,
    /// Panels unmapped for any reason (shortage or replacement).
    pub unmaps: u64,
    /// Times "Other Program Memory" was re-measured ([`Verdict::Rebase`]).
    pub rebases: u64,
    pub maps: u64,
}

/// Figure 2 as a state machine, with the panel replacement around it.
///
/// At each panel access the caller:
///
/// 1. measures RSS and calls [`access`](Adapter::access) with the time since
///    it started and the panel it wants;
/// 2. unmaps the panels in [`Step::unmap`];
/// 3. measures RSS again and calls [`settle`](Adapter::settle) (Figure 2's
///    last line, `lastRSS = Get current RSS`); if `unmap` was empty it may
///    pass the RSS of step 1, since nothing the adapter asked for changed it;
/// 4. maps [`Step::map`] if set, and works on the panel.
///
/// Measuring after the unmappings is what prevents the cascade of §4.1:
/// RSS lost to our own unmapping is then never mistaken for RSS taken by
/// the system at the next access.
///
/// Beyond the paper: dRSS assumes the program's other memory stays
/// resident. Under pressure the system also pages out parts of it the
/// program never touches again (start-up code, a buffer used once), and
/// RSS then stays below dRSS after the pressure is gone: Figure 2 would
/// never probe again (seen in a real pool: 350 KiB short for good). RSS
/// alone cannot tell that from mapped panels still paged out, so the
/// caller may say, before an access, that every mapped panel is wholly
/// resident ([`Adapter::panels_resident`], from `mincore(2)`). When it
/// has, and RSS has stayed within the tolerance of one value for P
/// accesses with every panel of `Panels_in` mapped and no shortage or
/// probe, yet differs from dRSS by more than the tolerance, the
/// difference is the other memory's, which is re-measured
/// ([`Verdict::Rebase`]).
#[derive(Clone, Debug)]
pub struct Adapter {
    panel_size: u64,
    other_memory: u64,
    tolerance: u64,
    residency: Residency,
    panels_in: usize,
    /// `None` before the first access settles. Paper: "We initialize
    /// lastRSS to dRSS". With `Panels_in` = 1 at the start that can never
    /// trigger (the shortage branch needs `Panels_in > 1`); with more, the
    /// not yet touched panels would read as a shortage and be unmapped at
    /// the first access. So the first access compares with nothing.
    last_rss: Option<u64>,
    /// Highest RSS seen at dRSS since the last probe (Figure 2 updates it
    /// only in the surplus branch; §4.2 uses it for the unknown maxRSS).
    peak_rss: u64,
    /// Time of the last access that shed panels for a shortage. Paper:
    /// "Time since last unmap" counts from shortage unmappings only: §4.2
    /// delays growth "after Panels_in has been reduced by the Detect
    /// Shortage algorithm", and counting replacements would stop probing
    /// for good, since a program short of panels replaces one at nearly
    /// every access. `None`: no shortage yet, nothing to wait for.
    last_shortage: Option<Duration>,
    /// Times of the last P accesses before the current one, oldest first.
    recent: VecDeque<Duration>,
    /// RSS at the accesses since the last shortage, probe or rebase (at
    /// most P): the steadiness a rebase needs.
    steady: VecDeque<u64>,
    previous_now: Option<Duration>,
    /// The caller's word that every mapped panel is wholly resident, for
    /// the next access only.
    panels_resident: bool,
    /// The accessed panel while `settle` is due.
    pending: Option<usize>,
    /// Memory a scheduler allows the program (memgang's allowance file):
    /// Panels_in never exceeds what fits in it beside the other memory, so
    /// the program shrinks before the scheduler has to page it.
    limit: Option<u64>,
    stats: Stats,
}

impl Adapter {
    pub fn new(config: Config) -> Result<Adapter, Error> {
        config.validate()?;
        Ok(Adapter {
            panel_size: config.panel_size,
            other_memory: config.other_memory,
            tolerance: config.tolerance,
            residency: Residency::new(config.panels, config.policy),
            panels_in: config.initial_panels,
            last_rss: None,
            peak_rss: 0,
            last_shortage: None,
            recent: VecDeque::with_capacity(config.panels + 1),
            steady: VecDeque::with_capacity(config.panels + 1),
            previous_now: None,
            panels_resident: false,
            pending: None,
            limit: None,
            stats: Stats::default(),
        })
    }

    /// Runs Figure 2 before an access to `panel` at `now` (time since the
    /// program started), with `rss` the program's RSS in bytes measured
    /// just before, and says what to unmap and map. Call
    /// [`settle`](Adapter::settle) before the next access.
    pub fn access(&mut self, now: Duration, panel: usize, rss: u64) -> Result<Step, Error> {
        let panels = self.panels();
        if panel >= panels {
            return Err(Error::PanelOutOfRange { panel, panels });
        }
        if let Some(panel) = self.pending {
            return Err(Error::Unsettled { panel });
        }
        if let Some(previous) = self.previous_now {
            if now < previous {
                return Err(Error::TimeWentBack { now, previous });
            }
        }
        self.previous_now = Some(now);

        let base = self.base_delay(now);
        self.recent.push_back(now);
        if self.recent.len() > panels {
            self.recent.pop_front();
        }
        let verdict = self.adapt(now, rss, base);
        if let Some(max) = self.panels_allowed() {
            self.panels_in = self.panels_in.min(max);
        }

        // Bring the mapped set within Panels_in with room for `panel`.
        // The mapped panels other than `panel` number at least mapped +
        // room - 1 >= Panels_in >= 1, so a victim exists unless they are
        // pinned ([`Residency::pin`]): then the mapped set stays above
        // Panels_in until they are unpinned, and a later access sheds it.
        let room = usize::from(!self.residency.is_mapped(panel));
        let mut unmap = Vec::new();
        while self.residency.mapped_count() + room > self.panels_in {
            let Some(victim) = self.residency.victim(Some(panel)) else {
                break;
            };
            self.residency.unmap(victim);
            unmap.push(victim);
        }
        let map = (room == 1).then_some(panel);
        self.residency.touch(panel);
        self.pending = Some(panel);

        self.stats.accesses += 1;
        self.stats.unmaps += unmap.len() as u64;
        self.stats.maps += room as u64;
        Ok(Step {
            verdict,
            unmap,
            map,
        })
    }

    /// Figure 2's last line, `lastRSS = Get current RSS`: `rss` is the RSS
    /// measured after the previous [`Step`]'s unmappings were done.
    pub fn settle(&mut self, rss: u64) -> Result<(), Error> {
        if self.pending.take().is_none() {
            return Err(Error::NothingToSettle);
        }
        self.last_rss = Some(rss);
        Ok(())
    }

    /// The shortage and surplus branches of Figure 2.
    fn adapt(&mut self, now: Duration, rss: u64, base: Option<Duration>) -> Verdict {
        // The first access has nothing to compare with (see `last_rss`).
        let last = self.last_rss.unwrap_or(rss);
        if rss.saturating_add(self.tolerance) < last && self.panels_in > MIN_PANELS {
            let drop = last - rss;
            // Paper: `diff = (lastRSS-RSS) / Panel_size` does not say how
            // to round. Down would answer a drop of less than a panel with
            // nothing, and since lastRSS is then re-read, a system taking
            // less than a panel per access would never be answered at all:
            // the program would be paged indefinitely, which is what this
            // library exists to avoid. So any drop beyond the tolerance
            // sheds at least one panel, and probing wins it back if it was
            // too much.
            let diff = drop.div_ceil(self.panel_size);
            let shed = diff.min((self.panels_in - MIN_PANELS) as u64) as usize;
            self.panels_in -= shed;
            self.last_shortage = Some(now);
            self.stats.shortages += 1;
            self.stats.panels_shed += shed as u64;
            self.steady.clear();
            return Verdict::Shortage { drop, panels: shed };
        }
        if let Some(other_memory) = self.rebase(rss) {
            self.other_memory = other_memory;
            self.stats.rebases += 1;
            self.steady.clear();
            return Verdict::Rebase { other_memory };
        }
        if rss.abs_diff(self.desired_rss()) <= self.tolerance && self.panels_in < self.panels() {
            self.peak_rss = self.peak_rss.max(rss);
            let ready = match (self.last_shortage, base) {
                (None, _) => true,
                // Paper: before P accesses have been timed the base delay
                // (the time of an iteration) is unknown; do not guess it
                // short, wait until it is known.
                (Some(_), None) => false,
                (Some(shortage), Some(base)) => {
                    now.saturating_sub(shortage) > probe_delay(base, self.peak_rss, rss)
                }
            };
            if ready {
                self.panels_in += 1;
                self.peak_rss = rss;
                self.stats.probes += 1;
                self.steady.clear();
                return Verdict::Probe;
            }
        }
        Verdict::Keep
    }

    /// The corrected "Other Program Memory" if RSS has been steady off
    /// dRSS for a sweep (see [`Adapter`]), recording `rss` for the next.
    fn rebase(&mut self, rss: u64) -> Option<u64> {
        self.steady.push_back(rss);
        if self.steady.len() > self.panels() {
            self.steady.pop_front();
        }
        let resident = std::mem::take(&mut self.panels_resident);
        let (lo, hi) = self
            .steady
            .iter()
            .fold((u64::MAX, 0), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        let drss = self.desired_rss();
        let off = rss.abs_diff(drss) > self.tolerance;
        let swept = self.steady.len() == self.panels()
            && hi - lo <= self.tolerance
            && self.residency.mapped_count() >= self.panels_in;
        if !(off && swept && resident) {
            return None;
        }
        let panels_bytes = drss - self.other_memory;
        let other_memory = rss.saturating_sub(panels_bytes);
        // Checked at configuration for any value up to there; beyond, keep
        // the old value rather than overflow.
        max_desired_rss(self.panels(), self.panel_size, other_memory).ok()?;
        Some(other_memory)
    }

    /// "Time to access the last P panels" (§4.2): from the access P
    /// accesses before one at `now` to `now`, one iteration of a program
    /// that sweeps its panels. `None` until P accesses have been made.
    pub fn base_delay(&self, now: Duration) -> Option<Duration> {
        if self.recent.len() < self.panels() {
            return None;
        }
        self.recent
            .front()
            .map(|&oldest| now.saturating_sub(oldest))
    }

    /// Tells the adapter that every mapped panel is wholly resident now,
    /// before the next [`access`](Adapter::access) (which forgets it):
    /// then RSS steady off dRSS is the other memory's (see [`Adapter`]).
    pub fn panels_resident(&mut self) {
        self.panels_resident = true;
    }

    /// The RSS difference ignored as noise.
    pub fn tolerance(&self) -> u64 {
        self.tolerance
    }

    /// Changes the RSS noise to ignore ([`Config::tolerance`]), for a
    /// program that learns after opening how much its RSS moves by itself.
    pub fn set_tolerance(&mut self, bytes: u64) {
        self.tolerance = bytes;
    }

    /// Changes "Other Program Memory" (§4.1), and dRSS with it, when the
    /// program allocates or frees memory besides its panels between two
    /// accesses (after one's `settle`, before the next `access`). lastRSS
    /// moves by the same amount: a change the program made itself is no
    /// more memory pressure than one of its own unmappings.
    pub fn set_other_memory(&mut self, bytes: u64) -> Result<(), Error> {
        max_desired_rss(self.panels(), self.panel_size, bytes)?;
        if let Some(last) = self.last_rss.as_mut() {
            *last = if bytes >= self.other_memory {
                last.saturating_add(bytes - self.other_memory)
            } else {
                last.saturating_sub(self.other_memory - bytes)
            };
        }
        self.other_memory = bytes;
        self.steady.clear();
        Ok(())
    }

    /// Sets a panel's priority for [`Policy::Priority`]: lower goes first.
    pub fn set_priority(&mut self, panel: usize, priority: u32) -> Result<(), Error> {
        let panels = self.panels();
        if panel >= panels {
            return Err(Error::PanelOutOfRange { panel, panels });
        }
        self.residency.set_priority(panel, priority);
        Ok(())
    }

    /// Keeps `panel`, which must be mapped (accessed, its unmappings
    /// carried out), out of the victims until unpinned
    /// ([`Residency::pin`]).
    pub fn pin(&mut self, panel: usize) -> Result<(), Error> {
        let panels = self.panels();
        if panel >= panels {
            return Err(Error::PanelOutOfRange { panel, panels });
        }
        self.residency.pin(panel);
        Ok(())
    }

    /// Releases one pin of `panel`: `Ok(false)` if it held none.
    pub fn unpin(&mut self, panel: usize) -> Result<bool, Error> {
        let panels = self.panels();
        if panel >= panels {
            return Err(Error::PanelOutOfRange { panel, panels });
        }
        Ok(self.residency.unpin(panel))
    }

    /// P.
    pub fn panels(&self) -> usize {
        self.residency.panels()
    }

    pub fn panel_size(&self) -> u64 {
        self.panel_size
    }

    pub fn other_memory(&self) -> u64 {
        self.other_memory
    }

    /// Sets the memory a scheduler allows the program (None: no limit).
    /// The next access sheds panels down to what fits.
    pub fn set_limit(&mut self, bytes: Option<u64>) {
        self.limit = bytes;
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The most panels the limit leaves room for beside the other memory,
    /// at least [`MIN_PANELS`] (a program must hold the panel it works on).
    fn panels_allowed(&self) -> Option<usize> {
        let room = self.limit?.saturating_sub(self.other_memory);
        let n = usize::try_from(room / self.panel_size).unwrap_or(usize::MAX);
        Some(n.max(MIN_PANELS))
    }

    /// `Panels_in`: how many panels the program may keep mapped.
    pub fn panels_in(&self) -> usize {
        self.panels_in
    }

    /// dRSS = Other Program Memory + Panels_in × Panel_size (§4.1), with
    /// the panels mapped above Panels_in counted too. Only pins keep
    /// panels mapped above Panels_in ([`Residency::pin`]), and those
    /// panels are in the RSS: left out, RSS would exceed dRSS by them for
    /// as long as they stay, and no probe would ever happen. That is the
    /// normal state of a caller that pins every panel it hands out until
    /// the caller drops it (the Python package: the loop variable still
    /// holds panel k while panel k+1 is fetched). Cannot overflow: the
    /// configuration checked it with all P panels in.
    pub fn desired_rss(&self) -> u64 {
        let panels = self.panels_in.max(self.residency.mapped_count());
        self.other_memory + panels as u64 * self.panel_size
    }

    /// lastRSS, `None` before the first access settled.
    pub fn last_rss(&self) -> Option<u64> {
        self.last_rss
    }

    pub fn peak_rss(&self) -> u64 {
        self.peak_rss
    }

    /// When the last shortage shed panels, if one has.
    pub fn last_shortage(&self) -> Option<Duration> {
        self.last_shortage
    }

    /// The mapped panels and their use order.
    pub fn residency(&self) -> &Residency {
        &self.residency
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }
}

/// How long after a shortage a probe must wait (§4.2): the base delay
/// scaled by the ratio of the incursion and inaction penalties,
/// `base × min(10, peakRSS/(peakRSS−RSS))`. The factor grows as RSS nears
/// peakRSS (the stand-in for the unknown maxRSS) and is capped at
/// [`MAX_DELAY_FACTOR`]; RSS at or above its peak gets the cap.
pub fn probe_delay(base: Duration, peak_rss: u64, rss: u64) -> Duration {
    let cap = base.saturating_mul(MAX_DELAY_FACTOR);
    if rss >= peak_rss {
        return cap;
    }
    // Exact integer arithmetic, so the comparison with the elapsed time is
    // deterministic to the nanosecond.
    let scaled = base.as_nanos().saturating_mul(u128::from(peak_rss)) / u128::from(peak_rss - rss);
    if scaled >= cap.as_nanos() {
        return cap;
    }
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    // Below the cap, itself a Duration, so the seconds fit in a u64.
    Duration::new(
        (scaled / NANOS_PER_SEC) as u64,
        (scaled % NANOS_PER_SEC) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 100;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// One access whose unmappings leave RSS at `settled` (the caller's
    /// second measurement).
    fn step(a: &mut Adapter, t: u64, panel: usize, rss: u64, settled: u64) -> Step {
        let step = a.access(secs(t), panel, rss).unwrap();
        a.settle(settled).unwrap();
        step
    }

    /// One access where nothing the adapter asks for changes RSS.
    fn keep(a: &mut Adapter, t: u64, panel: usize, rss: u64) -> Verdict {
        step(a, t, panel, rss, rss).verdict
    }

    // ---- replacement policies ----

    fn touched(policy: Policy, panels: usize, order: &[usize]) -> Residency {
        let mut r = Residency::new(panels, policy);
        for &p in order {
            r.touch(p);
        }
        r
    }

    #[test]
    fn mru_evicts_the_most_recently_used_other_panel() {
        let r = touched(Policy::Mru, 5, &[0, 1, 2, 3]);
        assert_eq!(
            r.victim(Some(3)),
            Some(2),
            "§4.1: accessing 4 replaces MRU 3"
        );
        assert_eq!(r.victim(None), Some(3));
        let r = touched(Policy::Mru, 5, &[0, 1, 2, 3, 1]);
        assert_eq!(r.victim(Some(4)), Some(1));
    }

    #[test]
    fn lru_evicts_the_least_recently_used_panel() {
        let r = touched(Policy::Lru, 5, &[0, 1, 2, 3]);
        assert_eq!(r.victim(Some(3)), Some(0));
        assert_eq!(r.victim(Some(0)), Some(1));
        let r = touched(Policy::Lru, 5, &[0, 1, 2, 3, 0]);
        assert_eq!(r.victim(None), Some(1));
    }

    #[test]
    fn priority_evicts_the_lowest_priority_then_the_most_recent() {
        let mut r = touched(Policy::Priority, 4, &[0, 1, 2, 3]);
        for (panel, priority) in [(0, 5), (1, 1), (2, 1), (3, 9)] {
            r.set_priority(panel, priority);
        }
        let mut order = Vec::new();
        while let Some(v) = r.victim(None) {
            r.unmap(v);
            order.push(v);
        }
        assert_eq!(order, [2, 1, 0, 3]);
        assert_eq!(r.mapped_count(), 0);
    }

    #[test]
    fn victim_is_only_ever_another_mapped_panel() {
        let mut r = touched(Policy::Lru, 4, &[0, 1, 2]);
        r.unmap(0);
        assert_eq!(r.victim(None), Some(1), "unmapped 0 is not a candidate");
        r.unmap(1);
        assert_eq!(r.victim(Some(2)), None, "only the kept panel is left");
        assert_eq!(r.mapped().collect::<Vec<_>>(), [2]);
        r.unmap(1);
        assert_eq!(r.mapped_count(), 1, "unmapping twice counts once");
    }

    #[test]
    fn pinned_panels_are_never_victims() {
        let mut r = touched(Policy::Mru, 4, &[0, 1, 2, 3]);
        r.pin(3);
        r.pin(3);
        assert_eq!(r.victim(None), Some(2), "MRU 3 is pinned");
        assert!(r.unpin(3));
        assert_eq!(r.victim(None), Some(2), "one pin of two released");
        assert!(r.unpin(3) && !r.unpin(3), "no third pin to release");
        assert_eq!(r.victim(None), Some(3));

        // The adapter under a shortage sheds the unpinned panels only,
        // and with nothing else to unmap keeps the pinned ones mapped
        // above Panels_in until they are unpinned.
        let mut a = four_resident();
        a.pin(0).unwrap();
        a.pin(2).unwrap();
        assert_eq!(
            a.pin(4),
            Err(Error::PanelOutOfRange {
                panel: 4,
                panels: 4
            })
        );
        let s = step(&mut a, 5, 1, S, S);
        assert_eq!(
            s.verdict,
            Verdict::Shortage {
                drop: 3 * S,
                panels: 3
            }
        );
        assert_eq!(s.unmap, [3], "0 and 2 are pinned, 1 is accessed");
        assert_eq!(a.panels_in(), 1);
        assert_eq!(a.residency().mapped().collect::<Vec<_>>(), [0, 1, 2]);
        let s = step(&mut a, 6, 3, S, S);
        assert_eq!((s.unmap, s.map), (vec![1], Some(3)), "only 1 can go");
        assert_eq!(a.unpin(0), Ok(true));
        assert_eq!(a.unpin(0), Ok(false));
        let s = step(&mut a, 7, 3, S, S);
        assert_eq!(s.unmap, [0], "unpinned, 0 is shed at the next access");
        assert_eq!(a.residency().mapped().collect::<Vec<_>>(), [2, 3]);
    }

    /// A caller that holds each panel (pinned) until the next one is
    /// handed out, as the Python package's loops do: the held panel is
    /// in the RSS, so dRSS counts it, and without pressure the probes
    /// still bring every panel in during the first sweep.
    #[test]
    fn holding_the_previous_panel_pinned_does_not_stop_probing() {
        let mut a = Adapter::new(Config::new(4, S)).unwrap();
        let mut held = None;
        for (t, panel) in (0..4).enumerate() {
            // Every mapped panel has been touched: RSS is the mapped set.
            let rss = a.residency().mapped_count() as u64 * S;
            let s = step(&mut a, t as u64, panel, rss, rss);
            a.pin(panel).unwrap();
            if let Some(previous) = held.replace(panel) {
                assert_eq!(a.unpin(previous), Ok(true));
            }
            assert!(s.unmap.is_empty(), "access {t}: {s:?}");
        }
        assert_eq!(a.panels_in(), 4, "{:?}", a.stats());
        assert_eq!(a.desired_rss(), 4 * S);
    }

    /// Hits when sweeping `panels` cyclically `sweeps` times with room for
    /// `room` of them.
    fn sweep_hits(policy: Policy, panels: usize, room: usize, sweeps: usize) -> usize {
        let mut r = Residency::new(panels, policy);
        let mut hits = 0;
        for p in (0..sweeps).flat_map(|_| 0..panels) {
            if r.is_mapped(p) {
                hits += 1;
            } else if r.mapped_count() == room {
                let v = r.victim(Some(p)).unwrap();
                r.unmap(v);
            }
            r.touch(p);
        }
        hits
    }

    #[test]
    fn mru_beats_lru_on_cyclic_sweeps() {
        // §3: on repeated sequential sweeps LRU "would completely fail".
        assert_eq!(sweep_hits(Policy::Lru, 5, 3, 10), 0);
        // MRU keeps room - 1 panels across sweeps: at least 2 hits per
        // sweep after the first.
        let mru = sweep_hits(Policy::Mru, 5, 3, 10);
        assert!(mru >= 9 * 2, "MRU hits {mru}");
    }

    // ---- the probe delay ----

    #[test]
    fn delay_grows_as_rss_nears_its_peak_and_is_capped_at_ten() {
        let base = secs(1);
        assert_eq!(
            probe_delay(base, 1000, 0),
            secs(1),
            "far from the peak: base"
        );
        assert_eq!(probe_delay(base, 1000, 500), secs(2));
        assert_eq!(probe_delay(base, 1000, 750), secs(4));
        assert_eq!(probe_delay(base, 1000, 900), secs(10));
        assert_eq!(probe_delay(base, 1000, 950), secs(10), "20 capped at 10");
        assert_eq!(probe_delay(base, 1000, 1000), secs(10), "at the peak");
        assert_eq!(probe_delay(base, 1000, 2000), secs(10));
        assert_eq!(probe_delay(secs(3), 300, 100), Duration::from_millis(4500));
        let mut previous = Duration::ZERO;
        for rss in 0..=1000 {
            let d = probe_delay(base, 1000, rss);
            assert!(d >= previous && d <= secs(10), "rss {rss}: {d:?}");
            previous = d;
        }
    }

    #[test]
    fn base_delay_is_the_time_of_the_last_p_accesses() {
        let mut a = Adapter::new(Config::new(3, S)).unwrap();
        for (t, panel) in [(0, 0), (1, 1)] {
            keep(&mut a, t, panel, 0);
        }
        assert_eq!(a.base_delay(secs(2)), None, "only 2 of 3 accesses timed");
        keep(&mut a, 2, 2, 0);
        assert_eq!(a.base_delay(secs(3)), Some(secs(3)));
        // Slower accesses lengthen it, the oldest ones drop out.
        for (t, panel) in [(13, 0), (23, 1)] {
            keep(&mut a, t, panel, 0);
        }
        assert_eq!(a.base_delay(secs(33)), Some(secs(31)), "33 - 2");
    }

    // ---- shortage (§4.1) ----

    /// All four panels mapped and resident: RSS 4S, accesses at t 0..=4.
    fn four_resident() -> Adapter {
        let mut a = Adapter::new(Config {
            initial_panels: 4,
            ..Config::new(4, S)
        })
        .unwrap();
        for (t, rss) in [0, S, 2 * S, 3 * S].into_iter().enumerate() {
            assert_eq!(keep(&mut a, t as u64, t, rss), Verdict::Keep);
        }
        assert_eq!(keep(&mut a, 4, 0, 4 * S), Verdict::Keep);
        assert_eq!(a.residency().mapped_count(), 4);
        a
    }

    #[test]
    fn first_access_is_no_shortage_even_with_many_panels_in() {
        let mut a = Adapter::new(Config {
            initial_panels: 4,
            ..Config::new(4, S)
        })
        .unwrap();
        let s = step(&mut a, 0, 0, 0, 0);
        assert_eq!(s.verdict, Verdict::Keep);
        assert_eq!(a.panels_in(), 4);
    }

    #[test]
    fn no_second_unmap_until_rss_falls_below_last_rss() {
        let mut a = four_resident();
        // The system took one panel's worth during the last access.
        let s = step(&mut a, 5, 1, 3 * S, 2 * S);
        assert_eq!(s.verdict, Verdict::Shortage { drop: S, panels: 1 });
        assert_eq!(s.unmap, [0], "MRU other than the accessed panel 1");
        assert_eq!((a.panels_in(), a.desired_rss()), (3, 3 * S));
        // RSS is 2S, below dRSS 3S, because of our own unmapping: the
        // straightforward `RSS < dRSS` rule would unmap again here.
        let s = step(&mut a, 6, 2, 2 * S, 2 * S);
        assert_eq!((s.verdict, s.unmap.len()), (Verdict::Keep, 0));
        assert_eq!(keep(&mut a, 7, 3, 2 * S + 50), Verdict::Keep);
        // A fresh drop below lastRSS is a shortage again, a partial panel
        // rounded up.
        let s = step(&mut a, 8, 1, 2 * S + 40, 2 * S + 40);
        assert_eq!(
            s.verdict,
            Verdict::Shortage {
                drop: 10,
                panels: 1
            }
        );
        assert_eq!(a.panels_in(), 2);
        assert_eq!(a.stats().shortages, 2);
        assert_eq!(a.last_shortage(), Some(secs(8)));
    }

    #[test]
    fn shortage_sheds_the_drop_in_panels_rounded_up() {
        let mut a = four_resident();
        let s = step(&mut a, 5, 1, 4 * S - 150, S);
        assert_eq!(
            s.verdict,
            Verdict::Shortage {
                drop: 150,
                panels: 2
            }
        );
        assert_eq!(a.panels_in(), 2);
        assert_eq!(s.unmap, [0, 3], "MRU first: 0 (t=4), then 3 (t=3)");
        assert_eq!(s.map, None, "panel 1 was mapped");
    }

    #[test]
    fn a_scheduler_limit_sheds_panels_and_caps_growth() {
        let mut a = Adapter::new(Config {
            initial_panels: 6,
            other_memory: 50,
            ..Config::new(8, S)
        })
        .unwrap();
        for p in 0..6 {
            keep(&mut a, p as u64, p, 50 + (p as u64 + 1) * S);
        }
        assert_eq!(a.residency().mapped_count(), 6);
        // 50 other + 3 panels of 100 fit in 380.
        a.set_limit(Some(380));
        let s = step(&mut a, 10, 6, 650, 350);
        assert_eq!(a.panels_in(), 3);
        assert_eq!(s.unmap.len(), 4, "{s:?}");
        assert_eq!(a.residency().mapped_count(), 3);
        // Below one panel's room: one panel still.
        a.set_limit(Some(10));
        let _ = step(&mut a, 11, 7, 350, 150);
        assert_eq!(a.panels_in(), MIN_PANELS);
        a.set_limit(None);
        assert_eq!(a.limit(), None);
    }

    #[test]
    fn tolerance_ignores_small_rss_noise() {
        let mut a = Adapter::new(Config {
            initial_panels: 4,
            tolerance: 8,
            ..Config::new(4, S)
        })
        .unwrap();
        keep(&mut a, 0, 0, 4 * S);
        assert_eq!(keep(&mut a, 1, 1, 4 * S - 8), Verdict::Keep);
        assert!(matches!(
            keep(&mut a, 2, 2, 4 * S - 17),
            Verdict::Shortage { drop: 9, .. }
        ));
    }

    #[test]
    fn never_below_one_panel() {
        let mut a = four_resident();
        let s = step(&mut a, 5, 2, 0, 0);
        assert_eq!(
            s.verdict,
            Verdict::Shortage {
                drop: 4 * S,
                panels: 3
            },
            "4 panels lost, 3 shed"
        );
        assert_eq!(a.panels_in(), 1);
        assert_eq!(a.residency().mapped().collect::<Vec<_>>(), [2]);
        // Still losing memory: nothing more to shed, the panel is kept.
        let s = step(&mut a, 6, 2, 0, 0);
        assert_eq!((s.verdict, s.unmap.len(), s.map), (Verdict::Keep, 0, None));
        // Moving on replaces the one panel with the next.
        let s = step(&mut a, 7, 3, 0, 0);
        assert_eq!((s.unmap, s.map), (vec![2], Some(3)));
        assert_eq!(a.residency().mapped_count(), 1);
        assert_eq!(a.panels_in(), 1);
    }

    // ---- surplus (§4.2) ----

    #[test]
    fn without_pressure_all_panels_come_in_during_the_first_sweep() {
        let mut a = Adapter::new(Config {
            other_memory: 7,
            ..Config::new(5, S)
        })
        .unwrap();
        let mut rss = 7;
        for panel in 0..5 {
            let s = step(&mut a, panel as u64, panel, rss, rss);
            let expect = if panel == 0 {
                Verdict::Keep
            } else {
                Verdict::Probe
            };
            assert_eq!(s.verdict, expect, "panel {panel}");
            assert_eq!((s.unmap.len(), s.map), (0, Some(panel)), "no replacement");
            rss += S;
        }
        assert_eq!((a.panels_in(), a.desired_rss()), (5, 7 + 5 * S));
        assert_eq!(a.residency().mapped_count(), 5);
        // All P in: the surplus branch is closed.
        assert_eq!(keep(&mut a, 5, 0, rss), Verdict::Keep);
        assert_eq!(a.stats().probes, 4);
    }

    #[test]
    fn probe_only_when_rss_equals_drss() {
        let mut a = four_resident();
        let _ = step(&mut a, 5, 1, 3 * S, 2 * S); // shortage: Panels_in 3, dRSS 3S
                                                  // One access a second: base delay 4 s, factor at most 10, so from
                                                  // t = 46 only RSS keeps a probe back. Below dRSS (mapped panels are
                                                  // still paged out): no probe.
        for t in 6..200 {
            assert_eq!(
                keep(&mut a, t, t as usize % 4, 2 * S),
                Verdict::Keep,
                "t={t}"
            );
        }
        // Above dRSS (say, other memory the adapter was not told of): no
        // probe either.
        let mut above = a.clone();
        assert_eq!(keep(&mut above, 200, 0, 3 * S + 1), Verdict::Keep);
        assert_eq!(above.panels_in(), 3);
        assert_eq!(keep(&mut a, 200, 0, 3 * S), Verdict::Probe);
        assert_eq!(a.panels_in(), 4);
    }

    /// P = 8, one access a second. Grows to Panels_in 5 (peakRSS 400), a
    /// shortage at t = 5 sheds 2 panels (dRSS 300), RSS is back at dRSS
    /// from t = 7. Returns the adapter after the access at t = 7.
    fn after_shortage_below_peak() -> Adapter {
        let mut a = Adapter::new(Config::new(8, S)).unwrap();
        assert_eq!(keep(&mut a, 0, 0, 0), Verdict::Keep);
        for t in 1..=4 {
            assert_eq!(keep(&mut a, t, t as usize, t * S), Verdict::Probe, "t={t}");
        }
        assert_eq!((a.panels_in(), a.peak_rss()), (5, 4 * S));
        let s = step(&mut a, 5, 5, 250, 150);
        assert_eq!(
            s.verdict,
            Verdict::Shortage {
                drop: 150,
                panels: 2
            }
        );
        assert_eq!(a.desired_rss(), 3 * S);
        assert_eq!(keep(&mut a, 6, 6, 150), Verdict::Keep);
        // RSS == dRSS, but only 7 of P = 8 accesses timed: no base delay.
        assert_eq!(keep(&mut a, 7, 7, 3 * S), Verdict::Keep);
        assert_eq!(a.peak_rss(), 4 * S);
        a
    }

    #[test]
    fn probing_waits_for_the_delay() {
        let mut a = after_shortage_below_peak();
        // base = 8 s (8 accesses), factor = 400 / (400 - 300) = 4: a probe
        // needs more than 32 s since the shortage at t = 5.
        assert_eq!(a.base_delay(secs(8)), Some(secs(8)));
        for t in 8..=37 {
            let v = keep(&mut a, t, t as usize % 8, 3 * S);
            assert_eq!(
                v,
                Verdict::Keep,
                "t={t}: only {}s since the shortage",
                t - 5
            );
        }
        assert_eq!(keep(&mut a, 38, 38 % 8, 3 * S), Verdict::Probe);
        assert_eq!((a.panels_in(), a.desired_rss()), (4, 4 * S));
        assert_eq!(a.peak_rss(), 3 * S, "peakRSS = RSS at the probe");
    }

    #[test]
    fn probing_waits_ten_iterations_when_rss_is_at_its_peak() {
        let mut a = after_shortage_below_peak();
        for t in 8..=38 {
            keep(&mut a, t, t as usize % 8, 3 * S);
        }
        // The probe at t = 38 succeeded: RSS reaches the new dRSS, which
        // is the new peak, so the factor is capped: 10 × 8 s after the
        // shortage at t = 5, and probes do not restart that clock.
        for t in 39..=85 {
            let v = keep(&mut a, t, t as usize % 8, 4 * S);
            assert_eq!(v, Verdict::Keep, "t={t}");
        }
        assert_eq!(a.peak_rss(), 4 * S);
        assert_eq!(keep(&mut a, 86, 86 % 8, 4 * S), Verdict::Probe);
        // No shortage since: the delay has passed for good, the next
        // probe comes as soon as RSS reaches dRSS.
        assert_eq!(keep(&mut a, 87, 87 % 8, 4 * S), Verdict::Keep);
        assert_eq!(keep(&mut a, 88, 88 % 8, 5 * S), Verdict::Probe);
    }

    #[test]
    fn a_probe_maps_the_next_panel_without_replacement() {
        let mut a = after_shortage_below_peak();
        for t in 8..=37 {
            keep(&mut a, t, t as usize % 8, 3 * S);
        }
        assert_eq!(a.residency().mapped_count(), 3);
        let missing = (0..8).find(|&p| !a.residency().is_mapped(p)).unwrap();
        let s = step(&mut a, 38, missing, 3 * S, 3 * S);
        assert_eq!(s.verdict, Verdict::Probe);
        assert_eq!((s.unmap.len(), s.map), (0, Some(missing)));
        assert_eq!(a.residency().mapped_count(), 4);
        // Without a probe, a missing panel replaces one.
        let missing = (0..8).find(|&p| !a.residency().is_mapped(p)).unwrap();
        let s = step(&mut a, 39, missing, 3 * S + 50, 3 * S);
        assert_eq!((s.verdict, s.unmap.len()), (Verdict::Keep, 1));
    }

    // ---- other memory, misuse ----

    /// P = 4, 20 bytes of other memory, all panels in; a shortage at t = 5
    /// takes a panel and 10 bytes of the other memory (which the program
    /// never touches again) and sheds 2 panels: dRSS 2S + 20, RSS 2S + 10
    /// from then on.
    fn other_memory_lost() -> Adapter {
        let mut a = Adapter::new(Config {
            initial_panels: 4,
            other_memory: 20,
            ..Config::new(4, S)
        })
        .unwrap();
        for t in 0..=4 {
            keep(&mut a, t, t as usize % 4, 20 + (t.min(4)) * S);
        }
        let s = step(&mut a, 5, 1, 3 * S + 10, S + 10);
        assert!(matches!(s.verdict, Verdict::Shortage { panels: 2, .. }));
        assert_eq!(a.desired_rss(), 2 * S + 20);
        a
    }

    #[test]
    fn rss_steady_below_drss_is_paper_behaviour_unless_panels_are_resident() {
        // Figure 2 alone: never a probe, for as long as it runs.
        let mut a = other_memory_lost();
        for t in 6..300 {
            assert_eq!(keep(&mut a, t, t as usize % 4, 2 * S + 10), Verdict::Keep);
        }
        // Told the mapped panels are wholly in, it re-measures the other
        // memory after a sweep (P = 4 steady accesses) and probes again.
        let mut a = other_memory_lost();
        let mut verdicts = Vec::new();
        let mut rss = 2 * S + 10;
        for t in 6..300 {
            a.panels_resident();
            verdicts.push((t, keep(&mut a, t, t as usize % 4, rss)));
            // From the rebase on, RSS is dRSS (a probed panel comes in).
            if a.stats().rebases > 0 {
                rss = a.desired_rss();
            }
        }
        assert_eq!(verdicts[3], (9, Verdict::Rebase { other_memory: 10 }));
        assert_eq!(
            verdicts[..3]
                .iter()
                .filter(|v| v.1 != Verdict::Keep)
                .count(),
            0
        );
        assert_eq!(a.stats().rebases, 1, "once: RSS = dRSS since");
        assert!(verdicts.iter().any(|v| v.1 == Verdict::Probe));
    }

    #[test]
    fn no_rebase_while_rss_moves_or_a_panel_is_missing() {
        let mut a = other_memory_lost();
        // Panels still faulting back in: RSS grows by 5 an access.
        for t in 6..26 {
            a.panels_resident();
            let rss = S + 10 + 5 * (t - 6);
            assert_eq!(keep(&mut a, t, t as usize % 4, rss), Verdict::Keep, "t={t}");
        }
        // Above dRSS and steady: the other memory grew, found after a sweep.
        for t in 26..30 {
            a.panels_resident();
            let v = keep(&mut a, t, t as usize % 4, 2 * S + 70);
            let want = if t == 29 {
                Verdict::Rebase { other_memory: 70 }
            } else {
                Verdict::Keep
            };
            assert_eq!(v, want, "t={t}");
        }
        // Fewer panels mapped than Panels_in: dRSS counts one not yet in.
        let mut b = Adapter::new(Config::new(4, S)).unwrap();
        assert_eq!(keep(&mut b, 0, 0, 0), Verdict::Keep);
        // A probe while panel 0, already mapped, is accessed: Panels_in 2,
        // one panel mapped.
        assert_eq!(keep(&mut b, 1, 0, S), Verdict::Probe);
        for t in 2..20 {
            b.panels_resident();
            assert_eq!(keep(&mut b, t, 0, S), Verdict::Keep, "t={t}");
        }
    }

    #[test]
    fn other_memory_the_program_frees_is_not_a_shortage() {
        let mut a = four_resident();
        // The program allocates 50 bytes between two accesses.
        a.set_other_memory(50).unwrap();
        assert_eq!(a.desired_rss(), 4 * S + 50);
        assert_eq!(a.last_rss(), Some(4 * S + 50));
        assert_eq!(keep(&mut a, 5, 1, 4 * S + 50), Verdict::Keep);
        // ... and frees them again: RSS drops, but not for want of memory.
        a.set_other_memory(0).unwrap();
        assert_eq!(keep(&mut a, 6, 2, 4 * S), Verdict::Keep);
        assert_eq!(a.panels_in(), 4);
        // The same drop without telling the adapter is a shortage.
        assert!(matches!(
            keep(&mut a, 7, 3, 4 * S - 50),
            Verdict::Shortage { drop: 50, .. }
        ));
        assert_eq!(
            a.set_other_memory(u64::MAX),
            Err(Error::TooLarge {
                panels: 4,
                panel_size: S,
                other_memory: u64::MAX
            })
        );
        assert_eq!(a.other_memory(), 0, "a refused change changes nothing");
    }

    #[test]
    fn misuse_is_an_error_with_context() {
        assert_eq!(
            Adapter::new(Config::new(0, S)).unwrap_err(),
            Error::NoPanels
        );
        assert_eq!(
            Adapter::new(Config::new(3, 0)).unwrap_err(),
            Error::ZeroPanelSize { panels: 3 }
        );
        for initial in [0, 4] {
            let err = Adapter::new(Config {
                initial_panels: initial,
                ..Config::new(3, S)
            })
            .unwrap_err();
            assert_eq!(err, Error::InitialPanels { initial, panels: 3 });
        }
        assert!(matches!(
            Adapter::new(Config::new(usize::MAX, u64::MAX)).unwrap_err(),
            Error::TooLarge { .. }
        ));

        let mut a = Adapter::new(Config::new(3, S)).unwrap();
        assert_eq!(a.settle(0), Err(Error::NothingToSettle));
        let err = a.access(secs(0), 3, 0).unwrap_err();
        assert_eq!(
            err,
            Error::PanelOutOfRange {
                panel: 3,
                panels: 3
            }
        );
        assert_eq!(
            err.to_string(),
            "panel 3 does not exist: the data set has panels 0..3"
        );
        assert_eq!(
            a.set_priority(7, 1),
            Err(Error::PanelOutOfRange {
                panel: 7,
                panels: 3
            })
        );
        let _ = a.access(secs(5), 0, 0).unwrap();
        assert_eq!(a.access(secs(6), 1, 0), Err(Error::Unsettled { panel: 0 }));
        a.settle(0).unwrap();
        assert_eq!(
            a.access(secs(4), 1, 0),
            Err(Error::TimeWentBack {
                now: secs(4),
                previous: secs(5)
            })
        );
        assert_eq!(a.stats().accesses, 1, "refused accesses are not counted");
    }
}
