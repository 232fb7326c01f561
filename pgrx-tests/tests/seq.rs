//! System tests of per-key sequences (`seq_*`): real clusters, concurrent clients with their own
//! connections, a crash and a clean restart under load, asynchronous commits, a promoted standby,
//! a cache far smaller than the keys, hostile input, the `seq_fill()` trigger and `seq_current()`.
//!
//! What is counted: numbers as rows `(phase, client, seq, key, n)` — who took each, in which order
//! (`seq`) and in which part of the test (`phase`: before or after a crash, …) — stored by the
//! server or received by a client. `assert_numbering` checks them: per key no number twice, each
//! client's numbers of a key strictly increasing in its own order, every number of a key in a
//! phase above every number of that key in the phases before.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{scaled, sqlstate, started_cluster, Client, Cluster};

/// What every cluster here runs with besides `shared_preload_libraries`: node 1, the worker in
/// `postgres`, where the harness creates the extension; then `more`.
fn seq_settings<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut settings = vec!["pg_idgen.node_id = 1", "pg_idgen.database = 'postgres'"];
    settings.extend_from_slice(more);
    settings
}

fn seq_cluster(name: &str, more: &[&str]) -> Cluster {
    started_cluster(name, &seq_settings(more))
}

/// Sets a cluster made or started elsewhere to run as `seq_cluster`'s do, from its next start.
fn configure_seq(cluster: &Cluster, more: &[&str]) {
    let mut lines = vec!["shared_preload_libraries = 'pg_idgen'"];
    lines.extend(seq_settings(more));
    cluster.configure(&lines);
}

fn next(db: &mut Client, space: &str, key: i64) -> i64 {
    db.query_one("SELECT seq_next($1, $2::bigint)", &[&space, &key]).unwrap().get(0)
}

/// A table of numbers as `assert_numbering` reads them.
fn create_numbers_table(db: &mut Client, table: &str) {
    db.batch_execute(&format!("CREATE TABLE {table} (phase int, client int, seq int, key bigint, n bigint)")).unwrap();
}

/// A `Work` statement: inserts `seq_next(space, key)` of each key into the numbers table `table`
/// as rows of `phase` (the key as text `'k' || key`, through `seq_next_text()`, if `text`).
fn insert_next(table: &str, space: &str, phase: i32, text: bool) -> String {
    let next = if text { format!("seq_next_text('{space}', 'k' || k::text)") } else { format!("seq_next('{space}', k)") };
    format!(
        "INSERT INTO {table} (phase, client, seq, key, n)
         SELECT {phase}, $1, $2 + o::int, k, {next} FROM unnest($3::bigint[]) WITH ORDINALITY AS u(k, o)
         RETURNING seq, key, n"
    )
}

/// A `Work` statement that only returns `seq_next(space, key)` of each key to the client.
fn select_next(space: &str) -> String {
    format!(
        "SELECT $1::int AS client, $2 + o::int AS seq, k AS key, seq_next('{space}', k) AS n
           FROM unnest($3::bigint[]) WITH ORDINALITY AS u(k, o)"
    )
}

/// The same for the text key `'k' || key`, through `seq_next_text()`.
fn select_next_text(space: &str) -> String {
    format!(
        "SELECT $1::int AS client, $2 + o::int AS seq, k AS key, seq_next_text('{space}', 'k' || k::text) AS n
           FROM unnest($3::bigint[]) WITH ORDINALITY AS u(k, o)"
    )
}

/// What each client of a `Load` does.
#[derive(Clone)]
struct Work {
    /// Takes ($1 the client, $2 its calls so far, $3 the keys, bigint[]) and returns a row
    /// (`seq`, `key`, `n`) per key, in the order of the calls.
    statement: String,
    keys: Keys,
    /// Statements per client, at most.
    batches: usize,
}

/// Which keys a client calls in each statement.
#[derive(Clone, Copy)]
enum Keys {
    /// `per_statement` keys drawn at random from 0..count, each client its own stream from `seed`
    /// (the same seed draws the same keys).
    Random { count: i64, seed: u64, per_statement: usize },
    /// Every key of 0..count once, in order.
    EachOnce(i64),
}

impl Keys {
    fn draw(self, random: &mut u64) -> Vec<i64> {
        match self {
            Keys::Random { count, per_statement, .. } => (0..per_statement).map(|_| (next_random(random) % count as u64) as i64).collect(),
            Keys::EachOnce(count) => (0..count).collect(),
        }
    }

    /// Where a client's stream of random keys starts.
    fn stream_of(self, client: i32) -> u64 {
        match self {
            Keys::Random { seed, .. } => seed.wrapping_mul(1000).wrapping_add(client as u64),
            Keys::EachOnce(_) => 0,
        }
    }
}

/// The numbers one client received: (seq, key, n) of each call, in its order.
struct Taken {
    phase: i32,
    client: i32,
    calls: Vec<(i32, i64, i64)>,
    /// What ended the client early (a killed or stopped server, …).
    error: Option<String>,
}

/// SplitMix64: the clients' random keys, reproducible from a seed.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Clients, each with its own connection, running their `Work` until done, stopped, or failed.
struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<thread::JoinHandle<Taken>>,
}

impl Load {
    /// Each statement runs in a transaction of its own, and the numbers it returned are kept
    /// before the commit: they count even if the commit is lost in a crash.
    fn start(cluster: &Cluster, clients: i32, phase: i32, work: &Work) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..clients)
            .map(|client| {
                let mut db = cluster.connect();
                let (stop, work) = (stop.clone(), work.clone());
                thread::spawn(move || {
                    let mut taken = Taken { phase, client, calls: Vec::new(), error: None };
                    let mut random = work.keys.stream_of(client);
                    for _ in 0..work.batches {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let keys = work.keys.draw(&mut random);
                        let first = taken.calls.len() as i32;
                        let calls = &mut taken.calls;
                        let done = db.transaction().and_then(|mut tx| {
                            let rows = tx.query(&work.statement, &[&client, &first, &keys])?;
                            calls.extend(rows.iter().map(|r| (r.get("seq"), r.get("key"), r.get("n"))));
                            tx.commit()
                        });
                        if let Err(e) = done {
                            taken.error = Some(e.to_string());
                            break;
                        }
                    }
                    taken
                })
            })
            .collect();
        Load { stop, clients }
    }

    /// Waits until every client is done (or failed).
    fn finish(self) -> Vec<Taken> {
        self.clients.into_iter().map(|c| c.join().expect("client thread")).collect()
    }

    fn stop_after(self, duration: Duration) -> Vec<Taken> {
        thread::sleep(duration);
        self.stop.store(true, Ordering::Relaxed);
        self.finish()
    }
}

fn assert_no_error(taken: &[Taken]) {
    for t in taken {
        assert!(t.error.is_none(), "phase {} client {}: {:?}", t.phase, t.client, t.error);
        assert!(!t.calls.is_empty(), "phase {} client {} took no number", t.phase, t.client);
    }
}

/// Stores what the clients received into a new numbers table `table`.
fn store(db: &mut Client, table: &str, taken: &[Taken]) {
    create_numbers_table(db, table);
    let insert = format!("INSERT INTO {table} SELECT $1, $2, s, k, n FROM unnest($3::int[], $4::bigint[], $5::bigint[]) AS u(s, k, n)");
    for t in taken {
        let seqs: Vec<i32> = t.calls.iter().map(|c| c.0).collect();
        let keys: Vec<i64> = t.calls.iter().map(|c| c.1).collect();
        let numbers: Vec<i64> = t.calls.iter().map(|c| c.2).collect();
        db.execute(&insert, &[&t.phase, &t.client, &seqs, &keys, &numbers]).unwrap();
    }
}

/// How many rows the query `rows` (with a text column `what`) has, and the first five `what`s.
fn count_with_examples(db: &mut Client, rows: &str) -> (i64, String) {
    let row = db.query_one(&format!("SELECT count(*), coalesce(((array_agg(what))[1:5])::text, '') FROM ({rows}) AS v"), &[]).unwrap();
    (row.get(0), row.get(1))
}

/// Asserts over `relation (phase, client, seq, key, n)`: no key has a number twice; each client's
/// numbers of a key strictly increase in the order it took them; every number of a key in a phase
/// is above every number of that key in the phases before. Returns the rows per phase.
fn assert_numbering(db: &mut Client, relation: &str) -> Vec<i64> {
    let checks = [
        (
            "a key's number handed out twice",
            format!("SELECT format('key %s: %s, %s times', key, n, count(*)) AS what FROM {relation} GROUP BY key, n HAVING count(*) > 1"),
        ),
        (
            "a client's later number of a key not above its earlier one",
            format!(
                "SELECT format('phase %s client %s key %s: %s after %s', phase, client, key, n, previous) AS what
                   FROM (SELECT *, lag(n) OVER (PARTITION BY phase, client, key ORDER BY seq) AS previous FROM {relation}) AS p
                  WHERE n <= previous"
            ),
        ),
        (
            "a key's number of a phase not above its numbers of the phases before",
            format!(
                "SELECT format('key %s: %s in phase %s, but %s in phase %s', key, previous_n, previous_phase, n, phase) AS what
                   FROM (SELECT *, lag(phase) OVER w AS previous_phase, lag(n) OVER w AS previous_n FROM {relation}
                         WINDOW w AS (PARTITION BY key ORDER BY n, phase)) AS p
                  WHERE phase < previous_phase"
            ),
        ),
    ];
    for (broken, rows) in checks {
        let (count, examples) = count_with_examples(db, &rows);
        assert_eq!(count, 0, "{relation}: {broken} ({count} times), e.g. {examples}");
    }
    db.query(&format!("SELECT count(*) FROM {relation} GROUP BY phase ORDER BY phase"), &[]).unwrap().iter().map(|r| r.get(0)).collect()
}

/// Claim: 4 clients, each with its own connection, inserting rows of `seq_next()` in batches of
/// 1,000 — on 3 keys (every client on every key at once), on 20,000 random keys (157 sections),
/// and on 4 text keys through `seq_next_text(space, text)` — never get a number of a key twice, and
/// each client's numbers of a key strictly increase in the order it took them.
#[test]
fn concurrent_clients_never_get_a_number_of_a_key_twice() {
    let cluster = seq_cluster("seq-concurrent", &[]);
    let mut db = cluster.connect();
    for (space, keys, text, batches) in [("few", 3, false, 10), ("many", 20_000, false, 10), ("texts", 4, true, 5)] {
        db.execute("SELECT seq_space_create($1, step => 100)", &[&space]).unwrap();
        create_numbers_table(&mut db, space);
        let keys = Keys::Random { count: keys, seed: 1, per_statement: 1000 };
        let work = Work { statement: insert_next(space, space, 0, text), keys, batches };
        assert_no_error(&Load::start(&cluster, 4, 0, &work).finish());
        assert_eq!(assert_numbering(&mut db, space), [4 * 1000 * batches as i64], "{space}: every call's row");
    }
}

/// Runs 4 clients calling 2,000 keys of a space raised by 10 at a time (raises go on all the
/// time), breaks the server under them with `interrupt`, brings it back with `resume`, runs 4
/// clients again, and asserts the numbering over every number the clients received — also those
/// whose transaction was lost — and that the rows committed are among them.
fn numbers_go_on_after(name: &str, interrupt: impl Fn(&Cluster), resume: impl Fn(&Cluster)) {
    let cluster = seq_cluster(name, &["pg_idgen.segment_max_step = 100"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT seq_space_create('h', step => 10)").unwrap();
    create_numbers_table(&mut db, "got");
    drop(db);
    let work = |phase, seed| Work {
        statement: insert_next("got", "h", phase, false),
        keys: Keys::Random { count: 2000, seed, per_statement: 200 },
        batches: usize::MAX,
    };
    let load = Load::start(&cluster, 4, 0, &work(0, 1));
    thread::sleep(Duration::from_millis(1000));
    interrupt(&cluster);
    let mut taken = load.finish();
    assert!(taken.iter().all(|t| t.error.is_some()), "every client was interrupted");
    resume(&cluster);
    let after = Load::start(&cluster, 4, 1, &work(1, 2)).stop_after(Duration::from_millis(1000));
    assert_no_error(&after);
    taken.extend(after);

    let mut db = cluster.connect();
    store(&mut db, "received", &taken);
    let per_phase = assert_numbering(&mut db, "received");
    assert!(per_phase.len() == 2 && per_phase.iter().all(|&n| n > 2000), "numbers taken before and after: {per_phase:?}");
    let committed_not_received: i64 =
        db.query_one("SELECT count(*) FROM (SELECT * FROM got EXCEPT ALL SELECT * FROM received) AS c", &[]).unwrap().get(0);
    assert_eq!(committed_not_received, 0, "every committed row was received first");
}

/// Claim: `kill -9` of the postmaster while 4 clients take numbers of 2,000 keys, then a restart:
/// no key gets a number twice, and every number of a key after the crash is above every number of
/// that key before it — the rows committed before, and also the numbers a client received in a
/// transaction the crash lost.
#[test]
fn a_crash_under_load_never_repeats_a_number_of_a_key() {
    numbers_go_on_after("seq-crash", Cluster::kill9, Cluster::restart_after_crash);
}

/// Claim: a clean restart (fast shutdown, then start) while 4 clients take numbers of 2,000 keys:
/// no key gets a number twice, and every number of a key after the restart is above every number
/// of that key received before it.
#[test]
fn a_clean_restart_under_load_never_repeats_a_number_of_a_key() {
    numbers_go_on_after("seq-restart", Cluster::stop, Cluster::start);
}

/// Claim: with `synchronous_commit = off` — in postgresql.conf, and then only through `ALTER
/// DATABASE … SET` — a `kill -9` right after a client took a number of each of 300 keys, one
/// section each (300 sections loaded, each by a raise of the worker), never makes a number the
/// client received be handed out again after the restart: the worker's raises are durable before
/// their numbers are handed out, whatever the setting. (With `wal_writer_delay = 10s` the WAL
/// writer leaves the unwritten end of asynchronously committed WAL in memory for seconds, so the
/// last raises, committed asynchronously, would be lost at the kill. Why every key once, in
/// order: the WAL before the kill then ends in raises whose numbers were just handed out; random
/// keys would end in prefetch raises, whose loss repeats nothing.)
#[test]
fn asynchronous_commit_loses_no_raise_in_a_crash() {
    let settings = ["wal_writer_delay = '10s'", "synchronous_commit = off"];
    let cluster = seq_cluster("seq-async", &settings);
    cluster.connect().batch_execute("SELECT seq_space_create('a', step => 10, section_keys => 1)").unwrap();
    let work = Work { statement: select_next("a"), keys: Keys::EachOnce(300), batches: 1 };
    let mut taken = Vec::new();
    for phase in 0..4 {
        if phase == 2 {
            cluster.connect().batch_execute("ALTER DATABASE postgres SET synchronous_commit = off").unwrap();
            cluster.stop();
            configure_seq(&cluster, &settings[..1]);
            cluster.start();
        }
        let setting: String = cluster.connect().query_one("SHOW synchronous_commit", &[]).unwrap().get(0);
        assert_eq!(setting, "off", "phase {phase}");
        let calls = Load::start(&cluster, 1, phase, &work).finish();
        assert_no_error(&calls);
        taken.extend(calls);
        if phase % 2 == 0 {
            cluster.kill9();
            cluster.restart_after_crash();
        }
    }
    let mut db = cluster.connect();
    store(&mut db, "received", &taken);
    assert_eq!(assert_numbering(&mut db, "received"), [300; 4]);
}

/// Waits until `standby` has replayed the WAL `primary` has written so far.
fn wait_for_replay(primary: &Cluster, standby: &Cluster) {
    let lsn: String = primary.connect().query_one("SELECT pg_current_wal_lsn()::text", &[]).unwrap().get(0);
    let mut db = standby.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(30));
    while !db.query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&lsn]).unwrap().get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "the standby did not replay up to {lsn} in 30 s");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Claim: a streaming standby in recovery refuses `seq_next()` and `seq_current()` (25006); once
/// it has replayed its primary's WAL up to after 4 clients took numbers there, and is promoted,
/// every number it hands out for a key is above every number the primary handed out for that key.
/// So for the text keys of a space made on the primary (keyed by its secret, which the standby
/// has from the WAL like the space's rows): each is the key it was on the primary
/// (`seq_key(space, key)`), above its numbers there.
/// What this needs: the raises' WAL reached the standby before the promotion — the worker makes a
/// raise durable locally before its numbers are handed out, but replication is asynchronous, so
/// numbers of a raise the standby never received could be handed out again.
#[test]
fn a_promoted_standby_continues_above_its_primary() {
    let primary = seq_cluster("seq-primary", &[]);
    // Why the CHECKPOINT: pg_basebackup starts with a spread checkpoint, which writes the dirty
    // buffers at about 10 a second; written now, at once, it has none left to write.
    primary.connect().batch_execute("SELECT seq_space_create('p', step => 10); SELECT seq_space_create('pt', step => 10); CHECKPOINT").unwrap();
    let standby = Cluster::standby_of("seq-standby", &primary);
    configure_seq(&standby, &[]);
    standby.start();
    let work = Work { statement: select_next("p"), keys: Keys::Random { count: 1000, seed: 4, per_statement: 500 }, batches: 4 };
    let text_work = Work { statement: select_next_text("pt"), keys: Keys::Random { count: 300, seed: 5, per_statement: 100 }, batches: 4 };
    let mut taken = Load::start(&primary, 4, 0, &work).finish();
    assert_no_error(&taken);
    let mut taken_text = Load::start(&primary, 4, 0, &text_work).finish();
    assert_no_error(&taken_text);
    let text_keys = "SELECT seq_key('pt', 'k' || k::text) FROM generate_series(0, 299) AS k ORDER BY k";
    let keys_on_primary: Vec<i64> = primary.connect().query(text_keys, &[]).unwrap().iter().map(|r| r.get(0)).collect();
    wait_for_replay(&primary, &standby);
    let mut in_recovery = standby.connect();
    for call in ["SELECT seq_next('p', 1)", "SELECT seq_current('p', 1)"] {
        let error = in_recovery.query_one(call, &[]).expect_err("refused during recovery");
        assert_eq!(sqlstate(&error), "25006", "{call}: {error:?}");
    }
    primary.stop();
    standby.promote();
    let after = Load::start(&standby, 4, 1, &work).finish();
    assert_no_error(&after);
    taken.extend(after);
    let after = Load::start(&standby, 4, 1, &text_work).finish();
    assert_no_error(&after);
    taken_text.extend(after);
    let mut db = standby.connect();
    store(&mut db, "received", &taken);
    assert_eq!(assert_numbering(&mut db, "received"), [8000, 8000]);
    let keys_on_standby: Vec<i64> = db.query(text_keys, &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(keys_on_standby, keys_on_primary, "each text key is the key it was on the primary");
    store(&mut db, "received_text", &taken_text);
    assert_eq!(assert_numbering(&mut db, "received_text"), [1600, 1600]);
}

/// Claim: pg_dump carries each space's secret with its rows. 4 clients take numbers of 300 text
/// keys of a space made by `seq_space_create()` (keyed by its secret); the database is dumped and
/// restored into a fresh cluster, where each text key is the key it was (`seq_key(space, key)`),
/// and 4 clients take numbers of the same keys again: every number of a key after the restore is
/// above every number the key was given before the dump, none twice.
#[test]
fn a_dump_and_restore_keeps_each_text_key_above_its_numbers() {
    let old = seq_cluster("seq-dump", &[]);
    old.connect().batch_execute("SELECT seq_space_create('t', step => 10)").unwrap();
    let work = Work { statement: select_next_text("t"), keys: Keys::Random { count: 300, seed: 7, per_statement: 100 }, batches: 4 };
    let mut taken = Load::start(&old, 4, 0, &work).finish();
    assert_no_error(&taken);
    let text_keys = "SELECT seq_key('t', 'k' || k::text) FROM generate_series(0, 299) AS k ORDER BY k";
    let keys_before: Vec<i64> = old.connect().query(text_keys, &[]).unwrap().iter().map(|r| r.get(0)).collect();
    let dump = old.dump("postgres");
    old.stop();

    let new = Cluster::init("seq-restored");
    configure_seq(&new, &[]);
    new.start();
    new.restore(&dump, "postgres");
    let mut db = new.connect();
    let keys_after: Vec<i64> = db.query(text_keys, &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(keys_after, keys_before, "each text key is the key it was before the dump");
    let after = Load::start(&new, 4, 1, &work).finish();
    assert_no_error(&after);
    taken.extend(after);
    store(&mut db, "received", &taken);
    assert_eq!(assert_numbering(&mut db, "received"), [1600, 1600]);
}

/// Claim: with a cache of 16 sections and 100,000 keys in 782 sections, which 4 clients call at
/// random (most calls load their section and evict another), and then call again in a
/// second pass drawing the same keys: no key gets a number twice, each client's numbers of a key
/// increase, every number of the second pass is above every number of the first, and
/// `seq_status()` counts the evictions.
#[test]
fn an_eviction_storm_never_repeats_a_number_of_a_key() {
    let cluster = seq_cluster("seq-evictions", &["pg_idgen.seq_cache_sections = 16"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT seq_space_create('e', section_keys => 128)").unwrap();
    create_numbers_table(&mut db, "got");
    for pass in 0..2 {
        let work =
            Work { statement: insert_next("got", "e", pass, false), keys: Keys::Random { count: 100_000, seed: 5, per_statement: 200 }, batches: 2 };
        assert_no_error(&Load::start(&cluster, 4, pass, &work).finish());
    }
    assert_eq!(assert_numbering(&mut db, "got"), [1600, 1600]);
    let row = db.query_one("SELECT cache_sections, evictions FROM seq_status()", &[]).unwrap();
    let (cache_sections, evictions): (i32, i64) = (row.get(0), row.get(1));
    assert_eq!(cache_sections, 16);
    assert!(evictions > 1600, "most calls evicted a section ({evictions} evictions of 3,200 calls)");
}

/// Claim: NULL as space or key gives NULL (the functions are STRICT); an unknown space gives
/// 42704; a space name of 0 or 64 bytes gives 22023 (63 bytes work); the keys i64::MIN, -1, 0, 1
/// and i64::MAX each number 1, 2, 3 on their own, whatever the others took; a text key counts on
/// the bigint key `seq_key(space, key)` gives it.
#[test]
fn hostile_arguments_give_null_or_a_clear_error_and_extreme_keys_work() {
    let cluster = seq_cluster("seq-arguments", &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT seq_space_create('x')").unwrap();
    for (function, arguments) in [("seq_next", "NULL, 1"), ("seq_next", "'x', NULL"), ("seq_next_text", "NULL, 'k'"), ("seq_next_text", "'x', NULL")]
    {
        for function in [function.to_string(), function.replace("next", "current")] {
            let value: Option<i64> = db.query_one(&format!("SELECT {function}({arguments})"), &[]).unwrap().get(0);
            assert_eq!(value, None, "{function}({arguments})");
        }
    }
    let (long, longest) = ("l".repeat(64), "l".repeat(63));
    let refused = [
        ("SELECT seq_next('nope', 1)".to_string(), "42704"),
        ("SELECT seq_next('', 1)".into(), "22023"),
        (format!("SELECT seq_next('{long}', 1)"), "22023"),
        ("SELECT seq_space_create('')".into(), "22023"),
        (format!("SELECT seq_space_create('{long}')"), "22023"),
    ];
    for (statement, expected) in refused {
        let error = db.batch_execute(&statement).expect_err(&statement);
        assert_eq!(sqlstate(&error), expected, "{statement}: {error:?}");
    }
    db.batch_execute(&format!("SELECT seq_space_create('{longest}')")).unwrap();
    assert_eq!(next(&mut db, &longest, 7), 1);

    let keys = [i64::MIN, -1, 0, 1, i64::MAX];
    for round in 1..=3 {
        for key in keys {
            assert_eq!(next(&mut db, "x", key), round, "key {key}, call {round}");
        }
    }
    let row = db.query_one("SELECT seq_next_text('x', 'abc'), seq_next('x', seq_key('x', 'abc'))", &[]).unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 2));
    // An untyped '5' is key 5, not the text "5" (there is no text overload to resolve it to).
    let row = db.query_one("SELECT seq_next('x', '5'), seq_next('x', 5)", &[]).unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 2));
}

/// Claim: a space dropped and created again (with another section_keys, 16 instead of 128) while
/// its sections are cached and two other backends used it numbers every key from 1 again — in
/// those backends too, not from the counters they had cached — and keys then fall into sections of
/// the new size. Likewise when the extension is dropped and created again, and with it the space,
/// under the id its old self had (space ids start over with the table) and with 4 keys a section:
/// once another backend has numbered its keys, the two backends that knew the old space get the
/// next numbers, none of them again.
#[test]
fn a_space_created_again_numbers_from_1_in_every_backend() {
    let cluster = seq_cluster("seq-recreate", &[]);
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT seq_space_create('r', section_keys => 128)").unwrap();
    let mut users = [cluster.connect(), cluster.connect()];
    let numbers_of = |db: &mut Client| -> Vec<i64> {
        db.query("SELECT seq_next('r', k) FROM generate_series(0, 299) AS k", &[]).unwrap().iter().map(|r| r.get(0)).collect()
    };
    let assert_all = |numbers: Vec<i64>, expected: i64, what: &str| {
        assert!(numbers.iter().all(|&n| n == expected), "{what}: every key's number is {expected}, not {:?}…", &numbers[..5]);
    };
    for (i, user) in users.iter_mut().enumerate() {
        assert_all(numbers_of(user), i as i64 + 1, &format!("backend {i}"));
    }
    let cached: i32 = admin.query_one("SELECT cached_sections FROM seq_status()", &[]).unwrap().get(0);
    assert_eq!(cached, 3, "keys 0-299 are in 3 cached sections");
    admin.batch_execute("SELECT seq_space_drop('r'); SELECT seq_space_create('r', section_keys => 16)").unwrap();
    for (i, user) in users.iter_mut().enumerate() {
        assert_all(numbers_of(user), i as i64 + 1, &format!("the space created again, backend {i}"));
    }
    let sections: i64 = admin.query_one("SELECT count(*) FROM seq_section WHERE space = 'r'", &[]).unwrap().get(0);
    assert_eq!(sections, 19, "keys 0-299 in sections of 16");

    admin
        .batch_execute(
            "DROP EXTENSION pg_idgen CASCADE; CREATE EXTENSION pg_idgen;
             SELECT seq_space_create('other'); SELECT seq_space_create('r', section_keys => 4)",
        )
        .unwrap();
    let id: i32 = admin.query_one("SELECT id FROM seq_space WHERE space = 'r'", &[]).unwrap().get(0);
    assert_eq!(id, 2, "the id the dropped space had");
    assert_all(numbers_of(&mut admin), 1, "the extension created again, a new backend");
    for (i, user) in users.iter_mut().enumerate() {
        assert_all(numbers_of(user), i as i64 + 2, &format!("the extension created again, backend {i}"));
    }
}

/// Claim: a backend that numbered a text key of a space, and still knows the space by its old row
/// when the extension is dropped and created again and the space with it — under the same id, name
/// and section size, but with another secret — never numbers the text with its old key: after a
/// new backend took the text's first number, and the section of the text's old key was loaded
/// (`seq_current()`), the old backend gets the text's second number, not a first one again.
#[test]
fn a_text_key_of_a_space_created_again_is_numbered_once_in_every_backend() {
    let cluster = seq_cluster("seq-recreate-text", &[]);
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT seq_space_create('t')").unwrap();
    let mut user = cluster.connect();
    let first: i64 = user.query_one("SELECT seq_next_text('t', 'alice')", &[]).unwrap().get(0);
    assert_eq!(first, 1);
    let old_key: i64 = user.query_one("SELECT seq_key('t', 'alice')", &[]).unwrap().get(0);
    admin.batch_execute("DROP EXTENSION pg_idgen CASCADE; CREATE EXTENSION pg_idgen; SELECT seq_space_create('t')").unwrap();
    let id: i32 = admin.query_one("SELECT id FROM seq_space WHERE space = 't'", &[]).unwrap().get(0);
    assert_eq!(id, 1, "the id the dropped space had");
    let mut fresh = cluster.connect();
    let first: i64 = fresh.query_one("SELECT seq_next_text('t', 'alice')", &[]).unwrap().get(0);
    assert_eq!(first, 1, "a new backend numbers the text from 1 in the space created again");
    let old_key_current: i64 = fresh.query_one("SELECT seq_current('t', $1)", &[&old_key]).unwrap().get(0);
    assert_eq!(old_key_current, 0, "the text's old key is another key of the new space, never used");
    let second: i64 = user.query_one("SELECT seq_next_text('t', 'alice')", &[]).unwrap().get(0);
    assert_eq!(second, 2, "the backend that knew the old space gives the text its second number");
}

/// Claim: a role not granted EXECUTE on `seq_next()` (PUBLIC is not) gets 42501, and once
/// granted it gets numbers with no right on pg_idgen's tables; a role without INSERT on seq_space
/// cannot create a space (42501), and with it (and USAGE on the id sequence) can.
#[test]
fn rights_decide_who_may_call_and_create() {
    let cluster = seq_cluster("seq-rights", &[]);
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE ROLE app LOGIN; SELECT seq_space_create('x')").unwrap();
    let mut app = cluster.connect_as("postgres", "app");
    let error = app.query_one("SELECT seq_next('x', 1)", &[]).expect_err("no EXECUTE");
    assert_eq!(sqlstate(&error), "42501", "{error:?}");
    admin.batch_execute("GRANT EXECUTE ON FUNCTION seq_next(text, bigint) TO app").unwrap();
    assert_eq!(next(&mut app, "x", 1), 1);
    let error = app.batch_execute("SELECT seq_space_create('mine')").expect_err("no INSERT on seq_space");
    assert_eq!(sqlstate(&error), "42501", "{error:?}");
    admin.batch_execute("GRANT INSERT ON seq_space TO app; GRANT USAGE ON SEQUENCE seq_space_id TO app").unwrap();
    app.batch_execute("SELECT seq_space_create('mine')").unwrap();
}

/// Claim: deleting rows of seq_section or seq_space outside `seq_space_drop()`, truncating either
/// table, moving a section's max_seq back, and changing a space's section_keys, id or name or a
/// section's number are refused with 22023 and change nothing: both tables are as before, and the
/// key's next number is above the one before.
#[test]
fn changes_that_would_repeat_numbers_are_refused() {
    let cluster = seq_cluster("seq-refusals", &[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT seq_space_create('g')").unwrap();
    let mut last = next(&mut db, "g", 5);
    let tables = "SELECT (SELECT array_agg(t ORDER BY space)::text FROM seq_space AS t)
                      || (SELECT array_agg(t ORDER BY space, section)::text FROM seq_section AS t)";
    let before: String = db.query_one(tables, &[]).unwrap().get(0);
    for statement in [
        "DELETE FROM seq_section",
        "DELETE FROM seq_space",
        "TRUNCATE seq_section",
        "TRUNCATE seq_space",
        "UPDATE seq_section SET max_seq = max_seq - 1",
        "UPDATE seq_section SET section = section + 1",
        "UPDATE seq_space SET section_keys = 64",
        "UPDATE seq_space SET id = id + 1",
        "UPDATE seq_space SET space = 'h'",
    ] {
        let error = db.batch_execute(statement).expect_err(statement);
        assert_eq!(sqlstate(&error), "22023", "{statement}: {error:?}");
        let now: String = db.query_one(tables, &[]).unwrap().get(0);
        assert_eq!(now, before, "{statement} changed nothing");
        let n = next(&mut db, "g", 5);
        assert!(n > last, "after {statement}: {n} follows {last}");
        last = n;
    }
}

/// Claim: `seq_next()` in a parallel plan — EXPLAIN shows Gather, with seq_next() computed by the
/// parallel scan, and the numbers come from more than one process — gives each key distinct
/// numbers, increasing in each process's order, all above the key's numbers before the query and
/// below its next serial call.
#[test]
fn a_parallel_plan_numbers_every_key_once_in_order() {
    let cluster = seq_cluster("seq-parallel", &[]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT seq_space_create('par', step => 1000);
         CREATE TABLE keys AS SELECT (i % 1000)::bigint AS key FROM generate_series(1, 100000) AS i;
         ANALYZE keys;
         -- Why: a plpgsql function is not inlined, so the planner trusts its PARALLEL SAFE and calls
         -- it in the workers, where it tells which process made the row.
         CREATE FUNCTION process() RETURNS int LANGUAGE plpgsql PARALLEL SAFE AS 'BEGIN RETURN pg_backend_pid(); END';
         SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
         SET min_parallel_table_scan_size = 0;",
    )
    .unwrap();
    let serial = Work { statement: select_next("par"), keys: Keys::Random { count: 1000, seed: 6, per_statement: 5000 }, batches: 1 };
    let mut taken = Load::start(&cluster, 1, 0, &serial).finish();
    let query = "SELECT process() AS process, key, seq_next('par', key) AS n FROM keys";
    let plan: Vec<String> = db.query(&format!("EXPLAIN (VERBOSE, COSTS OFF) {query}"), &[]).unwrap().iter().map(|r| r.get(0)).collect();
    let scan = plan.iter().position(|l| l.contains("Parallel Seq Scan")).unwrap_or_else(|| panic!("no parallel scan:\n{}", plan.join("\n")));
    assert!(plan[0].contains("Gather") && plan[scan + 1].contains("seq_next"), "{}", plan.join("\n"));
    let mut by_process: std::collections::BTreeMap<i32, Vec<(i32, i64, i64)>> = Default::default();
    for row in db.query(query, &[]).unwrap() {
        let calls = by_process.entry(row.get(0)).or_default();
        calls.push((calls.len() as i32, row.get(1), row.get(2)));
    }
    assert!(by_process.len() > 1, "the workers called seq_next() too");
    taken.extend(by_process.into_values().enumerate().map(|(client, calls)| Taken { phase: 1, client: client as i32, calls, error: None }));
    taken.extend(Load::start(&cluster, 1, 2, &serial).finish());
    assert_no_error(&taken);
    store(&mut db, "received", &taken);
    assert_eq!(assert_numbering(&mut db, "received"), [5000, 100_000, 5000]);
}

/// Claim: the `seq_fill()` trigger numbers rows per key: 4 clients inserting issues of 5 projects
/// at once get, per project, distinct iids, each client's increasing; an iid given is kept; a NULL
/// project is refused (23502); a trigger naming a column the table lacks fails the insert (42703).
#[test]
fn seq_fill_numbers_concurrent_inserts_per_key() {
    let cluster = seq_cluster("seq-fill", &[]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT seq_space_create('issues', step => 50);
         CREATE TABLE issues (project_id int, iid bigint, client int, seq int);
         CREATE TRIGGER number_issues BEFORE INSERT ON issues FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'project_id', 'iid');
         CREATE VIEW numbered AS SELECT 0 AS phase, client, seq, project_id::bigint AS key, iid AS n FROM issues;",
    )
    .unwrap();
    let statement = "INSERT INTO issues (project_id, client, seq) SELECT k, $1, $2 + o::int FROM unnest($3::bigint[]) WITH ORDINALITY AS u(k, o)
                     RETURNING seq, project_id::bigint AS key, iid AS n";
    let work = Work { statement: statement.into(), keys: Keys::Random { count: 5, seed: 8, per_statement: 500 }, batches: 10 };
    assert_no_error(&Load::start(&cluster, 4, 0, &work).finish());
    assert_eq!(assert_numbering(&mut db, "numbered"), [20_000]);

    let kept: i64 = db.query_one("INSERT INTO issues (project_id, iid) VALUES (1, 999999999) RETURNING iid", &[]).unwrap().get(0);
    assert_eq!(kept, 999_999_999);
    let error = db.batch_execute("INSERT INTO issues (project_id) VALUES (NULL)").expect_err("NULL key");
    assert_eq!(sqlstate(&error), "23502", "{error:?}");
    db.batch_execute(
        "CREATE TABLE misnamed (project_id int, iid bigint);
         CREATE TRIGGER number_misnamed BEFORE INSERT ON misnamed FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'project', 'iid');",
    )
    .unwrap();
    let error = db.batch_execute("INSERT INTO misnamed (project_id) VALUES (1)").expect_err("no column project");
    assert_eq!(sqlstate(&error), "42703", "{error:?}");
}

/// Claim: `seq_current()` of a key, read in another backend, is at least every number handed out
/// for the key and below its next number; a key of a section never loaded reads 0 and then
/// numbers from 1; after a crash and restart it is still at least every number handed out before
/// the crash, and below the next.
#[test]
fn seq_current_lies_between_the_numbers_handed_out_and_the_next() {
    let cluster = seq_cluster("seq-current", &[]);
    let mut taker = cluster.connect();
    taker.batch_execute("SELECT seq_space_create('c', step => 10)").unwrap();
    let current = |db: &mut Client, key: i64| -> i64 { db.query_one("SELECT seq_current('c', $1::bigint)", &[&key]).unwrap().get(0) };
    let mut reader = cluster.connect();
    assert_eq!(current(&mut reader, 1_000_000), 0, "a key of a section never loaded");
    assert_eq!(next(&mut taker, "c", 1_000_000), 1);
    let mut handed_out = [0; 3];
    for (key, last) in handed_out.iter_mut().enumerate() {
        for _ in 0..25 * (key + 1) {
            *last = next(&mut taker, "c", key as i64);
        }
        let now = current(&mut reader, key as i64);
        assert!(now >= *last, "key {key}: seq_current {now} is below {last}, handed out");
        let following = next(&mut taker, "c", key as i64);
        assert!(following > now, "key {key}: seq_next {following} is not above seq_current {now}");
        *last = following;
    }
    cluster.kill9();
    cluster.restart_after_crash();
    let mut db = cluster.connect();
    for (key, last) in handed_out.into_iter().enumerate() {
        let now = current(&mut db, key as i64);
        assert!(now >= last, "key {key} after the crash: seq_current {now} is below {last}, handed out before");
        let following = next(&mut db, "c", key as i64);
        assert!(following > now, "key {key} after the crash: seq_next {following} is not above seq_current {now}");
    }
}

/// Claim: each backend's map of the sections it used (way and version, checked against the
/// stamp on the key's counter line) never pairs a key with a counter that is not its own: with a
/// cache of 16 sections and 192 keys in 48 sections of 4, 4 clients call the keys at random (most
/// sections they remember have since left the cache, or come back into another way or into the
/// same way under a later version), while a fifth session retires the database's sections 20
/// times a second (each retire changes the sections' headers only, and moves the retire epoch);
/// then a second pass of the same keys. No key gets a number twice, each client's numbers of a key
/// increase, and every number of the second pass is above every number of the first.
#[test]
fn an_eviction_storm_and_retires_never_pair_a_key_with_another_counter() {
    let cluster = seq_cluster("seq-recent", &["pg_idgen.seq_cache_sections = 16"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT seq_space_create('m', step => 5, section_keys => 4)").unwrap();
    create_numbers_table(&mut db, "got");
    let retiring = Arc::new(AtomicBool::new(true));
    let retires = {
        let (mut db, retiring) = (cluster.connect(), retiring.clone());
        thread::spawn(move || {
            let mut retires = 0;
            while retiring.load(Ordering::Relaxed) {
                db.batch_execute("UPDATE seq_space SET description = clock_timestamp()::text WHERE space = 'm'").unwrap();
                retires += 1;
                thread::sleep(Duration::from_millis(50));
            }
            retires
        })
    };
    for pass in 0..2 {
        let work =
            Work { statement: insert_next("got", "m", pass, false), keys: Keys::Random { count: 192, seed: 9, per_statement: 250 }, batches: 6 };
        assert_no_error(&Load::start(&cluster, 4, pass, &work).finish());
    }
    retiring.store(false, Ordering::Relaxed);
    let retires = retires.join().unwrap();
    assert!(retires >= 10, "the sections were retired {retires} times during the load");
    assert_eq!(assert_numbering(&mut db, "got"), [6000, 6000]);
    let evictions: i64 = db.query_one("SELECT evictions FROM seq_status()", &[]).unwrap().get(0);
    assert!(evictions > 500, "sections left the cache and came back ({evictions} evictions)");
}

/// Claim: `seq_status()`'s cache columns, kept as running counts, agree with what was done, in two
/// databases sharing a cache of 32 sections: each database's `cached_sections` is the sections its
/// calls used (10 and 6), `loading_sections` 0 once the calls returned, and `numbers_served` every
/// number handed out on the server; retiring one database's sections (an UPDATE of its space's
/// row) brings its count to 0 and leaves the other's, and using them again brings it back; 50 more
/// sections in one database (evictions) keep the two counts' sum within the cache's 32.
#[test]
fn status_counts_follow_loads_retires_and_evictions_per_database() {
    let cluster = seq_cluster("seq-status-counts", &["pg_idgen.seq_cache_sections = 32"]);
    let mut a = cluster.connect();
    a.batch_execute("CREATE DATABASE other").unwrap();
    let mut b = cluster.connect_to("other");
    b.batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    let status = |db: &mut Client| -> (i32, i32, i64, i64) {
        let row = db.query_one("SELECT cached_sections, loading_sections, numbers_served, evictions FROM seq_status()", &[]).unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3))
    };
    let number_keys = |db: &mut Client, space: &str, keys: i64| {
        let taken: i64 =
            db.query_one(&format!("SELECT count(seq_next('{space}', k)) FROM generate_series(0, $1::bigint - 1) AS k"), &[&keys]).unwrap().get(0);
        assert_eq!(taken, keys);
    };
    a.batch_execute("SELECT seq_space_create('a', section_keys => 4)").unwrap();
    b.batch_execute("SELECT seq_space_create('b', section_keys => 4)").unwrap();
    number_keys(&mut a, "a", 40);
    number_keys(&mut b, "b", 24);
    assert_eq!(status(&mut a), (10, 0, 64, 0), "database a: 10 sections; 64 numbers on the server");
    assert_eq!(status(&mut b), (6, 0, 64, 0), "database other: 6 sections");
    a.batch_execute("UPDATE seq_space SET description = 'retired' WHERE space = 'a'").unwrap();
    assert_eq!(status(&mut a).0, 0, "database a's sections retired");
    assert_eq!(status(&mut b).0, 6, "database other's sections stay");
    number_keys(&mut a, "a", 40);
    assert_eq!(status(&mut a), (10, 0, 104, 0), "database a's sections loaded again");
    number_keys(&mut a, "a", 240);
    let (cached_a, loading_a, served, evictions) = status(&mut a);
    let cached_b = status(&mut b).0;
    assert_eq!((loading_a, served), (0, 344), "every number counted");
    assert!(evictions > 0 && cached_a + cached_b <= 32 && cached_a > 0, "a: {cached_a}, other: {cached_b}, {evictions} evictions");
}

/// Claim: a key whose section needs raising while the section's row in `seq_section` is locked
/// (SELECT … FOR UPDATE) gets 55P03 once its cached numbers are used up, after
/// `pg_idgen.segment_wait_timeout` (1 s here), saying the worker could not raise its section in
/// time; once the row is free the key goes on above every number it had.
#[test]
fn a_locked_section_row_makes_its_keys_wait_then_fail_with_55p03() {
    let cluster = seq_cluster("seq-locked-section", &["pg_idgen.segment_wait_timeout = 1000"]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT seq_space_create('s', step => 10)").unwrap();
    let mut last: i64 = db.query_one("SELECT seq_next('s', 1)", &[]).unwrap().get(0);
    let mut locker = cluster.connect();
    locker.batch_execute("BEGIN; SELECT * FROM seq_section FOR UPDATE").unwrap();
    let mut served = 0;
    let (error, waited) = loop {
        let sent = Instant::now();
        match db.query_one("SELECT seq_next('s', 1)", &[]) {
            Ok(row) => {
                last = row.get(0);
                served += 1;
            }
            Err(error) => break (error, sent.elapsed()),
        }
        assert!(served < 1000, "the key never ran out of cached numbers while its section's row was locked");
    };
    assert_eq!(sqlstate(&error), "55P03", "{error:?}");
    let message = error.as_db_error().unwrap().message().to_string();
    assert!(message.contains("could not raise its section in time"), "{message}");
    assert!(waited >= Duration::from_millis(1000), "the failing call waited the timeout ({waited:?})");
    locker.batch_execute("COMMIT").unwrap();
    let deadline = Instant::now() + scaled(Duration::from_secs(15));
    let next: i64 = loop {
        match db.query_one("SELECT seq_next('s', 1)", &[]) {
            Ok(row) => break row.get(0),
            Err(error) => assert!(Instant::now() < deadline, "no number after the row was free: {error:?}"),
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert!(next > last, "the key goes on above its numbers ({next} after {last})");
}

/// Claim: with the smallest cache `pg_idgen.seq_cache_sections` allows (1: one section) and the
/// worker unable to load a section (`seq_section` locked in SHARE mode, so each load's write
/// gives up after the worker's lock_timeout), 6 clients calling 6 keys of 6 sections at once all
/// fail after waiting at least `pg_idgen.segment_wait_timeout`: the one or two whose key the
/// section is being loaded for with 55P03 (the worker could not raise it in time), and every other
/// one with 53400, `no section of the cache was free for sequence space "s" in time`, its hint
/// naming `pg_idgen.seq_cache_sections`. Why at most two 55P03: a load taken longer ago than the
/// timeout may be evicted, once, and the evicting call then holds the section past every other
/// call's deadline. Once the lock is gone, every key gets numbers again, the one section serving
/// them in turn: each key's second number, taken after the other keys' sections evicted its own,
/// is above its first.
#[test]
fn a_cache_too_small_for_the_keys_loaded_at_once_fails_with_53400() {
    const CLIENTS: i64 = 6;
    let timeout = scaled(Duration::from_secs(3));
    let cluster =
        seq_cluster("seq-cache-full", &["pg_idgen.seq_cache_sections = 1", &format!("pg_idgen.segment_wait_timeout = {}", timeout.as_millis())]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT seq_space_create('s', section_keys => 1)").unwrap();
    let mut locker = cluster.connect();
    locker.batch_execute("BEGIN; LOCK TABLE seq_section IN SHARE MODE").unwrap();
    let start = Arc::new(std::sync::Barrier::new(CLIENTS as usize));
    let clients: Vec<_> = (1..=CLIENTS)
        .map(|key| {
            let (mut db, start) = (cluster.connect(), start.clone());
            thread::spawn(move || {
                start.wait();
                let sent = Instant::now();
                let result = db.query_one("SELECT seq_next('s', $1::bigint)", &[&key]);
                (key, result.map(|row| row.get::<_, i64>(0)), sent.elapsed())
            })
        })
        .collect();
    let mut cache_full = 0;
    for client in clients {
        let (key, result, waited) = client.join().unwrap();
        let error = match result {
            Ok(n) => panic!("key {key} got number {n} while no section could be loaded"),
            Err(error) => error,
        };
        assert!(waited >= timeout, "key {key}: failed after {waited:?}, before pg_idgen.segment_wait_timeout ({timeout:?})");
        let db_error = error.as_db_error().unwrap_or_else(|| panic!("key {key}: {error:?}"));
        match db_error.code().code() {
            "53400" => {
                assert_eq!(db_error.message(), "no section of the cache was free for sequence space \"s\" in time", "key {key}");
                let hint = db_error.hint().unwrap_or_default();
                assert!(hint.contains("pg_idgen.seq_cache_sections"), "key {key}: hint {hint:?}");
                cache_full += 1;
            }
            "55P03" => assert!(db_error.message().ends_with("the worker could not raise its section in time"), "key {key}: {db_error:?}"),
            _ => panic!("key {key}: {db_error:?}"),
        }
    }
    assert!(cache_full >= CLIENTS - 2, "{cache_full} of {CLIENTS} calls found no free section (53400)");
    locker.batch_execute("COMMIT").unwrap();
    let deadline = Instant::now() + scaled(Duration::from_secs(20));
    let first: Vec<i64> = (1..=CLIENTS)
        .map(|key| loop {
            match db.query_one("SELECT seq_next('s', $1::bigint)", &[&key]) {
                Ok(row) => break row.get(0),
                Err(error) => assert!(Instant::now() < deadline, "key {key}: no number after the lock was gone: {error:?}"),
            }
            thread::sleep(Duration::from_millis(100));
        })
        .collect();
    for (key, first) in (1..=CLIENTS).zip(first) {
        assert!(first >= 1, "key {key}: {first}");
        let second = next(&mut db, "s", key);
        assert!(second > first, "key {key}: {second} after {first}, its section evicted and loaded again in between");
    }
}
