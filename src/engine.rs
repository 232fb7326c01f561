//! The engine of every time-based generator: a stamp (`tick << counter_bits | counter`, see
//! `families`) in one shared `AtomicU64` that only moves forward.
//!
//! A call moves it to `max(last + 1, now)` by compare-and-swap. "Now" is the generators' clock
//! (`clock::GeneratorClock`, which a wall-clock step back does not move back), or the wall clock
//! itself under `pg_idgen.clock_step_policy = refuse`. When a tick's counter is used up, or the
//! wall clock is behind, `last + 1` carries into the next tick: time is "borrowed" from the
//! future. Borrowing is bounded by `pg_idgen.max_clock_borrow`; past it a call waits for the
//! clock, at most `pg_idgen.max_clock_wait`, then raises an error. No value reaches the durable
//! high-water mark (`mark`): there a call waits for the clock worker to move it. It never hands
//! out a smaller value and never sleeps unboundedly: every round of a call's loop either returns,
//! raises, or waits, and every wait checks for interrupts (cancel, terminate, shutdown) and counts
//! towards `pg_idgen.max_clock_wait`. A value past the format's last tick raises at once.
//!
//! Each cell also has a floor: the smallest value it may hand out since the server started (the
//! first tick past the persisted mark) or since an advance past a given id. Values continue from
//! the floor even when it is ahead of the clock, so after a crash the ids' lead over the wall
//! clock shrinks as the clock catches up rather than being kept for good.
//!
//! ## Shared memory
//!
//! The region `pg_idgen generators` (`GENERATORS`) holds a cell per family, the generators'
//! clock and the random bytes of this server start's ObjectIds:
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `cells[f].last` | every call of family `f` | compare-and-swap; only moves forward |
//! | `cells[f].limit` | the clock worker (mark), the lease worker (cap) | `limit_lock`, a spin lock; readers load it |
//! | `cells[f].mark_limit`, `floor`, `floor_clock_offset_us` | creation, the clock worker, WAL replay, advances | `fetch_max`: only rise |
//! | `cells[f].cap` | creation, the lease worker (snowflake ids only) | stores, then `limit` refreshed |
//! | `clock` | creation; the clock worker | `fetch_max` of its offset: only moves forward |
//! | `objectid_random` | creation | written before any process attaches |

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use pgrx::prelude::*;

use crate::clock::{self, GeneratorClock};
use crate::errors;
use crate::families::{self, Family, Shape, Stamp};
use crate::settings::{Config, StepPolicy};
use crate::shmem::{CacheLine, Shared};

/// The shared state of one time-based generator: three stamps (`families::Stamp`). They share a
/// cache line: every call writes `last` and reads `limit`, and the clock worker writes `limit` only
/// when it moves the mark.
#[repr(C)]
#[derive(Default)]
pub struct GeneratorCell {
    /// The stamp of the last value handed out. Moves only forward, by compare-and-swap.
    pub last: AtomicU64,
    /// The first stamp this generator may not hand out: the lower of `mark_limit` and `cap`.
    /// Written only under `limit_lock` (see `Generator::refresh_limit`).
    pub limit: AtomicU64,
    /// The smallest value it may hand out since the server started or an advance past an id;
    /// read only when a call would borrow past the clock.
    pub floor: AtomicU64,
    /// The floor's own clock: Unix µs minus monotonic µs, so that it read the floor's time when
    /// the floor was raised and runs on at the monotonic clock's speed. Only rises.
    pub floor_clock_offset_us: AtomicI64,
    /// The first tick at or past the durable high-water mark (see `mark`); only rises.
    pub mark_limit: AtomicU64,
    /// A second bound, moved either way: the end of the node id lease for snowflake ids (see
    /// `node`), `Stamp::MAX` for families without one.
    pub cap: AtomicU64,
    /// Taken (a spin lock) to write `limit`: rare, by the clock and lease workers.
    pub limit_lock: AtomicBool,
}

/// The generators' region (see the module's table).
#[repr(C)]
pub struct Generators {
    /// One cell per time-based family, at the family's index (`families::FAMILIES`).
    pub cells: [CacheLine<GeneratorCell>; families::COUNT],
    /// The generators' clock (policy keep_generating). Read by every call, raised rarely.
    pub clock: CacheLine<GeneratorClock>,
    /// The 5 random bytes of every ObjectId of this server start.
    pub objectid_random: [u8; 5],
}

pub static GENERATORS: Shared<Generators> = Shared::new(c"pg_idgen generators", init_generators);

/// Draws the ObjectId random part, once per server start (and again after a crash), as the BSON
/// spec asks. Every cell starts at zero: `mark` sets the floors, `node` the caps, `start_clock`
/// the clock, before any process can generate.
///
/// # Safety
/// As `Region::init`: zeroed memory of ours alone.
unsafe fn init_generators(at: *mut Generators) {
    // SAFETY: per the contract.
    unsafe { (*at).objectid_random = crate::random::os_bytes::<5>() };
}

/// The generators' region, or an ERROR that says how to fix a missing `shared_preload_libraries`.
#[inline]
pub fn generators() -> &'static Generators {
    GENERATORS.get()
}

/// The generator clock's offset when shared memory was torn down after a crash; postmaster only.
static CLOCK_OFFSET_AT_RESET: Mutex<Option<i64>> = Mutex::new(None);

/// Keeps the generator clock for the next shared memory, when this one is torn down after a
/// crash (in the postmaster).
pub fn keep_clock_for_restart() {
    *CLOCK_OFFSET_AT_RESET.lock().unwrap_or_else(|e| e.into_inner()) = Some(generators().clock.offset_us());
}

/// Starts the generator clock of a new shared memory: at the wall clock, or after a crash at the
/// clock the old memory had, if the durable marks cover it (`covered_us`: the earliest mark plus
/// a second). Why not the wall clock after a crash: it may be in a forward jump the clock worker
/// had not accepted yet (pg_idgen.clock_forward_delay); the new worker decides again. Only an
/// offset the persisted marks cover, though: the memory a crash tore down may hold garbage, and
/// every family's mark stays ahead of the generator clock.
pub fn start_clock(covered_us: i64) {
    let now = clock::ClockPair::read();
    let saved_offset_us = CLOCK_OFFSET_AT_RESET.lock().unwrap_or_else(|e| e.into_inner()).take();
    let clock = &generators().clock;
    match saved_offset_us.filter(|offset_us| now.monotonic_us + offset_us <= covered_us) {
        Some(offset_us) => clock.raise_to(offset_us, 0),
        None => clock.raise_to(now.wall_us, now.monotonic_us),
    }
}

/// How long one wait for the clock sleeps at most before it checks for interrupts again.
const WAIT_SLICE_US: i64 = 10_000;
/// Waits up to this long spin instead of sleeping.
const SPIN_LIMIT_US: i64 = 2_000;
/// How long one wait for a new high-water mark sleeps.
const MARK_WAIT_SLICE_US: std::ffi::c_long = 1_000;

/// What bounds the values a call may hand out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// The durable high-water mark (the caller refused a standby).
    Mark,
    /// The mark on a primary, nothing on a standby: a standby cannot move a mark (it writes no
    /// WAL), and only families unique by their random bits generate there. Checked only once a
    /// value reaches the mark, so the hot path pays nothing for it.
    MarkUnlessStandby,
}

/// What a call does when its value would pass its generator's cap (`GeneratorCell::cap`): waits
/// a moment for the cap to move and returns the µs waited, or raises. Why a function handed in
/// (`Generator::capped_by`): the cap belongs to the module that moves it (the node id lease,
/// `node`), which sits above the engine and uses it; the engine names nothing above itself.
pub type AtCap = fn(waited_us: i64) -> i64;

/// One family's generator: its shape under the configured layout, its cell in shared memory, and
/// what its calls do at its cap.
pub struct Generator {
    pub family: &'static Family,
    pub shape: Shape,
    at_cap: AtCap,
}

impl Generator {
    #[inline]
    pub fn of(family: &'static Family, config: &Config) -> Generator {
        Generator { family, shape: (family.shape)(&config.layout), at_cap: cap_never_set }
    }

    /// This generator, with `at_cap` for the calls that reach its cap. Its values never pass the
    /// cap either way; `at_cap` decides whether a call waits for the cap to move or fails.
    #[inline]
    pub fn capped_by(self, at_cap: AtCap) -> Generator {
        Generator { at_cap, ..self }
    }

    /// The generator of a family whose shape its format fixes, as a constant. Why a constant for
    /// the generator functions: the compiler then folds the clock's unit and the counter's width
    /// into the hot path, which a shape returned through the registry's function pointer hides
    /// (docs/benchmarks.md, "The cost of a change on the hot path").
    pub const fn fixed(family: &'static Family, shape: Shape) -> Generator {
        Generator { family, shape, at_cap: cap_never_set }
    }

    /// Every family's generator, in registry order.
    pub fn all(config: &Config) -> [Generator; families::COUNT] {
        families::FAMILIES.map(|family| Generator::of(family, config))
    }

    #[inline]
    pub fn cell<'a>(&self, state: &'a Generators) -> &'a GeneratorCell {
        &state.cells[self.family.index]
    }

    /// What every generator function does: check that it may run (preloaded, not a standby),
    /// then advance its cell. Returns the new stamp, and the state. Like nextval(), which a
    /// standby refuses: its primary may be handing out the same values.
    #[inline(always)]
    pub fn take(&self, function: &str) -> (Stamp, &'static Generators) {
        self.take_block(function, 1)
    }

    /// `take` for `count` consecutive stamps at once: returns the first.
    #[inline(always)]
    pub fn take_block(&self, function: &str, count: u64) -> (Stamp, &'static Generators) {
        let state = generators();
        errors::refuse_during_recovery(function);
        (self.next(state, crate::settings::config(), count, Bound::Mark), state)
    }

    /// `take` for a family whose values carry enough random bits to be unique without a mark
    /// (UUIDv7: 62, ObjectId: 40 per server start), so a hot standby may make them too. There
    /// they continue from the floors of the marks it replays: above every value its primary made
    /// before that mark, increasing through a promotion, and ahead of the clock by up to
    /// pg_idgen.clock_reserve. A standby's values and its primary's later ones may share a tick
    /// and counter; their random bits tell them apart.
    #[inline(always)]
    pub fn take_even_on_standby(&self) -> (Stamp, &'static Generators) {
        let state = generators();
        (self.next(state, crate::settings::config(), 1, Bound::MarkUnlessStandby), state)
    }

    /// The most stamps one block may take: as many ticks as ids may run ahead of the clock
    /// (`pg_idgen.max_clock_borrow`) and stay below the high-water mark (half of
    /// `pg_idgen.clock_reserve`, the least the clock worker keeps it ahead), less one; or, with
    /// no such tick, what a fresh tick holds. So a block that starts anywhere in the current
    /// tick fits without waiting, unless other calls borrowed ahead of it.
    pub fn max_block(&self, config: &Config) -> u64 {
        let ahead_ms = config.max_clock_borrow_ms.min(config.clock_reserve_ms / 2) as i64;
        let ticks = ((ahead_ms * 1000 / self.shape.clock.unit_us) as u64).saturating_sub(1);
        if ticks == 0 {
            (1 << self.shape.counter_bits) - self.shape.tick_start_below
        } else {
            ticks << self.shape.counter_bits
        }
    }

    /// The stamp of the last value handed out, or None when none was since the last restore or
    /// advance (the cell's `last` then only marks where the floor is).
    pub fn last_handed_out(&self, state: &Generators) -> Option<Stamp> {
        let cell = self.cell(state);
        let last = cell.last.load(Ordering::Relaxed);
        (last >= cell.floor.load(Ordering::Relaxed)).then_some(last)
    }

    /// Makes `floor` the smallest stamp this generator may hand out from now on (it only rises),
    /// and starts the floor's clock at its time.
    pub fn raise_floor(&self, state: &Generators, floor: Stamp) {
        let cell = self.cell(state);
        let offset_us = self.shape.start_us(floor) - clock::monotonic_micros();
        cell.floor_clock_offset_us.fetch_max(offset_us, Ordering::SeqCst);
        cell.floor.fetch_max(floor, Ordering::SeqCst);
        cell.last.fetch_max(floor.saturating_sub(1), Ordering::SeqCst);
    }

    /// Where borrowing counts from when values run ahead of the clock (`now_us`): the later of
    /// the clock and the floor; and the time that moves towards the values meanwhile, which a
    /// wait is measured from. Under keep_generating the floor's clock runs on from the floor's
    /// time at the monotonic clock's speed, so after a restart onto a slow clock (or a crash, or
    /// an advance, or a lease taken over from a server whose clock was ahead) values continue
    /// from the floor at full speed, as after a step back, instead of stopping once one borrow's
    /// worth is used. Under refuse the floor stays where it is and only the clock moves, so calls
    /// fail until the wall clock has caught up, as that policy promises.
    #[cold]
    fn borrow_origin_us(&self, cell: &GeneratorCell, config: &Config, now_us: i64) -> (i64, i64) {
        match config.clock_step_policy {
            StepPolicy::KeepGenerating => {
                let origin_us = now_us.max(clock::monotonic_micros() + cell.floor_clock_offset_us.load(Ordering::Relaxed));
                (origin_us, origin_us)
            }
            StepPolicy::Refuse => (now_us.max(self.shape.start_us(cell.floor.load(Ordering::Relaxed))), now_us),
        }
    }

    /// Lets the generator reach a new durable mark (`mark_limit` only rises).
    pub fn raise_mark_limit(&self, state: &Generators, limit: Stamp) {
        self.cell(state).mark_limit.fetch_max(limit, Ordering::SeqCst);
        self.refresh_limit(state);
    }

    /// Sets the generator's second bound (the node id lease), in either direction.
    pub fn set_cap(&self, state: &Generators, cap: Stamp) {
        self.cell(state).cap.store(cap, Ordering::SeqCst);
        self.refresh_limit(state);
    }

    /// Writes `limit` as the lower of the two bounds. Why a lock: two writers (the clock worker
    /// raising the mark, the lease worker moving the cap) must not leave the limit at a bound one
    /// of them already moved away from. Release: see the Acquire in `next`.
    fn refresh_limit(&self, state: &Generators) {
        let cell = self.cell(state);
        while cell.limit_lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        let limit = cell.mark_limit.load(Ordering::SeqCst).min(cell.cap.load(Ordering::SeqCst));
        cell.limit.store(limit, Ordering::Release);
        cell.limit_lock.store(false, Ordering::Release);
    }

    /// Now, in Unix µs, on the clock the policy says generators follow.
    #[inline]
    fn now_us(state: &Generators, config: &Config) -> i64 {
        match config.clock_step_policy {
            StepPolicy::KeepGenerating => state.clock.now_us(),
            // Why not the wall clock alone: a forward step that the clock worker has not accepted
            // yet (pg_idgen.clock_forward_delay) must not carry the ids with it.
            StepPolicy::Refuse => clock::wall_unix_micros().min(state.clock.now_us()),
        }
    }

    /// Advances the generator's cell by `count` stamps and returns the first of them. Every check
    /// (borrowing, the time bits, the high-water mark) applies to the last.
    #[inline(always)]
    fn next(&self, state: &Generators, config: &Config, count: u64, bound: Bound) -> Stamp {
        let cell = self.cell(state);
        let shape = &self.shape;
        let borrow_ticks = (config.max_clock_borrow_ms as i64 * 1000 / shape.clock.unit_us) as u64;
        let mut waited_us = 0i64;
        let mut last = cell.last.load(Ordering::Relaxed);
        // Acquire: a limit the lease worker raised comes with its new lease word (see `node`).
        let mut limit = cell.limit.load(Ordering::Acquire);
        let mut now_us = Self::now_us(state, config);
        loop {
            let now_tick = shape.clock.tick_at(now_us).unwrap_or_else(|| self.outside_clock(now_us));
            let mut candidate = last + 1;
            if shape.tick_of(candidate) < now_tick {
                candidate = shape.stamp(now_tick, crate::random::below(shape.tick_start_below));
            }
            let block_end = candidate + (count - 1);
            let candidate_tick = shape.tick_of(block_end);
            // Why the floor: after a restart or an advance past a restored id, values continue
            // from the floor even while it is ahead of the clock; borrowing counts from there.
            // The values' time stays that of the clock, so the lead shrinks as the clock catches
            // up whenever values are made slower than the cap, instead of the clock being moved.
            if candidate_tick > now_tick + borrow_ticks {
                // Why before waiting: ticks only grow, so no wait brings a value past the format's
                // last tick back into it (and the clamp below would make the wait return at once).
                if candidate_tick > shape.clock.max_tick {
                    self.past_format_end();
                }
                let (origin_us, moving_us) = self.borrow_origin_us(cell, config, now_us);
                let origin_tick = shape.clock.tick_at(origin_us).unwrap_or(shape.clock.max_tick);
                if candidate_tick > origin_tick + borrow_ticks {
                    // Ahead by more than we may borrow: wait until it is close enough.
                    let behind_us = shape.clock.tick_start_us(candidate_tick - borrow_ticks) - moving_us;
                    waited_us += self.wait_for_clock(config, behind_us, waited_us);
                    last = cell.last.load(Ordering::Relaxed);
                    now_us = Self::now_us(state, config);
                    continue;
                }
            }
            if candidate_tick > shape.clock.max_tick {
                self.past_format_end();
            }
            if block_end >= limit {
                if bound == Bound::MarkUnlessStandby && !errors::recovery_is_over() {
                    limit = Stamp::MAX;
                    continue;
                }
                if block_end >= cell.cap.load(Ordering::Acquire) {
                    waited_us += (self.at_cap)(waited_us);
                    last = cell.last.load(Ordering::Relaxed);
                    limit = cell.limit.load(Ordering::Acquire);
                    now_us = Self::now_us(state, config);
                    continue;
                }
                waited_us += self.wait_for_mark(state, config, waited_us);
                last = cell.last.load(Ordering::Relaxed);
                limit = cell.limit.load(Ordering::Acquire);
                now_us = Self::now_us(state, config);
                continue;
            }
            // Why the clock is not read again after a lost race: `now` from a moment ago still
            // gives a value above `last`, and under contention re-reading it would double the
            // cost of every retry.
            match cell.last.compare_exchange_weak(last, block_end, Ordering::AcqRel, Ordering::Relaxed) {
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
                    "pg_idgen.clock_step_policy is refuse: calls fail until the wall clock has caught up. Check the server's clock, or set the policy to 'keep_generating'.",
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
                    self.family.name
                ),
                Some(format!(
                    "Ids may run ahead of the clock by pg_idgen.max_clock_borrow ({} ms); a call waits at most pg_idgen.max_clock_wait ({} ms) for the rest.",
                    config.max_clock_borrow_ms, config.max_clock_wait_ms
                )),
                Some(hint),
            );
        }
        // Why at least 1 µs: every round of the caller's loop then adds to `waited_us`, so the
        // limit above is reached whatever `behind_us` the caller computed.
        let behind_us = behind_us.max(1);
        let started = Instant::now();
        if behind_us <= SPIN_LIMIT_US {
            // Why spin: at the cap every tick ends in a wait shorter than a tick, and a sleep
            // that short oversleeps by more than it waits, costing a quarter of the cap.
            while (started.elapsed().as_micros() as i64) < behind_us {
                std::hint::spin_loop();
            }
        } else {
            // SAFETY: a plain sleep; interrupts are checked right after.
            unsafe { pgrx::pg_sys::pg_usleep(behind_us.min(WAIT_SLICE_US) as _) };
        }
        // After a spin too: calls that keep spinning must still end at cancel and shutdown.
        pgrx::check_for_interrupts!();
        started.elapsed().as_micros() as i64
    }

    /// Asks the clock worker for a new high-water mark and waits a moment for it; errors once the
    /// call has waited `pg_idgen.max_clock_wait` in all. Returns the microseconds waited.
    #[cold]
    fn wait_for_mark(&self, state: &Generators, config: &Config, waited_us: i64) -> i64 {
        if waited_us > config.max_clock_wait_ms as i64 * 1000 {
            errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("the next {} id would pass pg_idgen's persisted high-water mark", self.family.name),
                Some(format!(
                    "The mark is {}; the pg_idgen clock worker keeps it pg_idgen.clock_reserve ahead of the ids in use, and has not moved it within pg_idgen.max_clock_wait ({} ms).",
                    clock::format_unix_micros(self.shape.start_us(self.cell(state).limit.load(Ordering::Relaxed))),
                    config.max_clock_wait_ms
                )),
                Some("Check that the background worker \"pg_idgen clock\" runs (pg_idgen_status().clock_worker_pid), and the server log for its errors."),
            );
        }
        clock::wake_worker();
        let started = Instant::now();
        // SAFETY: a plain sleep; interrupts are checked right after.
        unsafe { pgrx::pg_sys::pg_usleep(MARK_WAIT_SLICE_US) };
        pgrx::check_for_interrupts!();
        started.elapsed().as_micros() as i64
    }

    /// The next value would be past the last tick the format holds: none is left, and none will
    /// be (values only grow).
    #[cold]
    fn past_format_end(&self) -> ! {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("the {} ids of this server have reached the end of their format", self.family.name),
            Some(format!(
                "{}, and the last one handed out is in the last tick: a next one would be past the end, and ids never go back.",
                self.coverage()
            )),
            Some("pg_idgen_generators() shows when each generator's format ends and the time of its last id. Check the server's clock, and the ids given to snowflake_advance_past(), objectid_advance_past() and uuid_v7_advance_past()."),
        )
    }

    #[cold]
    fn outside_clock(&self, unix_us: i64) -> ! {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("time {} does not fit in a {} id", clock::format_unix_micros(unix_us), self.family.name),
            Some(format!("{}.", self.coverage())),
            Some("Check the server's clock."),
        )
    }

    /// "<family> ids cover <first instant> to <end>", for messages.
    fn coverage(&self) -> String {
        format!(
            "{} ids cover {} to {}",
            self.family.name,
            clock::format_unix_micros(self.shape.clock.epoch_us),
            clock::format_unix_micros(self.shape.clock.end_us())
        )
    }
}

/// The `AtCap` of a generator that nothing caps: its cap stays at `Stamp::MAX`, which no value
/// reaches (see `node::init`).
#[cold]
fn cap_never_set(_: i64) -> i64 {
    unreachable!("a value reached the cap of a generator that has none")
}
