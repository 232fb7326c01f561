//! The background worker "pg_idgen clock": keeps the persisted high-water mark ahead of the time
//! in use, keeps the generators' clock up with the wall clock, and watches the wall clock for steps.
//!
//! It looks every 100 ms, and at once when a generator that reached the mark sets its latch. It
//! needs no database connection, so a missing or locked database never holds ids up. It runs
//! from postmaster start, through recovery and on standbys. Like the database worker it exits with
//! code 1, so the postmaster starts it again a second later.

use std::sync::atomic::Ordering::{self, Relaxed};
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::clock::{ClockPair, Watch, WATCH};
use crate::engine::generators;
use crate::settings::StepPolicy;
use crate::{mark, settings};

/// How often the worker looks at the clocks and the mark.
const LOOK_INTERVAL: Duration = Duration::from_millis(100);
/// A change of `wall − monotonic` this large between two looks is a step of the wall clock. NTP
/// slews both clocks alike, so without steps the difference stays within a few µs.
const STEP_THRESHOLD_US: i64 = 2_000;
/// The generator clock follows the wall clock at once while it is at most this far ahead; a larger
/// forward step only once it has lasted `pg_idgen.clock_forward_delay`.
const FOLLOW_AT_ONCE_US: i64 = 1_000_000;

/// A forward step of the wall clock that the generator clock has not followed yet.
struct PendingStep {
    /// Monotonic time at which the worker first saw the wall clock this far ahead.
    since_monotonic_us: i64,
    ahead_us: i64,
}

/// Registers the worker. Called from `_PG_init` while preloading.
pub fn register() {
    BackgroundWorkerBuilder::new("pg_idgen clock")
        .set_type("pg_idgen clock")
        .set_library("pg_idgen")
        .set_function("pg_idgen_clock_worker_main")
        // Why from the start, recovery included: it watches the clock on a standby too, and moves
        // the mark the moment a promotion ends recovery. It writes no WAL before that.
        .set_start_time(BgWorkerStartTime::PostmasterStart)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

#[pg_guard]
unsafe extern "C-unwind" fn unpublish(_code: i32, _arg: pg_sys::Datum) {
    let watch = WATCH.get();
    watch.worker_latch.store(std::ptr::null_mut(), Ordering::Release);
    watch.worker_pid.store(0, Relaxed);
}

#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn pg_idgen_clock_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let watch = WATCH.get();
    let config = settings::config();
    // SAFETY: MyProc is this process's, valid until exit; `unpublish` clears the pointer first.
    unsafe {
        watch.worker_latch.store(&raw mut (*pg_sys::MyProc).procLatch, Ordering::Release);
        watch.worker_pid.store(pg_sys::MyProcPid, Relaxed);
        pg_sys::before_shmem_exit(Some(unpublish), pg_sys::Datum::from(0));
    }
    log!(
        "pg_idgen clock worker started; high-water mark {}, reserve {} ms, clock step policy {}",
        crate::clock::format_unix_micros(mark::marks().latest_durable_us()),
        config.clock_reserve_ms,
        config.clock_step_policy.name()
    );
    let mut pending: Option<PendingStep> = None;
    loop {
        let now = ClockPair::read();
        watch_for_steps(watch, now, config.clock_step_policy);
        follow_wall_clock(now, config.clock_forward_delay_ms as i64 * 1000, &mut pending);
        // Why only after recovery: a standby takes its marks from the WAL it replays.
        if crate::errors::recovery_is_over() {
            mark::advance_if_due(config, now);
        }
        if !crate::sigterm::wait_latch(LOOK_INTERVAL) {
            break;
        }
    }
    // Why exit code 1: code 0 would unregister the worker for good, also after
    // pg_terminate_backend; 1 makes the postmaster start it again after the restart time.
    // SAFETY: ends this worker process; nothing of it is used after.
    unsafe { pg_sys::proc_exit(1) };
}

/// Compares `wall − monotonic` with the last look's: a change is a step of the wall clock. Counts
/// it, and logs a WARNING for a step back, a LOG line for a step forward.
fn watch_for_steps(watch: &Watch, now: ClockPair, policy: StepPolicy) {
    let steps = &watch.steps;
    let previous = steps.last_offset_us.swap(now.offset_us(), Relaxed);
    let step_us = now.offset_us() - previous;
    if previous == 0 || step_us.abs() < STEP_THRESHOLD_US {
        return;
    }
    let size = step_us.unsigned_abs();
    if step_us < 0 {
        steps.backward_count.fetch_add(1, Relaxed);
        steps.backward_max_us.fetch_max(size, Relaxed);
        let consequence = match policy {
            StepPolicy::KeepGenerating => format!(
                "ids go on from pg_idgen's generator clock, now {} ahead of the wall clock",
                seconds(generators().clock.now_us() - now.wall_us)
            ),
            StepPolicy::Refuse => "generators refuse (pg_idgen.clock_step_policy = refuse) until the wall clock has caught up".into(),
        };
        warning!("pg_idgen: the wall clock stepped back by {}; {consequence}", seconds(step_us));
    } else {
        steps.forward_count.fetch_add(1, Relaxed);
        steps.forward_max_us.fetch_max(size, Relaxed);
        log!("pg_idgen: the wall clock stepped forward by {}", seconds(step_us));
    }
}

/// Moves the generator clock up to the wall clock. Why not at once after a large forward step: a
/// wall clock set a year ahead by mistake for two seconds would otherwise carry the ids a year
/// ahead for good (the generator clock never goes back), and could use up a short layout.
fn follow_wall_clock(now: ClockPair, delay_us: i64, pending: &mut Option<PendingStep>) {
    let clock = &generators().clock;
    let ahead_us = now.wall_us - clock.at(now.monotonic_us);
    if ahead_us <= FOLLOW_AT_ONCE_US || delay_us == 0 {
        if let Some(step) = pending.take() {
            if ahead_us <= FOLLOW_AT_ONCE_US {
                log!(
                    "pg_idgen: the wall clock came back within {} of the generator clock after {}; its forward step of {} was not followed",
                    seconds(ahead_us.max(0)),
                    seconds(now.monotonic_us - step.since_monotonic_us),
                    seconds(step.ahead_us)
                );
            }
        }
        clock.raise_to(now.wall_us, now.monotonic_us);
        return;
    }
    match pending {
        None => {
            log!(
                "pg_idgen: the wall clock is {} ahead of the generator clock; ids follow it only if it stays ahead for pg_idgen.clock_forward_delay ({})",
                seconds(ahead_us),
                seconds(delay_us)
            );
            *pending = Some(PendingStep { since_monotonic_us: now.monotonic_us, ahead_us });
        }
        Some(step) if now.monotonic_us - step.since_monotonic_us >= delay_us => {
            log!("pg_idgen: the wall clock stayed ahead for {}; the generator clock follows it, {} forward", seconds(delay_us), seconds(ahead_us));
            clock.raise_to(now.wall_us, now.monotonic_us);
            *pending = None;
        }
        Some(step) => step.ahead_us = step.ahead_us.max(ahead_us),
    }
}

/// A duration for log lines: "10.000 s".
fn seconds(us: i64) -> String {
    format!("{:.3} s", us.unsigned_abs() as f64 / 1e6)
}
