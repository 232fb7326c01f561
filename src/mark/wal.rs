//! pg_idgen's WAL resource manager: each new mark is logged and flushed before it is published, and
//! replayed by crash recovery and by standbys into their files and shared memory.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::file_format::{parse, FileContent, MarkRecord};
use super::files::{fail, write_hint, write_record};
use super::start::restore;
use crate::clock;
use crate::families::{COUNT as FAMILIES, FAMILIES as REGISTRY};

/// pg_idgen's WAL resource manager id, from the range PostgreSQL leaves to extensions (128–255).
/// Another extension using the same id stops the server at start with a message naming both.
pub const RMGR_ID: u8 = 163;
const RMGR_NAME: &CStr = c"pg_idgen";
/// Record types (the high four bits of xl_info belong to us): version 0.2's bare mark, and the
/// record that carries the file's text.
const XLOG_MARK_V0: u8 = 0x10;
const XLOG_MARK: u8 = 0x20;

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
    // Why the files first, and why a failure stops recovery: limits from a record the files do not
    // hold would let a promoted server hand out ids that, once a checkpoint passes the record, a
    // restart forgets. Stopped here, recovery replays the record again at the next start. Why
    // only when one rises: crash recovery also replays marks older than the files'.
    let persisted_us = super::marks().persisted();
    if (0..FAMILIES).any(|i| record.marks_us[i] > persisted_us[i]) {
        let newer = MarkRecord { marks_us: std::array::from_fn(|i| record.marks_us[i].max(persisted_us[i])), ..record };
        if let Err(message) = write_record(&newer) {
            fail(PgLogLevel::ERROR, format!("could not keep a replayed high-water mark: {message}"), write_hint());
        }
    }
    restore(crate::settings::config(), &record);
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL describes `record`, a record of this resource manager.
    let text = match unsafe { decode_record(record) } {
        Ok(record) => format!(
            "high-water marks {}{}",
            REGISTRY
                .iter()
                .zip(record.marks_us)
                .map(|(family, us)| format!("{} {}", family.key, clock::format_unix_micros(us)))
                .collect::<Vec<_>>()
                .join(", "),
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

/// Writes the record to WAL and waits until it is flushed: from then on, crash recovery and every
/// standby that streams this WAL know it.
pub(super) fn log_to_wal(record: &MarkRecord) {
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
