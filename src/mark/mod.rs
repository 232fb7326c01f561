//! The high-water marks: for each time-based family, a Unix time that none of its ids has
//! reached, made durable before the generator may reach it, together with what the ids below it
//! were made with. Why one mark per family: a family moved far ahead (an advance past a restored
//! id) must not drag the others' floors with it.
//!
//! The clock worker keeps each mark `pg_idgen.clock_reserve` ahead of its family's time in use. A
//! new record is first written to two files in the data directory (`pg_idgen.mark` and its copy
//! `pg_idgen/mark`, each fsynced and renamed into place), then to WAL as a record of pg_idgen's own
//! resource manager, flushed, and only then published to the generators as their limits.
//!
//! The files are read when shared memory is built, before any process can generate. Every
//! generator's floor is set past the mark: values continue from there, so after a restart, a crash
//! or a promotion nothing is handed out again, whatever the wall clock says, without a database
//! connection. A standby's startup process replays each mark into its files, then its shared
//! memory; a mark it cannot write stops recovery.
//!
//! What a record holds besides the mark — the snowflake layout and epoch, the node id, whether
//! snowflake ids were made — lets a start with changed settings refuse when its ids would not be
//! above the old ones. The two copies let a start notice a lost file: one copy missing means ids
//! were made here before, and the server refuses to start rather than repeat them.

use std::ffi::CStr;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

mod file_format;

use self::file_format::{parse, FileContent, MarkRecord, FORMAT_LINE, MADE_BY_PG_UPGRADE, SNOWFLAKE};
use crate::clock::{self, ClockPair};
use crate::engine::Generator;
use crate::families::{Stamp, COUNT as FAMILIES, FAMILIES as REGISTRY};
use crate::layout::Layout;
use crate::settings::Config;
use crate::shmem::SharedState;

/// The mark's file and its copy, relative to the data directory (every server process runs
/// there). pg_basebackup copies both.
const MARK_FILE: &str = "pg_idgen.mark";
const COPY_DIR: &str = "pg_idgen";
const COPY_FILE: &str = "pg_idgen/mark";

/// pg_idgen's WAL resource manager id, from the range PostgreSQL leaves to extensions (128–255).
/// Another extension using the same id stops the server at start with a message naming both.
pub const RMGR_ID: u8 = 163;
const RMGR_NAME: &CStr = c"pg_idgen";
/// Record types (the high four bits of xl_info belong to us): version 0.2's bare mark, and the
/// record that carries the file's text.
const XLOG_MARK_V0: u8 = 0x10;
const XLOG_MARK: u8 = 0x20;

/// The record for new marks: this server's layout and node id.
///
/// Why "made" is true whenever a node id is set or leased, not once an id was seen: a record must say so
/// before any snowflake id under its marks can be handed out, and a crash right after the first
/// ids would otherwise leave a record that says none were.
fn record_for(state: &SharedState, config: &Config, marks_us: [i64; FAMILIES]) -> MarkRecord {
    let made = config.node_id.is_some() || config.lease.is_some() || state.mark.snowflake_made.load(SeqCst);
    MarkRecord { marks_us, layout: Some(config.layout), node_id: config.node_id, snowflake_made: made }
}

// ---------------------------------------------------------------------------------------------
// At start: read, check, restore
// ---------------------------------------------------------------------------------------------

/// Called while shared memory is built (postmaster start, and after a crash): reads the files,
/// refuses to start when they are missing or damaged or the settings would make smaller ids, and
/// sets every generator's floor past the mark.
pub fn restore_at_start(state: &SharedState) {
    let config = crate::settings::config();
    let Some(record) = read_at_start() else {
        // A data directory that never made ids: the floors only say that nothing was handed out.
        for generator in Generator::all(config) {
            generator.raise_floor(state, 1);
        }
        return;
    };
    if let (Some(old), true) = (record.layout, record.snowflake_made) {
        check_layout_change(config, &old, record.marks_us[SNOWFLAKE]);
    }
    if let (Some(node_id), true, Some(_)) = (record.node_id, record.snowflake_made, &config.lease) {
        // Moving to a node registry: the first lease prefers the node id the ids were made with.
        state.lease.previous_node_id.store(node_id as i64, Relaxed);
    }
    if record.node_id != config.node_id {
        log!(
            "pg_idgen: node id changed from {} to {} since the last high-water mark",
            crate::settings::node_id_text(record.node_id),
            crate::settings::node_id_text(config.node_id)
        );
    }
    restore(state, config, &record);
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

fn write_hint() -> String {
    format!("pg_idgen keeps its high-water marks in {MARK_FILE} and {COPY_FILE} in the data directory: the server must be able to write both (permissions, free space).")
}

fn damaged_hint() -> String {
    format!(
        "pg_idgen keeps its high-water mark in {MARK_FILE} and {COPY_FILE} in the data directory. Restore the file from the other copy; if both are damaged, write into {MARK_FILE} a time in Unix microseconds that is later than every id this server made, and remove {COPY_FILE}."
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
            log!("pg_idgen: snowflake layout changed from {} to {}; new ids continue above the old ones", old.describe(clock::format_unix_micros), new.describe(clock::format_unix_micros));
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
                format!(
                    "changed {} would make snowflake ids smaller than ids this server already handed out",
                    names.join(", ")
                ),
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
fn restore(state: &SharedState, config: &Config, record: &MarkRecord) {
    publish(state, config, record.marks_us);
    state.mark.note_persisted(record.marks_us);
    state.mark.snowflake_made.fetch_or(record.snowflake_made, Relaxed);
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
        generator.raise_floor(state, floor);
    }
}

/// Lets each generator hand out values of times before its mark, which is durable.
fn publish(state: &SharedState, config: &Config, marks_us: [i64; FAMILIES]) {
    for (i, generator) in Generator::all(config).iter().enumerate() {
        generator.raise_mark_limit(state, generator.shape.first_stamp_from(marks_us[i]));
        state.mark.durable_us[i].fetch_max(marks_us[i], Relaxed);
    }
}

// ---------------------------------------------------------------------------------------------
// While running: the clock worker moves the mark
// ---------------------------------------------------------------------------------------------

/// For each family, the time just past the last value it handed out or may hand out next (its
/// floor): the end of that value's tick.
fn in_use_until_us(state: &SharedState, config: &Config) -> [i64; FAMILIES] {
    // Acquire: a floor raised by an advance comes with the "snowflake made" flag set before it.
    Generator::all(config).map(|generator| generator.shape.end_us(generator.cell(state).last.load(Acquire)))
}

/// The time of the newest value any generator handed out: the start of its tick.
pub fn newest_id_us(state: &SharedState, config: &Config) -> i64 {
    Generator::all(config).iter().map(|g| g.shape.start_us(g.cell(state).last.load(Relaxed))).max().unwrap_or(0)
}

/// Called by the clock worker on every look: when less than half the reserve is left between a
/// family's time in use (the generators' clock, or a value borrowed or floored past it) and its
/// mark, makes new marks a full reserve ahead of each family's time in use durable (files, then
/// WAL) and publishes them.
pub fn advance_if_due(state: &SharedState, config: &Config, now: ClockPair) {
    let reserve_us = config.clock_reserve_ms as i64 * 1000;
    let clock_us = state.generator_clock.now_us();
    let in_use_us = in_use_until_us(state, config).map(|us| us.max(clock_us));
    let durable_us: [i64; FAMILIES] = std::array::from_fn(|i| state.mark.durable_us[i].load(Relaxed));
    if (0..FAMILIES).all(|i| durable_us[i] - in_use_us[i] >= reserve_us / 2) {
        return;
    }
    let record = record_for(state, config, std::array::from_fn(|i| durable_us[i].max(in_use_us[i] + reserve_us)));
    // Why the files before WAL: a base backup whose start checkpoint falls between the two steps
    // would otherwise copy the old file and start replay after the record, and know neither.
    if let Err(message) = write_record(&record) {
        fail(PgLogLevel::ERROR, message, write_hint());
    }
    state.mark.note_persisted(record.marks_us);
    log_to_wal(&record);
    publish(state, config, record.marks_us);
    state.mark.advanced_at_us.store(now.wall_us, Relaxed);
}

/// Writes the record to WAL and waits until it is flushed: from then on, crash recovery and every
/// standby that streams this WAL know it.
fn log_to_wal(record: &MarkRecord) {
    let mut payload = record.to_text().into_bytes();
    // SAFETY: the payload outlives XLogInsert, which copies it; the record type is ours.
    unsafe {
        pg_sys::XLogBeginInsert();
        // Why `as _`: the parameters are (char *, uint32) up to PostgreSQL 17, (const void *, uint32) on 18.
        pg_sys::XLogRegisterData(payload.as_mut_ptr() as _, payload.len() as _);
        // Why "unimportant" (as PostgreSQL marks its own periodic records): an idle server then
        // still skips checkpoints and archive_timeout segment switches. It is flushed all the same.
        pg_sys::XLogSetRecordFlags(pg_sys::XLOG_MARK_UNIMPORTANT as u8);
        let lsn = pg_sys::XLogInsert(RMGR_ID, XLOG_MARK);
        pg_sys::XLogFlush(lsn);
    }
}

// ---------------------------------------------------------------------------------------------
// The files
// ---------------------------------------------------------------------------------------------

fn read_copy(path: &str) -> FileContent {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileContent::Missing,
        Err(e) => fail(PgLogLevel::FATAL, format!("could not read file \"{path}\": {e}"), damaged_hint()),
    }
}

fn write_record(record: &MarkRecord) -> Result<(), String> {
    write_text(&record.to_text())
}

/// Replaces both copies with `text`, durably: a crash leaves each the old file or the new one,
/// never a torn one, and a start takes the later of the two. Why the copy first: converting a
/// file of version 0.2, which has no copy yet, a crash between the two leaves both files. An
/// error says which file.
fn write_text(text: &str) -> Result<(), String> {
    if !Path::new(COPY_DIR).is_dir() {
        std::fs::create_dir(COPY_DIR)
            .and_then(|()| std::fs::File::open(".")?.sync_all())
            .map_err(|e| format!("could not create directory \"{COPY_DIR}\": {e}"))?;
    }
    for (dir, path) in [(COPY_DIR, COPY_FILE), (".", MARK_FILE)] {
        replace_file(Path::new(dir), path, text).map_err(|e| format!("could not write file \"{path}\": {e}"))?;
    }
    Ok(())
}

fn replace_file(dir: &Path, path: &str, text: &str) -> std::io::Result<()> {
    let temp = format!("{path}.tmp");
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

fn fail(level: PgLogLevel, message: String, hint: String) -> ! {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_IO_ERROR, message, "pg_idgen::mark").set_hint(hint).report(level);
    unreachable!("an ERROR or FATAL report does not return")
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
    let state = crate::shmem::shared();
    let config = crate::settings::config();
    let persisted_us = state.mark.persisted();
    let exact_us = in_use_until_us(state, config);
    // Why only when earlier, and a failure only logged: the files then keep the durable marks.
    if (0..FAMILIES).any(|i| exact_us[i] < persisted_us[i]) {
        let marks_us = std::array::from_fn(|i| exact_us[i].min(persisted_us[i]));
        if let Err(message) = write_record(&record_for(state, config, marks_us)) {
            warning!("pg_idgen: could not save the exact high-water marks: {message}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// WAL: the resource manager
// ---------------------------------------------------------------------------------------------

/// Registers the WAL resource manager. Called from `_PG_init` while preloading, which is the only
/// time PostgreSQL accepts one.
pub fn register_wal_resource_manager() {
    let rmgr = pg_sys::RmgrData {
        rm_name: RMGR_NAME.as_ptr(),
        rm_redo: Some(redo),
        rm_desc: Some(describe),
        rm_identify: Some(identify),
        ..Default::default()
    };
    // SAFETY: PostgreSQL copies the struct into its table.
    unsafe { pg_sys::RegisterCustomRmgr(RMGR_ID, &rmgr as *const _ as *mut _) };
}

/// The record a WAL record carries.
///
/// # Safety
/// `record` is the record being replayed or described, of pg_idgen's resource manager.
unsafe fn decode_record(record: *mut pg_sys::XLogReaderState) -> Result<MarkRecord, String> {
    // SAFETY: the reader's decoded record and its main data are valid while it is replayed.
    unsafe {
        let decoded = &*(*record).record;
        let info = decoded.header.xl_info & pg_sys::XLR_RMGR_INFO_MASK as u8;
        let bytes = std::slice::from_raw_parts(decoded.main_data.cast::<u8>(), decoded.main_data_len as usize);
        let text = String::from_utf8_lossy(bytes);
        match info {
            XLOG_MARK_V0 if bytes.len() == 8 => Ok(MarkRecord::version02(i64::from_le_bytes(bytes.try_into().unwrap_or_default()))),
            XLOG_MARK => match parse(&text) {
                FileContent::Record(record) | FileContent::Version02(record) => Ok(record),
                _ => Err(format!("a high-water mark this version cannot read: \"{}\"", text.trim().replace('\n', "; "))),
            },
            _ => Err(format!("record type 0x{info:02X}")),
        }
    }
}

/// Replays a mark (crash recovery, or a standby): this server's files, then floors and limits in
/// shared memory, so that a later restart or promotion honours it.
#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL replays `record`, a record of this resource manager.
    let record = unsafe { decode_record(record) }.unwrap_or_else(|what| {
        fail(
            PgLogLevel::ERROR,
            format!("pg_idgen cannot replay a WAL record: {what}"),
            "A newer version of pg_idgen wrote it (a family or a format this one does not know): install that version on this server.".into(),
        )
    });
    let state = crate::shmem::shared();
    // Why the files first, and why a failure stops recovery: limits from a record the files do not
    // hold would let a promoted server hand out ids that, once a checkpoint passes the record, a
    // restart forgets. Stopped here, recovery replays the record again at the next start. Why
    // only when one rises: crash recovery also replays marks older than the files'.
    let persisted_us = state.mark.persisted();
    if (0..FAMILIES).any(|i| record.marks_us[i] > persisted_us[i]) {
        let newer = MarkRecord { marks_us: std::array::from_fn(|i| record.marks_us[i].max(persisted_us[i])), ..record };
        if let Err(message) = write_record(&newer) {
            fail(PgLogLevel::ERROR, format!("could not keep a replayed high-water mark: {message}"), write_hint());
        }
    }
    restore(state, crate::settings::config(), &record);
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL describes `record`, a record of this resource manager.
    let text = match unsafe { decode_record(record) } {
        Ok(record) => format!(
            "high-water marks {}{}",
            REGISTRY.iter().zip(record.marks_us).map(|(family, us)| format!("{} {}", family.key, clock::format_unix_micros(us))).collect::<Vec<_>>().join(", "),
            record.layout.map(|l| format!("; layout {}", l.describe(clock::format_unix_micros))).unwrap_or_default()
        ),
        Err(what) => format!("unreadable: {what}"),
    };
    let text = std::ffi::CString::new(text).unwrap_or_default();
    // SAFETY: `buf` is the caller's StringInfo; the text is NUL-terminated.
    unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr()) };
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    match info & pg_sys::XLR_RMGR_INFO_MASK as u8 {
        XLOG_MARK_V0 | XLOG_MARK => c"MARK".as_ptr(),
        _ => std::ptr::null(),
    }
}

// ---------------------------------------------------------------------------------------------
// Advancing past a given id (after a restore from another server)
// ---------------------------------------------------------------------------------------------

/// How long `…_advance_past` waits for the clock worker to make the new floor durable.
const ADVANCE_WAIT_MS: i64 = 10_000;

/// Makes every later value of `generator` greater than `stamp`, durably: raises its floor, then
/// waits until the clock worker has made a mark past that value durable, so a crash right after
/// cannot forget it.
pub fn advance_past(generator: &Generator, stamp: Stamp, function: &str) {
    let shared = crate::shmem::shared();
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
        shared.mark.snowflake_made.store(true, SeqCst);
    }
    generator.raise_floor(shared, stamp.saturating_add(1));
    let needed_us = generator.shape.end_us(stamp);
    let deadline = clock::monotonic_millis() + ADVANCE_WAIT_MS;
    while shared.mark.durable_us[family].load(Relaxed) < needed_us {
        if clock::monotonic_millis() > deadline {
            crate::errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("{function}: the new floor is in effect but not yet durable"),
                Some(format!("The pg_idgen clock worker did not persist a high-water mark past {} within {} s.", clock::format_unix_micros(needed_us), ADVANCE_WAIT_MS / 1000)),
                Some("Check that the background worker \"pg_idgen clock\" runs (pg_idgen_status().clock_worker_pid), and call the function again."),
            );
        }
        shared.wake_clock_worker();
        // SAFETY: a plain sleep; interrupts are checked right after.
        unsafe { pg_sys::pg_usleep(5_000) };
        pgrx::check_for_interrupts!();
    }
}
