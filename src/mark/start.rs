//! At start: the files read and checked, and every generator's floor set past the mark, before any
//! process can generate.

use std::sync::atomic::Ordering::Relaxed;

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use super::file_format::{FileContent, MarkRecord, FORMAT_LINE, MADE_BY_PG_UPGRADE, SNOWFLAKE};
use super::files::{damaged_hint, fail, read_copy, write_hint, write_record, write_text, COPY_FILE, MARK_FILE};
use super::marks;
use crate::clock;
use crate::engine::{generators, Generator};
use crate::families::COUNT as FAMILIES;
use crate::layout::Layout;
use crate::settings::Config;

/// Called while shared memory is built (postmaster start, and after a crash): reads the files,
/// refuses to start when they are missing or damaged or the settings would make smaller ids, and
/// sets every generator's floor past the mark. Returns the node id the ids were made with when a
/// node registry is set now but was not then: the first lease prefers it.
pub fn restore_at_start() -> Option<u32> {
    let config = crate::settings::config();
    let Some(record) = read_at_start() else {
        // A data directory that never made ids: the floors only say that nothing was handed out.
        for generator in Generator::all(config) {
            generator.raise_floor(generators(), 1);
        }
        return None;
    };
    if let (Some(old), true) = (record.layout, record.snowflake_made) {
        check_layout_change(config, &old, record.marks_us[SNOWFLAKE]);
    }
    // Moving to a node registry: the first lease prefers the node id the ids were made with.
    let previous_node_id = match (record.node_id, record.snowflake_made, &config.lease) {
        (Some(node_id), true, Some(_)) => Some(node_id),
        _ => None,
    };
    if record.node_id != config.node_id {
        log!(
            "pg_idgen: node id changed from {} to {} since the last high-water mark",
            crate::settings::node_id_text(record.node_id),
            crate::settings::node_id_text(config.node_id)
        );
    }
    restore(config, &record);
    previous_node_id
}

/// The record of the files, checked: None for a new data directory. FATAL when a copy is
/// missing, damaged, or stands for an unknown past (pg_upgrade).
fn read_at_start() -> Option<MarkRecord> {
    // SAFETY: a flag set from the command line before shared memory is built.
    let binary_upgrade = unsafe { pg_sys::IsBinaryUpgrade };
    let (main, copy) = (read_copy(MARK_FILE), read_copy(COPY_FILE));
    for (file, content) in [(MARK_FILE, &main), (COPY_FILE, &copy)] {
        if let FileContent::Damaged(text) = content {
            fail(PgLogLevel::FATAL, format!("file \"{file}\" does not hold a high-water mark: \"{text}\""), damaged_hint());
        }
    }
    // Version 0.2 kept one file, in its own format: alone, it is whole. It is written anew, with
    // its copy, once the start has checked it.
    let version02 = matches!((&main, &copy), (FileContent::Version02(_), FileContent::Missing));
    let (main, copy) = match (main, copy) {
        (FileContent::Version02(record), FileContent::Missing) => (FileContent::Record(record), FileContent::Record(record)),
        (main, copy) => (main.without_version(), copy.without_version()),
    };
    let record = match (main, copy) {
        (FileContent::Missing, FileContent::Missing) if binary_upgrade => {
            // Why: a pg_upgrade target cluster is new, but the ids of the old one are not. Its
            // first normal start must wait for the old cluster's file.
            write_text(&format!("{FORMAT_LINE}\n{MADE_BY_PG_UPGRADE}\n")).unwrap_or_else(|message| fail(PgLogLevel::FATAL, message, write_hint()));
            return None;
        }
        (FileContent::Missing, FileContent::Missing) => {
            log!("pg_idgen: no high-water mark in the data directory; this server has made no ids with pg_idgen before");
            return None;
        }
        (FileContent::Record(a), FileContent::Record(b)) => {
            if version02 && !binary_upgrade {
                log!(
                    "pg_idgen: converting the high-water mark file of version 0.2 and writing its copy; it does not say which snowflake layout made the ids, so it is taken to be the one configured now"
                );
            }
            a.later(&b)
        }
        (FileContent::Record(record), FileContent::MadeByPgUpgrade) | (FileContent::MadeByPgUpgrade, FileContent::Record(record)) => {
            // The old cluster's file was copied in over one of the two: take it, for both.
            if !binary_upgrade {
                log!("pg_idgen: took the high-water marks copied from the old cluster (up to {})", clock::format_unix_micros(record.latest_us()));
            }
            record
        }
        (FileContent::MadeByPgUpgrade, _) | (_, FileContent::MadeByPgUpgrade) if binary_upgrade => return None,
        (FileContent::MadeByPgUpgrade, _) | (_, FileContent::MadeByPgUpgrade) => fail(
            PgLogLevel::FATAL,
            "pg_idgen does not know which ids the old cluster made: this data directory was made by pg_upgrade".into(),
            format!(
                "Copy the file {MARK_FILE} from the old cluster's data directory into this one, then start the server. If the old cluster never loaded pg_idgen (it made no ids), remove {MARK_FILE} and {COPY_FILE} here instead."
            ),
        ),
        (FileContent::Record(record), FileContent::Missing) => missing(COPY_FILE, MARK_FILE, &record),
        (FileContent::Missing, FileContent::Record(record)) => missing(MARK_FILE, COPY_FILE, &record),
        (FileContent::Damaged(_) | FileContent::Version02(_), _) | (_, FileContent::Damaged(_) | FileContent::Version02(_)) => {
            unreachable!("damaged files stopped the start above; version 0.2 files were converted")
        }
    };
    // Both copies in the current format, before anything can generate (a pg_upgrade start
    // writes nothing into a data directory it may go back to).
    if !binary_upgrade {
        write_record(&record).unwrap_or_else(|message| fail(PgLogLevel::FATAL, message, write_hint()));
    }
    Some(record)
}

fn missing(lost: &str, kept: &str, record: &MarkRecord) -> ! {
    fail(
        PgLogLevel::FATAL,
        format!(
            "file \"{lost}\" is missing, but \"{kept}\" shows this server made ids up to {}",
            clock::format_unix_micros(record.latest_us())
        ),
        format!(
            "Without it ids could be handed out again. Restore it from the other copy, in the data directory: cp {kept} {lost}; then start the server."
        ),
    )
}

/// Refuses to start (FATAL) when snowflake ids of the configured layout, from the mark or now
/// (whichever is later), could be at or below ids the recorded layout made before the mark.
fn check_layout_change(config: &Config, old: &Layout, mark_us: i64) {
    let new = &config.layout;
    if old.same_ids(new) {
        return;
    }
    let start_us = mark_us.max(clock::wall_unix_micros());
    let first_safe = new.first_tick_at_or_above(old.bound_before(mark_us));
    match first_safe {
        Some(tick) if new.clock().tick_start_us(tick) <= start_us => {
            log!(
                "pg_idgen: snowflake layout changed from {} to {}; new ids continue above the old ones",
                old.describe(clock::format_unix_micros),
                new.describe(clock::format_unix_micros)
            );
        }
        _ => {
            let changed = changed_settings(old, new);
            let names: Vec<&str> = changed.iter().map(|(name, _)| *name).collect();
            let back: Vec<String> = changed.iter().map(|(name, old_value)| format!("{name} = '{old_value}'")).collect();
            let later = first_safe.map(|tick| {
                format!(
                    " Or keep the new settings and start the server after {}, when their ids pass the old ones.",
                    clock::format_unix_micros(new.clock().tick_start_us(tick))
                )
            });
            ErrorReport::new(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("changed {} would make snowflake ids smaller than ids this server already handed out", names.join(", ")),
                "pg_idgen::mark",
            )
            .set_detail(format!(
                "Ids were made with layout {} up to {}; the layout {} would start below them.",
                old.describe(clock::format_unix_micros),
                clock::format_unix_micros(mark_us),
                new.describe(clock::format_unix_micros)
            ))
            .set_hint(format!("Set {} again and start the server.{}", back.join(", "), later.unwrap_or_default()))
            .report(PgLogLevel::FATAL);
        }
    }
}

/// The settings whose values differ between two layouts, with the old value. A changed preset is
/// named alone: its bits and tick come with it.
fn changed_settings(old: &Layout, new: &Layout) -> Vec<(&'static str, String)> {
    let mut changed = Vec::new();
    if old.epoch_us != new.epoch_us {
        changed.push(("pg_idgen.epoch", clock::format_unix_micros(old.epoch_us)));
    }
    if old.preset != new.preset {
        changed.push(("pg_idgen.layout", old.preset.name().into()));
        return changed;
    }
    if old.unit_ms != new.unit_ms {
        changed.push(("pg_idgen.time_unit", format!("{}ms", old.unit_ms)));
    }
    for (name, a, b) in [
        ("pg_idgen.time_bits", old.time_bits, new.time_bits),
        ("pg_idgen.node_bits", old.node_bits, new.node_bits),
        ("pg_idgen.sequence_bits", old.sequence_bits, new.sequence_bits),
    ] {
        if a != b {
            changed.push((name, a.to_string()));
        }
    }
    changed
}

/// Sets every generator's floor and limit from a record: its next value is in the first tick at
/// or past the mark (and, for snowflake ids made with another layout, above every id that layout
/// made), and it may hand out nothing until a later mark is published. At shared-memory creation
/// and during WAL replay.
pub(super) fn restore(config: &Config, record: &MarkRecord) {
    publish(config, record.marks_us);
    marks().note_persisted(record.marks_us);
    marks().snowflake_made.fetch_or(record.snowflake_made, Relaxed);
    for (i, generator) in Generator::all(config).iter().enumerate() {
        // At least 1: stamp 0 is never handed out, so a floor of 1 says that nothing was (a family
        // newer than the record has mark 0).
        let mut floor = generator.shape.first_stamp_from(record.marks_us[i]).max(1);
        if let (SNOWFLAKE, Some(old), true) = (i, record.layout, record.snowflake_made) {
            // Snowflake ids of another layout: continue above every id it can have made.
            let new = &config.layout;
            let tick = new.first_tick_at_or_above(old.bound_before(record.marks_us[i])).unwrap_or(new.max_tick() + 1);
            floor = floor.max(generator.shape.stamp(tick, 0));
        }
        generator.raise_floor(generators(), floor);
    }
}

/// Lets each generator hand out values of times before its mark, which is durable.
pub(super) fn publish(config: &Config, marks_us: [i64; FAMILIES]) {
    for (i, generator) in Generator::all(config).iter().enumerate() {
        generator.raise_mark_limit(generators(), generator.shape.first_stamp_from(marks_us[i]));
        marks().durable_us[i].fetch_max(marks_us[i], Relaxed);
    }
}
