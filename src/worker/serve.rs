//! The worker's life: connecting to its database, pinning its session, and serving the services
//! in turns until told to stop (or, for another database's worker, until idle); and what retires
//! every service's caches of a database, whose tables or itself are dropped.

use std::ffi::{c_void, CStr};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::pool::{self, told_to_stop, DATABASE_WORKER_IDLE_EXIT};
use super::session::pin_settings;
use super::{Served, Service};
use crate::settings;

/// How long the worker sleeps when nobody asks for anything; services that sample rates do it
/// this often too.
const IDLE_WAKEUP: Duration = Duration::from_millis(250);

/// How long one service's turn lasts at most (after one request at least): a service whose
/// requests wait (a remote server up to `pg_idgen.remote_timeout`, a locked row up to the
/// session's `lock_timeout`) holds the calls of the others up for one request and this long.
const TURN: Duration = Duration::from_millis(100);

/// Registers the worker of `pg_idgen.database`. Called from `_PG_init` while preloading.
pub fn register() {
    BackgroundWorkerBuilder::new("pg_idgen worker")
        .set_type("pg_idgen worker")
        .set_library("pg_idgen")
        .set_function("pg_idgen_worker_main")
        .enable_spi_access()
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// The life of the worker of `pg_idgen.database` (its entry point, `pg_idgen_worker_main`, hands
/// it the services): started with the server and restarted after a failure.
pub fn run_main(services: &[&dyn Service]) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = settings::config().segments.database.clone();
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    // Why in a transaction: session_authorization is checked against the catalogs. The values
    // stay after the commit (they are SET, not SET LOCAL).
    BackgroundWorker::transaction(pin_settings);
    pool::publish_main();
    serve(services, &database, None);
    // Why exit code 1: code 0 would unregister the worker for good, also after
    // pg_terminate_backend; 1 makes the postmaster start it again after the restart time.
    // SAFETY: ends this worker process; nothing of it is used after.
    unsafe { pg_sys::proc_exit(1) };
}

/// The life of the worker of another database, started by a call that wanted something there
/// (its entry point, `pg_idgen_database_worker_main`, hands it the services and its argument); it
/// exits once it has had nothing to do for a moment.
pub fn run_for_database(services: &[&dyn Service], argument: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let oid = pool::database_of(argument);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(oid), None);
    BackgroundWorker::transaction(pin_settings);
    if pool::claim(argument) {
        // SAFETY: a catalog lookup, in a transaction; the name is copied before it ends.
        let name = BackgroundWorker::transaction(|| unsafe {
            let name = pg_sys::get_database_name(oid);
            if name.is_null() {
                oid.to_string()
            } else {
                CStr::from_ptr(name).to_string_lossy().into_owned()
            }
        });
        serve(services, &name, Some(DATABASE_WORKER_IDLE_EXIT));
    }
    // Code 0: a dynamic worker is never restarted; the next call that wants something starts one.
    // SAFETY: ends this worker process; nothing of it is used after.
    unsafe { pg_sys::proc_exit(0) };
}

/// Serves this database's calls, a turn of each service after another, until told to stop or,
/// with `idle_exit`, until nothing was wanted that long.
fn serve(services: &[&dyn Service], database: &str, idle_exit: Option<Duration>) {
    // SAFETY: this worker's database, set when it connected.
    let database_oid = unsafe { pg_sys::MyDatabaseId };
    let started = format!(
        "pg_idgen worker started for database \"{database}\"; it serves {}",
        services.iter().map(|service| service.describe()).collect::<Vec<_>>().join(", and ")
    );
    // Why DEBUG1 for another database's worker: it starts again whenever its database needs
    // something after a pause, which would fill the log.
    if idle_exit.is_none() {
        log!("{started}");
    } else {
        debug1!("{started}");
    }
    let mut serving: Vec<_> = services.iter().map(|service| service.start()).collect();
    let mut busy_at = Instant::now();
    loop {
        // Turns until no service has requests left that its turn did not get to.
        loop {
            let mut left = Served::default();
            for service in serving.iter_mut() {
                if told_to_stop() {
                    break;
                }
                let served = service.serve(database_oid, Instant::now() + TURN);
                left.more |= served.more;
                left.wanted |= served.wanted;
            }
            if left.wanted {
                busy_at = Instant::now();
            }
            if !left.more || told_to_stop() {
                break;
            }
        }
        if idle_exit.is_some_and(|idle| busy_at.elapsed() >= idle) || told_to_stop() {
            break;
        }
        if !crate::sigterm::wait_latch(IDLE_WAKEUP) {
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: rereads postgresql.conf in this process (log settings and the like).
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
    }
}

/// The object access hook that was installed before the drop hook, called first. Why not
/// `static mut`: set once, before the hook can run.
static PREVIOUS_OBJECT_ACCESS_HOOK: OnceLock<pg_sys::object_access_hook_type> = OnceLock::new();

/// Installs `hook` (which calls `on_object_access` with the services) as PostgreSQL's object
/// access hook, to notice a cached table, or a database, being dropped (DROP TABLE, DROP
/// EXTENSION, DROP SCHEMA … CASCADE, DROP DATABASE), which no row trigger sees. Called from
/// `_PG_init` while preloading.
pub fn install_drop_hook(hook: unsafe extern "C-unwind" fn(pg_sys::ObjectAccessType::Type, pg_sys::Oid, pg_sys::Oid, i32, *mut c_void)) {
    // SAFETY: hooks are installed once, in the postmaster, before any backend exists; PostgreSQL's
    // hook variable is a plain C global, chained by saving the previous value.
    unsafe {
        let _ = PREVIOUS_OBJECT_ACCESS_HOOK.set(pg_sys::object_access_hook);
        pg_sys::object_access_hook = Some(hook);
    }
}

/// What the drop hook does: retires every service's caches of a database that is dropped or
/// created, or whose cached table (of extension pg_idgen) is dropped; and tells a dropped
/// database's worker to stop.
///
/// # Safety
/// The arguments are PostgreSQL's, for the object access hook, in a transaction.
pub unsafe fn on_object_access(
    services: &[&dyn Service],
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: i32,
    arg: *mut c_void,
) {
    // SAFETY: the previous hook is called with the arguments PostgreSQL gave; the catalog lookups
    // run inside the dropping transaction.
    unsafe {
        if let Some(previous) = PREVIOUS_OBJECT_ACCESS_HOOK.get().copied().flatten() {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous(access, class_id, object_id, sub_id, arg));
        }
        if sub_id != 0 {
            return;
        }
        let retire = |database| services.iter().for_each(|service| service.retire_database(database));
        // A dropped database's caches must go with it: its OID can be used again (CREATE DATABASE
        // … OID, or wraparound), and the new database's calls must not find them. Retired when it
        // is dropped, and again when a database is created with its OID: a session of the dropped
        // database can still fill a cache while DROP DATABASE waits for the sessions to leave,
        // after the drop's hook has run. No session of a database being created exists yet, so
        // anything cached of its OID is such a leftover. A drop or a creation that is rolled back
        // only costs a gap.
        if class_id == pg_sys::DatabaseRelationId && matches!(access, pg_sys::ObjectAccessType::OAT_DROP | pg_sys::ObjectAccessType::OAT_POST_CREATE)
        {
            retire(object_id);
            pool::stop_for_drop(object_id, access == pg_sys::ObjectAccessType::OAT_DROP);
            return;
        }
        if access != pg_sys::ObjectAccessType::OAT_DROP || class_id != pg_sys::RelationRelationId {
            return;
        }
        let name = pg_sys::get_rel_name(object_id);
        if name.is_null() || !services.iter().any(|service| service.cached_tables().contains(&CStr::from_ptr(name))) {
            return;
        }
        let ours = pg_sys::get_extension_oid(c"pg_idgen".as_ptr(), true);
        if ours != pg_sys::InvalidOid && pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, object_id) == ours {
            retire(pg_sys::MyDatabaseId);
        }
    }
}
