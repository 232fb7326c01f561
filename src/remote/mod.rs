//! Another PostgreSQL server, reached with libpq as postgres_fdw and dblink reach theirs: users
//! keep their connection strings, service files, `.pgpass` and TLS. Only background workers use
//! it, never a backend's call, and never under a lock or inside a transaction of their own.
//!
//! - `libpq`: libpq's functions, a connection with a deadline on every step, connection strings;
//! - `lookup`: host names looked up on a thread of their own, by the deadline;
//! - `session`: what a pg_idgen session at another server pins, and finding the extension there;
//! - `status`: how the calls to each server went, in shared memory.
//!
//! Every step has a deadline: connecting and each statement run on a non-blocking connection
//! that is polled in short slices, so a server that does not answer (down, frozen, behind a
//! firewall that drops packets) costs at most `pg_idgen.remote_timeout`, and a worker told to
//! stop stops within a slice. A connection whose statement timed out is dropped, never reused:
//! its answer may still arrive.

use std::time::Duration;

mod libpq;
mod lookup;
mod session;
mod status;

pub use libpq::{check_conninfo, describe_conninfo, Connection};
pub use session::{extension_schema, pin_session};
pub use status::{authority, registry, STATUSES};

/// The longest one wait on the socket, or for a look-up, lasts before the caller's `stop` is
/// asked again.
const POLL_SLICE: Duration = Duration::from_millis(100);

/// Waits in slices of at most `POLL_SLICE`: asks `stop` before each, ends with `Unreachable`
/// ("timed out {doing}") at `deadline`, and otherwise calls `slice` with the time to wait, until
/// it has an answer.
fn in_slices<T>(
    deadline: std::time::Instant,
    stop: &dyn Fn() -> bool,
    doing: &str,
    mut slice: impl FnMut(Duration) -> Option<Result<T, RemoteError>>,
) -> Result<T, RemoteError> {
    loop {
        if stop() {
            return Err(RemoteError::Stopped);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(RemoteError::Unreachable(format!("timed out {doing} (pg_idgen.remote_timeout)")));
        }
        if let Some(answer) = slice(left.min(POLL_SLICE)) {
            return answer;
        }
    }
}

/// Why a remote call failed.
#[derive(Debug)]
pub enum RemoteError {
    /// No connection, or it broke, or the deadline passed: the server may not have seen the
    /// statement, or may have run it.
    Unreachable(String),
    /// The server ran the statement and raised an error: its SQLSTATE and message.
    Refused { sqlstate: String, message: String },
    /// The caller was told to stop while waiting.
    Stopped,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Unreachable(message) => write!(f, "{message}"),
            RemoteError::Refused { sqlstate, message } => write!(f, "{message} (SQLSTATE {sqlstate})"),
            RemoteError::Stopped => write!(f, "stopped while waiting"),
        }
    }
}

/// A row of text values (NULL: None).
pub type Row = Vec<Option<String>>;
