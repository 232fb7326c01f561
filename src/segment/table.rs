//! The tag table `segment_tag` as pg_idgen's own code reaches it (through `tables`, which says
//! how pg_idgen finds its tables, reads their rows and runs its SQL on them).
//!
//! - `segment_next()` looks a tag up without SQL (`tables::with_row`).
//! - Whatever removes or rewrites rows — `DELETE`, `UPDATE`, `TRUNCATE`, dropping the table or
//!   the extension — retires the cached ranges of the tags concerned (triggers and an object
//!   access hook): a cache never outlives the row it was allocated from.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::slot::{retire_database, retire_tag};
use crate::c_function::c_functions;
use crate::tables::{self, display, extension_table_oid, with_row, Name, Owner, Row};
use crate::{errors, worker};

pgrx::extension_sql_file!("table.sql", name = "segment_table");

// ---------------------------------------------------------------------------------------------
// Finding the table
// ---------------------------------------------------------------------------------------------

pub(super) const TAG_TABLE: &CStr = c"segment_tag";

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

/// The trigger reads the tag table's own columns, and nothing else: a table without one of them
/// is refused.
const TRIGGER: Owner = Owner::Trigger { function: "pg_idgen_segment_tag_changed()", table: "segment_tag" };

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
                if let Some(tag) = Row::new(relation, trigger.tg_trigtuple, TRIGGER).text(c"tag") {
                    retire_tag(pg_sys::MyDatabaseId, &tag);
                }
            }
            pg_sys::TRIGGER_EVENT_UPDATE if !worker::is_allocating() => {
                let old = Row::new(relation, trigger.tg_trigtuple, TRIGGER);
                let new = Row::new(relation, trigger.tg_newtuple, TRIGGER);
                let (old_tag, new_tag) = (old.text(c"tag"), new.text(c"tag"));
                let (old_max, new_max) = (old.bigint(c"max_id"), new.bigint(c"max_id"));
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

/// Segment tags, in the words of their errors.
pub(super) const TAG: Name = Name { kind: "segment tag", called: "A tag" };

/// The hint for a tag that a call needs and that does not exist here.
pub(super) const CREATE_TAG: &str = "Create it with segment_create(tag).";
