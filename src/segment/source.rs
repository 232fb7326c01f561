//! Where ranges come from. The worker asks a `RangeSource` for each range a slot needs and
//! publishes the outcome; the hot path only ever reads the slots. Two sources: the local tag
//! table (`LocalTable`), and the segment authority, another server's tag table reached over
//! libpq (`Authority`), which many servers share.

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::remote;

use super::table;
use crate::{authority_call, tables, worker};

/// What the worker must load for one slot now.
pub struct Need {
    pub index: usize,
    pub version: u64,
    pub generation: u64,
    pub tag: Vec<u8>,
    pub step: u64,
    /// The block a `segment_next_range()` call waits for (0: none): a range must hold all of it,
    /// or none is allocated (`Outcome::TooShort`).
    pub block: u64,
}

/// What the worker found for a slot.
pub enum Outcome {
    /// A range it allocated, committed and flushed.
    Range(i64, u64),
    /// The tag's row is gone.
    NoTag,
    /// The tag is at bigint's end: there is no range `generation`.
    Exhausted,
    /// Fewer numbers than the block are left before bigint's end (how many): nothing allocated,
    /// so they stay for smaller blocks and single numbers.
    TooShort(u64),
    /// The allocation failed (a lock, …); the message is for the log.
    Failed(String),
}

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
    let outcome = worker::in_worker_transaction(
        || {
            let Some(table) = table::tag_table_oid() else {
                return Outcome::NoTag; // the extension is gone from this database
            };
            match allocate_row(table, &need.tag, need.step as i64, need.block as i64, true) {
                // Raised, not returned: the transaction must not commit a row it found wrong.
                Err(message) => pgrx::error!("{message}"),
                Ok(row) => outcome_of(row),
            }
        },
        Outcome::Failed,
    );
    if let Outcome::Range(..) = outcome {
        worker::flush_last_commit();
    }
    outcome
}

/// What an allocation's row means: `(last number, length)`, None when the tag has no row. An
/// empty range is bigint's end, or a block that does not fit before it (`allocate_row`).
fn outcome_of(row: Option<(i64, i64)>) -> Outcome {
    match row {
        Some((i64::MAX, 0)) => Outcome::Exhausted,
        Some((max_id, 0)) => Outcome::TooShort((i64::MAX - max_id) as u64),
        Some((max_id, len)) => Outcome::Range(max_id - len + 1, len as u64),
        None => Outcome::NoTag,
    }
}

/// Moves `tag`'s `max_id` past a new range of at least `step` numbers (0: the tag's own step), in
/// the caller's transaction, and returns the range's last number and length (0 at bigint's end);
/// None when the tag has no row. With `block` numbers wanted in one range (0: none) and fewer left
/// before bigint's end, the range is empty and `max_id` stays: the numbers left are not handed to
/// a block that cannot take them. `nowait`: a locked row fails at once (the local worker, which
/// serves other tags meanwhile); else the lock is waited for, up to `lock_timeout` (at the
/// authority, where servers share rows).
fn allocate_row(table: pg_sys::Oid, tag: &[u8], step: i64, block: i64, nowait: bool) -> Result<Option<(i64, i64)>, String> {
    // Every object qualified; the range is clamped at bigint's end, where it ends empty.
    // ONLY: no table inheriting from it may take part (only its owner could attach one).
    const ALLOCATE: &str = "UPDATE ONLY {table} AS t
            SET max_id = t.max_id OPERATOR(pg_catalog.+) r.len, updated_at = pg_catalog.now()
           FROM (SELECT s.tag, s.max_id AS old_max_id,
                        CASE WHEN (9223372036854775807::pg_catalog.int8 OPERATOR(pg_catalog.-) s.max_id) OPERATOR(pg_catalog.<) $3
                             THEN 0::pg_catalog.int8
                             ELSE LEAST(GREATEST($2, s.step::pg_catalog.int8),
                                        9223372036854775807::pg_catalog.int8 OPERATOR(pg_catalog.-) s.max_id)
                        END AS len
                   FROM ONLY {table} AS s
                  WHERE s.tag OPERATOR(pg_catalog.=) $1
                    FOR UPDATE {wait}) AS r
          WHERE t.tag OPERATOR(pg_catalog.=) r.tag
      RETURNING t.max_id, r.len, r.old_max_id";
    let statement = ALLOCATE.replace("{wait}", if nowait { "NOWAIT" } else { "" });
    let args = [tables::text_arg(tag), step.into(), block.into()];
    let row = table::run_on_tag_table(table, tables::Run::Allocation, &statement, |sql| {
        worker::as_allocation(|| Spi::get_three_with_args::<i64, i64, i64>(sql, &args))
    })?;
    match row {
        // Why check: a trigger on the table could have changed the new max_id under the update.
        Ok((Some(max_id), Some(len), Some(old))) if old.checked_add(len) == Some(max_id) => Ok(Some((max_id, len))),
        Ok((Some(_), Some(_), Some(_))) => {
            Err("the tag's new max_id is not its old one plus the range: something changed it under the update".into())
        }
        _ => Ok(None),
    }
}

#[pg_extern(volatile, security_definer)]
#[search_path(pg_catalog, pg_temp)]
/// At the segment authority: the next range of `tag`, for a server's pg_idgen worker, which calls
/// it over libpq as a statement of its own (the range is its once that statement committed).
/// No row when the tag does not exist; `len` 0 at bigint's end.
fn pg_idgen_segment_allocate(
    tag: tables::TextBytes,
    min_len: i64,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(max_id, i64), name!(len, i64))> {
    table::TAG.check(tag.0);
    authority_call::refuse_unless_committed_alone(fcinfo, c"pg_idgen_segment_allocate()", "pg_idgen_segment_allocate($1, $2)", "the range");
    if !(0..=i32::MAX as i64).contains(&min_len) {
        crate::errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid range length {min_len}"),
            Some(format!("A range asked for is 0 (the tag's step) to {} numbers long.", i32::MAX)),
            None,
        );
    }
    // The range is the caller's once this statement commits: durably, whatever the session (or
    // a connection pooler between) says. Until the commit, so SET LOCAL.
    authority_call::set_parameter(c"synchronous_commit", c"on", pg_sys::GucAction::GUC_ACTION_LOCAL);
    let Some(table) = table::tag_table_oid() else {
        crate::errors::raise(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, "the segment tag table is missing".into(), None, None)
    };
    // For the allocation only (restored before returning: the caller must not keep a superuser's
    // session_replication_role for the rest of a DO block): only triggers the table's owner
    // enabled ALWAYS fire, as for the local worker; a row another server is allocating from is
    // waited for, briefly. An error aborts the (sub)transaction, which restores them too.
    // SAFETY: a GUC nest level opened here and popped below.
    let level = unsafe { pg_sys::NewGUCNestLevel() };
    authority_call::set_parameter(c"session_replication_role", c"replica", pg_sys::GucAction::GUC_ACTION_SAVE);
    authority_call::set_parameter(c"lock_timeout", c"1000", pg_sys::GucAction::GUC_ACTION_SAVE);
    // Why no block: the servers that call this ask for at least `min_len` and take what there is
    // at bigint's end (their worker publishes a shorter range and learns that nothing is left).
    let allocated = allocate_row(table, tag.0, min_len, 0, false);
    // SAFETY: pops the nest level opened above.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    match allocated {
        Ok(row) => TableIterator::new(row),
        Err(message) => crate::errors::raise(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, message, None, None),
    }
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION pg_idgen_segment_allocate(text, bigint) IS
    'Segment authority: allocates the next range of a tag for another server''s pg_idgen worker (called over libpq).';
-- Only the role the other servers' workers connect as (GRANT EXECUTE to it).
REVOKE EXECUTE ON FUNCTION pg_idgen_segment_allocate(text, bigint) FROM PUBLIC;
"#,
    name = "segment_allocate",
    requires = [pg_idgen_segment_allocate]
);

/// The segment authority (`pg_idgen.segment_authority`): each range is one committed statement
/// there, `pg_idgen_segment_allocate()`, with `synchronous_commit = on` for the session, so the
/// range is durable at the authority before it is published here (`worker::Authority`: deadlines,
/// the pause after a failure, the status).
pub struct Authority(worker::Authority);

impl Authority {
    pub fn new(conninfo: &str, timeout_ms: u64) -> Authority {
        Authority(worker::Authority::new(conninfo, timeout_ms))
    }
}

impl RangeSource for Authority {
    fn allocate(&mut self, need: &Need) -> Outcome {
        let rows = self.0.call(
            |schema| format!("SELECT max_id, len FROM {schema}.pg_idgen_segment_allocate($1::pg_catalog.text, $2::pg_catalog.int8)"),
            &[&need.tag, need.step.to_string().as_bytes()],
            super::slot::retry_now,
        );
        let rows = match rows {
            Ok(rows) => rows,
            Err(message) => return Outcome::Failed(message),
        };
        let number = |row: &remote::Row, i: usize| row[i].as_deref().and_then(|v| v.parse::<i64>().ok());
        match rows.first() {
            None => Outcome::NoTag,
            // A range fits a slot (offsets are 32 bits) and starts at 0 or above.
            Some(row) => match (number(row, 0), number(row, 1)) {
                (Some(max_id), Some(len)) if (0..=i32::MAX as i64).contains(&len) && max_id.checked_sub(len).is_some_and(|d| d >= -1) => {
                    outcome_of(Some((max_id, len)))
                }
                _ => Outcome::Failed(format!("the segment authority ({}): its answer is not a range", self.0.described)),
            },
        }
    }
}
