//! Segment numbers (Leaf-segment): dense, increasing numbers per tag, served from ranges cached
//! in shared memory and allocated only by the background worker, in its own committed and
//! flushed transactions.
//!
//! Each tag in use has a slot with two ranges. The slot's `cursor` is `generation << 32 |
//! offset`; a call takes the next offset by one `fetch_add` and reads range `generation` from
//! `ranges[generation % 2]`. When a set share of a range is used, the worker is asked (latch) to
//! load range `generation + 1` into the other cell; when a range is used up, the call that finds
//! it so switches the cursor to the next generation under the LWLock. Only when the next range is
//! not loaded yet does a call wait, on a condition variable.
//!
//! Why ranges are never allocated by the caller: a range allocated in the caller's transaction
//! could be rolled back after its numbers were handed out, and handed out again.
//!
//! ## Who writes what
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `version` | take, retire, drop, exhaust | the lock; odd while the slot changes, even when stable |
//! | `state`, `database`, `tag` | take, retire, drop, exhaust | the lock; readers check `version` |
//! | `cursor` | every call (`fetch_add`); switch and take (store) | atomic; stores under the lock |
//! | `ranges` | the worker's publish; take | the lock; readers check each cell's generation |
//! | `step`, `last_load_ms`, `issued_before` | publish, switch | the lock |
//! | `want_next` | calls set it, publish clears it | atomic flag |
//! | `end_generation` | publish (the tag is at bigint's end), take | the lock |
//! | `failures`, `retry_at_ms`, `warned_at_ms` | the worker only | single writer |
//! | `waits`, `history_*` | calls, the worker | atomic counters, approximate |
//!
//! A call reads `version`, takes its offset and reads the range, then reads `version` again: if
//! it changed, the slot was retired or given to another tag meanwhile, and the number taken is
//! dropped (a gap). Versions only grow, so a (version, generation) pair never names two ranges.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::clock;
use crate::errors;
use crate::segment_table::{self, display, TextBytes, TextOut};
use crate::settings;
use crate::shmem::{self, CacheLine};

/// Tags are 1 to 63 bytes.
pub const MAX_TAG_LEN: usize = 63;
const OFFSET_BITS: u32 = 32;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// An offset this large is past every range (ranges hold under 2^31 numbers): the slow path sets
/// it back, so calls that keep missing cannot carry it into the generation.
const OFFSET_REPAIR_AT: u64 = 1 << 31;
/// The last generation a slot may reach; the switch past it retires the slot (a gap) instead.
const LAST_GENERATION: u64 = (1 << 32) - 2;
/// `RangeCell::generation` while the cell is empty or being written.
const NO_GENERATION: u64 = u64::MAX;
/// Samples of the issued count, one a second, for ids/s over the last minute.
const HISTORY: usize = 64;

const FREE: u32 = 0;
const ACTIVE: u32 = 1;
/// The worker found no row for the tag: calls waiting for it get 42704.
const DROPPED: u32 = 2;

/// One range `[start, start + len)`, valid for cursor generation `generation`.
#[repr(C)]
pub struct RangeCell {
    generation: AtomicU64,
    start: AtomicI64,
    len: AtomicU64,
}

impl RangeCell {
    /// The range, if the cell holds generation `generation` (a seqlock read: the worker may be
    /// rewriting a cell that a slow reader still looks at).
    #[inline]
    fn read(&self, generation: u64) -> Option<(i64, u64)> {
        if self.generation.load(Ordering::Acquire) != generation {
            return None;
        }
        let start = self.start.load(Ordering::Relaxed);
        let len = self.len.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (self.generation.load(Ordering::Relaxed) == generation).then_some((start, len))
    }

    /// Publishes a range. Under the lock.
    fn write(&self, generation: u64, start: i64, len: u64) {
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
    cursor: CacheLine<AtomicU64>,
    ranges: [RangeCell; 2],
    version: AtomicU64,
    state: AtomicU32,
    database: AtomicU32,
    tag_len: AtomicU32,
    tag: [AtomicU8; MAX_TAG_LEN],
    /// The next range is wanted (prefetch share reached, or a call is waiting).
    want_next: AtomicBool,
    /// The first generation that will never have a range: the tag reached bigint's end with the
    /// one before it (NO_GENERATION while it has not). Calls get 2200H once they need it.
    end_generation: AtomicU64,
    /// The step of the last range the worker loaded, and when it loaded it (monotonic ms: a
    /// wall clock stepping back must not make a range look slow).
    step: AtomicU64,
    last_load_ms: AtomicI64,
    /// Numbers handed out from ranges before the current one.
    issued_before: AtomicU64,
    /// Calls that had to wait for a range.
    waits: AtomicU64,
    /// Allocations that failed in a row, when the worker may try again, when it last warned.
    failures: AtomicU32,
    retry_at_ms: AtomicI64,
    warned_at_ms: AtomicI64,
    history_issued: [AtomicU64; HISTORY],
    history_second: [AtomicI64; HISTORY],
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
            for cell in &(*slot).ranges {
                cell.generation.store(NO_GENERATION, Ordering::Relaxed);
            }
        }
    }

    fn tag(&self) -> Vec<u8> {
        let len = self.tag_len.load(Ordering::Acquire) as usize;
        self.tag[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    /// Whether the slot holds `tag` of `database` (any state but FREE). Under the lock.
    fn holds(&self, database: pg_sys::Oid, tag: &[u8]) -> bool {
        self.holds_a_tag_of(database) && self.tag() == tag
    }

    /// Whether the slot holds a tag of `database` (any state but FREE).
    fn holds_a_tag_of(&self, database: pg_sys::Oid) -> bool {
        self.state.load(Ordering::Acquire) != FREE && self.database.load(Ordering::Acquire) == database.to_u32()
    }

    /// Whether the slot serves a tag of `database`.
    fn serves(&self, database: pg_sys::Oid) -> bool {
        self.state.load(Ordering::Acquire) == ACTIVE && self.database.load(Ordering::Acquire) == database.to_u32()
    }

    fn generation(&self) -> u64 {
        self.cursor.load(Ordering::Acquire) >> OFFSET_BITS
    }

    /// Numbers handed out from this slot since it was taken.
    fn issued(&self) -> u64 {
        let cursor = self.cursor.load(Ordering::Acquire);
        let current = self.ranges[(cursor >> OFFSET_BITS) as usize % 2].read(cursor >> OFFSET_BITS);
        let in_current = current.map_or(0, |(_, len)| (cursor & OFFSET_MASK).min(len));
        self.issued_before.load(Ordering::Relaxed) + in_current
    }

    /// Changes what the slot is, between two version bumps (odd while changing). Under the lock.
    fn change(&self, f: impl FnOnce()) {
        self.version.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::Release);
        f();
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Gives the free slot to a tag. Under the lock.
    fn take(&self, database: pg_sys::Oid, tag: &[u8]) {
        self.change(|| {
            for (cell, &byte) in self.tag.iter().zip(tag) {
                cell.store(byte, Ordering::Relaxed);
            }
            self.tag_len.store(tag.len() as u32, Ordering::Release);
            self.database.store(database.to_u32(), Ordering::Release);
            // Generation 0 is an empty range, so the first range is loaded as a "next" one and
            // the first call switches to it at offset 0: the tag's first number is `start`.
            self.ranges[0].write(0, 0, 0);
            self.ranges[1].generation.store(NO_GENERATION, Ordering::Release);
            self.cursor.store(0, Ordering::Release);
            self.want_next.store(true, Ordering::Release);
            self.end_generation.store(NO_GENERATION, Ordering::Release);
            for counter in [&self.step, &self.issued_before, &self.waits] {
                counter.store(0, Ordering::Relaxed);
            }
            self.last_load_ms.store(0, Ordering::Relaxed);
            self.failures.store(0, Ordering::Relaxed);
            self.retry_at_ms.store(0, Ordering::Relaxed);
            for second in &self.history_second {
                second.store(0, Ordering::Relaxed);
            }
            self.state.store(ACTIVE, Ordering::Release);
        });
    }

    /// Sets the state (FREE retires the cache: the next call looks the tag up again). Under the lock.
    fn set_state(&self, state: u32) {
        self.change(|| self.state.store(state, Ordering::Release));
    }
}

/// Holds the segment LWLock for its lifetime.
struct SlotLock;

impl SlotLock {
    fn exclusive() -> SlotLock {
        // SAFETY: the lock lives in shared memory for the life of the server.
        unsafe { pg_sys::LWLockAcquire(shmem::segment_lock(), pg_sys::LWLockMode::LW_EXCLUSIVE) };
        SlotLock
    }

    fn shared() -> SlotLock {
        // SAFETY: as above.
        unsafe { pg_sys::LWLockAcquire(shmem::segment_lock(), pg_sys::LWLockMode::LW_SHARED) };
        SlotLock
    }
}

impl Drop for SlotLock {
    fn drop(&mut self) {
        // SAFETY: held since `exclusive` or `shared`.
        unsafe { pg_sys::LWLockRelease(shmem::segment_lock()) };
    }
}

// ---------------------------------------------------------------------------------------------
// Calls: segment_next()
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// This backend's map from tag to (slot index, slot version).
    static LOOKUP: RefCell<HashMap<Vec<u8>, (usize, u64)>> = RefCell::new(HashMap::new());
    /// The last tag looked up, checked first: most statements draw from one tag, and comparing
    /// bytes is cheaper than hashing them.
    static LAST: RefCell<Option<(Vec<u8>, usize, u64)>> = const { RefCell::new(None) };
    /// This backend is connected to pg_idgen.database (checked once).
    static RIGHT_DATABASE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[pg_extern(volatile, parallel_safe)]
/// The next number of a segment tag: unique and increasing per tag, served from shared memory.
fn segment_next(tag: TextBytes) -> i64 {
    let tag = tag.0;
    check_tag_name(tag);
    let state = shmem::shared();
    errors::refuse_during_recovery("segment_next()");
    require_worker_database();
    let slots = shmem::slots();
    let mut deadline = Deadline(None);
    let mut first = true;
    loop {
        if !first {
            pgrx::check_for_interrupts!();
        }
        first = false;
        let (index, version) = lookup(tag, &mut deadline);
        let slot = &slots[index];
        if slot.version.load(Ordering::Acquire) != version {
            forget_lookup(tag);
            continue;
        }
        let cursor = slot.cursor.fetch_add(1, Ordering::AcqRel);
        let (generation, offset) = (cursor >> OFFSET_BITS, cursor & OFFSET_MASK);
        let range = slot.ranges[generation as usize % 2].read(generation);
        // The closing read of the seqlock: the slot is still the one looked up, so the offset and
        // the range belong to this tag. Otherwise the number taken is a gap.
        fence(Ordering::Acquire);
        if slot.version.load(Ordering::Relaxed) != version {
            forget_lookup(tag);
            continue;
        }
        if let Some((start, len)) = range {
            if offset < len {
                if offset == prefetch_offset(len) {
                    slot.want_next.store(true, Ordering::Release);
                    wake_worker(state);
                }
                return start + offset as i64;
            }
        }
        switch_or_wait(slot, tag, version, generation, offset, &mut deadline);
    }
}

/// When a call must give up waiting (for a range, or a locked table): `pg_idgen.segment_wait_timeout`
/// after it first had to wait. Why not from the call's start: reading the clock on every call
/// would cost the hot path more than the rest of it.
struct Deadline(Option<i64>);

impl Deadline {
    fn ms(&mut self) -> i64 {
        *self.0.get_or_insert_with(|| clock::monotonic_millis() + settings::config().segments.wait_timeout_ms as i64)
    }
}

/// The slot index and version of a tag, from this backend's caches or by registering it.
#[inline]
fn lookup(tag: &[u8], deadline: &mut Deadline) -> (usize, u64) {
    let hit = LAST.with(|last| last.borrow().as_ref().and_then(|(t, index, version)| (t == tag).then_some((*index, *version))));
    hit.unwrap_or_else(|| {
        let found = LOOKUP.with(|l| l.borrow().get(tag).copied()).unwrap_or_else(|| register(tag, deadline.ms()));
        LAST.with(|last| *last.borrow_mut() = Some((tag.to_vec(), found.0, found.1)));
        found
    })
}

#[cold]
fn forget_lookup(tag: &[u8]) {
    LOOKUP.with(|l| l.borrow_mut().remove(tag));
    LAST.with(|last| *last.borrow_mut() = None);
}

/// The offset whose taking asks for the next range.
fn prefetch_offset(len: u64) -> u64 {
    len * settings::config().segments.prefetch_percent / 100
}

fn wake_worker(state: &shmem::SharedState) {
    let latch = state.worker_latch.load(Ordering::Acquire);
    if !latch.is_null() {
        // SAFETY: the worker clears the pointer before its latch goes away.
        unsafe { pg_sys::SetLatch(latch) };
    }
}

/// Range `generation` is used up or not loaded yet: switch to the next one if it is there,
/// else ask the worker and wait for it.
#[cold]
fn switch_or_wait(slot: &Slot, tag: &[u8], version: u64, generation: u64, offset: u64, deadline: &mut Deadline) {
    let state = shmem::shared();
    {
        let _lock = SlotLock::exclusive();
        if slot.version.load(Ordering::Acquire) != version || slot.generation() != generation {
            return; // retired, or another call switched already: retry
        }
        let len = slot.ranges[generation as usize % 2].read(generation).map_or(0, |(_, len)| len);
        if offset >= OFFSET_REPAIR_AT {
            // Every offset past `len` is a miss: setting it back loses nothing.
            slot.cursor.store((generation << OFFSET_BITS) | len, Ordering::Release);
        }
        if slot.ranges[(generation + 1) as usize % 2].read(generation + 1).is_some() {
            if generation + 1 > LAST_GENERATION {
                slot.set_state(FREE); // a new slot starts at generation 0 (a gap)
                return;
            }
            slot.issued_before.fetch_add(len, Ordering::Relaxed);
            slot.cursor.store((generation + 1) << OFFSET_BITS, Ordering::Release);
            return;
        }
        if slot.end_generation.load(Ordering::Acquire) == generation + 1 {
            drop(_lock);
            exhausted(tag);
        }
        slot.want_next.store(true, Ordering::Release);
    }
    wake_worker(state);
    wait_for_range(slot, tag, version, generation, deadline.ms());
}

/// Waits until the worker loaded range `generation + 1` or the slot changed, honouring cancel and
/// statement_timeout, at most until the call's deadline (`pg_idgen.segment_wait_timeout`).
fn wait_for_range(slot: &Slot, tag: &[u8], version: u64, generation: u64, deadline_ms: i64) {
    let state = shmem::shared();
    slot.waits.fetch_add(1, Ordering::Relaxed);
    let cv = state.segment_loaded();
    // SAFETY: the condition variable lives in shared memory; every exit cancels the sleep.
    unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
    let ready = || {
        slot.version.load(Ordering::Acquire) != version
            || slot.generation() != generation
            || slot.ranges[(generation + 1) as usize % 2].read(generation + 1).is_some()
            || slot.end_generation.load(Ordering::Acquire) == generation + 1
    };
    while !ready() {
        let remaining = deadline_ms - clock::monotonic_millis();
        if remaining <= 0 {
            unsafe { pg_sys::ConditionVariableCancelSleep() };
            no_range_in_time(state, tag);
        }
        wake_worker(state);
        // Wakes on the worker's broadcast, a timeout, or an interrupt (it checks for those).
        unsafe { pg_sys::ConditionVariableTimedSleep(cv, remaining.min(100) as _, pg_sys::PG_WAIT_EXTENSION) };
    }
    unsafe { pg_sys::ConditionVariableCancelSleep() };
    // What the worker found instead of a range: say so, rather than look the tag up again.
    let (dropped, at_end) = {
        let _lock = SlotLock::shared();
        let mine = slot.holds(unsafe { pg_sys::MyDatabaseId }, tag);
        (
            mine && slot.state.load(Ordering::Acquire) == DROPPED,
            slot.version.load(Ordering::Acquire) == version && slot.end_generation.load(Ordering::Acquire) == generation + 1,
        )
    };
    if dropped {
        unknown_tag(
            tag,
            "The worker does not find it in the tag table: it was dropped, or it was created in a transaction that has not committed yet.",
        );
    }
    if at_end {
        exhausted(tag);
    }
}

#[cold]
fn no_range_in_time(state: &shmem::SharedState, tag: &[u8]) -> ! {
    let timeout_ms = settings::config().segments.wait_timeout_ms;
    let tag = display(tag);
    if state.worker_latch.load(Ordering::Acquire).is_null() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("segment tag \"{tag}\" has no numbers left in shared memory, and the pg_idgen worker is not running"),
            Some(format!("The call waited pg_idgen.segment_wait_timeout ({timeout_ms} ms) for the worker to load a range.")),
            Some("The worker restarts by itself within a second after an error; the server log says why it stopped."),
        )
    }
    errors::raise(
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        format!("segment tag \"{tag}\" has no numbers left in shared memory, and the worker could not load a range in time"),
        Some(format!(
            "The call waited pg_idgen.segment_wait_timeout ({timeout_ms} ms). The worker allocates ranges by updating the tag table in database \"{}\": it may be locked, or the database unreachable.",
            settings::config().segments.database
        )),
        Some("Look for sessions holding locks on the tag table (pg_locks), and at the server log."),
    )
}

#[cold]
fn unknown_tag(tag: &[u8], detail: &str) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        format!("segment tag \"{}\" does not exist", display(tag)),
        Some(detail.into()),
        Some("Create it with segment_create(tag)."),
    )
}

#[cold]
fn exhausted(tag: &[u8]) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
        format!("segment_next: reached maximum value of segment tag \"{}\" ({})", display(tag), i64::MAX),
        Some("Every number up to bigint's end has been allocated.".into()),
        None,
    )
}

/// Tags are 1 to 63 bytes: checked before any lookup.
pub fn check_tag_name(tag: &[u8]) {
    if tag.is_empty() || tag.len() > MAX_TAG_LEN {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid segment tag \"{}\"", display(&tag[..tag.len().min(80)])),
            Some(format!("A tag is 1 to {MAX_TAG_LEN} bytes long, not {}.", tag.len())),
            None,
        )
    }
}

/// Segment tags live in the database the worker connects to; calls from another would never
/// get a range.
fn require_worker_database() {
    if RIGHT_DATABASE.get() {
        return;
    }
    let database = &settings::config().segments.database;
    // SAFETY: get_database_name returns a palloc'd name, or NULL for a database just dropped.
    let here = unsafe { pg_sys::get_database_name(pg_sys::MyDatabaseId) };
    let here = if here.is_null() { String::new() } else { unsafe { std::ffi::CStr::from_ptr(here) }.to_string_lossy().into_owned() };
    if here.as_bytes() != database.as_bytes() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("segment_next() works only in database \"{database}\", not in \"{here}\""),
            Some("The pg_idgen worker connects to pg_idgen.database and allocates ranges from the tag table there.".into()),
            Some("Call it from that database, or set pg_idgen.database and restart the server."),
        )
    }
    RIGHT_DATABASE.set(true);
}

/// Finds or takes the slot of a tag that exists in the tag table; an unknown tag takes none.
#[cold]
fn register(tag: &[u8], deadline_ms: i64) -> (usize, u64) {
    if !segment_table::tag_exists(tag, deadline_ms) {
        unknown_tag(tag, "It is not in the tag table.");
    }
    let database = unsafe { pg_sys::MyDatabaseId };
    let slots = shmem::slots();
    let found = {
        let _lock = SlotLock::exclusive();
        match slots.iter().position(|s| s.holds(database, tag) && s.state.load(Ordering::Acquire) != DROPPED) {
            Some(index) => Some(index),
            None => slots.iter().position(|s| matches!(s.state.load(Ordering::Acquire), FREE | DROPPED)).inspect(|&free| {
                slots[free].take(database, tag);
            }),
        }
        .map(|index| (index, slots[index].version.load(Ordering::Acquire)))
    };
    let Some((index, version)) = found else {
        errors::raise(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!("no shared-memory slot left for segment tag \"{}\"", display(tag)),
            Some(format!("All pg_idgen.max_tags ({}) slots hold tags in use since the server started.", slots.len())),
            Some("Raise pg_idgen.max_tags and restart the server, or drop tags that are no longer used."),
        )
    };
    LOOKUP.with(|l| l.borrow_mut().insert(tag.to_vec(), (index, version)));
    (index, version)
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
        let _lock = SlotLock::exclusive();
        for slot in shmem::slots().iter().filter(|slot| matches(slot)) {
            slot.set_state(FREE);
        }
    }
    // SAFETY: the condition variable lives in shared memory.
    unsafe { pg_sys::ConditionVariableBroadcast(shmem::shared().segment_loaded()) };
}

// ---------------------------------------------------------------------------------------------
// Managing tags
// ---------------------------------------------------------------------------------------------

#[pg_extern(volatile)]
/// Creates a segment tag whose first number is `start`. Needs INSERT on the tag table.
fn segment_create(
    tag: Option<TextBytes>,
    start: default!(Option<i64>, 1),
    step: default!(Option<i32>, 1000),
    description: default!(Option<TextBytes>, "NULL"),
) {
    let (Some(tag), Some(start), Some(step)) = (tag, start, step) else {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "segment_create: tag, start and step must not be NULL".into(),
            None,
            None,
        )
    };
    let tag = tag.0;
    check_tag_name(tag);
    if step < 1 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid step {step} for segment tag \"{}\"", display(tag)),
            Some("The step is how many numbers one range holds: at least 1.".into()),
            None,
        )
    }
    if start < 1 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid start {start} for segment tag \"{}\"", display(tag)),
            Some("Segment numbers start at 1 or above.".into()),
            None,
        )
    }
    let table = segment_table::require_tag_table();
    let description = match description {
        Some(text) => segment_table::text_arg(text.0),
        None => pgrx::datum::DatumWithOid::null_oid(pg_sys::TEXTOID),
    };
    let args = [segment_table::text_arg(tag), (start - 1).into(), step.into(), description];
    segment_table::run_on_tag_table(table, "INSERT INTO {table} (tag, max_id, step, description) VALUES ($1, $2, $3, $4)", |sql| {
        Spi::run_with_args(sql, &args)
    })
    .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[pg_extern(volatile)]
/// Drops a segment tag. Needs DELETE on the tag table. Its cached numbers are never served again
/// (the table's trigger retires them).
fn segment_drop(tag: Option<TextBytes>) {
    let Some(tag) = tag else {
        errors::raise(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, "segment_drop: tag must not be NULL".into(), None, None)
    };
    check_tag_name(tag.0);
    let table = segment_table::require_tag_table();
    let deleted = segment_table::run_on_tag_table(table, "DELETE FROM ONLY {table} WHERE tag OPERATOR(pg_catalog.=) $1 RETURNING true", |sql| {
        Spi::get_one_with_args::<bool>(sql, &[segment_table::text_arg(tag.0)])
    })
    .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None));
    if !matches!(deleted, Ok(Some(true))) {
        unknown_tag(tag.0, "It is not in the tag table.");
    }
}

// ---------------------------------------------------------------------------------------------
// The worker's side
// ---------------------------------------------------------------------------------------------

/// What the worker must load for one slot now.
pub struct Need {
    pub index: usize,
    pub version: u64,
    pub generation: u64,
    pub tag: Vec<u8>,
    pub step: u64,
}

/// What the worker found for a slot.
pub enum Outcome {
    /// A range it allocated, committed and flushed.
    Range(i64, u64),
    /// The tag's row is gone.
    NoTag,
    /// The tag is at bigint's end: there is no range `generation`.
    Exhausted,
    /// The allocation failed (a lock, …); the message is for the log.
    Failed(String),
}

/// How long the worker leaves a tag alone after failed allocations: doubling from 100 ms to 5 s.
fn backoff_ms(failures: u32) -> i64 {
    (100i64 << failures.saturating_sub(1).min(6)).min(5000)
}

/// Slots of `database` whose next range is wanted, not loaded yet, and not in a backoff.
pub fn needs(database: pg_sys::Oid) -> Vec<Need> {
    let config = &settings::config().segments;
    let now_ms = clock::monotonic_millis();
    let _lock = SlotLock::shared();
    let mut needs = Vec::new();
    for (index, slot) in shmem::slots().iter().enumerate() {
        if !slot.serves(database) {
            continue;
        }
        let wanted = slot.generation() + 1;
        if !slot.want_next.load(Ordering::Acquire)
            || slot.ranges[wanted as usize % 2].read(wanted).is_some()
            || wanted >= slot.end_generation.load(Ordering::Acquire)
            || slot.retry_at_ms.load(Ordering::Relaxed) > now_ms
        {
            continue;
        }
        // Leaf's dynamic step: ranges that go fast grow, ranges that last shrink.
        let previous = slot.step.load(Ordering::Relaxed);
        let since_last_load_ms = now_ms - slot.last_load_ms.load(Ordering::Relaxed);
        let step = if previous == 0 {
            0 // the first range: the tag's own step
        } else if (since_last_load_ms as u64) < config.fast_range_ms {
            (previous * 2).min(config.max_step)
        } else if (since_last_load_ms as u64) > config.slow_range_ms {
            previous / 2
        } else {
            previous
        };
        needs.push(Need { index, version: slot.version.load(Ordering::Acquire), generation: wanted, tag: slot.tag(), step });
    }
    needs
}

/// Publishes what the worker found for a slot, unless the slot changed meanwhile. A failure
/// sets the slot's backoff and says whether it is time to log it (at most every 10 s a tag).
pub fn publish(need: &Need, outcome: &Outcome) -> bool {
    let slot = &shmem::slots()[need.index];
    let now_ms = clock::monotonic_millis();
    let _lock = SlotLock::exclusive();
    if slot.version.load(Ordering::Acquire) != need.version {
        return false;
    }
    match *outcome {
        Outcome::Range(start, len) => {
            slot.ranges[need.generation as usize % 2].write(need.generation, start, len);
            slot.step.store(len, Ordering::Relaxed);
            slot.last_load_ms.store(now_ms, Ordering::Relaxed);
            slot.want_next.store(false, Ordering::Release);
            slot.failures.store(0, Ordering::Relaxed);
            false
        }
        Outcome::NoTag => {
            slot.set_state(DROPPED);
            false
        }
        Outcome::Exhausted => {
            // Only past the ranges already loaded: calls go on with those first.
            slot.end_generation.store(need.generation, Ordering::Release);
            slot.want_next.store(false, Ordering::Release);
            false
        }
        Outcome::Failed(_) => {
            let failures = slot.failures.fetch_add(1, Ordering::Relaxed) + 1;
            slot.retry_at_ms.store(now_ms + backoff_ms(failures), Ordering::Relaxed);
            let warn = now_ms - slot.warned_at_ms.load(Ordering::Relaxed) >= 10_000 || failures == 1;
            if warn {
                slot.warned_at_ms.store(now_ms, Ordering::Relaxed);
            }
            warn
        }
    }
}

/// Failed allocations in a row of a slot (for the worker's log line).
pub fn failures(index: usize) -> u32 {
    shmem::slots()[index].failures.load(Ordering::Relaxed)
}

/// Records each active slot's issued count, once a second, for ids/s over the last minute.
/// `last_second` is the caller's record of the last second sampled.
pub fn sample_rates(last_second: &mut i64) {
    let second = clock::wall_unix_micros() / 1_000_000;
    if second == *last_second {
        return;
    }
    *last_second = second;
    for slot in shmem::slots() {
        if slot.state.load(Ordering::Acquire) == ACTIVE {
            let i = second as usize % HISTORY;
            slot.history_issued[i].store(slot.issued(), Ordering::Relaxed);
            slot.history_second[i].store(second, Ordering::Relaxed);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// segment_status()
// ---------------------------------------------------------------------------------------------

#[pg_extern(volatile, parallel_safe)]
/// One row per segment tag of this database cached in shared memory.
fn segment_status() -> TableIterator<
    'static,
    (
        name!(tag, TextOut),
        name!(current_start, Option<i64>),
        name!(current_end, Option<i64>),
        name!(next_value, Option<i64>),
        name!(next_start, Option<i64>),
        name!(next_end, Option<i64>),
        name!(next_loaded, bool),
        name!(step, i64),
        name!(ids_per_second, f64),
        name!(waits, i64),
    ),
> {
    shmem::shared();
    let database = unsafe { pg_sys::MyDatabaseId };
    let now = clock::wall_unix_micros() / 1_000_000;
    let mut rows = Vec::new();
    let _lock = SlotLock::shared();
    for slot in shmem::slots() {
        if !slot.serves(database) {
            continue;
        }
        let cursor = slot.cursor.load(Ordering::Acquire);
        let generation = cursor >> OFFSET_BITS;
        let current = slot.ranges[generation as usize % 2].read(generation);
        let next = slot.ranges[(generation + 1) as usize % 2].read(generation + 1);
        let end = |r: Option<(i64, u64)>| r.map(|(start, len)| start + len as i64 - 1);
        let next_value = current.and_then(|(start, len)| {
            let offset = cursor & OFFSET_MASK;
            (offset < len).then_some(start + offset as i64)
        });
        let issued = slot.issued();
        let oldest = (0..HISTORY)
            .map(|i| (slot.history_second[i].load(Ordering::Relaxed), slot.history_issued[i].load(Ordering::Relaxed)))
            .filter(|&(second, _)| second > 0 && second >= now - 60 && second < now)
            .min_by_key(|&(second, _)| second);
        let rate = oldest.map_or(0.0, |(second, then)| (issued.saturating_sub(then)) as f64 / (now - second) as f64);
        rows.push((
            TextOut(slot.tag()),
            current.map(|(start, _)| start),
            end(current),
            next_value,
            next.map(|(start, _)| start),
            end(next),
            next.is_some(),
            slot.step.load(Ordering::Relaxed) as i64,
            rate,
            slot.waits.load(Ordering::Relaxed) as i64,
        ));
    }
    TableIterator::new(rows)
}
