//! pg_idgen: unique ids made inside PostgreSQL. This file only wires the modules together.

use pgrx::prelude::*;

mod c_function;
mod clock;
mod clock_worker;
mod decode;
mod errors;
mod layout;
mod mark;
mod monotonic;
mod objectid;
mod random;
mod segment;
mod segment_table;
mod segment_worker;
mod settings;
mod shmem;
mod snowflake;
mod status;
mod uuid7;

::pgrx::pg_module_magic!();

// Hand-written SQL, run before pgrx's own: the objectid type, record-returning functions.
pgrx::extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);
// Comments on every function, once they all exist.
pgrx::extension_sql_file!("../sql/comments.sql", name = "comments", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    let preloading = unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress };
    settings::declare(preloading);
    // In every process that loads the library: segment_create and segment_drop run SQL on the
    // tag table also when it is not preloaded.
    segment_table::install_analysis_guard();
    if preloading {
        shmem::install_hooks();
        mark::register_wal_resource_manager();
        segment_table::install_drop_hook();
        // Why no workers under pg_upgrade: no ids are made then, and a worker connected to a
        // database would keep pg_upgrade from creating it anew.
        if !unsafe { pgrx::pg_sys::IsBinaryUpgrade } {
            clock_worker::register();
            segment_worker::register();
        }
    }
}

/// Used by `cargo pgrx test`: the test cluster preloads the library and has a node id.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        // The worker serves the test database (created after start; it retries until then).
        vec!["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 7", "pg_idgen.database = 'pgrx_tests'"]
    }
}
