//! The section cache in shared memory: sections and their counter lines, the sets they live in,
//! taking and retiring them, and where every part of the cache's memory lies. The protocol is
//! stated once, in `seq` (mod.rs).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

use pgrx::pg_sys;

use super::databases::{self, Counted};
use super::mix::splitmix64;
use super::wanted;
use crate::seqlock::Seqlock;
use crate::shmem::{self, SharedBytes};
use crate::tables::MAX_NAME_LEN;
use crate::worker::{self, Backoff};
use crate::{clock, settings};

/// The most keys a section holds.
pub const MAX_SECTION_KEYS: usize = 256;
/// Keys a counter line holds, beside the line's copy of the seqlock and of the prefetch point.
pub(super) const LINE_KEYS: usize = 6;
/// Counter lines a section has.
const LINES: usize = MAX_SECTION_KEYS.div_ceil(LINE_KEYS);
/// Sections a section may be cached in: its set (a set-associative cache, as CPUs have).
const WAYS: usize = 8;
/// Retire epochs: a database's is `epochs[database % EPOCHS]`.
const EPOCHS: usize = 64;

pub(super) const FREE: u32 = 0;
/// Taken for a section whose persisted maximum the worker has not loaded yet: calls wait.
pub(super) const LOADING: u32 = 1;
pub(super) const READY: u32 = 2;
/// The worker found no space for it (dropped meanwhile): calls get 42704.
pub(super) const DROPPED: u32 = 3;

/// What a state counts as in the lists of each database's sections.
fn counted(state: u32) -> Counted {
    match state {
        READY => Counted::Ready,
        LOADING => Counted::Loading,
        _ => Counted::Neither,
    }
}

/// Which section a cache entry holds. Why the space's hash (of its name, and of a keyed space's
/// secret: `TextKeys::space_hash`) and the section size besides the id: ids can be given again (an
/// extension created anew starts them from 1; a table owner can insert one), and a backend that
/// still knows a space by an older row maps keys to sections its own way (its text keys with the
/// old secret): it must never find the sections of another space, or of another definition.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SectionId {
    pub database: u32,
    pub space_id: u32,
    pub section_keys: u32,
    pub space_hash: u64,
    pub section: i64,
}

/// A 64-byte line of a section's counters, with what a call needs besides its counter: a call
/// that knows its section's way and version (from the backend's `recent` map) reads this one line
/// of shared memory, no other.
#[repr(C, align(64))]
pub struct Line {
    /// The section's `version` as of the last change of what the section holds that went through
    /// its lines (`Section::change`): a call's closing seqlock read.
    pub(super) stamp: AtomicU64,
    /// The section's `raise_at`: a number at most this is below `limit`, and needs no raise yet.
    pub(super) raise_at: AtomicI64,
    /// The last number taken for each key of the line (one past `limit` while a call waits).
    pub(super) keys: [AtomicI64; LINE_KEYS],
}

/// One section of a space in shared memory: its identity, its durable limit and the worker's
/// bookkeeping in the first lines, then each key's counter in the lines after.
#[repr(C, align(64))]
pub struct Section {
    /// Odd while the section changes what it holds (taken, loaded, retired); even otherwise.
    pub(super) version: Seqlock,
    pub(super) state: AtomicU32,
    pub(super) database: AtomicU32,
    pub(super) space_id: AtomicU32,
    pub(super) section_keys: AtomicU32,
    pub(super) space_hash: AtomicU64,
    pub(super) section: AtomicI64,
    /// Every number up to `limit` is below the section's persisted `max_seq`: calls hand them out.
    pub(super) limit: AtomicI64,
    /// A number above this asks the worker to raise the section (prefetch). Each line has a copy.
    pub(super) raise_at: AtomicI64,
    /// The use clock (`Header::use_clock`) when a call last used the section: least recently used
    /// goes first.
    pub(super) last_used: AtomicU64,
    /// The persisted `max_seq` when the section was loaded: where its keys started.
    pub(super) base: AtomicI64,
    /// The last raise, and when it was published (monotonic ms): a raise used up fast doubles.
    pub(super) raise: AtomicI64,
    pub(super) raised_at_ms: AtomicI64,
    /// The pause of the section's failing raises.
    pub(super) backoff: Backoff,
    /// The space's name, for the worker (which raises the row of this name, id and size only).
    pub(super) space_len: AtomicU32,
    pub(super) space: [AtomicU8; MAX_NAME_LEN],
    /// A raise is wanted (prefetch reached, or a call waits); `wanted` has the section's mark.
    pub(super) want_raise: AtomicBool,
    /// With a segment authority: the generation of the section's lease (0: none), and when the
    /// lease ends on this server (monotonic ms); calls hand out no number after that. Written by
    /// the worker's publish; calls read the end.
    pub(super) lease_generation: AtomicU32,
    pub(super) lease_until_ms: AtomicI64,
    pub(super) lines: [Line; LINES],
}

impl Section {
    /// What the section holds and its state, if it is not changing, with the version it was read
    /// under (a seqlock read).
    #[inline]
    pub(super) fn read_id(&self) -> Option<(SectionId, u32, u64)> {
        let read = || {
            let state = self.state.load(Ordering::Relaxed);
            let id = SectionId {
                database: self.database.load(Ordering::Relaxed),
                space_id: self.space_id.load(Ordering::Relaxed),
                section_keys: self.section_keys.load(Ordering::Relaxed),
                space_hash: self.space_hash.load(Ordering::Relaxed),
                section: self.section.load(Ordering::Relaxed),
            };
            (id, state)
        };
        self.version.read_with(read).filter(|((_, state), _)| *state != FREE).map(|((id, state), version)| (id, state, version))
    }

    /// The counter of the key at `index` in the section, and its line.
    #[inline]
    pub(super) fn counter(&self, index: usize) -> (&Line, &AtomicI64) {
        let line = &self.lines[index / LINE_KEYS];
        (line, &line.keys[index % LINE_KEYS])
    }

    /// Every key's counter.
    pub(super) fn keys(&self) -> impl Iterator<Item = &AtomicI64> {
        self.lines.iter().flat_map(|line| line.keys.iter())
    }

    /// Changes what the section is, between two version bumps (odd while changing), which every
    /// line's stamp follows. Under the exclusive lock.
    pub(super) fn change(&self, f: impl FnOnce()) {
        self.version.change_mirrored(self.lines.iter().map(|line| &line.stamp), f);
    }

    /// Changes the section's header only (retiring it: 40 lines fewer to write): its lines keep
    /// their stamps, so a call that knew the section by way and version could still use them — the
    /// database's retire epoch, moved on after this, sends such calls to the header instead. Under
    /// the exclusive lock.
    fn change_header(&self, f: impl FnOnce()) {
        self.version.change(f);
    }

    /// The space's name as the section was taken for it.
    pub(super) fn space(&self) -> Vec<u8> {
        let len = (self.space_len.load(Ordering::Acquire) as usize).min(MAX_NAME_LEN);
        self.space[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    /// Sets the prefetch point, in the header and in every line. After `limit`: a call that finds
    /// its number at most a line's copy finds it below a limit already published.
    pub(super) fn set_raise_at(&self, raise_at: i64) {
        self.raise_at.store(raise_at, Ordering::Release);
        for line in &self.lines {
            line.raise_at.store(raise_at, Ordering::Release);
        }
    }

    /// Records that a call used the section now (a write only when the use clock moved on).
    #[inline]
    pub(super) fn touch(&self, now: u64) {
        if self.last_used.load(Ordering::Relaxed) != now {
            self.last_used.store(now, Ordering::Relaxed);
        }
    }

    /// Marks the section as to be loaded by the worker (in `change`).
    fn load(&self, way: usize) {
        self.limit.store(-1, Ordering::Relaxed);
        self.set_raise_at(-1);
        self.raise.store(0, Ordering::Relaxed);
        // While LOADING, `raised_at_ms` is when the section was taken (see `find_or_take`).
        self.raised_at_ms.store(clock::monotonic_millis(), Ordering::Relaxed);
        self.backoff.reset();
        self.lease_generation.store(0, Ordering::Relaxed);
        self.lease_until_ms.store(0, Ordering::Relaxed);
        self.state.store(LOADING, Ordering::Release);
        self.want_raise.store(true, Ordering::Release);
        wanted::mark(way);
    }
}

/// The counters of the whole cache, before the sections.
#[repr(C, align(64))]
pub struct Header {
    /// Moves on at every take and once a second (the worker): the clock of `last_used`.
    pub(super) use_clock: AtomicU64,
    pub(super) loads: AtomicU64,
    pub(super) raises: AtomicU64,
    pub(super) evictions: AtomicU64,
    pub(super) waits: AtomicU64,
    /// Moved on by every retire of a database whose OID is its index modulo `EPOCHS`, after the
    /// database's sections were retired: a backend's `recent` map of sections is valid only with
    /// the epoch it was filled under. On lines of their own: read by every call.
    epochs: [shmem::CacheLine<AtomicU64>; EPOCHS],
}

/// Where each part of the cache lies in its region, in bytes from its start: the header, the
/// sections, their tags.
struct Layout {
    sections: usize,
    tags: usize,
    size: usize,
}

impl Layout {
    fn of(count: usize) -> Layout {
        let mut at = 0;
        let mut place = |bytes: usize| {
            let start = at;
            at = (at + bytes).next_multiple_of(64);
            start
        };
        place(std::mem::size_of::<Header>());
        let sections = place(count * std::mem::size_of::<Section>());
        let (sets, columns) = shape(count);
        let tags = place(sets * columns * std::mem::size_of::<AtomicU64>());
        Layout { sections, tags, size: at }
    }
}

/// The section cache: the region `pg_idgen sections`, laid out by `Layout`, all of it valid when
/// zeroed (every section free, every counter 0), with the LWLock that guards taking, evicting,
/// loading and retiring sections. Beside it, regions of its own each: the lists of each
/// database's sections (`databases`), the marks of the sections that want a raise (`wanted`), each
/// process's count of numbers handed out (`served`).
pub static CACHE: SharedBytes = SharedBytes::with_lock(c"pg_idgen sections", || Layout::of(count()).size);

/// The layout and where the cache starts. Found once per process (the hot path asks on every
/// call); never in the postmaster, whose region moves with every crash-restart.
#[inline]
fn layout() -> &'static (Layout, usize) {
    static LAYOUT: std::sync::OnceLock<(Layout, usize)> = std::sync::OnceLock::new();
    LAYOUT.get_or_init(|| (Layout::of(count()), CACHE.start() as usize))
}

/// A part of the cache's region (zeroed with the shared memory), `offset` bytes from its start.
fn part<T>(offset: impl FnOnce(&Layout) -> usize) -> *const T {
    let (layout, start) = layout();
    (start + offset(layout)) as *const T
}

pub(super) fn header() -> &'static Header {
    // SAFETY: the cache's region starts with the header (zeroed with the shared memory).
    unsafe { &*part::<Header>(|_| 0) }
}

/// The retire epoch of `database` (see `Header::epochs`).
pub(super) fn epoch_of(database: u32) -> &'static AtomicU64 {
    &header().epochs[database as usize % EPOCHS]
}

/// The number of cached sections, `pg_idgen.seq_cache_sections`.
pub(super) fn count() -> usize {
    settings::config().segments.seq_cache_sections
}

/// The cached sections. A new shared memory is zeroed (`shmem`): every section free, every
/// counter 0.
pub(super) fn sections() -> &'static [Section] {
    // SAFETY: the area holds `count()` sections there, zeroed before any process could attach
    // (all-zero is a free section).
    unsafe { std::slice::from_raw_parts(part::<Section>(|l| l.sections), count()) }
}

/// The cache's sets, and the most sections a set has. Why the sections of a set lie `sets` apart
/// (section `i` is in set `i % sets`): consecutive sections of a space go to consecutive sets, and
/// so, in the same way of each, to consecutive places in memory: a dense run of keys takes as many
/// pages as its sections fill, not a section's worth of each set of a cache larger than it (the
/// processor's address translations, few, are what a call over many keys runs out of first).
fn shape(count: usize) -> (usize, usize) {
    let sets = (count / WAYS).max(1);
    (sets, count.div_ceil(sets))
}

/// Each section's tag (`tag_of` of what it holds, 0 when free), a set's side by side: a lookup
/// reads its set's tags (a cache line or two), then the one section whose tag matches. A tag is a
/// hint: the section's own identity, read under its seqlock, decides; tags change under the
/// exclusive lock.
fn tags() -> &'static [AtomicU64] {
    let (sets, columns) = shape(count());
    // SAFETY: `sets * columns` tags there, zeroed with the shared memory (0: no section).
    unsafe { std::slice::from_raw_parts(part::<AtomicU64>(|l| l.tags), sets * columns) }
}

/// Where section `way`'s tag is.
fn tag_of_way(way: usize) -> &'static AtomicU64 {
    let (sets, columns) = shape(count());
    &tags()[way % sets * columns + way / sets]
}

/// A section's tag: never 0.
fn tag_of(id: SectionId) -> u64 {
    splitmix64(
        (u64::from(id.database) << 32 | u64::from(id.space_id))
            ^ id.space_hash.rotate_left(17)
            ^ u64::from(id.section_keys)
            ^ (id.section as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    ) | 1
}

/// The sections section `id` may live in (its set), each with its tag.
#[inline]
fn set_of(id: SectionId) -> impl Iterator<Item = (usize, &'static AtomicU64)> {
    let count = count();
    let (sets, columns) = shape(count);
    let set = set_index(id, sets);
    let tags = &tags()[set * columns..(set + 1) * columns];
    tags.iter().enumerate().map(move |(column, tag)| (column * sets + set, tag)).take_while(move |&(way, _)| way < count)
}

/// Which of `sets` sets section `id` lives in. A run of `sets` consecutive sections of a space
/// goes to every set once, from a set that a hash of database, space and run picks: a space's keys
/// 0 to n then fit in n / section_keys cached sections, as the setting promises. Why not a hash of
/// each section (CPUs do not index their caches by one either): dense keys would overfill some
/// sets, and every pass over the keys would evict there. Sections far apart (text keys, a stride
/// of `sets`) still land on sets at random.
fn set_index(id: SectionId, sets: usize) -> usize {
    let sets = sets as i64;
    let (run, place) = (id.section.div_euclid(sets), id.section.rem_euclid(sets));
    let start = splitmix64(
        (u64::from(id.database) << 32 | u64::from(id.space_id))
            ^ id.space_hash
            ^ u64::from(id.section_keys)
            ^ (run as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    ) % sets as u64;
    // start + place < 2 × sets: a subtraction where a second modulo would divide.
    let set = start + place as u64;
    (if set >= sets as u64 { set - sets as u64 } else { set }) as usize
}

/// FNV-1a 64 of the bytes, then SplitMix64's finaliser (FNV alone leaves neighbouring texts'
/// high bits alike): text keys (`seq_key`) and space names. Fixed forever: text keys are persisted
/// as the sections they map to.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    splitmix64(h)
}

/// A section found: its way (index in the cache), its state and the version it was found under.
#[derive(Clone, Copy)]
pub(super) struct Found {
    pub way: usize,
    pub state: u32,
    pub version: u64,
}

impl Found {
    pub(super) fn section(self) -> &'static Section {
        &sections()[self.way]
    }
}

/// The cached section `id`, lock-free.
#[inline]
pub(super) fn find(id: SectionId) -> Option<Found> {
    let (all, tag) = (sections(), tag_of(id));
    set_of(id).filter(|(_, t)| t.load(Ordering::Relaxed) == tag).find_map(|(way, _)| match all[way].read_id() {
        Some((held, state, version)) if held == id => Some(Found { way, state, version }),
        _ => None,
    })
}

/// Finds section `id`, or takes the least recently used section of its set for it (LOADING: the
/// worker is to load it). None when every section of the set is being loaded, and none for
/// longer than `pg_idgen.segment_wait_timeout`: evicting one of those would only make its caller
/// take another, and calls could chase each other out of the set without end (the caller waits
/// for a load to end instead). A load that lasted longer than its callers wait (its database's
/// worker cannot start, its row stays locked) may be evicted: it must not hold a way of the cache
/// for good.
pub(super) fn find_or_take(id: SectionId, space: &[u8]) -> Option<Found> {
    let _lock = CACHE.exclusive();
    if let Some(found) = find(id) {
        return Some(found);
    }
    let header = header();
    let now = header.use_clock.fetch_add(1, Ordering::Relaxed) + 1;
    // A free or dropped section first, then the least recently used.
    let stale_ms = clock::monotonic_millis() - settings::config().segments.wait_timeout_ms as i64;
    let all = sections();
    let way = set_of(id)
        .map(|(way, _)| way)
        .filter(|&i| all[i].state.load(Ordering::Acquire) != LOADING || all[i].raised_at_ms.load(Ordering::Relaxed) < stale_ms)
        .min_by_key(|&i| match all[i].state.load(Ordering::Acquire) {
            FREE | DROPPED => (0, 0),
            READY => (1, all[i].last_used.load(Ordering::Relaxed)),
            _ => (2, all[i].last_used.load(Ordering::Relaxed)),
        })?;
    let victim = &all[way];
    let old_state = victim.state.load(Ordering::Acquire);
    if old_state == READY {
        header.evictions.fetch_add(1, Ordering::Relaxed);
    }
    if old_state != FREE {
        databases::leave(way, victim.database.load(Ordering::Relaxed), counted(old_state));
    }
    victim.change(|| {
        victim.database.store(id.database, Ordering::Relaxed);
        victim.space_id.store(id.space_id, Ordering::Relaxed);
        victim.section_keys.store(id.section_keys, Ordering::Relaxed);
        victim.space_hash.store(id.space_hash, Ordering::Relaxed);
        victim.section.store(id.section, Ordering::Relaxed);
        for (cell, &byte) in victim.space.iter().zip(space) {
            cell.store(byte, Ordering::Relaxed);
        }
        victim.space_len.store(space.len().min(MAX_NAME_LEN) as u32, Ordering::Relaxed);
        victim.last_used.store(now, Ordering::Relaxed);
        tag_of_way(way).store(tag_of(id), Ordering::Relaxed);
        victim.load(way);
    });
    databases::join(way, id.database, Counted::Loading);
    Some(Found { way, state: LOADING, version: victim.version.read() })
}

/// Takes a section the worker found no space for (DROPPED) again for `id`: the space may have
/// been committed since. Returns the section holding `id`, or None as `find_or_take`.
pub(super) fn retake(found: Found, id: SectionId, space: &[u8]) -> Option<Found> {
    {
        let _lock = CACHE.exclusive();
        let section = found.section();
        if section.version.read() == found.version && section.state.load(Ordering::Acquire) == DROPPED {
            section.change(|| section.load(found.way));
            databases::moved(id.database, Counted::Neither, Counted::Loading);
            return Some(Found { way: found.way, state: LOADING, version: section.version.read() });
        }
    }
    find_or_take(id, space)
}

/// Changes a section's state (publishing a load, or finding its space gone), under the exclusive
/// lock: the section's database counts it under its new state.
pub(super) fn set_state(section: &Section, state: u32) {
    databases::moved(section.database.load(Ordering::Relaxed), counted(section.state.load(Ordering::Relaxed)), counted(state));
    section.state.store(state, Ordering::Release);
}

/// Retires one section (its lease went to another server, ran out, or was given up): its next
/// call takes it again. Under the exclusive lock; the database's retire epoch moves on, so that
/// no backend uses the section by what it remembered.
pub(super) fn retire_section(way: usize) {
    let section = &sections()[way];
    let state = section.state.load(Ordering::Relaxed);
    if state == FREE {
        return;
    }
    let database = section.database.load(Ordering::Relaxed);
    databases::leave(way, database, counted(state));
    section.change_header(|| {
        tag_of_way(way).store(0, Ordering::Relaxed);
        section.state.store(FREE, Ordering::Release);
    });
    epoch_of(database).fetch_add(1, Ordering::AcqRel);
}

/// Retires every cached section of a database: its next call loads it again, from the table.
/// Called when rows of the space or section tables change or go, the tables are dropped, or the
/// database is dropped or created. Takes what the database has cached, not the whole cache.
pub fn retire_database(database: pg_sys::Oid) {
    if !shmem::is_attached() {
        return; // not preloaded: nothing is cached
    }
    let database = database.to_u32();
    {
        let _lock = CACHE.exclusive();
        let all = sections();
        for way in databases::sections_of(database) {
            let section = &all[way];
            databases::leave(way, database, counted(section.state.load(Ordering::Relaxed)));
            section.change_header(|| {
                tag_of_way(way).store(0, Ordering::Relaxed);
                section.state.store(FREE, Ordering::Release);
            });
        }
        // After the sections: a call that sees the new epoch finds none of them in its map, and
        // none ready in the cache.
        epoch_of(database).fetch_add(1, Ordering::AcqRel);
    }
    // SAFETY: the condition variable lives in shared memory.
    worker::notify_published();
}

#[cfg(test)]
mod tests {
    use super::{set_index, SectionId, WAYS};

    fn sections_per_set(sets: usize, sections: impl Iterator<Item = SectionId>) -> Vec<usize> {
        let mut counts = vec![0; sets];
        for id in sections {
            counts[set_index(id, sets)] += 1;
        }
        counts
    }

    fn section(space_id: u32, section: i64) -> SectionId {
        SectionId { database: 5, space_id, section_keys: 256, space_hash: super::hash_bytes(&space_id.to_le_bytes()), section }
    }

    /// Claim: the sections of a space's dense keys, as many as the cache holds, never put more than
    /// WAYS in a set, so none is evicted: for any number of sets, from either end of the keys, and
    /// for two spaces sharing the cache.
    #[test]
    fn a_space_of_dense_keys_fits_a_cache_of_its_sections() {
        for sets in [1, 7, 1000, 1024] {
            let full = (sets * WAYS) as i64;
            let counts = sections_per_set(sets, (0..full).map(|s| section(1, s)));
            assert!(counts.iter().all(|&c| c == WAYS), "{sets} sets: {counts:?}");
            let counts = sections_per_set(sets, (-full..0).map(|s| section(1, s)));
            assert!(counts.iter().all(|&c| c == WAYS), "{sets} sets, negative keys: {counts:?}");
            let half = full / 2;
            let counts = sections_per_set(sets, (0..half).map(|s| section(1, s)).chain((0..half).map(|s| section(2, s))));
            assert!(counts.iter().all(|&c| c <= WAYS), "{sets} sets, two spaces: {counts:?}");
        }
    }

    /// Claim: sections a multiple of the set count apart do not all land in one set (the hash of
    /// the run spreads them).
    #[test]
    fn sections_a_set_count_apart_spread_over_the_sets() {
        let sets = 1024;
        let counts = sections_per_set(sets, (0..sets as i64).map(|run| section(1, run * sets as i64)));
        // Throwing 1,024 balls into 1,024 bins at random fills 1 - 1/e of them (647).
        let used = counts.iter().filter(|&&c| c > 0).count();
        assert!(used > 550, "{used} sets used of {sets}");
    }

    /// Claim: whatever the cache's size, every section belongs to exactly one set, every set has at
    /// least WAYS sections (or all of them, in a cache of fewer), each section's tag has a place of
    /// its own, and the sections of one way of consecutive sets are consecutive in memory.
    #[test]
    fn every_section_has_one_set_and_one_tag() {
        for count in [1, 7, 8, 15, 16, 17, 1000, 1024, 1031, 65536] {
            let (sets, columns) = super::shape(count);
            let mut set_of = vec![None; count];
            let mut tag_places = std::collections::HashSet::new();
            for set in 0..sets {
                let members: Vec<usize> = (0..columns).map(|c| c * sets + set).take_while(|&w| w < count).collect();
                assert!(members.len() >= WAYS.min(count), "{count} sections: set {set} has {}", members.len());
                for (column, &way) in members.iter().enumerate() {
                    assert_eq!(set_of[way].replace(set), None, "{count} sections: section {way} in two sets");
                    let place = way % sets * columns + way / sets;
                    assert_eq!(place, set * columns + column, "{count} sections: section {way}'s tag");
                    assert!(place < sets * columns && tag_places.insert(place));
                }
                if set + 1 < sets {
                    assert_eq!(members[0] + 1, set + 1, "way 0 of consecutive sets is consecutive");
                }
            }
            assert!(set_of.iter().all(Option::is_some), "{count} sections: each in a set");
        }
    }

    /// Claim: a cached section takes 2,944 bytes of shared memory, as docs/sequences.md says (a
    /// header of 192 bytes, then 43 lines of 6 counters, on 64-byte lines), and a key's counter
    /// shares its line with the line's stamp and prefetch point, whichever key it is.
    #[test]
    fn a_section_takes_the_memory_the_manual_says() {
        assert_eq!(std::mem::size_of::<super::Line>(), 64);
        assert_eq!(std::mem::size_of::<super::Section>(), 2944);
        assert_eq!(std::mem::align_of::<super::Section>(), 64);
        assert_eq!(std::mem::offset_of!(super::Section, lines), 192);
    }
}
