//! The database worker's transactions: each its own, rolled back on an error without ending the
//! worker, its commit flushed before what it wrote is published; and the flag that tells
//! pg_idgen's triggers that an update is the worker's own allocation.

use pgrx::pg_sys;
use pgrx::prelude::*;

std::thread_local! {
    /// Set while this process's pg_idgen worker updates a row to allocate a range or raise a
    /// section: that update is the one change of a row that must not retire its cache.
    static ALLOCATING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this process's pg_idgen worker is allocating (see `as_allocation`): the triggers of
/// pg_idgen's other tables ask too.
pub fn is_allocating() -> bool {
    ALLOCATING.get()
}

/// Runs `f`, in the worker's own transaction (see `as_allocation`), and rolls the transaction
/// back if `f` raises an error: the worker goes on, and `on_error` gets the error's message.
pub fn in_worker_transaction<T>(f: impl FnOnce() -> T, on_error: impl Fn(String) -> T + std::panic::RefUnwindSafe) -> T {
    // Why assert: what `f` leaves behind after an error is rolled back with the transaction.
    let f = std::panic::AssertUnwindSafe(f);
    PgTryBuilder::new(|| pgrx::bgworkers::BackgroundWorker::transaction(f))
        .catch_others(|error| {
            // SAFETY: the worker's own transaction, which the caught error left open.
            unsafe { pg_sys::AbortCurrentTransaction() };
            on_error(caught_message(&error))
        })
        .execute()
}

/// Waits until this process's last commit record is on disk: what the worker committed (a range,
/// a raise) is durable before it is published, whatever `synchronous_commit` said for it.
pub fn flush_last_commit() {
    // SAFETY: XactLastCommitEnd is this process's last commit record, already written.
    unsafe { pg_sys::XLogFlush(pg_sys::XactLastCommitEnd) };
}

/// The message of an error caught from PostgreSQL or Rust.
pub fn caught_message(error: &pg_sys::panic::CaughtError) -> String {
    match error {
        pg_sys::panic::CaughtError::PostgresError(report)
        | pg_sys::panic::CaughtError::ErrorReport(report)
        | pg_sys::panic::CaughtError::RustPanic { ereport: report, .. } => report.message().to_string(),
    }
}

/// Runs the worker's allocation or raise with the tables' triggers told it is the worker's own.
pub fn as_allocation<T>(f: impl FnOnce() -> T) -> T {
    crate::tables::as_own(&ALLOCATING, f)
}
