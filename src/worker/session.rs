//! The worker session's settings, pinned at its start for its life, above anything `ALTER DATABASE`
//! or `ALTER ROLE` set.

use std::ffi::CStr;

use pgrx::pg_sys;

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

/// Pins the session's settings (see `PINNED_SETTINGS`). `ALTER DATABASE … SET
/// session_authorization` would otherwise make the worker run as another role: it goes back to
/// the superuser it connected as, first.
pub(super) fn pin_settings() {
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
