//! The tag table `segment_tag` as pg_idgen's own code reaches it (through `tables`, which says
//! how pg_idgen finds its tables, reads their rows and runs its SQL on them).
//!
//! - `segment_next()` looks a tag up without SQL (`tables::with_row`).
//! - Whatever removes or rewrites rows — `DELETE`, `UPDATE`, `TRUNCATE`, dropping the table or
//!   the extension — retires the cached ranges of the tags concerned (triggers and an object
//!   access hook): a cache never outlives the row it was allocated from.

use std::ffi::{c_void, CStr};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::slot::{retire_database, retire_tag, MAX_TAG_LEN};
use crate::c_function::c_functions;
use crate::errors;
use crate::tables::{self, display, extension_table_oid, with_row};

pgrx::extension_sql_file!("table.sql", name = "segment_table");

// ---------------------------------------------------------------------------------------------
// Finding the table
// ---------------------------------------------------------------------------------------------

const TAG_TABLE: &CStr = c"segment_tag";

/// The OID of this database's tag table: the relation named `segment_tag` that is a member of
/// extension pg_idgen, wherever its schema is. None when the extension is not installed.
pub fn tag_table_oid() -> Option<pg_sys::Oid> {
    extension_table_oid(TAG_TABLE)
}

/// The tag table, or an error that says the extension is missing here.
pub fn require_tag_table() -> pg_sys::Oid {
    tag_table_oid().unwrap_or_else(|| {
        errors::raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            "pg_idgen's tag table does not exist in this database".into(),
            None,
            Some("CREATE EXTENSION pg_idgen in this database first."),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Looking a tag up
// ---------------------------------------------------------------------------------------------

/// Whether `tag` has a row that this transaction sees. Waits for a lock on the table until
/// `deadline_ms` (monotonic), then raises 55P03.
pub fn tag_exists(tag: &[u8], deadline_ms: i64) -> bool {
    with_row(TAG_TABLE, c"tag", tag, deadline_ms, &locked(tag), |_, _| ()).is_some()
}

/// Whether the tag's row is one this transaction inserted and has not committed.
pub fn tag_inserted_here(tag: &[u8], deadline_ms: i64) -> bool {
    tables::row_inserted_here(TAG_TABLE, c"tag", tag, deadline_ms, &locked(tag))
}

fn locked(tag: &[u8]) -> impl Fn() -> String + '_ {
    move || format!("segment tag \"{}\": the tag table is locked", display(tag))
}

// ---------------------------------------------------------------------------------------------
// SQL that pg_idgen runs
// ---------------------------------------------------------------------------------------------

/// Runs `statement` (SQL text naming the tag table as `{table}`) through `run`, with the search
/// path pinned and the analysis guard on: the statement runs only if every relation it names is
/// the tag table `table`; its triggers and rights as `how` says.
pub fn run_on_tag_table<T>(table: pg_sys::Oid, how: tables::Run, statement: &str, run: impl FnOnce(&str) -> T) -> Result<T, String> {
    tables::run_on_tables(&[("{table}", table)], how, statement, run)
}

// ---------------------------------------------------------------------------------------------
// Keeping the cache in step with the table
// ---------------------------------------------------------------------------------------------

/// The attribute number of column `name` of `relation`, which must be of type `type_oid`: the
/// trigger reads the tag table's own columns, and nothing else.
///
/// # Safety
/// `relation` is open.
unsafe fn column(relation: pg_sys::Relation, name: &CStr, type_oid: pg_sys::Oid) -> i16 {
    // SAFETY: per the function's contract.
    let (attnum, actual) = unsafe {
        let attnum = pg_sys::get_attnum((*relation).rd_id, name.as_ptr());
        (attnum, if attnum > 0 { pg_sys::get_atttype((*relation).rd_id, attnum) } else { pg_sys::InvalidOid })
    };
    if actual != type_oid {
        errors::raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            format!("pg_idgen_segment_tag_changed() fired on a table without the {} column of segment_tag", name.to_string_lossy()),
            None,
            None,
        );
    }
    attnum
}

/// The text of a tuple's attribute `name` as bytes, or None when NULL.
///
/// # Safety
/// `tuple` is a valid tuple of `relation`.
unsafe fn attribute_bytes(relation: pg_sys::Relation, tuple: pg_sys::HeapTuple, name: &CStr) -> Option<Vec<u8>> {
    // SAFETY: per the function's contract.
    unsafe {
        let attnum = column(relation, name, pg_sys::TEXTOID);
        let mut null = false;
        let datum = pg_sys::heap_getattr(tuple, attnum as i32, (*relation).rd_att, &mut null);
        (!null).then(|| <&[u8]>::from_polymorphic_datum(datum, false, pg_sys::TEXTOID).unwrap_or_default().to_vec())
    }
}

/// # Safety
/// As `attribute_bytes`; the attribute is a bigint.
unsafe fn attribute_i64(relation: pg_sys::Relation, tuple: pg_sys::HeapTuple, name: &CStr) -> Option<i64> {
    // SAFETY: per the function's contract.
    unsafe {
        let attnum = column(relation, name, pg_sys::INT8OID);
        let mut null = false;
        let datum = pg_sys::heap_getattr(tuple, attnum as i32, (*relation).rd_att, &mut null);
        i64::from_datum(datum, null)
    }
}

c_functions! {
    /// The trigger on `segment_tag` (AFTER UPDATE OR DELETE FOR EACH ROW, AFTER TRUNCATE): retires
    /// the cache of every tag whose row went or changed, and refuses to move `max_id` back, which
    /// would hand out numbers again.
    fn pg_idgen_segment_tag_changed / pg_finfo_pg_idgen_segment_tag_changed (fcinfo) {
let trigger = crate::c_function::trigger_data(fcinfo, "pg_idgen_segment_tag_changed()");
        let relation = trigger.tg_relation;
        match trigger.tg_event & pg_sys::TRIGGER_EVENT_OPMASK {
            pg_sys::TRIGGER_EVENT_TRUNCATE => retire_database(pg_sys::MyDatabaseId),
            pg_sys::TRIGGER_EVENT_DELETE => {
                if let Some(tag) = attribute_bytes(relation, trigger.tg_trigtuple, c"tag") {
                    retire_tag(pg_sys::MyDatabaseId, &tag);
                }
            }
            pg_sys::TRIGGER_EVENT_UPDATE if !tables::is_allocating() => {
                let (old, new) = (trigger.tg_trigtuple, trigger.tg_newtuple);
                let old_tag = attribute_bytes(relation, old, c"tag");
                let new_tag = attribute_bytes(relation, new, c"tag");
                let (old_max, new_max) = (attribute_i64(relation, old, c"max_id"), attribute_i64(relation, new, c"max_id"));
                if let (Some(old_max), Some(new_max)) = (old_max, new_max) {
                    if new_max < old_max {
                        errors::raise(
                            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                            format!(
                                "max_id of segment tag \"{}\" cannot move back from {old_max} to {new_max}",
                                display(old_tag.as_deref().unwrap_or_default())
                            ),
                            Some("Numbers up to max_id may have been handed out already; moving it back would hand them out again.".into()),
                            Some("To number a tag from the start again, drop it and create it anew (segment_drop, segment_create)."),
                        );
                    }
                }
                if old_tag != new_tag || old_max != new_max {
                    for tag in [old_tag, new_tag].into_iter().flatten() {
                        retire_tag(pg_sys::MyDatabaseId, &tag);
                    }
                }
            }
            _ => {}
        }
        pg_sys::Datum::from(0)
    }
}

static mut PREVIOUS_OBJECT_ACCESS_HOOK: pg_sys::object_access_hook_type = None;
/// What else caches rows of a database's pg_idgen tables (the per-key sequences), retired with
/// the segment slots, and the tables it caches rows of. Set in `_PG_init`; a function and names,
/// so that this module need not name their owner.
static mut ALSO_RETIRE: Option<(fn(pg_sys::Oid), &'static [&'static CStr])> = None;

/// Retires every cache of a database's rows: the segment slots, and what `also_retire` named.
pub fn retire_caches_of(database: pg_sys::Oid) {
    retire_database(database);
    // SAFETY: set once in _PG_init, before any backend exists; read only after.
    if let Some((retire, _)) = unsafe { ALSO_RETIRE } {
        retire(database);
    }
}

/// Names another cache to retire with the segment slots when a database goes, or the tag table
/// or one of `tables` (of extension pg_idgen) is dropped. Called from `_PG_init`.
pub fn also_retire(retire: fn(pg_sys::Oid), tables: &'static [&'static CStr]) {
    // SAFETY: _PG_init runs once per process, before any hook runs.
    unsafe { ALSO_RETIRE = Some((retire, tables)) };
}

/// Whether pg_idgen caches rows of the table of this name (if it is the extension's).
fn is_cached_table(name: &CStr) -> bool {
    // SAFETY: set once in _PG_init; read only after.
    name == TAG_TABLE || unsafe { ALSO_RETIRE }.is_some_and(|(_, tables)| tables.contains(&name))
}

/// Installs the hook that notices the tag table being dropped (DROP TABLE, DROP EXTENSION, DROP
/// SCHEMA … CASCADE), which no row trigger sees. Called from `_PG_init` while preloading.
pub fn install_drop_hook() {
    // SAFETY: hooks are installed once, in the postmaster, before any backend exists.
    unsafe {
        PREVIOUS_OBJECT_ACCESS_HOOK = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(on_object_access);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: i32,
    arg: *mut c_void,
) {
    // SAFETY: the previous hook is called with the arguments PostgreSQL gave; the catalog lookups
    // run inside the dropping transaction.
    unsafe {
        if let Some(previous) = PREVIOUS_OBJECT_ACCESS_HOOK {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous(access, class_id, object_id, sub_id, arg));
        }
        if sub_id != 0 {
            return;
        }
        // A dropped database's cached ranges must go with it: its OID can be used again
        // (CREATE DATABASE … OID, or wraparound), and the new database's tags must not find them.
        // Retired when it is dropped, and again when a database is created with its OID: a
        // session of the dropped database can still take a slot while DROP DATABASE waits for the
        // sessions to leave, after the drop's hook has run. No session of a database being
        // created exists yet, so any slot of its OID is such a leftover. A drop or a creation that
        // is rolled back only costs a gap.
        if class_id == pg_sys::DatabaseRelationId
            && matches!(access, pg_sys::ObjectAccessType::OAT_DROP | pg_sys::ObjectAccessType::OAT_POST_CREATE)
        {
            retire_caches_of(object_id);
            super::worker::stop_for_drop(object_id, access == pg_sys::ObjectAccessType::OAT_DROP);
            return;
        }
        if access != pg_sys::ObjectAccessType::OAT_DROP {
            return;
        }
        if class_id != pg_sys::RelationRelationId {
            return;
        }
        let name = pg_sys::get_rel_name(object_id);
        if name.is_null() || !is_cached_table(CStr::from_ptr(name)) {
            return;
        }
        let ours = pg_sys::get_extension_oid(c"pg_idgen".as_ptr(), true);
        if ours != pg_sys::InvalidOid && pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, object_id) == ours {
            retire_caches_of(pg_sys::MyDatabaseId);
        }
    }
}

/// Tags are 1 to 63 bytes: checked before any lookup.
pub fn check_tag_name(tag: &[u8]) {
    if tag.is_empty() || tag.len() > MAX_TAG_LEN {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid segment tag \"{}\"", display(&tag[..tag.len().min(80)])),
            Some(format!("A tag is 1 to {MAX_TAG_LEN} bytes long, not {}.", tag.len())),
            None,
        )
    }
}

/// The hint for a tag that a call needs and that does not exist here.
pub(super) const CREATE_TAG: &str = "Create it with segment_create(tag).";

#[cold]
pub(super) fn unknown_tag(tag: &[u8], detail: &str, hint: Option<&str>) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        format!("segment tag \"{}\" does not exist", display(tag)),
        Some(detail.into()),
        hint,
    )
}

