//! The worker's side of the slots: which ranges are wanted now, and publishing what the range
//! source gave for them.

use std::sync::atomic::Ordering;

use pgrx::pg_sys;

use super::slot::{slots, SlotLock, ACTIVE, DROPPED, HISTORY};
use crate::{clock, settings};

/// What the worker must load for one slot now.
pub struct Need {
    pub index: usize,
    pub version: u64,
    pub generation: u64,
    pub tag: Vec<u8>,
    pub step: u64,
    /// The block a `segment_next_range()` call waits for (0: none): a range must hold all of it,
    /// or none is allocated (`Outcome::TooShort`).
    pub block: u64,
}

/// What the worker found for a slot.
pub enum Outcome {
    /// A range it allocated, committed and flushed.
    Range(i64, u64),
    /// The tag's row is gone.
    NoTag,
    /// The tag is at bigint's end: there is no range `generation`.
    Exhausted,
    /// Fewer numbers than the block are left before bigint's end (how many): nothing allocated,
    /// so they stay for smaller blocks and single numbers.
    TooShort(u64),
    /// The allocation failed (a lock, …); the message is for the log.
    Failed(String),
}

/// Slots of `database` whose next range is wanted, not loaded yet, and not in a backoff.
pub fn needs(database: pg_sys::Oid) -> Vec<Need> {
    let config = &settings::config().segments;
    let now_ms = clock::monotonic_millis();
    let _lock = SlotLock::shared();
    let mut needs = Vec::new();
    for (index, slot) in slots().iter().enumerate() {
        if !slot.serves(database) {
            continue;
        }
        let wanted = slot.generation() + 1;
        let block = slot.want_len.load(Ordering::Acquire);
        if !(slot.want_next.load(Ordering::Acquire) || block > 0)
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
        // A block call waits for a range that holds its whole block.
        let step = step.max(block);
        needs.push(Need { index, version: slot.version.load(Ordering::Acquire), generation: wanted, tag: slot.tag(), step, block });
    }
    needs
}

/// Publishes what the worker found for a slot, unless the slot changed meanwhile. A failure
/// sets the slot's backoff and says whether it is time to log it (at most every 10 s a tag).
pub fn publish(need: &Need, outcome: &Outcome) -> bool {
    let slot = &slots()[need.index];
    let now_ms = clock::monotonic_millis();
    let _lock = SlotLock::exclusive();
    if slot.version.load(Ordering::Acquire) != need.version {
        return false;
    }
    // Only the range the slot wants next, and only once: a range published twice for one
    // generation (two workers, a late answer) would change under calls already taking from it.
    // Another one is a gap.
    let wanted = slot.generation() + 1 == need.generation && slot.ranges[need.generation as usize % 2].read(need.generation).is_none();
    if !wanted && !matches!(outcome, Outcome::Failed(_) | Outcome::TooShort(_)) {
        return false;
    }
    match *outcome {
        Outcome::Range(start, len) => {
            slot.ranges[need.generation as usize % 2].write(need.generation, start, len);
            // The range's last number is the tag's max_id now.
            slot.left.store((i64::MAX - (start + len as i64 - 1)) as u64, Ordering::Release);
            slot.step.store(len, Ordering::Relaxed);
            slot.last_load_ms.store(now_ms, Ordering::Relaxed);
            slot.want_next.store(false, Ordering::Release);
            slot.want_len.store(0, Ordering::Release);
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
            slot.left.store(0, Ordering::Release);
            slot.want_next.store(false, Ordering::Release);
            slot.want_len.store(0, Ordering::Release);
            false
        }
        Outcome::TooShort(left) => {
            // The block calls waiting see `left` and fail; `want_next`, if a call or a prefetch
            // set it, still gets its range.
            slot.left.fetch_min(left, Ordering::AcqRel);
            slot.want_len.store(0, Ordering::Release);
            false
        }
        Outcome::Failed(_) => super::worker::record_failure(&slot.failures, &slot.retry_at_ms, &slot.warned_at_ms, now_ms),
    }
}

/// Whether a slot of `database` wants its next range and its allocations are not failing: its
/// worker is not idle. Why not failing ones: a worker that cannot allocate (the segment authority
/// is down) must still exit in time for DROP DATABASE; a call that waits starts it again.
pub fn anything_wanted(database: pg_sys::Oid) -> bool {
    let _lock = SlotLock::shared();
    slots().iter().any(|slot| {
        slot.serves(database)
            && (slot.want_next.load(Ordering::Acquire) || slot.want_len.load(Ordering::Acquire) > 0)
            && slot.state.load(Ordering::Acquire) == ACTIVE
            && slot.failures.load(Ordering::Relaxed) == 0
    })
}

/// Ends every slot's pause after failed allocations: the source answers again (a segment
/// authority that was unreachable), so no tag should wait out a pause that counted on it not.
pub fn retry_now() {
    for slot in slots() {
        slot.retry_at_ms.store(0, Ordering::Relaxed);
    }
}

/// Failed allocations in a row of a slot (for the worker's log line).
pub fn failures(index: usize) -> u32 {
    slots()[index].failures.load(Ordering::Relaxed)
}

/// Records each active slot's issued count, once a second, for ids/s over the last minute.
/// `last_second` is the caller's record of the last second sampled.
pub fn sample_rates(last_second: &mut i64) {
    let second = clock::wall_unix_micros() / 1_000_000;
    if second == *last_second {
        return;
    }
    *last_second = second;
    for slot in slots() {
        if slot.state.load(Ordering::Acquire) == ACTIVE {
            let i = second as usize % HISTORY;
            slot.history_issued[i].store(slot.issued(), Ordering::Relaxed);
            slot.history_second[i].store(second, Ordering::Relaxed);
        }
    }
}
