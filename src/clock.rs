//! Time sources and conversions between Unix time and PostgreSQL's timestamp (µs since 2000).

use pgrx::datum::TimestampWithTimeZone;

/// Microseconds between 1970-01-01 and 2000-01-01, PostgreSQL's timestamp zero.
const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

/// The wall clock (`CLOCK_REALTIME`), in microseconds since the Unix epoch. It can step backwards.
/// Read with libc directly: `SystemTime` adds a checked subtraction, and pgrx's `pg_sys` wrappers
/// a `sigsetjmp`, to a call that sits on the hot path of every generator.
#[inline]
pub fn wall_unix_micros() -> i64 {
    let ts = read(libc::CLOCK_REALTIME);
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

/// Milliseconds of `CLOCK_MONOTONIC` (one clock for all processes), for deadlines and durations:
/// it never steps.
pub fn monotonic_millis() -> i64 {
    let ts = read(libc::CLOCK_MONOTONIC);
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

#[inline]
fn read(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
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

/// Backward steps of the wall clock smaller than this are not counted: two backends that read
/// the clock a moment apart and publish their readings in the other order look like one.
const BACKWARD_STEP_NOISE_US: i64 = 20_000;

/// Reads the wall clock and keeps the clock watch in shared memory up to date: the latest
/// reading, and each backward step seen. The shared line is written at most once a millisecond.
#[inline]
pub fn watched_wall_micros(state: &crate::shmem::SharedState) -> i64 {
    use std::sync::atomic::Ordering::Relaxed;
    let now_us = wall_unix_micros();
    let seen_us = state.wall_seen_us.load(Relaxed);
    if now_us >= seen_us + 1000 {
        state.wall_seen_us.fetch_max(now_us, Relaxed);
    } else if now_us < seen_us - BACKWARD_STEP_NOISE_US && seen_us != 0 {
        note_backward_step(state, seen_us, now_us);
    }
    now_us
}

#[cold]
fn note_backward_step(state: &crate::shmem::SharedState, seen_us: i64, now_us: i64) {
    use std::sync::atomic::Ordering::Relaxed;
    // Only the backend that moves the watch back counts the step, so one step counts once.
    if state.wall_seen_us.compare_exchange(seen_us, now_us, Relaxed, Relaxed).is_ok() {
        state.clock_backward_events.fetch_add(1, Relaxed);
        state.clock_backward_max_us.fetch_max((seen_us - now_us) as u64, Relaxed);
        pgrx::warning!("pg_idgen: the wall clock stepped back by {} ms", (seen_us - now_us) / 1000);
    }
}
