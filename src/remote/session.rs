//! What a pg_idgen session at another server relies on: its settings pinned, and the extension's
//! schema found there, owned by a superuser.

use std::time::Instant;

use super::{Connection, RemoteError};

/// Pins what a pg_idgen session at another server relies on, above what that server's role or
/// database settings say: its commits are durable before they are answered (`on`: a synchronous
/// standby there has them too), its statements run with no planted search path, and a lock or a
/// slow statement fails in time instead of holding the worker.
pub fn pin_session(connection: &Connection, timeout_ms: u64, deadline: Instant, stop: &dyn Fn() -> bool) -> Result<(), RemoteError> {
    let timeout = timeout_ms.to_string();
    connection.query(
        "SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),
                pg_catalog.set_config('synchronous_commit', 'on', false),
                pg_catalog.set_config('default_transaction_read_only', 'off', false),
                pg_catalog.set_config('default_transaction_isolation', 'read committed', false),
                pg_catalog.set_config('statement_timeout', $1, false),
                pg_catalog.set_config('lock_timeout', $1, false)",
        &[timeout.as_bytes()],
        deadline,
        stop,
    )?;
    Ok(())
}

/// The schema of extension pg_idgen at the other server, quoted for a statement. Why looked up
/// on every call: the schema may be renamed, the extension dropped and created again.
///
/// Why the schema's owner must be a superuser (for a schema owned by `pg_database_owner`, as
/// `public` is: the database's owner): the function
/// is then called by name in a second statement, and a schema's owner could rename it away in
/// between and plant a function under the old name, which would run as the worker's role and
/// could answer with numbers already handed out.
pub fn extension_schema(connection: &Connection, deadline: Instant, stop: &dyn Fn() -> bool) -> Result<String, RemoteError> {
    let rows = connection.query(
        "SELECT n.nspname,
                COALESCE(
                    (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                      WHERE r.oid OPERATOR(pg_catalog.=) CASE
                          WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                          THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                          ELSE n.nspowner END), false),
                pg_catalog.pg_get_userbyid(n.nspowner)
           FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
             ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
          WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'",
        &[],
        deadline,
        stop,
    )?;
    match rows.first().map(|row| (row[0].clone(), row[1].as_deref() == Some("t"), row[2].clone().unwrap_or_default())) {
        Some((Some(schema), true, _)) => Ok(format!("\"{}\"", schema.replace('"', "\"\""))),
        Some((Some(schema), false, owner)) => Err(RemoteError::Refused {
            sqlstate: "42501".into(),
            message: format!(
                "pg_idgen's schema \"{schema}\" there is owned by \"{owner}\", who is not a superuser; install the extension in a schema a superuser owns"
            ),
        }),
        _ => Err(RemoteError::Refused { sqlstate: "42704".into(), message: "extension pg_idgen is not installed in that database".into() }),
    }
}
