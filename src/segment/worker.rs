//! The background worker "pg_idgen worker": allocates segment ranges in its own committed
//! transactions and publishes them to shared memory.
//!
//! It connects to `pg_idgen.database`. Each range is one `UPDATE segment_tag … RETURNING` on a
//! row locked with NOWAIT, committed and flushed to disk before the range is published — whatever
//! `synchronous_commit` the configuration, the database or the role sets — so no number of it can
//! be handed out and then lost in a crash or rolled back. A failed allocation (a locked row or
//! table) is rolled back and that tag is retried after a growing pause, while the other tags are
//! served. After a fatal error or `pg_terminate_backend` it exits with code 1 and the postmaster
//! starts it again a second later.
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
use crate::{settings, shmem};

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
    let database_oid = unsafe { pg_sys::MyDatabaseId };
    // SAFETY: MyProc is this process's, valid until exit; the callback clears the pointer first.
    unsafe {
        state.worker_latch.store(&raw mut (*pg_sys::MyProc).procLatch, Ordering::Release);
        pg_sys::before_shmem_exit(Some(clear_worker_latch), pg_sys::Datum::from(0));
    }
    let segments = &settings::config().segments;
    let mut source: Box<dyn RangeSource> = match &segments.authority {
        Some(authority) => {
            log!(
                "pg_idgen worker started; it takes segment ranges for database \"{database}\" from the segment authority ({})",
                crate::remote::describe_conninfo(authority)
            );
            Box::new(Authority::new(authority, segments.remote_timeout_ms))
        }
        None => {
            log!("pg_idgen worker started; it allocates segment ranges in database \"{database}\"");
            Box::new(LocalTable)
        }
    };
    let mut sampled_second = 0;
    loop {
        for need in ranges::needs(database_oid) {
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
        if !BackgroundWorker::wait_latch(Some(IDLE_WAKEUP)) {
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: rereads postgresql.conf in this process (log settings and the like).
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
    }
    // Why exit code 1: code 0 would unregister the worker for good, also after
    // pg_terminate_backend; 1 makes the postmaster start it again after the restart time.
    // SAFETY: ends this worker process; nothing of it is used after.
    unsafe { pg_sys::proc_exit(1) };
}
