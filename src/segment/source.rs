//! Where ranges come from. The worker asks a `RangeSource` for each range a slot needs and
//! publishes the outcome; the hot path only ever reads the slots, so a source other than the
//! local tag table (another server's, say) plugs in here without touching it.

use pgrx::bgworkers::BackgroundWorker;
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::ranges::{Need, Outcome};
use super::table;

/// A source of ranges for the worker.
pub trait RangeSource {
    /// The next range of `need.tag`, at least `need.step` numbers long (0: the tag's own step).
    /// A range returned must be durable at the source: no number of it may be handed out again
    /// after a crash of either side.
    fn allocate(&mut self, need: &Need) -> Outcome;
}

/// The tag table of `pg_idgen.database`, in the worker's own session: each range is one
/// `UPDATE … RETURNING` on the tag's row, committed and flushed before it is published.
pub struct LocalTable;

impl RangeSource for LocalTable {
    /// An error (a lock, most often) is caught and the transaction rolled back: the worker keeps
    /// serving other tags.
    fn allocate(&mut self, need: &Need) -> Outcome {
        allocate(need)
    }
}

/// Allocates the next range of a tag in a committed, flushed transaction.
fn allocate(need: &Need) -> Outcome {
    PgTryBuilder::new(|| allocate_in_transaction(need))
        .catch_others(|error| {
            // SAFETY: the worker's own transaction, which the caught error left open.
            unsafe { pg_sys::AbortCurrentTransaction() };
            let message = match &error {
                pg_sys::panic::CaughtError::PostgresError(report)
                | pg_sys::panic::CaughtError::ErrorReport(report)
                | pg_sys::panic::CaughtError::RustPanic { ereport: report, .. } => report.message().to_string(),
            };
            Outcome::Failed(message)
        })
        .execute()
}

fn allocate_in_transaction(need: &Need) -> Outcome {
    let outcome = BackgroundWorker::transaction(|| {
        let Some(table) = table::tag_table_oid() else {
            return Outcome::NoTag; // the extension is gone from this database
        };
        // Every object qualified; the range is clamped at bigint's end, where it ends empty.
        // ONLY: no table inheriting from it may take part (only its owner could attach one).
        const ALLOCATE: &str = "UPDATE ONLY {table} AS t
                SET max_id = t.max_id OPERATOR(pg_catalog.+) r.len, updated_at = pg_catalog.now()
               FROM (SELECT s.tag,
                            LEAST(GREATEST($2, s.step::pg_catalog.int8),
                                  9223372036854775807::pg_catalog.int8 OPERATOR(pg_catalog.-) s.max_id) AS len
                       FROM ONLY {table} AS s
                      WHERE s.tag OPERATOR(pg_catalog.=) $1
                        FOR UPDATE NOWAIT) AS r
              WHERE t.tag OPERATOR(pg_catalog.=) r.tag
          RETURNING t.max_id, r.len";
        let args = [table::text_arg(&need.tag), (need.step as i64).into()];
        let row = table::run_on_tag_table(table, ALLOCATE, |sql| {
            table::as_allocation(|| Spi::get_two_with_args::<i64, i64>(sql, &args))
        });
        match row {
            Err(message) => Outcome::Failed(message),
            Ok(Ok((Some(_), Some(0)))) => Outcome::Exhausted,
            Ok(Ok((Some(max_id), Some(len)))) => Outcome::Range(max_id - len + 1, len as u64),
            Ok(_) => Outcome::NoTag,
        }
    });
    if let Outcome::Range(..) = outcome {
        // The commit record must be on disk before any number of the range is handed out, even
        // if synchronous_commit was off for this transaction.
        // SAFETY: XactLastCommitEnd is this process's last commit record, just written.
        unsafe { pg_sys::XLogFlush(pg_sys::XactLastCommitEnd) };
    }
    outcome
}
