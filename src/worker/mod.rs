//! The database worker, "pg_idgen worker": one per database, which fills the caches in shared
//! memory that calls take numbers from — the services, declared once in `services` (the segment
//! ranges, the sections of per-key sequences) — in committed and flushed transactions of its own,
//! never in a caller's.
//!
//! One worker connects to `pg_idgen.database` with the server; another database gets a worker of
//! its own when a call there first needs something (`wake`), which exits after a moment without
//! work, so that it never keeps `DROP DATABASE` from running. In each turn every service serves
//! what its calls asked for, for a moment at most (`TURN`): a service whose requests wait (on a
//! locked row, on a remote server that does not answer) holds the others up for one request at
//! most. A failing request is retried after a growing pause (`Backoff`), while the others are
//! served. After a fatal error or `pg_terminate_backend` the worker of `pg_idgen.database` exits
//! with code 1 and the postmaster starts it again a second later; another database's is started
//! again by the next call that needs it.
//!
//! The session's settings that could change what its SQL means or whether it commits durably are
//! pinned at start, above anything `ALTER DATABASE` or `ALTER ROLE` set (`session`): the database
//! owner must not be able to plant code this superuser session runs, or make it commit
//! asynchronously.
//!
//! - `pool`: which worker serves which database (the region `pg_idgen workers`), waking the one of
//!   a call's database and starting it on demand, telling it to stop;
//! - `wait`: a call's wait for what it asked the worker for, and the errors when it ends without;
//! - `transaction`: the worker's transactions, and the flag its own updates carry;
//! - `authority`: the worker's session at the segment authority, for the services served from it;
//! - `backoff`: the pause of a failing request;
//! - `session`: the settings the worker's session pins;
//! - `serve`: the worker's loop over the services, and its retiring of a database's caches.
//!
//! This module names no service: `services` (above it) lists them and starts the worker with
//! them.

mod authority;
mod backoff;
mod pool;
mod serve;
mod session;
mod transaction;
pub mod wait;

use std::ffi::CStr;
use std::time::Instant;

use pgrx::pg_sys;

pub use authority::Authority;
pub use backoff::Backoff;
pub use pool::{notify_published, told_to_stop, wake, POOL};
pub use serve::{install_drop_hook, on_object_access, register, run_for_database, run_main};
pub use transaction::{as_allocation, caught_message, flush_last_commit, in_worker_transaction, is_allocating};

/// A cache in shared memory that the database worker fills for the calls of its database.
pub trait Service: Sync {
    /// What the service serves, and from where, for the worker's start line ("segment ranges from
    /// the tag table").
    fn describe(&self) -> String;
    /// Starts serving the worker's database: what the service keeps from turn to turn (a
    /// connection to another server, the last second it sampled).
    fn start(&self) -> Box<dyn Serving>;
    /// Forgets everything cached of `database`'s rows: its tables were dropped, or the database
    /// was dropped or created. In any process; a no-op where shared memory is not there.
    fn retire_database(&self, database: pg_sys::Oid);
    /// The tables (of extension pg_idgen) whose rows the service caches: dropping one retires the
    /// database's caches.
    fn cached_tables(&self) -> &'static [&'static CStr];
}

/// A service as one worker serves it.
pub trait Serving {
    /// Serves what the calls of `database` asked for, one request after another, until none is
    /// left or `until` has passed (after one request at least); wakes the calls that wait
    /// (`notify_published`) as it publishes.
    fn serve(&mut self, database: pg_sys::Oid, until: Instant) -> Served;
}

/// What a turn of a service left.
#[derive(Clone, Copy, Debug, Default)]
pub struct Served {
    /// Requests are left that the turn did not get to: the worker serves again at once.
    pub more: bool,
    /// Something is asked for and not failing: the worker of another database is not idle. Why not
    /// failing requests: a worker that cannot serve (a remote server is down) must still exit in
    /// time for `DROP DATABASE`; a call that waits starts it again.
    pub wanted: bool,
}
