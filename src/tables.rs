//! pg_idgen's own tables as its code reaches them: the segment tags, the spaces and sections of
//! per-key sequences.
//!
//! - A table is found through the catalogs (the relation of that name that belongs to extension
//!   pg_idgen), never by a name on the search path, and found again on every use: the schema may
//!   be renamed, the extension dropped and created again.
//! - Calls look a row up with an index scan through the C API (`with_row`): no SQL, no search
//!   path, no transaction id (so it works in parallel workers and read-only transactions), and a
//!   locked table makes it wait at most `pg_idgen.segment_wait_timeout`.
//! - SQL that pg_idgen does run (the worker's allocations and raises, creating and dropping tags
//!   and spaces) names every object with its schema and runs with `search_path = pg_catalog,
//!   pg_temp`: a database owner cannot plant an operator or function that pg_idgen's SQL would
//!   call. The tables' names are pasted into that SQL, and a schema's owner could rename schemas so
//!   that a name means another table by the time the statement is parsed; so while pg_idgen's
//!   statement is analysed, a hook checks that every relation it names is one of the tables found
//!   by their OIDs, and refuses it before it can run otherwise.
//! - Which triggers fire on that SQL, and with whose rights it runs, `Run` says: the worker's
//!   allocations and raises fire only the triggers the tables' owner enabled ALWAYS or REPLICA; a
//!   change a caller asked for keeps the foreign keys of other tables in force, and is refused
//!   while a trigger the owner did not enable ALWAYS would run with the caller's privileges.
//! - Arguments that name a tag or a space are their bytes in the database's encoding
//!   (`TextBytes`): they need not be UTF-8.

use std::ffi::CStr;

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::nullable::Nullable;
use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin};
use pgrx::prelude::*;

use crate::{clock, errors};

/// The text of an argument as its bytes, in the database's encoding: tags need not be UTF-8
/// (pgrx's `&str` would refuse them in a LATIN1 database).
#[derive(Clone, Copy, Debug)]
pub struct TextBytes<'a>(pub &'a [u8]);

impl FromDatum for TextBytes<'_> {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, typoid: pg_sys::Oid) -> Option<Self> {
        // SAFETY: text and bytea are both varlenas; the slice borrows the (detoasted) argument.
        unsafe { <&[u8]>::from_polymorphic_datum(datum, is_null, typoid) }.map(TextBytes)
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for TextBytes<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: the caller guarantees the argument is a text datum.
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        // SAFETY: as above.
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

unsafe impl SqlTranslatable for TextBytes<'_> {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(TextBytes);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("text"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("text")));
}

/// Text made of bytes in the database's encoding, as a result: a tag shown as it is stored.
#[derive(Clone, Debug)]
pub struct TextOut(pub Vec<u8>);

impl IntoDatum for TextOut {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        // SAFETY: cstring_to_text_with_len copies the bytes into a palloc'd text.
        Some(pg_sys::Datum::from(unsafe { pg_sys::cstring_to_text_with_len(self.0.as_ptr().cast(), self.0.len() as i32) }))
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::TEXTOID
    }
}

unsafe impl BoxRet for TextOut {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        match self.into_datum() {
            // SAFETY: a text datum for a function declared to return text.
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}

unsafe impl SqlTranslatable for TextOut {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(TextOut);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("text"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("text")));
}

/// A tag for messages: as it is when its bytes are UTF-8 (they are then also the database's own
/// bytes), with other bytes written `\xNN`, so that a message never carries invalid text.
pub fn display(tag: &[u8]) -> String {
    match std::str::from_utf8(tag) {
        Ok(text) => text.to_string(),
        Err(_) => tag.iter().map(|&b| if b.is_ascii() { (b as char).to_string() } else { format!("\\x{b:02x}") }).collect(),
    }
}

/// A text datum of `bytes` for SPI, typed `text` (a bytea varlena has the same representation).
pub fn text_arg(bytes: &[u8]) -> pgrx::datum::DatumWithOid<'_> {
    // SAFETY: the bytes are a valid text value in the database's encoding.
    unsafe { pgrx::datum::DatumWithOid::new(bytes, pg_sys::TEXTOID) }
}

/// pg_depend and its index on (refclassid, refobjid, refobjsubid): catalog OIDs, fixed in
/// PostgreSQL's catalogs (not in pgrx's bindings).
const DEPEND_RELATION_ID: u32 = 2608;
const DEPEND_REFERENCE_INDEX_ID: u32 = 2674;

/// The OID of the relation named `name` that is a member of extension pg_idgen (its tables are
/// found this way, never through the search path). None when the extension is not installed.
pub fn extension_table_oid(name: &CStr) -> Option<pg_sys::Oid> {
    // SAFETY: catalog scans in a transaction, with the catalog snapshot; the scan and the
    // relation are closed before returning.
    unsafe {
        let extension = pg_sys::get_extension_oid(c"pg_idgen".as_ptr(), true);
        if extension == pg_sys::InvalidOid {
            return None;
        }
        let depend = pg_sys::table_open(pg_sys::Oid::from(DEPEND_RELATION_ID), pg_sys::AccessShareLock as i32);
        let mut keys = [pg_sys::ScanKeyData::default(); 2];
        // Attributes of pg_depend: 1 classid, 2 objid, 4 refclassid, 5 refobjid, 7 deptype.
        pg_sys::ScanKeyInit(&mut keys[0], 4, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_OIDEQ), pg_sys::ExtensionRelationId.into());
        pg_sys::ScanKeyInit(&mut keys[1], 5, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_OIDEQ), extension.into());
        let scan = pg_sys::systable_beginscan(
            depend,
            pg_sys::Oid::from(DEPEND_REFERENCE_INDEX_ID),
            true,
            std::ptr::null_mut(),
            2,
            keys.as_mut_ptr(),
        );
        let mut found = None;
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() {
                break;
            }
            let desc = (*depend).rd_att;
            let mut null = false;
            let classid = pg_sys::Oid::from_datum(pg_sys::heap_getattr(tuple, 1, desc, &mut null), false).unwrap_or_default();
            let objid = pg_sys::Oid::from_datum(pg_sys::heap_getattr(tuple, 2, desc, &mut null), false).unwrap_or_default();
            let deptype = pg_sys::heap_getattr(tuple, 7, desc, &mut null).value() as u8;
            if classid == pg_sys::RelationRelationId && deptype == b'e' {
                let relation_name = pg_sys::get_rel_name(objid);
                if !relation_name.is_null() && CStr::from_ptr(relation_name) == name {
                    found = Some(objid);
                    break;
                }
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(depend, pg_sys::AccessShareLock as i32);
        found
    }
}

/// The tag table's name for SQL text: schema and table, each quoted as needed. An error (for
/// the log, or to raise) when the table went meanwhile or its schema's name is not UTF-8 text
/// (it could not be written into SQL without changing it).
pub fn qualified_name(table: pg_sys::Oid) -> Result<String, String> {
    // SAFETY: the lookups return palloc'd C strings or NULL; quote_qualified_identifier gets
    // only non-NULL ones.
    unsafe {
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(table));
        let name = pg_sys::get_rel_name(table);
        if schema.is_null() || name.is_null() {
            return Err("pg_idgen's table was dropped".into());
        }
        let quoted = CStr::from_ptr(pg_sys::quote_qualified_identifier(schema, name));
        quoted.to_str().map(str::to_string).map_err(|_| {
            format!("pg_idgen's table name {} is not UTF-8 text, which pg_idgen's SQL cannot name", display(quoted.to_bytes()))
        })
    }
}

/// Reads the row of table `table_name` (of extension pg_idgen) whose text column `key_column`,
/// its primary key, is `key`, as this transaction sees it: `read` gets the open relation and
/// the tuple. None when there is no such row or table. No SQL, no search path, no transaction id.
/// Waits for a lock on the table until `deadline_ms` (monotonic), then raises 55P03 with
/// "could not look up {what()}".
pub fn with_row<T>(
    table_name: &CStr,
    key_column: &CStr,
    key: &[u8],
    deadline_ms: i64,
    what: &dyn Fn() -> String,
    read: impl FnOnce(pg_sys::Relation, pg_sys::HeapTuple) -> T,
) -> Option<T> {
    // Why look again once locked: the table may have been dropped (and the extension created
    // anew) while the lock was awaited.
    let table = loop {
        let table = extension_table_oid(table_name)?;
        lock_until(table, deadline_ms, what);
        if extension_table_oid(table_name) == Some(table) {
            break table;
        }
    };
    // SAFETY: the table is locked; the scan uses the statement's snapshot and ends before the
    // relation is closed (the lock is kept to the end of the transaction, as PostgreSQL does).
    unsafe {
        let relation = pg_sys::table_open(table, pg_sys::NoLock as i32);
        let column = pg_sys::get_attnum(table, key_column.as_ptr());
        let index = primary_key_index(relation);
        if index != pg_sys::InvalidOid {
            lock_until(index, deadline_ms, what); // a REINDEX must not hold the call either
        }
        let value = pg_sys::cstring_to_text_with_len(key.as_ptr().cast(), key.len() as i32);
        let (mut type_oid, mut typmod, mut collation) = (pg_sys::InvalidOid, 0, pg_sys::InvalidOid);
        pg_sys::get_atttypetypmodcoll(table, column, &mut type_oid, &mut typmod, &mut collation);
        let mut scan_key = pg_sys::ScanKeyData::default();
        // Why the column's collation: the primary key index orders by it, and the scan must
        // descend the index in the same order.
        pg_sys::ScanKeyEntryInitialize(
            &mut scan_key,
            0,
            column,
            pg_sys::BTEqualStrategyNumber as u16,
            pg_sys::InvalidOid,
            collation,
            pg_sys::Oid::from(pg_sys::F_TEXTEQ),
            pg_sys::Datum::from(value),
        );
        let snapshot = if pg_sys::ActiveSnapshotSet() { pg_sys::GetActiveSnapshot() } else { pg_sys::GetTransactionSnapshot() };
        let scan = pg_sys::systable_beginscan(relation, index, index != pg_sys::InvalidOid, snapshot, 1, &mut scan_key);
        let tuple = pg_sys::systable_getnext(scan);
        let found = (!tuple.is_null()).then(|| read(relation, tuple));
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(relation, pg_sys::NoLock as i32);
        found
    }
}

/// Whether the row `with_row` finds for `key` is one this transaction inserted and has not
/// committed (a row of another transaction that has not committed is not seen at all).
pub fn row_inserted_here(table_name: &CStr, key_column: &CStr, key: &[u8], deadline_ms: i64, what: &dyn Fn() -> String) -> bool {
    with_row(table_name, key_column, key, deadline_ms, what, |_, tuple| {
        // SAFETY: the tuple is the scan's current one, valid while `read` runs.
        unsafe { pg_sys::TransactionIdIsCurrentTransactionId(pg_sys::submodules::htup::HeapTupleHeaderGetXmin((*tuple).t_data)) }
    })
    .unwrap_or(false)
}

/// Takes ACCESS SHARE on a relation (the table, its index), waiting at most until the deadline (a
/// session holding ACCESS EXCLUSIVE would otherwise hold the call for as long as it likes).
pub fn lock_until(relation: pg_sys::Oid, deadline_ms: i64, what: &dyn Fn() -> String) {
    // SAFETY: a lock request on an existing relation; released at the end of the transaction.
    while !unsafe { pg_sys::ConditionalLockRelationOid(relation, pg_sys::AccessShareLock as i32) } {
        if clock::monotonic_millis() >= deadline_ms {
            errors::raise(
                PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
                format!("could not look up {}", what()),
                Some(format!(
                    "The call waited pg_idgen.segment_wait_timeout ({} ms) for a lock on the table.",
                    crate::settings::config().segments.wait_timeout_ms
                )),
                Some("Look for sessions holding locks on pg_idgen's tables (pg_locks)."),
            );
        }
        // SAFETY: a plain sleep; interrupts are checked right after.
        unsafe { pg_sys::pg_usleep(10_000) };
        pgrx::check_for_interrupts!();
    }
}

std::thread_local! {
    /// While pg_idgen runs a statement on its tables: their OIDs and the statement's text.
    static GUARDED: std::cell::RefCell<Option<(Vec<pg_sys::Oid>, std::ffi::CString)>> = const { std::cell::RefCell::new(None) };
}

/// How pg_idgen's statement on its tables meets their triggers and foreign keys, and with whose
/// rights it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    /// The worker's raise or allocation (also the authority's, for another server's worker):
    /// `session_replication_role = replica`, so only the triggers the tables' owner enabled ALWAYS
    /// or REPLICA fire (pg_idgen's own are ALWAYS). Why: a role granted TRIGGER on a table can add
    /// a trigger, not change when it fires, and it would run in the worker, a superuser's session.
    /// Foreign keys referencing the table do not act then; these statements change no column one
    /// can reference (`max_id`, `max_seq`, a section's new row).
    Allocation,
    /// A change a caller asked for (creating or dropping a tag or a space), with the caller's
    /// rights: `session_replication_role = origin`, so foreign keys referencing the tables hold
    /// (and act: `ON DELETE CASCADE`) as for the caller's own statement. A trigger that would
    /// fire on `events` (`TRIGGER_TYPE_INSERT`, `…_DELETE`) and that neither the tables' owner
    /// enabled ALWAYS nor PostgreSQL made (a foreign key's) refuses the statement (55000): a role
    /// granted TRIGGER may add one, and it would run with the caller's privileges. A statement
    /// that fires no trigger (`LOCK TABLE`: `events` 0) is not checked, nor is its table locked
    /// first: it takes the lock it names.
    Change { events: u32 },
    /// As `Change`, with the rights of the tables' owner: rows nobody is granted (a space's
    /// secret), written as part of a change the caller's rights allowed (the space's own row).
    ChangeAsOwner { events: u32 },
}

/// Runs `statement`, SQL text naming each of pg_idgen's `tables` by its placeholder, through
/// `run`, with the search path pinned and the analysis guard on: the statement runs only if every
/// relation it names is one of `tables`; its triggers and rights as `how` says.
pub fn run_on_tables<T>(tables: &[(&str, pg_sys::Oid)], how: Run, statement: &str, run: impl FnOnce(&str) -> T) -> Result<T, String> {
    /// Puts back what was guarded before, also when `run` raises an error (a PostgreSQL ERROR
    /// reaches Rust as a panic, which unwinds through this).
    struct Restore(Option<(Vec<pg_sys::Oid>, std::ffi::CString)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            GUARDED.with(|g| *g.borrow_mut() = self.0.take());
        }
    }
    let names = tables.iter().map(|(placeholder, table)| Ok((*placeholder, qualified_name(*table)?))).collect::<Result<Vec<_>, String>>()?;
    let sql = fill_placeholders(statement, &names);
    let text = std::ffi::CString::new(sql.clone()).map_err(|_| "the statement holds a NUL byte".to_string())?;
    let oids: Vec<pg_sys::Oid> = tables.iter().map(|(_, table)| *table).collect();
    if let Run::Change { events } | Run::ChangeAsOwner { events } = how {
        for &table in oids.iter().filter(|_| events != 0) {
            refuse_triggers_not_vouched_for(table, events);
        }
    }
    let owner = match how {
        // SAFETY: the table is locked (above); its owner is read from its relcache entry.
        Run::ChangeAsOwner { .. } => Some(unsafe { table_owner(oids[0]) }),
        _ => None,
    };
    let _restore = Restore(GUARDED.with(|g| g.borrow_mut().replace((oids, text))));
    Ok(with_catalog_settings(how == Run::Allocation, || as_role(owner, || run(&sql))))
}

/// Refuses (55000) a change of `table` while it has a trigger on `events` that would run with the
/// caller's privileges although nobody trusted with the table chose it (see `Run::Change`). The
/// table is locked first, in the mode the change takes anyway (ROW EXCLUSIVE): no trigger can be
/// added before the transaction ends (CREATE TRIGGER needs SHARE ROW EXCLUSIVE), and the relcache
/// entry read here is the one the statement fires from.
fn refuse_triggers_not_vouched_for(table: pg_sys::Oid, events: u32) {
    // SAFETY: the table exists (found by OID in this transaction); it is locked until the end of
    // the transaction, opened and closed here, and its trigger array read while open.
    unsafe {
        pg_sys::LockRelationOid(table, pg_sys::RowExclusiveLock as i32);
        let relation = pg_sys::table_open(table, pg_sys::NoLock as i32);
        let triggers = (*relation).trigdesc;
        let count = if triggers.is_null() { 0 } else { (*triggers).numtriggers as usize };
        // pg_idgen's own trigger functions are vouched for whatever fires them: a restore with
        // --disable-triggers leaves its ALWAYS triggers firing on origin only (ENABLE TRIGGER ALL).
        let extension = pg_sys::get_extension_oid(c"pg_idgen".as_ptr(), true);
        let unvouched = (0..count).map(|i| &*(*triggers).triggers.add(i)).find(|t| {
            t.tgenabled as u8 == pg_sys::TRIGGER_FIRES_ON_ORIGIN
                && !t.tgisinternal
                && (t.tgtype as u32) & events != 0
                && !(extension != pg_sys::InvalidOid && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, t.tgfoid) == extension)
        });
        let found = unvouched.map(|t| (CStr::from_ptr(t.tgname).to_string_lossy().into_owned(), display(CStr::from_ptr(pg_sys::get_rel_name(table)).to_bytes())));
        pg_sys::table_close(relation, pg_sys::NoLock as i32);
        if let Some((trigger, table)) = found {
            errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("pg_idgen does not change table \"{table}\" while it has trigger \"{trigger}\""),
                Some("The trigger would run with the privileges of the role calling pg_idgen's function. Only triggers that the table's owner enabled ALWAYS run with pg_idgen's statements: a role granted TRIGGER on the table can add a trigger, but not choose when it fires.".into()),
                Some(&format!("Drop the trigger, or, as the table's owner, let it run with pg_idgen's statements: ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}.")),
            );
        }
    }
}

/// The owner of a relation.
///
/// # Safety
/// `table` is an existing relation, locked by this transaction.
unsafe fn table_owner(table: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: per the function's contract.
    unsafe {
        let relation = pg_sys::table_open(table, pg_sys::NoLock as i32);
        let owner = (*(*relation).rd_rel).relowner;
        pg_sys::table_close(relation, pg_sys::NoLock as i32);
        owner
    }
}

/// Runs `f` as `role` (when given), as PostgreSQL runs a foreign key's check as its table's
/// owner: the user id changed for `f` only, `SET ROLE` and the like refused meanwhile; the
/// caller's user id comes back afterwards, also when `f` raises an error.
fn as_role<T>(role: Option<pg_sys::Oid>, f: impl FnOnce() -> T) -> T {
    let Some(role) = role else { return f() };
    struct Restore(pg_sys::Oid, i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: puts back the user id and security context read below.
            unsafe { pg_sys::SetUserIdAndSecContext(self.0, self.1) };
        }
    }
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: reads and sets this backend's user id and security context; `Restore` puts them back.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    let _restore = Restore(user, context);
    let restricted = (pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION) as i32;
    // SAFETY: as above.
    unsafe { pg_sys::SetUserIdAndSecContext(role, context | restricted) };
    f()
}

/// The statement with each placeholder replaced by its name, in one pass over the statement: a
/// name that holds another placeholder's text (a schema may be called "{table}") stays as it is.
fn fill_placeholders(statement: &str, names: &[(&str, String)]) -> String {
    let mut sql = String::with_capacity(statement.len() + 64);
    let mut rest = statement;
    while !rest.is_empty() {
        match names.iter().find(|(placeholder, _)| rest.starts_with(placeholder)) {
            Some((placeholder, name)) => {
                sql.push_str(name);
                rest = &rest[placeholder.len()..];
            }
            None => {
                let c = rest.chars().next().expect("not empty");
                sql.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    sql
}

static mut PREVIOUS_POST_PARSE_ANALYZE_HOOK: pg_sys::post_parse_analyze_hook_type = None;

/// Checks, after parse analysis, that pg_idgen's own statement names no relation but the tag
/// table (see the module note). Other statements pass untouched.
#[pg_guard]
unsafe extern "C-unwind" fn check_analyzed_statement(
    pstate: *mut pg_sys::ParseState,
    query: *mut pg_sys::Query,
    jstate: *mut pg_sys::JumbleState,
) {
    // SAFETY: the previous hook gets PostgreSQL's own arguments, behind the FFI guard; the parse
    // state and query are valid during the call.
    unsafe {
        if let Some(previous) = PREVIOUS_POST_PARSE_ANALYZE_HOOK {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous(pstate, query, jstate));
        }
        let source = (*pstate).p_sourcetext;
        if source.is_null() {
            return;
        }
        let expected = GUARDED.with(|g| g.borrow().as_ref().filter(|(_, text)| text.as_c_str() == CStr::from_ptr(source)).map(|(oids, _)| oids.clone()));
        if let Some(tables) = expected {
            if let Some(other) = relation_other_than(query, &tables) {
                errors::raise(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("pg_idgen's statement on its own tables names another relation (OID {})", other.to_u32()),
                    Some("A schema was renamed or created meanwhile, so the table's name now means another relation; the statement did not run.".into()),
                    Some("Look for schemas that are being renamed in this database."),
                );
            }
        }
    }
}

/// The first relation a query (and its subqueries and CTEs) names other than `tables`.
///
/// # Safety
/// `query` is an analysed query.
unsafe fn relation_other_than(query: *mut pg_sys::Query, tables: &[pg_sys::Oid]) -> Option<pg_sys::Oid> {
    // SAFETY: lists of an analysed query hold the node types read here.
    unsafe {
        let list_pointers = |list: *mut pg_sys::List| -> Vec<*mut std::ffi::c_void> {
            if list.is_null() {
                return Vec::new();
            }
            (0..(*list).length as usize).map(|i| (*(*list).elements.add(i)).ptr_value).collect()
        };
        for rte in list_pointers((*query).rtable).into_iter().map(|p| p.cast::<pg_sys::RangeTblEntry>()) {
            match (*rte).rtekind {
                pg_sys::RTEKind::RTE_RELATION if !tables.contains(&(*rte).relid) => return Some((*rte).relid),
                pg_sys::RTEKind::RTE_SUBQUERY => {
                    if let Some(other) = relation_other_than((*rte).subquery, tables) {
                        return Some(other);
                    }
                }
                _ => {}
            }
        }
        for cte in list_pointers((*query).cteList).into_iter().map(|p| p.cast::<pg_sys::CommonTableExpr>()) {
            let inner = (*cte).ctequery.cast::<pg_sys::Query>();
            if let Some(other) = relation_other_than(inner, tables) {
                return Some(other);
            }
        }
        None
    }
}

/// Installs the analysis guard. Called from `_PG_init`, whenever the library is loaded (preloaded
/// or not): the hook is this process's (and, preloaded, its children's).
pub fn install_analysis_guard() {
    // SAFETY: _PG_init runs once per process, before any of pg_idgen's statements.
    unsafe {
        PREVIOUS_POST_PARSE_ANALYZE_HOOK = pg_sys::post_parse_analyze_hook;
        pg_sys::post_parse_analyze_hook = Some(check_analyzed_statement);
    }
}

/// Runs `f` with `search_path = pg_catalog, pg_temp`, as PostgreSQL runs its own internal SQL,
/// and `session_replication_role` as the statement needs (`Run`): `replica` for an allocation,
/// `origin` for a caller's change, whatever the session says. Only for pg_idgen's own statements
/// on its tables: never run a caller's SQL inside it. The previous settings come back afterwards
/// (also when `f` raises an error: the abort undoes them).
fn with_catalog_settings<T>(allocation: bool, f: impl FnOnce() -> T) -> T {
    let replication_role = if allocation { c"replica" } else { c"origin" };
    // SAFETY: a GUC nest level opened and closed around `f`, as for a function's SET clause.
    // PGC_SUSET for session_replication_role: pg_idgen sets it for its own statement only.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for (name, value, context) in [
            (c"search_path", c"pg_catalog, pg_temp", pg_sys::GucContext::PGC_USERSET),
            (c"session_replication_role", replication_role, pg_sys::GucContext::PGC_SUSET),
        ] {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                context,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
        let result = f();
        pg_sys::AtEOXact_GUC(true, level);
        result
    }
}

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
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ALLOCATING.set(false);
        }
    }
    ALLOCATING.set(true);
    let _reset = Reset;
    f()
}

/// The relation's primary key index, or InvalidOid; a deferrable one does not count, as up to
/// PostgreSQL 17, where the function had no choice.
///
/// # Safety
/// `relation` is open.
unsafe fn primary_key_index(relation: pg_sys::Relation) -> pg_sys::Oid {
    // SAFETY: per the contract, the relation is open.
    unsafe {
        #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
        return pg_sys::RelationGetPrimaryKeyIndex(relation);
        #[cfg(feature = "pg18")]
        return pg_sys::RelationGetPrimaryKeyIndex(relation, false);
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// The guard does not depend on winning a race: a statement of pg_idgen's that names another
    /// relation than the one it was run for is refused at analysis, before it runs.
    #[pg_test]
    #[should_panic(expected = "names another relation")]
    fn a_statement_naming_another_relation_is_refused() {
        Spi::run("CREATE SCHEMA guard_a; CREATE TABLE guard_a.segment_tag (tag text); CREATE SCHEMA guard_b; CREATE TABLE guard_b.segment_tag (tag text)")
            .unwrap();
        let table = Spi::get_one::<pg_sys::Oid>("SELECT 'guard_a.segment_tag'::regclass::oid").unwrap().unwrap();
        // {table} is guard_a's name; the text names guard_b's, as a schema swap would make it.
        let _ = super::run_on_tables(&[("{table}", table)], super::Run::Allocation, "SELECT count(*) FROM guard_b.segment_tag /* {table} */", |sql| {
            Spi::get_one::<i64>(sql)
        });
    }

    /// A schema named like a placeholder is not substituted again.
    #[pg_test]
    fn placeholders_are_filled_in_one_pass() {
        let names = [("{a}", "\"x{b}\".t".to_string()), ("{b}", "s.u".to_string())];
        assert_eq!(super::fill_placeholders("SELECT {a}, {b} FROM é{a}", &names), "SELECT \"x{b}\".t, s.u FROM é\"x{b}\".t");
    }

    #[pg_test]
    fn a_statement_naming_its_table_runs() {
        Spi::run("CREATE SCHEMA guard_c; CREATE TABLE guard_c.segment_tag (tag text)").unwrap();
        let table = Spi::get_one::<pg_sys::Oid>("SELECT 'guard_c.segment_tag'::regclass::oid").unwrap().unwrap();
        let count = super::run_on_tables(&[("{table}", table)], super::Run::Allocation, "SELECT count(*) FROM {table}", |sql| Spi::get_one::<i64>(sql)).unwrap();
        assert_eq!(count, Ok(Some(0)));
    }
}

