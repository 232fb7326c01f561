//! System tests of clock safety: real clusters whose wall clock libfaketime steps at run time
//! (the monotonic clock stays real), crashes, restarts and a promoted standby. Every test collects
//! the ids real clients took and counts duplicates over stored rows.

use std::thread::sleep;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{
    assert_ids_unique_and_ordered, scaled, sqlstate, started_cluster, started_cluster_on_fake_clock, Client, ClientIds, Cluster, Load, Stopped,
};

const CLIENTS: usize = 4;

/// Generation must never stop for longer than this (a batch of 1,000 rows takes a few ms): a
/// second, on a machine that runs this suite alone.
fn longest_allowed_gap() -> Duration {
    scaled(Duration::from_secs(1))
}

fn status_row(db: &mut Client, columns: &str) -> postgres::Row {
    db.query_one(&format!("SELECT {columns} FROM pg_idgen_status()"), &[]).unwrap()
}

/// Waits until the clock worker has published a mark since the server started. Why: until then a
/// fresh server's generators have no room, and a call waits for the worker at most `max_clock_wait`
/// — 200 ms in the tests that shorten it, which a loaded machine can take to start the worker.
fn wait_for_a_first_mark(cluster: &Cluster) {
    let mut db = cluster.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    while !status_row(&mut db, "mark_advanced_at IS NOT NULL").get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "the clock worker published no mark within {:?}", scaled(Duration::from_secs(10)));
        sleep(Duration::from_millis(20));
    }
}

fn seconds(db: &mut Client, interval_column: &str) -> f64 {
    status_row(db, &format!("extract(epoch FROM {interval_column})::float8")).get(0)
}

/// Claim: while 4 clients take snowflake ids, UUIDv7s and ObjectIds, the wall clock steps back
/// 10 s, then another hour. No client sees an error or a pause, no id repeats, every client's ids
/// of each kind strictly increase, and both steps are in the server log (WARNING) and in
/// `pg_idgen_status()`.
#[test]
fn wall_clock_steps_back_neither_stop_nor_repeat_ids() {
    let cluster = started_cluster_on_fake_clock("steps", &["pg_idgen.node_id = 11"]);
    let load = Load::start(&cluster, CLIENTS, 0);
    sleep(Duration::from_millis(1500));
    cluster.set_clock_offset(-10);
    sleep(Duration::from_millis(1500));
    cluster.set_clock_offset(-3610);
    sleep(Duration::from_millis(1500));
    let clients = load.stop();

    for (i, client) in clients.iter().enumerate() {
        assert_eq!(client.error, None, "client {i} failed");
        assert!(client.longest_gap() < longest_allowed_gap(), "client {i} waited {:?} for a batch", client.longest_gap());
    }
    let mut db = cluster.connect();
    assert_ids_unique_and_ordered(&mut db, "stepped", &clients);

    let log = cluster.log();
    for step in ["stepped back by 10.000 s", "stepped back by 3600.000 s"] {
        assert!(log.contains(&format!("WARNING:  pg_idgen: the wall clock {step}")), "log lacks {step:?}:\n{log}");
    }
    let events: i64 = status_row(&mut db, "clock_backward_events").get(0);
    assert_eq!(events, 2, "two backward steps counted");
    let largest = seconds(&mut db, "largest_clock_backward");
    assert!((largest - 3600.0).abs() < 0.01, "largest backward step {largest} s");
    let ahead = seconds(&mut db, "ahead_of_clock");
    assert!((3609.5..3611.0).contains(&ahead), "ids are {ahead} s ahead of the wall clock, expected 3610");
}

/// Claim: a server started with its clock 30 s behind the last id it made (after a clean stop),
/// and again 60 s behind (after kill -9), hands out only ids greater than every id before.
#[test]
fn restart_with_the_clock_behind_continues_past_every_earlier_id() {
    let cluster = started_cluster_on_fake_clock("behind", &["pg_idgen.node_id = 12"]);
    let take = |phase| Load::start(&cluster, 1, phase).stop_after(Duration::from_millis(300));
    let mut phases = take(0);
    cluster.stop();
    cluster.set_clock_offset(-30);
    cluster.start();
    phases.extend(take(1));
    cluster.kill9();
    cluster.set_clock_offset(-60);
    cluster.restart_after_crash();
    phases.extend(take(2));

    assert!(phases.iter().all(|p| p.error.is_none() && !p.ids.is_empty()), "every phase took ids");
    assert_ids_unique_and_ordered(&mut cluster.connect(), "behind", &phases);
}

/// Claim: a server that made ids, stopped cleanly and started with its wall clock an hour behind
/// (policy keep_generating) makes snowflake ids at full speed for 20 s without an error or a stop:
/// the generator continues from the last id at the monotonic clock's speed, as after a step back.
/// Every id is above every id made before the restart, and they strictly increase. (0.6.0 gave
/// one `max_clock_borrow`'s worth, then failed every call for an hour.) The stream makes ids
/// faster than the borrow allows ahead of the floor alone: 10 borrows' worth or more.
#[test]
fn a_full_speed_stream_after_a_clean_restart_onto_a_slow_clock_never_stops() {
    // A borrow of 100 ms (409,600 ids), so that the stream outruns several on a slow machine.
    let cluster = started_cluster_on_fake_clock("slow-restart", &["pg_idgen.node_id = 20", "pg_idgen.max_clock_borrow = '100ms'"]);
    // One statement: a million ids in the order they were made, with whether each was above the one before.
    let stream = "SELECT pg_catalog.min(id), pg_catalog.max(id), pg_catalog.count(*),
                         pg_catalog.count(*) FILTER (WHERE id <= previous)
                    FROM (SELECT id, pg_catalog.lag(id) OVER (ORDER BY n) AS previous
                            FROM (SELECT n, snowflake_next() AS id FROM pg_catalog.generate_series(1, 1000000) AS n) AS made) AS s";
    let before: i64 = cluster.connect().query_one(stream, &[]).unwrap().get(1);
    cluster.stop();
    cluster.set_clock_offset(-3600);
    cluster.start();

    let mut db = cluster.connect();
    let (mut previous_max, mut total) = (before, 0i64);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        let row = db.query_one(stream, &[]).unwrap_or_else(|e| panic!("after {:?} of the stream: {e}", started.elapsed()));
        let (min, max, count, not_above): (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
        assert_eq!(not_above, 0, "every id of a statement is above the one made before it");
        assert!(min > previous_max, "a statement's ids ({min}..) are above every earlier id ({previous_max})");
        previous_max = max;
        total += count;
    }
    // Why: fewer ids than a few borrows' worth would not show that generation goes on.
    let borrow_ids = 100 * 4096;
    assert!(total > 10 * borrow_ids, "the stream made {total} ids, fewer than 10 borrows' worth ({borrow_ids} each)");
    let ahead: f64 = status_row(&mut db, "extract(epoch FROM ahead_of_clock)::float8").get(0);
    // Nearly the hour: made slower than the cap, the ids' time gains on the wall clock less than a
    // second per second, so the lead shrinks a little.
    assert!((3500.0..3610.0).contains(&ahead), "the ids run ahead of the slow wall clock by about the hour ({ahead} s)");
}

/// Claim: 10 times, the postmaster is killed with SIGKILL while 4 clients take ids, and started
/// again with the wall clock 2 s further behind. Over all ids the clients received: no duplicate,
/// and every id taken after a restart is greater than every id taken before it.
#[test]
fn kill_9_cycles_under_load_never_repeat_an_id() {
    let cluster = started_cluster_on_fake_clock("kill9", &["pg_idgen.node_id = 13"]);
    let mut taken: Vec<ClientIds> = Vec::new();
    for cycle in 0..10 {
        let load = Load::start(&cluster, CLIENTS, cycle);
        sleep(Duration::from_millis(600));
        cluster.kill9();
        taken.extend(load.stop());
        cluster.set_clock_offset(-2 * (cycle as i64 + 1));
        cluster.restart_after_crash();
    }
    for cycle in 0..10 {
        let received: usize = taken.iter().filter(|c| c.phase == cycle).map(|c| c.ids.len()).sum();
        assert!(received > 0, "the clients took ids in cycle {cycle}");
    }
    assert_ids_unique_and_ordered(&mut cluster.connect(), "crashed", &taken);
}

/// Claim: a streaming standby with the same node id, whose clock is 5 s behind, promoted after
/// its primary stopped, hands out only ids greater than every id the old primary handed out —
/// also those made after the standby was cloned (the marks reach it through WAL).
#[test]
fn promoted_standby_with_a_slow_clock_continues_past_the_old_primary() {
    let primary = started_cluster("promote-primary", &["pg_idgen.node_id = 14"]);
    let mut taken = Load::start(&primary, 2, 0).stop_after(Duration::from_millis(500));
    let mut standby = Cluster::standby_of("promote-standby", &primary);
    standby.use_fake_clock();
    standby.set_clock_offset(-5);
    standby.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 14"]);
    standby.start();
    // Long enough for the primary to move its mark (every clock_reserve / 2) past the backup's.
    taken.extend(Load::start(&primary, 2, 0).stop_after(Duration::from_millis(4000)));
    primary.stop();
    standby.promote();
    taken.extend(Load::start(&standby, 2, 1).stop_after(Duration::from_millis(500)));

    assert!(taken.iter().all(|c| c.error.is_none() && !c.ids.is_empty()), "every client took ids");
    assert_ids_unique_and_ordered(&mut standby.connect(), "promoted", &taken);
}

/// Claim: with `pg_idgen.clock_step_policy = refuse`, after the wall clock steps back 10 s every
/// generator raises SQLSTATE 55000 saying how far behind the clock is; once the clock is back,
/// generation resumes with ids greater than before.
#[test]
fn refuse_policy_errors_while_behind_and_resumes_when_the_clock_catches_up() {
    let cluster =
        started_cluster_on_fake_clock("refuse", &["pg_idgen.node_id = 15", "pg_idgen.clock_step_policy = refuse", "pg_idgen.max_clock_wait = 200"]);
    let load_started = Instant::now();
    wait_for_a_first_mark(&cluster);
    let before = Load::start(&cluster, 1, 0).stop_after(Duration::from_millis(300));
    cluster.set_clock_offset(-10);
    // The clock worker sees the step (it looks every 100 ms) before the clock is set right.
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    while !cluster.log().contains("stepped back by 10.000 s; generators refuse") {
        assert!(Instant::now() < deadline, "the clock worker did not report the step:\n{}", cluster.log());
        sleep(Duration::from_millis(50));
    }
    let mut db = cluster.connect();
    // The message measures from the start of the tick of the last id: ObjectIds count whole
    // seconds, the others milliseconds.
    for (generator, tick_ms) in [("snowflake_next()", 1), ("uuid_v7_next()", 1), ("objectid_gen()", 1000)] {
        let error = db.query_one(&format!("SELECT {generator}"), &[]).expect_err("the refuse policy must refuse");
        // The last id was taken after the load started and at most `max_clock_borrow` (1 s)
        // ahead of the wall clock; its tick began at most one tick before it was taken.
        let since_load_started_ms = load_started.elapsed().as_millis() as i64;
        let expected = (10_000 - tick_ms - since_load_started_ms)..=(10_000 + 1_000 + tick_ms);
        assert_eq!(sqlstate(&error), "55000", "{generator}: {error:?}");
        let message = error.as_db_error().unwrap().message().to_string();
        let behind_ms: i64 = message
            .strip_prefix("the wall clock is ")
            .and_then(|rest| rest.split(" ms behind").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{generator}: unexpected message {message:?}"));
        assert!(expected.contains(&behind_ms), "{generator}: {message}, expected {expected:?} ms");
    }
    cluster.set_clock_offset(0);
    let after = Load::start(&cluster, 1, 1).stop_after(Duration::from_millis(300));
    assert!(after[0].error.is_none(), "generation resumed: {:?}", after[0].error);

    let taken: Vec<ClientIds> = before.into_iter().chain(after).collect();
    assert_ids_unique_and_ordered(&mut db, "refused", &taken);
}

/// Claim: under `pg_idgen.clock_step_policy = refuse`, a server stopped cleanly and started again
/// with its wall clock 8 s behind continues above its last id, and while the clock is behind that
/// id, never more than `max_clock_borrow` (50 ms here) past the end of its tick: batches of 10,000
/// ids, each above the last id before the stop and no later than the later of that id's tick and
/// the wall clock plus the borrow and a tick — or refused with 55000, as they are once the borrow is
/// used up, until the clock has caught up and batches are made again. Then every id is above every
/// earlier one.
#[test]
fn a_clean_restart_onto_a_slow_clock_under_refuse_borrows_no_more_than_when_running() {
    let cluster = started_cluster_on_fake_clock(
        "refuse-restart",
        &["pg_idgen.node_id = 25", "pg_idgen.clock_step_policy = refuse", "pg_idgen.max_clock_wait = 200", "pg_idgen.max_clock_borrow = '50ms'"],
    );
    wait_for_a_first_mark(&cluster);
    let before = Load::start(&cluster, 1, 0).stop_after(Duration::from_millis(300));
    assert!(before[0].error.is_none(), "{:?}", before[0].error);
    let last_before: i64 = cluster.connect().query_one("SELECT last_id FROM pg_idgen_status()", &[]).unwrap().get(0);
    cluster.stop();
    cluster.set_clock_offset(-8);
    cluster.start();
    wait_for_a_first_mark(&cluster);
    let restarted = Instant::now();
    let mut db = cluster.connect();
    // Whether a batch's ids are all above the last id before the stop, and how far its last id is
    // past the later of that id's tick and the wall clock.
    let batch = "SELECT min(id) > $1, extract(epoch FROM snowflake_timestamp(max(id))
                        - greatest(snowflake_timestamp($1::bigint), clock_timestamp()))::float8
                   FROM (SELECT snowflake_next() AS id FROM generate_series(1, 10000)) AS s";
    let (mut made, mut refused, mut made_after_refusals) = (0, 0, 0);
    let deadline = restarted + scaled(Duration::from_secs(30));
    while made_after_refusals == 0 {
        assert!(Instant::now() < deadline, "after {:?}: {made} batches made, {refused} refused, none made after", restarted.elapsed());
        match db.query_one(batch, &[&last_before]) {
            Ok(row) => {
                let (above, past): (bool, f64) = (row.get(0), row.get(1));
                assert!(above, "a batch after the restart has an id not above the last one before it");
                assert!(past <= 0.0511, "a batch's last id is {past} s past the later of the last id's tick and the clock (borrow 50 ms, tick 1 ms)");
                made += 1;
                if refused > 0 {
                    made_after_refusals += 1;
                }
            }
            Err(error) => {
                assert_eq!(sqlstate(&error), "55000", "{error:?}");
                refused += 1;
            }
        }
    }
    assert!(made > made_after_refusals, "ids were made right after the restart, before the borrow was used up");
    let after = Load::start(&cluster, 1, 1).stop_after(Duration::from_millis(300));
    assert!(after[0].error.is_none(), "generation resumed: {:?}", after[0].error);
    let taken: Vec<ClientIds> = before.into_iter().chain(after).collect();
    assert_ids_unique_and_ordered(&mut db, "refused_after_restart", &taken);
}

/// Claim: with the clock worker terminated (SIGTERM) three times while 4 clients take ids, no client sees
/// an error or a pause: the reserve outlasts the second the postmaster takes to start the worker
/// again, and the new worker goes on moving the mark.
#[test]
fn a_terminated_clock_worker_holds_nothing_up() {
    let cluster = started_cluster("clock-worker", &["pg_idgen.node_id = 16"]);
    let mut db = cluster.connect();
    let worker_pid = |db: &mut Client| -> Option<i32> { status_row(db, "clock_worker_pid").get(0) };
    // The clock worker's pid once it is another than `gone`: the postmaster starts the worker
    // again a second after it went, and the load runs on meanwhile.
    let next_worker = |db: &mut Client, gone: Option<i32>| -> i32 {
        let deadline = Instant::now() + scaled(Duration::from_secs(10));
        loop {
            match worker_pid(db) {
                Some(pid) if Some(pid) != gone => return pid,
                _ => assert!(Instant::now() < deadline, "no clock worker other than {gone:?}"),
            }
            sleep(Duration::from_millis(50));
        }
    };
    let load = Load::start(&cluster, CLIENTS, 0);
    let mut pid = next_worker(&mut db, None);
    for _ in 0..3 {
        // Why kill and not pg_terminate_backend: a worker without a database connection is not
        // in the process array that pg_terminate_backend searches.
        let killed = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
        assert!(killed.success(), "kill -TERM {pid}");
        pid = next_worker(&mut db, Some(pid));
    }
    let clients = load.stop();
    for (i, client) in clients.iter().enumerate() {
        assert_eq!(client.error, None, "client {i} failed");
        assert!(client.longest_gap() < longest_allowed_gap(), "client {i} waited {:?} for a batch", client.longest_gap());
    }
    let advanced_recently: bool =
        status_row(&mut db, "mark_advanced_at > clock_timestamp() - clock_reserve AND high_water_mark > clock_timestamp()").get(0);
    assert!(advanced_recently, "the last worker moves the mark");
    assert_ids_unique_and_ordered(&mut db, "worker_gone", &clients);
}

/// Claim: with the clock worker held (SIGSTOP, so that the postmaster does not replace it) while a
/// client takes snowflake ids, ids keep coming until they near the durable mark the worker left
/// (`clock_reserve` is 2 s here), none reaching it; then calls fail after `max_clock_wait` with
/// 55000, naming the mark and the worker; let go on (SIGCONT), the worker moves the mark and calls
/// succeed again, above every id made before.
#[test]
fn a_held_clock_worker_stops_ids_only_near_its_mark() {
    let cluster =
        started_cluster("clock-worker-held", &["pg_idgen.node_id = 24", "pg_idgen.clock_reserve = '2s'", "pg_idgen.max_clock_wait = '200ms'"]);
    let mut db = cluster.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    let pid = loop {
        if let Some(pid) = status_row(&mut db, "clock_worker_pid").get::<_, Option<i32>>(0) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the clock worker runs");
        sleep(Duration::from_millis(50));
    };
    wait_for_a_first_mark(&cluster);
    let batch = "SELECT pg_catalog.max(snowflake_next()) FROM pg_catalog.generate_series(1, 1000)";
    let mut last: i64 = db.query_one(batch, &[]).unwrap().get(0);
    let held = Stopped::processes(vec![pid.to_string()]);
    let held_at = Instant::now();
    // The durable mark as the held worker left it: no id may reach it.
    let mark: String = status_row(&mut db, "high_water_mark::text").get(0);
    let error = loop {
        let sent = held_at.elapsed();
        match db.query_one(batch, &[]) {
            Ok(row) => {
                assert!(sent < scaled(Duration::from_secs(5)), "ids still made {sent:?} after the worker was held (reserve 2 s)");
                last = row.get(0);
            }
            Err(error) => break error,
        }
        sleep(Duration::from_millis(10));
    };
    assert_eq!(sqlstate(&error), "55000", "{error:?}");
    // Calls fail only once ids near the mark (made slower than the cap, their time is the clock's,
    // and may run ahead of it by at most max_clock_borrow, 1 s), and no id reached it.
    let row = db
        .query_one(
            "SELECT clock_timestamp() >= $1::text::timestamptz - interval '1.001 s', snowflake_timestamp($2::bigint) < $1::text::timestamptz",
            &[&mark, &last],
        )
        .unwrap();
    assert!(row.get::<_, bool>(0), "calls failed {:?} after the worker was held, before the ids neared the mark {mark}", held_at.elapsed());
    assert!(row.get::<_, bool>(1), "an id reached the mark {mark}");
    let db_error = error.as_db_error().unwrap();
    assert!(db_error.message().contains("would pass pg_idgen's persisted high-water mark"), "{}", db_error.message());
    assert!(db_error.hint().unwrap_or_default().contains("pg_idgen clock"), "{:?}", db_error.hint());

    drop(held);
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    let after: i64 = loop {
        match db.query_one("SELECT snowflake_next()", &[]) {
            Ok(row) => break row.get(0),
            Err(error) => assert!(Instant::now() < deadline, "no id after the worker went on: {error:?}"),
        }
        sleep(Duration::from_millis(50));
    };
    assert!(after > last, "the id after the worker went on ({after}) is above the last before ({last})");
}

/// Claim: a server whose `pg_idgen.mark` file is damaged does not start (starting without the
/// mark could repeat ids), and says which file and what to do; with the file mended, it starts and
/// continues past the time written into it.
#[test]
fn a_damaged_mark_file_stops_the_server_at_start() {
    let cluster = started_cluster("mark-file", &["pg_idgen.node_id = 17"]);
    cluster.stop();
    let file = std::path::Path::new(&cluster.data()).join("pg_idgen.mark");
    std::fs::write(&file, "not a time\n").unwrap();
    let log = cluster.try_start().expect_err("the server must not start without its mark");
    assert!(log.contains("FATAL:  file \"pg_idgen.mark\" does not hold a high-water mark: \"not a time\""), "log:\n{log}");
    assert!(log.contains("HINT:  pg_idgen keeps its high-water mark in pg_idgen.mark"), "log:\n{log}");

    // An hour ahead of now, in Unix microseconds.
    let an_hour_ahead_us = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64) + 3_600_000_000;
    std::fs::write(&file, format!("{an_hour_ahead_us}\n")).unwrap();
    cluster.start();
    let hours_ahead: f64 = cluster
        .connect()
        .query_one("SELECT extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp())::float8 / 3600", &[])
        .unwrap()
        .get(0);
    assert!((0.99..1.01).contains(&hours_ahead), "the first id is {hours_ahead} h ahead, not 1 h");
}

/// Claim: after 6 `kill -9` restarts in quick succession under load, the ids continue from the
/// persisted marks, ahead of the wall clock; that lead shrinks as the clock catches up, so once it
/// has passed, a new id carries the current time (within 1 s) instead of keeping the lead for good.
#[test]
fn the_lead_after_crashes_shrinks_as_the_clock_catches_up() {
    let cluster = started_cluster("crash-lead", &["pg_idgen.node_id = 19", "pg_idgen.clock_reserve = '3s'"]);
    let mut taken = Vec::new();
    for cycle in 0..6 {
        let load = Load::start(&cluster, 2, cycle);
        sleep(Duration::from_millis(300));
        cluster.kill9();
        taken.extend(load.stop());
        cluster.restart_after_crash();
    }
    let mut db = cluster.connect();
    db.batch_execute("SELECT snowflake_next()").unwrap();
    let lead = seconds(&mut db, "ahead_of_clock");
    assert!(lead > 1.0, "the crashes left the ids ahead of the wall clock ({lead} s)");
    sleep(Duration::from_secs_f64(lead + 1.0));
    let drift: f64 =
        db.query_one("SELECT extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp())::float8", &[]).unwrap().get(0);
    assert!(drift.abs() < 1.0, "{lead:.1} s after the last restart a new id is {drift:.3} s off the wall clock");
    assert_ids_unique_and_ordered(&mut db, "lead", &taken);
}

/// Claim: while 2 clients take ids, the wall clock jumps a year ahead for 2 s and comes back.
/// Under either policy, the generators do not follow a jump that did not last
/// (pg_idgen.clock_forward_delay): no id carries a time more than 2 s past the real time, no client
/// errs or pauses, no id repeats, and the log says the step was not followed.
#[test]
fn a_brief_forward_jump_of_the_wall_clock_is_not_followed() {
    for policy in ["keep_generating", "refuse"] {
        let cluster =
            started_cluster_on_fake_clock(&format!("jump-{policy}"), &["pg_idgen.node_id = 20", &format!("pg_idgen.clock_step_policy = {policy}")]);
        let load = Load::start(&cluster, 2, 0);
        sleep(Duration::from_millis(1000));
        cluster.set_clock_offset(365 * 86_400);
        sleep(Duration::from_millis(2000));
        cluster.set_clock_offset(0);
        sleep(Duration::from_millis(1500));
        let clients = load.stop();
        for (c, client) in clients.iter().enumerate() {
            assert_eq!(client.error, None, "{policy}: client {c} failed");
            assert!(client.longest_gap() < longest_allowed_gap(), "{policy}: client {c} waited {:?}", client.longest_gap());
        }
        let mut db = cluster.connect();
        assert_ids_unique_and_ordered(&mut db, "jumped", &clients);
        let ahead: f64 = db
            .query_one(
                "SELECT extract(epoch FROM max(greatest(snowflake_timestamp(snowflake), (id_decode(uuid)).ts, objectid_timestamp(objectid))) - clock_timestamp())::float8
                   FROM jumped",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(ahead < 2.0, "{policy}: the newest id is {ahead} s ahead of the real time");
        let log = cluster.log();
        assert!(log.contains("its forward step of 31536000"), "{policy}: log:\n{log}");
    }
}

/// Claim: a forward step that lasts is followed once it has lasted pg_idgen.clock_forward_delay
/// (2 s here): ids then carry the new time, and the log says so.
#[test]
fn a_lasting_forward_step_is_followed_after_the_delay() {
    let cluster = started_cluster_on_fake_clock("step-lasts", &["pg_idgen.node_id = 21", "pg_idgen.clock_forward_delay = '2s'"]);
    let mut db = cluster.connect();
    cluster.set_clock_offset(3600);
    let stepped = Instant::now();
    let off = |db: &mut Client| -> f64 {
        db.query_one("SELECT extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp())::float8", &[]).unwrap().get(0)
    };
    sleep(Duration::from_millis(500));
    let early = off(&mut db);
    assert!(early < -3500.0, "not followed before the delay: the id is {early} s off the stepped clock");
    // Followed once the step has lasted the delay: polled, as the clock worker may run late on a
    // loaded machine.
    let mut late = off(&mut db);
    while late.abs() >= 1.0 {
        assert!(stepped.elapsed() < scaled(Duration::from_secs(5)), "not followed {:?} after the step: the id is {late} s off", stepped.elapsed());
        sleep(Duration::from_millis(100));
        late = off(&mut db);
    }
    assert!(cluster.log().contains("the generator clock follows it, 3600"), "log:\n{}", cluster.log());
}

/// Claim: a forward step of the wall clock under 1 s (900 ms; up to 1 s the generator clock follows
/// without waiting `pg_idgen.clock_forward_delay`) is followed within 100 ms (the clock worker looks
/// every 100 ms): polled every 10 ms, a snowflake id carries the stepped time (within 20 ms of it)
/// at most 250 ms after the step, which leaves a query's time on top.
#[test]
fn a_forward_step_under_a_second_is_followed_within_100_ms() {
    let cluster = started_cluster_on_fake_clock("step-second", &["pg_idgen.node_id = 26"]);
    let mut db = cluster.connect();
    let off = |db: &mut Client| -> f64 {
        db.query_one("SELECT extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp())::float8", &[]).unwrap().get(0)
    };
    let before = off(&mut db);
    assert!(before.abs() < 0.1, "before the step, ids carry the wall clock's time ({before} s off)");
    cluster.set_clock_offset_fraction(0.9);
    let stepped = Instant::now();
    let mut now = off(&mut db);
    while now < -0.02 {
        assert!(
            stepped.elapsed() < scaled(Duration::from_millis(250)),
            "not followed {:?} after the step: ids are {now} s behind it",
            stepped.elapsed()
        );
        sleep(Duration::from_millis(10));
        now = off(&mut db);
    }
}

/// Claim: ObjectIds made as fast as one backend can, 20 million in a row, never carry a second
/// later than the wall-clock second they were made in: each second's counter starts low, so only
/// more than 16.7 million in one second would borrow a second.
#[test]
fn objectids_borrow_a_second_only_past_16_million_in_one_second() {
    let cluster = started_cluster("objectid-counter", &[]);
    let borrowed: i64 = cluster
        .connect()
        .query_one(
            "SELECT count(*) FILTER (WHERE objectid_timestamp(o) > date_trunc('second', t))
               FROM (SELECT objectid_gen() AS o, clock_timestamp() AS t FROM generate_series(1, 20000000)) AS s",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(borrowed, 0, "ObjectIds carried a later second than the one they were made in");
}

/// Claim: a backend killed with SIGKILL while the wall clock is a year ahead (within
/// pg_idgen.clock_forward_delay) makes the postmaster rebuild shared memory, and the rebuilt state
/// does not take the year either: once the clock is back, new ids carry the real time, give or
/// take what a crash costs (they continue from the durable mark, at most clock_reserve ahead).
#[test]
fn a_crash_during_a_forward_jump_does_not_take_it() {
    let cluster = started_cluster_on_fake_clock("jump-crash", &["pg_idgen.node_id = 22"]);
    let mut victim = cluster.connect();
    let pid: i32 = victim.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    cluster.set_clock_offset(365 * 86_400);
    sleep(Duration::from_millis(500));
    let ready = "database system is ready to accept connections";
    let ready_before = cluster.log().matches(ready).count();
    assert!(std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    // The postmaster notices, ends every backend and rebuilds shared memory: the clock goes back
    // only once the rebuilt server is ready, so that the rebuild happened with the clock ahead.
    let deadline = Instant::now() + scaled(Duration::from_secs(20));
    while cluster.log().matches(ready).count() == ready_before {
        assert!(Instant::now() < deadline, "the server was not ready again after the crash:\n{}", cluster.log());
        sleep(Duration::from_millis(50));
    }
    cluster.set_clock_offset(0);
    let off: f64 = cluster
        .connect()
        .query_one("SELECT extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp())::float8", &[])
        .unwrap()
        .get(0);
    assert!(off.abs() < 5.0 + 1.0, "after the crash, ids are {off} s off the real time");
    assert!(cluster.log().contains("all server processes terminated; reinitializing"), "log:\n{}", cluster.log());
}

/// A statement running on a connection of its own: the backend's pid, and where its outcome
/// arrives (the SQLSTATE of its error, or None when it succeeded).
struct Running {
    pid: i32,
    outcome: std::sync::mpsc::Receiver<Option<String>>,
}

impl Running {
    fn start(cluster: &Cluster, sql: &str) -> Running {
        let mut db = cluster.connect();
        let pid: i32 = db.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        let (sender, outcome) = std::sync::mpsc::channel();
        let sql = sql.to_string();
        // Why a thread that may be left behind: a call that never returns must fail the test, not
        // hang it; the cluster's immediate stop at the end ends the connection.
        std::thread::spawn(move || {
            let _ = sender.send(db.batch_execute(&sql).err().map(|e| sqlstate(&e)));
        });
        Running { pid, outcome }
    }

    /// Returns once the statement has run for `time` (by the server's `query_start`), or panics.
    /// Why not a sleep: on a loaded machine the statement may start seconds after `start`.
    fn wait_until_it_ran_for(&self, db: &mut Client, time: Duration) {
        let deadline = Instant::now() + scaled(Duration::from_secs(20)) + time;
        let query = "SELECT coalesce(clock_timestamp() - query_start >= make_interval(secs => $2), false) \
                     FROM pg_stat_activity WHERE pid = $1 AND state = 'active'";
        while !db.query_opt(query, &[&self.pid, &time.as_secs_f64()]).unwrap().is_some_and(|row| row.get::<_, bool>(0)) {
            assert!(Instant::now() < deadline, "the statement of backend {} did not run for {time:?}", self.pid);
            sleep(Duration::from_millis(50));
        }
    }

    /// The SQLSTATE the statement ended with (None: it succeeded), or a panic naming `what` when it
    /// has not ended within `limit`.
    fn ended_within(&self, limit: Duration, what: &str) -> Option<String> {
        let limit = scaled(limit);
        self.outcome.recv_timeout(limit).unwrap_or_else(|_| panic!("{what}: the statement did not end within {limit:?}"))
    }
}

/// Claim: a UUIDv7 call past the last millisecond the format holds, with
/// `pg_idgen.max_clock_borrow = 0`, and an ObjectId call past the last second, with a borrow under
/// one second (`500ms`), fail within seconds with SQLSTATE 22008 (the id format's end) instead of
/// spinning: `uuid_v7_advance_past()` to the format's second-to-last millisecond, the 4,096 UUIDs
/// of the last one, then one more; `objectid_advance_past()` to the second-to-last second, its
/// last second's 16,777,216 ObjectIds, then one more. Every call after them fails the same way;
/// `pg_cancel_backend()` of such a call and a fast shutdown during one return within seconds.
#[test]
fn calls_past_the_end_of_the_format_fail_at_once_and_can_be_cancelled() {
    const LIMIT: Duration = Duration::from_secs(5);
    let uuids = started_cluster("format-end-uuid", &["pg_idgen.max_clock_borrow = 0"]);
    let mut db = uuids.connect();
    db.batch_execute("SELECT uuid_v7_advance_past('ffffffff-fffe-7fff-bfff-ffffffffffff')").unwrap();
    let last: String = db
        .query_one("SELECT u::text FROM (SELECT uuid_v7_next() AS u FROM generate_series(1, 4096)) AS s ORDER BY u DESC LIMIT 1", &[])
        .unwrap()
        .get(0);
    assert!(last.starts_with("ffffffff-ffff-7fff-"), "the last millisecond's 4,096 UUIDs end at its last counter: {last}");
    let uuid_past_end = "SELECT uuid_v7_next()";
    for attempt in 0..3 {
        let outcome = Running::start(&uuids, uuid_past_end).ended_within(LIMIT, "a UUIDv7 past the format's end");
        assert_eq!(outcome.as_deref(), Some("22008"), "attempt {attempt}: a UUIDv7 past the format's end");
    }
    let cancelled = Running::start(&uuids, uuid_past_end);
    db.query_one("SELECT pg_cancel_backend($1)", &[&cancelled.pid]).unwrap();
    let outcome = cancelled.ended_within(LIMIT, "pg_cancel_backend() of a UUIDv7 call past the format's end");
    assert!(matches!(outcome.as_deref(), Some("22008" | "57014")), "cancelled: {outcome:?}");
    let during_shutdown = Running::start(&uuids, "SELECT count(uuid_v7_next()) FROM generate_series(1, 1000000)");
    drop(db);
    uuids.stop_fast_within(Duration::from_secs(10)).expect("a fast shutdown while a call is past the format's end");
    let outcome = during_shutdown.ended_within(LIMIT, "a UUIDv7 call during a fast shutdown");
    assert!(outcome.is_some(), "the call past the format's end cannot have succeeded");

    let objectids = started_cluster("format-end-objectid", &["pg_idgen.max_clock_borrow = '500ms'"]);
    let mut db = objectids.connect();
    db.batch_execute("SELECT objectid_advance_past('fffffffe0000000000000000')").unwrap();
    let last: String = db.query_one("SELECT max(objectid_gen())::text FROM (SELECT generate_series(1, 16777216)) AS s", &[]).unwrap().get(0);
    assert!(last.starts_with("ffffffff") && last.ends_with("ffffff"), "the last second's ObjectIds end at its last counter: {last}");
    let outcome = Running::start(&objectids, "SELECT objectid_gen()").ended_within(LIMIT, "an ObjectId past the format's end");
    assert_eq!(outcome.as_deref(), Some("22008"), "an ObjectId past the format's end");
}

/// Claim: a call that waits for the clock, for seconds at a time, ends within a second of
/// `pg_cancel_backend()` (57014), and a fast shutdown during such a wait ends within seconds.
/// The waits: ids of the `uidgen` layout (8,192 a one-second tick) made faster than that with
/// `pg_idgen.max_clock_borrow = 0` and `pg_idgen.max_clock_wait = '10s'`.
#[test]
fn a_call_waiting_for_the_clock_ends_at_cancel_and_at_a_fast_shutdown() {
    let cluster = started_cluster(
        "clock-wait-cancel",
        &["pg_idgen.node_id = 23", "pg_idgen.layout = 'uidgen'", "pg_idgen.max_clock_borrow = 0", "pg_idgen.max_clock_wait = '10s'"],
    );
    let many = "SELECT count(snowflake_next()) FROM generate_series(1, 1000000)";
    let mut db = cluster.connect();
    let waiting = Running::start(&cluster, many);
    // Past its first tick's 8,192 ids, the statement waits for the clock.
    waiting.wait_until_it_ran_for(&mut db, Duration::from_secs(2));
    let cancelled_at = Instant::now();
    db.query_one("SELECT pg_cancel_backend($1)", &[&waiting.pid]).unwrap();
    assert_eq!(waiting.ended_within(Duration::from_secs(5), "a call waiting for the clock, cancelled").as_deref(), Some("57014"));
    assert!(cancelled_at.elapsed() < scaled(Duration::from_secs(1)), "the cancel took {:?}", cancelled_at.elapsed());

    let waiting = Running::start(&cluster, many);
    waiting.wait_until_it_ran_for(&mut db, Duration::from_secs(2));
    drop(db);
    let took = cluster.stop_fast_within(Duration::from_secs(10)).expect("a fast shutdown while a call waits for the clock");
    assert!(took < scaled(Duration::from_secs(5)), "the fast shutdown took {took:?}");
    assert!(waiting.ended_within(Duration::from_secs(5), "a call waiting for the clock, at shutdown").is_some());
}
