//! The engine of every time-based generator: a `tick << counter_bits | counter` value in one
//! shared `AtomicU64` that only moves forward.
//!
//! A call moves it to `max(last + 1, now)` by compare-and-swap. "Now" is the generators' clock
//! (`clock::GeneratorClock`, which a wall-clock step back does not move back), or the wall clock
//! itself under `pg_idgen.clock_step_policy = refuse`. When a tick's counter is used up, or the
//! wall clock is behind, `last + 1` carries into the next tick: time is "borrowed" from the
//! future. Borrowing is bounded by `pg_idgen.max_clock_borrow`; past it a call waits for the
//! clock, at most `pg_idgen.max_clock_wait`, then raises an error. No value reaches the durable
//! high-water mark (`mark`): there a call waits for the clock worker to move it. It never hands
//! out a smaller value and never sleeps unboundedly.
//!
//! Each cell also has a floor: the smallest value it may hand out since the server started (the
//! first tick past the persisted mark) or since an advance past a given id. Values continue from
//! the floor even when it is ahead of the clock, so after a crash the ids' lead over the wall
//! clock shrinks as the clock catches up rather than being kept for good.

use std::sync::atomic::Ordering;
use std::time::Instant;

use pgrx::prelude::*;

use crate::clock;
use crate::errors;
use crate::settings::{Config, StepPolicy};
use crate::shmem::{GeneratorCell, SharedState};

/// How long one wait for the clock sleeps at most before it checks for interrupts again.
const WAIT_SLICE_US: i64 = 10_000;
/// Waits up to this long spin instead of sleeping.
const SPIN_LIMIT_US: i64 = 2_000;
/// How long one wait for a new high-water mark sleeps.
const MARK_WAIT_SLICE_US: std::ffi::c_long = 1_000;

/// The clock a generator counts in: ticks of `unit_us` since `epoch_us` (Unix microseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickClock {
    pub epoch_us: i64,
    pub unit_us: i64,
    /// The largest tick the id format can hold.
    pub max_tick: u64,
}

impl TickClock {
    /// The tick of a Unix time, or None before the epoch or past `max_tick`. Rounds down: every
    /// instant inside a tick belongs to it.
    #[inline]
    pub fn tick_at(&self, unix_us: i64) -> Option<u64> {
        let since_epoch = unix_us.checked_sub(self.epoch_us)?;
        if since_epoch < 0 {
            return None;
        }
        // Why the special case: dividing by the literal compiles to a multiplication, and 1 ms
        // ticks are on the hot path of snowflake_next() and uuid_v7_next().
        let tick = if self.unit_us == 1000 { since_epoch / 1000 } else { since_epoch / self.unit_us } as u64;
        (tick <= self.max_tick).then_some(tick)
    }

    /// The Unix time (microseconds) at which a tick begins.
    pub fn tick_start_us(&self, tick: u64) -> i64 {
        self.epoch_us.saturating_add((tick as i64).saturating_mul(self.unit_us))
    }

    /// The first instant (Unix microseconds) past `max_tick`.
    pub fn end_us(&self) -> i64 {
        self.tick_start_us(self.max_tick).saturating_add(self.unit_us)
    }

    /// The first tick that starts at or after a Unix time (`max_tick + 1` past the end).
    pub fn first_tick_from(&self, unix_us: i64) -> u64 {
        let since_epoch = unix_us.saturating_sub(self.epoch_us);
        if since_epoch <= 0 {
            return 0;
        }
        (since_epoch as u64).div_ceil(self.unit_us as u64).min(self.max_tick + 1)
    }
}

/// One generator's shape: its clock, the width of its counter, its cell in shared memory, and
/// its name for messages.
pub struct Generator {
    pub name: &'static str,
    /// Its name in the mark file (`mark`).
    pub key: &'static str,
    pub clock: TickClock,
    pub counter_bits: u32,
    /// A new tick's counter starts at a random value below this. Why random: ids made slowly
    /// would otherwise all end in counter 0, and a table sharded by `id % N` would put them all on
    /// one shard. Why small: the rest of the tick stays free for the ids made in it.
    pub tick_start_below: u64,
    pub cell: fn(&SharedState) -> &GeneratorCell,
}

impl Generator {
    /// What every generator function does: check that it may run (preloaded, not a standby),
    /// then advance its cell. Returns the new `tick << counter_bits | counter`, and the state.
    #[inline]
    pub fn take(&self, function: &str) -> (u64, &'static SharedState) {
        let state = crate::shmem::shared();
        errors::refuse_during_recovery(function);
        (self.next(state, crate::settings::config()), state)
    }

    /// The first state of the first tick that starts at or after `unix_us`: every state below it
    /// belongs to a tick that started before.
    pub fn state_at(&self, unix_us: i64) -> u64 {
        self.clock.first_tick_from(unix_us) << self.counter_bits
    }

    /// The Unix time at which the tick of `state` starts.
    pub fn start_of_state_us(&self, state: u64) -> i64 {
        self.clock.tick_start_us(state >> self.counter_bits)
    }

    /// The Unix time at which the tick of `state` ends.
    pub fn end_of_state_us(&self, state: u64) -> i64 {
        self.clock.tick_start_us((state >> self.counter_bits) + 1)
    }

    /// The state of the last value handed out, or None when none was since the last restore or
    /// advance (the cell's `last` then only marks where the floor is).
    pub fn last_handed_out(&self, state: &SharedState) -> Option<u64> {
        let cell = (self.cell)(state);
        let last = cell.last.load(Ordering::Relaxed);
        (last >= cell.floor.load(Ordering::Relaxed)).then_some(last)
    }

    /// Makes `floor` the smallest state this generator may hand out from now on (it only rises).
    pub fn raise_floor(&self, state: &SharedState, floor: u64) {
        let cell = (self.cell)(state);
        cell.floor.fetch_max(floor, Ordering::SeqCst);
        cell.last.fetch_max(floor.saturating_sub(1), Ordering::SeqCst);
    }

    /// Now, in Unix µs, on the clock the policy says generators follow.
    #[inline]
    fn now_us(state: &SharedState, config: &Config) -> i64 {
        match config.clock_step_policy {
            StepPolicy::KeepGenerating => state.generator_clock.now_us(),
            // Why not the wall clock alone: a forward step that the clock worker has not accepted
            // yet (pg_idgen.clock_forward_delay) must not carry the ids with it.
            StepPolicy::Refuse => clock::wall_unix_micros().min(state.generator_clock.now_us()),
        }
    }

    /// Advances the generator's cell and returns the new `tick << counter_bits | counter`.
    #[inline]
    pub fn next(&self, state: &SharedState, config: &Config) -> u64 {
        let cell = (self.cell)(state);
        let bits = self.counter_bits;
        let borrow_ticks = (config.max_clock_borrow_ms as i64 * 1000 / self.clock.unit_us) as u64;
        let mut waited_us = 0i64;
        let mut last = cell.last.load(Ordering::Relaxed);
        let mut limit = cell.limit.load(Ordering::Relaxed);
        let mut now_us = Self::now_us(state, config);
        loop {
            let now_tick = self.clock.tick_at(now_us).unwrap_or_else(|| self.outside_clock(now_us));
            let mut candidate = last + 1;
            if candidate >> bits < now_tick {
                candidate = (now_tick << bits) | crate::random::below(self.tick_start_below);
            }
            let candidate_tick = candidate >> bits;
            // Why the floor: after a restart or an advance past a restored id, values continue
            // from the floor even while it is ahead of the clock; borrowing counts from there.
            // So the lead shrinks as the clock catches up, instead of the clock being moved.
            if candidate_tick > now_tick + borrow_ticks
                && candidate_tick > (cell.floor.load(Ordering::Relaxed) >> bits) + borrow_ticks
            {
                // Ahead of the clock by more than we may borrow: wait until it is close enough.
                let behind_us = self.clock.tick_start_us(candidate_tick - borrow_ticks) - now_us;
                waited_us += self.wait_for_clock(config, behind_us, waited_us);
                last = cell.last.load(Ordering::Relaxed);
                now_us = Self::now_us(state, config);
                continue;
            }
            if candidate_tick > self.clock.max_tick {
                self.outside_clock(self.clock.tick_start_us(candidate_tick));
            }
            if candidate >= limit {
                waited_us += self.wait_for_mark(state, config, waited_us);
                last = cell.last.load(Ordering::Relaxed);
                limit = cell.limit.load(Ordering::Relaxed);
                now_us = Self::now_us(state, config);
                continue;
            }
            // Why the clock is not read again after a lost race: `now` from a moment ago still
            // gives a value above `last`, and under contention re-reading it would double the
            // cost of every retry.
            match cell.last.compare_exchange_weak(last, candidate, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return candidate,
                Err(actual) => last = actual,
            }
        }
    }

    /// Waits up to one slice towards `behind_us`, honouring cancel; errors past the wait limit.
    /// Returns the microseconds waited.
    #[cold]
    fn wait_for_clock(&self, config: &Config, behind_us: i64, waited_us: i64) -> i64 {
        let limit_us = config.max_clock_wait_ms as i64 * 1000;
        if waited_us + behind_us > limit_us {
            let (clock_name, hint) = match config.clock_step_policy {
                StepPolicy::Refuse => (
                    "the wall clock",
                    "pg_idgen.clock_step_policy is refuse: calls fail until the wall clock has caught up. Check the server's clock, or set the policy to keep_generating.",
                ),
                StepPolicy::KeepGenerating => (
                    "pg_idgen's generator clock",
                    "More ids were asked for than the id format holds per tick; calls succeed again once the clock has caught up.",
                ),
            };
            errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "{clock_name} is {} ms behind the {} ids already handed out",
                    (behind_us + config.max_clock_borrow_ms as i64 * 1000) / 1000,
                    self.name
                ),
                Some(format!(
                    "Ids may run ahead of the clock by pg_idgen.max_clock_borrow ({} ms); a call waits at most pg_idgen.max_clock_wait ({} ms) for the rest.",
                    config.max_clock_borrow_ms, config.max_clock_wait_ms
                )),
                Some(hint),
            );
        }
        let started = Instant::now();
        if behind_us <= SPIN_LIMIT_US {
            // Why spin: at the cap every tick ends in a wait shorter than a tick, and a sleep
            // that short oversleeps by more than it waits, costing a quarter of the cap.
            while (started.elapsed().as_micros() as i64) < behind_us {
                std::hint::spin_loop();
            }
        } else {
            unsafe { pgrx::pg_sys::pg_usleep(behind_us.min(WAIT_SLICE_US) as _) };
            pgrx::check_for_interrupts!();
        }
        started.elapsed().as_micros() as i64
    }

    /// Asks the clock worker for a new high-water mark and waits a moment for it; errors once the
    /// call has waited `pg_idgen.max_clock_wait` in all. Returns the microseconds waited.
    #[cold]
    fn wait_for_mark(&self, state: &SharedState, config: &Config, waited_us: i64) -> i64 {
        if waited_us > config.max_clock_wait_ms as i64 * 1000 {
            errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("the next {} id would pass pg_idgen's persisted high-water mark", self.name),
                Some(format!(
                    "The mark is {}; the pg_idgen clock worker keeps it pg_idgen.clock_reserve ahead of the ids in use, and has not moved it within pg_idgen.max_clock_wait ({} ms).",
                    clock::format_unix_micros(self.start_of_state_us((self.cell)(state).limit.load(Ordering::Relaxed))),
                    config.max_clock_wait_ms
                )),
                Some("Check that the background worker \"pg_idgen clock\" runs (pg_idgen_status().clock_worker_pid), and the server log for its errors."),
            );
        }
        let latch = state.clock_worker_latch.load(Ordering::Acquire);
        if !latch.is_null() {
            unsafe { pgrx::pg_sys::SetLatch(latch) };
        }
        let started = Instant::now();
        unsafe { pgrx::pg_sys::pg_usleep(MARK_WAIT_SLICE_US) };
        pgrx::check_for_interrupts!();
        started.elapsed().as_micros() as i64
    }

    #[cold]
    fn outside_clock(&self, unix_us: i64) -> ! {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("time {} does not fit in a {} id", clock::format_unix_micros(unix_us), self.name),
            Some(format!(
                "{} ids cover {} to {}.",
                self.name,
                clock::format_unix_micros(self.clock.epoch_us),
                clock::format_unix_micros(self.clock.end_us())
            )),
            Some("Check the server's clock."),
        )
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::TickClock;
    use pgrx::prelude::*;

    #[pg_test]
    fn a_mark_maps_to_the_first_tick_starting_at_or_after_it() {
        // 1 ms ticks from Unix second 1, ticks 0 ..= 99.
        let clock = TickClock { epoch_us: 1_000_000, unit_us: 1000, max_tick: 99 };
        assert_eq!(clock.first_tick_from(0), 0, "before the epoch");
        assert_eq!(clock.first_tick_from(1_000_000), 0, "the start of tick 0");
        assert_eq!(clock.first_tick_from(1_000_001), 1, "inside tick 0: tick 0 may hold ids before the mark");
        assert_eq!(clock.first_tick_from(1_001_000), 1);
        assert_eq!(clock.first_tick_from(i64::MAX), 100, "past the end: max_tick + 1");
        for mark in [1_000_001, 1_050_500, 1_099_999] {
            let first = clock.first_tick_from(mark);
            assert!(clock.tick_start_us(first) >= mark && clock.tick_start_us(first - 1) < mark, "mark {mark}");
        }
    }
}
