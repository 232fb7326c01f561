//! System tests of segment numbers: real clusters, concurrent clients, crashes, restores, a
//! killed worker and a locked tag table.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{generate_concurrently, sqlstate, started_cluster, Client, Cluster};

fn total_waits(db: &mut Client, tag: &str) -> i64 {
    db.query_one("SELECT coalesce(sum(waits), 0)::bigint FROM segment_status() WHERE tag = $1", &[&tag])
        .unwrap()
        .get(0)
}

/// Claim: 4 clients × 250,000 numbers of one tag (step 100) are all distinct and each client's
/// strictly increase; once the dynamic step has grown (warm), no call waits for a range.
#[test]
fn concurrent_clients_never_get_a_duplicate_and_never_wait_once_warm() {
    let cluster = started_cluster("segment-concurrent", 54370, &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('t', step => 100)").unwrap();
    // Warm-up: the step doubles from 100 up to pg_idgen.segment_max_step (1,000,000).
    db.batch_execute("SELECT count(segment_next('t')) FROM generate_series(1, 3000000)").unwrap();
    let step: i64 = db.query_one("SELECT step FROM segment_status() WHERE tag = 't'", &[]).unwrap().get(0);
    assert_eq!(step, 1_000_000, "the step grew to its bound");
    let waits_when_warm = total_waits(&mut db, "t");

    generate_concurrently(&cluster, "numbers", "segment_next('t')", "bigint", 4, 250_000);

    assert_eq!(total_waits(&mut db, "t"), waits_when_warm, "no call waited once warm");
    let above_warm_up: bool = db.query_one("SELECT min(id) > 3000000 FROM numbers", &[]).unwrap().get(0);
    assert!(above_warm_up, "numbers continue after the warm-up's");
}

/// Claim: numbers taken in a rolled-back transaction are never handed out again.
#[test]
fn rolled_back_numbers_are_never_seen_again() {
    let cluster = started_cluster("segment-rollback", 54371, &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('r', step => 10)").unwrap();
    let mut tx = db.transaction().unwrap();
    let rolled_back: i64 =
        tx.query_one("SELECT max(segment_next('r')) FROM generate_series(1, 1000)", &[]).unwrap().get(0);
    tx.rollback().unwrap();
    let after: i64 = db.query_one("SELECT min(segment_next('r')) FROM generate_series(1, 1000)", &[]).unwrap().get(0);
    assert!(after > rolled_back, "{after} after rolled-back {rolled_back}");
}

/// Claim: `kill -9` of the postmaster while 4 clients take numbers, then a restart: no number
/// handed out before the crash is handed out after it (the unused cached rest is a gap).
#[test]
fn a_crash_under_load_never_repeats_a_number() {
    let cluster = started_cluster("segment-crash", 54372, &["pg_idgen.segment_max_step = 10000"]);
    cluster.connect().batch_execute("SELECT segment_create('c', step => 100)").unwrap();
    let received = |cluster: &Cluster, stop: Arc<AtomicBool>| -> Vec<thread::JoinHandle<Vec<i64>>> {
        (0..4)
            .map(|_| {
                let mut db = cluster.connect();
                let stop = stop.clone();
                thread::spawn(move || {
                    let mut numbers = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        match db.query("SELECT segment_next('c') FROM generate_series(1, 1000)", &[]) {
                            Ok(rows) => numbers.extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                            Err(_) => break, // the server is gone
                        }
                    }
                    numbers
                })
            })
            .collect()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let before = received(&cluster, stop.clone());
    thread::sleep(Duration::from_millis(1500));
    cluster.kill9();
    let mut numbers: Vec<i64> = before.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let before_crash = numbers.len();
    assert!(before_crash > 10_000, "the clients took numbers before the crash ({before_crash})");

    cluster.restart_after_crash();
    let stop = Arc::new(AtomicBool::new(false));
    let after = received(&cluster, stop.clone());
    thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    numbers.extend(after.into_iter().flat_map(|h| h.join().unwrap()));
    assert!(numbers.len() > before_crash + 10_000, "the clients took numbers after the restart");

    let mut db = cluster.connect();
    db.batch_execute("CREATE TABLE received (n bigint)").unwrap();
    db.execute("INSERT INTO received SELECT unnest($1::bigint[])", &[&numbers]).unwrap();
    let row = db.query_one("SELECT count(*), count(DISTINCT n) FROM received", &[]).unwrap();
    assert_eq!(row.get::<_, i64>(0), numbers.len() as i64);
    assert_eq!(row.get::<_, i64>(1), row.get::<_, i64>(0), "no number was handed out twice across the crash");
}

/// Claim: pg_dump carries the tag table; after a restore into a fresh cluster, new numbers are
/// greater than every number the old cluster handed out.
#[test]
fn numbers_after_dump_and_restore_are_greater() {
    let old = started_cluster("segment-dump", 54373, &[]);
    let mut db = old.connect();
    db.batch_execute("SELECT segment_create('d', step => 100)").unwrap();
    let issued: i64 = db.query_one("SELECT max(segment_next('d')) FROM generate_series(1, 50000)", &[]).unwrap().get(0);
    let dump = old.dir.join("dump.sql");
    let out = std::process::Command::new("/usr/lib/postgresql/15/bin/pg_dump")
        .args(["-h", &old.socket_dir(), "-p", &old.port.to_string(), "-U", "postgres", "-f", dump.to_str().unwrap(), "postgres"])
        .output()
        .unwrap();
    assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));

    let new = Cluster::init("segment-restore", 54374);
    new.configure(&["shared_preload_libraries = 'pg_idgen'"]);
    new.start();
    let out = std::process::Command::new("/usr/lib/postgresql/15/bin/psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", &new.socket_dir(), "-p", &new.port.to_string(), "-U", "postgres"])
        .args(["-d", "postgres", "-f", dump.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "restore: {}", String::from_utf8_lossy(&out.stderr));
    let next: i64 = new.connect().query_one("SELECT segment_next('d')", &[]).unwrap().get(0);
    assert!(next > issued, "after restore {next} must exceed {issued}");
}

/// Claim: after pg_terminate_backend on the worker, a new worker starts and calls that need new
/// ranges keep succeeding.
#[test]
fn a_terminated_worker_comes_back() {
    let cluster = started_cluster("segment-worker", 54375, &["pg_idgen.segment_max_step = 100"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('w', step => 100)").unwrap();
    db.batch_execute("SELECT count(segment_next('w')) FROM generate_series(1, 1000)").unwrap();
    let worker_pid = |db: &mut Client| -> Option<i32> {
        db.query_opt("SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker'", &[])
            .unwrap()
            .map(|r| r.get(0))
    };
    let old = worker_pid(&mut db).expect("the worker runs");
    let terminated: bool = db.query_one("SELECT pg_terminate_backend($1)", &[&old]).unwrap().get(0);
    assert!(terminated);
    let deadline = Instant::now() + Duration::from_secs(15);
    let new = loop {
        match worker_pid(&mut db) {
            Some(pid) if pid != old => break pid,
            _ if Instant::now() > deadline => panic!("no new worker within 15 s"),
            _ => thread::sleep(Duration::from_millis(100)),
        }
    };
    assert_ne!(new, old);
    // 10,000 numbers need 100 new ranges of 100: all come from the new worker.
    let row = db
        .query_one("SELECT count(DISTINCT n) FROM (SELECT segment_next('w') AS n FROM generate_series(1, 10000)) AS s", &[])
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 10_000);
}

/// Claim: while a session holds ACCESS EXCLUSIVE on the tag table, calls keep succeeding from the
/// cached ranges, then wait and fail with SQLSTATE 55P03 after pg_idgen.segment_wait_timeout,
/// and succeed again once the lock is released.
#[test]
fn a_locked_tag_table_is_survived_then_reported_then_recovered() {
    let cluster = started_cluster(
        "segment-lock",
        54376,
        &["pg_idgen.segment_max_step = 1000", "pg_idgen.segment_wait_timeout = 2000"],
    );
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('l', step => 1000)").unwrap();
    // Past the prefetch share (10%): the worker loads the next range, so both ranges are cached.
    db.batch_execute("SELECT count(segment_next('l')) FROM generate_series(1, 200)").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !db.query_one("SELECT next_loaded FROM segment_status() WHERE tag = 'l'", &[]).unwrap().get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "the next range was not loaded");
        thread::sleep(Duration::from_millis(50));
    }

    let mut locker = cluster.connect();
    locker.batch_execute("BEGIN; LOCK TABLE segment_tag IN ACCESS EXCLUSIVE MODE").unwrap();
    let mut served = 0;
    let started = Instant::now();
    let error = loop {
        match db.query_one("SELECT segment_next('l')", &[]) {
            Ok(_) => served += 1,
            Err(e) => break e,
        }
        assert!(served < 100_000, "calls never ran out of cached numbers");
    };
    let waited = started.elapsed();
    assert!(served >= 1000, "calls were served from the cached ranges while locked ({served})");
    assert_eq!(sqlstate(&error), "55P03", "{error:?}");
    let message = error.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
    assert!(message.contains("could not load a range in time"), "{error:?}");
    assert!(waited >= Duration::from_millis(2000), "the failing call waited the timeout ({waited:?})");

    locker.batch_execute("COMMIT").unwrap();
    let next: i64 = db.query_one("SELECT segment_next('l')", &[]).unwrap().get(0);
    assert!(next > served as i64, "calls succeed again after the lock is released");
}

/// Claim: segment_next() in another database than pg_idgen.database says which one to use.
#[test]
fn another_database_is_told_which_one_serves_segments() {
    let cluster = started_cluster("segment-otherdb", 54377, &[]);
    cluster.connect().batch_execute("CREATE DATABASE other").unwrap();
    let mut other = cluster.connect_to("other");
    other.batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    let error = other.query_one("SELECT segment_next('x')", &[]).expect_err("wrong database");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    let message = error.as_db_error().unwrap().message().to_string();
    assert!(message.contains("\"postgres\"") && message.contains("\"other\""), "{message}");
}
