//! Where ranges come from. The worker asks a `RangeSource` for each range a slot needs and
//! publishes the outcome; the hot path only ever reads the slots. Two sources: the local tag
//! table (`LocalTable`), and the segment authority, another server's tag table reached over
//! libpq (`Authority`), which many servers share.

use std::time::{Duration, Instant};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::remote::{self, Connection, RemoteError};

use super::table;
use crate::{tables, worker};

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

/// Sets a parameter as the superuser a SECURITY DEFINER function of pg_idgen runs as: until the
/// end of the transaction (`GUC_ACTION_LOCAL`), or until the current GUC nest level is popped
/// (`GUC_ACTION_SAVE`).
fn set_parameter(name: &std::ffi::CStr, value: &std::ffi::CStr, action: pg_sys::GucAction::Type) {
    // SAFETY: sets a parameter; both are C strings.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_SESSION,
            action,
            true,
            0,
            false,
        );
    }
}

/// Refuses (25001) unless the range is the caller's only once it is committed: the call must be
/// the whole of its statement, `SELECT … FROM pg_idgen_segment_allocate(constants or parameters)`
/// with plain columns, and that statement a transaction of its own that commits as soon as it
/// ends. Why: a range allocated in a transaction that is then rolled back is allocated again
/// later, and a caller who saw it first (a row sent before a later statement of a transaction
/// block fails, a `DO` block or function that raises after the call, a notice from an
/// expression around it, a serialization failure at commit) holds numbers that will be handed
/// out to servers. `PreventInTransactionBlock` refuses blocks and subtransactions, and makes the
/// extended protocol commit right after this statement rather than at its Sync.
fn refuse_unless_committed_alone(fcinfo: pg_sys::FunctionCallInfo) {
    const CALLER: &std::ffi::CStr = c"pg_idgen_segment_allocate()";
    // SAFETY: checks the current transaction; raises an ERROR in a block or a subtransaction.
    unsafe { pg_sys::PreventInTransactionBlock(true, CALLER.as_ptr()) };
    // SAFETY: reads the active portal's plan, valid while it runs, and this call's fcinfo.
    let alone = unsafe { is_whole_top_level_statement(fcinfo) };
    // SAFETY: reads the transaction's isolation level.
    let serializable = unsafe { pg_sys::XactIsoLevel } == pg_sys::XACT_SERIALIZABLE as i32;
    if !alone || serializable {
        crate::errors::raise(
            PgSqlErrorCode::ERRCODE_ACTIVE_SQL_TRANSACTION,
            "pg_idgen_segment_allocate() must be called alone, as a statement and transaction of its own".into(),
            Some(if serializable {
                "At isolation level SERIALIZABLE its commit could fail after the range was seen.".into()
            } else {
                "Only SELECT … FROM pg_idgen_segment_allocate($1, $2), with no other expression, function or statement around it, is accepted: the range is the caller's only once that statement committed.".into()
            }),
            None,
        );
    }
}

/// Whether this call is the one function of the top-level statement's plan: a SELECT whose plan
/// is a single function scan of it with constant or parameter arguments, plain columns and no
/// filter, subplan or init plan. (Not seen: an Execute message with a row limit, which suspends
/// the portal after the row; PostgreSQL no longer records the limit in the portal.) A nested call (from a function or `DO` block) has its own
/// expression node, never the top-level plan's.
///
/// # Safety
/// `fcinfo` is this call's; the active portal's statements are valid while it runs.
unsafe fn is_whole_top_level_statement(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    use pg_sys::NodeTag::*;
    // SAFETY: the caller's promise; every pointer is checked before it is followed.
    unsafe {
        let tag = |node: *const pg_sys::Node| if node.is_null() { T_Invalid } else { (*node).type_ };
        let only = |list: *mut pg_sys::List| -> Option<*mut std::ffi::c_void> {
            (!list.is_null() && (*list).length == 1).then(|| (*(*list).elements).ptr_value)
        };
        let portal = pg_sys::ActivePortal;
        if portal.is_null() || fcinfo.is_null() || (*fcinfo).flinfo.is_null() {
            return false;
        }
        let Some(statement) = only((*portal).stmts).map(|p| p.cast::<pg_sys::PlannedStmt>()) else { return false };
        if tag(statement.cast()) != T_PlannedStmt
            || (*statement).commandType != pg_sys::CmdType::CMD_SELECT
            || !(*statement).subplans.is_null()
            || !(*statement).utilityStmt.is_null()
        {
            return false;
        }
        let plan = (*statement).planTree;
        if tag(plan.cast()) != T_FunctionScan
            || !(*plan).initPlan.is_null()
            || !(*plan).qual.is_null()
            || !(*plan).lefttree.is_null()
            || !(*plan).righttree.is_null()
        {
            return false;
        }
        let target_list = (*plan).targetlist;
        if !target_list.is_null() {
            for i in 0..(*target_list).length as usize {
                let entry = (*(*target_list).elements.add(i)).ptr_value.cast::<pg_sys::TargetEntry>();
                if tag((*entry).expr.cast()) != T_Var {
                    return false;
                }
            }
        }
        let Some(function) = only((*plan.cast::<pg_sys::FunctionScan>()).functions).map(|p| p.cast::<pg_sys::RangeTblFunction>()) else {
            return false;
        };
        let call = (*function).funcexpr;
        if call != (*(*fcinfo).flinfo).fn_expr || tag(call) != T_FuncExpr {
            return false;
        }
        let args = (*call.cast::<pg_sys::FuncExpr>()).args;
        (0..if args.is_null() { 0 } else { (*args).length as usize })
            .all(|i| matches!(tag((*(*args).elements.add(i)).ptr_value.cast()), T_Const | T_Param))
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
    refuse_unless_committed_alone(fcinfo);
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
    set_parameter(c"synchronous_commit", c"on", pg_sys::GucAction::GUC_ACTION_LOCAL);
    let Some(table) = table::tag_table_oid() else {
        crate::errors::raise(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, "the segment tag table is missing".into(), None, None)
    };
    // For the allocation only (restored before returning: the caller must not keep a superuser's
    // session_replication_role for the rest of a DO block): only triggers the table's owner
    // enabled ALWAYS fire, as for the local worker; a row another server is allocating from is
    // waited for, briefly. An error aborts the (sub)transaction, which restores them too.
    // SAFETY: a GUC nest level opened here and popped below.
    let level = unsafe { pg_sys::NewGUCNestLevel() };
    set_parameter(c"session_replication_role", c"replica", pg_sys::GucAction::GUC_ACTION_SAVE);
    set_parameter(c"lock_timeout", c"1000", pg_sys::GucAction::GUC_ACTION_SAVE);
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
/// range is durable at the authority before it is published here. Nothing local is open while
/// it waits, and every step has a deadline (`pg_idgen.remote_timeout`).
pub struct Authority {
    conninfo: String,
    described: String,
    timeout: Duration,
    connection: Option<Connection>,
    /// The local database's encoding: tags are sent as they are stored here.
    encoding: String,
    /// After the authority was unreachable, no call before this: the other tags of the round
    /// would each wait out a deadline too.
    paused_until: Option<Instant>,
}

impl Authority {
    pub fn new(conninfo: &str, timeout_ms: u64) -> Authority {
        // SAFETY: the name of this database's encoding, a static C string.
        let encoding = unsafe { std::ffi::CStr::from_ptr(pg_sys::GetDatabaseEncodingName()) }.to_string_lossy().into_owned();
        Authority {
            conninfo: conninfo.to_string(),
            described: remote::describe_conninfo(conninfo),
            timeout: Duration::from_millis(timeout_ms),
            connection: None,
            encoding,
            paused_until: None,
        }
    }

    fn call(&mut self, need: &Need) -> Result<Outcome, RemoteError> {
        if let Some(until) = self.paused_until.filter(|&until| Instant::now() < until) {
            let _ = until;
            return Err(RemoteError::Unreachable("not tried again yet after the last failure".into()));
        }
        let deadline = Instant::now() + self.timeout;
        let stop = worker::told_to_stop;
        if self.connection.is_none() {
            let connection = Connection::open(&self.conninfo, "pg_idgen worker", Some(&self.encoding), deadline, &stop)?;
            remote::pin_session(&connection, self.timeout.as_millis() as u64, deadline, &stop)?;
            self.connection = Some(connection);
        }
        let connection = self.connection.as_ref().expect("opened above");
        let schema = remote::extension_schema(connection, deadline, &stop)?;
        let sql = format!("SELECT max_id, len FROM {schema}.pg_idgen_segment_allocate($1::pg_catalog.text, $2::pg_catalog.int8)");
        let rows = connection.query(&sql, &[&need.tag, need.step.to_string().as_bytes()], deadline, &stop)?;
        let number = |row: &remote::Row, i: usize| row[i].as_deref().and_then(|v| v.parse::<i64>().ok());
        match rows.first() {
            None => Ok(Outcome::NoTag),
            // A range fits a slot (offsets are 32 bits) and starts at 0 or above.
            Some(row) => match (number(row, 0), number(row, 1)) {
                (Some(max_id), Some(len)) if (0..=i32::MAX as i64).contains(&len) && max_id.checked_sub(len).is_some_and(|d| d >= -1) => {
                    Ok(outcome_of(Some((max_id, len))))
                }
                _ => Err(RemoteError::Refused { sqlstate: "XX000".into(), message: "the authority's answer is not a range".into() }),
            },
        }
    }
}

impl RangeSource for Authority {
    fn allocate(&mut self, need: &Need) -> Outcome {
        let status = crate::remote::authority();
        match self.call(need) {
            Ok(outcome) => {
                self.paused_until = None;
                if status.failures_in_a_row.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                    super::slot::retry_now();
                }
                status.succeeded();
                outcome
            }
            Err(error) => {
                let unreachable = !matches!(error, RemoteError::Refused { .. });
                let message = format!("the segment authority ({}): {error}", self.described);
                if unreachable {
                    if self.connection.take().is_some() || self.paused_until.is_none_or(|until| Instant::now() >= until) {
                        status.failed(&message, true);
                    }
                    self.paused_until = Some(Instant::now() + Duration::from_secs(1));
                } else {
                    status.failed(&message, false);
                }
                Outcome::Failed(message)
            }
        }
    }
}
