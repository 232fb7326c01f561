//! System test of the upgrade path between released versions of the extension's SQL objects.

use std::path::PathBuf;
use std::process::Command;

use pg_idgen_system_tests::{bin, sqlstate, Client, Cluster};

const CURRENT: &str = "0.11.0";

/// Every object of the extension as one line of text, sorted: functions with their result,
/// volatility, strictness, parallel safety, privileges, comment, body and settings; types, operators, casts,
/// operator classes with their support functions and operators, aggregates; the tag table's
/// columns, constraints, triggers and dump registration; each table's row-level security and
/// privileges.
fn extension_catalog(db: &mut Client) -> Vec<String> {
    db.query(
        "WITH members AS (
             SELECT d.classid, d.objid FROM pg_depend AS d
              WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_idgen'))
         SELECT 'function ' || p.oid::regprocedure || ' returns ' || pg_get_function_result(p.oid)
                || ' volatile=' || p.provolatile::text || ' strict=' || p.proisstrict || ' parallel=' || p.proparallel::text
                || ' leakproof=' || p.proleakproof || ' acl=' || coalesce(p.proacl::text, 'default')
                || ' defaults=' || coalesce(pg_get_expr(p.proargdefaults, 0), '')
                || ' comment=' || coalesce(obj_description(p.oid, 'pg_proc'), '')
                || ' body=' || md5(p.prosrc) || ' config=' || coalesce(p.proconfig::text, '') || ' definer=' || p.prosecdef
           FROM members AS m JOIN pg_proc AS p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
         UNION ALL
         SELECT 'type ' || t.typname || ' len=' || t.typlen || ' comment=' || coalesce(obj_description(t.oid, 'pg_type'), '')
           FROM members AS m JOIN pg_type AS t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
         UNION ALL
         SELECT 'operator ' || o.oid::regoperator || ' ' || o.oprcode::text
           FROM members AS m JOIN pg_operator AS o ON m.classid = 'pg_operator'::regclass AND o.oid = m.objid
         UNION ALL
         SELECT 'cast ' || format_type(c.castsource, NULL) || ' -> ' || format_type(c.casttarget, NULL) || ' ' || c.castcontext::text
           FROM members AS m JOIN pg_cast AS c ON m.classid = 'pg_cast'::regclass AND c.oid = m.objid
         UNION ALL
         SELECT 'opclass ' || oc.opcname || ' ' || am.amname
           FROM members AS m JOIN pg_opclass AS oc ON m.classid = 'pg_opclass'::regclass AND oc.oid = m.objid
           JOIN pg_am AS am ON am.oid = oc.opcmethod
         UNION ALL
         SELECT 'support ' || oc.opcname || ' ' || am.amname || ' function ' || ap.amprocnum || ' ' || ap.amproc::regprocedure
           FROM members AS m JOIN pg_opclass AS oc ON m.classid = 'pg_opclass'::regclass AND oc.oid = m.objid
           JOIN pg_am AS am ON am.oid = oc.opcmethod JOIN pg_amproc AS ap ON ap.amprocfamily = oc.opcfamily
         UNION ALL
         SELECT 'support ' || oc.opcname || ' ' || am.amname || ' operator ' || ao.amopstrategy || ' ' || ao.amopopr::regoperator
           FROM members AS m JOIN pg_opclass AS oc ON m.classid = 'pg_opclass'::regclass AND oc.oid = m.objid
           JOIN pg_am AS am ON am.oid = oc.opcmethod JOIN pg_amop AS ao ON ao.amopfamily = oc.opcfamily
         UNION ALL
         SELECT 'aggregate ' || a.aggfnoid::regprocedure || ' sortop=' || a.aggsortop::regoperator || ' combine=' || a.aggcombinefn::text
           FROM members AS m JOIN pg_aggregate AS a ON m.classid = 'pg_proc'::regclass AND a.aggfnoid = m.objid
         UNION ALL
         SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '')
           FROM members AS m JOIN pg_attribute AS a ON m.classid = 'pg_class'::regclass AND a.attrelid = m.objid
           LEFT JOIN pg_attrdef AS ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
          WHERE a.attnum > 0 AND NOT a.attisdropped
         UNION ALL
         SELECT 'constraint ' || c.conrelid::regclass || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
           FROM members AS m JOIN pg_constraint AS c ON m.classid = 'pg_class'::regclass AND c.conrelid = m.objid
         UNION ALL
         SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
           FROM members AS m JOIN pg_trigger AS t ON m.classid = 'pg_class'::regclass AND t.tgrelid = m.objid
         UNION ALL
         SELECT 'index ' || pg_get_indexdef(i.indexrelid)
           FROM members AS m JOIN pg_index AS i ON m.classid = 'pg_class'::regclass AND i.indrelid = m.objid
         UNION ALL
         SELECT 'table comment ' || coalesce(obj_description(m.objid, 'pg_class'), '')
           FROM members AS m WHERE m.classid = 'pg_class'::regclass
         UNION ALL
         SELECT 'relation ' || c.oid::regclass || ' row_security=' || c.relrowsecurity || ' acl=' || coalesce(c.relacl::text, 'default')
           FROM members AS m JOIN pg_class AS c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
         UNION ALL
         -- Sorted: the order of the tables does not matter, and install and update differ in it.
         SELECT 'extension comment ' || coalesce(obj_description(e.oid, 'pg_extension'), '')
           FROM pg_extension AS e WHERE e.extname = 'pg_idgen'
         UNION ALL
         SELECT 'dumped ' || coalesce((SELECT string_agg(c::regclass::text, ',' ORDER BY c::regclass::text) FROM unnest(e.extconfig) AS c), '')
           FROM pg_extension AS e WHERE e.extname = 'pg_idgen'
         ORDER BY 1",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// The install scripts of released versions (pgrx-tests/fixtures/), put into the PostgreSQL's
/// extension directory for as long as the value lives: dropped, however the test ends, it removes
/// them again, so that the installation is left as the test found it. (Both tests install 0.8.0's:
/// they run one at a time, as scripts/test.sh runs every system test, `--test-threads=1`.)
struct Fixtures(Vec<PathBuf>);

impl Fixtures {
    fn install(versions: &[&str]) -> Fixtures {
        let sharedir = Command::new(bin("pg_config")).arg("--sharedir").output().unwrap();
        let extension_dir = PathBuf::from(String::from_utf8(sharedir.stdout).unwrap().trim()).join("extension");
        let mut installed = Fixtures(Vec::new());
        for version in versions {
            let script = format!("pg_idgen--{version}.sql");
            let target = extension_dir.join(&script);
            std::fs::copy(format!("{}/fixtures/{script}", env!("CARGO_MANIFEST_DIR")), &target)
                .unwrap_or_else(|e| panic!("install the {version} script: {e}"));
            installed.0.push(target);
        }
        installed
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        for script in &self.0 {
            if let Err(e) = std::fs::remove_file(script) {
                eprintln!("could not remove {}: {e}", script.display());
            }
        }
    }
}

/// Claim: a database that created pg_idgen 0.1.0 keeps working with the new library before it
/// updates: `pg_idgen_status()` as 0.1.0 declared it (10 of today's columns) returns its row; a
/// declaration naming a column the library does not return gets a clear error (55000, with the
/// fix); 0.10.0's `seq_status()` (9 of today's columns) returns its row. After `ALTER EXTENSION pg_idgen UPDATE`, from 0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0, 0.6.0, 0.7.0, 0.8.0, 0.9.0 and 0.10.0 alike, the extension
/// has the current version and exactly the objects of a fresh install — every function's
/// declaration, privileges and comment, every type, operator, cast and operator class, the tag
/// and registry tables' columns, constraints, indexes and triggers — and works. An `objectid_gen()` revoked from PUBLIC
/// and granted to one role gives `objectid_next()` the same privileges, and `snowflake_next()` and
/// `segment_next()` likewise give theirs to their blocks (`…_next_range`), also after a dump of
/// the updated database is restored into a fresh install.
#[test]
fn released_versions_update_to_the_current_objects() {
    let _fixtures = Fixtures::install(&["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "0.9.0", "0.10.0"]);
    let cluster = Cluster::init("upgrade");
    cluster.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 18"]);
    cluster.start();
    let mut db = cluster.connect();
    for database in [
        "fresh",
        "from_0_1_0",
        "from_0_2_0",
        "from_0_3_0",
        "from_0_4_0",
        "from_0_5_0",
        "from_0_6_0",
        "from_0_7_0",
        "from_0_8_0",
        "from_0_9_0",
        "from_0_10_0",
    ] {
        db.batch_execute(&format!("CREATE DATABASE {database}")).unwrap();
    }
    let mut fresh = cluster.connect_to("fresh");
    fresh.batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    let expected = extension_catalog(&mut fresh);
    assert!(expected.iter().any(|line| line.starts_with("trigger CREATE TRIGGER segment_tag_changed")), "{expected:#?}");

    for version in ["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "0.9.0", "0.10.0"] {
        let mut old = cluster.connect_to(&format!("from_{}", version.replace('.', "_")));
        old.batch_execute(&format!("CREATE EXTENSION pg_idgen VERSION '{version}'")).unwrap();
        if version == "0.1.0" {
            let row = old.query_one("SELECT * FROM pg_idgen_status()", &[]).expect("0.1.0's declaration works");
            assert_eq!((row.len(), row.get::<_, Option<i32>>("node_id")), (10, Some(18)), "0.1.0's ten columns");
            old.batch_execute(
                "CREATE FUNCTION future_status(OUT node_id int, OUT no_such_column int) RETURNS record
                     AS 'pg_idgen', 'pg_idgen_status' LANGUAGE C",
            )
            .unwrap();
            let error = old.query_one("SELECT * FROM future_status()", &[]).expect_err("a column the library does not make");
            assert_eq!(sqlstate(&error), "55000", "{error:?}");
            old.batch_execute("DROP FUNCTION future_status()").unwrap();
            let hint = error.as_db_error().and_then(|e| e.hint()).unwrap_or_default().to_string();
            assert!(hint.contains("ALTER EXTENSION pg_idgen UPDATE"), "hint: {hint}");
        }
        if version == "0.10.0" {
            // seq_status() gained columns at its end: its 0.10.0 declaration still gets its nine.
            let row = old.query_one("SELECT * FROM seq_status()", &[]).expect("0.10.0's seq_status() works");
            assert_eq!((row.len(), row.get::<_, i32>("cache_sections")), (9, 1024), "0.10.0's nine columns of seq_status()");
        }
        old.batch_execute("ALTER EXTENSION pg_idgen UPDATE").unwrap();
        let updated: String = old.query_one("SELECT extversion FROM pg_extension WHERE extname = 'pg_idgen'", &[]).unwrap().get(0);
        assert_eq!(updated, CURRENT, "from {version}");
        let actual = extension_catalog(&mut old);
        let missing: Vec<&String> = expected.iter().filter(|line| !actual.contains(line)).collect();
        let extra: Vec<&String> = actual.iter().filter(|line| !expected.contains(line)).collect();
        assert!(missing.is_empty() && extra.is_empty(), "from {version}: missing {missing:#?}\nextra {extra:#?}");
        let row = old.query_one("SELECT extract(epoch FROM clock_reserve)::int, snowflake_next() > 0 FROM pg_idgen_status()", &[]).unwrap();
        assert_eq!((row.get::<_, i32>(0), row.get::<_, bool>(1)), (5, true), "from {version}");
    }
    // objectid_next() is objectid_gen() under the grammar's name: it keeps who may call it.
    db.batch_execute("CREATE DATABASE revoked").unwrap();
    db.batch_execute("CREATE ROLE app").unwrap();
    let mut revoked = cluster.connect_to("revoked");
    revoked
        .batch_execute(
            "CREATE EXTENSION pg_idgen VERSION '0.3.0';
             REVOKE EXECUTE ON FUNCTION objectid_gen(), snowflake_next(), segment_next(text) FROM PUBLIC;
             GRANT EXECUTE ON FUNCTION objectid_gen(), snowflake_next(), segment_next(text) TO app;
             ALTER EXTENSION pg_idgen UPDATE;",
        )
        .unwrap();
    let row = revoked
        .query_one(
            "SELECT has_function_privilege('public', 'objectid_next()', 'EXECUTE'),
                    has_function_privilege('app', 'objectid_next()', 'EXECUTE')",
            &[],
        )
        .unwrap();
    assert_eq!((row.get::<_, bool>(0), row.get::<_, bool>(1)), (false, true), "objectid_next() as objectid_gen() was granted");
    assert_blocks_granted_as_their_generators(&mut revoked, "after the update");
    // And they are the administrator's privileges, which a dump carries: restored into a fresh
    // install, objectid_next() is not open to PUBLIC again.
    let dump = cluster.dump("revoked");
    db.batch_execute("CREATE DATABASE restored").unwrap();
    cluster.restore(&dump, "restored");
    let row = cluster
        .connect_to("restored")
        .query_one(
            "SELECT has_function_privilege('public', 'objectid_next()', 'EXECUTE'),
                    has_function_privilege('app', 'objectid_next()', 'EXECUTE'),
                    has_function_privilege('public', 'objectid_gen()', 'EXECUTE')",
            &[],
        )
        .unwrap();
    assert_eq!(
        (row.get::<_, bool>(0), row.get::<_, bool>(1), row.get::<_, bool>(2)),
        (false, true, false),
        "after a dump and restore, objectid_next() as objectid_gen() was granted"
    );
    assert_blocks_granted_as_their_generators(&mut cluster.connect_to("restored"), "after a dump and restore");
}

/// The blocks of snowflake ids and segment numbers may be called by whoever may call their
/// generator (revoked from PUBLIC and granted to `app` by the test), and by nobody else.
fn assert_blocks_granted_as_their_generators(db: &mut Client, when: &str) {
    let row = db
        .query_one(
            "SELECT has_function_privilege('public', 'snowflake_next_range(bigint)', 'EXECUTE'),
                    has_function_privilege('app', 'snowflake_next_range(bigint)', 'EXECUTE'),
                    has_function_privilege('public', 'segment_next_range(text, bigint)', 'EXECUTE'),
                    has_function_privilege('app', 'segment_next_range(text, bigint)', 'EXECUTE')",
            &[],
        )
        .unwrap();
    let privileges: (bool, bool, bool, bool) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(privileges, (false, true, false, true), "{when}: the blocks as their generators were granted");
}

/// Claim: a space made with pg_idgen 0.8.0's SQL objects keeps numbering its text keys above the
/// numbers they were given, through `ALTER EXTENSION pg_idgen UPDATE` and a restart (every
/// section loaded again from its persisted maximum): each of its 100 text keys is the key 0.8.0's
/// `seq_key(text)` gave it (`seq_key(space, key)` after the update), and its next number is above
/// the 3 it took before. A space made after the update hashes its text keys with a secret of its
/// own (SipHash-2-4): another key for the same text.
#[test]
fn a_space_made_before_the_update_keeps_its_text_keys() {
    let _fixtures = Fixtures::install(&["0.8.0"]);
    let cluster = Cluster::init("upgrade-text-keys");
    cluster.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 18", "pg_idgen.database = 'postgres'"]);
    cluster.start();
    let mut db = cluster.connect();
    db.batch_execute("CREATE EXTENSION pg_idgen VERSION '0.8.0'; SELECT seq_space_create('old', step => 10)").unwrap();
    let before: Vec<(i64, i64)> = db
        .query(
            "SELECT seq_key('k' || k::text), max(n)
               FROM generate_series(0, 99) AS k,
                    LATERAL (SELECT seq_next_text('old', 'k' || k::text) AS n FROM generate_series(1, 3)) AS t
              GROUP BY k ORDER BY k",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(before.iter().all(|&(_, n)| n == 3), "each text key took 1, 2, 3: {:?}", &before[..3]);
    db.batch_execute("ALTER EXTENSION pg_idgen UPDATE").unwrap();
    drop(db);
    cluster.stop();
    cluster.start();
    let mut db = cluster.connect();
    let after: Vec<(i64, i64)> = db
        .query("SELECT seq_key('old', 'k' || k::text), seq_next_text('old', 'k' || k::text) FROM generate_series(0, 99) AS k ORDER BY k", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (k, ((key_before, last_before), (key_after, next_after))) in before.iter().zip(&after).enumerate() {
        assert!(next_after > last_before, "text key k{k}: {next_after} after {last_before} before the update");
        assert_eq!(key_before, key_after, "text key k{k}: the key 0.8.0 gave it");
    }
    let hash: String = db.query_one("SELECT text_key_hash FROM seq_space WHERE space = 'old'", &[]).unwrap().get(0);
    assert_eq!(hash, "fnv-1a", "the space made before keeps its unkeyed hash");
    db.batch_execute("SELECT seq_space_create('new')").unwrap();
    let row = db.query_one("SELECT text_key_hash, seq_key('new', 'k0') FROM seq_space WHERE space = 'new'", &[]).unwrap();
    let (hash, key): (String, i64) = (row.get(0), row.get(1));
    assert_eq!(hash, "siphash-2-4", "a space made after the update is keyed");
    assert_ne!(key, before[0].0, "a keyed space's text key is not the unkeyed one");
}
