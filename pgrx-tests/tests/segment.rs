//! System tests of segment numbers: real clusters, concurrent clients, crashes, restores, a
//! killed worker and a locked tag table.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{generate_concurrently, scaled, sqlstate, started_cluster, Client, Cluster};

/// `n` numbers of `tag` from one statement, in the order they were made.
fn take(db: &mut Client, tag: &str, n: i32) -> Vec<i64> {
    db.query("SELECT segment_next($1) FROM generate_series(1, $2)", &[&tag, &n]).unwrap().iter().map(|r| r.get(0)).collect()
}

/// Runs `statement` in a session of its own; what it ends with comes on the channel: "ok", or the
/// SQLSTATE it failed with. Why a thread: a call that never returns must fail the test, not hang it.
fn start(cluster: &Cluster, statement: &str) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let mut db = cluster.connect();
    let statement = statement.to_string();
    thread::spawn(move || {
        let result = db.batch_execute(&statement);
        // A send fails only when the test no longer waits for the outcome (it has failed already).
        let _ = tx.send(result.map(|_| "ok".to_string()).unwrap_or_else(|e| sqlstate(&e)));
    });
    rx
}

/// The SQLSTATE `statement` fails with in a session of its own, or "ok"; None if it had not
/// returned after `limit`.
fn outcome_within(cluster: &Cluster, statement: &str, limit: Duration) -> Option<String> {
    start(cluster, statement).recv_timeout(limit).ok()
}

fn total_waits(db: &mut Client, tag: &str) -> i64 {
    db.query_one("SELECT coalesce(sum(waits), 0)::bigint FROM segment_status() WHERE tag = $1", &[&tag]).unwrap().get(0)
}

/// Claim: 4 clients × 250,000 numbers of one tag (step 100) are all distinct and each client's
/// strictly increase; once the dynamic step has grown (warm), no call waits for a range.
#[test]
fn concurrent_clients_never_get_a_duplicate_and_never_wait_once_warm() {
    let cluster = started_cluster("segment-concurrent", &[]);
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
    let cluster = started_cluster("segment-rollback", &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('r', step => 10)").unwrap();
    let mut tx = db.transaction().unwrap();
    let rolled_back: i64 = tx.query_one("SELECT max(segment_next('r')) FROM generate_series(1, 1000)", &[]).unwrap().get(0);
    tx.rollback().unwrap();
    let after: i64 = db.query_one("SELECT min(segment_next('r')) FROM generate_series(1, 1000)", &[]).unwrap().get(0);
    assert!(after > rolled_back, "{after} after rolled-back {rolled_back}");
}

/// Claim: `kill -9` of the postmaster while 4 clients take numbers, then a restart: no number
/// handed out before the crash is handed out after it (the unused cached rest is a gap).
#[test]
fn a_crash_under_load_never_repeats_a_number() {
    let cluster = started_cluster("segment-crash", &["pg_idgen.segment_max_step = 10000"]);
    cluster.connect().batch_execute("SELECT segment_create('c', step => 100)").unwrap();
    // Each client counts what it received in `taken`, so that the test waits for the load itself.
    let received = |cluster: &Cluster, stop: Arc<AtomicBool>, taken: Arc<AtomicUsize>| -> Vec<thread::JoinHandle<Vec<i64>>> {
        (0..4)
            .map(|_| {
                let mut db = cluster.connect();
                let (stop, taken) = (stop.clone(), taken.clone());
                thread::spawn(move || {
                    let mut numbers = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        match db.query("SELECT segment_next('c') FROM generate_series(1, 1000)", &[]) {
                            Ok(rows) => {
                                numbers.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
                                taken.fetch_add(rows.len(), Ordering::Relaxed);
                            }
                            Err(_) => break, // the server is gone
                        }
                    }
                    numbers
                })
            })
            .collect()
    };
    let until_taken = |taken: &AtomicUsize, wanted: usize, when: &str| {
        let deadline = Instant::now() + scaled(Duration::from_secs(30));
        while taken.load(Ordering::Relaxed) < wanted {
            assert!(Instant::now() < deadline, "the clients took {} numbers {when}", taken.load(Ordering::Relaxed));
            thread::sleep(Duration::from_millis(20));
        }
    };
    let (stop, taken) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let before = received(&cluster, stop.clone(), taken.clone());
    until_taken(&taken, 20_000, "before the crash");
    cluster.kill9();
    let mut numbers: Vec<i64> = before.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let before_crash = numbers.len();

    cluster.restart_after_crash();
    let (stop, taken) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let after = received(&cluster, stop.clone(), taken.clone());
    until_taken(&taken, 20_000, "after the restart");
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
    let old = started_cluster("segment-dump", &[]);
    let mut db = old.connect();
    db.batch_execute("SELECT segment_create('d', step => 100)").unwrap();
    let issued: i64 = db.query_one("SELECT max(segment_next('d')) FROM generate_series(1, 50000)", &[]).unwrap().get(0);
    let dump = old.dir.join("dump.sql");
    let out = std::process::Command::new(pg_idgen_system_tests::bin("pg_dump"))
        .args(["-h", &old.socket_dir(), "-p", &old.port.to_string(), "-U", "postgres", "-f", dump.to_str().unwrap(), "postgres"])
        .output()
        .unwrap();
    assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));

    let new = Cluster::init("segment-restore");
    new.configure(&["shared_preload_libraries = 'pg_idgen'"]);
    new.start();
    let out = std::process::Command::new(pg_idgen_system_tests::bin("psql"))
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", &new.socket_dir(), "-p", &new.port.to_string(), "-U", "postgres"])
        .args(["-d", "postgres", "-f", dump.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "restore: {}", String::from_utf8_lossy(&out.stderr));
    let next: i64 = new.connect().query_one("SELECT segment_next('d')", &[]).unwrap().get(0);
    assert!(next > issued, "after restore {next} must exceed {issued}");
}

/// Claim: after pg_terminate_backend on the worker — also while it is busy loading ranges for
/// 2 clients (step 100 for numbers taken without pause) — a new worker starts, three times in a
/// row; the clients' numbers, taken throughout, are all distinct; and a fast shutdown while the
/// worker is busy ends within seconds. (A worker that missed the signal would run on and hold
/// the shutdown up for good.)
#[test]
fn a_terminated_worker_comes_back() {
    let cluster = started_cluster("segment-worker", &["pg_idgen.segment_max_step = 100"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('w', step => 100); CREATE TABLE got (n bigint NOT NULL)").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let mut client = cluster.connect();
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                // Calls that find no range while the worker is away wait for it, and may time
                // out: 55P03 (the worker did not load in time) or 55000 (not running); the shutdown ends
                // the session (57P01, or the connection lost). Anything else is returned.
                while !stop.load(Ordering::Relaxed) {
                    match client.batch_execute("INSERT INTO got SELECT segment_next('w') FROM generate_series(1, 1000)") {
                        Ok(()) => {}
                        Err(e) if ["55P03", "55000"].contains(&sqlstate(&e).as_str()) => {}
                        Err(e) if client.is_closed() || sqlstate(&e) == "57P01" => return None,
                        Err(e) => return Some(format!("{e:?}")),
                    }
                }
                None
            })
        })
        .collect();
    let worker_pid = |db: &mut Client| -> Option<i32> {
        db.query_opt("SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker'", &[]).unwrap().map(|r| r.get(0))
    };
    let loaded = |db: &mut Client| -> i64 { db.query_one("SELECT count(*) FROM got", &[]).unwrap().get(0) };
    for round in 1..=3 {
        // Busy: the clients have taken numbers from ranges this worker loaded.
        let before = loaded(&mut db);
        let deadline = Instant::now() + scaled(Duration::from_secs(30));
        let old = loop {
            match worker_pid(&mut db) {
                Some(pid) if loaded(&mut db) >= before + 5_000 => break pid,
                _ if Instant::now() > deadline => panic!("round {round}: the clients took no numbers"),
                _ => thread::sleep(Duration::from_millis(20)),
            }
        };
        let terminated: bool = db.query_one("SELECT pg_terminate_backend($1)", &[&old]).unwrap().get(0);
        assert!(terminated);
        let deadline = Instant::now() + scaled(Duration::from_secs(15));
        loop {
            match worker_pid(&mut db) {
                Some(pid) if pid != old => break,
                // Why the log in the message: the postmaster says there whether the old worker
                // exited and when it started the new one.
                _ if Instant::now() > deadline => panic!("round {round}: no new worker; the server's log:\n{}", cluster.log()),
                _ => thread::sleep(Duration::from_millis(50)),
            }
        }
    }
    let taken_before_the_shutdown = loaded(&mut db);
    assert!(taken_before_the_shutdown >= 15_000);
    // SQL before the shutdown would see the clients' numbers only up to the shutdown: counted after.
    drop(db);
    let took = cluster.stop_fast_within(Duration::from_secs(20)).unwrap_or_else(|e| {
        let ps = std::process::Command::new("ps").args(["-eo", "pid,stat,wchan:30,args"]).output().unwrap();
        let ps = String::from_utf8_lossy(&ps.stdout).lines().filter(|l| l.contains("segment-worker")).collect::<Vec<_>>().join("\n");
        panic!("a fast shutdown while the worker is busy: {e}\nprocesses:\n{ps}\nthe server's log:\n{}", cluster.log())
    });
    assert!(took < scaled(Duration::from_secs(10)), "the fast shutdown took {took:?}");
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        assert_eq!(client.join().unwrap(), None, "a client's call failed");
    }
    cluster.start();
    let mut db = cluster.connect();
    let row = db.query_one("SELECT count(*), count(DISTINCT n) FROM got", &[]).unwrap();
    let (count, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert!(count >= taken_before_the_shutdown);
    assert_eq!(count, distinct, "a number was handed out twice");
}

/// Claim: while a session holds ACCESS EXCLUSIVE on the tag table, calls keep succeeding from the
/// cached ranges, then wait and fail with SQLSTATE 55P03 after pg_idgen.segment_wait_timeout,
/// and succeed again once the lock is released.
#[test]
fn a_locked_tag_table_is_survived_then_reported_then_recovered() {
    let cluster = started_cluster("segment-lock", &["pg_idgen.segment_max_step = 1000", "pg_idgen.segment_wait_timeout = 2000"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('l', step => 1000)").unwrap();
    // Past the prefetch share (10%): the worker loads the next range, so both ranges are cached.
    db.batch_execute("SELECT count(segment_next('l')) FROM generate_series(1, 200)").unwrap();
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    while !db.query_one("SELECT next_loaded FROM segment_status() WHERE tag = 'l'", &[]).unwrap().get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "the next range was not loaded");
        thread::sleep(Duration::from_millis(50));
    }

    let mut locker = cluster.connect();
    locker.batch_execute("BEGIN; LOCK TABLE segment_tag IN ACCESS EXCLUSIVE MODE").unwrap();
    let mut served = 0;
    // Why each call timed alone: the claim is about the call that waited, not the cached calls
    // before it.
    let (error, waited) = loop {
        let started = Instant::now();
        match db.query_one("SELECT segment_next('l')", &[]) {
            Ok(_) => served += 1,
            Err(e) => break (e, started.elapsed()),
        }
        assert!(served < 100_000, "calls never ran out of cached numbers");
    };
    assert!(served >= 1000, "calls were served from the cached ranges while locked ({served})");
    assert_eq!(sqlstate(&error), "55P03", "{error:?}");
    let message = error.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
    assert!(message.contains("could not load a range in time"), "{error:?}");
    assert!(waited >= Duration::from_millis(2000), "the failing call waited the timeout ({waited:?})");

    locker.batch_execute("COMMIT").unwrap();
    let next: i64 = db.query_one("SELECT segment_next('l')", &[]).unwrap().get(0);
    assert!(next > served as i64, "calls succeed again after the lock is released");
}

/// Claim: segment_next() works in every database that has the extension, each with its own tags
/// and numbers: the first call in a database starts a worker of that database, which serves it
/// (2 clients in each of two more databases: every number once, each database numbering from 1)
/// and exits after 2 s without work, so that DROP DATABASE succeeds; a later call that needs a range
/// starts it again. Never more than one worker serves a database. A database created again with
/// the OID of a dropped one numbers from its own start, not from the dropped one's cache.
#[test]
fn every_database_with_the_extension_serves_its_own_segment_numbers() {
    let cluster = started_cluster("segment-otherdb", &[]);
    cluster.connect().batch_execute("CREATE DATABASE other").unwrap();
    cluster.connect().batch_execute("CREATE DATABASE third").unwrap();
    for database in ["other", "third"] {
        cluster
            .connect_to(database)
            .batch_execute("CREATE EXTENSION pg_idgen; SELECT segment_create('x', 1, 100); CREATE TABLE got (n bigint NOT NULL)")
            .unwrap();
    }
    let third_oid: u32 = cluster.connect().query_one("SELECT oid FROM pg_database WHERE datname = 'third'", &[]).unwrap().get(0);
    // Watches the number of workers per database while the clients run.
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let watching = watching.clone();
        let mut db = cluster.connect();
        std::thread::spawn(move || {
            let mut most = 0i64;
            while watching.load(Ordering::Relaxed) {
                let n: i64 = db
                    .query_one("SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker' GROUP BY datname) w", &[])
                    .unwrap()
                    .get(0);
                most = most.max(n);
                std::thread::sleep(Duration::from_millis(5));
            }
            most
        })
    };
    let clients: Vec<_> = ["other", "other", "third", "third"]
        .into_iter()
        .map(|database| {
            let mut db = cluster.connect_to(database);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    db.execute("INSERT INTO got SELECT segment_next('x') FROM generate_series(1, 100)", &[]).unwrap();
                }
            })
        })
        .collect();
    clients.into_iter().for_each(|c| c.join().unwrap());
    watching.store(false, Ordering::Relaxed);
    assert_eq!(watcher.join().unwrap(), 1, "never two workers for one database");
    let mut postgres = cluster.connect();
    for database in ["other", "third"] {
        let row = cluster.connect_to(database).query_one("SELECT count(*), count(DISTINCT n), min(n) FROM got", &[]).unwrap();
        assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2)), (10_000, 10_000, 1), "{database}");
        let workers: i64 = postgres
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker' AND datname = $1", &[&database])
            .unwrap()
            .get(0);
        assert_eq!(workers, 1, "one worker serves {database}");
    }
    let started = Instant::now();
    loop {
        let workers: i64 = postgres
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker' AND datname IN ('other', 'third')", &[])
            .unwrap()
            .get(0);
        if workers == 0 {
            break;
        }
        assert!(started.elapsed() < scaled(Duration::from_secs(10)), "the workers of idle databases are still there after {:?}", started.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    postgres.batch_execute("DROP DATABASE third").expect("no pg_idgen worker keeps the database from being dropped");
    // A block larger than anything cached needs a new range, so a worker must start again.
    let other_idle: i64 =
        postgres.query_one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker' AND datname = 'other'", &[]).unwrap().get(0);
    assert_eq!(other_idle, 0, "the worker of the idle database exited");
    let first: i64 = cluster.connect_to("other").query_one("SELECT segment_next_range('x', 100000)", &[]).unwrap().get(0);
    assert!(first > 10_000, "a later call is served again: {first}");
    postgres.batch_execute(&format!("CREATE DATABASE third_again OID = {third_oid}")).unwrap();
    let mut again = cluster.connect_to("third_again");
    again.batch_execute("CREATE EXTENSION pg_idgen; SELECT segment_create('x', 1, 100)").unwrap();
    let first: i64 = again.query_one("SELECT segment_next('x')", &[]).unwrap().get(0);
    assert_eq!(first, 1, "the new database's own numbers, not the dropped one's cached ranges");
}

/// Claim: `segment_next('')` and a 64-byte tag, each as a new session's first call, fail at once
/// with 22023 (they do not spin beyond cancel, as an empty tag did when it matched the empty
/// per-session cache).
#[test]
fn an_empty_or_long_tag_as_a_sessions_first_call_is_refused_at_once() {
    let cluster = started_cluster("segment-empty", &[]);
    for tag in ["", &"x".repeat(64)] {
        let outcome = outcome_within(&cluster, &format!("SELECT segment_next('{tag}')"), Duration::from_secs(10));
        assert_eq!(outcome.as_deref(), Some("22023"), "segment_next('{tag}')");
    }
}

/// Claim: with synchronous_commit = off in postgresql.conf, for the database and for the role the
/// worker connects as, a range is on disk before any of its numbers is handed out. Six times: a new
/// tag's first number is taken, the postmaster is killed with SIGKILL at once, the server starts
/// again, and the tag's next number is greater.
#[test]
fn asynchronous_commit_settings_never_repeat_numbers_after_a_crash() {
    // Why wal_writer_delay: the WAL writer would otherwise flush the commit within 200 ms.
    let cluster = started_cluster("segment-async", &["synchronous_commit = off", "wal_writer_delay = 10s"]);
    cluster
        .connect()
        .batch_execute("ALTER DATABASE postgres SET synchronous_commit = off; ALTER ROLE postgres SET synchronous_commit = off")
        .unwrap();
    for round in 0..6 {
        let tag = format!("async{round}");
        let mut db = cluster.connect();
        // The tag itself is created durably: this test is about the worker's ranges.
        db.execute("SET synchronous_commit = on", &[]).unwrap();
        db.execute("SELECT segment_create($1)", &[&tag]).unwrap();
        let first: i64 = db.query_one("SELECT segment_next($1)", &[&tag]).unwrap().get(0);
        cluster.kill9();
        cluster.restart_after_crash();
        let next: i64 = cluster.connect().query_one("SELECT segment_next($1)", &[&tag]).unwrap().get(0);
        assert!(next > first, "round {round}: {next} after a crash, {first} before");
    }
}

/// Claim: however a tag's row goes — DELETE, TRUNCATE, DROP and CREATE EXTENSION, segment_drop —
/// a session that had its numbers cached gets 42704 next, and once the tag is created again (each
/// time at a start of its own) it gets the new row's numbers, never numbers cached for the old row.
/// (A range the worker had in flight for the old row may become a gap in the new one.)
#[test]
fn the_cache_never_outlives_its_row() {
    let cluster = started_cluster("segment-follows", &["pg_idgen.max_tags = 2"]);
    let mut taker = cluster.connect();
    let mut admin = cluster.connect();
    let removals = [
        "DELETE FROM segment_tag WHERE tag = 'f'",
        "TRUNCATE segment_tag",
        "DROP EXTENSION pg_idgen; CREATE EXTENSION pg_idgen",
        "SELECT segment_drop('f')",
    ];
    admin.batch_execute("SELECT segment_create('f', step => 100)").unwrap();
    assert_eq!(take(&mut taker, "f", 150), (1..=150).collect::<Vec<i64>>());
    for (i, removal) in removals.iter().enumerate() {
        admin.batch_execute(removal).unwrap();
        let error = taker.query_one("SELECT segment_next('f')", &[]).expect_err("the tag is gone");
        assert_eq!(sqlstate(&error), "42704", "after {removal}: {error:?}");
        let start = (i as i64 + 1) * 1_000_000;
        admin.execute("SELECT segment_create('f', start => $1, step => 100)", &[&start]).unwrap();
        let numbers = take(&mut taker, "f", 150);
        assert!(numbers[0] >= start && numbers[0] < start + 300, "after {removal}: {} is not the new row's", numbers[0]);
        assert!(numbers.windows(2).all(|w| w[1] > w[0]), "after {removal}: increasing");
    }
    // Dropped tags give their slots back: with 2 slots, 6 tags in turn.
    for i in 0..6 {
        let tag = format!("slot{i}");
        admin.execute("SELECT segment_create($1)", &[&tag]).unwrap();
        assert_eq!(take(&mut taker, &tag, 1), vec![1]);
        admin.execute("SELECT segment_drop($1)", &[&tag]).unwrap();
    }
}

/// Claim: max_id of a tag cannot move back (22023: the numbers below it may have been handed
/// out); moved forward, the next number follows at once; and after the extension's schema is
/// renamed, the worker still finds the table and allocates new ranges.
#[test]
fn max_id_moves_only_forward_and_the_worker_follows_the_table() {
    let cluster = started_cluster("segment-max-id", &["pg_idgen.segment_max_step = 10"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('m', step => 10)").unwrap();
    assert_eq!(take(&mut db, "m", 5), vec![1, 2, 3, 4, 5]);
    let error = db.batch_execute("UPDATE segment_tag SET max_id = 0 WHERE tag = 'm'").expect_err("moving back");
    assert_eq!(sqlstate(&error), "22023", "{error:?}");
    db.batch_execute("UPDATE segment_tag SET max_id = 1000000 WHERE tag = 'm'").unwrap();
    // The first range of the moved row, or the second if one in flight for the old cache was dropped.
    let next = take(&mut db, "m", 1)[0];
    assert!((1_000_001..=1_000_020).contains(&next), "the cache follows a max_id moved forward: {next}");

    db.batch_execute("ALTER SCHEMA public RENAME TO app").unwrap();
    let numbers: Vec<i64> = db.query("SELECT app.segment_next('m') FROM generate_series(1, 100)", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert!(numbers[0] > next && numbers.windows(2).all(|w| w[1] > w[0]), "10 new ranges from the renamed schema's table");
}

/// Claim: for a minute, one client renews four tags again and again — by segment_drop and
/// segment_create, by DELETE and segment_create, and by moving max_id forward — each renewal with
/// numbers of its own (so a number tells which tag and which renewal it came from), while three
/// clients take numbers of all four. No number is handed out twice, none is another tag's, and a
/// call started after a renewal committed gets no number of an earlier one.
#[test]
fn churning_tags_never_repeat_or_cross_numbers() {
    const TAGS: i64 = 4;
    const WINDOW: i64 = 1_000_000_000;
    let cluster =
        started_cluster("segment-churn", &["pg_idgen.max_tags = 6", "pg_idgen.segment_max_step = 5", "pg_idgen.segment_wait_timeout = 10000"]);
    let start_of = |tag: i64, renewal: i64| (tag * 100_000 + renewal) * WINDOW + 1;
    let renewal_of = |n: i64| ((n - 1) / WINDOW) % 100_000;
    let tag_of = |n: i64| (n - 1) / WINDOW / 100_000;
    // (tag, when it committed, the earliest renewal a call started later may get numbers of)
    let events: Arc<Mutex<Vec<(i64, Instant, i64)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut admin = cluster.connect();
    for tag in 0..TAGS {
        admin.execute("SELECT segment_create($1, start => $2, step => 5)", &[&format!("c{tag}"), &start_of(tag, 0)]).unwrap();
        events.lock().unwrap().push((tag, Instant::now(), 0));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churner = {
        let (stop, events) = (stop.clone(), events.clone());
        thread::spawn(move || {
            let mut renewal = vec![0i64; TAGS as usize];
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let tag = round % TAGS;
                let name = format!("c{tag}");
                let next = renewal[tag as usize] + 1;
                let start = start_of(tag, next);
                match (round / TAGS) % 3 {
                    2 => {
                        admin.execute("UPDATE segment_tag SET max_id = $2 WHERE tag = $1", &[&name, &(start - 1)]).unwrap();
                    }
                    kind => {
                        let removal = if kind == 0 { "SELECT segment_drop($1)" } else { "DELETE FROM segment_tag WHERE tag = $1" };
                        admin.execute(removal, &[&name]).unwrap();
                        events.lock().unwrap().push((tag, Instant::now(), next));
                        admin.execute("SELECT segment_create($1, start => $2, step => 5)", &[&name, &start]).unwrap();
                    }
                }
                events.lock().unwrap().push((tag, Instant::now(), next));
                renewal[tag as usize] = next;
                round += 1;
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let takers: Vec<_> = (0..3)
        .map(|client| {
            let mut db = cluster.connect();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut calls = Vec::new(); // (tag, started, numbers)
                let mut i = client;
                while !stop.load(Ordering::Relaxed) {
                    let tag = i % TAGS;
                    i += 1;
                    let started = Instant::now();
                    match db.query("SELECT segment_next($1) FROM generate_series(1, 20)", &[&format!("c{tag}")]) {
                        Ok(rows) => calls.push((tag, started, rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<i64>>())),
                        Err(e) if sqlstate(&e) == "42704" => {} // dropped at that moment
                        Err(e) => panic!("client {client}, tag c{tag}: {e:?}"),
                    }
                }
                calls
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(60));
    stop.store(true, Ordering::Relaxed);
    churner.join().unwrap();
    let calls: Vec<(i64, Instant, Vec<i64>)> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let events = events.lock().unwrap();

    let renewals = events.iter().map(|e| e.2).max().unwrap_or(0);
    assert!(renewals > 100, "every tag was renewed many times ({renewals} renewals of the busiest)");
    let mut all: Vec<i64> = Vec::new();
    for (tag, started, numbers) in &calls {
        let floor = events.iter().filter(|e| e.0 == *tag && e.1 < *started).map(|e| e.2).max().unwrap_or(0);
        for &n in numbers {
            assert_eq!(tag_of(n), *tag, "number {n} taken for tag c{tag} belongs to tag c{}", tag_of(n));
            assert!(renewal_of(n) >= floor, "number {n} of renewal {} of c{tag}, but the call began after renewal {floor}", renewal_of(n));
        }
        all.extend(numbers);
    }
    assert!(all.len() > 10_000, "the clients took numbers ({})", all.len());
    let mut db = cluster.connect();
    db.batch_execute("CREATE TABLE churned (n bigint)").unwrap();
    db.execute("INSERT INTO churned SELECT unnest($1::bigint[])", &[&all]).unwrap();
    let row = db.query_one("SELECT count(*), count(DISTINCT n) FROM churned", &[]).unwrap();
    assert_eq!(row.get::<_, i64>(1), row.get::<_, i64>(0), "no number was handed out twice");
}

/// Claim: a tag created near bigint's end hands out every number up to 9223372036854775807 once
/// (its last range clamped; the end found while numbers of the last range are left stops nothing),
/// then fails at once like nextval() (2200H); meanwhile the worker logs no WARNING.
#[test]
fn a_tag_at_bigints_end_is_reported_like_a_sequence() {
    let cluster = started_cluster("segment-end", &["pg_idgen.segment_max_step = 1000"]);
    let mut db = cluster.connect();
    db.execute("SELECT segment_create('end', start => $1, step => 1000)", &[&(i64::MAX - 2500)]).unwrap();
    // Into the last range, then a pause: the worker's prefetch finds the end meanwhile, and the
    // numbers left in the last range must still be served.
    let mut numbers = take(&mut db, "end", 2100);
    thread::sleep(Duration::from_millis(500));
    numbers.extend(take(&mut db, "end", 401));
    assert_eq!(numbers.first(), Some(&(i64::MAX - 2500)));
    assert_eq!(numbers.last(), Some(&i64::MAX));
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "every number once, in order");
    let started = Instant::now();
    let error = db.query_one("SELECT segment_next('end')", &[]).expect_err("past the end");
    assert_eq!(sqlstate(&error), "2200H", "{error:?}");
    assert!(started.elapsed() < scaled(Duration::from_secs(2)), "the error came at once ({:?})", started.elapsed());
    thread::sleep(Duration::from_secs(3));
    let warnings = cluster.log().matches("could not allocate").count();
    assert_eq!(warnings, 0, "the worker logged {warnings} failed allocations:\n{}", cluster.log());
}

/// Claim: a session's first segment_next() while another holds ACCESS EXCLUSIVE on the tag table
/// fails with 55P03 after pg_idgen.segment_wait_timeout (2 s), not when the lock goes.
#[test]
fn a_first_call_on_a_locked_table_honours_the_wait_timeout() {
    let cluster = started_cluster("segment-first-lock", &["pg_idgen.segment_wait_timeout = 2000"]);
    cluster.connect().batch_execute("SELECT segment_create('l')").unwrap();
    let mut locker = cluster.connect();
    locker.batch_execute("BEGIN; LOCK TABLE segment_tag IN ACCESS EXCLUSIVE MODE").unwrap();
    let started = Instant::now();
    let outcome = outcome_within(&cluster, "SELECT segment_next('l')", Duration::from_secs(10));
    let waited = started.elapsed();
    assert_eq!(outcome.as_deref(), Some("55P03"));
    assert!(waited >= Duration::from_millis(2000) && waited < scaled(Duration::from_secs(5)), "waited {waited:?}");
    locker.batch_execute("COMMIT").unwrap();
}

/// Claim: while a session holds one tag's row locked (SELECT … FOR UPDATE) and a call waits for
/// that tag's next range, other tags keep getting new ranges (100 ranges of another tag in under
/// 5 s) and the waiting call goes on waiting; it gets its numbers once the row is free. (The wait
/// timeout is 30 s, so that the call is still waiting when it is looked at.)
#[test]
fn a_locked_row_holds_up_only_its_own_tag() {
    let cluster = started_cluster("segment-row-lock", &["pg_idgen.segment_max_step = 10", "pg_idgen.segment_wait_timeout = 30000"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('busy', step => 10); SELECT segment_create('free', step => 10)").unwrap();
    take(&mut db, "busy", 10);
    let mut locker = cluster.connect();
    locker.batch_execute("BEGIN; SELECT * FROM segment_tag WHERE tag = 'busy' FOR UPDATE").unwrap();
    // A caller waiting on the locked tag keeps asking the worker for it meanwhile.
    let waits_before = total_waits(&mut db, "busy");
    let waiter = start(&cluster, "SELECT count(segment_next('busy')) FROM generate_series(1, 100)");
    let deadline = Instant::now() + scaled(Duration::from_secs(5));
    while total_waits(&mut db, "busy") == waits_before {
        assert!(Instant::now() < deadline, "the call on the locked tag never waited: {:?}", waiter.try_recv());
        thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    assert_eq!(take(&mut db, "free", 1000).len(), 1000);
    let took = started.elapsed();
    assert!(took < scaled(Duration::from_secs(5)), "100 ranges of another tag took {took:?}");
    assert_eq!(waiter.try_recv(), Err(mpsc::TryRecvError::Empty), "the call on the locked tag still waits");
    locker.batch_execute("COMMIT").unwrap();
    let outcome = waiter.recv_timeout(scaled(Duration::from_secs(10))).expect("the waiting call ended once the row was free");
    assert_eq!(outcome, "ok", "the waiting call got its numbers once the row was free");
}

/// Claim: while a tag's row stays locked, the worker retries its allocation after pauses that
/// double from 100 ms up to 5 s, and logs a WARNING for the first failure and then at most one
/// every 10 s: the first warning counts 1 failed attempt, the second comes at least 10 s after it
/// and counts the attempts in between (at least 6: the pauses of 0.1, 0.2, 0.4, 0.8, 1.6 and 3.2 s
/// come first). Once the row is free, the waiting call gets its numbers.
#[test]
fn a_failing_tag_is_warned_about_at_most_every_10_s() {
    let cluster = started_cluster("segment-warn-rate", &["pg_idgen.segment_max_step = 10", "pg_idgen.segment_wait_timeout = 60000"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('busy', step => 10)").unwrap();
    take(&mut db, "busy", 10);
    let mut locker = cluster.connect();
    locker.batch_execute("BEGIN; SELECT * FROM segment_tag WHERE tag = 'busy' FOR UPDATE").unwrap();
    let waiter = start(&cluster, "SELECT count(segment_next('busy')) FROM generate_series(1, 100)");
    // Each warning's time (the log line's prefix, as the server wrote it) and its count of
    // failed attempts.
    let warnings = |db: &mut Client| -> Vec<(f64, u32)> {
        cluster
            .log()
            .lines()
            .filter(|line| line.contains("WARNING:  pg_idgen worker: could not allocate a range for segment tag \"busy\""))
            .map(|line| {
                let logged_at = line.split(" [").next().unwrap();
                let seconds: f64 = db.query_one("SELECT extract(epoch FROM $1::text::timestamptz)::float8", &[&logged_at]).unwrap().get(0);
                let attempts = line.rsplit('(').next().and_then(|tail| tail.split(' ').next()).and_then(|n| n.parse().ok());
                (seconds, attempts.unwrap_or_else(|| panic!("no count of attempts in {line:?}")))
            })
            .collect()
    };
    let deadline = Instant::now() + scaled(Duration::from_secs(40));
    while warnings(&mut db).len() < 2 {
        assert!(Instant::now() < deadline, "fewer than two warnings while the row stayed locked:\n{}", cluster.log());
        thread::sleep(Duration::from_millis(200));
    }
    locker.batch_execute("COMMIT").unwrap();
    let seen = warnings(&mut db);
    assert_eq!(seen[0].1, 1, "the first failure is warned about: {seen:?}");
    assert!(seen[1].0 - seen[0].0 >= 9.99, "the second warning came {} s after the first", seen[1].0 - seen[0].0);
    assert!(seen[1].1 >= 6, "the worker retried between the warnings: {seen:?}");
    let outcome = waiter.recv_timeout(scaled(Duration::from_secs(15))).expect("the waiting call ended once the row was free");
    assert_eq!(outcome, "ok");
}

/// Claim: segment_drop() of a tag in another database leaves the same-named tag of
/// pg_idgen.database alone: its cached numbers go on without a gap.
#[test]
fn dropping_a_tag_in_another_database_leaves_the_segment_database_alone() {
    let cluster = started_cluster("segment-other-drop", &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT segment_create('x')").unwrap();
    db.batch_execute("CREATE DATABASE other").unwrap();
    assert_eq!(take(&mut db, "x", 1), vec![1]);
    let mut other = cluster.connect_to("other");
    other.batch_execute("CREATE EXTENSION pg_idgen; SELECT segment_create('x'); SELECT segment_drop('x')").unwrap();
    assert_eq!(take(&mut db, "x", 1), vec![2], "no gap in the segment database");
}

/// Claim: in a LATIN1 database (pg_idgen.database), tags with non-ASCII letters are created,
/// served and shown by segment_status() as they were written; an error names such a tag with its
/// non-ASCII bytes as \xNN (a message must be valid text in every encoding); base32 text with a
/// non-ASCII letter is bad input (22P02), not a crash; a schema name that is not UTF-8 is refused
/// with a clear error.
#[test]
fn tags_work_in_a_latin1_database() {
    let cluster = started_cluster("segment-latin1", &["pg_idgen.database = 'latin'"]);
    cluster.connect().batch_execute("CREATE DATABASE latin ENCODING 'LATIN1' LOCALE 'C' TEMPLATE template0").unwrap();
    let mut db = cluster.connect_to("latin");
    db.batch_execute("CREATE EXTENSION pg_idgen; SELECT segment_create('café')").unwrap();
    assert_eq!(take(&mut db, "café", 3), vec![1, 2, 3]);
    let shown: String = db.query_one("SELECT tag FROM segment_status()", &[]).unwrap().get(0);
    assert_eq!(shown, "café");
    let error = db.query_one("SELECT segment_next('naïve')", &[]).expect_err("unknown tag");
    assert_eq!(sqlstate(&error), "42704");
    assert!(error.as_db_error().unwrap().message().contains("\"na\\xefve\""), "{error:?}");
    db.batch_execute("SELECT segment_drop('café')").unwrap();
    for function in ["snowflake_from_base32", "uuid_from_base32", "objectid_from_base32"] {
        let error = db.query_one(&format!("SELECT {function}('0000000000é00')"), &[]).expect_err("not a digit");
        assert_eq!(sqlstate(&error), "22P02", "{function}: {error:?}");
    }
    // A schema name that is not UTF-8 cannot be written into pg_idgen's SQL unchanged: refused
    // with a clear error, not run against whatever a mangled name would mean.
    db.batch_execute("ALTER SCHEMA public RENAME TO \"é\"").unwrap();
    let error = db.batch_execute("SELECT \"é\".segment_create('x')").expect_err("a name SQL cannot carry");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    assert!(error.as_db_error().unwrap().message().contains("is not UTF-8 text"), "{error:?}");
}

/// Claim: blocks and single numbers taken at once by concurrent clients never overlap: 2 clients
/// take blocks of 1 to 3,000 numbers (many larger than the cached range) with
/// segment_next_range() while 2 take single numbers, and every number of every block is stored:
/// no number twice. Likewise snowflake_next_range() against snowflake_next().
#[test]
fn blocks_and_single_numbers_of_concurrent_clients_never_overlap() {
    let cluster = started_cluster("blocks", &["pg_idgen.node_id = 3"]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT segment_create('blocks', step => 500);
         CREATE TABLE numbers (client int, n bigint);
         CREATE TABLE ids (client int, id bigint);",
    )
    .unwrap();
    let statements = [
        "INSERT INTO numbers SELECT $1, b.first + k
           FROM (SELECT segment_next_range('blocks', size) AS first, size
                   FROM (SELECT 1 + (random() * 2999)::int AS size FROM generate_series(1, 20)) AS s) AS b,
                LATERAL generate_series(0, b.size - 1) AS k",
        "INSERT INTO numbers SELECT $1, segment_next('blocks') FROM generate_series(1, 20000)",
        // The size refers to g: a function in FROM that does not is called once and its rows reused.
        "INSERT INTO ids SELECT $1, id FROM generate_series(1, 20) AS g, LATERAL snowflake_next_range(1 + (g * 7919 + $1 * 104729) % 10000) AS id",
        "INSERT INTO ids SELECT $1, snowflake_next() FROM generate_series(1, 50000)",
    ];
    thread::scope(|scope| {
        for (client, statement) in statements.iter().chain(statements.iter()).enumerate() {
            let mut db = cluster.connect();
            scope.spawn(move || {
                for _ in 0..5 {
                    db.execute(*statement, &[&(client as i32)]).unwrap();
                }
            });
        }
    });
    for (table, column) in [("numbers", "n"), ("ids", "id")] {
        let row = db.query_one(&format!("SELECT count(*), count(DISTINCT {column}) FROM {table}"), &[]).unwrap();
        let (count, distinct): (i64, i64) = (row.get(0), row.get(1));
        assert!(count > 200_000, "{table}: {count} stored");
        assert_eq!(distinct, count, "{table}: no number twice");
    }
}

/// Claim: a session of a database that is being dropped asks for a tag's numbers while DROP
/// DATABASE waits for the sessions to leave (after the drop's hook retired the database's cache
/// and told its worker to stop), then leaves, and the drop completes. A database created afterwards
/// with the dropped one's OID numbers that tag from its own table (1), not from anything left in
/// shared memory. (0.6.0's worker, still running, loaded a range for that session; the new
/// database was served the rest of it, whose numbers its own table then gave out again.)
#[test]
fn a_range_taken_while_its_database_is_dropped_never_reaches_a_database_with_its_oid() {
    let cluster = started_cluster("segment-drop-race", &["pg_idgen.segment_wait_timeout = '1s'"]);
    let mut postgres = cluster.connect();
    postgres.batch_execute("CREATE DATABASE doomed").unwrap();
    let oid: u32 = postgres.query_one("SELECT oid FROM pg_database WHERE datname = 'doomed'", &[]).unwrap().get(0);
    let mut session = cluster.connect_to("doomed");
    session.batch_execute("CREATE EXTENSION pg_idgen; SELECT segment_create('x', 1, 1000)").unwrap();

    let dropping = thread::spawn({
        let mut db = cluster.connect();
        move || db.batch_execute("DROP DATABASE doomed").map_err(|e| format!("{e:?}"))
    });
    let deadline = Instant::now() + scaled(Duration::from_secs(3));
    while postgres
        .query_one("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = 'DROP DATABASE doomed'", &[])
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(Instant::now() < deadline, "DROP DATABASE never waited for the session");
        thread::sleep(Duration::from_millis(10));
    }
    // Past the drop's hook (it runs first), inside its wait of up to 5 s for other sessions: the
    // call takes a new slot of the dying database; no worker can load it any more (it fails).
    thread::sleep(Duration::from_millis(300));
    let during = session.query("SELECT segment_next('x') FROM generate_series(1, 3)", &[]);
    drop(session);
    dropping.join().unwrap().expect("the drop completes once the session and the idle worker are gone");

    postgres.batch_execute(&format!("CREATE DATABASE reborn OID = {oid}")).unwrap();
    let mut reborn = cluster.connect_to("reborn");
    reborn.batch_execute("CREATE EXTENSION pg_idgen; SELECT segment_create('x', 1, 1000)").unwrap();
    assert_eq!(take(&mut reborn, "x", 3), [1, 2, 3], "the new database's own numbers, not the dropped one's leftover range ({during:?})");
}
