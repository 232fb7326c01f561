//! System tests of what the data directory remembers about the ids a server made: settings changed
//! across a restart, mark files lost, pg_upgrade, base backups, dump and restore.

use std::process::Command;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{
    assert_ids_unique_and_ordered, scaled, started_cluster, started_cluster_on_fake_clock, started_cluster_with_clock_offset, Client, ClientIds,
    Cluster, Load,
};

/// One client taking ids of the three time-based generators for a moment.
fn take(cluster: &Cluster, phase: i32) -> Vec<ClientIds> {
    let taken = Load::start(cluster, 1, phase).stop_after(Duration::from_millis(300));
    assert!(taken.iter().all(|c| c.error.is_none() && !c.ids.is_empty()), "phase {phase}: {:?}", taken[0].error);
    taken
}

fn copy_as_postgres(from: &std::path::Path, to: &std::path::Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("cp {} {}: {e}", from.display(), to.display()));
    assert!(Command::new("chown").args(["postgres:postgres", to.to_str().unwrap()]).status().unwrap().success());
}

/// Claim: after ids were made, a start with settings under which the next snowflake id would not
/// be above them stops with FATAL naming the setting and how to set it back (the epoch moved later
/// by 10 s and by a year, a longer tick, the sonyflake layout); the old settings start again;
/// settings whose ids stay above (an earlier epoch; node and sequence bits traded at the same time
/// bits) start; and every id after is greater than every id before.
#[test]
fn settings_that_would_make_smaller_ids_stop_the_start() {
    let epoch = "pg_idgen.epoch = '2025-01-01 00:00:00+00'";
    let cluster = started_cluster("settings-change", &["pg_idgen.node_id = 3", epoch]);
    let mut taken = take(&cluster, 0);
    let with = |lines: &[&str]| {
        let mut all = vec!["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 3"];
        all.extend_from_slice(lines);
        cluster.configure(&all);
    };
    // The 10 s case first: it is refused only until the clock has passed the old ids by 10 s.
    let refused: [(&[&str], &str, &str); 4] = [
        (&["pg_idgen.epoch = '2025-01-01 00:00:10+00'"], "pg_idgen.epoch", "Set pg_idgen.epoch = '2025-01-01 00:00:00+00' again"),
        (&["pg_idgen.epoch = '2026-01-01 00:00:00+00'"], "pg_idgen.epoch", "Set pg_idgen.epoch = '2025-01-01 00:00:00+00' again"),
        (&[epoch, "pg_idgen.time_unit = '10ms'"], "pg_idgen.time_unit", "Set pg_idgen.time_unit = '1ms' again"),
        (&[epoch, "pg_idgen.layout = 'sonyflake'"], "pg_idgen.layout", "Set pg_idgen.layout = 'twitter' again"),
    ];
    for (lines, setting, hint) in refused {
        cluster.stop();
        with(lines);
        let log = cluster.try_start().expect_err("the server must not start");
        assert!(log.contains(&format!("FATAL:  changed {setting} would make snowflake ids smaller")), "{lines:?}:\n{log}");
        assert!(log.contains(&format!("HINT:  {hint}")), "{lines:?}:\n{log}");
    }
    with(&[epoch]);
    cluster.start();
    taken.extend(take(&cluster, 1));
    for lines in [
        &["pg_idgen.epoch = '2020-01-01 00:00:00+00'"][..],
        &["pg_idgen.epoch = '2020-01-01 00:00:00+00'", "pg_idgen.node_bits = 12", "pg_idgen.sequence_bits = 10"],
    ] {
        cluster.stop();
        with(lines);
        cluster.start();
        assert!(cluster.log().contains("new ids continue above the old ones"), "{lines:?}:\n{}", cluster.log());
        taken.extend(take(&cluster, taken.len() as i32));
    }
    assert_ids_unique_and_ordered(&mut cluster.connect(), "across_settings", &taken);
}

/// Claim: an epoch written without a UTC offset is read as UTC: the same setting under another
/// `timezone` starts, keeps the epoch's instant, and continues above every earlier id.
#[test]
fn an_epoch_without_offset_does_not_move_with_the_timezone() {
    let epoch = "pg_idgen.epoch = '2025-01-01 00:00:00'";
    let cluster = started_cluster("epoch-timezone", &["pg_idgen.node_id = 4", epoch, "timezone = 'UTC'"]);
    let mut taken = take(&cluster, 0);
    cluster.stop();
    // UTC-11: read in the server's zone, the epoch would move 11 hours later.
    cluster.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 4", epoch, "timezone = 'Pacific/Pago_Pago'"]);
    cluster.start();
    taken.extend(take(&cluster, 1));
    let mut db = cluster.connect();
    let epoch_utc: String = db.query_one("SELECT (epoch AT TIME ZONE 'UTC')::text FROM pg_idgen_status()", &[]).unwrap().get(0);
    assert_eq!(epoch_utc, "2025-01-01 00:00:00");
    assert_ids_unique_and_ordered(&mut db, "across_timezones", &taken);
}

/// Claim: a server whose `pg_idgen.mark` is lost after a clean stop does not start, however its
/// clock stands, and names the file and the command that restores it from its copy; done as the
/// hint says, it starts with its clock 60 s behind and every id is greater than before. Likewise
/// when the copy `pg_idgen/mark` is lost.
#[test]
fn a_lost_mark_file_stops_the_start_until_it_is_restored() {
    let cluster = started_cluster_on_fake_clock("lost-mark", &["pg_idgen.node_id = 5"]);
    let mut taken = take(&cluster, 0);
    for (lost, kept, phase) in [("pg_idgen.mark", "pg_idgen/mark", 1), ("pg_idgen/mark", "pg_idgen.mark", 2)] {
        cluster.stop();
        std::fs::remove_file(cluster.data_file(lost)).unwrap();
        cluster.set_clock_offset(-60 * phase as i64);
        let log = cluster.try_start().expect_err("the server must not start without its mark");
        assert!(log.contains(&format!("FATAL:  file \"{lost}\" is missing, but \"{kept}\" shows this server made ids")), "{log}");
        assert!(log.contains(&format!("cp {kept} {lost}")), "{log}");
        copy_as_postgres(&cluster.data_file(kept), &cluster.data_file(lost));
        cluster.start();
        taken.extend(take(&cluster, phase));
    }
    assert_ids_unique_and_ordered(&mut cluster.connect(), "lost_mark", &taken);
}

/// Claim: after pg_upgrade, the new cluster does not start until the old cluster's
/// `pg_idgen.mark` is copied in (FATAL naming it); then, with its clock 60 s behind, every id is
/// greater than every id the old cluster made.
#[test]
fn after_pg_upgrade_ids_continue_past_the_old_cluster() {
    let old = started_cluster("upgrade-old", &["pg_idgen.node_id = 6"]);
    let mut taken = take(&old, 0);
    old.stop();
    let mut new = Cluster::init("upgrade-new");
    new.use_fake_clock();
    new.set_clock_offset(-60);
    new.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 6"]);
    new.pg_upgrade_from(&old).unwrap_or_else(|output| panic!("pg_upgrade failed:\n{output}"));
    let log = new.try_start().expect_err("the upgraded cluster must not start without the old mark");
    assert!(log.contains("FATAL:  pg_idgen does not know which ids the old cluster made"), "{log}");
    assert!(log.contains("Copy the file pg_idgen.mark from the old cluster's data directory"), "{log}");
    copy_as_postgres(&old.data_file("pg_idgen.mark"), &new.data_file("pg_idgen.mark"));
    new.start();
    taken.extend(take(&new, 1));
    assert_ids_unique_and_ordered(&mut new.connect(), "upgraded", &taken);
}

/// Claim: a server started from a base backup (pg_basebackup, WAL streamed along) of a running
/// server, with its clock 60 s behind, hands out only ids greater than every id its source handed
/// out before the backup: both mark files came along, and the WAL carried the marks made since.
#[test]
fn a_base_backup_continues_past_its_source() {
    let source = started_cluster("backup-source", &["pg_idgen.node_id = 7"]);
    let mut taken = take(&source, 0);
    let mut copy = Cluster::base_backup_of("backup-copy", &source, false);
    source.stop();
    assert!(copy.data_file("pg_idgen.mark").exists() && copy.data_file("pg_idgen/mark").exists(), "both files are in the backup");
    copy.use_fake_clock();
    copy.set_clock_offset(-60);
    copy.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 7"]);
    copy.start();
    taken.extend(take(&copy, 1));
    assert_ids_unique_and_ordered(&mut copy.connect(), "from_backup", &taken);
}

/// Claim: tables of snowflake ids, UUIDv7s and ObjectIds dumped from one server and restored onto
/// another with the same node id and a clock 60 s behind (whose next ids are smaller than the
/// restored ones) get new ids above every restored one after one statement per column
/// (`SELECT snowflake_advance_past(max(id)) FROM t`; uuid and objectid have no max(), so the
/// greatest by ORDER BY) — also when the server is killed right after.
#[test]
fn after_a_restore_one_statement_per_column_moves_ids_past_the_restored_ones() {
    let source = started_cluster("restore-source", &["pg_idgen.node_id = 8"]);
    source
        .connect()
        .batch_execute(
            "CREATE TABLE t (s bigint, u uuid, o objectid);
             INSERT INTO t SELECT snowflake_next(), uuid_v7_next(), objectid_gen() FROM generate_series(1, 10000);",
        )
        .unwrap();
    let dump = source.dump("postgres");
    let target = started_cluster_with_clock_offset("restore-target", -60, &["pg_idgen.node_id = 8"]);
    target.restore(&dump, "postgres");
    let mut db = target.connect();
    let greatest = "(SELECT max(s) FROM t) AS s, (SELECT u FROM t ORDER BY u DESC LIMIT 1) AS u, (SELECT o FROM t ORDER BY o DESC LIMIT 1) AS o";
    let below: bool = db
        .query_one(&format!("SELECT snowflake_next() < s AND uuid_v7_next() < u AND objectid_gen() < o FROM (SELECT {greatest}) AS g"), &[])
        .unwrap()
        .get(0);
    assert!(below, "without the statements, new ids would be below the restored ones");
    db.batch_execute(
        "SELECT snowflake_advance_past(max(s)) FROM t;
         SELECT uuid_v7_advance_past(u) FROM t ORDER BY u DESC LIMIT 1;
         SELECT objectid_advance_past(o) FROM t ORDER BY o DESC LIMIT 1;",
    )
    .unwrap();
    target.kill9();
    target.restart_after_crash();
    let above: bool = target
        .connect()
        .query_one(&format!("SELECT snowflake_next() > s AND uuid_v7_next() > u AND objectid_gen() > o FROM (SELECT {greatest}) AS g"), &[])
        .unwrap()
        .get(0);
    assert!(above, "after the statements and a crash, new ids are above the restored ones");
}

/// Claim: right after a restart, `pg_idgen_status().last_id` is NULL — no id was handed out since
/// (the state below the restored floor is none) — and after one id it is that id.
#[test]
fn last_id_is_only_an_id_handed_out() {
    let cluster = started_cluster("last-id", &["pg_idgen.node_id = 9"]);
    cluster.connect().batch_execute("SELECT snowflake_next()").unwrap();
    cluster.stop();
    cluster.start();
    let mut db = cluster.connect();
    let last: Option<i64> = db.query_one("SELECT last_id FROM pg_idgen_status()", &[]).unwrap().get(0);
    assert_eq!(last, None);
    let id: i64 = db.query_one("SELECT snowflake_next()", &[]).unwrap().get(0);
    let last: Option<i64> = db.query_one("SELECT last_id FROM pg_idgen_status()", &[]).unwrap().get(0);
    assert_eq!(last, Some(id));
}

/// Claim: a data directory whose mark was written by pg_idgen 0.2 (one file, a bare number, no
/// copy) starts under this version, converts the file and writes its copy, and with the clock 60 s
/// behind continues above every earlier id.
#[test]
fn a_mark_file_of_version_0_2_is_taken_and_converted() {
    let cluster = started_cluster_on_fake_clock("mark-0-2", &["pg_idgen.node_id = 10"]);
    let mut taken = take(&cluster, 0);
    cluster.stop();
    let text = std::fs::read_to_string(cluster.data_file("pg_idgen.mark")).unwrap();
    // Version 0.2 wrote one number: the latest mark.
    let mark_us: i64 = text.lines().filter_map(|l| l.strip_prefix("mark_us ")?.split_whitespace().last()?.parse().ok()).max().expect("mark_us lines");
    std::fs::write(cluster.data_file("pg_idgen.mark"), format!("{mark_us}\n")).unwrap();
    std::fs::remove_dir_all(cluster.data_file("pg_idgen")).unwrap();
    cluster.set_clock_offset(-60);
    cluster.start();
    assert!(cluster.log().contains("converting the high-water mark file of version 0.2"), "log:\n{}", cluster.log());
    let copy = std::fs::read_to_string(cluster.data_file("pg_idgen/mark")).expect("the copy was written");
    assert!(copy.starts_with("pg_idgen mark 1\n"), "{copy}");
    taken.extend(take(&cluster, 1));
    assert_ids_unique_and_ordered(&mut cluster.connect(), "from_0_2", &taken);
}

/// Claim: moving one family far ahead (`uuid_v7_advance_past` to an hour from now) moves no other:
/// after a restart, snowflake ids and ObjectIds still carry the current time, and UUIDv7s continue
/// above the given one.
#[test]
fn advancing_one_family_leaves_the_others_alone() {
    let cluster = started_cluster("advance-one", &["pg_idgen.node_id = 11"]);
    let mut db = cluster.connect();
    let ahead: String = db.query_one("SELECT uuid_v7_min(clock_timestamp() + interval '1 hour')::text", &[]).unwrap().get(0);
    db.execute("SELECT uuid_v7_advance_past($1::text::uuid)", &[&ahead]).unwrap();
    cluster.stop();
    cluster.start();
    let row = cluster
        .connect()
        .query_one(
            "SELECT abs(extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp()))::float8,
                    abs(extract(epoch FROM objectid_timestamp(objectid_gen()) - clock_timestamp()))::float8,
                    uuid_v7_next() > $1::text::uuid",
            &[&ahead],
        )
        .unwrap();
    let (snowflake_off, objectid_off, uuid_above): (f64, f64, bool) = (row.get(0), row.get(1), row.get(2));
    assert!(snowflake_off < 2.0, "snowflake ids are {snowflake_off} s off the wall clock");
    assert!(objectid_off < 2.0, "ObjectIds are {objectid_off} s off the wall clock");
    assert!(uuid_above, "UUIDv7s continue above the one advanced past");
}

/// Claim: a server that never made a snowflake id (no node id; only UUIDv7s and ObjectIds) shows
/// no last_id, and may start later with a node id and any epoch: there are no snowflake ids to be
/// above.
#[test]
fn a_server_without_snowflake_ids_may_choose_its_epoch() {
    let cluster = started_cluster("no-snowflake", &[]);
    let mut db = cluster.connect();
    let last: Option<i64> = db.query_one("SELECT last_id FROM pg_idgen_status()", &[]).unwrap().get(0);
    assert_eq!(last, None, "a new server has handed out no id");
    db.batch_execute("SELECT uuid_v7_next(), objectid_gen() FROM generate_series(1, 1000)").unwrap();
    wait_for_a_mark_after_now(&mut db);
    cluster.stop();
    cluster.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 12", "pg_idgen.epoch = '2026-01-01 00:00:00+00'"]);
    cluster.start();
    let id: i64 = cluster.connect().query_one("SELECT snowflake_next()", &[]).unwrap().get(0);
    assert!(id > 0);
}

/// Waits until the clock worker has moved the durable mark after what was just done (it moves it
/// every half clock_reserve, 2.5 s by default): a test whose claim needs the mark to record the
/// ids made must not go on before it does, or it would pass without testing its claim.
fn wait_for_a_mark_after_now(db: &mut Client) {
    let now: String = db.query_one("SELECT clock_timestamp()::text", &[]).unwrap().get(0);
    let deadline = Instant::now() + scaled(Duration::from_secs(15));
    let moved = "SELECT coalesce(mark_advanced_at > $1::text::timestamptz, false) FROM pg_idgen_status()";
    while !db.query_one(moved, &[&now]).unwrap().get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "the clock worker did not move the mark within {:?}", scaled(Duration::from_secs(15)));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Claim: the record of what ids were made says snowflake ids exist as soon as they may: a server
/// killed right after its first snowflake ids, and a server without a node id that only advanced
/// its snowflake floor past a restored id, both refuse to start later with an epoch that would
/// make smaller ids.
#[test]
fn snowflake_ids_made_just_before_a_crash_or_advanced_past_still_count() {
    let later_epoch = "pg_idgen.epoch = '2026-01-01 00:00:00+00'";
    let crashed = started_cluster("made-then-crash", &["pg_idgen.node_id = 13"]);
    crashed.connect().batch_execute("SELECT snowflake_next() FROM generate_series(1, 100)").unwrap();
    crashed.kill9();
    crashed.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 13", later_epoch]);
    let log = crashed.try_start().expect_err("the ids made before the crash are larger");
    assert!(log.contains("FATAL:  changed pg_idgen.epoch would make snowflake ids smaller"), "{log}");

    let advanced = started_cluster("advanced-no-node", &[]);
    advanced.connect().batch_execute("SELECT snowflake_advance_past(snowflake_min_id(clock_timestamp()))").unwrap();
    advanced.stop();
    advanced.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 14", later_epoch]);
    let log = advanced.try_start().expect_err("the floor was advanced past a snowflake id");
    assert!(log.contains("FATAL:  changed pg_idgen.epoch would make snowflake ids smaller"), "{log}");
}

/// Claim: a standby that cannot write a replayed mark to its files (its `pg_idgen/` made
/// read-only) stops recovery with FATAL naming the file, rather than replay on with limits a
/// restart would forget; once the directory is writable again it starts and catches up, and,
/// promoted with its clock 30 s behind and the same node id, hands out only ids greater than
/// every id its old primary handed out.
#[test]
fn a_standby_that_cannot_write_a_mark_stops_rather_than_forget_it() {
    let primary = started_cluster("unwritable-primary", &["pg_idgen.node_id = 16"]);
    let mut taken = take(&primary, 0);
    let mut standby = Cluster::standby_of("unwritable-standby", &primary);
    standby.use_fake_clock();
    standby.set_clock_offset(-30);
    standby.configure(&["shared_preload_libraries = 'pg_idgen'", "pg_idgen.node_id = 16"]);
    standby.start();
    let copy_dir = standby.data_file("pg_idgen");
    chmod(&copy_dir, "0555");
    // Long enough for the primary to move its marks (every half clock_reserve) twice.
    taken.extend(Load::start(&primary, 1, 0).stop_after(Duration::from_millis(6000)));
    let deadline = Instant::now() + scaled(Duration::from_secs(30));
    while standby.data_file("postmaster.pid").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!standby.data_file("postmaster.pid").exists(), "the standby replays on:\n{}", standby.log());
    let log = standby.log();
    assert!(log.contains("FATAL:  could not keep a replayed high-water mark: could not write file \"pg_idgen/mark\": Permission denied"), "{log}");

    chmod(&copy_dir, "0700");
    standby.start();
    taken.extend(take(&primary, 0));
    let primary_lsn: String = primary.connect().query_one("SELECT pg_current_wal_lsn()::text", &[]).unwrap().get(0);
    let mut replica = standby.connect();
    let deadline = Instant::now() + scaled(Duration::from_secs(30));
    while !replica.query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&primary_lsn]).unwrap().get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "the standby did not catch up");
        std::thread::sleep(Duration::from_millis(100));
    }
    primary.stop();
    standby.promote();
    taken.extend(take(&standby, 1));
    assert_ids_unique_and_ordered(&mut standby.connect(), "unwritable", &taken);
}

fn chmod(path: &std::path::Path, mode: &str) {
    assert!(Command::new("chmod").args([mode, path.to_str().unwrap()]).status().unwrap().success());
}
