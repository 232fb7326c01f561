//! Whether this background worker was sent SIGTERM (`pg_terminate_backend()`, a shutdown), asked
//! as often as needed.
//!
//! Why not pgrx's `BackgroundWorker::sigterm_received()` alone: it clears its flag when it is
//! read, so of two places that ask in one pass of a worker's loop (a remote call's stop check, then
//! the loop's own), the second never learns of the signal, and the worker would run on — a
//! terminated worker never replaced, a shutdown waiting for it forever. This flag, once set, stays.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pgrx::bgworkers::BackgroundWorker;

/// Set for good once the worker learnt of a SIGTERM.
static RECEIVED: AtomicBool = AtomicBool::new(false);

/// Whether this worker was sent SIGTERM since it started. In a background worker only (pgrx's
/// signal handlers attached).
pub fn received() -> bool {
    remember(BackgroundWorker::sigterm_received())
}

/// Sleeps until the latch is set or `timeout` passed; true if the worker may go on (no SIGTERM,
/// and the postmaster alive: pgrx reports its death the same way, and it is kept the same way, as
/// a reason to stop).
pub fn wait_latch(timeout: Duration) -> bool {
    // pgrx's answer reads (and clears) its SIGTERM flag: false when a SIGTERM came.
    !remember(!BackgroundWorker::wait_latch(Some(timeout)))
}

/// Keeps a SIGTERM pgrx reported; whether one came so far.
fn remember(sigterm_now: bool) -> bool {
    if sigterm_now {
        RECEIVED.store(true, Ordering::Relaxed);
    }
    RECEIVED.load(Ordering::Relaxed)
}
