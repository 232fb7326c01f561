//! System tests of servers that serve per-key sequences of one segment authority's spaces, each
//! section leased to one server at a time (`pg_idgen.segment_authority`, src/seq/leased.rs): keys
//! routed to their server, keys that move between servers, holders that die or are cut off, an
//! authority that restarts or loses its leases. Every number a client saw is kept (as rows of its
//! server, or client-side when its transaction rolled back) and no number of a key may repeat.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{scaled, sqlstate, started_cluster, Client, Cluster, Stopped};

/// Short leases, so that the tests see them end: renewed every second, given up after 3 s unused.
const TTL: &str = "pg_idgen.seq_lease_ttl = '3s'";
const MARGIN: &str = "pg_idgen.seq_lease_margin = '500ms'";
const TTL_MS: u64 = 3000;
const MARGIN_MS: u64 = 500;

/// How many neighbouring keys share a section in the spaces of these tests.
const SECTION_KEYS: i64 = 256;

/// How long a call waits for its section: longer than a section takes to move (its holder gives it
/// up after a whole lease unused, at its next renewal: 3 s + 1 s; then the lease and margin).
const LONG_WAIT: &str = "pg_idgen.segment_wait_timeout = '10s'";

fn conninfo_as(cluster: &Cluster, user: &str) -> String {
    format!("host={} port={} dbname=postgres user={user}", cluster.socket_dir(), cluster.port)
}

/// The authority: the spaces `orders` (step 50), `issues` (step 20) and `big` (step 1,000,000),
/// all of 256 keys a section, and the role `idgen` the servers call it as, which may only call the two functions.
fn authority(name: &str) -> Cluster {
    authority_with(name, &[])
}

/// The same, with the settings `more` (after the tests' lease and margin: they win).
fn authority_with(name: &str, more: &[&str]) -> Cluster {
    let authority = started_cluster(name, &[&[TTL, MARGIN], more].concat());
    authority
        .connect()
        .batch_execute(
            "SELECT seq_space_create('orders', step => 50, section_keys => 256);
             SELECT seq_space_create('issues', step => 20, section_keys => 256);
             SELECT seq_space_create('big', step => 1000000, section_keys => 256);
             CREATE ROLE idgen LOGIN;
             GRANT EXECUTE ON FUNCTION pg_idgen_seq_spaces(),
                   pg_idgen_seq_sections(text, text, int, int, text, int, int, bigint[], bigint[], bigint[], bigint[]) TO idgen",
        )
        .unwrap();
    authority
}

/// `count` servers of `authority`'s spaces, each with a table `got` for the numbers its clients
/// store, waiting `wait` for a section; returned once the authority's wait after its start (its
/// lease and margin, in which it gives no section out) is over.
fn servers(prefix: &str, authority: &Cluster, count: usize, wait: &str) -> Vec<Cluster> {
    servers_with(prefix, authority, count, &[wait])
}

/// The same, with the settings `more` (a wait among them).
fn servers_with(prefix: &str, authority: &Cluster, count: usize, more: &[&str]) -> Vec<Cluster> {
    servers_calling(prefix, &conninfo_as(authority, "idgen"), authority, count, more)
}

/// The same, calling the authority at `conninfo` (which may name its standby too).
fn servers_calling(prefix: &str, conninfo: &str, authority: &Cluster, count: usize, more: &[&str]) -> Vec<Cluster> {
    let settings = server_settings_calling(conninfo, more);
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let servers = (0..count)
        .map(|i| {
            let server = started_cluster(&format!("{prefix}{i}"), &settings);
            server.connect().batch_execute("CREATE TABLE got (client int, stmt int, o int, key bigint, v bigint)").unwrap();
            server
        })
        .collect();
    after_start_wait(authority);
    servers
}

/// The settings of a server of `authority`, with `more`.
fn server_settings(authority: &Cluster, more: &[&str]) -> Vec<String> {
    server_settings_calling(&conninfo_as(authority, "idgen"), more)
}

/// The settings of a server calling the authority at `conninfo`, with `more`.
fn server_settings_calling(conninfo: &str, more: &[&str]) -> Vec<String> {
    let setting = format!("pg_idgen.segment_authority = '{conninfo}'");
    [&[setting.as_str(), "pg_idgen.seq_sections = authority", TTL, MARGIN, "pg_idgen.remote_timeout = '1s'"], more]
        .concat()
        .into_iter()
        .map(String::from)
        .collect()
}

/// Waits until the authority's wait after its start (or after pg_idgen was installed there) is over.
fn after_start_wait(authority: &Cluster) {
    let mut db = authority.connect();
    let over =
        format!("SELECT now() > GREATEST(pg_postmaster_start_time(), (SELECT reset_at FROM seq_store_state)) + interval '{} ms'", TTL_MS + MARGIN_MS);
    wait_until(&mut db, &over, 30, || "the authority's start is not over after 30 s".into());
}

/// Polls `query` on `db` every 100 ms until it returns true; fails after `seconds` (scaled) with
/// what `failure` says.
fn wait_until(db: &mut Client, query: &str, seconds: u64, failure: impl Fn() -> String) {
    let deadline = Instant::now() + scaled(Duration::from_secs(seconds));
    while !db.query_one(query, &[]).unwrap().get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "{}", failure());
        thread::sleep(Duration::from_millis(100));
    }
}

/// The cluster name a server has at the authority (its directory's name).
fn cluster_name(cluster: &Cluster) -> String {
    cluster.dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// One number a client got: from which client (unique over the test), in which of its statements
/// and at which place of it (the order it asked in), of which key.
#[derive(Clone, Copy, Debug)]
struct Taken {
    client: i32,
    stmt: i32,
    o: i32,
    key: i64,
    v: i64,
}

/// How a statement takes its numbers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// `INSERT INTO got … seq_next(…)`: the numbers are rows of the server.
    Insert,
    /// `SELECT … seq_next(…)` in a transaction that rolls back: the client keeps the numbers.
    RolledBack,
    /// `SELECT … seq_next(…)` on its own: the client keeps the numbers.
    Fetched,
}

/// One statement: `seq_next(space, k)` for each key of `keys`, in their order.
fn statement(db: &mut Client, space: &str, client: i32, stmt: i32, keys: &[i64], mode: Mode) -> Result<Vec<Taken>, postgres::Error> {
    if mode == Mode::Insert {
        db.execute(
            "INSERT INTO got SELECT $1, $2, o::int, k, seq_next($4, k) FROM unnest($3::bigint[]) WITH ORDINALITY AS u(k, o)",
            &[&client, &stmt, &keys, &space],
        )?;
        return Ok(Vec::new());
    }
    if mode == Mode::RolledBack {
        db.batch_execute("BEGIN")?;
    }
    let rows = db.query("SELECT o::int, k, seq_next($2, k) FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, o)", &[&keys, &space]);
    if mode == Mode::RolledBack {
        // Why regardless of the outcome: a failed statement leaves the transaction to end.
        db.batch_execute("ROLLBACK")?;
    }
    Ok(rows?.iter().map(|r| Taken { client, stmt, o: r.get(0), key: r.get(1), v: r.get(2) }).collect())
}

/// A statement that succeeded: which, when it was sent and when its answer came back.
#[derive(Clone, Copy)]
struct Done {
    stmt: i32,
    sent: Instant,
    back: Instant,
}

/// What one client saw: the numbers it kept itself (the others are rows of `got`), when each
/// statement succeeded, and the errors (SQLSTATE, message).
#[derive(Default)]
struct Seen {
    kept: Vec<Taken>,
    done: Vec<Done>,
    errors: Vec<(Instant, String, String)>,
}

fn error_text(error: &postgres::Error) -> String {
    error.as_db_error().map(|e| e.message().to_string()).unwrap_or_else(|| error.to_string())
}

/// A client that runs the statements of `script` once each, every fifth in a transaction that
/// rolls back, the others as inserts; stops at the first error.
fn scripted(cluster: &Cluster, client: i32, script: Vec<Vec<i64>>) -> thread::JoinHandle<Seen> {
    scripted_on(cluster.connect(), client, script)
}

/// The same, on the connection `db` (to any database of a server).
fn scripted_on(mut db: Client, client: i32, script: Vec<Vec<i64>>) -> thread::JoinHandle<Seen> {
    thread::spawn(move || {
        let mut seen = Seen::default();
        for (stmt, keys) in script.iter().enumerate() {
            let stmt = stmt as i32;
            let mode = if stmt % 5 == 4 { Mode::RolledBack } else { Mode::Insert };
            let sent = Instant::now();
            match statement(&mut db, "orders", client, stmt, keys, mode) {
                Ok(kept) => {
                    seen.kept.extend(kept);
                    seen.done.push(Done { stmt, sent, back: Instant::now() });
                }
                Err(error) => {
                    seen.errors.push((Instant::now(), sqlstate(&error), error_text(&error)));
                    break;
                }
            }
        }
        seen
    })
}

/// A client that takes numbers of `keys` of `space` until stopped: inserted, fetched and rolled
/// back in turn. Errors are recorded and the client goes on, until its server is gone.
fn looping(cluster: &Cluster, space: &'static str, client: i32, keys: Vec<i64>, stop: Arc<AtomicBool>) -> thread::JoinHandle<Seen> {
    let mut db = cluster.connect();
    thread::spawn(move || {
        let mut seen = Seen::default();
        let mut stmt = 0;
        while !stop.load(Ordering::Relaxed) {
            let mode = [Mode::Insert, Mode::Fetched, Mode::RolledBack][stmt as usize % 3];
            let sent = Instant::now();
            match statement(&mut db, space, client, stmt, &keys, mode) {
                Ok(kept) => {
                    seen.kept.extend(kept);
                    seen.done.push(Done { stmt, sent, back: Instant::now() });
                }
                Err(error) => {
                    let text = error_text(&error);
                    if seen.errors.last().is_none_or(|e| e.2 != text) {
                        // What changed, for the failure's story: once per new message.
                        eprintln!("client {client}, statement {stmt}: {} {text}", sqlstate(&error));
                    }
                    seen.errors.push((Instant::now(), sqlstate(&error), text));
                    if db.is_closed() {
                        break;
                    }
                    thread::sleep(Duration::from_millis(50));
                }
            }
            stmt += 1;
        }
        seen
    })
}

/// The rows of `got` in a database of a server.
fn stored_in(cluster: &Cluster, database: &str) -> Vec<Taken> {
    let rows = cluster.connect_to(database).query("SELECT client, stmt, o, key, v FROM got", &[]).unwrap();
    rows.iter().map(|r| Taken { client: r.get(0), stmt: r.get(1), o: r.get(2), key: r.get(3), v: r.get(4) }).collect()
}

/// Every number of the servers' tables and of the clients' own lists.
fn every_number(servers: &[&Cluster], seen: &[&Seen]) -> Vec<Taken> {
    every_number_in(servers, "postgres", seen)
}

/// The same, with the servers' tables in `database`.
fn every_number_in(servers: &[&Cluster], database: &str, seen: &[&Seen]) -> Vec<Taken> {
    let mut all: Vec<Taken> = servers.iter().flat_map(|s| stored_in(s, database)).collect();
    all.extend(seen.iter().flat_map(|s| s.kept.iter().copied()));
    all
}

/// Asserts that no number of a key repeats over `all`, and that each client's numbers of a key
/// strictly increase in the order it asked for them.
fn assert_no_repeat_and_increasing(all: &[Taken], what: &str) {
    let mut numbers = HashSet::new();
    let repeats: Vec<&Taken> = all.iter().filter(|t| !numbers.insert((t.key, t.v))).collect();
    assert!(repeats.is_empty(), "{what}: {} of {} numbers repeat, e.g. {:?}", repeats.len(), all.len(), &repeats[..repeats.len().min(5)]);
    let mut per_client: HashMap<(i32, i64), Vec<&Taken>> = HashMap::new();
    for taken in all {
        per_client.entry((taken.client, taken.key)).or_default().push(taken);
    }
    for ((client, key), mut taken) in per_client {
        taken.sort_by_key(|t| (t.stmt, t.o));
        for pair in taken.windows(2) {
            assert!(pair[1].v > pair[0].v, "{what}: client {client}'s numbers of key {key} do not increase: {:?} then {:?}", pair[0], pair[1]);
        }
    }
}

/// Asserts that for each key, every number of `later` is above every number of `earlier`.
fn assert_above(earlier: &[Taken], later: &[Taken], what: &str) {
    let mut highest: HashMap<i64, i64> = HashMap::new();
    for t in earlier {
        let max = highest.entry(t.key).or_insert(i64::MIN);
        *max = (*max).max(t.v);
    }
    let below: Vec<(&Taken, i64)> = later.iter().filter_map(|t| highest.get(&t.key).filter(|&&max| t.v <= max).map(|&max| (t, max))).collect();
    assert!(below.is_empty(), "{what}: {} numbers not above the earlier ones of their key, e.g. {:?}", below.len(), &below[..below.len().min(5)]);
}

/// Asserts the order across servers for `key` over the statements of `clients` (client id and
/// what it saw; the numbers in `all`): a statement sent after another one's answer came back, on
/// whichever server, got only larger numbers of the key.
fn assert_order_across(all: &[Taken], clients: &[(i32, &Seen)], key: i64, what: &str) {
    // Each statement: (client, when sent, when back, its smallest and largest number of the key).
    let mut spans: Vec<(i32, Instant, Instant, i64, i64)> = Vec::new();
    for &(client, seen) in clients {
        let mut range: HashMap<i32, (i64, i64)> = HashMap::new();
        for t in all.iter().filter(|t| t.client == client && t.key == key) {
            let r = range.entry(t.stmt).or_insert((i64::MAX, i64::MIN));
            *r = (r.0.min(t.v), r.1.max(t.v));
        }
        spans.extend(seen.done.iter().filter_map(|d| range.get(&d.stmt).map(|r| (client, d.sent, d.back, r.0, r.1))));
    }
    let mut by_back = spans.clone();
    by_back.sort_by_key(|s| s.2);
    // The statement with the largest number among the first i answers, for each i.
    let mut highest: Vec<usize> = Vec::with_capacity(by_back.len());
    for (i, s) in by_back.iter().enumerate() {
        let best = match highest.last() {
            Some(&j) if by_back[j].4 >= s.4 => j,
            _ => i,
        };
        highest.push(best);
    }
    let origin = by_back.first().map(|s| s.1).unwrap_or_else(Instant::now);
    let inversions: Vec<String> = spans
        .iter()
        .filter_map(|b| {
            let n = by_back.partition_point(|a| a.2 < b.1);
            let a = &by_back[*highest.get(n.wrapping_sub(1))?];
            (a.4 >= b.3).then(|| {
                format!("client {} got {} (back at {:?}), then client {} got {} (sent at {:?})", a.0, a.4, a.2 - origin, b.0, b.3, b.1 - origin)
            })
        })
        .collect();
    assert!(
        inversions.is_empty(),
        "{what}: {} statements got numbers of key {key} below one handed out before they were sent, e.g. {:?}",
        inversions.len(),
        &inversions[..inversions.len().min(3)]
    );
}

/// Which of three servers a key is routed to: its section's, round robin.
fn owner(key: i64) -> usize {
    key.div_euclid(SECTION_KEYS).rem_euclid(3) as usize
}

/// Client `c`'s statements on the keys routed to server `s`: a hot key 50 times, 100 keys in two
/// sections, and 200 keys spread over 0 to 100,000 (each client its own), ten rounds of each.
fn script_of(s: usize, c: usize) -> Vec<Vec<i64>> {
    let s = s as i64;
    let hot = SECTION_KEYS * (30 + s) + 5;
    let hundred: Vec<i64> = (0..50).map(|j| SECTION_KEYS * (60 + s) + j * 5).chain((0..50).map(|j| SECTION_KEYS * (63 + s) + j)).collect();
    let mut spread = (0..).map(|j: i64| (j * 48_271 + c as i64 * 7_919) % 100_000).filter(|&k| owner(k) == s as usize);
    let mut script = Vec::new();
    for _ in 0..10 {
        script.push(vec![hot; 50]);
        script.push(hundred.clone());
        script.push(spread.by_ref().take(200).collect());
    }
    script
}

/// Runs 4 scripted clients on each server, client `c` of server `s` running `script(route(s),
/// c)`; asserts that none failed and returns what they saw. Client ids: `phase * 1000 + s * 10 +
/// c`.
fn run_phase(servers: &[Cluster], phase: i32, route: impl Fn(usize) -> usize, script: fn(usize, usize) -> Vec<Vec<i64>>) -> Vec<Seen> {
    let clients: Vec<_> = servers
        .iter()
        .enumerate()
        .flat_map(|(s, server)| {
            let route = route(s);
            (0..4).map(move |c| scripted(server, phase * 1000 + s as i32 * 10 + c as i32, script(route, c))).collect::<Vec<_>>()
        })
        .collect();
    let seen: Vec<Seen> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    for (i, s) in seen.iter().enumerate() {
        assert!(s.errors.is_empty(), "phase {phase}, client {i} failed: {:?}", s.errors);
    }
    seen
}

/// Claim: three servers of one authority, 4 clients each, taking `seq_next('orders', key)` for a
/// hot key, 100 keys and keys spread over 0 to 100,000 (as rows of their server, every fifth
/// statement rolled back with its numbers kept by the client): first each server its own keys
/// (routed by section), then each server the keys another server used before (which stopped
/// calling them, so their sections move) — no number of a key repeats across servers and clients,
/// each client's numbers of a key increase, and every number after the move is above every
/// number of its key before it.
#[test]
fn three_servers_number_routed_and_moved_keys_without_a_repeat() {
    let authority = authority("sections-authority");
    let servers = servers("sections-server", &authority, 3, LONG_WAIT);
    let started = Instant::now();
    let routed = run_phase(&servers, 1, |s| s, script_of);
    let routed_took = started.elapsed();
    let moved_at = Instant::now();
    let moved = run_phase(&servers, 2, |s| (s + 1) % 3, script_of);
    let moved_took = moved_at.elapsed();

    let all = every_number(&servers.iter().collect::<Vec<_>>(), &routed.iter().chain(&moved).collect::<Vec<_>>());
    // 4 clients × 3 servers × 10 rounds × (50 + 100 + 200) numbers per phase.
    assert_eq!(all.len(), 2 * 12 * 10 * 350, "every number was kept");
    assert_no_repeat_and_increasing(&all, "routed, then moved");
    let (before, after): (Vec<Taken>, Vec<Taken>) = all.iter().partition(|t| t.client < 2000);
    assert_above(&before, &after, "moved keys");
    eprintln!("routed phase {routed_took:?}, moved phase {moved_took:?}, {} numbers", all.len());
}

/// Client `c`'s statements on the keys routed to server `s` for a small cache: 5 of 100 keys
/// spread over 0 to 100,000 (each client its own).
fn spread_script(s: usize, c: usize) -> Vec<Vec<i64>> {
    let mut spread = (0..).map(|j: i64| (j * 48_271 + c as i64 * 7_919) % 100_000).filter(|&k| owner(k) == s);
    (0..5).map(|_| spread.by_ref().take(100).collect()).collect()
}

/// Claim: servers whose cache holds 16 sections (each evicts sections it holds all the time, and
/// takes them again), 4 clients each on keys spread over 0 to 100,000 (some 130 sections a
/// server), routed and then moved as in the test above: no number of a key repeats, each
/// client's increase, and every number after the move is above every number of its key before.
#[test]
fn evicted_sections_move_without_a_repeat() {
    let authority = authority("evicting-authority");
    let servers = servers_with("evicting-server", &authority, 3, &[LONG_WAIT, "pg_idgen.seq_cache_sections = 16"]);
    let routed = run_phase(&servers, 1, |s| s, spread_script);
    let moved = run_phase(&servers, 2, |s| (s + 1) % 3, spread_script);
    let all = every_number(&servers.iter().collect::<Vec<_>>(), &routed.iter().chain(&moved).collect::<Vec<_>>());
    assert_eq!(all.len(), 2 * 12 * 5 * 100, "every number was kept");
    assert_no_repeat_and_increasing(&all, "evicted, then moved");
    let (before, after): (Vec<Taken>, Vec<Taken>) = all.iter().partition(|t| t.client < 2000);
    assert_above(&before, &after, "moved keys");
    for (i, server) in servers.iter().enumerate() {
        let row = server
            .connect()
            .query_one("SELECT s.evictions, l.taken, l.released, l.lost FROM seq_status() AS s, seq_lease_status() AS l", &[])
            .unwrap();
        let (evictions, taken, released, lost): (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
        eprintln!("server {i}: {evictions} evictions, {taken} sections taken, {released} released, {lost} lost");
        assert!(evictions > 0, "server {i} evicted no section: the test did not test eviction");
    }
}

/// Takes `seq_next_text('orders', k)` for each of `keys` on a server, in order; a number's key is
/// the place of its text key in `keys`.
fn text_numbers(db: &mut Client, client: i32, stmt: i32, keys: &[String]) -> Vec<Taken> {
    let rows = db
        .query("SELECT o::int, seq_next_text('orders', k) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, o)", &[&keys])
        .unwrap_or_else(|e| panic!("client {client}, statement {stmt}: {e:?}"));
    rows.iter().map(|r| Taken { client, stmt, o: r.get(0), key: i64::from(r.get::<_, i32>(0)), v: r.get(1) }).collect()
}

/// Claim: text keys of a keyed space (hashed with the space's secret, which servers copy from the
/// authority) move without a repeat: 200 text keys numbered on one server, then (their sections
/// given up) on another, every number after the move above every number of its key before it;
/// and `seq_key()` says the same bigint key for each on the authority and on every server, also
/// on one that has not called anything yet.
#[test]
fn text_keys_map_alike_on_every_server_and_move_without_a_repeat() {
    let authority = authority("text-authority");
    let servers = servers("text-server", &authority, 3, LONG_WAIT);
    let keys: Vec<String> = (0..200).map(|i| format!("tenant-{i}")).collect();
    let mut dbs: Vec<Client> = servers.iter().map(|s| s.connect()).collect();
    let before: Vec<Taken> = (0..3).flat_map(|stmt| text_numbers(&mut dbs[0], 1, stmt, &keys)).collect();
    let after: Vec<Taken> = (0..3).flat_map(|stmt| text_numbers(&mut dbs[1], 2, stmt, &keys)).collect();
    let all: Vec<Taken> = before.iter().chain(&after).copied().collect();
    assert_no_repeat_and_increasing(&all, "text keys");
    assert_above(&before, &after, "text keys after the move");

    let map = "SELECT array_agg(seq_key('orders', k) ORDER BY o) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, o)";
    let on_authority: Vec<i64> = authority.connect().query_one(map, &[&keys]).unwrap().get(0);
    // The server that has not called anything yet last: its copy of the space is made by the call.
    for (i, db) in dbs.iter_mut().enumerate() {
        let here = db.query_one(map, &[&keys]).map(|r| r.get::<_, Vec<i64>>(0));
        assert!(here.as_ref().is_ok_and(|h| *h == on_authority), "server {i} maps the text keys otherwise than the authority: {here:?}");
    }
}

/// Claim: a holder killed with SIGKILL under load: another server calling its keys gets them
/// only after the lease and margin (at least two thirds of a lease and the margin after the
/// kill), with numbers above every number the dead one handed out (its
/// committed rows, read after its restart, and the numbers its clients saw), and no repeat.
#[test]
fn a_killed_holders_keys_go_on_above_its_numbers() {
    let authority = authority("killed-authority");
    let servers = servers("killed-server", &authority, 2, LONG_WAIT);
    let keys: Vec<i64> = [vec![5; 20], (256..356).collect(), (0..100).map(|j| j * 3 * SECTION_KEYS + 17).collect()].concat();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3).map(|c| looping(&servers[0], "orders", c, keys.clone(), stop.clone())).collect();
    let progress = "SELECT count(DISTINCT client) = 3 AND count(*) > 5000 FROM got";
    wait_until(&mut servers[0].connect(), progress, 30, || "the clients of the holder made no progress".into());
    // Before: kill9 returns only once the backends are gone.
    let killed_at = Instant::now();
    servers[0].kill9();
    let dead: Vec<Seen> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);

    let mut script = Vec::new();
    for _ in 0..5 {
        script.push(keys.clone());
    }
    let taker = scripted(&servers[1], 100, script).join().unwrap();
    assert!(taker.errors.is_empty(), "the other server could not take the dead one's keys: {:?}", taker.errors);
    let first = taker.done[0].back - killed_at;
    // The dead holder renewed its leases every third of a lease (200 ms allowed for its worker's
    // round), so they ran two thirds of a lease past its death, and the margin after that.
    let kept = Duration::from_millis(TTL_MS * 2 / 3 + MARGIN_MS);
    assert!(first >= kept.saturating_sub(Duration::from_millis(200)), "the other server took the dead one's sections {first:?} after the kill");
    servers[0].restart_after_crash();

    let dead_numbers: Vec<Taken> = every_number(&[&servers[0]], &dead.iter().collect::<Vec<_>>());
    let taken_numbers: Vec<Taken> = every_number(&[&servers[1]], &[&taker]);
    assert!(dead_numbers.len() > 5000, "the dead holder had handed out numbers ({})", dead_numbers.len());
    assert_eq!(taken_numbers.len(), 5 * keys.len(), "every number of the taker was kept");
    assert_above(&dead_numbers, &taken_numbers, "the taker's numbers");
    let all: Vec<Taken> = dead_numbers.into_iter().chain(taken_numbers).collect();
    assert_no_repeat_and_increasing(&all, "before and after the kill");
    eprintln!("the other server's first statement ended {first:?} after the kill");
}

/// Waits until a server's `got` holds `rows` rows.
fn wait_for_rows(cluster: &Cluster, rows: i64, who: &str) {
    wait_until(&mut cluster.connect(), &format!("SELECT count(*) >= {rows} FROM got"), 30, || format!("{who} stored no {rows} numbers in 30 s"));
}

/// The pids of a server's pg_idgen workers.
fn worker_pids(cluster: &Cluster) -> Vec<String> {
    let rows = cluster.connect().query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker'", &[]).unwrap();
    let pids: Vec<String> = rows.iter().map(|r| r.get::<_, i32>(0).to_string()).collect();
    assert!(!pids.is_empty(), "no pg_idgen worker");
    pids
}

/// Claim: a holder whose worker is cut from the authority (stopped with SIGSTOP, so it renews
/// nothing) while a client keeps calling: its calls stop succeeding within the lease (+ 1 s) of
/// the cut, before another server's first number of the key, whose numbers are all above the
/// holder's; no number repeats, and the order across servers holds (a statement sent after
/// another's answer gets larger numbers), also after the worker goes on (SIGCONT).
#[test]
fn a_holder_cut_from_the_authority_stops_before_another_takes_over() {
    let authority = authority("cut-authority");
    let servers = servers("cut-server", &authority, 2, LONG_WAIT);
    let keys = vec![5_i64; 20];
    let stop = Arc::new(AtomicBool::new(false));
    let holder = looping(&servers[0], "big", 1, keys.clone(), stop.clone());
    wait_for_rows(&servers[0], 200, "the holder's client");
    let frozen = Stopped::processes(worker_pids(&servers[0]));
    let cut_at = Instant::now();
    let taker = looping(&servers[1], "big", 2, keys.clone(), stop.clone());
    wait_for_rows(&servers[1], 1, "the other server's client");
    thread::sleep(Duration::from_secs(1));
    drop(frozen);
    let thawed_at = Instant::now();
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let holder = holder.join().unwrap();
    let taker = taker.join().unwrap();

    let taker_first = taker.done.first().map(|d| d.back).expect("the other server never got a number of the key");
    let last_before_thaw = holder.done.iter().map(|d| d.back).filter(|&t| t < thawed_at).max().unwrap();
    let lease = Duration::from_millis(TTL_MS);
    assert!(
        last_before_thaw <= cut_at + lease + scaled(Duration::from_secs(1)),
        "the cut holder served {:?} after the cut (lease {lease:?})",
        last_before_thaw - cut_at
    );
    assert!(
        last_before_thaw < taker_first,
        "the cut holder served until {:?} after the cut, the other server's first number came {:?} after it",
        last_before_thaw - cut_at,
        taker_first - cut_at
    );
    assert!(
        taker_first >= cut_at + Duration::from_millis(TTL_MS / 3 + MARGIN_MS),
        "the other server served {:?} after the cut, before the holder's last renewal could have run out",
        taker_first - cut_at
    );
    let holder_stmts: HashSet<i32> = holder.done.iter().filter(|d| d.back < thawed_at).map(|d| d.stmt).collect();
    let all = every_number(&servers.iter().collect::<Vec<_>>(), &[&holder, &taker]);
    let (before, after): (Vec<Taken>, Vec<Taken>) = all.iter().partition(|t| t.client == 1 && holder_stmts.contains(&t.stmt));
    let taker_numbers: Vec<Taken> = after.iter().filter(|t| t.client == 2).copied().collect();
    assert_above(&before, &taker_numbers, "the other server's numbers");
    assert_no_repeat_and_increasing(&all, "cut holder and taker");
    assert_order_across(&all, &[(1, &holder), (2, &taker)], 5, "cut holder and taker");
    eprintln!(
        "cut holder's last number {:?} after the cut, the other's first {:?}; holder errors {:?}",
        last_before_thaw - cut_at,
        taker_first - cut_at,
        holder.errors.iter().map(|e| (e.0 - cut_at, e.1.clone())).collect::<Vec<_>>()
    );
}

/// Waits until every server of `servers` has stored the rows of 3 more statements, while no
/// client of `clients` ended.
fn progress(clients: &[thread::JoinHandle<Seen>], servers: &[&Cluster], what: &str) {
    let statements = || -> Vec<i64> {
        servers.iter().map(|s| s.connect().query_one("SELECT count(DISTINCT (client, stmt)) FROM got", &[]).unwrap().get(0)).collect()
    };
    let before = statements();
    let deadline = Instant::now() + scaled(Duration::from_secs(40));
    loop {
        let now = statements();
        if now.iter().zip(&before).all(|(n, b)| *n >= b + 3) {
            return;
        }
        assert!(clients.iter().all(|c| !c.is_finished()), "{what}: a client ended");
        assert!(Instant::now() < deadline, "{what}: no progress on every server ({before:?} then {now:?} statements)");
        thread::sleep(Duration::from_millis(100));
    }
}

/// Claim: while two servers serve their keys, the authority is restarted, killed with SIGKILL
/// and started, and has its leases deleted (after which the second server also calls the first
/// one's keys): the servers go on numbering after each, and no number of a key repeats.
#[test]
fn an_authority_restarted_killed_or_emptied_of_leases_repeats_no_number() {
    let authority = authority("reset-authority");
    let servers = servers("reset-server", &authority, 2, LONG_WAIT);
    let keys = |s: i64| -> Vec<i64> { [vec![s * SECTION_KEYS + 5; 10], (0..50).map(|j| (2 * j + s) * SECTION_KEYS + j).collect()].concat() };
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients: Vec<_> = (0..4).map(|c| looping(&servers[c / 2], "orders", c as i32, keys(c as i64 / 2), stop.clone())).collect();
    let both = [&servers[0], &servers[1]];
    progress(&clients, &both, "at first");
    authority.stop();
    authority.start();
    progress(&clients, &both, "after the authority's restart");
    authority.kill9();
    authority.restart_after_crash();
    progress(&clients, &both, "after the authority's crash");
    let deleted = authority.connect().execute("DELETE FROM seq_section_lease", &[]).unwrap();
    let deleted_at = Instant::now();
    assert!(deleted > 0, "the authority had leases");
    // Why only the second server must go on: once it took a section of the first one's keys, it
    // keeps it while client 4 calls it, and the first one's clients wait for it in vain.
    clients.push(looping(&servers[1], "orders", 4, keys(0), stop.clone()));
    progress(&clients, &[&servers[1]], "after the leases were deleted");
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let after = |s: &Seen| s.done.iter().filter(|d| d.back > deleted_at).count();
    assert!(after(&seen[0]) + after(&seen[1]) + after(&seen[4]) > 0, "no server numbered the first server's keys after the leases were deleted");
    let all = every_number(&servers.iter().collect::<Vec<_>>(), &seen.iter().collect::<Vec<_>>());
    assert_no_repeat_and_increasing(&all, "through the authority's restart, crash and loss of leases");
    let errors: Vec<(String, String)> = seen.iter().flat_map(|s| s.errors.iter().map(|e| (e.1.clone(), e.2.clone()))).collect();
    eprintln!("{} numbers; {} failed statements, e.g. {:?}", all.len(), errors.len(), &errors[..errors.len().min(3)]);
    for (i, s) in seen.iter().enumerate() {
        eprintln!("client {i}: {} statements, {} after the leases were deleted", s.done.len(), after(s));
    }
}

/// Claim: the authority's lease table emptied (`DELETE FROM seq_section_lease`) while a server
/// serves a key of a space whose step lasts (so that it raises nothing for a while): the holder renews under its generation and keeps the order across servers
/// (docs/many-servers.md, "What is guaranteed"): a second server calling the key from right after
/// the delete on gets no number below one the holder handed out before it asked, and the holder
/// none below one the second server handed out before it asked; no number repeats.
#[test]
fn a_lease_table_emptied_under_a_holder_keeps_the_order_across_servers() {
    let authority = authority("emptied-authority");
    let servers = servers("emptied-server", &authority, 2, "pg_idgen.segment_wait_timeout = '3s'");
    let keys = vec![5_i64; 10];
    let stop = Arc::new(AtomicBool::new(false));
    let holder = looping(&servers[0], "big", 1, keys.clone(), stop.clone());
    wait_for_rows(&servers[0], 200, "the holder's client");
    // The second server knows the space already (a section of its own), so that it asks at once.
    servers[1].connect().query_one("SELECT seq_next('big', 100000)", &[]).unwrap();
    let deleted = authority.connect().execute("DELETE FROM seq_section_lease WHERE section = 0", &[]).unwrap();
    assert_eq!(deleted, 1, "the authority had the holder's lease");
    let other = looping(&servers[1], "big", 2, keys, stop.clone());
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let (holder, other) = (holder.join().unwrap(), other.join().unwrap());
    let all = every_number(&servers.iter().collect::<Vec<_>>(), &[&holder, &other]);
    assert_no_repeat_and_increasing(&all, "holder and other server");
    let overlap = match (holder.done.last(), other.done.first()) {
        (Some(last), Some(first)) if last.back > first.back => format!("{:?}", last.back - first.back),
        _ => "none".into(),
    };
    eprintln!(
        "both served for {overlap}; holder: {} statements, errors {:?}; other: {} statements, errors {:?}",
        holder.done.len(),
        holder.errors.iter().map(|e| e.1.clone()).collect::<Vec<_>>(),
        other.done.len(),
        other.errors.iter().map(|e| e.1.clone()).collect::<Vec<_>>()
    );
    assert_order_across(&all, &[(1, &holder), (2, &other)], 5, "after the lease table was emptied");
}

/// Claim: a copy of a server (pg_basebackup: the same system identifier; on another machine the
/// same port and cluster_name, as a promoted standby has) running beside it is another server to
/// the authority: both calling one key, no number repeats and the order across servers holds (a
/// statement sent after another's answer gets larger numbers), as docs/many-servers.md promises
/// for any two servers.
#[test]
fn a_copy_of_a_server_running_beside_it_keeps_the_order_across_servers() {
    let authority = authority("copy-authority");
    let mut servers = servers("copy-server", &authority, 1, "pg_idgen.segment_wait_timeout = '3s'");
    let original = servers.remove(0);
    let mut copy = Cluster::base_backup_of("copy-copy", &original, false);
    // The name it has at the authority: the same cluster_name and port (its socket is in its own
    // directory), as on another machine.
    copy.port = original.port;
    let settings = server_settings(&authority, &["pg_idgen.segment_wait_timeout = '3s'"]);
    let cluster_name = format!("cluster_name = '{}'", cluster_name(&original));
    let lines: Vec<&str> =
        [vec!["shared_preload_libraries = 'pg_idgen'"], settings.iter().map(String::as_str).collect(), vec![cluster_name.as_str()]].concat();
    copy.configure(&lines);
    // The original's socket lock file came along (its socket is in its data directory).
    let _ = std::fs::remove_file(copy.data_file(&format!(".s.PGSQL.{}.lock", copy.port)));
    copy.start();
    let stop = Arc::new(AtomicBool::new(false));
    let keys = vec![5_i64; 10];
    let first = looping(&original, "orders", 1, keys.clone(), stop.clone());
    wait_for_rows(&original, 100, "the original's client");
    let second = looping(&copy, "orders", 2, keys, stop.clone());
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let (first, second) = (first.join().unwrap(), second.join().unwrap());
    let all = every_number(&[&original, &copy], &[&first, &second]);
    eprintln!(
        "original: {} statements, {} errors; copy: {} statements, {} errors",
        first.done.len(),
        first.errors.len(),
        second.done.len(),
        second.errors.len()
    );
    for (name, server) in [("original", &original), ("copy", &copy)] {
        let row = server.connect().query_one("SELECT taken, lost, refused FROM seq_lease_status()", &[]).unwrap();
        eprintln!("{name}: {} sections taken, {} lost, {} refused", row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2));
    }
    assert_no_repeat_and_increasing(&all, "a server and its copy");
    assert_order_across(&all, &[(1, &first), (2, &second)], 5, "a server and its copy");
}

/// Claim: an authority that goes back (its sections' maxima set back to 0, as a restore of an
/// older copy would, then restarted) while a server holds and serves the sections: the holder's
/// requests repair the maxima, so another server that takes the keys once the holder gave them up
/// starts above every number the holder handed out; no number repeats.
#[test]
fn an_authority_set_back_is_repaired_by_the_live_holder() {
    let authority = authority("setback-authority");
    let servers = servers("setback-server", &authority, 2, LONG_WAIT);
    let keys: Vec<i64> = [vec![5; 10], (256..300).collect()].concat();
    let stop = Arc::new(AtomicBool::new(false));
    let holder = looping(&servers[0], "orders", 1, keys.clone(), stop.clone());
    wait_for_rows(&servers[0], 500, "the holder's client");
    // A restore would bring older rows; here they are set back under the trigger that refuses it.
    authority
        .connect()
        .batch_execute(
            "ALTER TABLE seq_section DISABLE TRIGGER seq_section_changed;
             UPDATE seq_section SET max_seq = 0 WHERE space = 'orders';
             ALTER TABLE seq_section ENABLE ALWAYS TRIGGER seq_section_changed;",
        )
        .unwrap();
    authority.stop();
    authority.start();
    let restarted = Instant::now();
    let mut db = servers[0].connect();
    let before: i64 = db.query_one("SELECT count(*) FROM got", &[]).unwrap().get(0);
    wait_for_rows(&servers[0], before + 500, "the holder's client after the authority's restart");
    stop.store(true, Ordering::Relaxed);
    let holder = holder.join().unwrap();
    let taker = scripted(&servers[1], 2, vec![keys.clone(); 3]).join().unwrap();
    assert!(taker.errors.is_empty(), "the other server could not take the keys: {:?}", taker.errors);
    let held = every_number(&[&servers[0]], &[&holder]);
    let taken = every_number(&[&servers[1]], &[&taker]);
    assert_eq!(taken.len(), 3 * keys.len(), "every number of the taker was kept");
    assert_above(&held, &taken, "the other server's numbers after the set-back");
    let all: Vec<Taken> = held.into_iter().chain(taken).collect();
    assert_no_repeat_and_increasing(&all, "holder and taker around the set-back");
    eprintln!("the taker's first statement ended {:?} after the authority's restart", taker.done[0].back - restarted);
}

/// A longer margin at the authority (the servers' lease and margin stay shorter, which it
/// accepts), and the wait after a reset it makes: the lease and that margin.
const LONGER_MARGIN: &str = "pg_idgen.seq_lease_margin = '7s'";
const LONGER_WAIT_MS: u64 = TTL_MS + 7000;

/// Claim: an authority failed over to a standby that lagged, promoted long after its own start
/// (so no start wait covers it), gives no section to another server for its lease and margin
/// after it finds the new timeline, and the live holder, whose raises the lagging copy never saw,
/// repairs the maxima in that time. The servers call the authority through a conninfo naming both
/// hosts (`target_session_attrs = read-write`). A holder numbers key 7; the standby replays that
/// much, then is cut from its primary (it lags from here); the holder numbers key 7 on, far past
/// what the standby saw; its worker is frozen (SIGSTOP), the authority killed and the standby
/// promoted; another server calls key 7 at once; the holder's worker is thawed once its lease has
/// ended (its requests are then releases, which carry its limit; the first may fail on the
/// connection to the dead authority and is sent again). The clients call in a database that is not
/// `pg_idgen.database`, whose worker would exit when idle: it stays until its release is answered. The other server's first statement ends
/// after the wait; every number it gets is above every number of the holder's; none repeats.
/// (0.10.0 gave the other server the section at once, at the standby's older maximum: all 50 of
/// its numbers were the holder's again.)
#[test]
fn an_authority_failed_over_to_a_lagging_standby_repeats_no_number() {
    let primary = authority("failover-authority");
    let standby = Cluster::standby_of("failover-standby", &primary);
    standby.configure(&["shared_preload_libraries = 'pg_idgen'", TTL, LONGER_MARGIN]);
    standby.start();
    let both = format!(
        "host={},{} port={},{} dbname=postgres user=idgen target_session_attrs=read-write",
        primary.socket_dir(),
        standby.socket_dir(),
        primary.port,
        standby.port
    );
    let servers = servers_calling("failover-server", &both, &primary, 2, &["pg_idgen.segment_wait_timeout = '30s'"]);
    // The clients' database is not pg_idgen.database: its worker exits when it has nothing to do.
    for server in &servers {
        server.connect().batch_execute("CREATE DATABASE app").unwrap();
        server
            .connect_to("app")
            .batch_execute("CREATE EXTENSION pg_idgen; CREATE TABLE got (client int, stmt int, o int, key bigint, v bigint)")
            .unwrap();
    }
    let first = scripted_on(servers[0].connect_to("app"), 1, vec![vec![7; 10]; 10]).join().unwrap();
    assert!(first.errors.is_empty(), "the holder's first numbers: {:?}", first.errors);

    // The standby replays the holder's lease and maximum, then lags.
    let mut s = standby.connect();
    let replayed = "SELECT count(*) > 0 FROM seq_section_lease l JOIN seq_section m USING (space, section)
                     WHERE l.space = 'orders' AND l.section = 0 AND m.max_seq >= 100";
    wait_until(&mut s, replayed, 20, || "the standby did not replay the holder's section".into());
    s.batch_execute("ALTER SYSTEM SET primary_conninfo = ''").unwrap();
    s.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_until(&mut s, "SELECT count(*) = 0 FROM pg_stat_wal_receiver", 20, || "the standby still receives WAL".into());
    let replayed_max: i64 = s.query_one("SELECT max_seq FROM seq_section WHERE space = 'orders' AND section = 0", &[]).unwrap().get(0);
    // Promoted long after its start: the authority's wait after a start is over.
    let started_long_ago = format!("SELECT now() > pg_postmaster_start_time() + interval '{} ms'", 2 * LONGER_WAIT_MS);
    wait_until(&mut s, &started_long_ago, 60, || "the standby's start is not long ago after 60 s".into());
    drop(s);

    // The holder numbers on (taking the section again if it gave it up meanwhile), and holds it
    // when its worker is frozen right after.
    let later = scripted_on(servers[0].connect_to("app"), 2, vec![vec![7; 50]; 40]).join().unwrap();
    assert!(later.errors.is_empty(), "the holder's later numbers: {:?}", later.errors);
    let frozen = Stopped::processes(worker_pids(&servers[0]));
    let frozen_at = Instant::now();
    let held = every_number_in(&[&servers[0]], "app", &[&first, &later]);
    let highest = held.iter().map(|t| t.v).max().unwrap();
    assert!(highest > replayed_max + 1000, "the holder numbered past the standby's maximum ({highest}, {replayed_max})");
    primary.kill9();
    standby.promote();
    let promoted = Instant::now();
    let taker = scripted_on(servers[1].connect_to("app"), 3, vec![vec![7; 10]; 5]);
    // Thawed once its lease ended (a renewal comes every third of it), and the reset is recorded.
    let mut s = standby.connect();
    let reset = "SELECT why LIKE '%timeline%' FROM seq_store_state";
    wait_until(&mut s, reset, 20, || format!("the promoted standby recorded no reset: {}", standby.log()));
    thread::sleep(Duration::from_millis(TTL_MS).saturating_sub(frozen_at.elapsed()));
    drop(frozen);
    let taker = taker.join().unwrap();
    assert!(taker.errors.is_empty(), "the other server could not take key 7: {:?}\n{}", taker.errors, standby.log());
    let waited = taker.done[0].back - promoted;
    assert!(
        waited >= Duration::from_millis(LONGER_WAIT_MS - 200),
        "the other server's first statement ended {waited:?} after the promotion, within the standby's wait"
    );
    let taken = every_number_in(&[&servers[1]], "app", &[&taker]);
    assert_eq!(taken.len(), 50, "every number of the taker was kept");
    if taken.iter().any(|t| t.v <= highest) {
        // For the failure's story: what the holder and the promoted authority did.
        let status = |cluster: &Cluster, database: &str, query: &str| -> String {
            let rows = cluster.connect_to(database).query(&format!("SELECT row_to_json(s)::text FROM {query} s"), &[]).unwrap();
            rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
        };
        eprintln!(
            "the holder's log:\n{}\nthe promoted standby's log:\n{}\nthe holder's authority: {}\nits leases: {}\nthe standby's lease rows: {}",
            servers[0].log(),
            standby.log(),
            status(&servers[0], "app", "segment_authority_status()"),
            status(&servers[0], "app", "seq_lease_status()"),
            status(&standby, "postgres", "seq_section_lease"),
        );
    }
    assert_above(&held, &taken, "the other server's numbers after the failover");
    let all: Vec<Taken> = held.into_iter().chain(taken).collect();
    assert_no_repeat_and_increasing(&all, "holder and taker around the failover");
    eprintln!(
        "the standby had replayed up to {replayed_max}, the holder served up to {highest}; the taker's first statement ended {waited:?} after the promotion"
    );
}

/// Claim: an authority restarted with a shorter lease margin than it gave leases under (7 s, then
/// 0.5 s) still waits the longer lease and margin after its start, since leases given before may
/// run that long: a server's first call of a section it does not hold ends no sooner than 10 s
/// (3 s + 7 s) after the restart, not 3.5 s; once that wait is over, the shorter one is recorded.
#[test]
fn an_authority_restarted_with_shorter_leases_waits_out_the_longer_ones() {
    let authority = authority_with("shorter-authority", &[LONGER_MARGIN]);
    let servers = servers("shorter-server", &authority, 1, "pg_idgen.segment_wait_timeout = '30s'");
    let before = scripted(&servers[0], 1, vec![vec![7; 10]; 2]).join().unwrap();
    assert!(before.errors.is_empty(), "numbers before the restart: {:?}", before.errors);
    let longest = |authority: &Cluster| -> i64 { authority.connect().query_one("SELECT longest_ms FROM seq_store_state", &[]).unwrap().get(0) };
    assert_eq!(longest(&authority), LONGER_WAIT_MS as i64, "the longest lease and margin recorded");

    authority.stop();
    authority.configure(&["shared_preload_libraries = 'pg_idgen'", TTL, MARGIN]);
    // Before the start: the wait runs from the server's start, which pg_ctl reports later.
    let restarted = Instant::now();
    authority.start();
    // Key 300 is in section 1, which no server holds: a take.
    let after = scripted(&servers[0], 2, vec![vec![300; 10]; 2]).join().unwrap();
    assert!(after.errors.is_empty(), "numbers after the restart: {:?}", after.errors);
    let waited = after.done[0].back - restarted;
    assert!(waited >= Duration::from_millis(LONGER_WAIT_MS - 200), "the first take ended {waited:?} after the restart");
    assert_eq!(longest(&authority), (TTL_MS + MARGIN_MS) as i64, "the shorter lease and margin recorded after the wait");
    let all = every_number(&[&servers[0]], &[&before, &after]);
    assert_no_repeat_and_increasing(&all, "before and after the restart");
    eprintln!("the first take after the restart ended {waited:?} after it");
}

/// The process ids of a server: its postmaster and every child.
fn server_pids(cluster: &Cluster) -> Vec<String> {
    let pid_file = std::fs::read_to_string(cluster.data_file("postmaster.pid")).unwrap();
    let postmaster = pid_file.lines().next().unwrap().trim().to_string();
    let children = std::process::Command::new("pgrep").args(["-P", &postmaster]).output().unwrap();
    let mut pids = vec![postmaster];
    pids.extend(String::from_utf8_lossy(&children.stdout).split_whitespace().map(String::from));
    pids
}

/// Claim: with the authority frozen (SIGSTOP: nothing answers), a holder serves its section on
/// (its raised maximum lasts) until its lease ends here, a lease after its last renewal at most,
/// then its calls fail with 08006 naming the authority; after the thaw they succeed again, and no
/// number repeats.
#[test]
fn a_frozen_authority_stops_its_holders_at_their_leases_end() {
    let authority = authority("frozen-authority");
    let servers = servers("frozen-server", &authority, 1, "pg_idgen.segment_wait_timeout = '3s'");
    let keys = vec![5_i64; 20];
    let mut db = servers[0].connect();
    let mut kept = Vec::new();
    let mut stmt = 0;
    let mut take = |db: &mut Client| {
        stmt += 1;
        statement(db, "big", 1, stmt, &keys, Mode::Fetched)
    };
    for _ in 0..20 {
        kept.extend(take(&mut db).unwrap());
    }
    let frozen = Stopped::processes(server_pids(&authority));
    let cut_at = Instant::now();
    let mut last_ok = cut_at;
    let error = loop {
        match take(&mut db) {
            Ok(numbers) => {
                kept.extend(numbers);
                last_ok = Instant::now();
            }
            Err(error) => break error,
        }
        assert!(cut_at.elapsed() < scaled(Duration::from_secs(30)), "the holder served on 30 s after the authority froze");
    };
    let failed_at = Instant::now();
    drop(frozen);
    assert_eq!(sqlstate(&error), "08006", "{error:?}");
    assert!(error_text(&error).contains("segment authority"), "{error:?}");
    let lease = Duration::from_millis(TTL_MS);
    assert!(last_ok - cut_at <= lease + scaled(Duration::from_secs(1)), "the holder served {:?} after the authority froze", last_ok - cut_at);
    let thawed = Instant::now();
    loop {
        match take(&mut db) {
            Ok(numbers) => break kept.extend(numbers),
            Err(error) => assert!(thawed.elapsed() < scaled(Duration::from_secs(15)), "no number after the thaw: {error:?}"),
        }
    }
    assert_no_repeat_and_increasing(&kept, "around the authority's freeze");
    eprintln!("served {:?} after the freeze, failed {:?} after it", last_ok - cut_at, failed_at - cut_at);
}

/// Claim: the authority numbering a space itself (its pg_idgen.seq_sections is local) beside a
/// server that leases the same section: both calling one key (a space of step 50, so both raise
/// often), no number repeats and each client's numbers increase (docs/many-servers.md, "The
/// authority's own calls").
#[test]
fn the_authority_numbering_beside_a_leasing_server_repeats_no_number() {
    let authority = authority("beside-authority");
    let servers = servers("beside-server", &authority, 1, LONG_WAIT);
    authority.connect().batch_execute("CREATE TABLE got (client int, stmt int, o int, key bigint, v bigint)").unwrap();
    let keys: Vec<i64> = [vec![5; 20], (0..20).collect()].concat();
    let stop = Arc::new(AtomicBool::new(false));
    let server_client = looping(&servers[0], "orders", 1, keys.clone(), stop.clone());
    wait_for_rows(&servers[0], 200, "the server's client");
    let authority_client = looping(&authority, "orders", 2, keys, stop.clone());
    wait_for_rows(&authority, 2000, "the authority's client");
    let before: i64 = servers[0].connect().query_one("SELECT count(*) FROM got", &[]).unwrap().get(0);
    wait_for_rows(&servers[0], before + 2000, "the server's client beside the authority's");
    stop.store(true, Ordering::Relaxed);
    let (server_client, authority_client) = (server_client.join().unwrap(), authority_client.join().unwrap());
    let all = every_number(&[&servers[0], &authority], &[&server_client, &authority_client]);
    eprintln!(
        "{} numbers; server errors {:?}, authority errors {:?}",
        all.len(),
        server_client.errors.iter().map(|e| e.1.clone()).collect::<Vec<_>>(),
        authority_client.errors.iter().map(|e| e.1.clone()).collect::<Vec<_>>()
    );
    assert_no_repeat_and_increasing(&all, "the authority and a leasing server");
}

/// Claim: the errors of leased sections. On a server, creating or dropping a space is 55000, an
/// unknown space 42704 (naming the authority), a key whose section another server serves 55006 naming that server (its
/// cluster name and port) when it is not handed over in time (its worker stopped; the holder's
/// own calls, once it handed the section over, 55006 naming the asker), and with the authority
/// stopped a section that is not loaded 08006.
/// `seq_current()` of a key another server serves is 55006 too, or no number below the holder's.
/// A restarted authority gives a section nobody holds only after its lease and margin. At the
/// authority, a role without the grants gets 42501 from both functions, and a call of
/// `pg_idgen_seq_sections()` in a transaction block 25001.
#[test]
fn leased_sections_fail_with_clear_errors() {
    let authority = authority("errors-authority");
    let servers = servers("errors-server", &authority, 2, "pg_idgen.segment_wait_timeout = '1s'");
    let mut db = servers[1].connect();
    let error = db.query_one("SELECT seq_space_create('local')", &[]).expect_err("spaces live at the authority");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    let error = db.query_one("SELECT seq_space_drop('orders')", &[]).expect_err("spaces live at the authority");
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    let error = db.query_one("SELECT seq_next('nope', 1)", &[]).expect_err("the authority has no such space");
    assert_eq!(sqlstate(&error), "42704", "{error:?}");
    assert!(error.as_db_error().unwrap().detail().unwrap_or_default().contains("pg_idgen.segment_authority"), "{error:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let holder = looping(&servers[0], "orders", 1, vec![5, 7, 5, 7, 5], stop.clone());
    wait_for_rows(&servers[0], 1, "the holder");
    // The holder's worker stopped: it hands nothing over, and the authority keeps its lease for up
    // to the lease and margin (3.5 s) after its last renewal, longer than the asker waits (1 s).
    let frozen = Stopped::processes(worker_pids(&servers[0]));
    let error = db.query_one("SELECT seq_next('orders', 7)", &[]).expect_err("another server serves the section");
    drop(frozen);
    assert_eq!(sqlstate(&error), "55006", "{error:?}");
    let message = error.as_db_error().unwrap().message().to_string();
    assert!(
        message.contains("another server serves the key's section")
            && message.contains(&cluster_name(&servers[0]))
            && message.contains(&format!("port {}", servers[0].port)),
        "{message}"
    );
    // seq_current() of a key another server serves: at least every number handed out before it
    // was called, or the same error; never a number from a stale copy.
    let served: i64 = servers[0].connect().query_one("SELECT coalesce(max(v), 0) FROM got WHERE key = 7", &[]).unwrap().get(0);
    match db.query_one("SELECT seq_current('orders', 7)", &[]) {
        Ok(row) => assert!(row.get::<_, i64>(0) >= served, "seq_current() {} below {served}", row.get::<_, i64>(0)),
        Err(error) => assert_eq!(sqlstate(&error), "55006", "{error:?}"),
    }
    let own: i64 = db.query_one("SELECT seq_next('orders', 300)", &[]).unwrap().get(0);
    assert_eq!(own, 1, "a section nobody holds is served at once");
    stop.store(true, Ordering::Relaxed);
    let holder = holder.join().unwrap();
    // The asker's request hands the section over at the holder's next renewal: the holder's calls
    // may then wait for it in turn, and fail with 55006 naming the asker; with nothing else.
    assert!(
        holder.errors.iter().all(|(_, sqlstate, message)| sqlstate == "55006" && message.contains(&cluster_name(&servers[1]))),
        "the holder failed otherwise: {:?}",
        holder.errors
    );

    let space_id: i32 = authority.connect().query_one("SELECT id FROM seq_space WHERE space = 'orders'", &[]).unwrap().get(0);
    let call = format!(
        "SELECT * FROM pg_idgen_seq_sections('probe', 'probe-start', 3000, 500, 'orders', {space_id}, 256, '{{999999}}', '{{0}}', '{{0}}', '{{0}}')"
    );
    authority.connect().batch_execute("CREATE ROLE other LOGIN").unwrap();
    let mut other = authority.connect_as("postgres", "other");
    let error = other.query("SELECT * FROM pg_idgen_seq_spaces()", &[]).expect_err("not granted");
    assert_eq!(sqlstate(&error), "42501", "{error:?}");
    let error = other.query(&call, &[]).expect_err("not granted");
    assert_eq!(sqlstate(&error), "42501", "{error:?}");
    let mut granted = authority.connect_as("postgres", "idgen");
    granted.batch_execute("BEGIN").unwrap();
    let error = granted.query(&call, &[]).expect_err("in a transaction block");
    assert_eq!(sqlstate(&error), "25001", "{error:?}");
    granted.batch_execute("ROLLBACK").unwrap();
    let spaces = granted.query("SELECT space FROM pg_idgen_seq_spaces()", &[]).unwrap();
    assert_eq!(spaces.len(), 3, "the granted role reads the spaces");

    // Restarted, the authority gives no section to a server that does not hold it for its lease
    // and margin: the take is recorded (expires_at, a lease after it) no sooner, on its clock. A
    // call made once that wait is over gets its number within its own wait.
    authority.stop();
    authority.start();
    if let Err(error) = db.query_one("SELECT seq_next('orders', 50000)", &[]) {
        // 55006 in the wait; 08006 when the worker's connection from before the restart failed
        // and the second try comes after the call's 1 s; 55P03 when the section's try failed but
        // the authority's status (shared by every call to it) says its last call was answered.
        assert!(["55006", "08006", "55P03"].contains(&sqlstate(&error).as_str()), "{error:?}");
        eprintln!("in the authority's wait after its start: {} {}", sqlstate(&error), error_text(&error));
    }
    after_start_wait(&authority);
    let number = db.query_one("SELECT seq_next('orders', 50000)", &[]);
    assert!(number.is_ok(), "a call after the authority's wait after its start failed: {:?}", number.map(|r| r.get::<_, i64>(0)));
    let waited: f64 = authority
        .connect()
        .query_one(
            "SELECT extract(epoch FROM expires_at - $1::int * interval '1 ms' - pg_postmaster_start_time())::float8
               FROM seq_section_lease WHERE space = 'orders' AND section = 50000 / 256",
            &[&(TTL_MS as i32)],
        )
        .unwrap()
        .get(0);
    assert!(waited >= (TTL_MS + MARGIN_MS) as f64 / 1000.0, "the authority gave a section {waited} s after its start");

    authority.stop();
    let error = db.query_one("SELECT seq_next('orders', 100000)", &[]).expect_err("no authority, no numbers");
    assert_eq!(sqlstate(&error), "08006", "{error:?}");
}

/// One client inserting issues of `tenants` (one row each per statement) into `issues` on
/// `cluster`, numbered by the `seq_fill` trigger, `statements` times or until stopped.
fn issue_writer(cluster: &Cluster, client: i32, tenants: Vec<i32>, statements: i32, stop: Arc<AtomicBool>) -> thread::JoinHandle<i32> {
    let mut db = cluster.connect();
    thread::spawn(move || {
        let mut step = 0;
        while step < statements && !stop.load(Ordering::Relaxed) {
            db.execute(
                "INSERT INTO issues (tenant, client, step, o) SELECT t, $1, $2, o::int FROM unnest($3::int[]) WITH ORDINALITY AS u(t, o)",
                &[&client, &step, &tenants],
            )
            .unwrap_or_else(|e| panic!("client {client}, statement {step}: {e:?}"));
            step += 1;
        }
        step
    })
}

/// Claim: a shard move. Issues numbered per tenant by the `seq_fill` trigger: a busy tenant's
/// rows are written on server 1, then copied to server 2 (numbers kept) and written there, while
/// other tenants keep writing on both servers: every tenant's numbers are distinct across both
/// servers and increase in each client's order, and the busy tenant's after the move are above
/// all before it.
#[test]
fn a_tenant_moved_to_another_server_keeps_its_numbers_distinct_and_increasing() {
    let authority = authority("move-authority");
    let servers = servers("move-server", &authority, 2, LONG_WAIT);
    for server in &servers {
        server
            .connect()
            .batch_execute(
                "CREATE TABLE issues (tenant int NOT NULL, iid bigint NOT NULL, client int, step int, o int);
                 CREATE TRIGGER issues_iid BEFORE INSERT ON issues FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'tenant', 'iid');",
            )
            .unwrap();
    }
    const BUSY: i32 = 7;
    let stop = Arc::new(AtomicBool::new(false));
    let others = [
        issue_writer(&servers[0], 10, (300..310).collect(), i32::MAX, stop.clone()),
        issue_writer(&servers[1], 11, (600..610).collect(), i32::MAX, stop.clone()),
    ];
    let busy = |server: &Cluster, first: i32| -> Vec<i32> {
        let writers: Vec<_> = (0..2).map(|c| issue_writer(server, first + c, vec![BUSY; 20], 100, Arc::new(AtomicBool::new(false)))).collect();
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    };
    assert_eq!(busy(&servers[0], 1), [100, 100]);
    let mut from = servers[0].connect();
    let mut to = servers[1].connect();
    let rows = from.query("SELECT tenant, iid, client, step, o FROM issues WHERE tenant = $1", &[&BUSY]).unwrap();
    for row in &rows {
        let (tenant, iid, client, step, o): (i32, i64, i32, i32, i32) = (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        to.execute("INSERT INTO issues VALUES ($1, $2, $3, $4, $5)", &[&tenant, &iid, &client, &step, &o]).unwrap();
    }
    from.execute("DELETE FROM issues WHERE tenant = $1", &[&BUSY]).unwrap();
    let moved_at = Instant::now();
    assert_eq!(busy(&servers[1], 3), [100, 100]);
    let moved_took = moved_at.elapsed();
    stop.store(true, Ordering::Relaxed);
    for writer in others {
        assert!(writer.join().unwrap() > 0);
    }

    let mut all: Vec<(i32, i64, i32, i32, i32)> = Vec::new();
    for server in &servers {
        for row in server.connect().query("SELECT tenant, iid, client, step, o FROM issues", &[]).unwrap() {
            all.push((row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)));
        }
    }
    let busy_rows = all.iter().filter(|r| r.0 == BUSY).count();
    assert_eq!(busy_rows, 2 * 2 * 100 * 20, "every issue of the busy tenant is on server 2");
    let as_taken: Vec<Taken> = all.iter().map(|r| Taken { client: r.2, stmt: r.3, o: r.4, key: i64::from(r.0), v: r.1 }).collect();
    assert_no_repeat_and_increasing(&as_taken, "issues");
    let (before, after): (Vec<Taken>, Vec<Taken>) = as_taken.iter().filter(|t| t.key == i64::from(BUSY)).partition(|t| t.client < 3);
    assert_above(&before, &after, "the busy tenant after the move");
    eprintln!("{} issues; the busy tenant's writers on server 2 took {moved_took:?}", all.len());
}

/// Claim: a section is handed over on request. While a client of one server keeps calling a key,
/// a call of the same key on another server asks the authority for its section, the holder hands
/// it over at its next renewal (`seq_status()` and `seq_lease_status()` count it alike), and the asking call gets a
/// number within its wait (5 s, with renewals every second), above every number the holder had
/// handed out before the call was sent; no number repeats over both servers.
#[test]
fn a_busy_holder_hands_a_section_over_when_another_server_asks() {
    let authority = authority("handover-authority");
    let servers = servers("handover-server", &authority, 2, "pg_idgen.segment_wait_timeout = '5s'");
    let stop = Arc::new(AtomicBool::new(false));
    let holder = looping(&servers[0], "orders", 1, vec![5, 6], stop.clone());
    wait_for_rows(&servers[0], 100, "the holder");
    let before: i64 = servers[0].connect().query_one("SELECT max(v) FROM got WHERE key = 5", &[]).unwrap().get(0);
    let asked = Instant::now();
    let mut db = servers[1].connect();
    let row = db.query_one("SELECT seq_next('orders', 5)", &[]).expect("the holder hands the section over within the wait");
    let number: i64 = row.get(0);
    eprintln!("handed over {:?} after the ask", asked.elapsed());
    assert!(number > before, "the asker's number {number} is not above the holder's {before}");
    stop.store(true, Ordering::Relaxed);
    let holder = holder.join().unwrap();
    // seq_status() and seq_lease_status() count the same: the holder handed over, the asker took.
    // Counters only: a held section may be given up between two reads of the held ones.
    let counts = "SELECT s.sections_handed_over, l.handed_over, s.sections_taken, l.taken FROM seq_status() AS s, seq_lease_status() AS l";
    let holder_counts = servers[0].connect().query_one(counts, &[]).unwrap();
    let (handed_over, handed_over_too): (i64, i64) = (holder_counts.get(0), holder_counts.get(1));
    assert!(handed_over >= 1 && handed_over == handed_over_too, "the holder reports {handed_over} / {handed_over_too} sections handed over");
    let asker_counts = servers[1].connect().query_one(counts, &[]).unwrap();
    let (taken, taken_too): (i64, i64) = (asker_counts.get(2), asker_counts.get(3));
    assert!(taken >= 1 && taken == taken_too, "the asker reports {taken} / {taken_too} sections taken");
    let mut all = every_number(&[&servers[0]], &[&holder]);
    all.push(Taken { client: 2, stmt: 0, o: 1, key: 5, v: number });
    assert_no_repeat_and_increasing(&all, "a section handed over on request");
}
