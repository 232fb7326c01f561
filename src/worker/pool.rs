//! Which worker serves which database: the region `pg_idgen workers`. The worker of
//! `pg_idgen.database` starts with the server; a call in another database that needs the worker
//! takes an entry for its database and starts one there (a dynamic background worker), which
//! claims the entry, and frees it when it exits.
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `main_latch`, `main_database` | the worker of `pg_idgen.database`, at its start (the latch also at its exit) | one writer; calls set the latch |
//! | `entries[i].state` | a call that takes the entry; the worker's exit (free); a call that frees an entry whose worker never came up | the region's lock |
//! | `entries[i].latch` | the worker that claims the entry; free | the region's lock; calls set it |
//! | `entries[i].taken_at_ms` | a call that takes the entry | the region's lock |
//! | `entries[i].stop_wanted` | a take (clears it); `DROP DATABASE` and `CREATE DATABASE` (`stop_for_drop`) | atomic flag |
//! | `published` | initialised at creation; broadcast by workers | PostgreSQL's condition variable |

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use pgrx::bgworkers::BackgroundWorkerBuilder;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::shmem::{self, Shared};
use crate::{clock, settings};

/// At most this many databases besides `pg_idgen.database` have a worker at once.
pub const MAX_DATABASE_WORKERS: usize = 16;

/// The worker of one more database. Taken, claimed and freed only under the region's lock; read
/// without it.
#[repr(C)]
pub struct Entry {
    /// `epoch << 32 | database OID`; the OID is 0 while the entry is free. Each taking raises the
    /// epoch, so a worker started for an earlier taking cannot claim a later one.
    state: AtomicU64,
    /// The worker's latch once it has claimed the entry, null before.
    latch: AtomicPtr<pg_sys::Latch>,
    /// When the entry was taken (monotonic ms): a worker that never came up frees it after a while.
    taken_at_ms: AtomicI64,
    /// Set when the database is being dropped: the worker abandons any call and exits, since
    /// `DROP DATABASE` waits only 5 s for the database's sessions to go.
    stop_wanted: AtomicBool,
}

/// The workers (see the module's table).
#[repr(C)]
pub struct Pool {
    /// The latch of the worker of `pg_idgen.database` while it runs (null otherwise).
    main_latch: AtomicPtr<pg_sys::Latch>,
    /// The OID of `pg_idgen.database`, once its worker has connected (0 before).
    main_database: AtomicU32,
    /// The workers of other databases than `pg_idgen.database`, started on demand.
    entries: [Entry; MAX_DATABASE_WORKERS],
    /// Broadcast by a worker whenever it published what calls wait for, or gave up on it.
    published: pg_sys::ConditionVariable,
}

pub static POOL: Shared<Pool> = Shared::with_lock(c"pg_idgen workers", init_pool);

/// # Safety
/// As `Region::init`: zeroed memory of ours alone.
unsafe fn init_pool(at: *mut Pool) {
    // SAFETY: per the contract; a zeroed condition variable is not valid before PostgreSQL 16.
    unsafe { pg_sys::ConditionVariableInit(&raw mut (*at).published) };
}

/// The condition variable on which calls wait for the worker, as PostgreSQL's functions want it.
pub fn published() -> *mut pg_sys::ConditionVariable {
    (&raw const POOL.get().published).cast_mut()
}

/// Wakes the calls that wait for the worker: it published what they wait for, or gave up on it.
pub fn notify_published() {
    // SAFETY: the condition variable lives in shared memory.
    unsafe { pg_sys::ConditionVariableBroadcast(published()) };
}

/// How long a worker of another database stays without anything to do before it exits. Why
/// short: a worker connected to a database keeps `DROP DATABASE` from running, and that waits
/// only 5 s for other sessions to go. A call that wants something starts it again (a few ms).
pub(super) const DATABASE_WORKER_IDLE_EXIT: std::time::Duration = std::time::Duration::from_secs(2);
/// A worker that has not come up this long after its entry was taken is taken for dead.
const DATABASE_WORKER_START_LIMIT_MS: i64 = 10_000;

std::thread_local! {
    /// Why the last start of this database's worker failed, for the error of a call that then
    /// waits in vain (`wake` itself never raises: a call that has its number must not fail).
    static START_FAILURE: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

const OID_MASK: u64 = 0xFFFF_FFFF;

/// This backend's database.
fn my_database() -> u32 {
    // SAFETY: set when the backend connected, never changed after.
    u32::from(unsafe { pg_sys::MyDatabaseId })
}

/// Asks the worker of this backend's database for what its calls want: the worker of
/// `pg_idgen.database`, or the one of this database, started now if none runs.
pub fn wake() {
    let pool = POOL.get();
    if is_main_database() {
        shmem::set_latch(&pool.main_latch);
        return;
    }
    let database = my_database();
    let now_ms = clock::monotonic_millis();
    if let Some(entry) = pool.entries.iter().find(|e| e.state.load(Ordering::Acquire) & OID_MASK == database as u64) {
        if !entry.latch.load(Ordering::Acquire).is_null() {
            shmem::set_latch(&entry.latch);
            return;
        }
        if now_ms - entry.taken_at_ms.load(Ordering::Acquire) < DATABASE_WORKER_START_LIMIT_MS {
            return; // starting
        }
    }
    start_database_worker(pool, database, now_ms);
}

/// Whether this backend's database is `pg_idgen.database`: the OID its worker published, or,
/// before it has connected, the name.
fn is_main_database() -> bool {
    let main = POOL.get().main_database.load(Ordering::Acquire);
    if main != 0 {
        return my_database() == main;
    }
    // SAFETY: this backend's database; get_database_name returns a palloc'd name or NULL.
    unsafe {
        let name = pg_sys::get_database_name(pg_sys::MyDatabaseId);
        !name.is_null() && CStr::from_ptr(name).to_bytes() == settings::config().segments.database.as_bytes()
    }
}

/// Whether a worker serves this backend's database (or is starting); if the last start failed,
/// the reason.
pub fn is_running() -> Result<bool, &'static str> {
    let pool = POOL.get();
    if is_main_database() {
        return Ok(!pool.main_latch.load(Ordering::Acquire).is_null());
    }
    let database = my_database() as u64;
    match START_FAILURE.get() {
        Some(reason) => Err(reason),
        None => Ok(pool.entries.iter().any(|e| e.state.load(Ordering::Acquire) & OID_MASK == database)),
    }
}

/// Takes a free entry for `database` and starts its worker. Under the region's lock: another call
/// may be doing the same, and an entry whose worker never came up is freed here.
#[cold]
fn start_database_worker(pool: &Pool, database: u32, now_ms: i64) {
    let taken = {
        let _lock = POOL.exclusive();
        let mut existing = false;
        for entry in &pool.entries {
            let current = entry.state.load(Ordering::Acquire);
            if current & OID_MASK != database as u64 {
                continue;
            }
            if entry.latch.load(Ordering::Acquire).is_null() && now_ms - entry.taken_at_ms.load(Ordering::Acquire) >= DATABASE_WORKER_START_LIMIT_MS {
                // Its worker never claimed it (it failed to start): free it; a late one cannot
                // claim it any more (the epoch check in `claim`).
                entry.state.store(current & !OID_MASK, Ordering::Release);
            } else {
                existing = true;
            }
        }
        if existing {
            return;
        }
        pool.entries.iter().enumerate().find_map(|(index, entry)| {
            let current = entry.state.load(Ordering::Acquire);
            (current & OID_MASK == 0).then(|| {
                let taken = (((current >> 32) + 1) << 32) | database as u64;
                entry.taken_at_ms.store(now_ms, Ordering::Release);
                entry.stop_wanted.store(false, Ordering::Release);
                entry.latch.store(std::ptr::null_mut(), Ordering::Release);
                entry.state.store(taken, Ordering::Release);
                (index, taken)
            })
        })
    };
    let Some((index, taken)) = taken else {
        START_FAILURE.set(Some("no room for another pg_idgen segment worker: at most 16 databases besides pg_idgen.database have one at once"));
        return;
    };
    // The worker learns its entry and the taking it belongs to (index, low 24 bits of the epoch, OID).
    let argument = ((index as u64) << 56) | ((taken >> 32) & 0xFF_FFFF) << 32 | database as u64;
    let started = BackgroundWorkerBuilder::new("pg_idgen worker")
        .set_type("pg_idgen worker")
        .set_library("pg_idgen")
        .set_function("pg_idgen_database_worker_main")
        .set_argument(Some(pg_sys::Datum::from(argument)))
        .enable_spi_access()
        .set_restart_time(None)
        .load_dynamic();
    if started.is_err() {
        free(argument);
        START_FAILURE.set(Some(
            "could not start a pg_idgen segment worker for this database: every background worker slot is in use (raise max_worker_processes)",
        ));
    } else {
        START_FAILURE.set(None);
    }
}

std::thread_local! {
    /// In a worker of another database: its entry, whose `stop_wanted` a `DROP DATABASE` sets.
    static MY_ENTRY: std::cell::Cell<Option<&'static Entry>> = const { std::cell::Cell::new(None) };
}

/// Whether this worker must stop at once: SIGTERM, or its database is being dropped. Remote calls
/// check it every 100 ms (and while a host name is looked up), and services between requests.
pub fn told_to_stop() -> bool {
    crate::sigterm::received() || MY_ENTRY.get().is_some_and(|entry| entry.stop_wanted.load(Ordering::Acquire))
}

/// Called in the backend that drops a database (`stop` true), before it waits for the database's
/// sessions to go: the database's worker, if one runs, abandons what it does and exits (a segment
/// authority that does not answer would otherwise hold it past the 5 s that `DROP DATABASE`
/// waits). A drop that is rolled back costs a worker start at the next call. Called again when a
/// database is created (`stop` false): a database made with a dropped one's OID must not find
/// the request meant for that one's worker.
pub(super) fn stop_for_drop(database: pg_sys::Oid, stop: bool) {
    if !shmem::is_attached() {
        return;
    }
    for entry in POOL.get().entries.iter() {
        if entry.state.load(Ordering::Acquire) & OID_MASK == u32::from(database) as u64 {
            entry.stop_wanted.store(stop, Ordering::Release);
            shmem::set_latch(&entry.latch);
        }
    }
}

/// Publishes the worker of `pg_idgen.database`: its latch, until it exits, and its database.
pub(super) fn publish_main() {
    let pool = POOL.get();
    // SAFETY: MyProc is this process's, valid until exit; the callback clears the pointer first.
    unsafe {
        pool.main_latch.store(&raw mut (*pg_sys::MyProc).procLatch, Ordering::Release);
        pg_sys::before_shmem_exit(Some(unpublish_main), pg_sys::Datum::from(0));
    }
    pool.main_database.store(my_database(), Ordering::Release);
}

#[pg_guard]
unsafe extern "C-unwind" fn unpublish_main(_code: i32, _arg: pg_sys::Datum) {
    POOL.get().main_latch.store(std::ptr::null_mut(), Ordering::Release);
}

/// The database of a worker started by `start_database_worker` with `argument`; its entry is freed
/// whichever way the worker ends, also when it cannot connect (a database dropped meanwhile).
pub(super) fn database_of(argument: pg_sys::Datum) -> pg_sys::Oid {
    // SAFETY: the callback frees this taking's entry at exit.
    unsafe { pg_sys::before_shmem_exit(Some(free_database_entry), argument) };
    pg_sys::Oid::from((argument.value() as u64 & OID_MASK) as u32)
}

/// Claims the entry `argument` names for this worker, unless it was freed (this worker came up
/// too late) or the database is the main one (renamed to `pg_idgen.database` meanwhile): one
/// worker per database.
pub(super) fn claim(argument: pg_sys::Datum) -> bool {
    let argument = argument.value() as u64;
    let pool = POOL.get();
    let _lock = POOL.exclusive();
    match entry_of(argument) {
        Some(entry) if pool.main_database.load(Ordering::Acquire) != (argument & OID_MASK) as u32 => {
            // SAFETY: MyProc is this process's, valid until exit; `free` clears the pointer.
            entry.latch.store(unsafe { &raw mut (*pg_sys::MyProc).procLatch }, Ordering::Release);
            MY_ENTRY.set(Some(entry));
            true
        }
        _ => false,
    }
}

/// Whether an entry's state is the taking `argument` names.
fn same_taking(entry: &Entry, argument: u64) -> bool {
    let current = entry.state.load(Ordering::Acquire);
    current & OID_MASK == argument & OID_MASK && (current >> 32) & 0xFF_FFFF == (argument >> 32) & 0xFF_FFFF
}

/// The entry of `argument`, if it still belongs to that taking.
fn entry_of(argument: u64) -> Option<&'static Entry> {
    let entry = POOL.get().entries.get((argument >> 56) as usize)?;
    same_taking(entry, argument).then_some(entry)
}

/// Frees the entry of `argument` if it is still that taking's.
fn free(argument: u64) {
    let _lock = POOL.exclusive();
    if let Some(entry) = entry_of(argument) {
        entry.latch.store(std::ptr::null_mut(), Ordering::Release);
        let current = entry.state.load(Ordering::Acquire);
        entry.state.store(current & !OID_MASK, Ordering::Release);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn free_database_entry(_code: i32, arg: pg_sys::Datum) {
    free(arg.value() as u64);
}
