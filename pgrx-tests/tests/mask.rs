//! System tests of public numbers (`id_mask*`, `id_unmask*`, `id_mask_key_*`): a million ids,
//! restarts and a crash, a base backup, a promoted standby, a dump restored, keys exported from
//! one server and imported into another, a rotation seen by other backends (also by a prepared
//! statement's parallel plan in a transaction, and when the keys arrive by logical replication),
//! a locked key table, what a role without rights can see (the table, statistics, settings, the
//! log with `log_statement = all`, `pg_stat_statements`), and a statistical test that the masks
//! show no order.

use std::process::Command;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{bin, scaled, sqlstate, started_cluster, Client, Cluster};

/// Each id of `ids` in every form (bigint, 12 decimal digits, base32) with purpose `purpose`, as
/// text, in the order of `ids`.
fn masks(db: &mut Client, ids: &str, purpose: &str) -> Vec<String> {
    db.query(
        &format!(
            "SELECT concat_ws(' ', g, id_mask(g, $1), CASE WHEN g < 1000000000 THEN id_mask_decimal(g, 12, $1) END, id_mask_base32(g, $1))
               FROM unnest({ids}) WITH ORDINALITY AS u(g, o) ORDER BY o"
        ),
        &[&purpose],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Ids of every size: small, dense ones (segment numbers), snowflake-sized ones, both ends.
const SAMPLE_IDS: &str = "(SELECT array_agg(g) FROM (SELECT generate_series(0, 999) AS g
                            UNION ALL SELECT (random() * 9223372036854775807)::bigint FROM generate_series(1, 1000)
                            UNION ALL SELECT 9223372036854775807) AS s)";

/// The hexadecimal keys in an exported key text.
fn key_hexes(export: &str) -> Vec<String> {
    export.split_whitespace().filter(|w| w.len() >= 32 && w.bytes().all(|b| b.is_ascii_hexdigit())).map(str::to_string).collect()
}

/// Claim: for a million ids, masking then unmasking gives each id back in every form, the masks of
/// distinct ids are distinct, the decimal form has exactly the digits asked for, and every id masks
/// the same way after a clean restart and after `kill -9`.
#[test]
fn a_million_ids_round_trip_and_mask_the_same_after_restarts() {
    let cluster = started_cluster("mask-million", &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT id_mask_key_create()").unwrap();
    let row = db
        .query_one(
            "SELECT count(*), count(DISTINCT m), count(DISTINCT d), count(DISTINCT t),
                    count(*) FILTER (WHERE id_unmask(m) <> g OR id_unmask_decimal(d) <> g OR id_unmask_base32(t) <> g),
                    count(*) FILTER (WHERE length(d) <> 12 OR d !~ '^[0-9]+$' OR length(t) <> 16 OR m < 0)
               FROM (SELECT g, id_mask(g) AS m, id_mask_decimal(g, 12) AS d, id_mask_base32(g) AS t
                       FROM generate_series(0, 999999) AS g) AS s",
            &[],
        )
        .unwrap();
    let (count, distinct_m, distinct_d, distinct_t, wrong, malformed): (i64, i64, i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5));
    assert_eq!((count, distinct_m, distinct_d, distinct_t), (1_000_000, 1_000_000, 1_000_000, 1_000_000), "distinct masks");
    assert_eq!((wrong, malformed), (0, 0), "every id comes back, every form has its width");
    // The top of the range too (snowflake ids): a million ids below 2^63.
    let wrong: i64 = db
        .query_one(
            "SELECT count(*) FILTER (WHERE id_unmask(id_mask(g)) <> g OR id_unmask_base32(id_mask_base32(g)) <> g)
               FROM generate_series(9223372036853775808, 9223372036854775807) AS g",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(wrong, 0);

    db.batch_execute(&format!("CREATE TABLE before AS SELECT unnest({SAMPLE_IDS}) AS g")).unwrap();
    let before = masks(&mut db, "(SELECT array_agg(g) FROM before)", "orders");
    drop(db);
    cluster.stop();
    cluster.start();
    assert_eq!(masks(&mut cluster.connect(), "(SELECT array_agg(g) FROM before)", "orders"), before, "after a clean restart");
    cluster.kill9();
    cluster.restart_after_crash();
    assert_eq!(masks(&mut cluster.connect(), "(SELECT array_agg(g) FROM before)", "orders"), before, "after kill -9");
}

/// The statistical test, in SQL over a table `v (i, x)` of values `x` in `0 .. range` made from
/// consecutive `i`: whether consecutive values rise about half the time (|share − 0.5| < 0.02;
/// 20,000 values: 5.7 standard deviations), the top 4 bits of the values fill 16 bins evenly
/// (chi-square below 45, 15 degrees of freedom: p < 1e-4), and the differences of consecutive
/// values spread as those of independent uniform values (|d| / range in 10 bins, chi-square
/// below 40, 9 degrees of freedom: p < 1e-5).
const STATISTICAL_TEST: &str = "
    CREATE FUNCTION looks_random(range numeric) RETURNS text LANGUAGE sql AS $$
    WITH pairs AS (SELECT x::numeric AS x, lag(x) OVER (ORDER BY i)::numeric AS previous FROM v),
    rising AS (SELECT avg((x > previous)::int) AS share FROM pairs WHERE previous IS NOT NULL),
    bins AS (SELECT floor(x * 16 / range) AS bin, count(*) AS n FROM v GROUP BY 1),
    uniform AS (SELECT sum((coalesce(n, 0) - t.e) ^ 2 / t.e) AS chi
                  FROM (SELECT b, (SELECT count(*) FROM v) / 16.0 AS e FROM generate_series(0, 15) AS b) AS t
                  LEFT JOIN bins ON bins.bin = t.b),
    gaps AS (SELECT floor(abs(x - previous) * 10 / range) AS bin, count(*) AS n FROM pairs WHERE previous IS NOT NULL GROUP BY 1),
    spread AS (SELECT sum((coalesce(n, 0) - t.e) ^ 2 / t.e) AS chi
                 FROM (SELECT b, ((1 - b / 10.0) ^ 2 - (1 - (b + 1) / 10.0) ^ 2) * (SELECT count(*) - 1 FROM v) AS e
                         FROM generate_series(0, 9) AS b) AS t
                 LEFT JOIN gaps ON gaps.bin = t.b)
    SELECT CASE WHEN abs(share - 0.5) >= 0.02 THEN format('ordered: %s of consecutive values rise', round(share, 3))
                WHEN uniform.chi >= 45 THEN format('not uniform: chi-square %s', round(uniform.chi, 1))
                WHEN spread.chi >= 40 THEN format('differences not spread: chi-square %s', round(spread.chi, 1))
                ELSE 'looks random' END
      FROM rising, uniform, spread
    $$";

/// Claim: the masks of consecutive ids show no order and no volume — consecutive masks rise about
/// half the time, their values and their differences are spread as uniform random values would
/// be — in the bigint form and in the FF1 digits of the decimal form; and the same test fails for
/// the ids themselves and for the ids plus a constant (it can fail).
#[test]
fn masks_of_consecutive_ids_look_random_and_the_test_can_fail() {
    let cluster = started_cluster("mask-statistics", &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT id_mask_key_create()").unwrap();
    db.batch_execute("CREATE TABLE v (i bigint, x numeric)").unwrap();
    db.batch_execute(STATISTICAL_TEST).unwrap();
    let mut verdict = |values: &str, range: &str| -> String {
        db.batch_execute(&format!("TRUNCATE v; INSERT INTO v SELECT g, {values} FROM generate_series(1000, 20999) AS g")).unwrap();
        db.query_one(&format!("SELECT looks_random({range})"), &[]).unwrap().get(0)
    };
    let bigint = "9223372036854775808";
    assert_eq!(verdict("id_mask(g)", bigint), "looks random", "bigint form");
    assert_eq!(verdict("id_mask(g, 'invoices')", bigint), "looks random", "bigint form, another purpose");
    assert_eq!(verdict("substr(id_mask_decimal(g, 12), 2, 9)::numeric", "1000000000"), "looks random", "decimal form");
    let identity = verdict("g", "30000");
    assert!(identity.starts_with("ordered"), "the identity must fail: {identity}");
    let shifted = verdict("g + 5000", "30000");
    assert!(shifted.starts_with("ordered"), "id + a constant must fail: {shifted}");
    let scrambled_low_bits = verdict("g # 1023", "30000");
    assert_ne!(scrambled_low_bits, "looks random", "ids with their low bits flipped must fail");
}

/// Claim: keys exported from one server and imported into another give identical public numbers
/// in every form and purpose there, old key versions included; the import, made the way the
/// manual shows (the text through COPY, never in a statement's text), leaves no key in the second
/// server's log with `log_statement = all`, and neither does the export on the first.
#[test]
fn exported_keys_imported_into_another_server_give_identical_masks() {
    let logged = ["log_statement = all", "log_min_error_statement = debug5"];
    let first = started_cluster("mask-export", &logged);
    let second = started_cluster("mask-import", &logged);
    let mut a = first.connect();
    a.batch_execute("SELECT id_mask_key_create()").unwrap();
    a.batch_execute(&format!("CREATE TABLE ids AS SELECT unnest({SAMPLE_IDS}) AS g")).unwrap();
    let ids: Vec<i64> = a.query("SELECT g FROM ids", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    let list = format!("ARRAY{ids:?}::bigint[]");
    let version_1 = masks(&mut a, &list, "orders");
    a.batch_execute("SELECT id_mask_key_create()").unwrap();
    let version_2 = masks(&mut a, &list, "orders");
    let version_2_invoices = masks(&mut a, &list, "invoices");
    assert_ne!(version_1, version_2, "a new version masks otherwise");
    let export: String = a.query_one("SELECT id_mask_key_export()", &[]).unwrap().get(0);
    let hexes = key_hexes(&export);
    assert_eq!(hexes.len(), 4, "two versions, two keys each: {}", hexes.len());

    let mut b = second.connect();
    assert_eq!(sqlstate(&b.query_one("SELECT id_mask(1)", &[]).unwrap_err()), "55000", "no key before the import");
    b.batch_execute("CREATE TEMP TABLE incoming (keys text)").unwrap();
    {
        use std::io::Write;
        let mut copy = b.copy_in("COPY incoming FROM STDIN WITH (FORMAT csv)").unwrap();
        let quoted = format!("\"{}\"\n", export.replace('"', "\"\""));
        copy.write_all(quoted.as_bytes()).unwrap();
        copy.finish().unwrap();
    }
    let added: i32 = b.query_one("SELECT id_mask_key_import(keys) FROM incoming", &[]).unwrap().get(0);
    assert_eq!(added, 2);
    assert_eq!(masks(&mut b, &list, "orders"), version_2, "the current version's masks");
    assert_eq!(masks(&mut b, &list, "invoices"), version_2_invoices, "another purpose");
    // Version 1's public numbers unmask on the second server.
    for line in version_1.iter().take(50).chain(version_1.iter().rev().take(5)) {
        let fields: Vec<&str> = line.split(' ').collect();
        let id: i64 = fields[0].parse().unwrap();
        let masked: i64 = fields[1].parse().unwrap();
        let row =
            b.query_one("SELECT id_unmask($1, 'orders', version => 1), id_unmask_base32($2, 'orders')", &[&masked, &fields.last().unwrap()]).unwrap();
        assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (id, id), "{line}");
    }
    for (name, cluster) in [("first", &first), ("second", &second)] {
        let log = cluster.log();
        let statement = if name == "first" { "id_mask_key_export" } else { "id_mask_key_import" };
        assert!(log.contains(statement), "log_statement = all logged the {name} server's statements");
        for hex in &hexes {
            assert!(!log.to_lowercase().contains(hex.as_str()), "the {name} server's log holds a key");
        }
    }
}

/// Claim: a role with EXECUTE on the mask functions, `pg_read_all_data`, `pg_read_all_settings`
/// and `pg_read_all_stats` masks and unmasks but finds no key: not in the table (no row), not in
/// statistics, settings or the catalogs, not through the export (even granted), not in
/// `pg_stat_statements` (tracking nested statements too), and the server log with
/// `log_statement = all` holds none either; its `pg_dump` fails rather than leave the keys out.
#[test]
fn a_role_without_rights_finds_no_key_anywhere() {
    let cluster = started_cluster(
        "mask-rights",
        &["shared_preload_libraries = 'pg_idgen, pg_stat_statements'", "pg_stat_statements.track = all", "log_statement = all"],
    );
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE EXTENSION pg_stat_statements").unwrap();
    admin.batch_execute("SELECT id_mask_key_create(); SELECT id_mask_key_create()").unwrap();
    let export: String = admin.query_one("SELECT id_mask_key_export()", &[]).unwrap().get(0);
    let hexes = key_hexes(&export);
    admin
        .batch_execute(
            "CREATE ROLE app LOGIN IN ROLE pg_read_all_data, pg_read_all_settings, pg_read_all_stats;
             GRANT EXECUTE ON FUNCTION id_mask(bigint, text), id_unmask(bigint, text, integer), id_mask_decimal(bigint, integer, text),
                 id_unmask_decimal(text, text), id_mask_base32(bigint, text), id_unmask_base32(text, text), id_mask_key_export() TO app;
             ANALYZE",
        )
        .unwrap();
    let mut app = cluster.connect_as("postgres", "app");
    let back: i64 = app.query_one("SELECT id_unmask_decimal(id_mask_decimal(42, 12, 'p'), 'p')", &[]).unwrap().get(0);
    assert_eq!(back, 42, "EXECUTE is enough to mask and unmask");
    let rows: i64 = app.query_one("SELECT count(*) FROM idgen_internal.mask_key", &[]).unwrap().get(0);
    assert_eq!(rows, 0, "row security hides every key row from pg_read_all_data");
    for forbidden in ["SELECT id_mask_key_export()", "SELECT id_mask_key_create()", "SELECT id_mask_key_import('x')"] {
        assert_eq!(sqlstate(&app.query_one(forbidden, &[]).unwrap_err()), "42501", "{forbidden}");
    }
    let everything_readable: String = app
        .query_one(
            "SELECT concat_ws(' ',
                    (SELECT string_agg(s::text, ' ') FROM pg_stats AS s),
                    (SELECT string_agg(s::text, ' ') FROM pg_settings AS s),
                    (SELECT string_agg(q.query, ' ') FROM pg_stat_statements AS q),
                    (SELECT string_agg(c::text, ' ') FROM pg_class AS c),
                    (SELECT string_agg(a::text, ' ') FROM pg_attribute AS a),
                    (SELECT string_agg(d::text, ' ') FROM pg_description AS d),
                    (SELECT string_agg(p::text, ' ') FROM pg_proc AS p WHERE p.pronamespace <> 'pg_catalog'::regnamespace))",
            &[],
        )
        .unwrap()
        .get(0);
    let statements: i64 = app.query_one("SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%mask%'", &[]).unwrap().get(0);
    assert!(statements > 0, "pg_stat_statements tracked the statements");
    let log = cluster.log().to_lowercase();
    assert!(log.contains("id_mask_key_create"), "log_statement = all logged the statements");
    for hex in &hexes {
        assert!(!everything_readable.to_lowercase().contains(hex.as_str()), "a key is readable by the role");
        assert!(!log.contains(hex.as_str()), "the log holds a key");
    }
    let dump =
        Command::new(bin("pg_dump")).args(["-h", &cluster.socket_dir(), "-p", &cluster.port.to_string(), "-U", "app", "postgres"]).output().unwrap();
    assert!(!dump.status.success(), "the role's pg_dump must fail, not leave the keys out");
    let stderr = String::from_utf8_lossy(&dump.stderr);
    assert!(stderr.contains("row-level security") && stderr.contains("mask_key"), "{stderr}");
    for hex in &hexes {
        assert!(!String::from_utf8_lossy(&dump.stdout).contains(hex.as_str()));
    }
}

/// Session settings under which the planner chooses parallel plans (the leader takes part), and a
/// table `many` of 200,000 ids to plan them for.
const PARALLEL_PLANS: &str = "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
     SET min_parallel_table_scan_size = 0; SET parallel_leader_participation = on;
     CREATE TABLE many AS SELECT g FROM generate_series(1, 200000) AS g; ANALYZE many";

/// What `explain` (an EXPLAIN statement) prints, as one text.
fn plan(db: &mut Client, explain: &str) -> String {
    db.query(explain, &[]).unwrap().iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
}

/// The first digit of the base32 form of id 1 in a session: the current key version's digit.
fn current_version(db: &mut Client) -> String {
    db.query_one("SELECT left(id_mask_base32(1), 1)", &[]).unwrap().get(0)
}

/// Claim: a backend that cached the keys sees another backend's rotation, removal of a version,
/// import and `TRUNCATE` from its next transaction on, never a rolled-back one, and the rotating
/// backend sees its own at once; a parallel plan (whose leader masks) uses the current keys too.
#[test]
fn another_backends_rotation_is_seen_from_the_next_transaction() {
    let cluster = started_cluster("mask-rotation", &[]);
    let mut a = cluster.connect();
    let mut b = cluster.connect();
    a.batch_execute("SELECT id_mask_key_create()").unwrap();
    assert_eq!(current_version(&mut b), "1", "b caches version 1");
    let before: i64 = b.query_one("SELECT id_mask(7)", &[]).unwrap().get(0);

    a.batch_execute("BEGIN; SELECT id_mask_key_create()").unwrap();
    assert_eq!(current_version(&mut a), "2", "the creating backend sees its own key at once");
    assert_eq!(current_version(&mut b), "1", "uncommitted: not seen");
    a.batch_execute("ROLLBACK").unwrap();
    assert_eq!(current_version(&mut a), "1", "rolled back: version 1 again");
    assert_eq!(current_version(&mut b), "1");

    a.batch_execute("SELECT id_mask_key_create()").unwrap();
    assert_eq!(current_version(&mut b), "2", "a committed rotation is seen by the other backend");
    let unmasked: i64 = b.query_one("SELECT id_unmask($1, version => 1)", &[&before]).unwrap().get(0);
    assert_eq!(unmasked, 7, "the old version still unmasks");

    let export: String = a.query_one("SELECT id_mask_key_export()", &[]).unwrap().get(0);
    a.batch_execute("DELETE FROM idgen_internal.mask_key WHERE version = 2").unwrap();
    assert_eq!(current_version(&mut b), "1", "a removed version is seen gone");
    let version_3 = format!("pg_idgen mask keys 1\nversion 3 aes {} check {}", "ab".repeat(32), "cd".repeat(32));
    let added: i32 = a.query_one("SELECT id_mask_key_import($1)", &[&version_3]).unwrap().get(0);
    assert_eq!(added, 1);
    assert_eq!(current_version(&mut b), "3", "an import is seen");
    a.batch_execute("TRUNCATE idgen_internal.mask_key").unwrap();
    assert_eq!(sqlstate(&b.query_one("SELECT id_mask(1)", &[]).unwrap_err()), "55000", "a truncation is seen");
    // Retired versions come back only deliberately: their history rows go first.
    a.batch_execute("DELETE FROM idgen_internal.mask_key_history WHERE version IN (1, 2)").unwrap();
    let added: i32 = a.query_one("SELECT id_mask_key_import($1)", &[&export]).unwrap().get(0);
    assert_eq!(added, 2);
    assert_eq!(current_version(&mut b), "2");
    // Another backend, with a parallel plan: the keys as they are now.
    b.batch_execute(PARALLEL_PLANS).unwrap();
    let wrong: i64 = b
        .query_one("SELECT count(*) FILTER (WHERE id_unmask(id_mask(g, 'p'), 'p') <> g OR left(id_mask_base32(g), 1) <> '2') FROM many", &[])
        .unwrap()
        .get(0);
    assert_eq!(wrong, 0);
    let plan = plan(&mut b, "EXPLAIN SELECT count(*) FILTER (WHERE id_mask(g) < 0) FROM many");
    assert!(plan.contains("Parallel Seq Scan"), "a parallel plan: {plan}");
}

/// Claim: the keys are data of the database: a base backup, a standby (before and after its
/// promotion) and a database restored from `pg_dump` mask every id as the original does and
/// unmask its old public numbers.
#[test]
fn keys_survive_a_base_backup_a_promotion_and_a_dump() {
    let primary = started_cluster("mask-primary", &["wal_level = replica"]);
    let mut db = primary.connect();
    db.batch_execute("SELECT id_mask_key_create(); SELECT id_mask_key_create()").unwrap();
    db.batch_execute(&format!("CREATE TABLE ids AS SELECT unnest({SAMPLE_IDS}) AS g")).unwrap();
    let original = masks(&mut db, "(SELECT array_agg(g) FROM ids)", "orders");
    let old_text: String = db.query_one("SELECT id_mask_base32(99, 'orders')", &[]).unwrap().get(0);

    let standby = Cluster::standby_of("mask-standby", &primary);
    standby.configure(&["shared_preload_libraries = 'pg_idgen'", "hot_standby = on"]);
    standby.start();
    let mut replica = standby.connect();
    assert_eq!(masks(&mut replica, "(SELECT array_agg(g) FROM ids)", "orders"), original, "on the hot standby");
    standby.promote();
    let mut promoted = standby.connect();
    assert_eq!(masks(&mut promoted, "(SELECT array_agg(g) FROM ids)", "orders"), original, "after promotion");
    promoted.batch_execute("SELECT id_mask_key_create()").unwrap();
    let unmasked: i64 = promoted.query_one("SELECT id_unmask_base32($1, 'orders')", &[&old_text]).unwrap().get(0);
    assert_eq!(unmasked, 99, "a rotation on the promoted server keeps the old numbers");

    let file = primary.dump("postgres");
    db.batch_execute("CREATE DATABASE restored").unwrap();
    primary.restore(&file, "restored");
    let mut restored = primary.connect_to("restored");
    assert_eq!(masks(&mut restored, "(SELECT array_agg(g) FROM ids)", "orders"), original, "in the restored database");
    let unmasked: i64 = restored.query_one("SELECT id_unmask_base32($1, 'orders')", &[&old_text]).unwrap().get(0);
    assert_eq!(unmasked, 99);
}

/// The rows of one execution of the prepared statement `versions`: each key version digit the
/// base32 form shows, with how many rows it masked.
fn digits_used(db: &mut Client) -> Vec<(String, i64)> {
    db.query("EXECUTE versions", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// Claim: one execution of a statement with a parallel plan masks every row with one key version,
/// the one current when it began: after another backend's rotation committed between two
/// `EXECUTE`s of a prepared statement, the second masks all 200,000 rows with the new version — in
/// autocommit, and inside a transaction block, where the leader already holds its locks (so
/// PostgreSQL takes in no invalidation for it) while parallel workers start with no keys.
#[test]
fn a_parallel_plan_masks_every_row_with_the_keys_its_statement_began_with() {
    let cluster = started_cluster("mask-parallel", &["max_worker_processes = 16", "max_parallel_workers = 8"]);
    let mut a = cluster.connect();
    let mut b = cluster.connect();
    a.batch_execute("SELECT id_mask_key_create()").unwrap();
    b.batch_execute(PARALLEL_PLANS).unwrap();
    b.batch_execute("PREPARE versions AS SELECT left(id_mask_base32(g), 1) AS digit, count(*) FROM many GROUP BY 1 ORDER BY 1").unwrap();
    let plan = plan(&mut b, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE versions");
    assert!(plan.contains("Parallel Seq Scan") && plan.contains("Workers Launched: 2"), "a parallel plan: {plan}");
    let mut version = 1;
    for in_block in [false, true] {
        if in_block {
            b.batch_execute("BEGIN").unwrap();
        }
        assert_eq!(digits_used(&mut b), [(version.to_string(), 200_000)], "before the rotation (in a block: {in_block})");
        version = a.query_one("SELECT id_mask_key_create()", &[]).unwrap().get::<_, i32>(0);
        assert_eq!(digits_used(&mut b), [(version.to_string(), 200_000)], "after another backend's rotation (in a block: {in_block})");
        if in_block {
            b.batch_execute("COMMIT").unwrap();
        }
    }
    // A function wrongly marked PARALLEL SAFE makes parallel workers call a mask function: they
    // refuse rather than mask with keys of their own reading.
    b.batch_execute("CREATE FUNCTION wrongly_safe(bigint) RETURNS text LANGUAGE plpgsql PARALLEL SAFE AS $$BEGIN RETURN id_mask_base32($1); END$$")
        .unwrap();
    let error = b.query_one("SELECT count(*) FROM many WHERE wrongly_safe(g) < '5'", &[]).unwrap_err();
    assert_eq!(sqlstate(&error), "25000", "{error:?}");
}

/// Claim: keys that arrive by logical replication — whose apply fires row triggers only, never
/// statement triggers — are used by the subscriber's backends from their next statement on: a
/// backend that masked with version 1 masks with version 2 once the publisher's rotation has
/// arrived, and unmasks the publisher's numbers of both versions.
#[test]
fn keys_that_arrive_by_logical_replication_are_seen_by_every_backend() {
    let publisher = started_cluster("mask-publisher", &["wal_level = logical"]);
    let subscriber = started_cluster("mask-subscriber", &[]);
    let mut p = publisher.connect();
    p.batch_execute("SELECT id_mask_key_create(); CREATE PUBLICATION keys FOR TABLE idgen_internal.mask_key").unwrap();
    let old_number: String = p.query_one("SELECT id_mask_base32(42)", &[]).unwrap().get(0);
    let mut admin = subscriber.connect();
    admin
        .batch_execute(&format!(
            "CREATE SUBSCRIPTION keys CONNECTION 'host={} port={} dbname=postgres user=postgres' PUBLICATION keys",
            publisher.socket_dir(),
            publisher.port
        ))
        .unwrap();
    let rows_arrived = |admin: &mut Client, rows: i64| {
        let deadline = Instant::now() + scaled(Duration::from_secs(60));
        while admin.query_one("SELECT count(*) FROM idgen_internal.mask_key", &[]).unwrap().get::<_, i64>(0) < rows {
            assert!(Instant::now() < deadline, "the key rows did not arrive");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    rows_arrived(&mut admin, 1);
    let mut reader = subscriber.connect();
    assert_eq!(current_version(&mut reader), "1", "the subscriber's backend masks with version 1");

    p.batch_execute("SELECT id_mask_key_create()").unwrap();
    let new_number: String = p.query_one("SELECT id_mask_base32(42)", &[]).unwrap().get(0);
    rows_arrived(&mut admin, 2);
    // The row is visible a moment before the apply's invalidation is sent: allow a few seconds.
    let deadline = Instant::now() + scaled(Duration::from_secs(5));
    while current_version(&mut reader) != "2" {
        assert!(Instant::now() < deadline, "the backend kept masking with version 1 after version 2 arrived");
        std::thread::sleep(Duration::from_millis(100));
    }
    let new_here: String = reader.query_one("SELECT id_mask_base32(42)", &[]).unwrap().get(0);
    assert_eq!(new_here, new_number, "the same public number as the publisher's");
    for number in [&old_number, &new_number] {
        let id: i64 = reader.query_one("SELECT id_unmask_base32($1)", &[number]).unwrap().get(0);
        assert_eq!(id, 42, "{number}");
    }
}

/// Claim: a backend that must read the keys while another session holds `ACCESS EXCLUSIVE` on the
/// key table waits at most `pg_idgen.segment_wait_timeout` (here 500 ms), then fails with `55P03`
/// naming the setting; once the lock is gone it masks.
#[test]
fn a_locked_key_table_fails_a_call_after_the_wait_timeout() {
    let cluster = started_cluster("mask-locked", &["pg_idgen.segment_wait_timeout = 500"]);
    let mut a = cluster.connect();
    a.batch_execute("SELECT id_mask_key_create()").unwrap();
    a.batch_execute("BEGIN; LOCK TABLE idgen_internal.mask_key IN ACCESS EXCLUSIVE MODE").unwrap();
    let mut b = cluster.connect();
    b.batch_execute("SET statement_timeout = '10s'").unwrap();
    let started = Instant::now();
    let error = b.query_one("SELECT id_mask(1)", &[]).unwrap_err();
    let waited = started.elapsed();
    assert_eq!(sqlstate(&error), "55P03", "{error:?}");
    let shown = format!("{:?}", error.as_db_error());
    assert!(shown.contains("pg_idgen.segment_wait_timeout"), "{shown}");
    assert!(waited >= Duration::from_millis(450) && waited < scaled(Duration::from_secs(3)), "waited {waited:?}");
    a.batch_execute("ROLLBACK").unwrap();
    b.query_one("SELECT id_mask(1)", &[]).unwrap();
}
