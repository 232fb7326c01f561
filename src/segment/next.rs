//! The hot path: `segment_next()` takes a number from its tag's slot with one `fetch_add`, and
//! only when a range is used up switches to the next one or waits for the worker.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::slot::{slots, Slot, DROPPED, FREE, LAST_GENERATION, OFFSET_BITS, OFFSET_MASK, OFFSET_REPAIR_AT, SLOTS};
use super::table::{self, TAG};
use crate::tables::{display, TextBytes};
use crate::worker::wait::{self, Awaited, Deadline};
use crate::{errors, settings, shmem, worker};

thread_local! {
    /// This backend's map from tag to (slot index, slot version).
    static LOOKUP: RefCell<HashMap<Vec<u8>, (usize, u64)>> = RefCell::new(HashMap::new());
    /// The last tag looked up, checked first: most statements draw from one tag, and comparing
    /// bytes is cheaper than hashing them.
    static LAST: RefCell<Option<(Vec<u8>, usize, u64)>> = const { RefCell::new(None) };
}

#[pg_extern(volatile, parallel_safe)]
/// The next number of a segment tag: unique and increasing per tag, served from shared memory.
fn segment_next(tag: TextBytes) -> i64 {
    let tag = tag.0;
    TAG.check(tag);
    shmem::require_preloaded();
    errors::refuse_during_recovery("segment_next()");
    let slots = slots();
    let mut deadline = Deadline::new();
    let mut first = true;
    loop {
        if !first {
            pgrx::check_for_interrupts!();
        }
        first = false;
        let (index, version) = lookup(tag, &mut deadline);
        let slot = &slots[index];
        if slot.version.read() != version {
            forget_lookup(tag);
            continue;
        }
        let cursor = slot.cursor.fetch_add(1, Ordering::AcqRel);
        let (generation, offset) = (cursor >> OFFSET_BITS, cursor & OFFSET_MASK);
        let range = slot.ranges[generation as usize % 2].read(generation);
        // The closing read of the seqlock: the slot is still the one looked up, so the offset and
        // the range belong to this tag. Otherwise the number taken is a gap.
        if !slot.version.still(version) {
            forget_lookup(tag);
            continue;
        }
        if let Some((start, len)) = range {
            if offset < len {
                if offset == prefetch_offset(len) {
                    slot.want_next.store(true, Ordering::Release);
                    worker::wake();
                }
                return start + offset as i64;
            }
        }
        switch_or_wait(slot, tag, version, generation, offset, &mut deadline);
    }
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION segment_next(text) IS
    'Next number of a segment tag: unique and increasing per tag, served from ranges cached in shared memory.';
"#,
    name = "segment_next",
    requires = [segment_next]
);

/// The slot index and version of a tag, from this backend's caches or by registering it.
#[inline]
pub(super) fn lookup(tag: &[u8], deadline: &mut Deadline) -> (usize, u64) {
    let hit = LAST.with(|last| last.borrow().as_ref().and_then(|(t, index, version)| (t == tag).then_some((*index, *version))));
    hit.unwrap_or_else(|| {
        let found = LOOKUP.with(|l| l.borrow().get(tag).copied()).unwrap_or_else(|| register(tag, deadline.ms()));
        LAST.with(|last| *last.borrow_mut() = Some((tag.to_vec(), found.0, found.1)));
        found
    })
}

#[cold]
pub(super) fn forget_lookup(tag: &[u8]) {
    LOOKUP.with(|l| l.borrow_mut().remove(tag));
    LAST.with(|last| *last.borrow_mut() = None);
}

/// The offset whose taking asks for the next range.
pub(super) fn prefetch_offset(len: u64) -> u64 {
    len * settings::config().segments.prefetch_percent / 100
}

/// Range `generation` is used up or not loaded yet: switch to the next one if it is there,
/// else ask the worker and wait for it.
#[cold]
fn switch_or_wait(slot: &Slot, tag: &[u8], version: u64, generation: u64, offset: u64, deadline: &mut Deadline) {
    {
        let _lock = SLOTS.exclusive();
        if slot.version.read() != version || slot.generation() != generation {
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
            exhausted(tag, "segment_next");
        }
        slot.want_next.store(true, Ordering::Release);
    }
    worker::wake();
    wait_for_range(slot, tag, version, generation, 0, deadline);
}

/// Waits until the worker loaded range `generation + 1`, or found fewer numbers left than the
/// caller's `block` (the numbers a `segment_next_range()` call needs in one range; 0 for
/// `segment_next()`), or the slot changed, honouring cancel and statement_timeout, at most until
/// the call's deadline (`pg_idgen.segment_wait_timeout`). A block call that finds the tag at its
/// end returns: it says so itself (`block_past_the_end`).
pub(super) fn wait_for_range(slot: &Slot, tag: &[u8], version: u64, generation: u64, block: u64, deadline: &mut Deadline) {
    slot.waits.fetch_add(1, Ordering::Relaxed);
    let ready = || {
        slot.version.read() != version
            || slot.generation() != generation
            || slot.ranges[(generation + 1) as usize % 2].read(generation + 1).is_some()
            || slot.end_generation.load(Ordering::Acquire) == generation + 1
            || slot.left.load(Ordering::Acquire) < block
    };
    let ask = || {
        if block > 0 {
            // A worker that found too few numbers for a larger block cleared `want_len`: ask again.
            slot.want_len.fetch_max(block, Ordering::AcqRel);
        }
        worker::wake();
    };
    wait::until(deadline, ready, ask, || no_range_in_time(tag));
    // What the worker found instead of a range: say so, rather than look the tag up again.
    let (dropped, at_end) = {
        let _lock = SLOTS.shared();
        // SAFETY: this backend's database, set when it connected.
        let mine = slot.holds(unsafe { pg_sys::MyDatabaseId }, tag);
        (
            mine && slot.state.load(Ordering::Acquire) == DROPPED,
            slot.version.read() == version && slot.end_generation.load(Ordering::Acquire) == generation + 1,
        )
    };
    if dropped {
        // Why the setting's name and not its value (here and below): the connection string names
        // hosts, ports, users and databases, which the setting keeps to superusers;
        // segment_authority_status() shows it to monitoring roles, and the log has it.
        match &settings::config().segments.authority {
            Some(_) => TAG.unknown(
                tag,
                "The segment authority (pg_idgen.segment_authority) has no such tag: this server serves the authority's tags.",
                Some("Create the tag at the segment authority, with segment_create(tag) there."),
            ),
            None if table::tag_inserted_here(tag, Deadline::new().ms()) => errors::created_in_this_transaction(TAG.quoted(tag)),
            None => TAG.unknown(
                tag,
                "The worker does not find it in the tag table: it was dropped, or it was created in a transaction that has not committed yet.",
                Some(table::CREATE_TAG),
            ),
        }
    }
    if at_end && block == 0 {
        exhausted(tag, "segment_next");
    }
}

/// What segment calls wait for, in the words of their errors.
const RANGES: Awaited = Awaited { kind: "segment tag", numbers: "left", work: "load a range", failed: "load a range" };

#[cold]
fn no_range_in_time(tag: &[u8]) {
    let authority = |subject: String| {
        if settings::config().segments.authority.is_some() {
            let status = crate::remote::authority();
            errors::raise(
                if status.reachable() { PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE } else { PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE },
                format!("{subject}, and the segment authority (pg_idgen.segment_authority) gave no range in time"),
                Some(format!(
                    "The call waited pg_idgen.segment_wait_timeout ({} ms); the authority {}.",
                    settings::config().segments.wait_timeout_ms,
                    if status.reachable() { "answered the worker's last call" } else { "did not answer the worker's last call" }
                )),
                Some(
                    "Calls succeed again as soon as the authority gives a range; segment_authority_status() and the server log say why it does not.",
                ),
            )
        }
    };
    wait::no_numbers_in_time(
        &RANGES,
        tag,
        authority,
        &format!(
            "The worker allocates ranges by updating the tag table in database \"{}\": it may be locked, or the database unreachable.",
            settings::config().segments.database
        ),
        "Look for sessions holding locks on the tag table (pg_locks), and at the server log.",
    )
}

#[cold]
pub(super) fn exhausted(tag: &[u8], function: &str) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
        format!("{function}: reached maximum value of segment tag \"{}\" ({})", display(tag), i64::MAX),
        Some("Every number up to bigint's end has been allocated.".into()),
        None,
    )
}

/// A block of `n` fits neither in the ranges in shared memory (`in_memory` numbers left there) nor
/// in what is left of the tag after them before bigint's end (`left`).
#[cold]
pub(super) fn block_past_the_end(tag: &[u8], n: u64, in_memory: u64, left: u64) -> ! {
    if in_memory == 0 && left == 0 {
        exhausted(tag, "segment_next_range");
    }
    errors::raise(
        PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
        format!(
            "segment_next_range: segment tag \"{}\" has fewer than {n} consecutive numbers left before bigint's end ({})",
            display(tag),
            i64::MAX
        ),
        Some(format!(
            "A block's numbers come from one range: {in_memory} are left in the ranges in shared memory, and {left} after them. Nothing was taken: they stay for smaller blocks and for segment_next()."
        )),
        Some("Ask for a smaller block, or take the rest with segment_next()."),
    )
}

/// Finds or takes the slot of a tag that exists in the tag table; an unknown tag takes none.
#[cold]
fn register(tag: &[u8], deadline_ms: i64) -> (usize, u64) {
    // With a segment authority the tags are there: the worker's first allocation finds out.
    if settings::config().segments.authority.is_none() && !table::tag_exists(tag, deadline_ms) {
        TAG.unknown(tag, "It is not in the tag table.", Some(table::CREATE_TAG));
    }
    // SAFETY: this backend's database, set when it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let slots = slots();
    let found = {
        let _lock = SLOTS.exclusive();
        match slots.iter().position(|s| s.holds(database, tag) && s.state.load(Ordering::Acquire) != DROPPED) {
            Some(index) => Some(index),
            None => slots.iter().position(|s| matches!(s.state.load(Ordering::Acquire), FREE | DROPPED)).inspect(|&free| {
                slots[free].take(database, tag);
            }),
        }
        .map(|index| (index, slots[index].version.read()))
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
