//! The mark's two files in the data directory, `pg_idgen.mark` and its copy `pg_idgen/mark`: each
//! replaced durably (written, fsynced, renamed into place), and read at start.

use std::io::Write;
use std::path::Path;

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use super::file_format::{parse, FileContent, MarkRecord};

/// The mark's file and its copy, relative to the data directory (every server process runs
/// there). pg_basebackup copies both.
pub(super) const MARK_FILE: &str = "pg_idgen.mark";
const COPY_DIR: &str = "pg_idgen";
pub(super) const COPY_FILE: &str = "pg_idgen/mark";

pub(super) fn read_copy(path: &str) -> FileContent {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileContent::Missing,
        Err(e) => fail(PgLogLevel::FATAL, format!("could not read file \"{path}\": {e}"), damaged_hint()),
    }
}

pub(super) fn write_record(record: &MarkRecord) -> Result<(), String> {
    write_text(&record.to_text())
}

/// Replaces both copies with `text`, durably: a crash leaves each the old file or the new one,
/// never a torn one, and a start takes the later of the two. Why the copy first: converting a
/// file of version 0.2, which has no copy yet, a crash between the two leaves both files. An
/// error says which file.
pub(super) fn write_text(text: &str) -> Result<(), String> {
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

pub(super) fn fail(level: PgLogLevel, message: String, hint: String) -> ! {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_IO_ERROR, message, "pg_idgen::mark").set_hint(hint).report(level);
    unreachable!("an ERROR or FATAL report does not return")
}

pub(super) fn write_hint() -> String {
    format!("pg_idgen keeps its high-water marks in {MARK_FILE} and {COPY_FILE} in the data directory: the server must be able to write both (permissions, free space).")
}

pub(super) fn damaged_hint() -> String {
    format!(
        "pg_idgen keeps its high-water mark in {MARK_FILE} and {COPY_FILE} in the data directory. Restore the file from the other copy; if both are damaged, write into {MARK_FILE} a time in Unix microseconds that is later than every id this server made, and remove {COPY_FILE}."
    )
}
