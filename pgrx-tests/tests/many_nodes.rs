//! System tests of several servers that share one node registry (`pg_idgen.node_registry`):
//! every cluster is started by the test, all on this machine, connected by libpq over Unix
//! sockets. Duplicates are counted over real rows with `count(*) = count(DISTINCT id)`.

use std::collections::HashSet;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{scaled, sqlstate, started_cluster, started_cluster_with_clock_offset, Client, Cluster, Stopped};

/// Short leases, so that the tests see them run out: renewed every second.
const TTL: &str = "pg_idgen.node_lease_ttl = '3s'";

/// How far leased ids may run ahead of the registry's clock, on the registries and their servers:
/// the least the defaults of borrow and reserve allow (5 s + 2 × 1 s), so that a registry's wait
/// after its start or a reset (its lease, margin and lead) stays short.
const LEAD: &str = "pg_idgen.node_lease_max_lead = '7s'";

/// The registries' own margin: at least every server's here (they take 1 s to 6 s).
const REGISTRY_MARGIN: &str = "pg_idgen.node_lease_margin = '6s'";

/// A libpq connection string to a cluster's `postgres` database.
fn conninfo(cluster: &Cluster) -> String {
    conninfo_as(cluster, "postgres")
}

fn conninfo_as(cluster: &Cluster, user: &str) -> String {
    format!("host={} port={} dbname=postgres user={user}", cluster.socket_dir(), cluster.port)
}

/// The registry: a server with the extension, which holds the leases. The servers lease as a role
/// that may only call the two functions, as docs/many-servers.md says.
fn registry(name: &str) -> Cluster {
    registry_with(name, &[])
}

/// The same, with more settings.
fn registry_with(name: &str, settings: &[&str]) -> Cluster {
    // A later line of postgresql.conf wins: `settings` may set another lead. The registry's own
    // lease, margin and lead bound its servers' and its wait after a start or reset.
    let registry = started_cluster(name, &[&[TTL, REGISTRY_MARGIN, LEAD], settings].concat());
    registry
        .connect()
        .batch_execute(
            "CREATE ROLE idgen_lease LOGIN;
             GRANT EXECUTE ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint, boolean),
                                       pg_idgen_node_lease_renew(text, int, int, int, bigint, bigint) TO idgen_lease",
        )
        .unwrap();
    registry
}

/// How the servers reach the registry.
fn registry_conninfo(registry: &Cluster) -> String {
    conninfo_as(registry, "idgen_lease")
}

/// The settings of a server that leases its node id from `registry`, with a margin and more.
fn lease_settings(registry: &Cluster, margin: &str, more: &[&str]) -> Vec<String> {
    let mut settings = vec![
        format!("pg_idgen.node_registry = '{}'", registry_conninfo(registry)),
        TTL.into(),
        LEAD.into(),
        format!("pg_idgen.node_lease_margin = '{margin}'"),
    ];
    settings.extend(more.iter().map(|s| s.to_string()));
    settings
}

/// Configures a cluster made elsewhere (a standby) as such a server, with pg_idgen preloaded.
fn configure_leasing(cluster: &Cluster, registry: &Cluster, margin: &str, more: &[&str]) {
    let mut lines = vec!["shared_preload_libraries = 'pg_idgen'".to_string()];
    lines.extend(lease_settings(registry, margin, more));
    cluster.configure(&lines.iter().map(String::as_str).collect::<Vec<_>>());
}

/// Such a server, started.
fn leasing(name: &str, registry: &Cluster, margin: &str, more: &[&str]) -> Cluster {
    let settings = lease_settings(registry, margin, more);
    started_cluster(name, &settings.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The node id a server holds a lease of, once it holds one (at most 40 s: a registry that just
/// started hands out none for its lease, margin and lead).
fn leased_node_id(cluster: &Cluster) -> i32 {
    let mut db = cluster.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(40));
    loop {
        let row = db.query_one("SELECT state, node_id, last_error FROM node_lease_status()", &[]).unwrap();
        if row.get::<_, String>(0) == "held" {
            return row.get(1);
        }
        assert!(Instant::now() < deadline, "no lease within 40 s: {:?} {:?}", row.get::<_, String>(0), row.get::<_, Option<String>>(2));
        thread::sleep(Duration::from_millis(100));
    }
}

/// The lease's state once the lease worker has answered: its first call made (at most 20 s).
fn answered_state(cluster: &Cluster) -> String {
    let mut db = cluster.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(20));
    loop {
        let state: String = db.query_one("SELECT state FROM node_lease_status()", &[]).unwrap().get(0);
        if state != "acquiring" {
            return state;
        }
        assert!(Instant::now() < deadline, "the lease worker did not answer within 20 s");
        thread::sleep(Duration::from_millis(20));
    }
}

fn node_of(db: &mut Client, id: i64) -> i32 {
    db.query_one("SELECT (id_decode($1::bigint)).node_id", &[&id]).unwrap().get(0)
}

/// The process ids of a server: its postmaster and every child.
fn server_pids(cluster: &Cluster) -> Vec<String> {
    let pid_file = std::fs::read_to_string(format!("{}/postmaster.pid", cluster.data())).unwrap();
    let postmaster = pid_file.lines().next().unwrap().trim().to_string();
    let children = Command::new("pgrep").args(["-P", &postmaster]).output().unwrap();
    let mut pids = vec![postmaster];
    pids.extend(String::from_utf8_lossy(&children.stdout).split_whitespace().map(String::from));
    pids
}

/// A frozen server (its postmaster and every child stopped), thawed when dropped.
fn freeze(cluster: &Cluster) -> Stopped {
    Stopped::processes(server_pids(cluster))
}

/// Claim: three servers that lease from one registry hold three different node ids, and a table
/// hash-partitioned over them with postgres_fdw (each server holds one shard and reaches the
/// others' as foreign partitions), written concurrently through every server with `DEFAULT
/// snowflake_next()` and `DEFAULT segment_next('orders')` from one segment authority (the
/// registry's server), has no duplicate id and no duplicate number over all its rows; each
/// server's rows carry its node id.
#[test]
fn three_servers_lease_their_own_node_ids_and_share_a_sharded_table_without_duplicates() {
    let registry = registry("nodes-registry");
    registry.connect().batch_execute("SELECT segment_create('orders', 1, 500)").unwrap();
    let authority = format!("pg_idgen.segment_authority = '{}'", conninfo(&registry));
    let servers: Vec<Cluster> = (0..3).map(|i| leasing(&format!("nodes-shard{i}"), &registry, "2s", &[&authority])).collect();
    let node_ids: Vec<i32> = servers.iter().map(leased_node_id).collect();
    assert_eq!(node_ids.iter().collect::<HashSet<_>>().len(), 3, "three different node ids: {node_ids:?}");

    for (i, server) in servers.iter().enumerate() {
        let mut sql = format!(
            "CREATE EXTENSION postgres_fdw;
             CREATE TABLE orders (id bigint NOT NULL DEFAULT snowflake_next(), number bigint NOT NULL DEFAULT segment_next('orders'),
                                  server int, n int) PARTITION BY HASH (id);
             CREATE TABLE shard{i} PARTITION OF orders (PRIMARY KEY (id)) FOR VALUES WITH (MODULUS 3, REMAINDER {i});"
        );
        for (j, other) in servers.iter().enumerate().filter(|(j, _)| *j != i) {
            sql += &format!(
                "CREATE SERVER s{j} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '{}', port '{}', dbname 'postgres', batch_size '100');
                 CREATE USER MAPPING FOR postgres SERVER s{j} OPTIONS (user 'postgres');
                 CREATE FOREIGN TABLE remote{j} PARTITION OF orders FOR VALUES WITH (MODULUS 3, REMAINDER {j})
                     SERVER s{j} OPTIONS (table_name 'shard{j}');",
                other.socket_dir(),
                other.port
            );
        }
        server.connect().batch_execute(&sql).unwrap();
    }

    const CLIENTS_PER_SERVER: i32 = 2;
    const BATCHES: i32 = 20;
    const ROWS: i32 = 250;
    let mut writers = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        for _ in 0..CLIENTS_PER_SERVER {
            let mut db = server.connect();
            writers.push(thread::spawn(move || {
                for _ in 0..BATCHES {
                    db.execute(&format!("INSERT INTO orders (server, n) SELECT {i}, g FROM generate_series(1, {ROWS}) g"), &[]).unwrap();
                }
            }));
        }
    }
    writers.into_iter().for_each(|w| w.join().unwrap());

    let expected = 3 * (CLIENTS_PER_SERVER * BATCHES * ROWS) as i64;
    let mut db = servers[0].connect();
    let row = db.query_one("SELECT count(*), count(DISTINCT id), count(DISTINCT number) FROM orders", &[]).unwrap();
    assert_eq!(
        (row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2)),
        (expected, expected, expected),
        "every row, no duplicate id, no duplicate segment number"
    );
    let max_number: i64 = db.query_one("SELECT max(number) FROM orders", &[]).unwrap().get(0);
    let max_id: i64 = registry.connect().query_one("SELECT max_id FROM segment_tag WHERE tag = 'orders'", &[]).unwrap().get(0);
    assert!(max_number <= max_id, "every number comes from a range the authority allocated");
    for (i, node_id) in node_ids.iter().enumerate() {
        let nodes: Vec<i32> = db
            .query("SELECT DISTINCT (id_decode(id)).node_id FROM orders WHERE server = $1", &[&(i as i32)])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(nodes, vec![*node_id], "server {i}'s rows carry its leased node id");
    }
    let shards: Vec<i64> = (0..3).map(|i| servers[i].connect().query_one(&format!("SELECT count(*) FROM shard{i}"), &[]).unwrap().get(0)).collect();
    assert!(shards.iter().all(|&n| n > expected / 6), "the hash spreads the rows over the shards: {shards:?}");
}

/// Claim: while the registry is down, a server goes on making ids until its lease could have run
/// out (the lease's length after its last renewal was sent), then refuses with 55000 naming the
/// registry, and never makes an id after that time; once the registry is back and its wait after
/// a start has passed (lease, margin and lead: 11 s here; a registry that starts may be an older
/// copy), the server takes the same node id again and makes ids again, none of them a duplicate.
#[test]
fn a_server_stops_when_its_lease_could_have_run_out_and_goes_on_when_the_registry_is_back() {
    let registry = registry("outage-registry");
    let server = leasing("outage-server", &registry, "2s", &[]);
    let node_id = leased_node_id(&server);
    server
        .connect()
        .batch_execute("CREATE TABLE made (made_at timestamptz NOT NULL DEFAULT clock_timestamp(), id bigint NOT NULL DEFAULT snowflake_next())")
        .unwrap();

    let mut db = server.connect();
    let insert = |db: &mut Client| db.execute("INSERT INTO made DEFAULT VALUES", &[]);
    for _ in 0..100 {
        insert(&mut db).unwrap();
    }
    registry.stop();
    let stopped = Instant::now();
    let error = loop {
        // Why the time before the call: its id was made no earlier, however long a loaded machine
        // takes to return it; so the bound is the promise itself and needs no allowance for load.
        let sent = stopped.elapsed();
        match insert(&mut db) {
            Ok(_) => assert!(sent < Duration::from_secs(6), "an id was made {sent:?} or later after the registry went"),
            Err(error) => break error,
        }
        thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    let db_error = error.as_db_error().unwrap();
    assert!(db_error.message().contains("lease has run out"), "{}", db_error.message());
    // Naming the setting, never its value: the connection string is for superusers (and pg_monitor).
    assert!(db_error.detail().unwrap_or_default().contains("pg_idgen.node_registry"), "{:?}", db_error.detail());
    assert!(!format!("{db_error:?}").contains(&registry.socket_dir()), "the error shows the registry's address: {db_error:?}");
    // The lease's end: its last renewal was sent before renewed_at, and lasts 3 s.
    let row = db
        .query_one(
            "SELECT state, (SELECT max(made_at) FROM made) OPERATOR(pg_catalog.<=) renewed_at + interval '3 s', renewed_at::text
               FROM node_lease_status()",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "lapsed");
    assert!(row.get::<_, bool>(1), "no id was made after the lease's end ({})", row.get::<_, String>(2));
    for _ in 0..20 {
        assert_eq!(sqlstate(&insert(&mut db).unwrap_err()), "55000", "refused while the registry is down");
    }

    registry.start();
    let back = Instant::now();
    while insert(&mut db).is_err() {
        assert!(back.elapsed() < scaled(Duration::from_secs(25)), "no ids {:?} after the registry came back", back.elapsed());
        thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..100 {
        insert(&mut db).unwrap();
    }
    assert_eq!(leased_node_id(&server), node_id, "the same node id, renewed");
    let row = db.query_one("SELECT count(*), count(DISTINCT id) FROM made", &[]).unwrap();
    assert_eq!(row.get::<_, i64>(0), row.get::<_, i64>(1), "no duplicate");
}

/// Claim: a server frozen (SIGSTOP) keeps its node id from others only until its lease and its
/// margin have run out on the registry's clock: a server configured with that node id is refused
/// until then, takes it after, and makes ids above every id of the frozen server, although its
/// wall clock is 30 s behind (the registry hands the earlier holder's bound over). Thawed, the
/// frozen server never makes another id with that node id (it refuses, then leases another), and
/// no id of either server is a duplicate.
#[test]
fn a_frozen_servers_node_id_goes_to_another_only_after_its_lease_and_margin() {
    let registry = registry("frozen-registry");
    let frozen = leasing("frozen-a", &registry, "6s", &[]);
    let node_id = leased_node_id(&frozen);
    let mut a = frozen.connect();
    let mut ids_a: Vec<i64> = (0..1000).map(|_| a.query_one("SELECT snowflake_next()", &[]).unwrap().get(0)).collect();
    // Why the taker starts before the freeze: started after it, on a loaded machine, it could
    // find the frozen lease run out already, and the refusal would go untested.
    let settings = lease_settings(&registry, "2s", &[&format!("pg_idgen.node_id = {node_id}")]);
    let taker = started_cluster_with_clock_offset("frozen-b", -30, &settings.iter().map(String::as_str).collect::<Vec<_>>());
    let mut b = taker.connect();
    assert_eq!(answered_state(&taker), "refused");
    let freeze = freeze(&frozen);
    let mut r = registry.connect();
    let expired_at: String = r.query_one("SELECT expires_at::text FROM node_lease WHERE node_id = $1", &[&node_id]).unwrap().get(0);

    let error = b.query_one("SELECT snowflake_next()", &[]).expect_err("the node id is still the frozen server's");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    assert!(error.as_db_error().unwrap().message().contains(&format!("refuses this server node id {node_id}")), "{error:?}");
    let last_error: String = b.query_one("SELECT last_error FROM node_lease_status()", &[]).unwrap().get(0);
    assert!(last_error.contains(&format!("node id {node_id} is held by")), "{last_error}");

    assert_eq!(leased_node_id(&taker), node_id);
    let row = r
        .query_one(
            "SELECT acquired_at >= $2::text::timestamptz + interval '6 s', holder_name FROM node_lease WHERE node_id = $1",
            &[&node_id, &expired_at],
        )
        .unwrap();
    assert!(row.get::<_, bool>(0), "taken only once the frozen lease's end ({expired_at}) and its 6 s margin had passed");
    assert!(row.get::<_, String>(1).contains(&format!("port {}", taker.port)));
    let ids_b: Vec<i64> = (0..1000).map(|_| b.query_one("SELECT snowflake_next()", &[]).unwrap().get(0)).collect();
    let max_a = *ids_a.iter().max().unwrap();
    assert!(ids_b.iter().all(|&id| id > max_a), "the taker's ids are above every id the frozen server made");

    drop(freeze);
    let thawed = Instant::now();
    let mut refusals = 0;
    while thawed.elapsed() < Duration::from_secs(6) {
        match a.query_one("SELECT snowflake_next()", &[]) {
            Ok(row) => {
                let id: i64 = row.get(0);
                assert_ne!(node_of(&mut b, id), node_id, "the thawed server made an id with the node id it lost");
                ids_a.push(id);
            }
            Err(error) => {
                assert_eq!(sqlstate(&error), "55000", "{error:?}");
                refusals += 1;
            }
        }
        thread::sleep(Duration::from_millis(2));
    }
    let new_node = leased_node_id(&frozen);
    assert_ne!(new_node, node_id, "the thawed server leased another node id");
    let all: HashSet<i64> = ids_a.iter().chain(&ids_b).copied().collect();
    assert_eq!(all.len(), ids_a.len() + ids_b.len(), "no duplicate ({refusals} calls refused after the thaw)");
}

/// Claim: two servers configured with the same fixed node id: the first holds it, the second
/// refuses to make snowflake ids (55000) and says which server holds it; the first, restarted,
/// takes it back. A standby promoted while
/// its primary runs takes a node id lease of its own and makes no id with its primary's node id;
/// with a fixed node id its primary holds, the promoted standby refuses instead.
#[test]
fn a_duplicate_fixed_node_id_and_a_promoted_standby_never_share_a_node_id() {
    let registry = registry("fixed-registry");
    let first = leasing("fixed-first", &registry, "2s", &["pg_idgen.node_id = 7"]);
    assert_eq!(leased_node_id(&first), 7);
    let second = leasing("fixed-second", &registry, "2s", &["pg_idgen.node_id = 7"]);
    assert_eq!(answered_state(&second), "refused");
    let mut db = second.connect();
    let error = db.query_one("SELECT snowflake_next()", &[]).expect_err("node id 7 is the first server's");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    let row = db.query_one("SELECT state, last_error FROM node_lease_status()", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), "refused");
    let last_error: String = row.get(1);
    assert!(last_error.contains("node id 7 is held by") && last_error.contains(&format!("port {}", first.port)), "{last_error}");
    let before: i64 = first.connect().query_one("SELECT snowflake_next()", &[]).expect("the first server makes ids").get(0);
    // Restarted, the first server takes its own node id back (its earlier start's row, once that
    // lease has ended), and goes on above its earlier ids.
    first.stop();
    first.start();
    assert_eq!(leased_node_id(&first), 7);
    let after: i64 = first.connect().query_one("SELECT snowflake_next()", &[]).unwrap().get(0);
    assert!(after > before, "{after} > {before}");

    // A leased primary and its standby.
    let primary = leasing("fixed-primary", &registry, "2s", &[]);
    let primary_node = leased_node_id(&primary);
    let standby = Cluster::standby_of("fixed-standby", &primary);
    configure_leasing(&standby, &registry, "2s", &[]);
    standby.start();
    let state: String = standby.connect().query_one("SELECT state FROM node_lease_status()", &[]).unwrap().get(0);
    assert_eq!(state, "standby");
    standby.promote();
    let standby_node = leased_node_id(&standby);
    assert_ne!(standby_node, primary_node, "the promoted standby leased a node id of its own");
    let mut p = primary.connect();
    let mut s = standby.connect();
    let mut ids = HashSet::new();
    for _ in 0..500 {
        for (db, node) in [(&mut p, primary_node), (&mut s, standby_node)] {
            let id: i64 = db.query_one("SELECT snowflake_next()", &[]).unwrap().get(0);
            assert_eq!(node_of(db, id), node);
            assert!(ids.insert(id), "duplicate {id}");
        }
    }

    // A fixed node id on a primary and its standby: promoted, the standby refuses.
    let fixed_standby = Cluster::standby_of("fixed-first-standby", &first);
    configure_leasing(&fixed_standby, &registry, "2s", &["pg_idgen.node_id = 7"]);
    fixed_standby.start();
    fixed_standby.promote();
    assert_eq!(answered_state(&fixed_standby), "refused");
    let error = fixed_standby.connect().query_one("SELECT snowflake_next()", &[]).expect_err("node id 7 is its primary's");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
}

/// Claim: two servers that lease their node ids from one registry write one table each, and
/// native logical replication copies both into a third server's table with a primary key: all
/// rows arrive (a duplicate id would stop the apply with a unique violation), `count(*) =
/// count(DISTINCT id)` there.
#[test]
fn two_writers_replicate_into_a_third_without_duplicates() {
    let registry = registry("replication-registry");
    let writers: Vec<Cluster> = (0..2).map(|i| leasing(&format!("replication-writer{i}"), &registry, "2s", &["wal_level = logical"])).collect();
    let subscriber = started_cluster("replication-subscriber", &[]);
    const TABLE: &str = "CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_next(), origin int, n int)";
    subscriber.connect().batch_execute(TABLE).unwrap();
    for (i, writer) in writers.iter().enumerate() {
        leased_node_id(writer);
        writer.connect().batch_execute(&format!("{TABLE}; CREATE PUBLICATION events_pub FOR TABLE events")).unwrap();
        subscriber
            .connect()
            .batch_execute(&format!("CREATE SUBSCRIPTION from_writer{i} CONNECTION '{}' PUBLICATION events_pub", conninfo(writer)))
            .unwrap();
    }
    const PER_CLIENT: i32 = 2_500;
    let mut clients = Vec::new();
    for (i, writer) in writers.iter().enumerate() {
        for _ in 0..2 {
            let mut db = writer.connect();
            clients.push(thread::spawn(move || {
                for _ in 0..PER_CLIENT / 250 {
                    db.execute(&format!("INSERT INTO events (origin, n) SELECT {i}, g FROM generate_series(1, 250) g"), &[]).unwrap();
                }
            }));
        }
    }
    clients.into_iter().for_each(|c| c.join().unwrap());
    let expected = 4 * PER_CLIENT as i64;
    let mut db = subscriber.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(60));
    loop {
        let row = db.query_one("SELECT count(*), count(DISTINCT id) FROM events", &[]).unwrap();
        let (count, distinct) = (row.get::<_, i64>(0), row.get::<_, i64>(1));
        assert_eq!(count, distinct, "no duplicate id in the subscriber's table");
        if count == expected {
            break;
        }
        assert!(Instant::now() < deadline, "{count} of {expected} rows arrived within 60 s:\n{}", subscriber.log());
        thread::sleep(Duration::from_millis(200));
    }
}

/// A client that inserts rows with `DEFAULT segment_next(…)` in a loop until told to stop, and
/// counts the statements that failed.
fn segment_writer(cluster: &Cluster, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> thread::JoinHandle<Vec<String>> {
    let mut db = cluster.connect();
    thread::spawn(move || {
        let mut errors = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if let Err(error) = db.execute("INSERT INTO got (client) SELECT 1 FROM generate_series(1, 100)", &[]) {
                errors.push(format!("{error:?}"));
            }
            thread::sleep(Duration::from_millis(20));
        }
        errors
    })
}

/// Claim: two servers that take segment ranges from one authority draw from one number space:
/// 4 clients writing `DEFAULT segment_next('orders')` on both never get the same number, also while
/// the authority is stopped for 3 s mid-load (no error: the cached ranges last) and after it
/// returns. A tag whose cache runs out while the authority is down fails with 08006 naming the
/// authority, `segment_authority_status()` says it is unreachable, and calls recover by
/// themselves once it is back; the same when it is frozen (SIGSTOP), with every call ending at its
/// deadline and the worker in no transaction and holding no lock meanwhile. A tag the authority
/// does not have is 42704, naming it; the allocation refuses roles without the grant, absurd
/// lengths and transaction blocks.
#[test]
fn servers_share_one_segment_number_space_and_outlast_an_authority_outage() {
    let authority = started_cluster("authority", &[]);
    // A step that lasts the outage, as Leaf sizes segments for minutes of peak use; and one that
    // does not. The servers connect as a role that may only call the allocation, as docs/many-servers.md says.
    authority
        .connect()
        .batch_execute(
            "SELECT segment_create('orders', 1, 200000); SELECT segment_create('small', 1, 10);
             CREATE ROLE idgen LOGIN; CREATE ROLE other LOGIN;
             GRANT EXECUTE ON FUNCTION pg_idgen_segment_allocate(text, bigint) TO idgen",
        )
        .unwrap();
    let mut other = authority.connect_as("postgres", "other");
    let error = other.query("SELECT * FROM pg_idgen_segment_allocate('small', 0)", &[]).expect_err("not granted");
    assert_eq!(sqlstate(&error), "42501", "{error:?}");
    let mut granted = authority.connect_as("postgres", "idgen");
    let error = granted.query("SELECT * FROM pg_idgen_segment_allocate('small', 9223372036854775807)", &[]).expect_err("too long");
    assert_eq!(sqlstate(&error), "22023", "{error:?}");
    granted.batch_execute("BEGIN").unwrap();
    let error = granted.query("SELECT * FROM pg_idgen_segment_allocate('small', 0)", &[]).expect_err("in a transaction block");
    assert_eq!(sqlstate(&error), "25001", "{error:?}");
    granted.batch_execute("ROLLBACK").unwrap();
    let error = granted.query("UPDATE segment_tag SET max_id = max_id + 1", &[]).expect_err("the role has no right on the table");
    assert_eq!(sqlstate(&error), "42501", "{error:?}");
    // Only the whole of a statement: a range seen by an expression around the call could be
    // rolled back afterwards.
    let error = granted
        .query_one("SELECT (SELECT max_id FROM pg_idgen_segment_allocate('small', 0)), current_setting('session_replication_role')", &[])
        .expect_err("not the whole statement");
    assert_eq!(sqlstate(&error), "25001", "{error:?}");
    // The superuser-only settings of the allocation do not outlive it.
    granted.query_one("SELECT max_id FROM pg_idgen_segment_allocate('small', 0)", &[]).unwrap();
    let after: String = granted.query_one("SELECT current_setting('session_replication_role')", &[]).unwrap().get(0);
    assert_eq!(after, "origin", "session_replication_role is back after the allocation");
    let setting = format!("pg_idgen.segment_authority = '{}'", conninfo_as(&authority, "idgen"));
    let settings = [setting.as_str(), "pg_idgen.segment_wait_timeout = '2s'", "pg_idgen.remote_timeout = '1s'"];
    let servers: Vec<Cluster> = (0..2).map(|i| started_cluster(&format!("authority-server{i}"), &settings)).collect();
    for server in &servers {
        server.connect().batch_execute("CREATE TABLE got (n bigint NOT NULL DEFAULT segment_next('orders'), client int)").unwrap();
    }
    let mut db = servers[0].connect();
    let error = db.query_one("SELECT segment_create('local')", &[]).expect_err("tags live at the authority");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    let error = db.query_one("SELECT segment_next('nope')", &[]).expect_err("the authority has no such tag");
    assert_eq!(sqlstate(&error), "42704", "{error:?}");
    assert!(error.as_db_error().unwrap().detail().unwrap_or_default().contains("pg_idgen.segment_authority"), "{error:?}");
    assert!(!format!("{error:?}").contains(&authority.socket_dir()), "the error shows the authority's address: {error:?}");
    db.query_one("SELECT segment_next('small')", &[]).unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = servers.iter().flat_map(|s| [segment_writer(s, stop.clone()), segment_writer(s, stop.clone())]).collect();
    thread::sleep(Duration::from_secs(2));
    authority.stop();
    thread::sleep(Duration::from_secs(3));

    // The small tag's cache runs out meanwhile: a clear error that names the authority.
    let error = loop {
        match db.query_one("SELECT segment_next('small')", &[]) {
            Ok(_) => continue,
            Err(error) => break error,
        }
    };
    assert_eq!(sqlstate(&error), "08006", "{error:?}");
    assert!(error.as_db_error().unwrap().message().contains("segment authority (pg_idgen.segment_authority)"), "{error:?}");
    assert!(!format!("{error:?}").contains(&authority.socket_dir()), "the error shows the authority's address: {error:?}");
    let row = db.query_one("SELECT reachable, last_error FROM segment_authority_status()", &[]).unwrap();
    assert!(!row.get::<_, bool>(0), "the status says the authority is unreachable");
    // Why two texts: the last error is libpq's, of a connection refused ("connection to server …
    // failed") or of one the stopping authority ended ("server closed the connection"), whichever
    // the worker met last (seen on 16).
    let last_error: String = row.get(1);
    assert!(last_error.contains("connection to server") || last_error.contains("server closed the connection"), "{last_error:?}");

    authority.start();
    let back = Instant::now();
    while db.query_one("SELECT segment_next('small')", &[]).is_err() {
        assert!(back.elapsed() < scaled(Duration::from_secs(15)), "no number {:?} after the authority came back", back.elapsed());
        thread::sleep(Duration::from_millis(100));
    }

    // Frozen (SIGSTOP) instead of stopped: nothing answers, so every call to it must end at its
    // deadline (pg_idgen.remote_timeout, 1 s here) while the worker holds no transaction and no
    // lock here; the tag whose cache runs out fails in time, and all recover after the thaw.
    let freeze = freeze(&authority);
    let error = loop {
        match db.query_one("SELECT segment_next('small')", &[]) {
            Ok(_) => continue,
            Err(error) => break error,
        }
    };
    assert_eq!(sqlstate(&error), "08006", "{error:?}");
    let row = db.query_one("SELECT reachable, last_error FROM segment_authority_status()", &[]).unwrap();
    assert!(!row.get::<_, bool>(0) && row.get::<_, String>(1).contains("timed out"), "{:?}", row.get::<_, String>(1));
    let row = db
        .query_one(
            "SELECT a.backend_xid IS NULL AND a.backend_xmin IS NULL,
                    (SELECT count(*) FROM pg_locks l WHERE l.pid = a.pid AND l.locktype <> 'virtualxid')
               FROM pg_stat_activity a WHERE a.backend_type = 'pg_idgen worker'",
            &[],
        )
        .unwrap();
    assert!(row.get::<_, bool>(0), "the worker is in no transaction while it waits on the authority");
    assert_eq!(row.get::<_, i64>(1), 0, "the worker holds no lock while it waits on the authority");
    drop(freeze);
    let thawed = Instant::now();
    while db.query_one("SELECT segment_next('small')", &[]).is_err() {
        assert!(thawed.elapsed() < scaled(Duration::from_secs(15)), "no number {:?} after the authority was thawed", thawed.elapsed());
        thread::sleep(Duration::from_millis(100));
    }
    thread::sleep(Duration::from_secs(2));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let errors: Vec<String> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    assert!(errors.is_empty(), "{} statements failed while the cached ranges lasted: {:?}", errors.len(), &errors[..errors.len().min(3)]);

    let mut numbers = HashSet::new();
    let mut total = 0;
    for server in &servers {
        for row in server.connect().query("SELECT n FROM got", &[]).unwrap() {
            numbers.insert(row.get::<_, i64>(0));
            total += 1;
        }
    }
    assert!(total > 20_000, "the load ran ({total} rows)");
    assert_eq!(numbers.len(), total, "no number twice over both servers");
    let reachable: bool = db.query_one("SELECT reachable FROM segment_authority_status()", &[]).unwrap().get(0);
    assert!(reachable);
}

/// One client taking snowflake ids in batches of 100 until stopped: each batch with when it was
/// sent and when it came back. A batch refused for want of a lease (55000: the server waits for
/// one) is left out and the client goes on; any other error fails the test.
fn snowflake_client(cluster: &Cluster, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> thread::JoinHandle<Vec<(Instant, Instant, Vec<i64>)>> {
    let mut db = cluster.connect();
    thread::spawn(move || {
        let mut batches = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let sent = Instant::now();
            match db.query("SELECT snowflake_next() FROM generate_series(1, 100)", &[]) {
                Ok(rows) => batches.push((sent, Instant::now(), rows.iter().map(|r| r.get(0)).collect())),
                Err(error) => assert_eq!(sqlstate(&error), "55000", "a batch failed other than for want of a lease: {error:?}"),
            }
        }
        batches
    })
}

/// Claim: the registry's rows are deleted while server A holds a node id and two clients make ids
/// on it. A server B started then gets a node id only once a lease, margin and lead have passed
/// since the registry found itself reset; A, whose renewal finds no row, stops and leases again
/// after that wait too. No node id is used by both servers at the same time (one made its last id with it
/// before the other asked for its first), and over both servers' ids there is no duplicate. TRUNCATE, and the extension dropped and
/// created again, count as a reset too: a server that holds nothing gets no node id until the end of
/// a wait that does not move on with each call. (0.6.0
/// gave B A's node id at once, with floor 0, while A still made ids with it.)
#[test]
fn a_registry_that_loses_its_rows_hands_out_no_node_id_still_in_use() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let registry = registry("reset-registry");
    let a = leasing("reset-a", &registry, "1s", &[]);
    leased_node_id(&a);
    let stop_a = Arc::new(AtomicBool::new(false));
    let clients_a: Vec<_> = (0..2).map(|_| snowflake_client(&a, stop_a.clone())).collect();
    thread::sleep(Duration::from_secs(1));
    registry.connect().batch_execute("DELETE FROM node_lease").unwrap();

    let b = leasing("reset-b", &registry, "1s", &[]);
    leased_node_id(&b);
    let stop_b = Arc::new(AtomicBool::new(false));
    let clients_b: Vec<_> = (0..2).map(|_| snowflake_client(&b, stop_b.clone())).collect();
    thread::sleep(Duration::from_secs(2));
    stop_a.store(true, Ordering::Relaxed);
    stop_b.store(true, Ordering::Relaxed);
    let batches_a: Vec<_> = clients_a.into_iter().flat_map(|c| c.join().unwrap()).collect();
    let batches_b: Vec<_> = clients_b.into_iter().flat_map(|c| c.join().unwrap()).collect();

    // For every node id both servers used (the default layout: 10 node bits above 12 sequence
    // bits), one of them made its last id with it before the other asked for its first.
    let node = |id: i64| (id >> 12) & 1023;
    let span = |batches: &[(Instant, Instant, Vec<i64>)], n: i64| {
        let with_n: Vec<_> = batches.iter().filter(|(_, _, ids)| ids.iter().any(|&id| node(id) == n)).collect();
        (!with_n.is_empty()).then(|| (with_n.iter().map(|b| b.0).min().unwrap(), with_n.iter().map(|b| b.1).max().unwrap()))
    };
    assert!(!batches_a.is_empty() && !batches_b.is_empty(), "both servers made ids");
    for n in 0..1024 {
        if let (Some((a_first, a_last)), Some((b_first, b_last))) = (span(&batches_a, n), span(&batches_b, n)) {
            assert!(a_last < b_first || b_last < a_first, "both servers made ids with node id {n} at the same time");
        }
    }
    let mut db = b.connect();
    db.batch_execute("CREATE TABLE ids (id bigint NOT NULL)").unwrap();
    let ids: Vec<i64> = batches_a.iter().chain(&batches_b).flat_map(|(_, _, ids)| ids.iter().copied()).collect();
    db.execute("INSERT INTO ids SELECT unnest($1::bigint[])", &[&ids]).unwrap();
    let row = db.query_one("SELECT count(*), count(DISTINCT id) FROM ids", &[]).unwrap();
    assert_eq!(row.get::<_, i64>(0), row.get::<_, i64>(1), "no duplicate over both servers");

    // TRUNCATE, and DROP and CREATE EXTENSION: a server holding nothing gets no node id for a
    // while, only the time to ask again; that time does not move on at the next call (the reset is
    // recorded although no id was given). Why the servers stop first: a holder whose renewal finds
    // its row gone records a reset of its own, which moves the wait on.
    a.stop();
    b.stop();
    let mut r = registry.connect();
    let take = "SELECT node_id, floor_us FROM pg_idgen_node_lease_take('probe', 'probe', 'twitter', NULL, 1023, 3000, 1000, 0, false)";
    for reset in ["TRUNCATE node_lease", "DROP EXTENSION pg_idgen; CREATE EXTENSION pg_idgen"] {
        r.batch_execute(reset).unwrap();
        let first = r.query_one(take, &[]).unwrap();
        assert_eq!(first.get::<_, Option<i32>>(0), None, "{reset}: no node id during the wait");
        thread::sleep(Duration::from_millis(500));
        let again = r.query_one(take, &[]).unwrap();
        assert_eq!((again.get::<_, Option<i32>>(0), again.get::<_, i64>(1)), (None, first.get::<_, i64>(1)), "{reset}: the same wait");
    }
}

/// How far ahead of the registry's clock leased ids may run, on the registry and its servers
/// (`pg_idgen.node_lease_max_lead`): enough for the leads the set-back tests make.
const LEAD_20S: &str = "pg_idgen.node_lease_max_lead = '20s'";

/// The node id a server holds a lease of, once it holds `wanted` (within `seconds`).
fn lease_of(cluster: &Cluster, wanted: i32, seconds: u64) {
    let mut db = cluster.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(seconds));
    loop {
        let row = db.query_one("SELECT state, node_id, last_error FROM node_lease_status()", &[]).unwrap();
        if row.get::<_, String>(0) == "held" && row.get::<_, Option<i32>>(1) == Some(wanted) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no lease of node id {wanted} within {seconds} s: {:?} {:?} {:?}",
            row.get::<_, String>(0),
            row.get::<_, Option<i32>>(1),
            row.get::<_, Option<String>>(2)
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// `n` snowflake ids of a server, in the order it made them.
fn snowflake_ids(cluster: &Cluster, n: i32) -> Vec<i64> {
    cluster.connect().query("SELECT snowflake_next() FROM generate_series(1, $1)", &[&n]).unwrap().iter().map(|r| r.get(0)).collect()
}

/// Asserts that every id of `later` is above every id of `earlier`, and that the two sets share
/// no id (counted over real rows of a table on `cluster`).
fn assert_all_above(cluster: &Cluster, earlier: &[i64], later: &[i64], what: &str) {
    let (max_earlier, min_later) = (*earlier.iter().max().unwrap(), *later.iter().min().unwrap());
    let mut db = cluster.connect();
    db.batch_execute("CREATE TABLE IF NOT EXISTS both_ids (id bigint NOT NULL)").unwrap();
    db.execute("INSERT INTO both_ids SELECT unnest($1::bigint[])", &[&earlier]).unwrap();
    db.execute("INSERT INTO both_ids SELECT unnest($1::bigint[])", &[&later]).unwrap();
    let row = db.query_one("SELECT count(*), count(DISTINCT id) FROM both_ids", &[]).unwrap();
    assert_eq!(row.get::<_, i64>(0), row.get::<_, i64>(1), "{what}: an id made twice");
    assert!(min_later > max_earlier, "{what}: the later ids start at {min_later}, below the earlier ids' largest, {max_earlier}");
}

/// Asserts that the registry recorded a reset at `before` (its registry-clock time, as text) or
/// later (`node_registry_state.reset_at`), and that `ask_again_us`, the time a server without a
/// lease was told to ask again, is at least the registry's wait of `wait_s` after it.
fn assert_reset_since(r: &mut Client, before: &str, ask_again_us: i64, wait_s: i64, what: &str) {
    let row = r
        .query_one("SELECT reset_at >= $1::text::timestamptz, (extract(epoch FROM reset_at) * 1e6)::bigint FROM node_registry_state", &[&before])
        .unwrap();
    assert!(row.get::<_, bool>(0), "{what}: the registry recorded no reset since {before}");
    let reset_at_us: i64 = row.get(1);
    assert!(
        ask_again_us >= reset_at_us + wait_s * 1_000_000,
        "{what}: the wait ends at {ask_again_us}, before the reset ({reset_at_us}) plus {wait_s} s"
    );
}

/// The registry of server A, which holds node id 5, is saved (`save`); A advances its ids 15 s
/// past its clock, makes 300,000 ids and stops; the registry's rows are put back from what was
/// saved (`put_back`) while it runs. Asserts what the registry then promises: it records a reset
/// (`node_registry_state.reset_at` from then on), gives a server that holds no lease no node id for
/// its lease, margin and lead (3 s + 6 s + 20 s here) but the time to ask again, after A's last
/// id; and server B, configured with node id 5, then makes 300,000 ids, every one above every id
/// of A's, none of them one of A's. Returns the registry and B, running.
fn put_back_registry<S>(name: &str, save: impl FnOnce(&Cluster) -> S, put_back: impl FnOnce(&Cluster, S)) -> (Cluster, Cluster) {
    let registry = registry_with(&format!("{name}-registry"), &[LEAD_20S]);
    let a = leasing(&format!("{name}-a"), &registry, "1s", &["pg_idgen.node_id = 5", LEAD_20S]);
    lease_of(&a, 5, 40);
    let saved = save(&registry);
    a.connect().batch_execute("SELECT snowflake_advance_past(snowflake_min(clock_timestamp() + interval '15 s'))").unwrap();
    let ids_a = snowflake_ids(&a, 300_000);
    let largest_a_us: i64 = a
        .connect()
        .query_one("SELECT (extract(epoch FROM (id_decode($1::bigint)).ts) * 1e6)::bigint", &[ids_a.iter().max().unwrap()])
        .unwrap()
        .get(0);
    a.stop();
    let before: String = registry.connect().query_one("SELECT clock_timestamp()::text", &[]).unwrap().get(0);
    put_back(&registry, saved);

    let mut r = registry.connect();
    // Why any answer but the wait fails: past the wait the probe's layout, which is not A's, is refused.
    let ask_again_us = match probe_take(&mut r, "probe", 3) {
        Ok((None, ask_again_us)) => ask_again_us,
        other => panic!("{name}: a server without a lease is not told to wait right after the rows went back: {other:?}"),
    };
    assert_reset_since(&mut r, &before, ask_again_us, 29, name);
    assert!(ask_again_us > largest_a_us, "{name}: the wait ends at {ask_again_us}, below A's largest id, of {largest_a_us}");

    let b = leasing(&format!("{name}-b"), &registry, "1s", &["pg_idgen.node_id = 5", LEAD_20S]);
    lease_of(&b, 5, 60);
    let floor_us: i64 = r.query_one("SELECT floor_us FROM node_lease WHERE node_id = 5", &[]).unwrap().get(0);
    assert!(floor_us >= ask_again_us, "{name}: B's floor {floor_us} is below the end of the wait, {ask_again_us}");
    let ids_b = snowflake_ids(&b, 300_000);
    assert_all_above(&b, &ids_a, &ids_b, &format!("node id 5 after the registry's rows were put back ({name})"));
    (registry, b)
}

/// Claim: a node registry whose row is set back by hand while it runs (its columns put back as
/// they were before the holder moved on, in place: the table's file and its number of rows stay,
/// only the sum of renewal times goes down) never hands a node id out with a floor below an id
/// its earlier holder made, even when that holder's ids ran ahead of the clock: it counts a reset,
/// and gives no node id until its wait is over (`put_back_registry`). (0.8.0 gave B the saved
/// row's floor, below A's ids.)
#[test]
fn a_registry_set_back_hands_out_no_floor_below_ids_its_old_holder_made() {
    let (registry, b) = put_back_registry(
        "setback",
        |registry| registry.connect().batch_execute("CREATE TABLE saved AS SELECT * FROM node_lease").unwrap(),
        |registry, ()| {
            registry
                .connect()
                .batch_execute(
                    "UPDATE node_lease AS l SET (expires_at, reusable_at, ids_before_us, floor_us, renewed_at) =
                            (s.expires_at, s.reusable_at, s.ids_before_us, s.floor_us, s.renewed_at)
                       FROM saved s WHERE s.node_id = l.node_id",
                )
                .unwrap()
        },
    );
    let mut r = registry.connect();

    // The bound the wait relies on: no lease for ids further ahead of the registry's clock than
    // the lease and the lead (20 s here), and no advance that far on a leasing server.
    let ahead_us = |seconds: i64| format!("(extract(epoch FROM clock_timestamp()) * 1e6)::bigint + {}", seconds * 1_000_000);
    let take = format!(
        "SELECT t.node_id FROM (SELECT layout FROM node_lease LIMIT 1) AS l, pg_idgen_node_lease_take('probe', 'probe', l.layout, NULL, 1023, 3000, 0, {}, false) AS t",
        ahead_us(30)
    );
    let error = r.query_one(&take, &[]).expect_err("ids 30 s ahead");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    assert!(error.as_db_error().unwrap().message().contains("pg_idgen.node_lease_max_lead"), "{error:?}");
    let holder: String = r.query_one("SELECT holder FROM node_lease WHERE node_id = 5", &[]).unwrap().get(0);
    let renew = |seconds: i64| format!("SELECT pg_idgen_node_lease_renew('{holder}', 5, 3000, 1000, {}, 0)", ahead_us(seconds));
    assert!(!r.query_one(&renew(30), &[]).unwrap().get::<_, bool>(0), "a renewal for ids 30 s ahead is refused");
    assert!(r.query_one(&renew(10), &[]).unwrap().get::<_, bool>(0), "a renewal for ids 10 s ahead is not");
    let error =
        b.connect().batch_execute("SELECT snowflake_advance_past(snowflake_min(clock_timestamp() + interval '25 s'))").expect_err("25 s ahead");
    assert_eq!(sqlstate(&error), "22023", "{error:?}");
}

/// Claim: the same holds for a registry restored with `pg_restore --clean` from an older dump of
/// its database while it runs (`pg_dump -Fc` while A held node id 5, before A's ids moved on): the
/// extension is dropped and created again and the old rows come back; the registry counts a
/// reset, gives no node id until its wait is over, and B's ids are all above A's
/// (`put_back_registry`).
#[test]
fn a_registry_restored_from_an_older_dump_hands_out_no_floor_below_ids_made() {
    put_back_registry(
        "restore",
        |registry| registry.dump_with("postgres", &["-Fc"]),
        |registry, dump| registry.pg_restore(&dump, "postgres", &["--clean", "--if-exists"]),
    );
}

/// Claim: the same holds when the registry fails over to a standby that lagged: server A takes
/// node id 5 while the standby follows, the standby stops (it lags from here), A advances its ids
/// 15 s past its clock and makes 300,000 ids, A and the registry stop, the standby is promoted
/// with the older rows, and server B, configured with node id 5 and leasing from the promoted
/// standby, makes ids above every id of A's. (0.8.0 gave B the lagging row's floor.)
#[test]
fn a_registry_failed_over_to_a_lagging_standby_hands_out_no_floor_below_ids_made() {
    let registry = registry_with("lag-registry", &[LEAD_20S]);
    let a = leasing("lag-a", &registry, "1s", &["pg_idgen.node_id = 5", LEAD_20S]);
    lease_of(&a, 5, 40);
    let standby = Cluster::standby_of("lag-standby", &registry);
    standby.configure(&["shared_preload_libraries = 'pg_idgen'", TTL, REGISTRY_MARGIN, LEAD_20S]);
    standby.start();
    let mut s = standby.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(20));
    while s.query_one("SELECT count(*) FROM node_lease WHERE node_id = 5", &[]).unwrap().get::<_, i64>(0) == 0 {
        assert!(Instant::now() < deadline, "the standby did not replay the lease");
        thread::sleep(Duration::from_millis(100));
    }
    drop(s);
    standby.stop();
    a.connect().batch_execute("SELECT snowflake_advance_past(snowflake_min(clock_timestamp() + interval '15 s'))").unwrap();
    let ids_a = snowflake_ids(&a, 300_000);
    a.stop();
    registry.stop();
    standby.start();
    standby.promote();

    let b = leasing("lag-b", &standby, "1s", &["pg_idgen.node_id = 5", LEAD_20S]);
    lease_of(&b, 5, 60);
    let ids_b = snowflake_ids(&b, 300_000);
    assert_all_above(&b, &ids_a, &ids_b, "node id 5 after a failover to a lagging standby");
}

/// The layout of the node id change test: 1 s ticks of 256 ids, and 2 node ids, so that ids run
/// ahead of the clock after a few thousand calls and a server's next node id can be the lower one.
const TWO_NODE_IDS: [&str; 7] = [
    "pg_idgen.time_unit = '1s'",
    "pg_idgen.time_bits = 40",
    "pg_idgen.node_bits = 1",
    "pg_idgen.sequence_bits = 8",
    "pg_idgen.max_clock_borrow = '10s'",
    "pg_idgen.clock_reserve = '20s'",
    "pg_idgen.node_lease_max_lead = '40s'",
];

/// Claim: a server's snowflake ids keep growing when its leased node id changes to a lower one
/// while its ids run ahead of the clock. Server T holds node id 0 and stops; server A holds node
/// id 1 and makes 2,300 ids, borrowing 9 s of 1 s ticks; A's lease worker is frozen past its lease
/// and margin; server B, configured with node id 1, takes it; thawed, A's worker finds its lease
/// gone and takes node id 0; A's next ids are all above its earlier ones. (0.8.0 made the next id
/// in the same tick as the last, with the lower node id: a smaller id.)
#[test]
fn a_servers_ids_keep_growing_when_its_node_id_changes() {
    let registry = registry_with("move-registry", &[TWO_NODE_IDS[6]]);
    let t = leasing("move-t", &registry, "1s", &TWO_NODE_IDS);
    lease_of(&t, 0, 80);
    let a = leasing("move-a", &registry, "1s", &TWO_NODE_IDS);
    lease_of(&a, 1, 40);
    t.stop();
    let before = snowflake_ids(&a, 2_300);
    let mut db = a.connect();
    let worker: i32 = db.query_one("SELECT worker_pid FROM node_lease_status()", &[]).unwrap().get(0);
    let frozen = Stopped::processes(vec![worker.to_string()]);
    let mut settings = TWO_NODE_IDS.to_vec();
    settings.push("pg_idgen.node_id = 1");
    let b = leasing("move-b", &registry, "1s", &settings);
    lease_of(&b, 1, 40);
    drop(frozen);
    lease_of(&a, 0, 20);
    let after = snowflake_ids(&a, 8);
    assert!(after.iter().all(|&id| node_of(&mut db, id) == 0), "A's new ids carry node id 0: {after:?}");
    assert_all_above(&a, &before, &after, "A's ids after its node id changed from 1 to 0");
}

/// A take at the registry as a lease worker calls it, by `holder`, for ids `ahead_s` seconds past
/// the registry's clock: the node id (none during the registry's wait) and the floor (or the time
/// to ask again).
fn probe_take(db: &mut Client, holder: &str, ahead_s: i64) -> Result<(Option<i32>, i64), postgres::Error> {
    let row = db.query_one(
        "SELECT node_id, floor_us FROM pg_idgen_node_lease_take($1, 'probe', 'probe layout', NULL, 1023, 3000, 1000,
                (extract(epoch FROM clock_timestamp()) * 1e6)::bigint + $2::bigint * 1000000, false)",
        &[&holder, &ahead_s],
    )?;
    Ok((row.get(0), row.get(1)))
}

/// The node id `holder` takes once the registry's wait is over (within `seconds`).
fn take_after_the_wait(db: &mut Client, holder: &str, seconds: u64) -> i32 {
    let deadline = Instant::now() + scaled(Duration::from_secs(seconds));
    loop {
        if let (Some(node_id), _) = probe_take(db, holder, 3).unwrap() {
            return node_id;
        }
        assert!(Instant::now() < deadline, "{holder}: no node id within {seconds} s");
        thread::sleep(Duration::from_millis(200));
    }
}

/// Claim: a registry counts as reset, and then gives no node id to a server that holds none for
/// its lease, margin and lead: after a holder's renewal finds its row older than what the registry
/// confirmed to it (the row set back in a way the table's bookkeeping does not show); in a
/// database copied from the registry's (CREATE DATABASE … TEMPLATE); after node_lease changed under
/// it while it runs, each way alone: another file (VACUUM FULL), more rows, fewer rows, a renewal
/// time set back (the sum of renewal times went down); and after a start of its
/// server with the clock 2 minutes behind, when its wait runs from the latest renewal its rows
/// show, not from the slow clock. (0.8.0 handed out node ids at once in the first two cases, and
/// reckoned the third from the slow clock.)
#[test]
fn a_registry_counts_its_start_a_copied_database_and_a_holders_evidence_as_resets() {
    let registry = started_cluster_with_clock_offset("evidence-registry", 0, &[TTL, REGISTRY_MARGIN, LEAD]);
    registry.connect().batch_execute("CREATE DATABASE ids").unwrap();
    let mut r = registry.connect_to("ids");
    r.batch_execute("CREATE EXTENSION pg_idgen").unwrap();

    // A holder's evidence: its row's bound set back below what it was confirmed.
    let node_id = take_after_the_wait(&mut r, "h1", 40);
    let bound: i64 = r.query_one("SELECT ids_before_us FROM node_lease WHERE holder = 'h1'", &[]).unwrap().get(0);
    let renewed: bool =
        r.query_one("SELECT pg_idgen_node_lease_renew('h1', $1, 3000, 1000, $2, $3)", &[&node_id, &bound, &(bound + 1)]).unwrap().get(0);
    assert!(!renewed, "a renewal whose row is below what it was confirmed fails");
    assert_eq!(probe_take(&mut r, "h2", 3).unwrap().0, None, "no node id for another server after the holder's evidence");

    // A database copied from the registry's.
    take_after_the_wait(&mut r, "h3", 40);
    drop(r);
    registry.connect().batch_execute("CREATE DATABASE copied TEMPLATE ids").unwrap();
    assert_eq!(probe_take(&mut registry.connect_to("copied"), "h4", 3).unwrap().0, None, "no node id in a copy of the registry's database");
    let mut r = registry.connect_to("ids");
    assert!(probe_take(&mut r, "h5", 3).unwrap().0.is_some(), "the registry itself goes on");

    // node_lease changed under the running registry, each change alone: the registry records a
    // reset (its wait begins anew) and gives a server that holds none no node id, only the time
    // to ask again, its lease, margin and lead after the reset.
    for (change, sql) in [
        ("another file", "VACUUM FULL node_lease"),
        (
            "more rows",
            // Why renewed at the epoch: the row adds nothing to the sum of renewal times.
            "INSERT INTO node_lease SELECT node_id + 100, 'by hand', holder_name, layout, fixed, expires_at, reusable_at, ids_before_us,
                                           floor_us, acquired_at, 'epoch'
               FROM node_lease WHERE holder = 'h5'",
        ),
        ("fewer rows", "DELETE FROM node_lease WHERE holder = 'by hand'"),
        ("renewal times that went back", "UPDATE node_lease SET renewed_at = renewed_at - interval '1 min' WHERE holder = 'h5'"),
    ] {
        let before: String = r.query_one("SELECT clock_timestamp()::text", &[]).unwrap().get(0);
        r.batch_execute(sql).unwrap();
        let (node_id, ask_again_us) = probe_take(&mut r, "h7", 3).unwrap();
        assert_eq!(node_id, None, "{change}: a node id for a server that holds none");
        assert_reset_since(&mut r, &before, ask_again_us, 16, change);
    }

    // A start with the clock behind: the wait runs from the latest renewal the rows show.
    let latest_us: i64 = r.query_one("SELECT (extract(epoch FROM max(renewed_at)) * 1e6)::bigint FROM node_lease", &[]).unwrap().get(0);
    drop(r);
    registry.stop();
    registry.set_clock_offset(-120);
    registry.start();
    let (node_id, ask_again_us) = probe_take(&mut registry.connect_to("ids"), "h6", 3).unwrap();
    assert_eq!(node_id, None, "no node id right after the start");
    // Its lease, margin and lead: 3 s + 6 s + 7 s.
    assert!(ask_again_us >= latest_us + 16_000_000, "the wait ends at {ask_again_us}, before the latest renewal ({latest_us}) plus 16 s");
}

/// Claim: the registry takes the lease, margin and lead it allows from its own server's
/// configuration, also where pg_idgen is not preloaded there, never from a caller or a session: a
/// lease longer than its pg_idgen.node_lease_ttl is refused (22023), and a session's SET of
/// pg_idgen.node_lease_max_lead changes nothing: ids 30 min ahead are refused (55000), as the
/// configured 7 s say. (0.8.0 had no such limits.)
#[test]
fn a_registry_takes_its_limits_from_its_own_configuration() {
    let registry = Cluster::init("limits-registry");
    registry.configure(&[TTL, REGISTRY_MARGIN, LEAD]);
    registry.start();
    registry.connect().batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    // A session of its own: pg_idgen's library is not loaded in it, so its settings are
    // placeholders that a session may SET.
    let mut r = registry.connect();
    take_after_the_wait(&mut r, "h1", 40);
    let long = r.query_one(
        "SELECT node_id FROM pg_idgen_node_lease_take('long', 'probe', 'probe layout', NULL, 1023, 10000, 1000,
                (extract(epoch FROM clock_timestamp()) * 1e6)::bigint + 3000000, false)",
        &[],
    );
    let error = long.expect_err("a lease longer than the registry's");
    assert_eq!(sqlstate(&error), "22023", "{error:?}");
    assert!(error.as_db_error().unwrap().message().contains("longer than the node registry allows"), "{error:?}");
    r.batch_execute("SET pg_idgen.node_lease_max_lead = '1h'").unwrap();
    let error = probe_take(&mut r, "far", 1800).expect_err("ids 30 min ahead");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    assert!(probe_take(&mut r, "near", 5).unwrap().0.is_some(), "ids 5 s ahead are within the lease and the lead");
}

/// Claim: a database's segment worker that is waiting on a segment authority which does not
/// answer (frozen with SIGSTOP; `pg_idgen.remote_timeout` 10 s, twice what `DROP DATABASE` waits
/// for sessions) does not keep the database from being dropped: the drop tells it to stop, and
/// `DROP DATABASE` succeeds. (0.6.0's worker sat out its call and the drop failed with 55006.)
#[test]
fn a_worker_waiting_on_a_frozen_authority_does_not_hold_up_drop_database() {
    let authority = started_cluster("drop-authority", &[]);
    authority.connect().batch_execute("SELECT segment_create('t', 1, 10)").unwrap();
    let setting = format!("pg_idgen.segment_authority = '{}'", conninfo(&authority));
    let server = started_cluster("drop-server", &[setting.as_str(), "pg_idgen.remote_timeout = '10s'", "pg_idgen.segment_wait_timeout = '1s'"]);
    let mut postgres = server.connect();
    postgres.batch_execute("CREATE DATABASE doomed").unwrap();
    {
        let mut doomed = server.connect_to("doomed");
        doomed.batch_execute("CREATE EXTENSION pg_idgen").unwrap();
        doomed.query_one("SELECT segment_next('t')", &[]).unwrap();
        let _freeze = freeze(&authority);
        // Uses up the cached ranges, so the worker goes to the frozen authority and waits there.
        let error = loop {
            if let Err(error) = doomed.query_one("SELECT segment_next('t')", &[]) {
                break error;
            }
        };
        assert!(["08006", "55P03"].contains(&sqlstate(&error).as_str()), "{error:?}");
        drop(doomed);
        let waiting: i64 = postgres
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker' AND datname = 'doomed'", &[])
            .unwrap()
            .get(0);
        assert_eq!(waiting, 1, "the worker of the database is still in its call to the authority");
        let started = Instant::now();
        postgres.batch_execute("DROP DATABASE doomed").expect("the worker does not hold up the drop");
        assert!(started.elapsed() < scaled(Duration::from_secs(5)), "the drop took {:?}", started.elapsed());
    }
}

/// The hung registry test's lease: long beside its `pg_idgen.remote_timeout` (1 s), so that a call
/// abandoned at the timeout ends well before one held to the lease's end would.
const TTL_12S: &str = "pg_idgen.node_lease_ttl = '12s'";

/// Claim: a registry that hangs (frozen with SIGSTOP) holds no call of a server's lease worker past
/// `pg_idgen.remote_timeout` (1 s here, beside a 12 s lease renewed every 4 s): the worker abandons
/// the renewal and says it timed out (`node_lease_status().last_error`) while the lease still has
/// more than 6 s to run (a renewal sent 4 s into a 12 s lease and held to the lease's end would
/// end 8 s after it was sent), within 1 s of the timeout (on a machine running this suite alone);
/// the server makes no id once its lease could have run out and refuses with 55000; the registry
/// thawed, the server leases again and makes ids above every earlier one.
#[test]
fn a_hung_registry_call_is_abandoned_after_the_remote_timeout() {
    let registry = registry_with("hung-registry", &[TTL_12S]);
    let server = leasing("hung-server", &registry, "2s", &[TTL_12S, "pg_idgen.remote_timeout = '1s'"]);
    leased_node_id(&server);
    let mut db = server.connect();
    let before: i64 = db.query_one("SELECT max(snowflake_next()) FROM generate_series(1, 1000)", &[]).unwrap().get(0);
    let frozen = freeze(&registry);
    let frozen_at = Instant::now();
    let deadline = frozen_at + scaled(Duration::from_secs(20));
    let (lease_end, left) = loop {
        let row = db.query_one("SELECT last_error, state, expires_in_ms FROM node_lease_status()", &[]).unwrap();
        let seen = Instant::now();
        let last_error: Option<String> = row.get(0);
        if last_error.as_deref().is_some_and(|e| e.contains("timed out")) {
            assert_eq!(row.get::<_, String>(1), "held", "the lease ended before the call was abandoned: {last_error:?}");
            // The end as late as the row allows: it was read before `seen`, its milliseconds cut.
            let left = Duration::from_millis(row.get::<_, i64>(2) as u64);
            break (seen + left + Duration::from_millis(1), left);
        }
        assert!(Instant::now() < deadline, "no call timed out {:?} after the registry hung: {last_error:?}", frozen_at.elapsed());
        thread::sleep(Duration::from_millis(20));
    };
    // The call that timed out was sent a third of the lease after the last renewal that was
    // answered, so 8 s before the lease's end; seen with `left` of it to run, it took at most
    // 8 s - `left`.
    let took_at_most = Duration::from_secs(8).saturating_sub(left);
    assert!(left > Duration::ZERO, "the call ended at the lease's end, not at the remote timeout");
    assert!(
        took_at_most < Duration::from_secs(1) + scaled(Duration::from_secs(1)),
        "the abandoned call was seen {took_at_most:?} after it was sent (remote_timeout 1 s)"
    );
    let error = loop {
        // Why the time before the call: its id was made no earlier (see the outage test).
        let sent = Instant::now();
        match db.query_one("SELECT snowflake_next()", &[]) {
            // Why 2 ms more: the lease caps ids at the first tick (1 ms) from the generator clock
            // read just after the renewal was sent, plus the lease: up to a tick past its end.
            Ok(_) => assert!(sent < lease_end + Duration::from_millis(2), "an id was made {:?} after the lease's end", sent - lease_end),
            Err(error) => break error,
        }
        thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(sqlstate(&error), "55000", "{error:?}");

    drop(frozen);
    let deadline = Instant::now() + scaled(Duration::from_secs(40));
    let after: i64 = loop {
        match db.query_one("SELECT snowflake_next()", &[]) {
            Ok(row) => break row.get(0),
            Err(error) => assert!(Instant::now() < deadline, "no id 40 s after the registry was thawed: {error:?}"),
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert!(after > before, "the id after the thaw ({after}) is above the ids before ({before})");
}

/// Claim: a lease worker whose calls hang (the registry frozen with SIGSTOP; each call is abandoned
/// after `pg_idgen.remote_timeout`, 1 s, and made again) stops when told to: sent SIGTERM three
/// times, another lease worker runs within seconds each time, and a fast shutdown of its server
/// ends within seconds. (A worker whose call swallowed the signal would run on, never replaced,
/// and hold the shutdown up for good.)
#[test]
fn a_lease_worker_told_to_stop_during_hung_calls_stops() {
    let registry = registry("stop-registry");
    let server = leasing("stop-server", &registry, "2s", &["pg_idgen.remote_timeout = '1s'"]);
    leased_node_id(&server);
    let mut db = server.connect();
    let lease_worker = |db: &mut Client| -> Option<i32> { db.query_one("SELECT worker_pid FROM node_lease_status()", &[]).unwrap().get(0) };
    let frozen = freeze(&registry);
    // Calls that time out: the worker makes one after another, each up to 1 s and 1 s apart; a
    // new worker makes its first at once.
    let deadline = Instant::now() + scaled(Duration::from_secs(15));
    while db.query_one("SELECT failures_in_a_row FROM node_lease_status()", &[]).unwrap().get::<_, i64>(0) < 1 {
        assert!(Instant::now() < deadline, "the lease worker's calls did not fail with the registry frozen");
        thread::sleep(Duration::from_millis(50));
    }
    for round in 1..=3 {
        let old = lease_worker(&mut db).expect("a lease worker runs");
        // Why kill: pg_terminate_backend() refuses a worker without a database connection.
        let killed = std::process::Command::new("kill").args(["-TERM", &old.to_string()]).status().unwrap();
        assert!(killed.success(), "kill -TERM {old}");
        let deadline = Instant::now() + scaled(Duration::from_secs(10));
        while lease_worker(&mut db).is_none_or(|pid| pid == old) {
            assert!(Instant::now() < deadline, "round {round}: no new lease worker; the server's log:\n{}", server.log());
            thread::sleep(Duration::from_millis(50));
        }
    }
    drop(db);
    let took = server.stop_fast_within(Duration::from_secs(20)).unwrap_or_else(|e| panic!("a fast shutdown: {e}\n{}", server.log()));
    assert!(took < scaled(Duration::from_secs(10)), "the fast shutdown took {took:?}");
    drop(frozen);
}

/// The early renewal test's server: ids of 10 ms ticks, 256 a tick (a block 6 s long is 153,600
/// ids), which may run 6 s ahead of the clock, beside a 6 s lease renewed every 2 s; a call waits
/// for the lease at most `pg_idgen.max_clock_wait`, 1 s.
const EARLY_RENEWAL: [&str; 6] = [
    "pg_idgen.layout = 'sonyflake'",
    "pg_idgen.node_lease_ttl = '6s'",
    "pg_idgen.node_lease_max_lead = '24s'",
    "pg_idgen.max_clock_borrow = '6s'",
    "pg_idgen.clock_reserve = '12s'",
    "pg_idgen.max_clock_wait = '1s'",
];

/// Claim: a block of snowflake ids (`snowflake_next_range`) that reaches past the lease's end
/// while the lease lasts makes the call wait for an early renewal, not fail. With a 6 s lease
/// renewed every 2 s, a block asked for 0.4 s to 0.8 s after a renewal and reaching 6.2 s past it
/// (past the end that renewal gave the lease, 6 s after it was sent) succeeds, although the next
/// regular renewal is more than `pg_idgen.max_clock_wait` (1 s) away: a renewal came after the
/// call began, and the block's last id is past the lease's end as it stood then. Its ids are
/// unique and above every earlier id.
#[test]
fn a_block_past_the_leases_end_waits_for_an_early_renewal() {
    let registry = registry_with("early-registry", &EARLY_RENEWAL[1..3]);
    let mut settings = EARLY_RENEWAL.to_vec();
    settings.push("pg_idgen.node_id = 3");
    let server = leasing("early-server", &registry, "1s", &settings);
    lease_of(&server, 3, 60);
    let mut db = server.connect();
    db.batch_execute(
        "CREATE TABLE made (attempt int NOT NULL, id bigint NOT NULL);
         INSERT INTO made SELECT 0, snowflake_next() FROM generate_series(1, 1000)",
    )
    .unwrap();
    let deadline = Instant::now() + scaled(Duration::from_secs(90));
    let until = |db: &mut Client, condition: &str, what: &str| {
        while !db.query_one(condition, &[]).unwrap().get::<_, bool>(0) {
            assert!(Instant::now() < deadline, "{what} within 90 s");
            thread::sleep(Duration::from_millis(5));
        }
    };
    for attempt in 1.. {
        // Why ids no longer ahead of the clock (an earlier attempt's block is): a renewal then
        // ends the lease 6 s after it was sent, not 6 s after the last id.
        until(&mut db, "SELECT (id_decode(max(id))).ts < clock_timestamp() FROM made", "the ids made are in the past");
        let renewed: String = db.query_one("SELECT renewed_at::text FROM node_lease_status()", &[]).unwrap().get(0);
        let renewal = format!("SELECT renewed_at > '{renewed}' FROM node_lease_status()");
        until(&mut db, &renewal, "a renewal");
        until(&mut db, "SELECT clock_timestamp() >= renewed_at + interval '0.4 s' FROM node_lease_status()", "0.4 s after the renewal");
        let row = db
            .query_one(
                "WITH t AS MATERIALIZED (SELECT clock_timestamp() AS began, renewed_at FROM node_lease_status()),
                      block AS (INSERT INTO made (attempt, id)
                                SELECT $1::int, b.id
                                  FROM t, snowflake_next_range(GREATEST(1, LEAST(150000,
                                          ceil(extract(epoch FROM t.renewed_at + interval '6.2 s' - t.began) * 25600)))::bigint) AS b(id)
                                RETURNING id)
                 SELECT t.began::text, t.began - t.renewed_at BETWEEN interval '0.4 s' AND interval '0.8 s',
                        (SELECT (id_decode(max(id))).ts FROM block) > t.renewed_at + interval '6 s'
                   FROM t",
                &[&attempt],
            )
            .unwrap_or_else(|error| panic!("attempt {attempt}: the block failed: {error:?}"));
        let (began, in_time, past_the_end): (String, bool, bool) = (row.get(0), row.get(1), row.get(2));
        let row = db
            .query_one(
                "SELECT count(*) = count(DISTINCT id),
                        (SELECT min(id) FROM made WHERE attempt = $1) > (SELECT max(id) FROM made WHERE attempt < $1),
                        (SELECT renewed_at > $2::text::timestamptz FROM node_lease_status())
                   FROM made",
                &[&attempt, &began],
            )
            .unwrap();
        assert!(row.get::<_, bool>(0), "attempt {attempt}: an id made twice");
        assert!(row.get::<_, bool>(1), "attempt {attempt}: the block's ids are not all above the earlier ids");
        if in_time {
            assert!(past_the_end, "attempt {attempt}: the block did not reach past the lease's end");
            assert!(row.get::<_, bool>(2), "attempt {attempt}: no renewal after the call began ({began})");
            break;
        }
        assert!(Instant::now() < deadline, "no block was asked for 0.4 s to 0.8 s after a renewal within 90 s ({attempt} attempts)");
    }
}
