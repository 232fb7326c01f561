//! The services of the database worker (`worker`), declared once: the caches in shared memory
//! that it fills for the calls of its database, and retires when their tables or the database go.
//! A service added (the section leases of many servers) is a line here.
//!
//! Here too, because they need the list: the worker's entry points and the drop hook.

use std::ffi::c_void;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::worker::{self, Service};
use crate::{segment, seq};

/// What the worker serves, in this order in each of its turns.
static SERVICES: [&dyn Service; 2] = [&segment::RANGES, &seq::SECTIONS];

/// The worker of `pg_idgen.database`, started with the server and restarted after a failure.
#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn pg_idgen_worker_main(_arg: pg_sys::Datum) {
    worker::run_main(&SERVICES)
}

/// The worker of another database, started by a call that wanted something there.
#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn pg_idgen_database_worker_main(arg: pg_sys::Datum) {
    worker::run_for_database(&SERVICES, arg)
}

/// Installs the hook that retires the services' caches of a database whose cached tables or
/// itself are dropped. Called from `_PG_init` while preloading.
pub fn install_drop_hook() {
    worker::install_drop_hook(on_object_access);
}

#[pg_guard]
unsafe extern "C-unwind" fn on_object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: i32,
    arg: *mut c_void,
) {
    // SAFETY: PostgreSQL's arguments for the hook, handed on.
    unsafe { worker::on_object_access(&SERVICES, access, class_id, object_id, sub_id, arg) }
}
