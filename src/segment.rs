//! Segment numbers (Leaf-segment): dense, increasing numbers per tag, served from ranges cached
//! in shared memory and allocated only by the background worker, in its own committed
//! transactions.
//!
//! Each tag has a slot with two ranges. The slot's `cursor` is `generation << 32 | offset`; a
//! call takes the next offset by one `fetch_add` and reads range `generation` from
//! `ranges[generation % 2]`, checked like a seqlock. When a set share of a range is used, the
//! worker is asked (latch) to load range `generation + 1` into the other cell; when a range is
//! used up, the call that finds it so switches the cursor to the next generation under the
//! LWLock. Only when the next range is not loaded yet does a call wait, on a condition variable.
//!
//! Why ranges are never allocated by the caller: a range allocated in the caller's transaction
//! could be rolled back after its numbers were handed out, and handed out again.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::clock;
use crate::errors;
use crate::settings;
use crate::shmem::{self, CacheLine};

/// Tags are 1 to 63 bytes.
pub const MAX_TAG_LEN: usize = 63;
const OFFSET_BITS: u32 = 32;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// `RangeCell::generation` while the cell is empty or being written.
const NO_GENERATION: u64 = u64::MAX;
/// Samples of the issued count, one a second, for ids/s over the last minute.
const HISTORY: usize = 64;

const FREE: u32 = 0;
const ACTIVE: u32 = 1;
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

    /// Publishes a range. Only the worker writes cells, one at a time.
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
    /// FREE, ACTIVE or DROPPED; changed under the lock.
    state: AtomicU32,
    /// Bumped under the lock whenever the slot gets or loses a tag; backends' lookups check it.
    version: AtomicU64,
    tag_len: AtomicU32,
    /// Written under the lock while the slot is not ACTIVE, read once it is.
    tag: [AtomicU8; MAX_TAG_LEN],
    /// The next range is wanted (prefetch share reached, or a call is waiting).
    want_next: AtomicBool,
    /// The step of the last range the worker loaded, and when it loaded it (monotonic ms: a
    /// wall clock stepping back must not make a range look slow).
    step: AtomicU64,
    last_load_ms: AtomicI64,
    /// Numbers handed out from ranges before the current one.
    issued_before: AtomicU64,
    /// Calls that had to wait for a range.
    waits: AtomicU64,
    history_issued: [AtomicU64; HISTORY],
    history_second: [AtomicI64; HISTORY],
}

impl Slot {
    /// # Safety
    /// `slot` points to shared memory for a slot that nobody uses yet.
    pub unsafe fn init(slot: *mut Slot) {
        unsafe {
            slot.write_bytes(0, 1);
            (*slot).state.store(FREE, Ordering::Relaxed);
            for cell in &(*slot).ranges {
                cell.generation.store(NO_GENERATION, Ordering::Relaxed);
            }
        }
    }

    fn tag(&self) -> Vec<u8> {
        let len = self.tag_len.load(Ordering::Acquire) as usize;
        self.tag[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    fn generation(&self) -> u64 {
        self.cursor.load(Ordering::Acquire) >> OFFSET_BITS
    }

    /// Numbers handed out from this slot since it was registered.
    fn issued(&self) -> u64 {
        let cursor = self.cursor.load(Ordering::Acquire);
        let current = self.ranges[(cursor >> OFFSET_BITS) as usize % 2].read(cursor >> OFFSET_BITS);
        let in_current = current.map_or(0, |(_, len)| (cursor & OFFSET_MASK).min(len));
        self.issued_before.load(Ordering::Relaxed) + in_current
    }
}

/// Holds the segment LWLock for its lifetime.
struct SlotLock;

impl SlotLock {
    fn exclusive() -> SlotLock {
        unsafe { pg_sys::LWLockAcquire(shmem::segment_lock(), pg_sys::LWLockMode::LW_EXCLUSIVE) };
        SlotLock
    }

    fn shared() -> SlotLock {
        unsafe { pg_sys::LWLockAcquire(shmem::segment_lock(), pg_sys::LWLockMode::LW_SHARED) };
        SlotLock
    }
}

impl Drop for SlotLock {
    fn drop(&mut self) {
        unsafe { pg_sys::LWLockRelease(shmem::segment_lock()) };
    }
}

// ---------------------------------------------------------------------------------------------
// Calls: segment_next()
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// This backend's map from tag to (slot index, slot version).
    static LOOKUP: RefCell<HashMap<String, (usize, u64)>> = RefCell::new(HashMap::new());
    /// The last tag looked up, checked first: most statements draw from one tag, and comparing
    /// bytes is cheaper than hashing them.
    static LAST: RefCell<(String, usize, u64)> = const { RefCell::new((String::new(), 0, 0)) };
    /// This backend is connected to pg_idgen.database (checked once).
    static RIGHT_DATABASE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[pg_extern(volatile, parallel_safe)]
/// The next number of a segment tag: unique and increasing per tag, served from shared memory.
fn segment_next(tag: &str) -> i64 {
    let state = shmem::shared();
    errors::refuse_during_recovery("segment_next()");
    require_worker_database();
    let slots = shmem::slots();
    loop {
        let (index, version) = lookup(tag);
        let slot = &slots[index];
        if slot.version.load(Ordering::Acquire) != version || slot.state.load(Ordering::Acquire) != ACTIVE {
            LOOKUP.with(|l| l.borrow_mut().remove(tag));
            LAST.with(|last| last.borrow_mut().0.clear());
            continue;
        }
        let cursor = slot.cursor.fetch_add(1, Ordering::AcqRel);
        let (generation, offset) = (cursor >> OFFSET_BITS, cursor & OFFSET_MASK);
        if let Some((start, len)) = slot.ranges[generation as usize % 2].read(generation) {
            if offset < len {
                if offset == prefetch_offset(len) {
                    slot.want_next.store(true, Ordering::Release);
                    wake_worker(state);
                }
                return start + offset as i64;
            }
        }
        switch_or_wait(slot, tag, version, generation);
    }
}

/// The slot index and version of a tag, from this backend's caches or by registering it.
#[inline]
fn lookup(tag: &str) -> (usize, u64) {
    let hit = LAST.with(|last| {
        let last = last.borrow();
        (last.0 == tag).then_some((last.1, last.2))
    });
    hit.unwrap_or_else(|| {
        let found = LOOKUP.with(|l| l.borrow().get(tag).copied()).unwrap_or_else(|| register(tag));
        LAST.with(|last| *last.borrow_mut() = (tag.to_string(), found.0, found.1));
        found
    })
}

/// The offset whose taking asks for the next range.
fn prefetch_offset(len: u64) -> u64 {
    len * settings::config().segments.prefetch_percent / 100
}

fn wake_worker(state: &shmem::SharedState) {
    let latch = state.worker_latch.load(Ordering::Acquire);
    if !latch.is_null() {
        unsafe { pg_sys::SetLatch(latch) };
    }
}

/// Range `generation` is used up or not loaded yet: switch to the next one if it is there,
/// else ask the worker and wait for it.
#[cold]
fn switch_or_wait(slot: &Slot, tag: &str, version: u64, generation: u64) {
    let state = shmem::shared();
    {
        let _lock = SlotLock::exclusive();
        if slot.version.load(Ordering::Acquire) != version || slot.generation() != generation {
            return; // dropped, or another call switched already: retry
        }
        // The current range is always loaded: a slot starts with an empty generation 0.
        let (_, len) = slot.ranges[generation as usize % 2].read(generation).expect("the current range is loaded");
        if slot.ranges[(generation + 1) as usize % 2].read(generation + 1).is_some() {
            slot.issued_before.fetch_add(len, Ordering::Relaxed);
            slot.cursor.store((generation + 1) << OFFSET_BITS, Ordering::Release);
            return;
        }
        slot.want_next.store(true, Ordering::Release);
    }
    wake_worker(state);
    wait_for_range(slot, tag, version, generation);
}

/// Waits until the worker loaded range `generation + 1`, honouring cancel and statement_timeout,
/// at most `pg_idgen.segment_wait_timeout`.
fn wait_for_range(slot: &Slot, tag: &str, version: u64, generation: u64) {
    let state = shmem::shared();
    let timeout_ms = settings::config().segments.wait_timeout_ms as i64;
    let deadline = clock::monotonic_millis() + timeout_ms;
    slot.waits.fetch_add(1, Ordering::Relaxed);
    let cv = state.segment_loaded();
    unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
    let ready = || {
        slot.version.load(Ordering::Acquire) != version
            || slot.state.load(Ordering::Acquire) != ACTIVE
            || slot.generation() != generation
            || slot.ranges[(generation + 1) as usize % 2].read(generation + 1).is_some()
    };
    while !ready() {
        let remaining = deadline - clock::monotonic_millis();
        if remaining <= 0 {
            unsafe { pg_sys::ConditionVariableCancelSleep() };
            no_range_in_time(state, tag, timeout_ms);
        }
        wake_worker(state);
        // Wakes on the worker's broadcast, a timeout, or an interrupt (it checks for those).
        unsafe { pg_sys::ConditionVariableTimedSleep(cv, remaining.min(100) as _, pg_sys::PG_WAIT_EXTENSION) };
    }
    unsafe { pg_sys::ConditionVariableCancelSleep() };
    if slot.state.load(Ordering::Acquire) == DROPPED {
        unknown_tag(
            tag,
            "The worker does not find it in the tag table: it was dropped, or it was created in a transaction that has not committed yet.",
        );
    }
}

#[cold]
fn no_range_in_time(state: &shmem::SharedState, tag: &str, timeout_ms: i64) -> ! {
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
fn unknown_tag(tag: &str, detail: &str) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        format!("segment tag \"{tag}\" does not exist"),
        Some(detail.into()),
        Some("Create it with segment_create(tag)."),
    )
}

fn check_tag_name(tag: &str) {
    if tag.is_empty() || tag.len() > MAX_TAG_LEN {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid segment tag \"{tag}\""),
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
    let here = unsafe { std::ffi::CStr::from_ptr(pg_sys::get_database_name(pg_sys::MyDatabaseId)) };
    if here.to_bytes() != database.as_bytes() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("segment_next() works only in database \"{database}\", not in \"{}\"", here.to_string_lossy()),
            Some("The pg_idgen worker connects to pg_idgen.database and allocates ranges from the tag table there.".into()),
            Some("Call it from that database, or set pg_idgen.database and restart the server."),
        )
    }
    RIGHT_DATABASE.set(true);
}

/// The tag table, schema-qualified (the extension's schema).
pub fn tag_table() -> String {
    let schema = Spi::get_one::<String>(
        "SELECT quote_ident(n.nspname) FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
          WHERE e.extname = 'pg_idgen'",
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| "public".into());
    format!("{schema}.segment_tag")
}

/// Runs `query` (with `{table}` for the tag table, `$1` for the tag); whether it gave a row.
fn tag_row(tag: &str, query: &str) -> bool {
    let query = query.replace("{table}", &tag_table());
    Spi::get_one_with_args::<bool>(&query, &[tag.into()]).ok().flatten().is_some()
}

/// Finds or takes the slot of a tag that exists in the tag table; an unknown tag takes none.
#[cold]
fn register(tag: &str) -> (usize, u64) {
    check_tag_name(tag);
    if !tag_row(tag, "SELECT true FROM {table} WHERE tag = $1") {
        unknown_tag(tag, "It is not in the tag table.");
    }
    let slots = shmem::slots();
    let found = {
        let _lock = SlotLock::exclusive();
        let active = slots.iter().position(|s| s.state.load(Ordering::Acquire) == ACTIVE && s.tag() == tag.as_bytes());
        active.or_else(|| {
            let free = slots.iter().position(|s| s.state.load(Ordering::Acquire) != ACTIVE)?;
            take_slot(&slots[free], tag);
            Some(free)
        })
    };
    let Some(index) = found else {
        errors::raise(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!("no shared-memory slot left for segment tag \"{tag}\""),
            Some(format!("All pg_idgen.max_tags ({}) slots hold tags in use since the server started.", slots.len())),
            Some("Raise pg_idgen.max_tags and restart the server, or drop tags that are no longer used."),
        )
    };
    let version = slots[index].version.load(Ordering::Acquire);
    LOOKUP.with(|l| l.borrow_mut().insert(tag.to_string(), (index, version)));
    (index, version)
}

/// Gives a free slot to a tag. Called under the lock.
fn take_slot(slot: &Slot, tag: &str) {
    for (cell, byte) in slot.tag.iter().zip(tag.bytes()) {
        cell.store(byte, Ordering::Relaxed);
    }
    slot.tag_len.store(tag.len() as u32, Ordering::Release);
    // Generation 0 is an empty range, so the first range is loaded as a "next" one and the
    // first call switches to it at offset 0: the tag's first number is `start`, not a gap.
    slot.ranges[0].write(0, 0, 0);
    slot.ranges[1].generation.store(NO_GENERATION, Ordering::Release);
    slot.cursor.store(0, Ordering::Release);
    slot.want_next.store(true, Ordering::Release);
    slot.step.store(0, Ordering::Relaxed);
    slot.last_load_ms.store(0, Ordering::Relaxed);
    slot.issued_before.store(0, Ordering::Relaxed);
    slot.waits.store(0, Ordering::Relaxed);
    for second in &slot.history_second {
        second.store(0, Ordering::Relaxed);
    }
    slot.version.fetch_add(1, Ordering::AcqRel);
    slot.state.store(ACTIVE, Ordering::Release);
}

/// Marks a tag's slot dropped: its cached numbers are never served again. Called by
/// segment_drop().
fn forget(tag: &[u8]) {
    {
        let _lock = SlotLock::exclusive();
        for slot in shmem::slots() {
            if slot.state.load(Ordering::Acquire) == ACTIVE && slot.tag() == tag {
                mark_dropped(slot);
            }
        }
    }
    unsafe { pg_sys::ConditionVariableBroadcast(shmem::shared().segment_loaded()) };
}

/// Called under the lock. The version bump sends every backend's cached lookup back to the table.
fn mark_dropped(slot: &Slot) {
    slot.version.fetch_add(1, Ordering::AcqRel);
    slot.state.store(DROPPED, Ordering::Release);
}

// ---------------------------------------------------------------------------------------------
// Managing tags
// ---------------------------------------------------------------------------------------------

#[pg_extern(volatile)]
/// Creates a segment tag whose first number is `start`. Needs INSERT on the tag table.
fn segment_create(
    tag: &str,
    start: default!(i64, 1),
    step: default!(i32, 1000),
    description: default!(Option<&str>, "NULL"),
) {
    check_tag_name(tag);
    if step < 1 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid step {step} for segment tag \"{tag}\""),
            Some("The step is how many numbers one range holds: at least 1.".into()),
            None,
        )
    }
    if start < 1 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid start {start} for segment tag \"{tag}\""),
            Some("Segment numbers start at 1 or above.".into()),
            None,
        )
    }
    Spi::run_with_args(
        &format!("INSERT INTO {} (tag, max_id, step, description) VALUES ($1, $2, $3, $4)", tag_table()),
        &[tag.into(), (start - 1).into(), step.into(), description.into()],
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[pg_extern(volatile)]
/// Drops a segment tag. Needs DELETE on the tag table. Its cached numbers are never served again.
fn segment_drop(tag: &str) {
    check_tag_name(tag);
    if !tag_row(tag, "DELETE FROM {table} WHERE tag = $1 RETURNING true") {
        unknown_tag(tag, "It is not in the tag table.");
    }
    if shmem::is_attached() {
        forget(tag.as_bytes());
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
    pub tag: String,
    pub step: u64,
}

/// Slots whose next range is wanted and not loaded yet.
pub fn needs() -> Vec<Need> {
    let config = &settings::config().segments;
    let now_ms = clock::monotonic_millis();
    let _lock = SlotLock::shared();
    let mut needs = Vec::new();
    for (index, slot) in shmem::slots().iter().enumerate() {
        if slot.state.load(Ordering::Acquire) != ACTIVE {
            continue;
        }
        let wanted = slot.generation() + 1;
        if !slot.want_next.load(Ordering::Acquire) || slot.ranges[wanted as usize % 2].read(wanted).is_some() {
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
        needs.push(Need {
            index,
            version: slot.version.load(Ordering::Acquire),
            generation: wanted,
            tag: String::from_utf8_lossy(&slot.tag()).into_owned(),
            step,
        });
    }
    needs
}

/// Publishes what the worker found for a slot — a range it allocated and committed, or None when
/// the tag's row is gone — unless the slot changed meanwhile.
pub fn publish(need: &Need, range: Option<(i64, u64)>) {
    let slot = &shmem::slots()[need.index];
    let _lock = SlotLock::exclusive();
    if slot.version.load(Ordering::Acquire) != need.version {
        return;
    }
    match range {
        None => mark_dropped(slot),
        Some((start, len)) => {
            slot.ranges[need.generation as usize % 2].write(need.generation, start, len);
            slot.step.store(len, Ordering::Relaxed);
            slot.last_load_ms.store(clock::monotonic_millis(), Ordering::Relaxed);
            slot.want_next.store(false, Ordering::Release);
        }
    }
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
/// One row per segment tag cached in shared memory.
fn segment_status() -> TableIterator<
    'static,
    (
        name!(tag, String),
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
    let now = clock::wall_unix_micros() / 1_000_000;
    let mut rows = Vec::new();
    let _lock = SlotLock::shared();
    for slot in shmem::slots() {
        if slot.state.load(Ordering::Acquire) != ACTIVE {
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
            String::from_utf8_lossy(&slot.tag()).into_owned(),
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
