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
use std::sync::atomic::Ordering;
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::ranges::{self, Outcome};
use super::source::{Authority, LocalTable, RangeSource};
use super::table;
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
    /// Whether this backend's database is `pg_idgen.database` (None: not looked up yet).
    static MAIN_DATABASE: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Asks the worker of this backend's database for ranges: the worker of `pg_idgen.database`, or
/// the one of this database, started now if none runs.
pub fn wake() {
    let state = shmem::shared();
    let database = unsafe { pg_sys::MyDatabaseId };
    if is_main_database() {
        shmem::set_latch(&state.worker_latch);
        return;
    }
    let now_ms = clock::monotonic_millis();
    for entry in &state.database_workers {
        if entry.database.load(Ordering::Acquire) != u32::from(database) {
            continue;
        }
        if !entry.latch.load(Ordering::Acquire).is_null() {
            shmem::set_latch(&entry.latch);
            return;
        }
        if now_ms - entry.taken_at_ms.load(Ordering::Acquire) < DATABASE_WORKER_START_LIMIT_MS {
            return; // starting
        }
        // It never came up (its database was dropped meanwhile, say): free the entry.
        let _ = entry.database.compare_exchange(u32::from(database), 0, Ordering::AcqRel, Ordering::Relaxed);
    }
    start_database_worker(state, database, now_ms);
}

/// Whether this backend's database is `pg_idgen.database` (looked up once).
fn is_main_database() -> bool {
    MAIN_DATABASE.get().unwrap_or_else(|| {
        // SAFETY: this backend's database; get_database_name returns a palloc'd name or NULL.
        let name = unsafe { pg_sys::get_database_name(pg_sys::MyDatabaseId) };
        let main = !name.is_null() && unsafe { CStr::from_ptr(name) }.to_bytes() == settings::config().segments.database.as_bytes();
        MAIN_DATABASE.set(Some(main));
        main
    })
}

/// Whether the worker that serves this backend's database runs (or is starting).
pub fn is_running() -> bool {
    let state = shmem::shared();
    let database = u32::from(unsafe { pg_sys::MyDatabaseId });
    if is_main_database() {
        return !state.worker_latch.load(Ordering::Acquire).is_null();
    }
    state.database_workers.iter().any(|entry| entry.database.load(Ordering::Acquire) == database)
}

/// Takes a free entry for `database` and starts its worker. Why under the slot lock: two calls
/// must not start two workers for one database.
#[cold]
fn start_database_worker(state: &shmem::SharedState, database: pg_sys::Oid, now_ms: i64) {
    let oid = u32::from(database);
    let taken = {
        let _lock = super::slot::SlotLock::exclusive();
        if state.database_workers.iter().any(|entry| entry.database.load(Ordering::Acquire) == oid) {
            return; // another call started it meanwhile
        }
        state.database_workers.iter().find(|entry| entry.database.compare_exchange(0, oid, Ordering::AcqRel, Ordering::Relaxed).is_ok())
    };
    let Some(entry) = taken else {
        crate::errors::raise(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            "no room for another pg_idgen segment worker".into(),
            Some(format!(
                "Besides pg_idgen.database, at most {} databases have a segment worker at once; each exits after {} s without work.",
                shmem::MAX_DATABASE_WORKERS,
                DATABASE_WORKER_IDLE_EXIT.as_secs()
            )),
            Some("Use segment numbers in fewer databases at once."),
        )
    };
    entry.latch.store(std::ptr::null_mut(), Ordering::Release);
    entry.taken_at_ms.store(now_ms, Ordering::Release);
    let started = BackgroundWorkerBuilder::new("pg_idgen worker")
        .set_type("pg_idgen worker")
        .set_library("pg_idgen")
        .set_function("pg_idgen_database_worker_main")
        .set_argument(Some(pg_sys::Datum::from(oid)))
        .enable_spi_access()
        .set_restart_time(None)
        .load_dynamic();
    if started.is_err() {
        entry.database.store(0, Ordering::Release);
        crate::errors::raise(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            "could not start a pg_idgen segment worker for this database".into(),
            Some("Every background worker slot is in use (max_worker_processes).".into()),
            Some("Raise max_worker_processes (one more for each database that uses segment numbers besides pg_idgen.database) and restart the server."),
        )
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn free_database_entry(_code: i32, arg: pg_sys::Datum) {
    let oid = arg.value() as u32;
    for entry in &shmem::shared().database_workers {
        if entry.database.load(Ordering::Acquire) == oid {
            entry.latch.store(std::ptr::null_mut(), Ordering::Release);
            entry.database.store(0, Ordering::Release);
        }
    }
}

/// The worker of another database, started by a call that wanted a range there; it exits once
/// it has had nothing to do for a moment.
#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn pg_idgen_database_worker_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let oid = pg_sys::Oid::from(arg.value() as u32);
    // SAFETY: the callback frees this database's entry whichever way the worker ends, also when
    // the connection below fails (a database dropped meanwhile).
    unsafe { pg_sys::before_shmem_exit(Some(free_database_entry), arg) };
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(oid), None);
    BackgroundWorker::transaction(pin_settings);
    let state = shmem::shared();
    for entry in &state.database_workers {
        if entry.database.load(Ordering::Acquire) == u32::from(oid) {
            // SAFETY: MyProc is this process's, valid until exit; the callback clears the pointer.
            entry.latch.store(unsafe { &raw mut (*pg_sys::MyProc).procLatch }, Ordering::Release);
        }
    }
    // SAFETY: a catalog lookup, in a transaction; the name is copied before it ends.
    let name = BackgroundWorker::transaction(|| unsafe {
        let name = pg_sys::get_database_name(oid);
        if name.is_null() { oid.to_string() } else { CStr::from_ptr(name).to_string_lossy().into_owned() }
    });
    serve(&name, Some(DATABASE_WORKER_IDLE_EXIT));
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
    loop {
        for need in ranges::needs(database_oid) {
            busy_at = std::time::Instant::now();
            let outcome = source.allocate(&need);
            if ranges::publish(&need, &outcome) {
                if let Outcome::Failed(message) = &outcome {
                    warning!(
                        "pg_idgen worker: could not allocate a range for segment tag \"{}\": {message} ({} attempts failed in a row; retrying)",
                        table::display(&need.tag),
                        ranges::failures(need.index)
                    );
                }
            }
            // Why after each tag: a waiting call need not wait for the other tags' allocations.
            // SAFETY: the condition variable lives in shared memory.
            unsafe { pg_sys::ConditionVariableBroadcast(state.segment_loaded()) };
        }
        ranges::sample_rates(&mut sampled_second);
        if ranges::anything_wanted(database_oid) {
            busy_at = std::time::Instant::now();
        }
        if idle_exit.is_some_and(|idle| busy_at.elapsed() >= idle) {
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
