//! A call's wait for what it asked the database worker for (a segment range, a section loaded or
//! raised): on the worker's condition variable, asking again before each sleep, honouring cancel
//! and `statement_timeout`, until its deadline, `pg_idgen.segment_wait_timeout` after it first had
//! to wait. A wait that ends without what it waited for raises the error of its family.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::pool;
use crate::tables::display;
use crate::{clock, errors, settings};

/// When a call must give up waiting: `pg_idgen.segment_wait_timeout` after it first had to wait,
/// however often it starts over. Why not from the call's start: reading the clock on every call
/// would cost the hot path more than the rest of it.
pub struct Deadline(Option<i64>);

impl Deadline {
    pub const fn new() -> Deadline {
        Deadline(None)
    }

    /// The deadline (monotonic ms), set at the first ask. Why the 1 ms more: the clock is read in
    /// whole milliseconds, cut off, so the wait began up to 1 ms after its reading; the wait is never
    /// shorter than the timeout.
    pub fn ms(&mut self) -> i64 {
        *self.0.get_or_insert_with(|| clock::monotonic_millis() + settings::config().segments.wait_timeout_ms as i64 + 1)
    }
}

/// A sleep prepared on the worker's condition variable, cancelled whichever way the wait ends (its
/// end, an error, an interrupt).
struct Sleep(*mut pg_sys::ConditionVariable);

impl Sleep {
    fn prepare() -> Sleep {
        let cv = pool::published();
        // SAFETY: the condition variable lives in shared memory; the guard cancels the sleep.
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
        Sleep(cv)
    }

    /// Sleeps until the worker broadcasts, `ms` pass, or an interrupt (it checks for those).
    fn sleep(&self, ms: i64) {
        // SAFETY: prepared to sleep on this condition variable.
        unsafe { pg_sys::ConditionVariableTimedSleep(self.0, ms as _, pg_sys::PG_WAIT_EXTENSION) };
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // SAFETY: cancels this process's prepared sleep (a no-op if none is).
        unsafe { pg_sys::ConditionVariableCancelSleep() };
    }
}

/// Waits until `done()`: before each sleep it asks (`ask`: the flags the worker reads, and its
/// latch), since a request the worker took up before this call's need arose may not cover it; at
/// the deadline `timed_out` raises the family's error (it does not return).
pub fn until(deadline: &mut Deadline, mut done: impl FnMut() -> bool, mut ask: impl FnMut(), timed_out: impl FnOnce()) {
    let deadline_ms = deadline.ms();
    let sleep = Sleep::prepare();
    while !done() {
        let remaining = deadline_ms - clock::monotonic_millis();
        if remaining <= 0 {
            drop(sleep);
            timed_out();
            unreachable!("a wait's timeout raises an error");
        }
        ask();
        sleep.sleep(remaining.min(100));
    }
}

/// What the calls of a family wait for, in the words of its errors.
pub struct Awaited {
    /// What a call's numbers belong to: "segment tag", "sequence space".
    pub kind: &'static str,
    /// What its numbers are not, in shared memory, when a wait ends without them: "left", "ready".
    pub numbers: &'static str,
    /// What the worker does for the call: "load a range", "raise a section".
    pub work: &'static str,
    /// What it could not do in time: "load a range", "raise its section".
    pub failed: &'static str,
}

/// Raises the error of a wait for `name` (a tag, a space) that ended at its deadline: the worker
/// of this database could not be started, does not run, or ran and did not serve in time —
/// `detail` says what may hold it up, `hint` where to look — unless `while_running` raises a more
/// precise error of the family first (a remote server that does not answer).
#[cold]
pub fn no_numbers_in_time(awaited: &Awaited, name: &[u8], while_running: impl FnOnce(String), detail: &str, hint: &'static str) -> ! {
    let timeout_ms = settings::config().segments.wait_timeout_ms;
    let subject = format!("{} \"{}\" has no numbers {} in shared memory", awaited.kind, display(name), awaited.numbers);
    match pool::is_running() {
        Err(reason) => errors::raise(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!("{subject}: {reason}"),
            Some(format!("The call waited pg_idgen.segment_wait_timeout ({timeout_ms} ms) for a worker of this database to {}.", awaited.work)),
            None,
        ),
        Ok(false) => errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{subject}, and the pg_idgen worker is not running"),
            Some(format!("The call waited pg_idgen.segment_wait_timeout ({timeout_ms} ms) for the worker to {}.", awaited.work)),
            // Why the log line of the start too: a server whose max_worker_processes has no slot
            // left for the worker of pg_idgen.database never starts it.
            Some(
                "The worker of pg_idgen.database starts again a second after it stops, another database's at the next call; the server log says why \
                 it is not running (\"too many background workers\" at the server's start: raise max_worker_processes).",
            ),
        ),
        Ok(true) => {}
    }
    while_running(subject.clone());
    errors::raise(
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        format!("{subject}, and the worker could not {} in time", awaited.failed),
        Some(format!("The call waited pg_idgen.segment_wait_timeout ({timeout_ms} ms). {detail}")),
        Some(hint),
    )
}
