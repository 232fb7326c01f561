//! pg_idgen: unique ids made inside PostgreSQL. This file only wires the modules together.
//!
//! The modules of the pure layer are public for their doc examples: `families`, `layout`,
//! `clock::tick`, `objectid::ObjectId`, `uuid7::{from_parts, v7_parts}`, `base32`. Nothing else is an API.

use pgrx::prelude::*;

mod authority_call;
pub mod base32;
mod c_function;
pub mod clock;
mod clock_worker;
mod compose;
mod decode;
mod engine;
mod errors;
pub mod families;
pub mod layout;
mod mark;
mod mask;
mod migrate;
#[cfg(test)]
mod module_graph;
mod node;
pub mod objectid;
mod random;
mod remote;
mod segment;
mod seq;
mod seqlock;
mod services;
mod settings;
mod shmem;
mod sigterm;
mod snowflake;
mod status;
mod tables;
mod text_form;
pub mod uuid7;
mod worker;

::pgrx::pg_module_magic!();

// Hand-written SQL lives beside the module it belongs to (`extension_sql_file!` and
// `extension_sql!` there, each object's COMMENT next to its declaration); upgrade scripts in sql/.

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    errors::keep_backtraces_out_of_messages();
    // SAFETY: a flag of the postmaster's, read in the process that loads the library.
    let preloading = unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress };
    settings::declare(preloading);
    // In every process that loads the library: segment_create and segment_drop run SQL on the
    // tag table also when it is not preloaded.
    tables::install_analysis_guard();
    // In every process that loads the library: masking needs no preload.
    mask::register_invalidation();
    if preloading {
        shmem::install_hooks(shmem::Hooks { regions: &REGIONS, on_create: on_shared_memory_created, on_exit: on_shared_memory_exit });
        mark::register_wal_resource_manager();
        services::install_drop_hook();
        // Why no workers under pg_upgrade: no ids are made then, and a worker connected to a
        // database would keep pg_upgrade from creating it anew.
        // SAFETY: a flag set from the command line before libraries are preloaded.
        if !unsafe { pgrx::pg_sys::IsBinaryUpgrade } {
            clock_worker::register();
            worker::register();
            node::worker::register();
        }
    }
}

/// The regions of shared memory, each its component's, in the order they are built.
static REGIONS: [&dyn shmem::Region; 12] = [
    &engine::GENERATORS,
    &clock::WATCH,
    &mark::MARKS,
    &node::LEASE,
    &remote::STATUSES,
    &worker::POOL,
    &segment::SLOTS,
    &seq::CACHE,
    &seq::DATABASES,
    &seq::WANTED,
    &seq::SERVED,
    &seq::LEASES,
];

/// What a new shared memory gets before any process can use it, once every region is built: no
/// node id lease yet, every generator's floor past the persisted high-water marks, and the
/// generators' clock.
fn on_shared_memory_created() {
    let config = settings::config();
    node::init(config);
    if let Some(node_id) = mark::restore_at_start() {
        node::prefer_node_id(node_id);
    }
    engine::start_clock(mark::marks().earliest_durable_us() + 1_000_000);
}

/// When the postmaster's shared memory goes: at a clean exit, the exact marks are saved; after a
/// crash, the generators' clock is kept for the next shared memory.
fn on_shared_memory_exit(clean: bool) {
    if clean {
        mark::save_exact_marks();
    } else {
        engine::keep_clock_for_restart();
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
