//! Time sources, the generators' clock, and conversions between Unix time and PostgreSQL's
//! timestamp (µs since 2000).
//!
//! The region `pg_idgen clock` (`WATCH`) holds what the clock worker (`clock_worker`) records of
//! the wall clock, and where it can be woken:
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `steps` | the clock worker | one writer; counters read approximately |
//! | `worker_latch`, `worker_pid` | the clock worker, at its start and exit | one writer; calls set the latch |

pub mod tick;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicPtr, AtomicU64};

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;

use crate::shmem::{self, Shared};

/// The clock worker's watch over the wall clock (see the module's table).
#[repr(C)]
pub struct Watch {
    /// The wall-clock steps the clock worker has seen.
    pub steps: ClockSteps,
    /// The clock worker's latch while it runs (null otherwise): a generator that reached the mark
    /// sets it to ask for a new one.
    pub worker_latch: AtomicPtr<pg_sys::Latch>,
    /// Its process id while it runs, 0 otherwise (it is not in pg_stat_activity: it has no
    /// database connection).
    pub worker_pid: AtomicI32,
}

pub static WATCH: Shared<Watch> = Shared::new(c"pg_idgen clock", shmem::zeroed_is_ready);

/// Wakes the clock worker, if it runs: a generator reached the mark, or a floor was advanced.
pub fn wake_worker() {
    shmem::set_latch(&WATCH.get().worker_latch);
}

/// Microseconds between 1970-01-01 and 2000-01-01, PostgreSQL's timestamp zero.
pub const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

/// The wall clock (`CLOCK_REALTIME`), in microseconds since the Unix epoch. It can step backwards.
/// Read with libc directly: `SystemTime` adds a checked subtraction, and pgrx's `pg_sys` wrappers
/// a `sigsetjmp`, to a call that sits on the hot path of every generator.
#[inline]
pub fn wall_unix_micros() -> i64 {
    let ts = read(libc::CLOCK_REALTIME);
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

/// Microseconds of `CLOCK_MONOTONIC`, one clock for all processes of the machine. It never steps;
/// NTP slews it at the same rate as the wall clock, so the two differ only by the wall clock's
/// steps.
#[inline]
pub fn monotonic_micros() -> i64 {
    let ts = read(libc::CLOCK_MONOTONIC);
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

/// Milliseconds of `CLOCK_MONOTONIC`, for deadlines and durations.
pub fn monotonic_millis() -> i64 {
    monotonic_micros() / 1000
}

/// Milliseconds of `CLOCK_MONOTONIC_COARSE`: the same clock as `monotonic_millis`, read at the
/// kernel's last tick (up to a few ms behind it), for a fraction of the cost — what a hot path
/// compares with a deadline that has a margin of its own.
#[inline]
pub fn coarse_monotonic_millis() -> i64 {
    let ts = read(libc::CLOCK_MONOTONIC_COARSE);
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

/// The clock the generators count in (policy `keep_generating`): the monotonic clock, shifted onto
/// Unix time by an offset that only grows. It follows the wall clock forwards (the clock worker
/// raises the offset when the wall clock gains on it; a large step only once it has lasted) but
/// never backwards, so a wall-clock step back neither stops nor reverses it.
#[repr(C)]
pub struct GeneratorClock {
    /// Unix time minus monotonic time, in µs.
    offset_us: AtomicI64,
}

impl GeneratorClock {
    /// Now, in Unix µs. One clock read and one load of a line that rarely changes.
    #[inline]
    pub fn now_us(&self) -> i64 {
        monotonic_micros() + self.offset_us.load(Relaxed)
    }

    /// Moves the clock forward so that it reads at least `unix_us` at monotonic time `monotonic_us`.
    pub fn raise_to(&self, unix_us: i64, monotonic_us: i64) {
        self.offset_us.fetch_max(unix_us - monotonic_us, Relaxed);
    }

    /// Unix time minus monotonic time, in µs.
    pub fn offset_us(&self) -> i64 {
        self.offset_us.load(Relaxed)
    }

    /// What the clock read (Unix µs) at monotonic time `monotonic_us`.
    pub fn at(&self, monotonic_us: i64) -> i64 {
        monotonic_us + self.offset_us.load(Relaxed)
    }
}

/// The wall-clock steps the clock worker has seen since the server started.
#[repr(C)]
pub struct ClockSteps {
    pub backward_count: AtomicU64,
    pub backward_max_us: AtomicU64,
    pub forward_count: AtomicU64,
    pub forward_max_us: AtomicU64,
    /// `wall − monotonic` at the worker's last look (0 before the first): a worker started again
    /// also sees the steps made while it was away.
    pub(crate) last_offset_us: AtomicI64,
}

/// One reading of both clocks, taken close enough together to compare them.
#[derive(Clone, Copy, Debug)]
pub struct ClockPair {
    pub wall_us: i64,
    pub monotonic_us: i64,
}

impl ClockPair {
    /// Reads the wall clock between two monotonic reads, a few times, and keeps the tightest
    /// pair: a process descheduled between the reads would otherwise see a step that is not there.
    /// Why the later monotonic read, plus 1 µs, and not the midpoint: the offset is then smaller
    /// than the true one (each read truncates to whole µs, which can make their difference up to
    /// 1 µs too large), so the generator clock, raised to the largest offset seen, never runs
    /// ahead of the wall clock. Ahead by a µs, it stamped an ObjectId with the next second just
    /// before that second began (1 in 20 million in `objectids_borrow_a_second_only_past_16_million_in_one_second`).
    pub fn read() -> ClockPair {
        let mut best = (i64::MAX, ClockPair { wall_us: 0, monotonic_us: 0 });
        for _ in 0..8 {
            let before = monotonic_micros();
            let wall_us = wall_unix_micros();
            let after = monotonic_micros();
            if after - before < best.0 {
                best = (after - before, ClockPair { wall_us, monotonic_us: after + 1 });
            }
            if best.0 <= 20 {
                break;
            }
        }
        best.1
    }

    /// Unix time minus monotonic time: constant while nobody steps the wall clock.
    pub fn offset_us(&self) -> i64 {
        self.wall_us - self.monotonic_us
    }
}

#[inline]
fn read(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given; both clocks exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts
}

pub fn pg_to_unix_micros(pg_us: i64) -> i64 {
    pg_us + PG_EPOCH_OFFSET_US
}

pub fn unix_to_pg_micros(unix_us: i64) -> i64 {
    unix_us - PG_EPOCH_OFFSET_US
}

/// A Unix time as a `timestamptz`; out-of-range values come back as infinity.
pub fn unix_micros_to_timestamptz(unix_us: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(unix_to_pg_micros(unix_us)).unwrap_or_else(|_| TimestampWithTimeZone::positive_infinity())
}

/// A Unix time as PostgreSQL prints a `timestamptz`, for log lines.
pub fn format_unix_micros(unix_us: i64) -> String {
    unix_micros_to_timestamptz(unix_us).to_string()
}
