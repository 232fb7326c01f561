//! Numbers handed out, counted by each process in a counter of its own in shared memory (one a
//! `PGPROC`, on a line of its own): a call adds to its own line, which no other process writes,
//! and `seq_status()` sums one counter per process instead of every section's counters.

use std::sync::atomic::{AtomicU64, Ordering};

use pgrx::pg_sys;

use crate::shmem::{CacheLine, SharedBytes};

/// The counters: the region `pg_idgen sections served`, zeroed. One line for each process that
/// may call, and one for processes past them (none is, but a count must not be lost if one were).
pub static SERVED: SharedBytes = SharedBytes::new(c"pg_idgen sections served", || (backends() + 1) * std::mem::size_of::<CacheLine<AtomicU64>>());

/// Processes that may call: `MaxBackends` (the auxiliary processes, which never call, after them).
fn backends() -> usize {
    // SAFETY: set before shared memory is sized, and never changed after.
    usize::try_from(unsafe { pg_sys::MaxBackends }).unwrap_or(0)
}

fn counters() -> &'static [CacheLine<AtomicU64>] {
    // SAFETY: the region holds `backends() + 1` lines, zeroed.
    unsafe { std::slice::from_raw_parts(SERVED.start().cast::<CacheLine<AtomicU64>>().cast_const(), backends() + 1) }
}

/// This process's counter: the one at its `PGPROC`'s index. Whether it is this process's alone (a
/// plain add suffices) or the shared last one (past `MaxBackends`: an atomic add).
pub(super) fn own() -> (&'static AtomicU64, bool) {
    let counters = counters();
    // SAFETY: MyProc is this process's entry of ProcGlobal's array, for its whole life.
    let index = unsafe { pg_sys::MyProc.offset_from((*pg_sys::ProcGlobal).allProcs) };
    match usize::try_from(index).ok().filter(|&i| i + 1 < counters.len()) {
        Some(index) => (&counters[index].0, true),
        None => (&counters[counters.len() - 1].0, false),
    }
}

/// Adds one number handed out to `counter` (from `own()`).
#[inline]
pub(super) fn add_one(counter: &AtomicU64, alone: bool) {
    if alone {
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    } else {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Numbers handed out since the server started, by every process.
pub(super) fn total() -> u64 {
    counters().iter().map(|c| c.load(Ordering::Relaxed)).sum()
}
