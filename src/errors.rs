//! Errors that several modules raise, worded once. Each has its own SQLSTATE: a Rust panic would
//! surface as XX000 (internal error), which is for bugs only.

use std::ffi::c_char;

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Raises an ERROR with a SQLSTATE, and optionally a DETAIL and a HINT.
#[cold]
#[track_caller]
pub fn raise(code: PgSqlErrorCode, message: String, detail: Option<String>, hint: Option<&str>) -> ! {
    let mut report = ErrorReport::new(code, message, "pg_idgen");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("an ERROR report does not return")
}

/// Keeps Rust backtraces out of error messages, in every process that loads the library.
///
/// pgrx turns a PostgreSQL error raised inside a call into PostgreSQL (an SQL statement run
/// through SPI that fails, a cancel) into a Rust panic, and raises it again at the function's
/// boundary with the backtrace its panic hook captured (`Backtrace::capture()`) appended to the
/// DETAIL. That backtrace is captured whenever RUST_BACKTRACE is set in the server's environment,
/// so a client would see pg_idgen's code paths under an ordinary "permission denied".
/// `RUST_LIB_BACKTRACE=0` turns `Backtrace::capture()` off whatever RUST_BACKTRACE says (and
/// leaves RUST_BACKTRACE's other meaning, for panics that the default hook prints, as it is).
pub fn keep_backtraces_out_of_messages() {
    // Why set, not asked: the variable is read once, at the first capture in the process (the
    // postmaster's, inherited by every backend, or a backend's own when not preloaded), and this
    // runs in _PG_init, before any, while the process has one thread.
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
}

/// A tag or a space this transaction created and has not committed: the worker, which loads
/// numbers in transactions of its own, cannot see it yet. `what` names it (`segment tag "t"`).
#[cold]
pub fn created_in_this_transaction(what: String) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("{what} was created in this transaction, which has not committed"),
        Some("The pg_idgen worker loads numbers in transactions of its own, which see committed rows only.".into()),
        Some("Commit the transaction that creates it, then take its numbers."),
    )
}

/// Generators need the node id; there is deliberately no default two servers could share.
#[cold]
pub fn node_id_unset() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "pg_idgen.node_id is not set".into(),
        Some("Snowflake ids carry the id of the node that made them; without one, two servers could make the same id.".into()),
        Some("Set pg_idgen.node_id in postgresql.conf to a number unique to this server and restart it."),
    )
}

thread_local! {
    /// Once out of recovery, a backend never goes back into it (PostgreSQL caches this the same way).
    static RECOVERY_OVER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether recovery is over (this server is a primary). Asks PostgreSQL only until it is.
#[inline]
pub fn recovery_is_over() -> bool {
    // SAFETY: RecoveryInProgress reads shared memory that every backend is attached to.
    if !RECOVERY_OVER.get() && !unsafe { pgrx::pg_sys::RecoveryInProgress() } {
        RECOVERY_OVER.set(true);
    }
    RECOVERY_OVER.get()
}

/// Like nextval(): a standby cannot hand out ids, its primary may be handing out the same ones.
#[inline]
pub fn refuse_during_recovery(function: &str) {
    if !recovery_is_over() {
        raise(
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            format!("cannot execute {function} during recovery"),
            None,
            Some("Generate ids on the primary server."),
        )
    }
}

/// The text of a message that names things by their bytes in the database's encoding (a table's
/// or a column's name, a trigger's argument), for `raise_in_database_encoding`.
///
/// Why not `raise`: pgrx takes a message as a Rust string, which must be UTF-8, and PostgreSQL
/// sends a message's bytes on as text in the database's encoding. In a LATIN1 database a name's
/// bytes are not UTF-8, and UTF-8 bytes are read as LATIN1: the client would see either
/// replacement characters or mis-decoded ones. Pieces of our own wording are ASCII, the same
/// bytes in every encoding a database can have.
#[derive(Default)]
pub struct DatabaseText(Vec<u8>);

impl DatabaseText {
    /// Our own words: ASCII only (checked: anything else would be read wrongly somewhere).
    pub fn ascii(mut self, text: &str) -> Self {
        assert!(text.is_ascii(), "a message piece in the database's encoding must be ASCII: {text:?}");
        self.0.extend_from_slice(text.as_bytes());
        self
    }

    /// A name as the database stores it.
    pub fn name(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// A copy in PostgreSQL's memory (of the current context, which the error cleans up).
    fn to_pg(&self) -> *mut c_char {
        // SAFETY: copies at most `len` bytes of the buffer into a new NUL-terminated string.
        unsafe { pg_sys::pnstrdup(self.0.as_ptr().cast(), self.0.len()) }
    }
}

/// The payload `raise_in_database_encoding` unwinds with, up to `catch_in_database_encoding`.
struct DatabaseTextError {
    code: PgSqlErrorCode,
    message: DatabaseText,
    detail: Option<DatabaseText>,
    hint: Option<&'static str>,
}

/// Raises an ERROR whose message and detail hold names in the database's encoding. Only inside a
/// C function whose body runs under `catch_in_database_encoding` (`c_function::guarded_in_database_encoding`).
#[cold]
pub fn raise_in_database_encoding(code: PgSqlErrorCode, message: DatabaseText, detail: Option<DatabaseText>, hint: Option<&'static str>) -> ! {
    if let Some(hint) = hint {
        assert!(hint.is_ascii(), "a hint in the database's encoding must be ASCII: {hint:?}");
    }
    std::panic::panic_any(DatabaseTextError { code, message, detail, hint })
}

/// An error of `raise_in_database_encoding`, caught, its text copied into PostgreSQL's memory:
/// nothing in it needs dropping, so it may be thrown past Rust frames (`throw`).
#[derive(Clone, Copy)]
pub struct CaughtDatabaseText {
    code: i32,
    message: *mut c_char,
    detail: *mut c_char,
    hint: *mut c_char,
}

/// Runs `body`; an error it raised with `raise_in_database_encoding` comes back as `Err`, every
/// other panic goes on unwinding (to pgrx's guard around this).
pub fn catch_in_database_encoding(body: impl FnOnce() -> pg_sys::Datum) -> Result<pg_sys::Datum, CaughtDatabaseText> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(datum) => Ok(datum),
        Err(payload) => match payload.downcast::<DatabaseTextError>() {
            Ok(error) => Err(CaughtDatabaseText {
                code: error.code as i32,
                message: error.message.to_pg(),
                detail: error.detail.as_ref().map_or(std::ptr::null_mut(), DatabaseText::to_pg),
                // SAFETY: copies an ASCII string without NUL (checked when raised).
                hint: error.hint.map_or(std::ptr::null_mut(), |hint| unsafe { pg_sys::pnstrdup(hint.as_ptr().cast(), hint.len()) }),
            }),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

impl CaughtDatabaseText {
    /// Raises the error in PostgreSQL, its bytes as they are (`ThrowErrorData`).
    ///
    /// # Safety
    /// Called from the C function's own frame, outside pgrx's guard, with nothing left to drop in
    /// any Rust frame: the ERROR jumps (longjmp) past them to PostgreSQL's handler, as pgrx's own
    /// report does after its guard.
    pub unsafe fn throw(self) -> ! {
        // Declared here, unguarded: pgrx's binding would catch the jump and turn the message
        // into a Rust string again.
        unsafe extern "C-unwind" {
            fn ThrowErrorData(edata: *mut pg_sys::ErrorData);
        }
        // SAFETY: an all-zero ErrorData is "no such field" for every field ThrowErrorData reads;
        // the strings are NUL-terminated copies in PostgreSQL's memory; at ERROR it never returns.
        unsafe {
            let mut data: pg_sys::ErrorData = std::mem::zeroed();
            data.elevel = PgLogLevel::ERROR as i32;
            data.sqlerrcode = self.code;
            data.message = self.message;
            data.detail = self.detail;
            data.hint = self.hint;
            data.filename = c"pg_idgen".as_ptr();
            ThrowErrorData(&mut data);
            std::hint::unreachable_unchecked()
        }
    }
}
