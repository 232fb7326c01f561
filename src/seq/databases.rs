//! Each database's cached sections, counted and linked: what `seq_status()` reports and what
//! `retire_database()` retires take what one database has, not a scan of the whole cache.
//!
//! A table of databases (open addressing by OID, twice as many entries as sections, so it is
//! never full: a database has an entry only while it has a section), each with its count of
//! sections ready and being loaded and the first of its sections; the sections of a database are
//! linked through `links` (one per section, by way). A section that is not free is in its
//! database's list. Written under the sections' exclusive lock only; read under the shared lock.

use std::sync::atomic::{AtomicU32, Ordering};

use super::mix::splitmix64;
use crate::settings;
use crate::shmem::SharedBytes;

/// The table of databases and the links: the region `pg_idgen section databases`, zeroed (every
/// entry free; a link's values matter only while its section is in a list).
pub static DATABASES: SharedBytes = SharedBytes::new(c"pg_idgen section databases", || size(count()));

/// The sections of the cache, `pg_idgen.seq_cache_sections`.
fn count() -> usize {
    settings::config().segments.seq_cache_sections
}

/// What a section's state counts as in its database's entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Counted {
    Ready,
    Loading,
    /// Free or dropped: not counted.
    Neither,
}

/// No section (the end of a list).
const NONE: u32 = u32::MAX;

#[repr(C)]
struct Entry {
    /// The database's OID; 0: a free entry.
    database: AtomicU32,
    ready: AtomicU32,
    loading: AtomicU32,
    /// The database's first section (a way), NONE when it has none.
    first: AtomicU32,
}

/// A section's neighbours in its database's list.
#[repr(C)]
struct Link {
    previous: AtomicU32,
    next: AtomicU32,
}

/// Entries of the table of databases, for `count` sections.
fn capacity(count: usize) -> usize {
    2 * count.max(1)
}

/// Bytes the table and the links take, for `count` sections.
fn size(count: usize) -> usize {
    capacity(count) * std::mem::size_of::<Entry>() + count * std::mem::size_of::<Link>()
}

/// The table and the links, in shared memory or (in tests) anywhere.
struct Table<'a> {
    entries: &'a [Entry],
    links: &'a [Link],
}

impl Table<'static> {
    fn shared() -> Table<'static> {
        let count = count();
        // SAFETY: the region holds `size(count)` bytes, zeroed: every entry free, then one link per
        // section (its values matter only while the section is in a list).
        unsafe {
            let entries = std::slice::from_raw_parts(DATABASES.start().cast::<Entry>(), capacity(count));
            let links = std::slice::from_raw_parts(entries.as_ptr_range().end.cast::<Link>(), count);
            Table { entries, links }
        }
    }
}

impl<'a> Table<'a> {
    fn home(&self, database: u32) -> usize {
        splitmix64(u64::from(database)) as usize % self.entries.len()
    }

    /// Where `database`'s entry is, or the free entry where it would go (linear probing).
    fn slot(&self, database: u32) -> usize {
        let mut at = self.home(database);
        loop {
            let held = self.entries[at].database.load(Ordering::Relaxed);
            if held == database || held == 0 {
                return at;
            }
            at = (at + 1) % self.entries.len();
        }
    }

    fn entry(&self, database: u32) -> Option<&'a Entry> {
        let entry = &self.entries[self.slot(database)];
        (entry.database.load(Ordering::Relaxed) == database).then_some(entry)
    }

    fn join(&self, way: usize, database: u32, state: Counted) {
        let entry = &self.entries[self.slot(database)];
        if entry.database.load(Ordering::Relaxed) == 0 {
            entry.first.store(NONE, Ordering::Relaxed);
            entry.database.store(database, Ordering::Relaxed);
        }
        let first = entry.first.load(Ordering::Relaxed);
        self.links[way].previous.store(NONE, Ordering::Relaxed);
        self.links[way].next.store(first, Ordering::Relaxed);
        if first != NONE {
            self.links[first as usize].previous.store(way as u32, Ordering::Relaxed);
        }
        entry.first.store(way as u32, Ordering::Relaxed);
        if let Some(count) = counter(entry, state) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn leave(&self, way: usize, database: u32, state: Counted) {
        let Some(entry) = self.entry(database) else { return };
        let (previous, next) = (self.links[way].previous.load(Ordering::Relaxed), self.links[way].next.load(Ordering::Relaxed));
        match previous {
            NONE => entry.first.store(next, Ordering::Relaxed),
            previous => self.links[previous as usize].next.store(next, Ordering::Relaxed),
        }
        if next != NONE {
            self.links[next as usize].previous.store(previous, Ordering::Relaxed);
        }
        if let Some(count) = counter(entry, state) {
            count.fetch_sub(1, Ordering::Relaxed);
        }
        if entry.first.load(Ordering::Relaxed) == NONE {
            self.free(self.slot(database));
        }
    }

    /// Frees entry `at`, moving back the entries after it that probing would no longer reach
    /// (deletion in linear probing, without tombstones).
    fn free(&self, mut at: usize) {
        let (entries, len) = (self.entries, self.entries.len());
        let mut next = at;
        loop {
            next = (next + 1) % len;
            let database = entries[next].database.load(Ordering::Relaxed);
            if database == 0 {
                break;
            }
            let home = self.home(database);
            // The entry at `next` stays if its home lies cyclically in (at, next].
            let stays = if at <= next { at < home && home <= next } else { at < home || home <= next };
            if stays {
                continue;
            }
            let (to, from) = (&entries[at], &entries[next]);
            for (to, from) in [(&to.database, &from.database), (&to.ready, &from.ready), (&to.loading, &from.loading), (&to.first, &from.first)] {
                to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            at = next;
        }
        for field in [&entries[at].database, &entries[at].ready, &entries[at].loading] {
            field.store(0, Ordering::Relaxed);
        }
        entries[at].first.store(NONE, Ordering::Relaxed);
    }

    fn sections_of(&self, database: u32) -> Vec<usize> {
        let Some(entry) = self.entry(database) else { return Vec::new() };
        let mut ways = Vec::new();
        let mut way = entry.first.load(Ordering::Relaxed);
        while way != NONE {
            ways.push(way as usize);
            way = self.links[way as usize].next.load(Ordering::Relaxed);
        }
        ways
    }
}

/// The count of `state` in an entry.
fn counter(entry: &Entry, state: Counted) -> Option<&AtomicU32> {
    match state {
        Counted::Ready => Some(&entry.ready),
        Counted::Loading => Some(&entry.loading),
        Counted::Neither => None,
    }
}

/// Adds section `way`, in `state`, to `database`'s list.
pub(super) fn join(way: usize, database: u32, state: Counted) {
    Table::shared().join(way, database, state);
}

/// Takes section `way`, in `state`, out of `database`'s list; an entry left without sections is
/// freed.
pub(super) fn leave(way: usize, database: u32, state: Counted) {
    Table::shared().leave(way, database, state);
}

/// A section of `database` changed state (it stays in the list).
pub(super) fn moved(database: u32, from: Counted, to: Counted) {
    let Some(entry) = Table::shared().entry(database) else { return };
    if let Some(count) = counter(entry, from) {
        count.fetch_sub(1, Ordering::Relaxed);
    }
    if let Some(count) = counter(entry, to) {
        count.fetch_add(1, Ordering::Relaxed);
    }
}

/// The ways of `database`'s sections (a copy: the caller may take them out of the list).
pub(super) fn sections_of(database: u32) -> Vec<usize> {
    Table::shared().sections_of(database)
}

/// `database`'s sections ready and being loaded.
pub(super) fn counts(database: u32) -> (u32, u32) {
    Table::shared().entry(database).map_or((0, 0), |entry| (entry.ready.load(Ordering::Relaxed), entry.loading.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::{capacity, Counted, Entry, Link, Table};
    use std::sync::atomic::AtomicU32;

    /// Claim: sections join and leave the lists of many databases (several sharing a probe run, at
    /// the table's end too) in any order, and each database's list and counts are always exactly
    /// its sections: every entry freed when its last section left is reused, and the databases
    /// after it are still found.
    #[test]
    fn lists_and_counts_follow_every_join_and_leave() {
        let sections = 64;
        let new_entry = || Entry { database: AtomicU32::new(0), ready: AtomicU32::new(0), loading: AtomicU32::new(0), first: AtomicU32::new(0) };
        let entries: Vec<Entry> = (0..capacity(sections)).map(|_| new_entry()).collect();
        let links: Vec<Link> = (0..sections).map(|_| Link { previous: AtomicU32::new(0), next: AtomicU32::new(0) }).collect();
        let table = Table { entries: &entries, links: &links };
        // Which database and state each way has (None: free), as the table should know it.
        let mut model: Vec<Option<(u32, Counted)>> = vec![None; sections];
        let mut random = 7u64;
        for step in 0..20_000 {
            random = super::splitmix64(random.wrapping_add(step));
            let way = (random % sections as u64) as usize;
            let database = 1 + (random >> 20) as u32 % 23;
            let state = if random >> 40 & 1 == 0 { Counted::Ready } else { Counted::Loading };
            match model[way] {
                Some((held, old_state)) => {
                    table.leave(way, held, old_state);
                    model[way] = None;
                }
                None => {
                    table.join(way, database, state);
                    model[way] = Some((database, state));
                }
            }
            for database in 1..=23 {
                let mut expected: Vec<usize> = (0..sections).filter(|&w| model[w].is_some_and(|(d, _)| d == database)).collect();
                let mut listed = table.sections_of(database);
                listed.sort();
                expected.sort();
                assert_eq!(listed, expected, "step {step}: database {database}'s list");
                let count = |s| model.iter().filter(|m| **m == Some((database, s))).count() as u32;
                let counts = table
                    .entry(database)
                    .map_or((0, 0), |e| (e.ready.load(std::sync::atomic::Ordering::Relaxed), e.loading.load(std::sync::atomic::Ordering::Relaxed)));
                assert_eq!(counts, (count(Counted::Ready), count(Counted::Loading)), "step {step}: database {database}'s counts");
                assert_eq!(table.entry(database).is_some(), !expected.is_empty(), "step {step}: database {database} has an entry");
            }
        }
    }
}
