//! `seq_status()`: the section cache, the section table and the sections leased from a segment
//! authority at a glance.

use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::cache::{header, sections, CACHE};
use super::spaces::SECTION_TABLE;
use super::{databases, leased, served};
use crate::shmem;
use crate::tables;

#[pg_extern(volatile, parallel_safe)]
/// One row: the cache's size, this database's cached sections, the server's counters, this
/// database's persisted sections, and with a segment authority (`pg_idgen.seq_sections =
/// authority`) this database's sections held under a lease and the server's sections taken,
/// released, handed over, lost and refused (0 without one). The lease columns come last: a
/// declaration from before them (0.10.0's SQL, until ALTER EXTENSION … UPDATE) gets its columns.
// Why allowed: pgrx takes the columns' names from the `name!` in the signature.
#[allow(clippy::type_complexity)]
fn seq_status() -> TableIterator<
    'static,
    (
        name!(cache_sections, i32),
        name!(cached_sections, i32),
        name!(loading_sections, i32),
        name!(numbers_served, i64),
        name!(loads, i64),
        name!(raises, i64),
        name!(evictions, i64),
        name!(waits, i64),
        name!(persisted_sections, i64),
        name!(held_sections, i32),
        name!(sections_taken, i64),
        name!(sections_released, i64),
        name!(sections_handed_over, i64),
        name!(sections_lost, i64),
        name!(sections_refused, i64),
    ),
> {
    shmem::require_preloaded();
    // SAFETY: this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let header = header();
    // Running counts: what this database has, and a counter per process, not a scan of the cache.
    let (cached, loading) = {
        let _lock = CACHE.shared();
        databases::counts(database)
    };
    let served = served::total();
    let counter = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed) as i64;
    let (held, taken, released, handed_over, lost, refused) = leased::lease_counts(database);
    TableIterator::new(vec![(
        sections().len() as i32,
        cached as i32,
        loading as i32,
        served as i64,
        counter(&header.loads),
        counter(&header.raises),
        counter(&header.evictions),
        counter(&header.waits),
        persisted_sections(),
        held,
        taken,
        released,
        handed_over,
        lost,
        refused,
    )])
}

/// Rows of this database's section table, counted without SQL: monitoring roles need no right on
/// the table to see how many there are.
fn persisted_sections() -> i64 {
    let Some(oid) = tables::extension_table_oid(SECTION_TABLE) else {
        return 0;
    };
    // SAFETY: a heap scan of an existing table under ACCESS SHARE, with the statement's snapshot;
    // closed before returning.
    unsafe {
        let relation = pg_sys::table_open(oid, pg_sys::AccessShareLock as i32);
        let snapshot = if pg_sys::ActiveSnapshotSet() { pg_sys::GetActiveSnapshot() } else { pg_sys::GetTransactionSnapshot() };
        let scan = pg_sys::systable_beginscan(relation, pg_sys::InvalidOid, false, snapshot, 0, std::ptr::null_mut());
        let mut rows = 0;
        while !pg_sys::systable_getnext(scan).is_null() {
            rows += 1;
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(relation, pg_sys::AccessShareLock as i32);
        rows
    }
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION seq_status() IS
    'Per-key sequences: sections the cache holds and this database has cached or loading, numbers served, loads, raises, evictions and waits since start, persisted sections; with a segment authority, sections held under a lease, and sections taken, released, handed over, lost and refused since start.';
REVOKE EXECUTE ON FUNCTION seq_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seq_status() TO pg_monitor;
"#,
    name = "seq_status",
    requires = [seq_status]
);
