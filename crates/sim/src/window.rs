//! A value per job id over a window of ids, from the oldest id not retired
//! to the newest given a value. Ids are dense and handed out in submission
//! order, so the window grows with the spread of the ids of the jobs
//! alive, as the core's state does, not with the trace, and a lookup is
//! two array reads where a hash map hashed and probed. The engine's job
//! table and the finish queue's heap places are both kept in one.

use memgang_core::JobId;
use std::collections::VecDeque;

/// An id in the window with no value (yet, or any more).
const VACANT: u32 = u32::MAX;
/// An id that will have no value again: the window is cut at these.
const RETIRED: u32 = u32::MAX - 1;

/// The largest value the window holds.
pub(crate) const MAX_VALUE: u32 = RETIRED - 1;

#[derive(Default)]
pub(crate) struct IdWindow {
    base: u32,
    at: VecDeque<u32>,
}

impl IdWindow {
    pub(crate) fn get(&self, id: JobId) -> Option<u32> {
        let k = id.0.checked_sub(self.base)?;
        self.at.get(k as usize).copied().filter(|v| *v <= MAX_VALUE)
    }

    /// Give `id` the value `v` (at most [`MAX_VALUE`]); the window grows to
    /// it if need be, the ids it spans anew vacant (`gaps_retired`: retired,
    /// for a caller whose ids come in order and never go back to a gap).
    pub(crate) fn set(&mut self, id: JobId, v: u32, gaps_retired: bool) {
        debug_assert!(v <= MAX_VALUE);
        *self.slot(id, if gaps_retired { RETIRED } else { VACANT }) = v;
    }

    /// `id`'s place in the window, which grows to it, filling with `fill`.
    fn slot(&mut self, id: JobId, fill: u32) -> &mut u32 {
        if self.at.is_empty() {
            self.base = id.0;
        }
        while id.0 < self.base {
            self.at.push_front(fill);
            self.base -= 1;
        }
        let i = (id.0 - self.base) as usize;
        if i >= self.at.len() {
            self.at.resize(i + 1, fill);
        }
        &mut self.at[i]
    }

    /// Forget `id`'s value; returns it.
    pub(crate) fn take(&mut self, id: JobId) -> Option<u32> {
        let v = self.get(id)?;
        self.at[(id.0 - self.base) as usize] = VACANT;
        Some(v)
    }

    /// `id` will have no value again: the window drops it once no older id
    /// is left. An id outside the window is recorded too (the window grows
    /// to it), or the vacant place it would later get would hold the
    /// window's start for good.
    pub(crate) fn retire(&mut self, id: JobId) {
        if id.0 < self.base && !self.at.is_empty() {
            // Older than the window: retired already.
            return;
        }
        *self.slot(id, VACANT) = RETIRED;
        while self.at.front() == Some(&RETIRED) {
            self.at.pop_front();
            self.base += 1;
        }
    }

    #[cfg(test)]
    pub(crate) fn span(&self) -> usize {
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_cut_only_at_retired_ids() {
        let mut w = IdWindow::default();
        w.set(JobId(10), 1, false);
        w.set(JobId(13), 2, false);
        assert_eq!(
            (w.get(JobId(10)), w.get(JobId(11)), w.get(JobId(13))),
            (Some(1), None, Some(2))
        );
        // 10 leaves its place but is alive: the window keeps it.
        assert_eq!(w.take(JobId(10)), Some(1));
        w.retire(JobId(12));
        assert_eq!(w.span(), 4);
        // 10 and 11 retire: the window starts at 13.
        w.retire(JobId(10));
        w.retire(JobId(11));
        assert_eq!(w.span(), 1);
        assert_eq!(w.get(JobId(13)), Some(2));
        // An older id grows the window back.
        w.set(JobId(9), 3, false);
        assert_eq!((w.get(JobId(9)), w.span()), (Some(3), 5));
    }

    #[test]
    fn retired_gaps_do_not_hold_the_window() {
        let mut w = IdWindow::default();
        w.set(JobId(1), 0, true);
        w.set(JobId(5), 1, true);
        w.retire(JobId(1));
        assert_eq!(w.span(), 1, "2..4 were never given a value");
    }
}
