//! The segment ranges as a service of the database worker (`RANGES`): which ranges are wanted
//! now, getting them from the range source, and publishing what it gave.

use std::ffi::CStr;
use std::sync::atomic::Ordering;
use std::time::Instant;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::slot::{slots, ACTIVE, DROPPED, HISTORY, SLOTS};
use super::source::{Authority, LocalTable, Need, Outcome, RangeSource};
use super::table::TAG_TABLE;
use crate::worker::{self, Served, Service, Serving};
use crate::{clock, settings};

/// The segment ranges, as the database worker serves them.
pub struct Ranges;

pub static RANGES: Ranges = Ranges;

impl Service for Ranges {
    fn describe(&self) -> String {
        match &settings::config().segments.authority {
            Some(authority) => format!("segment ranges from the segment authority ({})", crate::remote::describe_conninfo(authority)),
            None => "segment ranges from its tag table".into(),
        }
    }

    fn start(&self) -> Box<dyn Serving> {
        let segments = &settings::config().segments;
        let source: Box<dyn RangeSource> = match &segments.authority {
            Some(authority) => Box::new(Authority::new(authority, segments.remote_timeout_ms)),
            None => Box::new(LocalTable),
        };
        Box::new(RangeServing { source, sampled_second: 0 })
    }

    fn retire_database(&self, database: pg_sys::Oid) {
        super::slot::retire_database(database);
    }

    fn cached_tables(&self) -> &'static [&'static CStr] {
        &[TAG_TABLE]
    }
}

/// What one worker keeps between its turns: where its ranges come from, and the last second it
/// sampled the tags' rates.
struct RangeServing {
    source: Box<dyn RangeSource>,
    sampled_second: i64,
}

impl Serving for RangeServing {
    /// Allocates the ranges the database's slots want, one after another, and wakes the waiting
    /// calls after each (a call need not wait for the other tags' allocations).
    fn serve(&mut self, database: pg_sys::Oid, until: Instant) -> Served {
        let mut served = Served::default();
        for (i, need) in needs(database).into_iter().enumerate() {
            if worker::told_to_stop() || (i > 0 && Instant::now() >= until) {
                served.more = true;
                break;
            }
            let outcome = self.source.allocate(&need);
            served.wanted |= !matches!(outcome, Outcome::Failed(_));
            if publish(&need, &outcome) {
                if let Outcome::Failed(message) = &outcome {
                    warning!(
                        "pg_idgen worker: could not allocate a range for segment tag \"{}\": {message} ({} attempts failed in a row; retrying)",
                        crate::tables::display(&need.tag),
                        slots()[need.index].backoff.failures()
                    );
                }
            }
            worker::notify_published();
        }
        sample_rates(&mut self.sampled_second);
        served.wanted |= anything_wanted(database);
        served
    }
}

/// Slots of `database` whose next range is wanted, not loaded yet, and not in a backoff.
fn needs(database: pg_sys::Oid) -> Vec<Need> {
    let config = &settings::config().segments;
    let now_ms = clock::monotonic_millis();
    let _lock = SLOTS.shared();
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
            || slot.backoff.pausing(now_ms)
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
        needs.push(Need { index, version: slot.version.read(), generation: wanted, tag: slot.tag(), step, block });
    }
    needs
}

/// Publishes what the worker found for a slot, unless the slot changed meanwhile. A failure
/// sets the slot's backoff and says whether it is time to log it (at most every 10 s a tag).
fn publish(need: &Need, outcome: &Outcome) -> bool {
    let slot = &slots()[need.index];
    let now_ms = clock::monotonic_millis();
    let _lock = SLOTS.exclusive();
    if slot.version.read() != need.version {
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
            slot.backoff.succeeded();
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
        Outcome::Failed(_) => slot.backoff.failed(now_ms),
    }
}

/// Whether a slot of `database` wants its next range and its allocations are not failing: its
/// worker is not idle. Why not failing ones: a worker that cannot allocate (the segment authority
/// is down) must still exit in time for DROP DATABASE; a call that waits starts it again.
fn anything_wanted(database: pg_sys::Oid) -> bool {
    let _lock = SLOTS.shared();
    slots().iter().any(|slot| {
        slot.serves(database)
            && (slot.want_next.load(Ordering::Acquire) || slot.want_len.load(Ordering::Acquire) > 0)
            && slot.state.load(Ordering::Acquire) == ACTIVE
            && !slot.backoff.failing()
    })
}

/// Records each active slot's issued count, once a second, for ids/s over the last minute.
/// `last_second` is the caller's record of the last second sampled.
fn sample_rates(last_second: &mut i64) {
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
