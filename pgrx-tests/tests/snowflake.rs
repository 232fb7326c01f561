//! System tests of snowflake ids: real clusters, concurrent clients, settings checked at start.

use pg_idgen_system_tests::{assert_cross_backend_order, generate_concurrently, sqlstate, started_cluster, Cluster};

const CLIENTS: i32 = 4;
const IDS_PER_CLIENT: i32 = 250_000;

/// Claim: 4 clients taking 250,000 ids each at full speed, half through INSERT … SELECT and half
/// fetched by the client, never see a duplicate; each client's ids strictly increase; every id
/// carries the node id and a time within 1 s of when it was made.
#[test]
fn concurrent_clients_never_get_a_duplicate() {
    let cluster = started_cluster("concurrent", &["pg_idgen.node_id = 7"]);
    generate_concurrently(&cluster, "ids", "snowflake_next()", "bigint", CLIENTS, IDS_PER_CLIENT);

    let mut db = cluster.connect();
    let other_nodes: i64 = db.query_one("SELECT count(*) FROM ids WHERE (id_decode(id)).node_id <> 7", &[]).unwrap().get(0);
    assert_eq!(other_nodes, 0, "every id carries node id 7");
    let off_time: i64 =
        db.query_one("SELECT count(*) FROM ids WHERE abs(extract(epoch FROM (id_decode(id)).ts - made_at)) >= 1", &[]).unwrap().get(0);
    assert_eq!(off_time, 0, "every id's time is within 1 s of when it was made");
}

/// Claim: an id taken by one backend after another backend took one is greater.
#[test]
fn order_holds_across_backends() {
    let cluster = started_cluster("order", &["pg_idgen.node_id = 2"]);
    assert_cross_backend_order(&cluster, "snowflake_next()", "bigint", 10_000);
}

/// Claim: ids made slowly (about 1 ms apart, so nearly every one starts a new tick) spread
/// evenly over `id % 16`: no shard gets more than 1.5x or less than 0.5x its share.
#[test]
fn slowly_made_ids_spread_evenly_over_shards() {
    let cluster = started_cluster("spread", &["pg_idgen.node_id = 3"]);
    let mut db = cluster.connect();
    db.batch_execute(
        "CREATE TABLE slow (id bigint);
         DO $$ BEGIN
             FOR i IN 1 .. 4096 LOOP
                 INSERT INTO slow VALUES (snowflake_next());
                 PERFORM pg_sleep(0.001);
             END LOOP;
         END $$;",
    )
    .unwrap();
    let rows = db.query("SELECT id % 16, count(*) FROM slow GROUP BY 1 ORDER BY 1", &[]).unwrap();
    let counts: Vec<i64> = rows.iter().map(|r| r.get(1)).collect();
    let mean = 4096.0 / 16.0;
    assert_eq!(counts.len(), 16, "every shard gets ids: {counts:?}");
    for (shard, &count) in counts.iter().enumerate() {
        assert!((count as f64) <= 1.5 * mean && (count as f64) >= 0.5 * mean, "shard {shard} got {count} of 4096 ids (mean {mean}): {counts:?}");
    }
    let distinct_ticks: i64 = db.query_one("SELECT count(DISTINCT (id_decode(id)).ts) FROM slow", &[]).unwrap().get(0);
    assert!(distinct_ticks > 2048, "the ids were made in many different ticks ({distinct_ticks})");
}

/// Claim: an invalid setting stops the server at start, with a message that names the setting.
#[test]
fn invalid_settings_stop_the_server_and_name_the_setting() {
    let cluster = Cluster::init("settings");
    let cases: &[(&[&str], &str)] = &[
        (&["pg_idgen.node_id = 1024"], "invalid value for parameter \"pg_idgen.node_id\": \"1024\""),
        (&["pg_idgen.node_id = 'seven'"], "invalid value for parameter \"pg_idgen.node_id\": \"seven\""),
        (&["pg_idgen.node_id = -2"], "invalid value for parameter \"pg_idgen.node_id\""),
        (&["pg_idgen.layout = 'leaf'"], "invalid value for parameter \"pg_idgen.layout\": \"leaf\""),
        (&["pg_idgen.time_bits = 42"], "must add up to at most 63, not 64"),
        (&["pg_idgen.layout = 'js_safe'", "pg_idgen.node_bits = 10"], "must add up to at most 53 (ids below 2^53), not 59"),
        (&["pg_idgen.sequence_bits = 0", "pg_idgen.time_bits = 43"], "invalid value for parameter \"pg_idgen.sequence_bits\""),
        (&["pg_idgen.node_bits = 40", "pg_idgen.time_bits = 11"], "invalid value for parameter \"pg_idgen.time_bits\""),
        (&["pg_idgen.time_unit = 0"], "invalid value for parameter \"pg_idgen.time_unit\""),
        (&["pg_idgen.epoch = '2999-01-01 00:00:00+00'"], "The epoch must not be in the future"),
        (&["pg_idgen.epoch = 'not a time'"], "invalid value for parameter \"pg_idgen.epoch\": \"not a time\""),
        (&["pg_idgen.epoch = '1900-01-01'"], "time bits of this layout have already run out"),
        (&["pg_idgen.epoch = 'now'"], "invalid value for parameter \"pg_idgen.epoch\": \"now\""),
        (&["pg_idgen.node_id = 1.5"], "invalid value for parameter \"pg_idgen.node_id\": \"1.5\""),
        (&["pg_idgen.database = ''"], "invalid value for parameter \"pg_idgen.database\": \"\""),
        (&["pg_idgen.nodeid = 3"], "unrecognized configuration parameter \"pg_idgen.nodeid\""),
        (&["pg_idgen.clock_forward_delay = '2h'"], "invalid value for parameter \"pg_idgen.clock_forward_delay\": \"2h\""),
        (&["pg_idgen.max_clock_wait = -5"], "invalid value for parameter \"pg_idgen.max_clock_wait\""),
        (&["pg_idgen.clock_step_policy = 'sometimes'"], "invalid value for parameter \"pg_idgen.clock_step_policy\": \"sometimes\""),
        (&["pg_idgen.clock_reserve = 10"], "invalid value for parameter \"pg_idgen.clock_reserve\": \"10\""),
        // A connection string may hold a password: the FATAL names the setting, not the value
        // (PostgreSQL's own WARNING about the placeholder still shows it, in the server log).
        (&["pg_idgen.node_registry = 'host=x password=secret nonsense'"], "invalid value for parameter \"pg_idgen.node_registry\": \"…\""),
        (&["pg_idgen.node_lease_ttl = '1s'"], "invalid value for parameter \"pg_idgen.node_lease_ttl\""),
    ];
    for (settings, expected) in cases {
        let mut lines = vec!["shared_preload_libraries = 'pg_idgen'"];
        lines.extend_from_slice(settings);
        cluster.configure(&lines);
        match cluster.try_start() {
            Ok(()) => {
                cluster.stop();
                panic!("the server started with {settings:?}");
            }
            Err(log) => assert!(log.contains("FATAL") && log.contains(expected), "{settings:?}: log lacks {expected:?}:\n{log}"),
        }
    }
    // Exhausted time bits: the hint must not send the user to a later epoch.
    cluster.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.epoch = '1900-01-01'"]);
    let log = cluster.try_start().expect_err("time bits ran out");
    let hint = log.lines().find(|l| l.contains("HINT:") && l.contains("time bits")).unwrap_or_else(|| panic!("no hint:\n{log}"));
    assert!(hint.contains("Choose more time bits") && !hint.contains("Correct pg_idgen.epoch"), "{hint}");
    // The same cluster starts once the settings are valid.
    cluster.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 1023"]);
    cluster.start();
    assert!(cluster.log().contains("the time bits last until 2094-09-07"), "start line:\n{}", cluster.log());
}

/// Claim: `ALTER SYSTEM SET pg_idgen.node_id` refuses a node id that does not fit the node bits of
/// the server's layout (22023, naming the bits), and a value that reached postgresql.auto.conf all
/// the same (written there by hand, or by an older version) stops the next start with a hint that
/// names postgresql.auto.conf, the file it came from, not postgresql.conf.
#[test]
fn a_node_id_that_does_not_fit_is_refused_by_alter_system_and_named_in_its_file_at_start() {
    let cluster = started_cluster("auto_conf", &["pg_idgen.node_id = 1"]);
    let error = cluster.connect().batch_execute("ALTER SYSTEM SET pg_idgen.node_id = 5000").expect_err("5000 does not fit 10 node bits");
    assert_eq!(sqlstate(&error), "22023", "{error}");
    let db_error = error.as_db_error().expect("a server error");
    assert!(db_error.detail().is_some_and(|d| d.contains("10 node bits") && d.contains("1023")), "{db_error:?}");
    cluster.connect().batch_execute("ALTER SYSTEM SET pg_idgen.node_id = 5").unwrap();
    cluster.stop();
    let auto_conf = cluster.data_file("postgresql.auto.conf");
    let text = std::fs::read_to_string(&auto_conf).unwrap().replace("pg_idgen.node_id = '5'", "pg_idgen.node_id = '5000'");
    assert!(text.contains("'5000'"), "ALTER SYSTEM wrote the node id: {text}");
    std::fs::write(&auto_conf, text).unwrap();
    let log = cluster.try_start().expect_err("node id 5000 with 10 node bits");
    let hint = log.lines().find(|l| l.contains("HINT:") && l.contains("pg_idgen.node_id")).unwrap_or_else(|| panic!("no hint:\n{log}"));
    assert!(hint.contains(&format!("{}", auto_conf.display())), "the hint names the file the value came from: {hint}");
}

/// Claim: the presets and per-setting overrides give the documented layouts, and ids made under
/// them decode to this node's id; js_safe ids stay below 2^53 (exact in a JavaScript number).
#[test]
fn presets_and_overrides_shape_the_ids() {
    let cases: &[(&[&str], &str, i32)] = &[
        (&["pg_idgen.layout = 'sonyflake'", "pg_idgen.node_id = 65535"], "sonyflake 39/16/8", 65535),
        (&["pg_idgen.layout = 'uidgen'", "pg_idgen.node_id = 4194303"], "uidgen 28/22/13", 4_194_303),
        (&["pg_idgen.node_bits = 4", "pg_idgen.sequence_bits = 18", "pg_idgen.node_id = 9"], "twitter 41/4/18", 9),
        (&["pg_idgen.layout = 'js_safe'", "pg_idgen.node_id = 15"], "js_safe 41/4/8", 15),
    ];
    for (i, (settings, layout, node)) in cases.iter().enumerate() {
        let cluster = started_cluster(&format!("preset{i}"), settings);
        let mut db = cluster.connect();
        let row = db.query_one("SELECT layout FROM pg_idgen_status()", &[]).unwrap();
        assert_eq!(row.get::<_, String>(0), *layout);
        let row = db
            .query_one(
                "SELECT count(DISTINCT id), bool_and((id_decode(id)).node_id = $1),
                        bool_and(abs(extract(epoch FROM snowflake_timestamp(id) - clock_timestamp())) < 2),
                        max(id)
                   FROM (SELECT snowflake_next() AS id FROM generate_series(1, 5000)) AS s",
                &[node],
            )
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 5000, "{layout}: distinct ids");
        if layout.starts_with("js_safe") {
            assert!(row.get::<_, i64>(3) < 1 << 53, "{layout}: ids below 2^53");
            let error = db.query_one("SELECT snowflake_timestamp(1::bigint << 60)", &[]).expect_err("not an id of js_safe");
            assert_eq!(sqlstate(&error), "22003", "{error:?}");
        }
        assert!(row.get::<_, bool>(1), "{layout}: node id {node} in every id");
        assert!(row.get::<_, bool>(2), "{layout}: time decodes to now");
    }
}

/// Claim: a hot standby refuses snowflake ids and segment numbers (SQLSTATE 25006, like
/// nextval()), which its primary may be handing out too, but decodes. (UUIDv7s and ObjectIds it
/// makes: objectid_uuid7.rs.)
#[test]
fn a_standby_refuses_snowflake_ids_and_segment_numbers_but_decodes() {
    let primary = started_cluster("primary", &["pg_idgen.node_id = 1"]);
    let id: i64 = primary.connect().query_one("SELECT snowflake_next()", &[]).unwrap().get(0);
    let standby = Cluster::standby_of("standby", &primary);
    standby.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 1"]);
    standby.start();
    let mut db = standby.connect();
    let in_recovery: bool = db.query_one("SELECT pg_is_in_recovery()", &[]).unwrap().get(0);
    assert!(in_recovery);
    for generator in ["snowflake_next()", "snowflake_next_range(10)", "segment_next('any')", "segment_next_range('any', 10)"] {
        let error = db.query_one(&format!("SELECT {generator}"), &[]).expect_err("a standby must not generate");
        assert_eq!(sqlstate(&error), "25006", "{generator}: {error:?}");
    }
    let node: i32 = db.query_one("SELECT (id_decode($1::bigint)).node_id", &[&id]).unwrap().get(0);
    assert_eq!(node, 1);
}
