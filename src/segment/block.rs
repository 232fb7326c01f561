//! `segment_next_range(tag, n)`: a block of `n` consecutive numbers of a tag in one call, for bulk
//! loaders and pooled optimizers (Hibernate's `pooled`, which hands out `[first, first + n)`
//! itself). The protocol is in `segment` (mod.rs), after the hot path's.

use std::sync::atomic::Ordering;

use pgrx::prelude::*;

use super::next::{block_past_the_end, forget_lookup, lookup, prefetch_offset, wait_for_range};
use super::slot::{slots, Slot, FREE, LAST_GENERATION, OFFSET_BITS, OFFSET_MASK, SLOTS};
use super::table::TAG;
use crate::tables::{display, TextBytes};
use crate::worker::wait::Deadline;
use crate::{errors, shmem, worker};

/// The largest block: a range must stay under 2^31 numbers (`slot::OFFSET_REPAIR_AT`).
const MAX_BLOCK: i64 = 1 << 30;

#[pg_extern(volatile, parallel_safe)]
/// The first of `n` consecutive numbers of a segment tag, all the caller's: unique like
/// `segment_next()`'s, and taken atomically.
fn segment_next_range(tag: TextBytes, n: i64) -> i64 {
    let tag = tag.0;
    TAG.check(tag);
    if !(1..=MAX_BLOCK).contains(&n) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid block size {n} for segment tag \"{}\"", display(tag)),
            Some(format!("A block holds 1 to {MAX_BLOCK} numbers.")),
            None,
        )
    }
    let n = n as u64;
    shmem::require_preloaded();
    errors::refuse_during_recovery("segment_next_range()");
    let mut deadline = Deadline::new();
    loop {
        pgrx::check_for_interrupts!();
        let (index, version) = lookup(tag, &mut deadline);
        let slot = &slots()[index];
        if slot.version.read() != version {
            forget_lookup(tag);
            continue;
        }
        let cursor = slot.cursor.load(Ordering::Acquire);
        let (generation, offset) = (cursor >> OFFSET_BITS, cursor & OFFSET_MASK);
        if let Some((start, len)) = slot.ranges[generation as usize % 2].read(generation) {
            if offset + n <= len {
                // Why compare-and-swap, not fetch_add: a block that does not fit must take nothing.
                if slot.cursor.compare_exchange(cursor, cursor + n, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                    continue;
                }
                if !slot.version.still(version) {
                    forget_lookup(tag); // retired meanwhile: the block is a gap
                    continue;
                }
                let prefetch = prefetch_offset(len);
                if (offset..offset + n).contains(&prefetch) {
                    slot.want_next.store(true, Ordering::Release);
                    worker::wake();
                }
                return start + offset as i64;
            }
        }
        if let Some(first) = switch_for_block(slot, tag, version, generation, n, &mut deadline) {
            return first;
        }
    }
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION segment_next_range(text, bigint) IS
    'First of n consecutive numbers of a segment tag, all the caller''s, taken atomically (for bulk loads and pooled optimizers).';
"#,
    name = "segment_block",
    requires = [segment_next_range]
);

/// The block does not fit in range `generation`. Under the lock: take it from the start of the
/// next range, switching to it; or, when fewer than `n` numbers are left before bigint's end
/// after the ranges in shared memory, fail and take nothing; or switch past a next range too
/// short for it (a gap); then ask the worker for a range of at least `n` and wait. Returns the
/// block's first number, or None to try again.
#[cold]
fn switch_for_block(slot: &Slot, tag: &[u8], version: u64, generation: u64, n: u64, deadline: &mut Deadline) -> Option<i64> {
    let waiting_at;
    {
        let _lock = SLOTS.exclusive();
        let cursor = slot.cursor.load(Ordering::Acquire);
        if slot.version.read() != version || cursor >> OFFSET_BITS != generation {
            return None; // retired, or switched meanwhile
        }
        let current_len = slot.ranges[generation as usize % 2].read(generation).map_or(0, |(_, len)| len);
        let used = (cursor & OFFSET_MASK).min(current_len);
        let next = slot.ranges[(generation + 1) as usize % 2].read(generation + 1);
        // Why before switching: a range past the loaded ones cannot hold the block either, and the
        // numbers a switch would skip could then never be served. (A tag at its end has `left` 0.)
        let left = slot.left.load(Ordering::Acquire);
        if left < n && next.is_none_or(|(_, next_len)| next_len < n) {
            let in_memory = current_len - used + next.map_or(0, |(_, next_len)| next_len);
            drop(_lock);
            block_past_the_end(tag, n, in_memory, left);
        }
        if let Some((next_start, next_len)) = next {
            if generation + 1 > LAST_GENERATION {
                slot.set_state(FREE); // a new slot starts at generation 0 (a gap)
                return None;
            }
            let taken = n.min(next_len);
            // Against a fetch_add of the old range meanwhile: that call took a number, retry.
            let switched = (generation + 1) << OFFSET_BITS | taken;
            if slot.cursor.compare_exchange(cursor, switched, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                return None;
            }
            slot.issued_before.fetch_add(used, Ordering::Relaxed);
            if taken == n {
                if prefetch_offset(next_len) < n {
                    slot.want_next.store(true, Ordering::Release);
                    drop(_lock);
                    worker::wake();
                }
                return Some(next_start);
            }
            waiting_at = generation + 1; // the short range is spent: wait for the one after it
        } else {
            waiting_at = generation;
        }
        // Only `want_len`: should the worker find fewer than `n` numbers left, no range is wanted.
        slot.want_len.fetch_max(n, Ordering::AcqRel);
    }
    worker::wake();
    wait_for_range(slot, tag, version, waiting_at, n, deadline);
    None
}
