//! System tests of ObjectIds and UUIDv7s: real clusters, concurrent clients.

use std::thread;

use pg_idgen_system_tests::{assert_cross_backend_order, generate_concurrently, started_cluster, Cluster};

/// Claim: 4 clients taking 250,000 ObjectIds each never see a duplicate, and each client's
/// ObjectIds strictly increase; likewise for UUIDv7s. No node id is needed for either.
#[test]
fn concurrent_clients_never_get_a_duplicate_objectid_or_uuid() {
    let cluster = started_cluster("objectid-uuid", &[]);
    generate_concurrently(&cluster, "objectids", "objectid_gen()", "objectid", 4, 250_000);
    generate_concurrently(&cluster, "uuids", "uuid_v7_next()", "uuid", 4, 250_000);

    let mut db = cluster.connect();
    let row = db
        .query_one(
            "SELECT bool_and(abs(extract(epoch FROM (id_decode(id)).ts - made_at)) < 1.5),
                    count(DISTINCT (id_decode(id)).random)
               FROM objectids",
            &[],
        )
        .unwrap();
    assert!(row.get::<_, bool>(0), "every ObjectId's second is the second it was made");
    assert_eq!(row.get::<_, i64>(1), 1, "one random part per server start");
    let close: bool = db.query_one("SELECT bool_and(abs(extract(epoch FROM (id_decode(id)).ts - made_at)) < 1) FROM uuids", &[]).unwrap().get(0);
    assert!(close, "every UUID's time is within 1 s of when it was made");
}

/// Claim: an ObjectId or UUIDv7 taken by one backend after another backend took one is greater.
#[test]
fn order_holds_across_backends() {
    let cluster = started_cluster("objectid-uuid-order", &[]);
    assert_cross_backend_order(&cluster, "objectid_gen()", "objectid", 10_000);
    assert_cross_backend_order(&cluster, "uuid_v7_next()", "uuid", 10_000);
}

/// Claim: a hot standby makes UUIDv7s and ObjectIds while its primary makes them too: over
/// 4 clients on each server, no value is made twice, and each client's values strictly increase;
/// the standby's order also holds across its backends. Promoted, the standby goes on above every
/// value it made as a standby. Its values run ahead of the clock by at most about
/// pg_idgen.clock_reserve (5 s): it continues above the primary's replayed high-water marks.
#[test]
fn a_hot_standby_makes_uuids_and_objectids_that_its_primary_does_not() {
    let primary = started_cluster("standby-ids-primary", &[]);
    let standby = Cluster::standby_of("standby-ids-standby", &primary);
    standby.configure(&["shared_preload_libraries = 'pg_idgen'"]);
    standby.start();
    let mut db = primary.connect();
    db.batch_execute("CREATE TABLE made (server text, client int, n int, u uuid, o objectid, made_at timestamptz)").unwrap();
    const CLIENTS: i32 = 4;
    const PER_CLIENT: i32 = 50_000;
    let take = "SELECT uuid_v7_next()::text, objectid_next()::text, clock_timestamp()::text FROM generate_series(1, $1::int)";
    let store = "INSERT INTO made SELECT $1, $2, o::int, u::uuid, oid::objectid, at::timestamptz
                   FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS x(u, oid, at, o)";
    thread::scope(|scope| {
        for (server, cluster) in [("primary", &primary), ("standby", &standby)] {
            for client in 0..CLIENTS {
                let (mut source, mut sink) = (cluster.connect(), primary.connect());
                scope.spawn(move || {
                    let rows = source.query(take, &[&PER_CLIENT]).unwrap();
                    let column = |i: usize| rows.iter().map(|r| r.get::<_, String>(i)).collect::<Vec<_>>();
                    sink.execute(store, &[&server, &client, &column(0), &column(1), &column(2)]).unwrap();
                });
            }
        }
    });
    let row = db
        .query_one(
            "SELECT count(*), count(DISTINCT u), count(DISTINCT o),
                    count(*) FILTER (WHERE server = 'standby'),
                    (max(extract(epoch FROM (id_decode(u)).ts - made_at)) FILTER (WHERE server = 'standby'))::float8
               FROM made",
            &[],
        )
        .unwrap();
    let total = (2 * CLIENTS * PER_CLIENT) as i64;
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2)), (total, total, total), "no value made twice");
    assert_eq!(row.get::<_, i64>(3), total / 2, "the standby made its share");
    let lead: f64 = row.get(4);
    assert!(lead < 7.0, "standby values lead the clock by {lead} s");
    let not_increasing: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT u, o, lag(u) OVER w AS pu, lag(o) OVER w AS po FROM made
                                    WINDOW w AS (PARTITION BY server, client ORDER BY n)) AS p
              WHERE u <= pu OR o <= po",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(not_increasing, 0, "each client's values strictly increase");
    assert_cross_backend_order(&standby, "uuid_v7_next()", "uuid", 2_000);
    assert_cross_backend_order(&standby, "objectid_next()", "objectid", 2_000);

    let (last_u, last_o): (String, String) = {
        let row = db
            .query_one(
                "SELECT (SELECT u FROM made WHERE server = 'standby' ORDER BY u DESC LIMIT 1)::text,
                    max(o)::text FROM made WHERE server = 'standby'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    standby.promote();
    let after =
        standby.connect().query_one("SELECT uuid_v7_next() > $1::text::uuid, objectid_next() > $2::text::objectid", &[&last_u, &last_o]).unwrap();
    assert!(after.get::<_, bool>(0) && after.get::<_, bool>(1), "promoted, the standby continues above its own values");
}
