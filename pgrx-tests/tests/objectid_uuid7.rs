//! System tests of ObjectIds and UUIDv7s: real clusters, concurrent clients.

use pg_idgen_system_tests::{assert_cross_backend_order, generate_concurrently, started_cluster};

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
    let close: bool = db
        .query_one("SELECT bool_and(abs(extract(epoch FROM (id_decode(id)).ts - made_at)) < 1) FROM uuids", &[])
        .unwrap()
        .get(0);
    assert!(close, "every UUID's time is within 1 s of when it was made");
}

/// Claim: an ObjectId or UUIDv7 taken by one backend after another backend took one is greater.
#[test]
fn order_holds_across_backends() {
    let cluster = started_cluster("objectid-uuid-order", &[]);
    assert_cross_backend_order(&cluster, "objectid_gen()", "objectid", 10_000);
    assert_cross_backend_order(&cluster, "uuid_v7_next()", "uuid", 10_000);
}
