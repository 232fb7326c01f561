//! While the server runs: the clock worker moves the marks ahead of the time in use; a call
//! advances a family past a given id; a clean stop saves the exact marks.

use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::file_format::SNOWFLAKE;
use super::files::{fail, write_hint, write_record};
use super::marks;
use super::record_for;
use super::start::publish;
use super::wal::log_to_wal;
use crate::clock::{self, ClockPair};
use crate::engine::{generators, Generator};
use crate::families::{Stamp, COUNT as FAMILIES};
use crate::settings::Config;

/// For each family, the time just past the last value it handed out or may hand out next (its
/// floor): the end of that value's tick.
fn in_use_until_us(config: &Config) -> [i64; FAMILIES] {
    let state = generators();
    // Acquire: a floor raised by an advance comes with the "snowflake made" flag set before it.
    Generator::all(config).map(|generator| generator.shape.end_us(generator.cell(state).last.load(Acquire)))
}

/// The time of the newest value any generator handed out: the start of its tick.
pub fn newest_id_us(config: &Config) -> i64 {
    let state = generators();
    Generator::all(config).iter().map(|g| g.shape.start_us(g.cell(state).last.load(Relaxed))).max().unwrap_or(0)
}

/// Called by the clock worker on every look: when less than half the reserve is left between a
/// family's time in use (the generators' clock, or a value borrowed or floored past it) and its
/// mark, makes new marks a full reserve ahead of each family's time in use durable (files, then
/// WAL) and publishes them.
pub fn advance_if_due(config: &Config, now: ClockPair) {
    let marks = marks();
    let reserve_us = config.clock_reserve_ms as i64 * 1000;
    let clock_us = generators().clock.now_us();
    let in_use_us = in_use_until_us(config).map(|us| us.max(clock_us));
    let durable_us: [i64; FAMILIES] = std::array::from_fn(|i| marks.durable_us[i].load(Relaxed));
    if (0..FAMILIES).all(|i| durable_us[i] - in_use_us[i] >= reserve_us / 2) {
        return;
    }
    let record = record_for(config, std::array::from_fn(|i| durable_us[i].max(in_use_us[i] + reserve_us)));
    // Why the files before WAL: a base backup whose start checkpoint falls between the two steps
    // would otherwise copy the old file and start replay after the record, and know neither.
    if let Err(message) = write_record(&record) {
        fail(PgLogLevel::ERROR, message, write_hint());
    }
    marks.note_persisted(record.marks_us);
    log_to_wal(&record);
    publish(config, record.marks_us);
    marks.advanced_at_us.store(now.wall_us, Relaxed);
}

/// How long `…_advance_past` waits for the clock worker to make the new floor durable.
const ADVANCE_WAIT_MS: i64 = 10_000;

/// Makes every later value of `generator` greater than `stamp`, durably: raises its floor, then
/// waits until the clock worker has made a mark past that value durable, so a crash right after
/// cannot forget it.
pub fn advance_past(generator: &Generator, stamp: Stamp, function: &str) {
    let marks = marks();
    crate::errors::refuse_during_recovery(function);
    let family = generator.family.index;
    // Why refuse the last tick: a floor past it would leave the generator nothing to hand out, ever.
    if generator.shape.tick_of(stamp) >= generator.shape.clock.max_tick {
        crate::errors::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("{function}: the given id is in the last tick its format holds, so no id could be greater"),
            Some(format!("The format's time ends at {}.", clock::format_unix_micros(generator.shape.clock.end_us()))),
            Some("Check the id: one this close to the end of the format was not made by a server with a sane clock."),
        );
    }
    if family == SNOWFLAKE {
        // Snowflake ids above which this server's must stay exist now: the records must say so
        // (SeqCst: before the floor that makes the worker write one is seen).
        marks.snowflake_made.store(true, SeqCst);
    }
    generator.raise_floor(generators(), stamp.saturating_add(1));
    let needed_us = generator.shape.end_us(stamp);
    let deadline = clock::monotonic_millis() + ADVANCE_WAIT_MS;
    while marks.durable_us[family].load(Relaxed) < needed_us {
        if clock::monotonic_millis() > deadline {
            crate::errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("{function}: the new floor is in effect but not yet durable"),
                Some(format!(
                    "The pg_idgen clock worker did not persist a high-water mark past {} within {} s.",
                    clock::format_unix_micros(needed_us),
                    ADVANCE_WAIT_MS / 1000
                )),
                Some("Check that the background worker \"pg_idgen clock\" runs (pg_idgen_status().clock_worker_pid), and call the function again."),
            );
        }
        clock::wake_worker();
        // SAFETY: a plain sleep; interrupts are checked right after.
        unsafe { pg_sys::pg_usleep(5_000) };
        pgrx::check_for_interrupts!();
    }
}

/// Saves the exact time in use when the postmaster exits cleanly, all its children gone: a clean
/// restart then continues without the reserve's gap. Why only then: no process is left that could
/// still hand out an id, so the generators' states are final; any other exit keeps the durable
/// marks in the files. Why not under pg_upgrade: that start made no ids, and must not replace a
/// file it did not write.
pub fn save_exact_marks() {
    // SAFETY: a flag set from the command line at the postmaster's start.
    if !crate::shmem::is_attached() || unsafe { pg_sys::IsBinaryUpgrade } {
        return;
    }
    let config = crate::settings::config();
    let persisted_us = marks().persisted();
    let exact_us = in_use_until_us(config);
    // Why only when earlier, and a failure only logged: the files then keep the durable marks.
    if (0..FAMILIES).any(|i| exact_us[i] < persisted_us[i]) {
        let marks_us = std::array::from_fn(|i| exact_us[i].min(persisted_us[i]));
        if let Err(message) = write_record(&record_for(config, marks_us)) {
            warning!("pg_idgen: could not save the exact high-water marks: {message}");
        }
    }
}
