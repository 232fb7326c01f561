//! The section cache in shared memory: sections, the sets they live in, taking and retiring them.
//! The protocol is stated once, in `seq` (mod.rs).

use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

use pgrx::pg_sys;

use crate::{clock, settings, shmem};

/// The most keys a section holds: its counters take 2 KiB.
pub const MAX_SECTION_KEYS: usize = 256;
/// Sections a section may be cached in: its set (a set-associative cache, as CPUs have).
const WAYS: usize = 8;

pub(super) const FREE: u32 = 0;
/// Taken for a section whose persisted maximum the worker has not loaded yet: calls wait.
pub(super) const LOADING: u32 = 1;
pub(super) const READY: u32 = 2;
/// The worker found no space for it (dropped meanwhile): calls get 42704.
pub(super) const DROPPED: u32 = 3;

/// Space names are 1 to 63 bytes, as segment tags.
pub const MAX_SPACE_LEN: usize = 63;

/// Which section a cache entry holds. Why the name's hash and the section size besides the id:
/// ids can be given again (an extension created anew starts them from 1; a table owner can
/// insert one), and a backend that still knows a space by an older row maps keys to sections its
/// own way: it must never find the sections of another space, or of another definition.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SectionId {
    pub database: u32,
    pub space_id: u32,
    pub section_keys: u32,
    pub space_hash: u64,
    pub section: i64,
}

/// One section of a space in shared memory: its durable limit and each key's counter. Why this
/// order: what a call reads (the identity, `limit`, `raise_at`, `last_used`) fills the first
/// 64-byte line, so a call touches that line and its key's counter's, no more.
#[repr(C, align(64))]
pub struct Section {
    /// Odd while the section changes what it holds (taken, loaded, retired); even otherwise.
    pub(super) version: AtomicU64,
    pub(super) state: AtomicU32,
    pub(super) database: AtomicU32,
    pub(super) space_id: AtomicU32,
    pub(super) section_keys: AtomicU32,
    pub(super) space_hash: AtomicU64,
    pub(super) section: AtomicI64,
    /// Every number up to `limit` is below the section's persisted `max_seq`: calls hand them out.
    pub(super) limit: AtomicI64,
    /// A number above this asks the worker to raise the section (prefetch).
    pub(super) raise_at: AtomicI64,
    /// The use clock (`Header::use_clock`) when a call last used the section: least recently used
    /// goes first.
    pub(super) last_used: AtomicU64,
    /// A raise is wanted (prefetch reached, or a call waits).
    pub(super) want_raise: AtomicBool,
    /// The persisted `max_seq` when the section was loaded: where its keys started.
    pub(super) base: AtomicI64,
    /// The last raise, and when it was published (monotonic ms): a raise used up fast doubles.
    pub(super) raise: AtomicI64,
    pub(super) raised_at_ms: AtomicI64,
    /// Raises that failed in a row, when the worker may try again, when it last warned.
    pub(super) failures: AtomicU32,
    pub(super) retry_at_ms: AtomicI64,
    pub(super) warned_at_ms: AtomicI64,
    /// The space's name, for the worker (which raises the row of this name, id and size only).
    pub(super) space_len: AtomicU32,
    pub(super) space: [AtomicU8; MAX_SPACE_LEN],
    /// The last number taken for each key of the section (one past `limit` while a call waits).
    pub(super) keys: [AtomicI64; MAX_SECTION_KEYS],
}

impl Section {
    /// What the section holds, if it is not free and not changing, with the version it was read
    /// under (a seqlock read).
    #[inline]
    pub(super) fn read_id(&self) -> Option<(SectionId, u64)> {
        let version = self.version.load(Ordering::Acquire);
        if version & 1 == 1 || self.state.load(Ordering::Acquire) == FREE {
            return None;
        }
        let id = SectionId {
            database: self.database.load(Ordering::Relaxed),
            space_id: self.space_id.load(Ordering::Relaxed),
            section_keys: self.section_keys.load(Ordering::Relaxed),
            space_hash: self.space_hash.load(Ordering::Relaxed),
            section: self.section.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        (self.version.load(Ordering::Relaxed) == version).then_some((id, version))
    }

    /// Changes what the section is, between two version bumps (odd while changing). Under the
    /// exclusive lock.
    pub(super) fn change(&self, f: impl FnOnce()) {
        self.version.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::Release);
        f();
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The space's name as the section was taken for it.
    pub(super) fn space(&self) -> Vec<u8> {
        let len = (self.space_len.load(Ordering::Acquire) as usize).min(MAX_SPACE_LEN);
        self.space[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    /// Numbers handed out (or taken by waiting calls) since the section was loaded.
    pub(super) fn served(&self) -> u64 {
        if self.state.load(Ordering::Acquire) != READY {
            return 0;
        }
        let base = self.base.load(Ordering::Relaxed);
        self.keys
            .iter()
            .map(|k| k.load(Ordering::Relaxed).saturating_sub(base).max(0) as u64)
            .sum()
    }

    /// Marks the section as to be loaded by the worker (in `change`).
    fn load(&self) {
        self.limit.store(-1, Ordering::Relaxed);
        self.raise.store(0, Ordering::Relaxed);
        // While LOADING, `raised_at_ms` is when the section was taken (see `find_or_take`).
        self.raised_at_ms.store(clock::monotonic_millis(), Ordering::Relaxed);
        self.failures.store(0, Ordering::Relaxed);
        self.retry_at_ms.store(0, Ordering::Relaxed);
        self.want_raise.store(true, Ordering::Release);
        self.state.store(LOADING, Ordering::Release);
    }

    /// Records that a call used the section now (a write only when the use clock moved on).
    #[inline]
    pub(super) fn touch(&self, now: u64) {
        if self.last_used.load(Ordering::Relaxed) != now {
            self.last_used.store(now, Ordering::Relaxed);
        }
    }
}

/// The counters of the whole cache, before the sections.
#[repr(C, align(64))]
pub struct Header {
    /// Moves on at every take and every worker round: the clock of `last_used`.
    pub(super) use_clock: AtomicU64,
    pub(super) loads: AtomicU64,
    pub(super) raises: AtomicU64,
    pub(super) evictions: AtomicU64,
    pub(super) waits: AtomicU64,
    /// Numbers served by sections since evicted or retired.
    pub(super) served_before: AtomicU64,
}

/// Where the cache starts: after the segment slots, on a cache line. Found once per process (the
/// hot path asks on every call).
#[inline]
fn area() -> *mut u8 {
    static AREA: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *AREA.get_or_init(|| {
        let offset = crate::segment::slots_size().next_multiple_of(64);
        // SAFETY: the area holds the slots, then `cache_size()` bytes (see lib.rs).
        unsafe { shmem::area().add(offset) as usize }
    }) as *mut u8
}

/// Bytes of shared memory the cache takes after the segment slots (with their alignment).
pub fn cache_size() -> usize {
    64 + std::mem::size_of::<Header>() + settings::config().segments.seq_cache_sections * (std::mem::size_of::<Section>() + std::mem::size_of::<AtomicU64>())
}

pub(super) fn header() -> &'static Header {
    // SAFETY: the cache area starts with the header (zeroed with the shared memory).
    unsafe { &*area().cast::<Header>() }
}

/// The cached sections, `pg_idgen.seq_cache_sections` of them. A new shared memory is zeroed
/// (`shmem`): every section free, every counter 0.
pub(super) fn sections() -> &'static [Section] {
    // SAFETY: the area holds the header, then `seq_cache_sections` sections, zeroed before any
    // process could attach (all-zero is a free section).
    unsafe {
        std::slice::from_raw_parts(
            area().add(std::mem::size_of::<Header>()).cast::<Section>(),
            settings::config().segments.seq_cache_sections,
        )
    }
}

/// Each section's tag (`tag_of` of what it holds, 0 when free), after the sections: a set's tags
/// share a cache line or two, so a lookup reads them, then the one section whose tag matches,
/// instead of the first line of each of 8 sections 2 KiB apart (for keys that are not in the
/// processor's cache, that was most of a call's time). A tag is a hint: the section's own identity,
/// read under its seqlock, decides; tags change under the exclusive lock only.
fn tags() -> &'static [AtomicU64] {
    let count = settings::config().segments.seq_cache_sections;
    // SAFETY: the area holds the header, the sections, then one tag per section, zeroed with the
    // shared memory (0: no section).
    unsafe { std::slice::from_raw_parts(area().add(std::mem::size_of::<Header>() + count * std::mem::size_of::<Section>()).cast::<AtomicU64>(), count) }
}

/// A section's tag: never 0.
fn tag_of(id: SectionId) -> u64 {
    splitmix64((u64::from(id.database) << 32 | u64::from(id.space_id)) ^ id.space_hash.rotate_left(17) ^ u64::from(id.section_keys) ^ (id.section as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1
}

/// The indexes of the sections a section may live in: its set.
fn set_range(id: SectionId) -> std::ops::Range<usize> {
    let count = settings::config().segments.seq_cache_sections;
    let sets = (count / WAYS).max(1);
    let set = set_index(id, sets);
    set * count / sets..(set + 1) * count / sets
}

/// Which of `sets` sets section `id` lives in. A run of `sets` consecutive sections of a space
/// goes to every set once, from a set that a hash of database, space and run picks: a space's keys
/// 0 to n then fit in n / section_keys cached sections, as the setting promises (a hash of each
/// section, as CPUs do not, filled a third of the sets past 8 for a million dense keys in 8,192
/// sections, and every pass over the keys evicted there). Sections far apart (text keys, a stride
/// of `sets`) still land on sets at random.
fn set_index(id: SectionId, sets: usize) -> usize {
    let sets = sets as i64;
    let (run, place) = (id.section.div_euclid(sets), id.section.rem_euclid(sets));
    let start = splitmix64((u64::from(id.database) << 32 | u64::from(id.space_id)) ^ id.space_hash ^ u64::from(id.section_keys) ^ (run as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) % sets as u64;
    // start + place < 2 × sets: a subtraction where a second modulo would divide (the hot path).
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

/// SplitMix64's finaliser: spreads every input bit over the output.
pub(super) fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The cached section `id` and the version it was found under, lock-free.
#[inline]
pub(super) fn find(id: SectionId) -> Option<(&'static Section, u64)> {
    let (all, tags, tag) = (sections(), tags(), tag_of(id));
    set_range(id).filter(|&i| tags[i].load(Ordering::Relaxed) == tag).find_map(|i| match all[i].read_id() {
        Some((held, version)) if held == id => Some((&all[i], version)),
        _ => None,
    })
}

/// Finds section `id`, or takes the least recently used section of its set for it (LOADING: the
/// worker is to load it). Returns it and its version; None when every section of the set is
/// being loaded, and none for longer than `pg_idgen.segment_wait_timeout`: evicting one of those
/// would only make its caller take another, and calls could chase each other out of the set
/// without end (the caller waits for a load to end instead). A load that lasted longer than its
/// callers wait (its database's worker cannot start, its row stays locked) may be evicted: it
/// must not hold a way of the cache for good.
pub(super) fn find_or_take(id: SectionId, space: &[u8]) -> Option<(&'static Section, u64)> {
    let _lock = SeqLock::exclusive();
    if let Some(found) = find(id) {
        return Some(found);
    }
    let header = header();
    let now = header.use_clock.fetch_add(1, Ordering::Relaxed) + 1;
    // A free or dropped section first, then the least recently used.
    let stale_ms = clock::monotonic_millis() - settings::config().segments.wait_timeout_ms as i64;
    let all = sections();
    let index = set_range(id)
        .filter(|&i| all[i].state.load(Ordering::Acquire) != LOADING || all[i].raised_at_ms.load(Ordering::Relaxed) < stale_ms)
        .min_by_key(|&i| match all[i].state.load(Ordering::Acquire) {
            FREE | DROPPED => (0, 0),
            READY => (1, all[i].last_used.load(Ordering::Relaxed)),
            _ => (2, all[i].last_used.load(Ordering::Relaxed)),
        })?;
    let victim = &all[index];
    if victim.state.load(Ordering::Acquire) == READY {
        header.evictions.fetch_add(1, Ordering::Relaxed);
        header.served_before.fetch_add(victim.served(), Ordering::Relaxed);
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
        victim.space_len.store(space.len().min(MAX_SPACE_LEN) as u32, Ordering::Relaxed);
        victim.last_used.store(now, Ordering::Relaxed);
        tags()[index].store(tag_of(id), Ordering::Relaxed);
        victim.load();
    });
    Some((victim, victim.version.load(Ordering::Acquire)))
}

/// Takes a section the worker found no space for (DROPPED) again for `id`: the space may have
/// been committed since. Returns the section holding `id` and its version, or None as
/// `find_or_take`.
pub(super) fn retake(section: &'static Section, version: u64, id: SectionId, space: &[u8]) -> Option<(&'static Section, u64)> {
    {
        let _lock = SeqLock::exclusive();
        if section.version.load(Ordering::Acquire) == version && section.state.load(Ordering::Acquire) == DROPPED {
            section.change(|| section.load());
            return Some((section, section.version.load(Ordering::Acquire)));
        }
    }
    find_or_take(id, space)
}

/// Retires every cached section of a database: its next call loads it again, from the table.
/// Called when rows of the space or section tables change or go, the tables are dropped, or the
/// database is dropped or created.
pub fn retire_database(database: pg_sys::Oid) {
    if !shmem::is_attached() {
        return; // not preloaded: nothing is cached
    }
    {
        let _lock = SeqLock::exclusive();
        let header = header();
        for (section, tag) in sections().iter().zip(tags()) {
            if section.state.load(Ordering::Acquire) != FREE && section.database.load(Ordering::Acquire) == database.to_u32() {
                header.served_before.fetch_add(section.served(), Ordering::Relaxed);
                section.change(|| {
                    tag.store(0, Ordering::Relaxed);
                    section.state.store(FREE, Ordering::Release);
                });
            }
        }
    }
    // SAFETY: the condition variable lives in shared memory.
    unsafe { pg_sys::ConditionVariableBroadcast(shmem::shared().segment_loaded()) };
}

/// The sections' LWLock (`shmem::seq_lock`), held while the returned guard lives.
pub(super) struct SeqLock;

impl SeqLock {
    pub(super) fn exclusive() -> shmem::LockGuard {
        shmem::LockGuard::exclusive(shmem::seq_lock())
    }

    pub(super) fn shared() -> shmem::LockGuard {
        shmem::LockGuard::shared(shmem::seq_lock())
    }
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

    /// Claim: a cached section takes 2,240 bytes of shared memory, as docs/sequences.md says
    /// (its header, 256 counters, on 64-byte lines).
    #[test]
    fn a_section_takes_the_memory_the_manual_says() {
        assert_eq!(std::mem::size_of::<super::Section>(), 2240);
        assert_eq!(std::mem::align_of::<super::Section>(), 64);
    }
}
