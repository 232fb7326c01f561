//! Errors that several modules raise, worded once. Each has its own SQLSTATE: a Rust panic would
//! surface as XX000 (internal error), which is for bugs only.

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
