//! `segment_status()`: the cached ranges of this database's tags.

use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::slot::{slots, HISTORY, OFFSET_BITS, OFFSET_MASK, SLOTS};
use crate::tables::TextOut;
use crate::{clock, shmem};

#[pg_extern(volatile, parallel_safe)]
/// One row per segment tag of this database cached in shared memory.
// Why allowed: pgrx takes the columns' names from the `name!` in the signature.
#[allow(clippy::type_complexity)]
fn segment_status() -> TableIterator<
    'static,
    (
        name!(tag, TextOut),
        name!(current_start, Option<i64>),
        name!(current_end, Option<i64>),
        name!(next_value, Option<i64>),
        name!(next_start, Option<i64>),
        name!(next_end, Option<i64>),
        name!(next_loaded, bool),
        name!(step, i64),
        name!(ids_per_second, f64),
        name!(waits, i64),
    ),
> {
    shmem::require_preloaded();
    // SAFETY: this backend's database, set when it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let now = clock::wall_unix_micros() / 1_000_000;
    let mut rows = Vec::new();
    let _lock = SLOTS.shared();
    for slot in slots() {
        if !slot.serves(database) {
            continue;
        }
        let cursor = slot.cursor.load(Ordering::Acquire);
        let generation = cursor >> OFFSET_BITS;
        let current = slot.ranges[generation as usize % 2].read(generation);
        let next = slot.ranges[(generation + 1) as usize % 2].read(generation + 1);
        let end = |r: Option<(i64, u64)>| r.map(|(start, len)| start + len as i64 - 1);
        let next_value = current.and_then(|(start, len)| {
            let offset = cursor & OFFSET_MASK;
            (offset < len).then_some(start + offset as i64)
        });
        let issued = slot.issued();
        let oldest = (0..HISTORY)
            .map(|i| (slot.history_second[i].load(Ordering::Relaxed), slot.history_issued[i].load(Ordering::Relaxed)))
            .filter(|&(second, _)| second > 0 && second >= now - 60 && second < now)
            .min_by_key(|&(second, _)| second);
        let rate = oldest.map_or(0.0, |(second, then)| (issued.saturating_sub(then)) as f64 / (now - second) as f64);
        rows.push((
            TextOut(slot.tag()),
            current.map(|(start, _)| start),
            end(current),
            next_value,
            next.map(|(start, _)| start),
            end(next),
            next.is_some(),
            slot.step.load(Ordering::Relaxed) as i64,
            rate,
            slot.waits.load(Ordering::Relaxed) as i64,
        ));
    }
    TableIterator::new(rows)
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION segment_status() IS
    'One row per cached segment tag: current and next range, next value, step, ids/s over the last minute, waits.';
-- It shows every tag of the database, which segment_tag itself does not: monitoring roles only.
REVOKE EXECUTE ON FUNCTION segment_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_status() TO pg_monitor;
"#,
    name = "segment_status",
    requires = [segment_status]
);

#[pg_extern(volatile, parallel_safe)]
/// Where the segment authority stands for this server: one row, or none without
/// `pg_idgen.segment_authority`.
// Why allowed: pgrx takes the columns' names from the `name!` in the signature.
#[allow(clippy::type_complexity)]
fn segment_authority_status() -> TableIterator<
    'static,
    (
        name!(authority, String),
        name!(reachable, bool),
        name!(succeeded_at, Option<pgrx::datum::TimestampWithTimeZone>),
        name!(failures_in_a_row, i64),
        name!(failures, i64),
        name!(last_error, Option<String>),
    ),
> {
    shmem::require_preloaded();
    let Some(authority) = &crate::settings::config().segments.authority else {
        return TableIterator::new(Vec::new());
    };
    let status = crate::remote::authority();
    let succeeded_at_us = status.succeeded_at_us.load(Ordering::Relaxed);
    let (failures_in_a_row, failures, last_error) = status.failures_shown();
    TableIterator::new(vec![(
        crate::remote::describe_conninfo(authority),
        status.reachable(),
        (succeeded_at_us != 0).then(|| clock::unix_micros_to_timestamptz(succeeded_at_us)),
        failures_in_a_row,
        failures,
        last_error,
    )])
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION segment_authority_status() IS
    'Whether the segment authority (pg_idgen.segment_authority) answers this server''s worker (no row without one).';
-- Its last_error may name users and addresses: monitoring roles only, as segment_status().
REVOKE EXECUTE ON FUNCTION segment_authority_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_authority_status() TO pg_monitor;
"#,
    name = "segment_authority_status_comment",
    requires = [segment_authority_status]
);
