//! System test of the upgrade path between released versions of the extension's SQL objects.

use std::process::Command;

use pg_idgen_system_tests::{sqlstate, Client, Cluster};

fn status_declaration(db: &mut Client) -> (String, String) {
    let row = db
        .query_one(
            "SELECT pg_get_function_result('pg_idgen_status'::regproc), obj_description('pg_idgen_status'::regproc)",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// Claim: a database that created pg_idgen 0.1.0 gets a clear error (55000, with the fix) from a
/// function whose columns the new library changed, and after `ALTER EXTENSION pg_idgen UPDATE` it
/// has version 0.2.0 with the same declarations as a fresh install, and works.
#[test]
fn version_0_1_0_updates_to_the_current_objects() {
    let sharedir = Command::new("/usr/lib/postgresql/15/bin/pg_config").arg("--sharedir").output().unwrap();
    let extension_dir = format!("{}/extension", String::from_utf8(sharedir.stdout).unwrap().trim());
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/pg_idgen--0.1.0.sql"),
        format!("{extension_dir}/pg_idgen--0.1.0.sql"),
    )
    .expect("install the 0.1.0 script");

    let cluster = Cluster::init("upgrade", 54388);
    cluster.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 18"]);
    cluster.start();
    let mut db = cluster.connect();
    db.batch_execute("CREATE EXTENSION pg_idgen VERSION '0.1.0'").unwrap();
    db.batch_execute("CREATE DATABASE fresh").unwrap();

    let error = db.query_one("SELECT * FROM pg_idgen_status()", &[]).expect_err("0.1.0 declares 10 columns");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    let hint = error.as_db_error().and_then(|e| e.hint()).unwrap_or_default().to_string();
    assert!(hint.contains("ALTER EXTENSION pg_idgen UPDATE"), "hint: {hint}");

    db.batch_execute("ALTER EXTENSION pg_idgen UPDATE").unwrap();
    let version: String = db.query_one("SELECT extversion FROM pg_extension WHERE extname = 'pg_idgen'", &[]).unwrap().get(0);
    assert_eq!(version, "0.2.0");
    let mut fresh = cluster.connect_to("fresh");
    fresh.batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    assert_eq!(status_declaration(&mut db), status_declaration(&mut fresh), "updated = freshly installed");
    let row = db.query_one("SELECT extract(epoch FROM clock_reserve)::int, snowflake_next() > 0 FROM pg_idgen_status()", &[]).unwrap();
    assert_eq!((row.get::<_, i32>(0), row.get::<_, bool>(1)), (5, true));
}
