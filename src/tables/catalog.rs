//! Finding pg_idgen's tables through the catalogs, and reading one row without SQL.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::{display, Owner, Row};
use crate::{clock, errors};

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
        pg_sys::ScanKeyInit(
            &mut keys[0],
            4,
            pg_sys::BTEqualStrategyNumber as u16,
            pg_sys::Oid::from(pg_sys::F_OIDEQ),
            pg_sys::ExtensionRelationId.into(),
        );
        pg_sys::ScanKeyInit(&mut keys[1], 5, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_OIDEQ), extension.into());
        let scan = pg_sys::systable_beginscan(depend, pg_sys::Oid::from(DEPEND_REFERENCE_INDEX_ID), true, std::ptr::null_mut(), 2, keys.as_mut_ptr());
        let mut found = None;
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() {
                break;
            }
            // pg_depend has no NULL in these columns, and their numbers are fixed.
            let row = Row::new(depend, tuple, Owner::Table("pg_depend"));
            let (classid, objid, deptype) =
                (row.oid_at(1).unwrap_or_default(), row.oid_at(2).unwrap_or_default(), row.char_at(7).unwrap_or_default());
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
        quoted
            .to_str()
            .map(str::to_string)
            .map_err(|_| format!("pg_idgen's table name {} is not UTF-8 text, which pg_idgen's SQL cannot name", display(quoted.to_bytes())))
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

/// Runs `f` (a read of pg_idgen's rows) under a snapshot taken now, not the statement's: for rows
/// the worker wrote since the statement began (a copy of the segment authority's spaces), which
/// stand for the authority's and are no part of the caller's transaction.
pub fn with_latest_snapshot<T>(f: impl FnOnce() -> T) -> T {
    // A parallel query may take no new snapshot: there the statement's (the worker's copy is
    // then seen from the next statement on).
    // SAFETY: reads this backend's transaction state.
    if unsafe { pg_sys::IsInParallelMode() } {
        return f();
    }
    // SAFETY: a snapshot pushed in a transaction and popped below; an error in `f` aborts the
    // transaction, which pops it.
    unsafe { pg_sys::PushActiveSnapshot(pg_sys::GetLatestSnapshot()) };
    let result = f();
    // SAFETY: pops the snapshot pushed above.
    unsafe { pg_sys::PopActiveSnapshot() };
    result
}
