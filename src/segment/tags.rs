//! Managing tags: `segment_create()` and `segment_drop()`, SQL on the tag table with the
//! caller's privileges.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::table::{self, TAG};
use crate::errors;
use crate::tables::{self, display, TextBytes};

#[pg_extern(volatile)]
/// Creates a segment tag whose first number is `start`. Needs INSERT on the tag table.
fn segment_create(
    tag: Option<TextBytes>,
    start: default!(Option<i64>, 1),
    step: default!(Option<i32>, 1000),
    description: default!(Option<TextBytes>, "NULL"),
) {
    let (Some(tag), Some(start), Some(step)) = (tag, start, step) else {
        errors::raise(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, "segment_create: tag, start and step must not be NULL".into(), None, None)
    };
    let tag = tag.0;
    TAG.check(tag);
    // With an authority, this server's tags are the authority's: a local one would never be
    // served, and a conversion that made one would switch a column to the authority's numbers.
    if crate::settings::config().segments.authority.is_some() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "segment tags of this server live at the segment authority (pg_idgen.segment_authority)".into(),
            Some("segment_next() on this server takes its ranges from the authority's tags, never from local ones.".into()),
            Some("Create the tag at the authority, starting above every number in use. On the authority itself, leave pg_idgen.segment_authority unset."),
        )
    }
    if step < 1 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid step {step} for segment tag \"{}\"", display(tag)),
            Some("The step is how many numbers one range holds: at least 1.".into()),
            None,
        )
    }
    if start < 1 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid start {start} for segment tag \"{}\"", display(tag)),
            Some("Segment numbers start at 1 or above.".into()),
            None,
        )
    }
    let table = table::require_tag_table();
    // Why look first: a unique violation caught in the INSERT would leave the transaction aborted.
    // Two sessions creating the same tag at once: the second gets 23505.
    let deadline_ms = crate::worker::wait::Deadline::new().ms();
    if table::tag_exists(tag, deadline_ms) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
            format!("segment tag \"{}\" already exists", display(tag)),
            None,
            Some("Choose another tag, or drop this one first with segment_drop(tag) if no table uses its numbers."),
        )
    }
    let description = match description {
        Some(text) => tables::text_arg(text.0),
        None => pgrx::datum::DatumWithOid::null_oid(pg_sys::TEXTOID),
    };
    let args = [tables::text_arg(tag), (start - 1).into(), step.into(), description];
    table::run_on_tag_table(
        table,
        tables::Run::Change { events: pg_sys::TRIGGER_TYPE_INSERT },
        "INSERT INTO {table} (tag, max_id, step, description) VALUES ($1, $2, $3, $4)",
        |sql| Spi::run_with_args(sql, &args),
    )
    .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[pg_extern(volatile)]
/// Drops a segment tag. Needs DELETE on the tag table. Its cached numbers are never served again
/// (the table's trigger retires them).
fn segment_drop(tag: Option<TextBytes>) {
    let Some(tag) = tag else {
        errors::raise(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, "segment_drop: tag must not be NULL".into(), None, None)
    };
    TAG.check(tag.0);
    let table = table::require_tag_table();
    let deleted = table::run_on_tag_table(
        table,
        tables::Run::Change { events: pg_sys::TRIGGER_TYPE_DELETE },
        "DELETE FROM ONLY {table} WHERE tag OPERATOR(pg_catalog.=) $1 RETURNING true",
        |sql| Spi::get_one_with_args::<bool>(sql, &[tables::text_arg(tag.0)]),
    )
    .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None));
    if !matches!(deleted, Ok(Some(true))) {
        TAG.unknown(tag.0, "It is not in the tag table.", None);
    }
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION segment_create(text, bigint, int, text) IS
    'Creates a segment tag whose first number is start; step is the size of its smallest range.';
COMMENT ON FUNCTION segment_drop(text) IS
    'Drops a segment tag; its cached numbers are never served again.';
"#,
    name = "segment_tags",
    requires = [segment_create, segment_drop, "segment_table"]
);
