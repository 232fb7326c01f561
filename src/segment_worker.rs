//! The background worker "pg_idgen worker": allocates segment ranges in its own committed
//! transactions and publishes them to shared memory.
//!
//! It connects to `pg_idgen.database`. Each range is one
//! `UPDATE segment_tag SET max_id = max_id + step … RETURNING`, committed before the range is
//! published, so no number of it can be handed out and then rolled back. An allocation that
//! fails (a lock timeout) is rolled back and retried. After a fatal error (the database going
//! away) or `pg_terminate_backend`, it exits with code 1 and the postmaster starts it again a
//! second later.

use std::sync::atomic::Ordering;
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::{segment, settings, shmem};

/// How long the worker sleeps when nobody asks for anything; it samples rates this often too.
const IDLE_WAKEUP: Duration = Duration::from_millis(250);
/// The worker's lock_timeout: a locked tag table makes it give up and retry, not hang.
const LOCK_TIMEOUT: &str = "1s";

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
    let state = shmem::shared();
    unsafe {
        state.worker_latch.store(&raw mut (*pg_sys::MyProc).procLatch, Ordering::Release);
        pg_sys::before_shmem_exit(Some(clear_worker_latch), pg_sys::Datum::from(0));
    }
    log!("pg_idgen worker started; it allocates segment ranges in database \"{database}\"");
    let mut table: Option<String> = None;
    let mut sampled_second = 0;
    loop {
        let needs = segment::needs();
        for need in &needs {
            let table = table.get_or_insert_with(|| BackgroundWorker::transaction(segment::tag_table));
            match allocate(table, need) {
                Allocation::Range(start, len) => segment::publish(need, Some((start, len))),
                Allocation::NoTag => segment::publish(need, None),
                Allocation::Failed => {}
            }
        }
        if !needs.is_empty() {
            unsafe { pg_sys::ConditionVariableBroadcast(state.segment_loaded()) };
        }
        segment::sample_rates(&mut sampled_second);
        if !BackgroundWorker::wait_latch(Some(IDLE_WAKEUP)) {
            break;
        }
    }
    // Why exit code 1: code 0 would unregister the worker for good, also after
    // pg_terminate_backend; 1 makes the postmaster start it again after the restart time.
    unsafe { pg_sys::proc_exit(1) };
}

/// What one allocation attempt found.
pub enum Allocation {
    Range(i64, u64),
    /// The tag's row is gone.
    NoTag,
    /// The transaction failed (lock timeout, …); try again on the next round.
    Failed,
}

/// Allocates the next range of a tag in a committed transaction. An error (a lock timeout, most
/// often) is logged and the transaction rolled back: the worker keeps serving other tags and
/// retries, rather than exiting and leaving every caller without a worker.
fn allocate(table: &str, need: &segment::Need) -> Allocation {
    PgTryBuilder::new(|| allocate_in_transaction(table, need))
        .catch_others(|error| {
            unsafe { pg_sys::AbortCurrentTransaction() };
            let message = match &error {
                pg_sys::panic::CaughtError::PostgresError(report)
                | pg_sys::panic::CaughtError::ErrorReport(report)
                | pg_sys::panic::CaughtError::RustPanic { ereport: report, .. } => report.message().to_string(),
            };
            warning!("pg_idgen worker: could not allocate a range for segment tag \"{}\": {message}", need.tag);
            Allocation::Failed
        })
        .execute()
}

fn allocate_in_transaction(table: &str, need: &segment::Need) -> Allocation {
    let query = format!(
        "UPDATE {table} SET max_id = max_id + greatest($2, step), updated_at = now()
          WHERE tag = $1 RETURNING max_id, greatest($2, step)::bigint"
    );
    let (tag, step) = (need.tag.as_str(), need.step as i64);
    BackgroundWorker::transaction(|| {
        Spi::run(&format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")).unwrap();
        let row = Spi::get_two_with_args::<i64, i64>(&query, &[tag.into(), step.into()]);
        match row {
            Ok((Some(max_id), Some(len))) => Allocation::Range(max_id - len + 1, len as u64),
            _ => Allocation::NoTag,
        }
    })
}
