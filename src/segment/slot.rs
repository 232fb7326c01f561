//! A tag's cache in shared memory: its slot, the two range cells, and the lock that guards
//! changing them. The protocol is stated once, in `segment` (mod.rs).

use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

use pgrx::pg_sys;

use crate::seqlock::Seqlock;
use crate::settings;
use crate::shmem::{self, CacheLine, SharedSlice};
use crate::tables::MAX_NAME_LEN;
use crate::worker::Backoff;

pub(super) const OFFSET_BITS: u32 = 32;
pub(super) const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// An offset this large is past every range (ranges hold under 2^31 numbers): the slow path sets
/// it back, so calls that keep missing cannot carry it into the generation.
pub(super) const OFFSET_REPAIR_AT: u64 = 1 << 31;
/// The last generation a slot may reach; the switch past it retires the slot (a gap) instead.
pub(super) const LAST_GENERATION: u64 = (1 << 32) - 2;
/// `RangeCell::generation` while the cell is empty or being written.
pub(super) const NO_GENERATION: u64 = u64::MAX;
/// `Slot::left` before the worker has obtained anything for the slot.
pub(super) const LEFT_UNKNOWN: u64 = u64::MAX;
/// Samples of the issued count, one a second, for ids/s over the last minute.
pub(super) const HISTORY: usize = 64;

pub(super) const FREE: u32 = 0;
pub(super) const ACTIVE: u32 = 1;
/// The worker found no row for the tag: calls waiting for it get 42704.
pub(super) const DROPPED: u32 = 2;

/// One range `[start, start + len)`, valid for cursor generation `generation`.
#[repr(C)]
pub struct RangeCell {
    pub(super) generation: AtomicU64,
    pub(super) start: AtomicI64,
    pub(super) len: AtomicU64,
}

impl RangeCell {
    /// The range, if the cell holds generation `generation` (a seqlock read: the worker may be
    /// rewriting a cell that a slow reader still looks at).
    #[inline]
    pub(super) fn read(&self, generation: u64) -> Option<(i64, u64)> {
        if self.generation.load(Ordering::Acquire) != generation {
            return None;
        }
        let start = self.start.load(Ordering::Relaxed);
        let len = self.len.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (self.generation.load(Ordering::Relaxed) == generation).then_some((start, len))
    }

    /// Publishes a range. Under the lock.
    pub(super) fn write(&self, generation: u64, start: i64, len: u64) {
        self.generation.store(NO_GENERATION, Ordering::Relaxed);
        fence(Ordering::Release);
        self.start.store(start, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Release);
    }
}

/// A tag's cache in shared memory.
#[repr(C)]
pub struct Slot {
    /// Taken by fetch_add on every call, so on a cache line of its own.
    pub(super) cursor: CacheLine<AtomicU64>,
    pub(super) ranges: [RangeCell; 2],
    pub(super) version: Seqlock,
    pub(super) state: AtomicU32,
    pub(super) database: AtomicU32,
    pub(super) tag_len: AtomicU32,
    pub(super) tag: [AtomicU8; MAX_NAME_LEN],
    /// The next range is wanted (prefetch share reached, or a call is waiting).
    pub(super) want_next: AtomicBool,
    /// The least length a block call (`segment_next_range`) needs from the next range; 0: none.
    /// A block call sets it alone (not `want_next`): a block the worker cannot serve must not
    /// make it allocate a range nobody asked for.
    pub(super) want_len: AtomicU64,
    /// How many numbers were left before bigint's end after the last range the worker obtained
    /// (or found it could not obtain) for the slot: never less than the truth, which only shrinks
    /// (`max_id` only grows). `LEFT_UNKNOWN` until then.
    pub(super) left: AtomicU64,
    /// The first generation that will never have a range: the tag reached bigint's end with the
    /// one before it (NO_GENERATION while it has not). Calls get 2200H once they need it.
    pub(super) end_generation: AtomicU64,
    /// The step of the last range the worker loaded, and when it loaded it (monotonic ms: a
    /// wall clock stepping back must not make a range look slow).
    pub(super) step: AtomicU64,
    pub(super) last_load_ms: AtomicI64,
    /// Numbers handed out from ranges before the current one.
    pub(super) issued_before: AtomicU64,
    /// Calls that had to wait for a range.
    pub(super) waits: AtomicU64,
    /// The pause of the slot's failing allocations.
    pub(super) backoff: Backoff,
    pub(super) history_issued: [AtomicU64; HISTORY],
    pub(super) history_second: [AtomicI64; HISTORY],
}

impl Slot {
    /// # Safety
    /// `slot` points to shared memory for a slot that nobody uses yet.
    pub unsafe fn init(slot: *mut Slot) {
        // SAFETY: per the function's contract; all-zero is valid for every field.
        unsafe {
            slot.write_bytes(0, 1);
            (*slot).state.store(FREE, Ordering::Relaxed);
            (*slot).end_generation.store(NO_GENERATION, Ordering::Relaxed);
            (*slot).left.store(LEFT_UNKNOWN, Ordering::Relaxed);
            for cell in &(*slot).ranges {
                cell.generation.store(NO_GENERATION, Ordering::Relaxed);
            }
        }
    }

    pub(super) fn tag(&self) -> Vec<u8> {
        let len = self.tag_len.load(Ordering::Acquire) as usize;
        self.tag[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    /// Whether the slot holds `tag` of `database` (any state but FREE). Under the lock.
    pub(super) fn holds(&self, database: pg_sys::Oid, tag: &[u8]) -> bool {
        self.holds_a_tag_of(database) && self.tag() == tag
    }

    /// Whether the slot holds a tag of `database` (any state but FREE).
    pub(super) fn holds_a_tag_of(&self, database: pg_sys::Oid) -> bool {
        self.state.load(Ordering::Acquire) != FREE && self.database.load(Ordering::Acquire) == database.to_u32()
    }

    /// Whether the slot serves a tag of `database`.
    pub(super) fn serves(&self, database: pg_sys::Oid) -> bool {
        self.state.load(Ordering::Acquire) == ACTIVE && self.database.load(Ordering::Acquire) == database.to_u32()
    }

    pub(super) fn generation(&self) -> u64 {
        self.cursor.load(Ordering::Acquire) >> OFFSET_BITS
    }

    /// Numbers handed out from this slot since it was taken.
    pub(super) fn issued(&self) -> u64 {
        let cursor = self.cursor.load(Ordering::Acquire);
        let current = self.ranges[(cursor >> OFFSET_BITS) as usize % 2].read(cursor >> OFFSET_BITS);
        let in_current = current.map_or(0, |(_, len)| (cursor & OFFSET_MASK).min(len));
        self.issued_before.load(Ordering::Relaxed) + in_current
    }

    /// Gives the free slot to a tag. Under the lock.
    pub(super) fn take(&self, database: pg_sys::Oid, tag: &[u8]) {
        self.version.change(|| {
            for (cell, &byte) in self.tag.iter().zip(tag) {
                cell.store(byte, Ordering::Relaxed);
            }
            self.tag_len.store(tag.len() as u32, Ordering::Release);
            self.database.store(database.to_u32(), Ordering::Release);
            // Generation 0 is an empty range, so the first range is loaded as a "next" one and
            // the first call switches to it at offset 0: the tag's first number is `start`. The
            // first call asks for it: a single number with `want_next`, a block with `want_len`
            // (which the worker may find too large for what is left, and then loads nothing).
            self.ranges[0].write(0, 0, 0);
            self.ranges[1].generation.store(NO_GENERATION, Ordering::Release);
            self.cursor.store(0, Ordering::Release);
            self.want_next.store(false, Ordering::Release);
            self.end_generation.store(NO_GENERATION, Ordering::Release);
            self.left.store(LEFT_UNKNOWN, Ordering::Release);
            for counter in [&self.step, &self.issued_before, &self.waits, &self.want_len] {
                counter.store(0, Ordering::Relaxed);
            }
            self.last_load_ms.store(0, Ordering::Relaxed);
            self.backoff.reset();
            for second in &self.history_second {
                second.store(0, Ordering::Relaxed);
            }
            self.state.store(ACTIVE, Ordering::Release);
        });
    }

    /// Sets the state (FREE retires the cache: the next call looks the tag up again). Under the lock.
    pub(super) fn set_state(&self, state: u32) {
        self.version.change(|| self.state.store(state, Ordering::Release));
    }
}

/// The segment slots, `pg_idgen.max_tags` of them: the region `pg_idgen segment slots`, with the
/// LWLock that guards registering, dropping and switching them (the protocol is in `segment`).
pub static SLOTS: SharedSlice<Slot> = SharedSlice::with_lock(c"pg_idgen segment slots", max_tags, Slot::init);

fn max_tags() -> usize {
    settings::config().segments.max_tags
}

/// The slots, or an ERROR that says how to fix a missing `shared_preload_libraries`.
#[inline]
pub fn slots() -> &'static [Slot] {
    SLOTS.get()
}

/// Ends every slot's pause after failed allocations: the source answers again (a segment
/// authority that was unreachable), so no tag should wait out a pause that counted on it not.
pub(super) fn retry_now() {
    for slot in slots() {
        slot.backoff.retry_now();
    }
}

/// Retires the cache of a tag (its row was deleted or changed): the next call looks it up again,
/// and its cached numbers are never served. Called by the tag table's trigger.
pub fn retire_tag(database: pg_sys::Oid, tag: &[u8]) {
    retire_where(|slot| slot.holds(database, tag));
}

/// Retires every tag of a database (TRUNCATE, the table dropped).
pub fn retire_database(database: pg_sys::Oid) {
    retire_where(|slot| slot.holds_a_tag_of(database));
}

fn retire_where(matches: impl Fn(&Slot) -> bool) {
    if !shmem::is_attached() {
        return; // not preloaded: nothing is cached
    }
    {
        let _lock = SLOTS.exclusive();
        for slot in slots().iter().filter(|slot| matches(slot)) {
            slot.set_state(FREE);
        }
    }
    // SAFETY: the condition variable lives in shared memory.
    crate::worker::notify_published();
}
