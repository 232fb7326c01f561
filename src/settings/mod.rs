//! `pg_idgen.*` settings: declared in `_PG_init`, validated whenever a value is set (check hooks,
//! so `ALTER SYSTEM` refuses what the next start would refuse), and read once at postmaster start.
//!
//! Every setting is postmaster-level: ids made under one layout must decode under the same one,
//! so nothing here may change while the server runs. When the library is preloaded, an invalid
//! value stops the server with a FATAL message that names the setting, and so does a misspelt
//! `pg_idgen.*` name. When it is not preloaded (only decoders can run then), the same checks raise
//! an ERROR on first use instead.
//!
//! Each value is checked on its own by its check hook (at start, `SET`, `ALTER SYSTEM`); what
//! depends on several settings (the bits adding up to at most 63, the node id fitting the node bits) can
//! only be checked at start.
//!
//! - `declared`: each setting with its default, range and check hook, as PostgreSQL knows it;
//! - `load`: reading them into a `Config`, and reporting an invalid one;
//! - `parse`: the checks and the combining, pure (tested without PostgreSQL).

use std::sync::OnceLock;

use pgrx::prelude::*;

mod declared;
mod load;
mod parse;

pub use parse::{node_id_text, Config, LeaseConfig, StepPolicy};

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Declares the settings. Called from `_PG_init`, preloaded or not; preloading, also checks them
/// and fixes the configuration for the life of the server.
pub fn declare(preloading: bool) {
    let raw = load::raw_texts();
    declared::define(preloading);
    if preloading {
        declared::refuse_unknown_names();
        load::refuse_invalid_texts(&raw);
        let config = load::load(PgLogLevel::FATAL);
        load::log_start_line(&config);
        let _ = CONFIG.set(config);
    }
    declared::reserve_prefix();
}

/// The server's configuration. In a backend of a preloaded server this was fixed at start;
/// otherwise it is read now, and an invalid setting raises an ERROR.
pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| load::load(PgLogLevel::ERROR))
}
