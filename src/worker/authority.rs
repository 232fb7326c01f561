//! The database worker's session at the segment authority (`pg_idgen.segment_authority`), which
//! the services that take their numbers from it share the rules of: every step has a deadline
//! (`pg_idgen.remote_timeout`), nothing local is open while it waits, an unreachable authority is
//! not tried again for a second (the other requests of a round would each wait out a deadline),
//! and every call's outcome is recorded in `segment_authority_status()`.

use std::time::{Duration, Instant};

use pgrx::pg_sys;

use super::told_to_stop;
use crate::remote::{self, Connection, RemoteError, Row};

pub struct Authority {
    conninfo: String,
    /// The connection string without secrets, for messages.
    pub described: String,
    timeout: Duration,
    connection: Option<Connection>,
    /// The local database's encoding: names are sent as they are stored here.
    encoding: String,
    /// After the authority was unreachable, no call before this.
    paused_until: Option<Instant>,
}

impl Authority {
    pub fn new(conninfo: &str, timeout_ms: u64) -> Authority {
        // SAFETY: the name of this database's encoding, a static C string.
        let encoding = unsafe { std::ffi::CStr::from_ptr(pg_sys::GetDatabaseEncodingName()) }.to_string_lossy().into_owned();
        Authority {
            conninfo: conninfo.to_string(),
            described: remote::describe_conninfo(conninfo),
            timeout: Duration::from_millis(timeout_ms),
            connection: None,
            encoding,
            paused_until: None,
        }
    }

    /// Runs `statement(schema)` (pg_idgen's schema there, quoted) with `params`, connecting first
    /// if need be, and records the outcome; `recovered` runs when a call succeeds after failures.
    /// An error's message names the authority.
    pub fn call(&mut self, statement: impl FnOnce(&str) -> String, params: &[&[u8]], recovered: impl FnOnce()) -> Result<Vec<Row>, String> {
        let status = remote::authority();
        if self.paused_until.is_some_and(|until| Instant::now() < until) {
            // Not a call: the pause is not moved on, nor counted as a failure.
            return Err(status.last_message());
        }
        match self.try_call(statement, params) {
            Ok(rows) => {
                self.paused_until = None;
                if status.failures_in_a_row.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                    recovered();
                }
                status.succeeded();
                Ok(rows)
            }
            Err(error) => {
                let unreachable = !matches!(error, RemoteError::Refused { .. });
                let message = format!("the segment authority ({}): {error}", self.described);
                if unreachable {
                    self.connection = None;
                    status.failed(&message, true);
                    self.paused_until = Some(Instant::now() + Duration::from_secs(1));
                } else {
                    status.failed(&message, false);
                }
                Err(message)
            }
        }
    }

    fn try_call(&mut self, statement: impl FnOnce(&str) -> String, params: &[&[u8]]) -> Result<Vec<Row>, RemoteError> {
        let deadline = Instant::now() + self.timeout;
        let stop = told_to_stop;
        if self.connection.is_none() {
            let connection = Connection::open(&self.conninfo, "pg_idgen worker", Some(&self.encoding), deadline, &stop)?;
            remote::pin_session(&connection, self.timeout.as_millis() as u64, deadline, &stop)?;
            self.connection = Some(connection);
        }
        let connection = self.connection.as_ref().expect("opened above");
        let schema = remote::extension_schema(connection, deadline, &stop)?;
        connection.query(&statement(&schema), params, deadline, &stop)
    }
}
