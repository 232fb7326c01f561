//! Spaces of per-key sequences: `seq_space_create()`, `seq_space_drop()`, looking a space up, and
//! the trigger that keeps the cache in step with the tables.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::cache::{retire_database, MAX_SECTION_KEYS};
use super::text_key::{self, TextKeys, SECRET_LEN};
use crate::c_function::c_functions;
use crate::tables::{self, display, Name, Owner, Row, Run, TextBytes};
use crate::{errors, worker};

pgrx::extension_sql_file!("spaces.sql", name = "seq_tables");

pub const SPACE_TABLE: &CStr = c"seq_space";
pub const SECTION_TABLE: &CStr = c"seq_section";
/// At the segment authority, which server serves each section now (`store`).
pub const LEASE_TABLE: &CStr = c"seq_section_lease";
pub const STORE_STATE_TABLE: &CStr = c"seq_store_state";
/// Each keyed space's secret (`text_key`): a table of its own, which nobody is granted.
pub const SECRET_TABLE: &CStr = c"seq_space_secret";
/// The tables whose rows the cache holds: dropping one retires the database's sections.
pub const CACHED_TABLES: &[&CStr] = &[SPACE_TABLE, SECTION_TABLE];

/// What a call needs of a space: what its cached sections carry (see `cache::SectionId`; `hash`
/// is `TextKeys::space_hash`), how many neighbouring keys share a section, and how its text keys
/// map to bigint keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    pub id: u32,
    pub section_keys: u32,
    pub hash: u64,
    pub text_keys: TextKeys,
    /// A copy of the segment authority's space (`mirror`), not this server's own.
    pub copied: bool,
}

/// Sequence spaces, in the words of their errors.
pub const SPACE: Name = Name { kind: "sequence space", called: "A space name" };

/// The hint for a space that a call needs and that does not exist here.
pub const CREATE_SPACE: &str = "Create it with seq_space_create(space).";

/// Whether the space's row is one this transaction inserted and has not committed.
pub fn space_inserted_here(space: &[u8], deadline_ms: i64) -> bool {
    let what = || format!("sequence space \"{}\": the space table is locked", display(space));
    tables::row_inserted_here(SPACE_TABLE, c"space", space, deadline_ms, &what)
}

/// The space's row as this transaction sees it (no SQL: also in parallel workers and read-only
/// transactions), and its secret's if it is keyed. Waits for a locked table until `deadline_ms`,
/// then raises 55P03.
pub fn space_row(space: &[u8], deadline_ms: i64) -> Option<Space> {
    let what = || format!("sequence space \"{}\": the space table is locked", display(space));
    let (id, section_keys, hash, copied) = tables::with_row(SPACE_TABLE, c"space", space, deadline_ms, &what, |relation, tuple| {
        // SAFETY: the tuple is the open relation's, valid while `read` runs.
        let row = unsafe { Row::new(relation, tuple, Owner::Table("seq_space")) };
        let int = |name: &CStr| row.int(name).unwrap_or(0);
        // Neither column in a table of pg_idgen's SQL before 0.9.0 (text_key_hash), 0.10.0 (copied).
        (int(c"id") as u32, int(c"section_keys") as u32, row.optional_text(c"text_key_hash"), row.optional_bool(c"copied").unwrap_or(false))
    })?;
    let text_keys = TextKeys::of_row(space, hash.as_deref(), || secret_row(space, deadline_ms));
    Some(Space { id, section_keys, hash: text_keys.space_hash(space), text_keys, copied })
}

/// The space's secret as this transaction sees it; None when it has no row (or is not 16 bytes:
/// the table's CHECK).
fn secret_row(space: &[u8], deadline_ms: i64) -> Option<[u8; SECRET_LEN]> {
    let what = || format!("sequence space \"{}\": its secret's table is locked", display(space));
    tables::with_row(SECRET_TABLE, c"space", space, deadline_ms, &what, |relation, tuple| {
        // SAFETY: the tuple is the open relation's, valid while `read` runs.
        let row = unsafe { Row::new(relation, tuple, Owner::Table("seq_space_secret")) };
        row.optional_bytes(c"secret").and_then(|secret| secret.try_into().ok())
    })
    .flatten()
}

fn require_tables() -> (pg_sys::Oid, pg_sys::Oid) {
    match (tables::extension_table_oid(SPACE_TABLE), tables::extension_table_oid(SECTION_TABLE)) {
        (Some(spaces), Some(sections)) => (spaces, sections),
        _ => errors::raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            "pg_idgen's sequence tables do not exist in this database".into(),
            None,
            Some("CREATE EXTENSION pg_idgen in this database first (or ALTER EXTENSION pg_idgen UPDATE)."),
        ),
    }
}

#[pg_extern(volatile)]
/// Creates a space of per-key sequences. Needs INSERT on seq_space.
fn seq_space_create(
    space: Option<TextBytes>,
    step: default!(Option<i32>, 1000),
    section_keys: default!(Option<i32>, 256),
    description: default!(Option<TextBytes>, "NULL"),
) {
    let (Some(space), Some(step), Some(section_keys)) = (space, step, section_keys) else {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "seq_space_create: space, step and section_keys must not be NULL".into(),
            None,
            None,
        )
    };
    let space = space.0;
    SPACE.check(space);
    refuse_with_authority("seq_space_create()");
    if step < 1 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid step {step} for sequence space \"{}\"", display(space)),
            Some("The step is how far the worker raises a section's maximum at least: 1 or more.".into()),
            None,
        )
    }
    if !(1..=MAX_SECTION_KEYS as i32).contains(&section_keys) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid section_keys {section_keys} for sequence space \"{}\"", display(space)),
            Some(format!("A section holds 1 to {MAX_SECTION_KEYS} neighbouring keys.")),
            None,
        )
    }
    let (spaces, _) = require_tables();
    let description = match description {
        Some(text) => tables::text_arg(text.0),
        None => pgrx::datum::DatumWithOid::null_oid(pg_sys::TEXTOID),
    };
    let args = [tables::text_arg(space), step.into(), section_keys.into(), description];
    // Why look first: a unique violation caught in the INSERT would leave the transaction
    // aborted. Two sessions creating the same space at once: the second gets 23505.
    let deadline_ms = crate::worker::wait::Deadline::new().ms();
    if space_row(space, deadline_ms).is_some() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
            format!("sequence space \"{}\" already exists", display(space)),
            None,
            Some("Drop it first with seq_space_drop(space): its keys then start again at 1."),
        )
    }
    let insert = Run::Change { events: pg_sys::TRIGGER_TYPE_INSERT };
    // Without the secret's table (pg_idgen's SQL objects before 0.9.0, until ALTER EXTENSION
    // pg_idgen UPDATE), a space is made as those made it: unkeyed.
    let Some(secrets) = tables::extension_table_oid(SECRET_TABLE) else {
        run_or_raise(
            &[("{spaces}", spaces)],
            insert,
            "INSERT INTO {spaces} (space, step, section_keys, description) VALUES ($1, $2, $3, $4)",
            |sql| Spi::run_with_args(sql, &args),
        );
        return;
    };
    run_or_raise(
        &[("{spaces}", spaces)],
        insert,
        "INSERT INTO {spaces} (space, step, section_keys, description, text_key_hash) VALUES ($1, $2, $3, $4, 'siphash-2-4')",
        |sql| Spi::run_with_args(sql, &args),
    );
    // The secret as the tables' owner: nobody needs a right on its table, and nobody has one. The
    // caller's right to insert the space's row is the right to give it a secret.
    let secret = text_key::new_secret();
    // SAFETY: the bytes of a bytea value.
    let secret_arg = unsafe { pgrx::datum::DatumWithOid::new(&secret[..], pg_sys::BYTEAOID) };
    run_or_raise(
        &[("{secrets}", secrets)],
        Run::ChangeAsOwner { events: pg_sys::TRIGGER_TYPE_INSERT },
        "INSERT INTO {secrets} (space, secret) VALUES ($1, $2)",
        |sql| Spi::run_with_args(sql, &[tables::text_arg(space), secret_arg]),
    );
}

/// Runs pg_idgen's statement on its tables (`tables::run_on_tables`) as `how` says; an error (a
/// table gone, the statement refused) is raised.
fn run_or_raise<T>(tables: &[(&str, pg_sys::Oid)], how: Run, statement: &str, run: impl FnOnce(&str) -> Result<T, pgrx::spi::SpiError>) -> T {
    tables::run_on_tables(tables, how, statement, run)
        .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None))
        .unwrap_or_else(|e| panic!("{e}"))
}

std::thread_local! {
    /// Set while `seq_space_drop()` deletes a space's rows: the one way rows may go.
    static DROPPING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[pg_extern(volatile)]
/// Drops a space and its sections: its keys start again at 1 if it is created anew. Needs DELETE
/// on seq_space and seq_section.
fn seq_space_drop(space: Option<TextBytes>) {
    let Some(space) = space else {
        errors::raise(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, "seq_space_drop: space must not be NULL".into(), None, None)
    };
    SPACE.check(space.0);
    refuse_with_authority("seq_space_drop()");
    // Why: under REPEATABLE READ the DELETE of the sections would not see a section the worker
    // inserted after this transaction's snapshot, and a space created again under the name would
    // continue from that row.
    // SAFETY: reads this transaction's isolation level.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_ACTIVE_SQL_TRANSACTION,
            "seq_space_drop() must run at isolation level READ COMMITTED".into(),
            Some("At a higher level it could miss sections the worker made after the transaction's snapshot.".into()),
            None,
        );
    }
    let (spaces, _) = require_tables();
    tables::as_own(&DROPPING, || {
        // The space's row first: its lock keeps the worker from raising (and inserting) sections of
        // it until this transaction ends.
        let delete = Run::Change { events: pg_sys::TRIGGER_TYPE_DELETE };
        let deleted = run_or_raise(
            &[("{spaces}", spaces)],
            delete,
            "WITH gone AS (DELETE FROM ONLY {spaces} WHERE space OPERATOR(pg_catalog.=) $1 RETURNING space)
             SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM gone",
            |sql| Spi::get_one_with_args::<bool>(sql, &[tables::text_arg(space.0)]),
        );
        if deleted != Some(true) {
            SPACE.unknown(space.0, "It is not in seq_space.", None);
        }
        delete_sections_and_secret(space.0, delete)
            .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None));
        // SAFETY: this backend's database.
        retire_database(unsafe { pg_sys::MyDatabaseId });
    })
}

/// Deletes a space's sections, its secret and its leases (its own row deleted first, with the
/// caller's rights or the worker's), the secret and the leases as the tables' owner (as
/// `seq_space_create()` made the secret).
fn delete_sections_and_secret(space: &[u8], delete: Run) -> Result<(), String> {
    let (_, sections) = require_tables();
    tables::run_on_tables(&[("{sections}", sections)], delete, "DELETE FROM ONLY {sections} WHERE space OPERATOR(pg_catalog.=) $1", |sql| {
        Spi::run_with_args(sql, &[tables::text_arg(space)])
    })?
    .map_err(|e| e.to_string())?;
    // Its leases too (at the segment authority): a space made anew under the name must not find a
    // holder of the old one's sections.
    for (table, placeholder) in [(SECRET_TABLE, "{secrets}"), (LEASE_TABLE, "{leases}")] {
        if let Some(oid) = tables::extension_table_oid(table) {
            tables::run_on_tables(
                &[(placeholder, oid)],
                Run::ChangeAsOwner { events: pg_sys::TRIGGER_TYPE_DELETE },
                &format!("DELETE FROM ONLY {placeholder} WHERE space OPERATOR(pg_catalog.=) $1"),
                |sql| Spi::run_with_args(sql, &[tables::text_arg(space)]),
            )?
            .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Deletes this database's copy of a space that the segment authority no longer has as it is
/// here (`mirror`), in the worker's transaction: its row, sections and secret. The trigger retires
/// the database's cached sections.
pub(super) fn delete_space_rows(space: &[u8]) -> Result<(), String> {
    let (spaces, _) = require_tables();
    tables::as_own(&DROPPING, || {
        tables::run_on_tables(&[("{spaces}", spaces)], Run::Allocation, "DELETE FROM ONLY {spaces} WHERE space OPERATOR(pg_catalog.=) $1", |sql| {
            Spi::run_with_args(sql, &[tables::text_arg(space)])
        })?
        .map_err(|e| e.to_string())?;
        delete_sections_and_secret(space, Run::Allocation)
    })
}

/// With sections leased from the segment authority, the spaces are the authority's (this server
/// keeps a copy): refuses to create or drop one here (55000).
fn refuse_with_authority(function: &str) {
    if super::lease_state::leased() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{function}: the sequence spaces of this server live at the segment authority (pg_idgen.seq_sections = authority)"),
            Some("This server serves the authority's spaces, under leases of their sections; it copies them when a call first needs one.".into()),
            Some("Call it at the authority (pg_idgen.segment_authority). On the authority itself, leave pg_idgen.seq_sections local."),
        );
    }
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION seq_space_create(text, int, int, text) IS
    'Creates a space of per-key sequences: step is how far a section is raised at least, section_keys how many neighbouring keys share one.';
COMMENT ON FUNCTION seq_space_drop(text) IS
    'Drops a space of per-key sequences and its sections; created anew, its keys start again at 1.';
"#,
    name = "seq_spaces",
    requires = [seq_space_create, seq_space_drop, "seq_tables"]
);

std::thread_local! {
    /// The transaction and command whose row changes last retired the cache.
    static RETIRED_FOR: std::cell::Cell<(pg_sys::TransactionId, pg_sys::CommandId)> = const { std::cell::Cell::new((pg_sys::InvalidTransactionId, 0)) };
}

/// Retires the database's cached sections once per statement that changes rows, not once per
/// row: a statement over many rows would otherwise scan the cache under its lock for each. Once
/// is enough, because a cache is never unsafe for the changes the trigger lets through: they only
/// raise `max_seq` (a cache below it stays below it) or change a step or a description, and the
/// rows of a space go only with the space's row, which `seq_space_drop()` deletes (and locks)
/// first. The retire only makes the cache see them sooner.
fn retire_for_this_statement() {
    // SAFETY: reads this transaction's ids (a row change has its transaction id assigned).
    let now = unsafe { (pg_sys::GetTopTransactionIdIfAny(), pg_sys::GetCurrentCommandId(false)) };
    if RETIRED_FOR.get() != now {
        RETIRED_FOR.set(now);
        // SAFETY: this backend's database.
        retire_database(unsafe { pg_sys::MyDatabaseId });
    }
}

#[cold]
fn refuse(message: String, detail: &str, hint: &str) -> ! {
    errors::raise(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message, Some(detail.into()), Some(hint))
}

/// The trigger reads the tables' own columns, and nothing else: a table without one of them is
/// refused.
const TRIGGER: Owner = Owner::Trigger { function: "pg_idgen_seq_changed()", table: "seq_space, seq_section or seq_space_secret" };

c_functions! {
    /// The trigger on `seq_space`, `seq_section` and `seq_space_secret` (AFTER UPDATE OR DELETE
    /// FOR EACH ROW, BEFORE TRUNCATE): retires the database's cached sections when rows change or
    /// go, and refuses what would hand numbers out again.
    fn pg_idgen_seq_changed / pg_finfo_pg_idgen_seq_changed (fcinfo) {
        let trigger = crate::c_function::trigger_data(fcinfo, "pg_idgen_seq_changed()");
        let relation = trigger.tg_relation;
        // By OID, not by name: a renamed table is still pg_idgen's, and its rows still numbers'.
        let table = if tables::extension_table_oid(SECTION_TABLE) == Some((*relation).rd_id) {
            "seq_section"
        } else if tables::extension_table_oid(SECRET_TABLE) == Some((*relation).rd_id) {
            "seq_space_secret"
        } else {
            "seq_space"
        };
        let event = trigger.tg_event;
        if event & pg_sys::TRIGGER_EVENT_OPMASK != pg_sys::TRIGGER_EVENT_TRUNCATE && event & pg_sys::TRIGGER_EVENT_ROW == 0 {
            errors::raise(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                "pg_idgen_seq_changed() must fire FOR EACH ROW on UPDATE or DELETE".into(),
                None,
                None,
            );
        }
        let hint = "To number a space's keys from 1 again, drop it and create it anew (seq_space_drop, seq_space_create).";
        let gone = if table == "seq_space_secret" {
            "A space's text keys are hashed with its secret: without it they could not be numbered, and under another one they would be numbered again."
        } else {
            "Numbers up to each section's max_seq may have been handed out; without the rows they would be handed out again."
        };
        match trigger.tg_event & pg_sys::TRIGGER_EVENT_OPMASK {
            pg_sys::TRIGGER_EVENT_TRUNCATE => refuse(format!("{table} cannot be truncated"), gone, hint),
            pg_sys::TRIGGER_EVENT_DELETE if !DROPPING.get() => {
                refuse(format!("rows of {table} can only be deleted by seq_space_drop()"), gone, hint)
            }
            pg_sys::TRIGGER_EVENT_UPDATE if !worker::is_allocating() => {
                let old = Row::new(relation, trigger.tg_trigtuple, TRIGGER);
                let new = Row::new(relation, trigger.tg_newtuple, TRIGGER);
                let text_changed = |name: &CStr| old.text(name) != new.text(name);
                match table {
                    "seq_section" => {
                        if text_changed(c"space") || old.bigint(c"section") != new.bigint(c"section") {
                            refuse("a row of seq_section cannot move to another space or section".into(), "Its max_seq is its own section's.", hint);
                        }
                        if let (Some(old_max), Some(new_max)) = (old.bigint(c"max_seq"), new.bigint(c"max_seq")) {
                            if new_max < old_max {
                                refuse(
                                    format!("max_seq of a section cannot move back from {old_max} to {new_max}"),
                                    "Numbers up to max_seq may have been handed out already; moving it back would hand them out again.",
                                    hint,
                                );
                            }
                        }
                    }
                    "seq_space_secret" if text_changed(c"space") || old.bytes(c"secret") != new.bytes(c"secret") => {
                        refuse("the secret of a sequence space cannot change".into(), gone, hint);
                    }
                    "seq_space"
                        if text_changed(c"space")
                            || old.int(c"id") != new.int(c"id")
                            || old.int(c"section_keys") != new.int(c"section_keys")
                            || old.optional_text(c"text_key_hash") != new.optional_text(c"text_key_hash")
                            || old.optional_bool(c"copied") != new.optional_bool(c"copied") =>
                    {
                        refuse(
                            "the name, id, section_keys, text_key_hash and copied of a sequence space cannot change".into(),
                            "They decide which section, and which counter, each key has; changing them would hand numbers out again.",
                            hint,
                        );
                    }
                    _ => {}
                }
                retire_for_this_statement();
            }
            // The worker's own raise: the cache is what it raised.
            pg_sys::TRIGGER_EVENT_UPDATE => {}
            _ => retire_for_this_statement(),
        }
        pg_sys::Datum::from(0)
    }
}
