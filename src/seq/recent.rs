//! This backend's map of the sections it used: (space, section) to the way that holds it and the
//! version it was found ready under. A call that finds its section here reads one line of shared
//! memory, its key's counter line (which carries the section's stamp and prefetch point), instead
//! of a set's tags, a section's header and then the counter.
//!
//! An entry is a hint, checked by the call: the line's stamp must still be the version (every
//! change of what a section holds that goes through its lines moves it on, and versions never come
//! back), and the map must have been filled since the database's last retire (which changes only
//! the sections' headers: the map is emptied when the database's retire epoch moves). The space is
//! this backend's number for the space row it read (`next::cached_space`): a row read anew gets a
//! new number, so a dropped space's entries are never found for its successor.

use std::sync::atomic::{AtomicU64, Ordering};

use super::cache::{self, header, sections};
use super::served;

#[derive(Clone, Copy)]
struct Entry {
    section: i64,
    version: u64,
    way: u32,
    /// The space's number in this backend; 0: an empty entry.
    space: u32,
    /// The use clock when this backend last recorded a use of the section (its low bits).
    touched: u32,
}

const EMPTY: Entry = Entry { section: 0, version: 0, way: 0, space: 0, touched: 0 };
/// Entries at first, and at most (2 MiB): sections of dense keys take consecutive entries, so
/// this holds the sections of 16 million keys in use at once.
const FIRST: usize = 256;
const MOST: usize = 1 << 16;

/// The map, and what every call of this backend needs once found: its database's retire epoch
/// and its counter of numbers handed out.
pub(super) struct Recent {
    entries: Vec<Entry>,
    used: usize,
    /// The retire epoch the entries were found under.
    epoch: u64,
    shared: Option<Shared>,
}

#[derive(Clone, Copy)]
struct Shared {
    epoch: &'static AtomicU64,
    served: (&'static AtomicU64, bool),
}

impl Recent {
    pub(super) const fn new() -> Recent {
        Recent { entries: Vec::new(), used: 0, epoch: 0, shared: None }
    }

    /// Starts a call in `database`: empties the map if the database's sections were retired since
    /// it was filled. Returns this process's counter of numbers handed out.
    #[inline]
    pub(super) fn start_call(&mut self, database: u32) -> (&'static AtomicU64, bool) {
        let shared = *self.shared.get_or_insert_with(|| Shared { epoch: cache::epoch_of(database), served: served::own() });
        let epoch = shared.epoch.load(Ordering::Acquire);
        if epoch != self.epoch {
            self.entries.fill(EMPTY);
            self.used = 0;
            self.epoch = epoch;
        }
        shared.served
    }

    fn slot(&self, space: u32, section: i64) -> usize {
        // Consecutive sections of a space take consecutive entries.
        (section as u64).wrapping_add(u64::from(space).wrapping_mul(0x9E37_79B9_7F4A_7C15)) as usize & (self.entries.len() - 1)
    }

    /// The way and version of `section` of `space`, if this backend found it ready since the last
    /// retire; records the use for the cache's least-recently-used choice when the use clock moved.
    #[inline]
    pub(super) fn find(&mut self, space: u32, section: i64) -> Option<(usize, u64)> {
        if self.entries.is_empty() {
            return None;
        }
        let slot = self.slot(space, section);
        let entry = &mut self.entries[slot];
        if entry.space != space || entry.section != section {
            return None;
        }
        let now = header().use_clock.load(Ordering::Relaxed);
        if entry.touched != now as u32 {
            entry.touched = now as u32;
            sections()[entry.way as usize].last_used.store(now, Ordering::Relaxed);
        }
        Some((entry.way as usize, entry.version))
    }

    /// Records that `section` of `space` is ready in `way` under `version`.
    pub(super) fn remember(&mut self, space: u32, section: i64, way: usize, version: u64) {
        let most = (2 * cache::count()).next_power_of_two().clamp(FIRST, MOST);
        if self.entries.is_empty() || (2 * self.used > self.entries.len() && self.entries.len() < most) {
            self.grow(most);
        }
        let slot = self.slot(space, section);
        let entry = &mut self.entries[slot];
        self.used += usize::from(entry.space == 0);
        *entry = Entry { section, version, way: way as u32, space, touched: 0 };
    }

    /// Forgets `section` of `space` (a call found it changed since).
    pub(super) fn forget(&mut self, space: u32, section: i64) {
        if self.entries.is_empty() {
            return;
        }
        let slot = self.slot(space, section);
        let entry = &mut self.entries[slot];
        if entry.space == space && entry.section == section {
            *entry = EMPTY;
            self.used -= 1;
        }
    }

    /// Doubles the map (or makes it), keeping its entries.
    fn grow(&mut self, most: usize) {
        let len = if self.entries.is_empty() { FIRST.min(most) } else { (2 * self.entries.len()).min(most) };
        let old = std::mem::replace(&mut self.entries, vec![EMPTY; len]);
        self.used = 0;
        for entry in old.into_iter().filter(|e| e.space != 0) {
            let slot = self.slot(entry.space, entry.section);
            self.used += usize::from(self.entries[slot].space == 0);
            self.entries[slot] = entry;
        }
    }
}
