//! At the segment authority: its record of where its sections' rows were written (the WAL
//! timeline, the database, the server's start), and the wait that follows a change of any of them.
//!
//! The rows of `seq_section` and `seq_section_lease` bound what holders served only while the
//! authority keeps every write. A server that started (it may be a copy restored from a backup or
//! a snapshot), a standby promoted (a new timeline: it may have lagged behind its primary) and a
//! database copied from the authority's (`CREATE DATABASE … TEMPLATE`) may hold older rows. Each
//! counts as a reset: for the longest lease and margin the authority has given (its own settings,
//! or longer ones it had before), it gives no section to a server that does not hold it, so that
//! the live holders are heard first (their requests carry their limits and repair the maxima).
//! What it cannot see: a holder that died, or was cut off for the whole wait, before it could
//! repair (docs/many-servers.md).

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::tables::{self, Run};
use crate::{errors, worker};

/// The authority's wait after its latest reset, as the call finds it.
pub struct Wait {
    /// Whether it is on: no section to a server that does not hold it.
    pub on: bool,
    /// The longest lease and margin the authority knows it gave (ms): its own, or longer ones
    /// given before a restart with shorter settings.
    pub longest_ms: i64,
    /// When it ends, on the authority's clock, and why it began: for the servers that wait.
    pub ends_at: String,
    pub why: String,
}

/// Checks that the authority's rows were written where it runs now (timeline, database, server
/// start), records a reset otherwise, and answers whether the wait that follows is on. `own_ms`:
/// the authority's own lease and margin. Without the state table (pg_idgen's SQL objects before
/// 0.11.0, until ALTER EXTENSION … UPDATE), the wait after the server's start only.
pub fn wait(state: Option<pg_sys::Oid>, own_ms: i64) -> Wait {
    let Some(state) = state else {
        return start_wait(own_ms);
    };
    // SAFETY: this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId };
    let found = read(state, database, own_ms).unwrap_or_else(|| {
        // Its record was lost (the row deleted): nothing says the rows are whole.
        run(state, RECORD_LOST, |sql| Spi::run_with_args(sql, &[database.into(), own_ms.into()]));
        pgrx::log!("pg_idgen segment authority: its record of where its rows were written (seq_store_state) was lost; {WAITS}");
        read(state, database, own_ms).unwrap_or_else(|| gone())
    });
    if !found.same_place {
        let reset = run(state, RESET, |sql| {
            // update(), not select(): select() runs read-only until the transaction has an xid.
            Spi::connect_mut(|client| {
                let rows = client.update(sql, Some(1), &[database.into(), own_ms.into()])?;
                if rows.is_empty() {
                    return Ok(None); // another call recorded it first
                }
                rows.first().get_one::<String>()
            })
        });
        if let Some(why) = reset {
            pgrx::log!("pg_idgen segment authority: {why}; {WAITS}");
        }
    } else if found.longest_ms < own_ms {
        // Longer settings now.
        run(state, RAISE_LONGEST, |sql| Spi::run_with_args(sql, &[own_ms.into()]));
    } else if found.longest_ms > own_ms && !found.wait.on && crate::shmem::is_attached() {
        // Shorter ones, once the wait in which the longer leases given before ran out is over.
        // Only where pg_idgen is preloaded: its settings then change only with a restart (a
        // reset); elsewhere a reload could shorten them under leases given.
        run(state, LOWER_LONGEST, |sql| Spi::run_with_args(sql, &[own_ms.into()]));
    } else {
        return found.wait;
    }
    read(state, database, own_ms).unwrap_or_else(|| gone()).wait
}

/// Raised when the state row went under the call (deleted meanwhile): the next call records it.
fn gone() -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the segment authority's record of where its rows were written (seq_store_state) was deleted during the call".into(),
        None,
        None,
    )
}

/// The wait after the server's start, by its own settings.
fn start_wait(own_ms: i64) -> Wait {
    const START: &str = "SELECT pg_catalog.now() OPERATOR(pg_catalog.<) w.ends_at, w.ends_at::pg_catalog.text
       FROM (SELECT pg_catalog.pg_postmaster_start_time() OPERATOR(pg_catalog.+)
                    pg_catalog.make_interval(secs => $1::pg_catalog.float8 OPERATOR(pg_catalog./) 1000) AS ends_at) AS w";
    let (on, ends_at) = Spi::get_two_with_args::<bool, String>(START, &[own_ms.into()]).unwrap_or((Some(true), None));
    Wait { on: on.unwrap_or(true), longest_ms: own_ms, ends_at: ends_at.unwrap_or_default(), why: "its server started".into() }
}

/// What the log says the authority does after a reset.
const WAITS: &str = "it gives no section to a server that does not hold it for the longest lease and margin it gave";

/// The state row as a call finds it.
struct Found {
    /// Whether the rows were written on this timeline, in this database, since this start.
    same_place: bool,
    /// The longest lease and margin recorded.
    longest_ms: i64,
    wait: Wait,
}

/// Reads the state row (None: there is none).
fn read(state: pg_sys::Oid, database: pg_sys::Oid, own_ms: i64) -> Option<Found> {
    const READ: &str = "SELECT s.timeline OPERATOR(pg_catalog.=) pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8)
                AND s.database_oid OPERATOR(pg_catalog.=) $1
                AND s.server_started OPERATOR(pg_catalog.=) pg_catalog.pg_postmaster_start_time(),
            s.longest_ms,
            pg_catalog.now() OPERATOR(pg_catalog.<) w.ends_at, w.ends_at::pg_catalog.text, s.why
       FROM ONLY {state} AS s,
            LATERAL (SELECT s.reset_at OPERATOR(pg_catalog.+) pg_catalog.make_interval(
                            secs => GREATEST(s.longest_ms, $2)::pg_catalog.float8 OPERATOR(pg_catalog./) 1000) AS ends_at) AS w";
    run(state, READ, |sql| {
        // update(), not select(): select() would read with the calling statement's snapshot until
        // the transaction has an xid, and miss a reset another call committed meanwhile.
        Spi::connect_mut(|client| {
            let rows = client.update(sql, Some(1), &[database.into(), own_ms.into()])?;
            if rows.is_empty() {
                return Ok(None);
            }
            let row = rows.first();
            Ok(Some(Found {
                same_place: row.get::<bool>(1)?.unwrap_or(false),
                longest_ms: row.get::<i64>(2)?.unwrap_or(0),
                wait: Wait {
                    on: row.get::<bool>(3)?.unwrap_or(true),
                    longest_ms: row.get::<i64>(2)?.unwrap_or(0).max(own_ms),
                    ends_at: row.get::<String>(4)?.unwrap_or_default(),
                    why: row.get::<String>(5)?.unwrap_or_default(),
                },
            }))
        })
    })
}

/// Records a reset, if the rows were not written where the authority runs now (another call may
/// have recorded it since it was read): the wait runs from the server's start, or from now for a
/// new timeline or database (found now: nothing was given since). Returns why.
const RESET: &str = "WITH here AS (SELECT pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8) AS timeline,
                     $1::pg_catalog.oid AS database_oid, pg_catalog.pg_postmaster_start_time() AS started)
     UPDATE ONLY {state} AS s
        SET reset_at = CASE WHEN s.timeline OPERATOR(pg_catalog.=) h.timeline AND s.database_oid OPERATOR(pg_catalog.=) h.database_oid
                            THEN h.started ELSE pg_catalog.clock_timestamp() END,
            why = CASE WHEN s.timeline OPERATOR(pg_catalog.<>) h.timeline
                       THEN pg_catalog.format('its WAL timeline is %s, its rows were written on %s (a standby promoted: it may have lagged)',
                                              h.timeline, s.timeline)
                       WHEN s.database_oid OPERATOR(pg_catalog.<>) h.database_oid
                       THEN 'its database is a copy of the one its rows were written in'
                       ELSE 'its server started (it may be a copy restored from a backup or a snapshot)' END,
            timeline = h.timeline, database_oid = h.database_oid, server_started = h.started,
            longest_ms = GREATEST(s.longest_ms, $2)
       FROM here AS h
      WHERE s.timeline OPERATOR(pg_catalog.<>) h.timeline OR s.database_oid OPERATOR(pg_catalog.<>) h.database_oid
            OR s.server_started OPERATOR(pg_catalog.<>) h.started
  RETURNING s.why";

/// Records a reset for a state row that was lost.
const RECORD_LOST: &str = "INSERT INTO {state} (timeline, database_oid, server_started, reset_at, longest_ms, why)
     VALUES (pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8), $1, pg_catalog.pg_postmaster_start_time(),
             pg_catalog.clock_timestamp(), $2, 'its record of where its rows were written was lost')
     ON CONFLICT (only_row) DO NOTHING";

/// Records the authority's own lease and margin as the longest it gives: raised (never lowered by
/// a call that read an older row), or lowered after a wait.
const RAISE_LONGEST: &str = "UPDATE ONLY {state} SET longest_ms = GREATEST(longest_ms, $1)";
const LOWER_LONGEST: &str = "UPDATE ONLY {state} SET longest_ms = $1 WHERE longest_ms OPERATOR(pg_catalog.>) $1";

/// Runs a statement on the state table.
fn run<T>(state: pg_sys::Oid, statement: &str, run: impl FnOnce(&str) -> Result<T, pgrx::spi::SpiError>) -> T {
    run_at_authority(&[("{state}", state)], statement, run)
}

/// Runs a statement on the authority's tables (each named by its placeholder), as its allocation
/// does (`Run::Allocation`); an error is raised.
pub fn run_at_authority<T>(tables: &[(&str, pg_sys::Oid)], statement: &str, run: impl FnOnce(&str) -> Result<T, pgrx::spi::SpiError>) -> T {
    match tables::run_on_tables(tables, Run::Allocation, statement, |sql| worker::as_allocation(|| run(sql))) {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => errors::raise(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, error.to_string(), None, None),
        Err(message) => errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None),
    }
}
