//! `snowflake_next()`: time + node + sequence ids from one atomic in shared memory.
//!
//! The shared state is the last id's `tick << sequence_bits | sequence`. A call moves it to
//! `max(last + 1, now)` by compare-and-swap, so ids only grow: when the clock steps back or a
//! tick's sequence is used up, `last + 1` carries into the next tick ("borrows" time). Borrowing
//! is bounded by `pg_idgen.max_clock_borrow`; past it a call waits for the clock, at most
//! `pg_idgen.max_clock_wait`, then raises an error. It never hands out a smaller id.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::time::Instant;

use pgrx::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::errors;
use crate::layout::{Layout, Parts};
use crate::settings::{self, Config};
use crate::shmem::{self, SharedState};

/// A new tick's sequence starts at a random offset below this (or a quarter of the sequence
/// space, if smaller). Why: ids made slowly would otherwise all end in sequence 0, and a table
/// sharded by `id % N` would put them all on one shard. A multiple of 16 keeps `% 2^k` even.
const MAX_START_OFFSET: u64 = 64;

/// How long one wait for the clock sleeps at most before it checks for interrupts again.
const WAIT_SLICE_US: i64 = 10_000;
/// Waits up to this long spin instead of sleeping.
const SPIN_LIMIT_US: i64 = 2_000;

#[pg_extern(volatile, parallel_safe)]
/// The next snowflake id of this server: unique, and greater than every id it handed out before.
fn snowflake_next() -> i64 {
    let state = shmem::shared();
    let config = settings::config();
    let node_id = config.node_id.unwrap_or_else(|| errors::node_id_unset());
    errors::refuse_during_recovery("snowflake_next()");
    let slot = next_slot(state, config);
    let layout = &config.layout;
    layout.compose(Parts {
        tick: slot >> layout.sequence_bits,
        node_id: node_id as u64,
        sequence: slot & layout.max_sequence(),
    })
}

/// Advances the shared state and returns the new `tick << sequence_bits | sequence`.
#[inline]
fn next_slot(state: &SharedState, config: &Config) -> u64 {
    let layout = &config.layout;
    let sequence_bits = layout.sequence_bits;
    let borrow_ticks = config.max_clock_borrow_ms / layout.unit_ms;
    let mut waited_us = 0i64;
    let mut last = state.snowflake_last.load(Ordering::Relaxed);
    loop {
        let now_us = crate::clock::watched_wall_micros(state);
        let now_tick = layout.tick_at(now_us).unwrap_or_else(|| clock_outside_layout(layout, now_us));
        let candidate = if last >> sequence_bits < now_tick {
            (now_tick << sequence_bits) | start_offset(layout)
        } else {
            last + 1
        };
        let candidate_tick = candidate >> sequence_bits;
        if candidate_tick > now_tick + borrow_ticks {
            // Ahead of the clock by more than we may borrow: wait until the clock is close enough.
            let behind_us = layout.tick_start_us(candidate_tick - borrow_ticks) - now_us;
            waited_us += wait_for_clock(config, behind_us, waited_us);
            last = state.snowflake_last.load(Ordering::Relaxed);
            continue;
        }
        if candidate_tick > layout.max_tick() {
            clock_outside_layout(layout, layout.tick_start_us(candidate_tick));
        }
        match state.snowflake_last.compare_exchange_weak(last, candidate, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return candidate,
            Err(actual) => last = actual,
        }
    }
}

/// Waits up to one slice towards `behind_us`, honouring cancel; errors past the wait limit.
/// Returns the microseconds waited.
#[cold]
fn wait_for_clock(config: &Config, behind_us: i64, waited_us: i64) -> i64 {
    let limit_us = config.max_clock_wait_ms as i64 * 1000;
    if waited_us + behind_us > limit_us {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the wall clock is {} ms behind the snowflake ids already handed out",
                (behind_us + config.max_clock_borrow_ms as i64 * 1000) / 1000
            ),
            Some(format!(
                "Ids may run ahead of the clock by pg_idgen.max_clock_borrow ({} ms); a call waits at most pg_idgen.max_clock_wait ({} ms) for the rest.",
                config.max_clock_borrow_ms, config.max_clock_wait_ms
            )),
            Some("Check the server's clock. Calls succeed again once the clock has caught up."),
        );
    }
    let started = Instant::now();
    if behind_us <= SPIN_LIMIT_US {
        // Why spin: at the layout's cap every tick ends in a wait shorter than a tick, and a
        // sleep that short oversleeps by more than it waits, costing a quarter of the cap.
        while (started.elapsed().as_micros() as i64) < behind_us {
            std::hint::spin_loop();
        }
    } else {
        unsafe { pgrx::pg_sys::pg_usleep(behind_us.min(WAIT_SLICE_US) as _) };
        pgrx::check_for_interrupts!();
    }
    started.elapsed().as_micros() as i64
}

#[cold]
fn clock_outside_layout(layout: &Layout, unix_us: i64) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
        format!("time {} does not fit the snowflake layout", crate::clock::format_unix_micros(unix_us)),
        Some(format!(
            "The layout's time bits cover {} to {}.",
            crate::clock::format_unix_micros(layout.epoch_us),
            crate::clock::format_unix_micros(layout.end_of_time_us())
        )),
        Some("Check the server's clock, or choose pg_idgen.epoch and the time bits so that they cover it."),
    )
}

thread_local! {
    /// Seeded lazily, per process: a generator seeded in the postmaster would give every backend
    /// the same stream.
    static RNG: RefCell<Option<SmallRng>> = const { RefCell::new(None) };
}

fn start_offset(layout: &Layout) -> u64 {
    let bound = MAX_START_OFFSET.min((layout.max_sequence() + 1) / 4);
    if bound <= 1 {
        return 0;
    }
    RNG.with(|rng| rng.borrow_mut().get_or_insert_with(SmallRng::from_entropy).gen_range(0..bound))
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    // The test cluster preloads pg_idgen with node id 7 and the default twitter layout (lib.rs).
    use pgrx::prelude::*;

    #[pg_test]
    fn snowflake_next_increases_and_carries_this_node() {
        let ids: Vec<i64> = (0..10_000)
            .map(|_| Spi::get_one::<i64>("SELECT snowflake_next()").unwrap().unwrap())
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids of one backend strictly increase");
        let node = Spi::get_one::<i32>(&format!("SELECT (id_decode({})).node_id", ids[0])).unwrap();
        assert_eq!(node, Some(7));
    }
}
