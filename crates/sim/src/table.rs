//! The simulator's jobs alive, by id, in an [`IdWindow`]: a job is found
//! by two array reads, as the core's state finds it, where a hash map
//! hashed and probed: a switch looks each of its jobs up about eight times.

use crate::window::{IdWindow, MAX_VALUE};
use memgang_core::JobId;
use std::ops::Index;

pub(crate) struct JobTable<T> {
    /// Each job's index in `items`: four bytes per id from the oldest job
    /// alive to the newest.
    slot_of: IdWindow,
    items: Vec<(JobId, T)>,
    /// The next id may not be below this one.
    next: u32,
}

impl<T> JobTable<T> {
    pub(crate) fn new() -> Self {
        JobTable {
            slot_of: IdWindow::default(),
            items: Vec::new(),
            next: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    fn slot(&self, id: JobId) -> Option<usize> {
        self.slot_of.get(id).map(|s| s as usize)
    }

    pub(crate) fn get(&self, id: &JobId) -> Option<&T> {
        self.slot(*id).map(|s| &self.items[s].1)
    }

    pub(crate) fn get_mut(&mut self, id: &JobId) -> Option<&mut T> {
        self.slot(*id).map(|s| &mut self.items[s].1)
    }

    /// Add `id`, which must be newer than every id inserted before (the ids
    /// skipped are never inserted: the window drops them).
    pub(crate) fn insert(&mut self, id: JobId, item: T) {
        assert!(id.0 >= self.next, "ids are inserted in increasing order");
        assert!(
            self.items.len() < MAX_VALUE as usize,
            "more jobs alive than ids"
        );
        self.next = id.0 + 1;
        self.slot_of.set(id, self.items.len() as u32, true);
        self.items.push((id, item));
    }

    pub(crate) fn remove(&mut self, id: &JobId) -> Option<T> {
        let s = self.slot(*id)?;
        let (_, item) = self.items.swap_remove(s);
        if let Some((moved, _)) = self.items.get(s) {
            self.slot_of.set(*moved, s as u32, true);
        }
        self.slot_of.retire(*id);
        Some(item)
    }
}

impl<T> Index<&JobId> for JobTable<T> {
    type Output = T;
    fn index(&self, id: &JobId) -> &T {
        self.get(id).expect("a live job")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn finds_what_a_map_finds() {
        let (mut table, mut map) = (JobTable::new(), BTreeMap::new());
        let mut next = 5u32;
        let mut x: u64 = 11;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (x >> 40) % 5 < 2 && !map.is_empty() {
                let keys: Vec<u32> = map.keys().copied().collect();
                let id = keys[(x >> 20) as usize % keys.len()];
                assert_eq!(table.remove(&JobId(id)), map.remove(&id));
            } else {
                next += 1 + (x >> 50) as u32 % 3;
                table.insert(JobId(next), next * 2);
                map.insert(next, next * 2);
            }
            assert_eq!(table.len(), map.len());
            for id in next.saturating_sub(40)..=next + 1 {
                assert_eq!(table.get(&JobId(id)), map.get(&id));
            }
        }
    }
}
