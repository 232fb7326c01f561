//! The background worker "pg_idgen worker": allocates segment ranges in its own committed
//! transactions and publishes them to shared memory.
//!
//! One worker connects to `pg_idgen.database` with the server; another database gets a worker of
//! its own when a call there first needs a range (`wake`), which exits after a moment without
//! work, so that it never keeps `DROP DATABASE` from running. Each range is one `UPDATE
//! segment_tag … RETURNING` on a row locked with NOWAIT, committed and flushed to disk before the
//! range is published — whatever `synchronous_commit` the configuration, the database or the role
//! sets — so no number of it can be handed out and then lost in a crash or rolled back. A failed
//! allocation (a locked row or table) is rolled back and that tag is retried after a growing
//! pause, while the other tags are served. After a fatal error or `pg_terminate_backend` the
//! worker of `pg_idgen.database` exits with code 1 and the postmaster starts it again a second
//! later; another database's is started again by the next call that needs a range.
//!
//! The session's settings that could change what its SQL means or whether it commits durably are
//! pinned at start, above anything `ALTER DATABASE` or `ALTER ROLE` set: the database owner must
//! not be able to plant code this superuser session runs, or make it commit asynchronously.

use std::ffi::CStr;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::ranges::{self, Outcome};
use super::source::{Authority, LocalTable, RangeSource};
use crate::{clock, settings, shmem};

/// How long the worker sleeps when nobody asks for anything; it samples rates this often too.
const IDLE_WAKEUP: Duration = Duration::from_millis(250);

/// The worker session's settings, fixed for its life.
const PINNED_SETTINGS: [(&CStr, &CStr); 10] = [
    (c"search_path", c"pg_catalog, pg_temp"),
    // `ALTER DATABASE … SET role` would otherwise make the worker run as that role.
    (c"role", c"none"),
    // Why local and not on: "on" would also wait for synchronous standbys, and a standby that is
    // down would hold the worker (and its shutdown) without end. The flush below is what counts.
    (c"synchronous_commit", c"local"),
    (c"default_transaction_isolation", c"read committed"),
    (c"default_transaction_read_only", c"off"),
    (c"statement_timeout", c"0"),
    (c"idle_in_transaction_session_timeout", c"0"),
    // A locked tag table makes an allocation give up quickly and be retried; a locked row fails
    // at once (NOWAIT), so one busy tag never holds up the others.
    (c"lock_timeout", c"200ms"),
    // Why replica: then only triggers the table's owner enabled ALWAYS or REPLICA fire on the
    // worker's allocations (pg_idgen's own are ALWAYS). A role granted TRIGGER on segment_tag can
    // add a trigger, but not change when it fires: it would run as this superuser session, and
    // could rewrite max_id under the allocation.
    (c"session_replication_role", c"replica"),
    // A database's `exit_on_error = on` would turn every caught allocation error into an exit.
    (c"exit_on_error", c"off"),
];

/// What else the worker serves in each round (the per-key sequences' sections): given the
/// database, it does its work and says whether any is still wanted. Set in `_PG_init`; a
/// function, so that this module need not name its owner.
static mut ALSO_SERVE: Option<fn(pg_sys::Oid) -> bool> = None;

/// Names another round of work for every worker. Called from `_PG_init` while preloading.
pub fn also_serve(round: fn(pg_sys::Oid) -> bool) {
    // SAFETY: _PG_init runs once, in the postmaster, before any worker is started.
    unsafe { ALSO_SERVE = Some(round) };
}

/// Records a failed allocation of a tag or a section (its count of failures in a row, when the
/// worker may try it again, when it last warned) and says whether to log it: the first time,
/// then at most every 10 s. The pause doubles from 100 ms to 5 s.
pub fn record_failure(failures: &AtomicU32, retry_at_ms: &AtomicI64, warned_at_ms: &AtomicI64, now_ms: i64) -> bool {
    let failures = failures.fetch_add(1, Ordering::Relaxed) + 1;
    retry_at_ms.store(now_ms + (100i64 << failures.saturating_sub(1).min(6)).min(5000), Ordering::Relaxed);
    let warn = now_ms - warned_at_ms.load(Ordering::Relaxed) >= 10_000 || failures == 1;
    if warn {
        warned_at_ms.store(now_ms, Ordering::Relaxed);
    }
    warn
}

/// Registers the worker. Called from `_PG_init` while preloading.
pub fn register() {
    BackgroundWorkerBuilder::new("pg_idgen worker")
        .set_type("pg_idgen worker")
        .set_library("pg_idgen")
        .set_function("pg_idgen_worker_main")
        .enable_spi_access()
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// Pins the session's settings (see `PINNED_SETTINGS`). `ALTER DATABASE … SET
/// session_authorization` would otherwise make the worker run as another role: it goes back to
/// the superuser it connected as, first.
fn pin_settings() {
    // SAFETY: in a transaction; the bootstrap superuser exists in every cluster; SetConfigOption
    // with PGC_S_OVERRIDE outranks database and role settings.
    unsafe {
        let bootstrap_user = pg_sys::GetUserNameFromId(pg_sys::BOOTSTRAP_SUPERUSERID.into(), false);
        pg_sys::SetConfigOption(c"session_authorization".as_ptr(), bootstrap_user, pg_sys::GucContext::PGC_SUSET, pg_sys::GucSource::PGC_S_OVERRIDE);
        for (name, value) in PINNED_SETTINGS {
            pg_sys::SetConfigOption(name.as_ptr(), value.as_ptr(), pg_sys::GucContext::PGC_SUSET, pg_sys::GucSource::PGC_S_OVERRIDE);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn clear_worker_latch(_code: i32, _arg: pg_sys::Datum) {
    shmem::shared().worker_latch.store(std::ptr::null_mut(), Ordering::Release);
}

/// The worker of `pg_idgen.database`, started with the server and restarted after a failure.
#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn pg_idgen_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = settings::config().segments.database.clone();
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    // Why in a transaction: session_authorization is checked against the catalogs. The values
    // stay after the commit (they are SET, not SET LOCAL).
    BackgroundWorker::transaction(pin_settings);
    let state = shmem::shared();
    // SAFETY: MyProc is this process's, valid until exit; the callback clears the pointer first.
    unsafe {
        state.worker_latch.store(&raw mut (*pg_sys::MyProc).procLatch, Ordering::Release);
        pg_sys::before_shmem_exit(Some(clear_worker_latch), pg_sys::Datum::from(0));
    }
    state.main_database.store(u32::from(unsafe { pg_sys::MyDatabaseId }), Ordering::Release);
    serve(&database, None);
    // Why exit code 1: code 0 would unregister the worker for good, also after
    // pg_terminate_backend; 1 makes the postmaster start it again after the restart time.
    // SAFETY: ends this worker process; nothing of it is used after.
    unsafe { pg_sys::proc_exit(1) };
}

/// How long a worker of another database stays without anything to load before it exits. Why
/// short: a worker connected to a database keeps `DROP DATABASE` from running, and that waits
/// only 5 s for other sessions to go. A call that wants a range starts it again (a few ms).
const DATABASE_WORKER_IDLE_EXIT: Duration = Duration::from_secs(2);
/// A worker that has not come up this long after its entry was taken is taken for dead.
const DATABASE_WORKER_START_LIMIT_MS: i64 = 10_000;

std::thread_local! {
    /// Why the last start of this database's worker failed, for the error of a call that then
    /// waits in vain (`wake` itself never raises: a call that has its number must not fail).
    static START_FAILURE: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

const OID_MASK: u64 = 0xFFFF_FFFF;

/// Asks the worker of this backend's database for ranges: the worker of `pg_idgen.database`, or
/// the one of this database, started now if none runs.
pub fn wake() {
    let state = shmem::shared();
    if is_main_database() {
        shmem::set_latch(&state.worker_latch);
        return;
    }
    let database = u32::from(unsafe { pg_sys::MyDatabaseId });
    let now_ms = clock::monotonic_millis();
    if let Some(entry) = state.database_workers.iter().find(|e| e.state.load(Ordering::Acquire) & OID_MASK == database as u64) {
        if !entry.latch.load(Ordering::Acquire).is_null() {
            shmem::set_latch(&entry.latch);
            return;
        }
        if now_ms - entry.taken_at_ms.load(Ordering::Acquire) < DATABASE_WORKER_START_LIMIT_MS {
            return; // starting
        }
    }
    start_database_worker(state, database, now_ms);
}

/// Whether this backend's database is `pg_idgen.database`: the OID its worker published, or,
/// before it has connected, the name.
fn is_main_database() -> bool {
    let main = shmem::shared().main_database.load(Ordering::Acquire);
    // SAFETY: this backend's database; get_database_name returns a palloc'd name or NULL.
    unsafe {
        if main != 0 {
            return u32::from(pg_sys::MyDatabaseId) == main;
        }
        let name = pg_sys::get_database_name(pg_sys::MyDatabaseId);
        !name.is_null() && CStr::from_ptr(name).to_bytes() == settings::config().segments.database.as_bytes()
    }
}

/// Whether a worker serves this backend's database (or is starting); if the last start failed,
/// the reason.
pub fn is_running() -> Result<bool, &'static str> {
    let state = shmem::shared();
    if is_main_database() {
        return Ok(!state.worker_latch.load(Ordering::Acquire).is_null());
    }
    let database = u32::from(unsafe { pg_sys::MyDatabaseId }) as u64;
    match START_FAILURE.get() {
        Some(reason) => Err(reason),
        None => Ok(state.database_workers.iter().any(|e| e.state.load(Ordering::Acquire) & OID_MASK == database)),
    }
}

/// Takes a free entry for `database` and starts its worker. Under the slot lock: another call
/// may be doing the same, and an entry whose worker never came up is freed here.
#[cold]
fn start_database_worker(state: &shmem::SharedState, database: u32, now_ms: i64) {
    let taken = {
        let _lock = super::slot::SlotLock::exclusive();
        let mut existing = false;
        for entry in &state.database_workers {
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
        state.database_workers.iter().enumerate().find_map(|(index, entry)| {
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
        START_FAILURE.set(Some("could not start a pg_idgen segment worker for this database: every background worker slot is in use (raise max_worker_processes)"));
    } else {
        START_FAILURE.set(None);
    }
}

std::thread_local! {
    /// In a worker of another database: its entry, whose `stop_wanted` a `DROP DATABASE` sets.
    static MY_ENTRY: std::cell::Cell<Option<&'static shmem::DatabaseWorker>> = const { std::cell::Cell::new(None) };
}

/// Whether this worker must stop at once: SIGTERM, or its database is being dropped. Remote calls
/// check it every 100 ms (and while a host name is looked up).
pub fn told_to_stop() -> bool {
    BackgroundWorker::sigterm_received() || MY_ENTRY.get().is_some_and(|entry| entry.stop_wanted.load(Ordering::Acquire))
}

/// Called in the backend that drops a database (`stop` true), before it waits for the database's
/// sessions to go: the database's worker, if one runs, abandons what it does and exits (a segment
/// authority that does not answer would otherwise hold it past the 5 s that `DROP DATABASE`
/// waits). A drop that is rolled back costs a worker start at the next call. Called again when a
/// database is created (`stop` false): a database made with a dropped one's OID must not find
/// the request meant for that one's worker.
pub fn stop_for_drop(database: pg_sys::Oid, stop: bool) {
    if !shmem::is_attached() {
        return;
    }
    for entry in shmem::shared().database_workers.iter() {
        if entry.state.load(Ordering::Acquire) & OID_MASK == u32::from(database) as u64 {
            entry.stop_wanted.store(stop, Ordering::Release);
            shmem::set_latch(&entry.latch);
        }
    }
}

/// Whether an entry's state is the taking `argument` names.
fn same_taking(entry: &shmem::DatabaseWorker, argument: u64) -> bool {
    let current = entry.state.load(Ordering::Acquire);
    current & OID_MASK == argument & OID_MASK && (current >> 32) & 0xFF_FFFF == (argument >> 32) & 0xFF_FFFF
}

/// The entry of `argument`, if it still belongs to that taking.
fn entry_of(argument: u64) -> Option<&'static shmem::DatabaseWorker> {
    let entry = shmem::shared().database_workers.get((argument >> 56) as usize)?;
    same_taking(entry, argument).then_some(entry)
}

/// Frees the entry of `argument` if it is still that taking's.
fn free(argument: u64) {
    let _lock = super::slot::SlotLock::exclusive();
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

/// The worker of another database, started by a call that wanted a range there; it exits once
/// it has had nothing to do for a moment.
#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn pg_idgen_database_worker_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let argument = arg.value() as u64;
    let oid = pg_sys::Oid::from((argument & OID_MASK) as u32);
    // SAFETY: the callback frees this taking's entry whichever way the worker ends, also when the
    // connection below fails (a database dropped meanwhile).
    unsafe { pg_sys::before_shmem_exit(Some(free_database_entry), arg) };
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(oid), None);
    BackgroundWorker::transaction(pin_settings);
    let state = shmem::shared();
    // Claims its entry, unless it was freed (this worker came up too late) or the database is
    // the main one (renamed to pg_idgen.database meanwhile): one worker per database.
    let claimed = {
        let _lock = super::slot::SlotLock::exclusive();
        match entry_of(argument) {
            Some(entry) if state.main_database.load(Ordering::Acquire) != u32::from(oid) => {
                // SAFETY: MyProc is this process's, valid until exit; `free` clears the pointer.
                entry.latch.store(unsafe { &raw mut (*pg_sys::MyProc).procLatch }, Ordering::Release);
                MY_ENTRY.set(Some(entry));
                true
            }
            _ => false,
        }
    };
    if claimed {
        // SAFETY: a catalog lookup, in a transaction; the name is copied before it ends.
        let name = BackgroundWorker::transaction(|| unsafe {
            let name = pg_sys::get_database_name(oid);
            if name.is_null() { oid.to_string() } else { CStr::from_ptr(name).to_string_lossy().into_owned() }
        });
        serve(&name, Some(DATABASE_WORKER_IDLE_EXIT));
    }
    // Code 0: a dynamic worker is never restarted; the next call that wants a range starts one.
    // SAFETY: ends this worker process; nothing of it is used after.
    unsafe { pg_sys::proc_exit(0) };
}

/// Loads the ranges this database's slots want, from the local tag table or the segment
/// authority, until told to stop or, with `idle_exit`, until nothing was wanted that long.
fn serve(database: &str, idle_exit: Option<Duration>) {
    let state = shmem::shared();
    let database_oid = unsafe { pg_sys::MyDatabaseId };
    let segments = &settings::config().segments;
    let (source, started): (Box<dyn RangeSource>, String) = match &segments.authority {
        Some(authority) => (
            Box::new(Authority::new(authority, segments.remote_timeout_ms)),
            format!(
                "pg_idgen worker started; it takes segment ranges for database \"{database}\" from the segment authority ({})",
                crate::remote::describe_conninfo(authority)
            ),
        ),
        None => (Box::new(LocalTable), format!("pg_idgen worker started; it allocates segment ranges in database \"{database}\"")),
    };
    let mut source = source;
    // Why DEBUG1 for another database's worker: it starts again whenever its database needs a
    // range after a pause, which would fill the log.
    if idle_exit.is_none() {
        log!("{started}");
    } else {
        debug1!("{started}");
    }
    let mut sampled_second = 0;
    let mut busy_at = std::time::Instant::now();
    // Why between every allocation too: an allocation may wait for the segment authority up to
    // pg_idgen.remote_timeout, and the sections' calls must not wait with it.
    // SAFETY: set once in _PG_init, inherited by this process; read only.
    let serve_others = || unsafe { ALSO_SERVE }.is_some_and(|round| round(database_oid));
    loop {
        let mut others_wanted = serve_others();
        for need in ranges::needs(database_oid) {
            if told_to_stop() {
                break;
            }
            let outcome = source.allocate(&need);
            if !matches!(outcome, Outcome::Failed(_)) {
                busy_at = std::time::Instant::now();
            }
            if ranges::publish(&need, &outcome) {
                if let Outcome::Failed(message) = &outcome {
                    warning!(
                        "pg_idgen worker: could not allocate a range for segment tag \"{}\": {message} ({} attempts failed in a row; retrying)",
                        crate::tables::display(&need.tag),
                        ranges::failures(need.index)
                    );
                }
            }
            // Why after each tag: a waiting call need not wait for the other tags' allocations.
            // SAFETY: the condition variable lives in shared memory.
            unsafe { pg_sys::ConditionVariableBroadcast(state.segment_loaded()) };
            others_wanted = serve_others();
        }
        if others_wanted {
            busy_at = std::time::Instant::now();
        }
        ranges::sample_rates(&mut sampled_second);
        if ranges::anything_wanted(database_oid) {
            busy_at = std::time::Instant::now();
        }
        if idle_exit.is_some_and(|idle| busy_at.elapsed() >= idle) || told_to_stop() {
            break;
        }
        if !BackgroundWorker::wait_latch(Some(IDLE_WAKEUP)) {
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: rereads postgresql.conf in this process (log settings and the like).
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
    }
}
