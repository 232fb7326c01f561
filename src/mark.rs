//! The high-water mark: a Unix time that no time-based id has reached, made durable before any
//! generator may reach it.
//!
//! The clock worker keeps the mark `pg_idgen.clock_reserve` ahead of the time in use. A new mark
//! is first written to WAL as a record of pg_idgen's own resource manager and flushed, then
//! written to the file `pg_idgen.mark` in the data directory (fsynced, renamed into place), and
//! only then published to the generators as their limits. The file is read when shared memory is
//! built, before any process can generate; a standby's startup process replays each mark into its
//! shared memory and its own file. So after a restart, a crash or a promotion, every generator
//! starts past the mark, and so past every value it handed out before, whatever the wall clock
//! says and without a database connection.

use std::ffi::CStr;
use std::io::Write;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering::Relaxed;

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::clock::{self, ClockPair};
use crate::monotonic::{Generator, TickStart};
use crate::settings::Config;
use crate::shmem::SharedState;

/// The mark's file, relative to the data directory (every server process runs there). It holds the
/// mark in Unix microseconds, as decimal text. pg_basebackup copies it.
const MARK_FILE: &str = "pg_idgen.mark";
const MARK_FILE_TEMP: &str = "pg_idgen.mark.tmp";

/// pg_idgen's WAL resource manager id, from the range PostgreSQL leaves to extensions (128–255).
/// Another extension using the same id stops the server at start with a message naming both.
pub const RMGR_ID: u8 = 163;
const RMGR_NAME: &CStr = c"pg_idgen";
/// The one record type: "the mark is now X" (the high four bits of xl_info belong to us).
const XLOG_MARK: u8 = 0x10;

#[repr(C)]
pub struct MarkState {
    /// The durable mark (Unix µs): no generator hands out a value of this time or later.
    pub durable_us: AtomicI64,
    /// When the clock worker last moved the mark (Unix µs), 0 before it has.
    pub advanced_at_us: AtomicI64,
}

/// The time-based generators, each with its own clock and counter.
fn generators(config: &Config) -> [Generator; 3] {
    [crate::snowflake::generator(&config.layout), crate::objectid::GENERATOR, crate::uuid7::GENERATOR]
}

/// Sets every generator's floor and limit to `mark_us`: its next value is in the first tick at or
/// past the mark, and it may hand out nothing until a later mark is published. Only while nobody
/// generates: at shared-memory creation and during WAL replay.
pub fn restore(state: &SharedState, mark_us: i64) {
    let config = crate::settings::config();
    publish(state, config, mark_us);
    for generator in generators(config) {
        let limit = generator.state_at(mark_us);
        let first = match generator.tick_start {
            // Why: ObjectId's counter starts at a random value on every server start (BSON spec).
            TickStart::Continue => {
                let [a, b, c] = crate::random::os_bytes::<3>();
                limit | (u64::from_be_bytes([0, 0, 0, 0, 0, a, b, c]) & ((1 << generator.counter_bits) - 1))
            }
            TickStart::RandomBelow(_) => limit,
        };
        (generator.cell)(state).last.fetch_max(first.saturating_sub(1), Relaxed);
    }
    state.generator_clock.raise_to(mark_us, clock::monotonic_micros());
}

/// Lets the generators hand out values of times before `mark_us`, which is durable.
fn publish(state: &SharedState, config: &Config, mark_us: i64) {
    for generator in generators(config) {
        (generator.cell)(state).limit.fetch_max(generator.state_at(mark_us), Relaxed);
    }
    state.mark.durable_us.fetch_max(mark_us, Relaxed);
}

/// The latest `time(generator, last value)` over the generators (Unix µs).
fn latest(state: &SharedState, config: &Config, time: fn(&Generator, u64) -> i64) -> i64 {
    generators(config).iter().map(|generator| time(generator, (generator.cell)(state).last.load(Relaxed))).max().unwrap_or(0)
}

/// The time just past the last value any generator handed out: the end of its tick.
fn in_use_until_us(state: &SharedState, config: &Config) -> i64 {
    latest(state, config, Generator::end_of_state_us)
}

/// The time of the newest value any generator handed out: the start of its tick.
pub fn newest_id_us(state: &SharedState, config: &Config) -> i64 {
    latest(state, config, Generator::start_of_state_us)
}

/// Called by the clock worker on every look: when less than half the reserve is left between the
/// time in use (the generators' clock, or a value borrowed past it) and the mark, makes a new
/// mark a full reserve ahead durable (WAL, then file) and publishes it.
pub fn advance_if_due(state: &SharedState, config: &Config, now: ClockPair) {
    let reserve_us = config.clock_reserve_ms as i64 * 1000;
    let in_use_us = in_use_until_us(state, config).max(state.generator_clock.now_us());
    if state.mark.durable_us.load(Relaxed) - in_use_us >= reserve_us / 2 {
        return;
    }
    let mark_us = in_use_us + reserve_us;
    log_to_wal(mark_us);
    write_file(mark_us);
    publish(state, config, mark_us);
    state.mark.advanced_at_us.store(now.wall_us, Relaxed);
}

/// Writes the mark to WAL and waits until it is flushed: from then on, crash recovery and every
/// standby that streams this WAL know it.
fn log_to_wal(mark_us: i64) {
    let mut payload = mark_us.to_le_bytes();
    unsafe {
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterData(payload.as_mut_ptr().cast(), payload.len() as i32);
        // Why "unimportant" (as PostgreSQL marks its own periodic records): an idle server then
        // still skips checkpoints and archive_timeout segment switches. It is flushed all the same.
        pg_sys::XLogSetRecordFlags(pg_sys::XLOG_MARK_UNIMPORTANT as u8);
        let lsn = pg_sys::XLogInsert(RMGR_ID, XLOG_MARK);
        pg_sys::XLogFlush(lsn);
    }
}

/// The mark in the file, or 0 when there is none (a new cluster). A file that cannot be read
/// stops the server: starting without the mark could repeat ids.
pub fn read_file() -> i64 {
    match std::fs::read_to_string(MARK_FILE) {
        Ok(text) => text.trim().parse::<i64>().unwrap_or_else(|_| {
            fail(PgLogLevel::FATAL, format!("file \"{MARK_FILE}\" does not hold a high-water mark: \"{}\"", text.trim()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => fail(PgLogLevel::FATAL, format!("could not read file \"{MARK_FILE}\": {e}")),
    }
}

/// Replaces the file with one holding `mark_us`, durably: a crash leaves the old file or the new
/// one, never a torn one. A failure raises an ERROR.
fn write_file(mark_us: i64) {
    if let Err(e) = try_write_file(mark_us) {
        fail(PgLogLevel::ERROR, format!("could not write file \"{MARK_FILE}\": {e}"));
    }
}

fn try_write_file(mark_us: i64) -> std::io::Result<()> {
    let mut file = std::fs::File::create(MARK_FILE_TEMP)?;
    writeln!(file, "{mark_us}")?;
    file.sync_all()?;
    std::fs::rename(MARK_FILE_TEMP, MARK_FILE)?;
    std::fs::File::open(".")?.sync_all()
}

fn fail(level: PgLogLevel, message: String) -> ! {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_IO_ERROR, message, "pg_idgen::mark")
        .set_hint(format!(
            "pg_idgen keeps its high-water mark in {MARK_FILE} in the data directory. If the file is damaged, write into it a time in Unix microseconds that is later than every id this server made."
        ))
        .report(level);
    unreachable!("an ERROR or FATAL report does not return")
}

/// Registers the callback that saves the exact time in use when the postmaster exits, all its
/// children gone: a clean restart then continues without the reserve's gap. Postmaster only.
pub fn save_at_exit() {
    unsafe { pg_sys::on_shmem_exit(Some(save_exact_mark), pg_sys::Datum::from(0)) };
}

#[pg_guard]
unsafe extern "C-unwind" fn save_exact_mark(code: i32, _arg: pg_sys::Datum) {
    // Why only on a clean exit: then no process is left that could still hand out an id, so the
    // generators' states are final. Any other exit keeps the durable mark in the file.
    if code != 0 || !crate::shmem::is_attached() {
        return;
    }
    let state = crate::shmem::shared();
    let exact_us = in_use_until_us(state, crate::settings::config());
    // Why a failure is only logged: the file then keeps the durable mark, which is later.
    if exact_us < state.mark.durable_us.load(Relaxed) {
        if let Err(e) = try_write_file(exact_us) {
            warning!("pg_idgen: could not save the exact high-water mark in \"{MARK_FILE}\": {e}");
        }
    }
}

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
    // PostgreSQL copies the struct into its table.
    unsafe { pg_sys::RegisterCustomRmgr(RMGR_ID, &rmgr as *const _ as *mut _) };
}

/// The mark a record carries.
///
/// # Safety
/// `record` is the record being replayed or described, of pg_idgen's resource manager.
unsafe fn record_mark(record: *mut pg_sys::XLogReaderState) -> Option<i64> {
    unsafe {
        let decoded = &*(*record).record;
        let info = decoded.header.xl_info & pg_sys::XLR_RMGR_INFO_MASK as u8;
        if info != XLOG_MARK || decoded.main_data_len != 8 {
            return None;
        }
        let bytes = std::slice::from_raw_parts(decoded.main_data.cast::<u8>(), 8);
        Some(i64::from_le_bytes(bytes.try_into().unwrap()))
    }
}

/// Replays a mark (crash recovery, or a standby): floors and limits in shared memory, and this
/// server's own file, so that a later restart or promotion honours it.
#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    let Some(mark_us) = (unsafe { record_mark(record) }) else {
        error!("pg_idgen: unknown WAL record");
    };
    let state = crate::shmem::shared();
    let previous_us = state.mark.durable_us.load(Relaxed);
    restore(state, mark_us);
    // Why only when it rises: crash recovery also replays marks older than the file's.
    if mark_us > previous_us {
        write_file(mark_us);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    let text = match unsafe { record_mark(record) } {
        Some(mark_us) => format!("high-water mark {} ({mark_us})", clock::format_unix_micros(mark_us)),
        None => "unknown".to_string(),
    };
    let text = std::ffi::CString::new(text).unwrap_or_default();
    unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr()) };
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    if info & pg_sys::XLR_RMGR_INFO_MASK as u8 == XLOG_MARK { c"MARK".as_ptr() } else { std::ptr::null() }
}
