//! Throwaway PostgreSQL clusters for system tests, of the major that `$PG_CONFIG` names.
//!
//! A cluster runs as the `postgres` user (the tests run as root, which PostgreSQL refuses), in
//! its own directory under `$PG_IDGEN_WORK` (default `/tmp/pg_idgen`). It listens only on a Unix
//! socket in its data directory, named by a port the harness assigns (`next_port`). Why no TCP: a
//! port in the ephemeral range can be held by any client connection of the moment, and the server
//! would not start. Dropping a `Cluster` stops it and removes its files.
//!
//! The PostgreSQL binaries are found through `$PG_CONFIG --bindir` (scripts/lib.sh sets it).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

pub use postgres::{Client, NoTls};

pub mod manual;

/// An upper bound on how long something a test times may take, given as on a machine that runs
/// this suite alone, stretched by `$PG_IDGEN_TEST_TIME_SCALE` (a number ≥ 1; scripts/test.sh sets
/// it when the system suites of several majors share the cores). Why only upper bounds: a lower
/// bound is a promise of the product (a timeout honoured, a lease outwaited) and never stretches.
pub fn scaled(limit: Duration) -> Duration {
    let scale =
        match std::env::var("PG_IDGEN_TEST_TIME_SCALE") {
            Ok(text) => text.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 1.0).unwrap_or_else(|| {
                panic!("PG_IDGEN_TEST_TIME_SCALE is {text:?}: a number of at least 1 (how much longer than alone tests may take)")
            }),
            Err(_) => 1.0,
        };
    limit.mul_f64(scale)
}

/// Processes held with SIGSTOP (a frozen server, a worker that stays away) for as long as the value
/// lives; dropped, it lets them go on (SIGCONT): a failed assertion must not leave them stopped, or
/// the cleanup (closing connections, stopping the server) would wait for them for good. Why no
/// check of `kill`'s outcome: a process of the list may have ended meanwhile (an autovacuum worker,
/// a closed connection's backend), and `kill` still signals the others.
pub struct Stopped(Vec<String>);

impl Stopped {
    pub fn processes(pids: Vec<String>) -> Stopped {
        let stopped = Stopped(pids);
        signal(&stopped.0, "STOP");
        stopped
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(&self.0, "CONT");
    }
}

fn signal(pids: &[String], signal: &str) {
    let _ = Command::new("kill").arg(format!("-{signal}")).args(pids).output();
}

/// What `$PG_CONFIG OPTION` prints.
fn pg_config(option: &str) -> String {
    // Why not the pg_config on the PATH: Debian's picks the newest PostgreSQL installed, which
    // need not be the one the extension was built for.
    let pg_config =
        std::env::var("PG_CONFIG").expect("PG_CONFIG names the pg_config of the PostgreSQL under test: run through ./dev test, or set it");
    let out = Command::new(&pg_config).arg(option).output().unwrap_or_else(|e| panic!("cannot run {pg_config}: {e}"));
    assert!(out.status.success(), "{pg_config} {option} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The directory of the PostgreSQL binaries.
pub fn pg_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| pg_config("--bindir"))
}

/// The major version of the PostgreSQL under test: "18" of "PostgreSQL 18.6".
fn pg_major() -> &'static str {
    static MAJOR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MAJOR.get_or_init(|| {
        let version = pg_config("--version");
        version.trim_start_matches("PostgreSQL ").split(|c: char| !c.is_ascii_digit()).next().unwrap().to_string()
    })
}

/// A port for a new cluster, unique within this test process. Why a plain counter is enough: each
/// cluster's socket lives in its own directory, so two clusters never compete for a socket name
/// (also when the suites of two majors run at once), and no cluster listens on TCP.
fn next_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(54400);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

pub struct Cluster {
    pub dir: PathBuf,
    pub port: u16,
    /// The libfaketime timestamp file, when the server runs on a fake wall clock.
    fake_clock: Option<PathBuf>,
    /// `NAME=value` assignments added to the server's environment (`set_environment`).
    environment: Vec<String>,
}

/// libfaketime from Debian's `libfaketime` package (scripts/lib.sh installs `faketime`).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn work_root() -> PathBuf {
    PathBuf::from(std::env::var("PG_IDGEN_WORK").unwrap_or_else(|_| "/tmp/pg_idgen".into()))
}

/// Runs a command as the `postgres` user.
fn as_postgres(program: &str, args: &[&str]) -> Output {
    Command::new("runuser")
        // Why: with RUST_BACKTRACE set, the server's Rust errors carry a backtrace in DETAIL.
        .env_remove("RUST_BACKTRACE")
        .args(["-u", "postgres", "--", program])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

pub fn bin(name: &str) -> String {
    format!("{}/{name}", pg_bin())
}

impl Cluster {
    /// A new, empty cluster (initdb), not started.
    pub fn init(name: &str) -> Cluster {
        let cluster = Cluster::at(name);
        let _ = fs::remove_dir_all(&cluster.dir);
        let data = cluster.data();
        let out = as_postgres(bin("initdb").as_str(), &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"]);
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        cluster.append_postgresql_conf("include_if_exists = 'cluster.conf'");
        cluster
    }

    /// A cluster whose data directory something else creates (pg_basebackup).
    pub fn at(name: &str) -> Cluster {
        let root = work_root();
        let out = as_postgres("mkdir", &["-p", root.to_str().unwrap()]);
        assert!(out.status.success(), "cannot create {}: {}", root.display(), String::from_utf8_lossy(&out.stderr));
        // Why the major in the name: ./dev test runs the suites of two majors at once, and the
        // tests find a server's processes by its name (pgrep). PG_IDGEN_TEST_TAG tells apart two
        // checkouts that run the same suite on one machine at once.
        let tag = std::env::var("PG_IDGEN_TEST_TAG").map(|t| format!("-{t}")).unwrap_or_default();
        Cluster { dir: root.join(format!("system{tag}-pg{}-{name}", pg_major())), port: next_port(), fake_clock: None, environment: Vec::new() }
    }

    pub fn data(&self) -> String {
        self.dir.join("data").to_string_lossy().into_owned()
    }

    /// The cluster's name, unique among the tests: its directory's name, and its `cluster_name`,
    /// which every process of the server carries in its title (`postgres: NAME: …`).
    fn name(&self) -> String {
        self.dir.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// Where the server's socket is: the host to give clients (`-h`, `host=`).
    pub fn socket_dir(&self) -> String {
        self.data()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn append_postgresql_conf(&self, line: &str) {
        let path = Path::new(&self.data()).join("postgresql.conf");
        let mut text = fs::read_to_string(&path).expect("postgresql.conf");
        text.push_str(line);
        text.push('\n');
        fs::write(&path, text).expect("write postgresql.conf");
    }

    /// Replaces the cluster's own settings (the port and sockets are always set).
    pub fn configure(&self, lines: &[&str]) {
        let mut text = format!(
            "port = {}\nlisten_addresses = ''\nunix_socket_directories = '{}'\ncluster_name = '{}'\nfsync = off\n",
            self.port,
            self.socket_dir(),
            self.name()
        );
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        let path = Path::new(&self.data()).join("cluster.conf");
        fs::write(&path, text).expect("write cluster.conf");
        let out = Command::new("chown").args(["-R", "postgres:postgres", self.dir.to_str().unwrap()]).output().unwrap();
        assert!(out.status.success());
    }

    /// Runs the server on a fake wall clock from its next start on: libfaketime, preloaded into
    /// every server process, adds the offset in a file to the wall clock and leaves the monotonic
    /// clock real. `set_clock_offset` steps the wall clock of all of them at once. The offset
    /// starts at zero.
    pub fn use_fake_clock(&mut self) {
        assert!(Path::new(LIBFAKETIME).exists(), "{LIBFAKETIME} is missing: apt-get install faketime");
        self.fake_clock = Some(self.dir.join("faketime"));
        self.set_clock_offset(0);
    }

    /// Sets the server's wall clock `seconds` away from the real time (negative: behind).
    pub fn set_clock_offset(&self, seconds: i64) {
        self.set_clock_offset_fraction(seconds as f64);
    }

    /// The same, to a fraction of a second (libfaketime reads `+0.9` as 900 ms).
    pub fn set_clock_offset_fraction(&self, seconds: f64) {
        let path = self.fake_clock.as_ref().expect("use_fake_clock first");
        // Why write and rename: every clock read opens the file, and must never see it half written.
        let temp = path.with_extension("tmp");
        fs::write(&temp, format!("{seconds:+}\n")).expect("write the faketime file");
        fs::rename(&temp, path).expect("rename the faketime file");
    }

    /// Adds `name=value` to the environment of the server from its next start on. (The harness
    /// starts servers without RUST_BACKTRACE otherwise.)
    pub fn set_environment(&mut self, name: &str, value: &str) {
        self.environment.push(format!("{name}={value}"));
    }

    /// Starts the server and waits until it accepts connections; on failure, the server log.
    pub fn try_start(&self) -> Result<(), String> {
        let log = self.log_path();
        let _ = fs::remove_file(&log);
        let mut command: Vec<String> = vec!["env".into()];
        command.extend(self.environment.iter().cloned());
        if let Some(file) = &self.fake_clock {
            // Why no cache: a step must reach every process at once, as a real one does.
            command.extend([
                format!("LD_PRELOAD={LIBFAKETIME}"),
                format!("FAKETIME_TIMESTAMP_FILE={}", file.display()),
                "FAKETIME_DONT_FAKE_MONOTONIC=1".into(),
                "FAKETIME_NO_CACHE=1".into(),
            ]);
        }
        command.extend([bin("pg_ctl"), "-D".into(), self.data(), "-l".into(), log.to_string_lossy().into_owned()]);
        command.extend(["-w", "-t", "60", "start"].map(String::from));
        let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
        let out = as_postgres(&command[0], &args);
        if out.status.success() {
            Ok(())
        } else {
            Err(self.log())
        }
    }

    pub fn start(&self) {
        if let Err(log) = self.try_start() {
            panic!("server did not start:\n{log}");
        }
    }

    pub fn stop(&self) {
        // Why 300 s and not pg_ctl's 60: on a crowded machine (two suites at once) a fast shutdown
        // once took longer, and the next start found the old postmaster. The status is left
        // unchecked, as before.
        let _ = as_postgres(bin("pg_ctl").as_str(), &["-D", &self.data(), "-m", "fast", "-w", "-t", "300", "stop"]);
    }

    /// A fast shutdown (`pg_ctl stop -m fast`) that must end within `limit`: how long it took, or
    /// pg_ctl's complaint. The harness's `stop` waits much longer; this one is for tests whose
    /// claim is that nothing holds a shutdown up.
    pub fn stop_fast_within(&self, limit: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let seconds = scaled(limit).as_secs().max(1).to_string();
        let out = as_postgres(bin("pg_ctl").as_str(), &["-D", &self.data(), "-m", "fast", "-w", "-t", &seconds, "stop"]);
        match out.status.success() {
            true => Ok(started.elapsed()),
            false => Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))),
        }
    }

    /// Promotes a standby and waits until it accepts writes.
    pub fn promote(&self) {
        let out = as_postgres(bin("pg_ctl").as_str(), &["-D", &self.data(), "-w", "promote"]);
        assert!(out.status.success(), "pg_ctl promote failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Kills the postmaster with SIGKILL, as a crash would, and waits for its backends to go.
    pub fn kill9(&self) {
        let pid_file = fs::read_to_string(Path::new(&self.data()).join("postmaster.pid")).expect("postmaster.pid");
        let pid = pid_file.lines().next().unwrap().trim().to_string();
        let out = Command::new("kill").args(["-9", &pid]).output().unwrap();
        assert!(out.status.success(), "kill -9 {pid}");
        // Backends notice the postmaster's death and exit; the next start needs them gone.
        let deadline = Instant::now() + scaled(Duration::from_secs(30));
        while Instant::now() < deadline {
            let busy = Command::new("pgrep").args(["-f", &format!("^postgres: {}: ", self.name())]).output().unwrap();
            let alive = Command::new("kill").args(["-0", &pid]).output().unwrap().status.success();
            if !alive && busy.stdout.is_empty() {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts the server after a crash: retries while the old processes let go of shared memory.
    pub fn restart_after_crash(&self) {
        let deadline = Instant::now() + scaled(Duration::from_secs(60));
        loop {
            match self.try_start() {
                Ok(()) => return,
                Err(log) if Instant::now() > deadline => panic!("server did not restart:\n{log}"),
                Err(_) => thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// A new connection to the `postgres` database.
    pub fn connect(&self) -> Client {
        self.connect_to("postgres")
    }

    pub fn connect_to(&self, database: &str) -> Client {
        self.connect_as(database, "postgres")
    }

    pub fn connect_as(&self, database: &str, user: &str) -> Client {
        let config = format!("host={} port={} user={user} dbname={database}", self.socket_dir(), self.port);
        let deadline = Instant::now() + scaled(Duration::from_secs(30));
        loop {
            match Client::connect(&config, NoTls) {
                Ok(client) => return client,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("cannot connect to port {}: {e}", self.port),
            }
        }
    }

    /// Runs `pg_dump` of `database` into a file in the cluster's directory and returns its path.
    pub fn dump(&self, database: &str) -> PathBuf {
        self.dump_with(database, &[])
    }

    /// The same with more `pg_dump` options (`-Fc`: a dump for `pg_restore`).
    pub fn dump_with(&self, database: &str, options: &[&str]) -> PathBuf {
        let file = self.dir.join(format!("{database}.sql"));
        let out = Command::new(bin("pg_dump"))
            .args(["-h", &self.socket_dir(), "-p", &self.port.to_string(), "-U", "postgres", "-f", file.to_str().unwrap()])
            .args(options)
            .arg(database)
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));
        file
    }

    /// Runs `pg_restore` of a dump made with `-Fc` into `database`, with `options` (`--clean`),
    /// stopping at the first error.
    pub fn pg_restore(&self, file: &Path, database: &str, options: &[&str]) {
        let out = Command::new(bin("pg_restore"))
            .args(["--exit-on-error", "-h", &self.socket_dir(), "-p", &self.port.to_string(), "-U", "postgres", "-d", database])
            .args(options)
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_restore: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Runs an SQL file (a dump) with psql into `database`, stopping at the first error.
    pub fn restore(&self, file: &Path, database: &str) {
        let out = Command::new(bin("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", &self.socket_dir(), "-p", &self.port.to_string(), "-U", "postgres"])
            .args(["-d", database, "-f", file.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "restore: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A file in the data directory, as a path.
    pub fn data_file(&self, name: &str) -> PathBuf {
        Path::new(&self.data()).join(name)
    }

    /// Makes this cluster a streaming standby of `primary` (pg_basebackup -R) and starts it.
    pub fn standby_of(name: &str, primary: &Cluster) -> Cluster {
        Cluster::base_backup_of(name, primary, true)
    }

    /// A copy of `primary` made with pg_basebackup (WAL streamed along); a standby of it if
    /// `standby`, else a server of its own once started. Not started.
    pub fn base_backup_of(name: &str, primary: &Cluster, standby: bool) -> Cluster {
        let copy = Cluster::at(name);
        let _ = fs::remove_dir_all(&copy.dir);
        let (host, port, data) = (primary.socket_dir(), primary.port.to_string(), copy.data());
        let mut args = vec!["-h", &host, "-p", &port, "-U", "postgres", "-D", &data, "-X", "stream"];
        if standby {
            args.push("-R");
        }
        let out = as_postgres(bin("pg_basebackup").as_str(), &args);
        assert!(out.status.success(), "pg_basebackup failed: {}", String::from_utf8_lossy(&out.stderr));
        copy
    }

    /// Runs pg_upgrade from `old` (stopped) into this cluster (initdb'd, configured, stopped), as
    /// the postgres user in a directory of its own; on failure, its output.
    pub fn pg_upgrade_from(&self, old: &Cluster) -> Result<(), String> {
        let work = self.dir.join("pg_upgrade");
        let _ = fs::create_dir_all(&work);
        let out = Command::new("chown").args(["-R", "postgres:postgres", self.dir.to_str().unwrap()]).output().unwrap();
        assert!(out.status.success());
        let command = format!(
            "cd {} && {bin}/pg_upgrade -b {bin} -B {bin} -d {} -D {} -p {} -P {} -s {}",
            work.display(),
            old.data(),
            self.data(),
            old.port,
            self.port,
            work.display(),
            bin = pg_bin()
        );
        let out = as_postgres("sh", &["-c", &command]);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_postgres(bin("pg_ctl").as_str(), &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A cluster with pg_idgen preloaded, the given extra settings, started, extension created.
pub fn started_cluster(name: &str, settings: &[&str]) -> Cluster {
    start_with_extension(Cluster::init(name), settings)
}

/// The same, on a fake wall clock (see `Cluster::use_fake_clock`), at first set to the real time.
pub fn started_cluster_on_fake_clock(name: &str, settings: &[&str]) -> Cluster {
    started_cluster_with_clock_offset(name, 0, settings)
}

/// The same, with the fake wall clock `seconds` away from the real time from the first start on.
pub fn started_cluster_with_clock_offset(name: &str, seconds: i64, settings: &[&str]) -> Cluster {
    let mut cluster = Cluster::init(name);
    cluster.use_fake_clock();
    cluster.set_clock_offset(seconds);
    start_with_extension(cluster, settings)
}

/// The same, with `NAME=value` pairs added to the server's environment.
pub fn started_cluster_with_environment(name: &str, environment: &[(&str, &str)], settings: &[&str]) -> Cluster {
    let mut cluster = Cluster::init(name);
    for (variable, value) in environment {
        cluster.set_environment(variable, value);
    }
    start_with_extension(cluster, settings)
}

fn start_with_extension(cluster: Cluster, settings: &[&str]) -> Cluster {
    let mut lines = vec!["shared_preload_libraries = 'pg_idgen'"];
    lines.extend_from_slice(settings);
    cluster.configure(&lines);
    cluster.start();
    cluster.connect().batch_execute("CREATE EXTENSION pg_idgen").expect("CREATE EXTENSION");
    cluster
}

/// The SQLSTATE of a failed statement.
pub fn sqlstate(error: &postgres::Error) -> String {
    error.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {error}"))
}

/// Has `clients` connections take `per_client` ids each from `generator` (an SQL expression of
/// type `sql_type`) at full speed, half through `INSERT … SELECT` and half fetched by the client
/// (as text) and stored back, into a new table `table (client, n, id, made_at)`. Asserts that the
/// stored rows have no duplicate and that each client's ids strictly increase in the order they
/// were made.
pub fn generate_concurrently(cluster: &Cluster, table: &str, generator: &str, sql_type: &str, clients: i32, per_client: i32) {
    const BATCH: i32 = 10_000;
    cluster.connect().batch_execute(&format!("CREATE TABLE {table} (client int, n int, id {sql_type}, made_at timestamptz)")).unwrap();
    let insert_made = format!(
        "INSERT INTO {table} SELECT $1, n, {generator}, clock_timestamp()
           FROM generate_series($2::int, $2::int + $3::int - 1) AS n"
    );
    let fetch = format!("SELECT ({generator})::text, clock_timestamp()::text FROM generate_series(1, $1::int)");
    let store_fetched = format!(
        "INSERT INTO {table} SELECT $1, $2::int + o::int - 1, id::{sql_type}, made::timestamptz
           FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(id, made, o)"
    );
    thread::scope(|scope| {
        for client in 0..clients {
            let mut db = cluster.connect();
            let (insert_made, fetch, store_fetched) = (&insert_made, &fetch, &store_fetched);
            scope.spawn(move || {
                for start in (0..per_client).step_by(BATCH as usize) {
                    let batch = BATCH.min(per_client - start);
                    if (start / BATCH) % 2 == 0 {
                        db.execute(insert_made, &[&client, &start, &batch]).unwrap();
                    } else {
                        let rows = db.query(fetch, &[&batch]).unwrap();
                        let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                        let made: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
                        db.execute(store_fetched, &[&client, &start, &ids, &made]).unwrap();
                    }
                }
            });
        }
    });

    assert_unique_and_increasing(&mut cluster.connect(), table, "id", (clients * per_client) as i64);
}

/// The name of family `i`'s column inside `assert_ids_unique_and_ordered`'s insert.
fn column_alias(i: usize) -> String {
    format!("f{i}")
}

/// Asserts over the stored rows of `table (client, n, column, …)`: `expected` rows, no duplicate
/// in `column`, and each client's values strictly increasing in the order `n` it made them.
fn assert_unique_and_increasing(db: &mut Client, table: &str, column: &str, expected: i64) {
    let row = db.query_one(&format!("SELECT count(*), count(DISTINCT {column}) FROM {table}"), &[]).unwrap();
    let (count, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(count, expected, "{table}: every {column} was stored");
    assert_eq!(distinct, count, "{table}: every {column} is distinct");
    let not_increasing: i64 = db
        .query_one(
            &format!(
                "SELECT count(*) FROM (SELECT {column} AS id, lag({column}) OVER (PARTITION BY client ORDER BY n) AS previous
                                         FROM {table}) AS p
                  WHERE id <= previous"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(not_increasing, 0, "{table}: each client's {column}s strictly increase");
}

/// Two clients take turns, `rounds` times: A takes an id, then B. B's id must be greater: the
/// order holds across backends, not only within one. Compares in SQL, in the type's own order.
pub fn assert_cross_backend_order(cluster: &Cluster, generator: &str, sql_type: &str, rounds: usize) {
    let mut a = cluster.connect();
    let mut b = cluster.connect();
    let take = format!("SELECT ({generator})::text");
    let compare = format!("SELECT $1::text::{sql_type} < $2::text::{sql_type}");
    for round in 0..rounds {
        let first: String = a.query_one(&take, &[]).unwrap().get(0);
        let second: String = b.query_one(&take, &[]).unwrap().get(0);
        let ordered: bool = a.query_one(&compare, &[&first, &second]).unwrap().get(0);
        assert!(ordered, "{generator}, round {round}: B's {second} is not greater than A's earlier {first}");
    }
}

/// A time-based generator the load takes ids from: its column name in the result table, the SQL
/// expression that makes an id, and the id's SQL type.
pub struct Family {
    pub column: &'static str,
    pub expression: &'static str,
    pub sql_type: &'static str,
}

/// Every time-based family: what `Load` takes and `assert_ids_unique_and_ordered` checks. A new
/// family adds its line here.
pub const TIME_BASED: &[Family] = &[
    Family { column: "snowflake", expression: "snowflake_next()", sql_type: "bigint" },
    Family { column: "uuid", expression: "uuid_v7_next()", sql_type: "uuid" },
    Family { column: "objectid", expression: "objectid_next()", sql_type: "objectid" },
];

/// The ids one client took from every family of `TIME_BASED`, in the order it took them.
pub struct ClientIds {
    /// Which group the client belongs to (a phase of the test: before or after a restart, …).
    pub phase: i32,
    /// One row per statement row: the ids of the families in `TIME_BASED` order, as text.
    pub ids: Vec<Vec<String>>,
    /// When each batch came back: the gaps show whether generation stopped.
    pub batch_times: Vec<Instant>,
    /// The error that ended the client, if one did (a killed server, …).
    pub error: Option<String>,
}

impl ClientIds {
    /// The longest time between two batches coming back.
    pub fn longest_gap(&self) -> Duration {
        self.batch_times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default()
    }
}

/// Clients that take an id of every family of `TIME_BASED` per row, 1,000 rows a statement, as
/// fast as they can, until stopped or until the server fails them.
pub struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    clients: Vec<thread::JoinHandle<ClientIds>>,
}

impl Load {
    pub fn start(cluster: &Cluster, clients: usize, phase: i32) -> Load {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let columns: Vec<String> = TIME_BASED.iter().map(|f| format!("({})::text", f.expression)).collect();
        let statement = format!("SELECT {} FROM generate_series(1, 1000)", columns.join(", "));
        let clients = (0..clients)
            .map(|_| {
                let mut db = cluster.connect();
                let stop = stop.clone();
                let statement = statement.clone();
                thread::spawn(move || {
                    let mut taken = ClientIds { phase, ids: Vec::new(), batch_times: Vec::new(), error: None };
                    while !stop.load(Ordering::Relaxed) {
                        match db.query(&statement, &[]) {
                            Ok(rows) => {
                                taken.ids.extend(rows.iter().map(|r| (0..TIME_BASED.len()).map(|i| r.get(i)).collect()));
                                taken.batch_times.push(Instant::now());
                            }
                            Err(e) => {
                                taken.error = Some(e.to_string());
                                break;
                            }
                        }
                    }
                    taken
                })
            })
            .collect();
        Load { stop, clients }
    }

    /// Lets the clients run for `duration`, then stops them.
    pub fn stop_after(self, duration: Duration) -> Vec<ClientIds> {
        thread::sleep(duration);
        self.stop()
    }

    /// Stops the clients and returns what each took.
    pub fn stop(self) -> Vec<ClientIds> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.clients.into_iter().map(|c| c.join().expect("client thread")).collect()
    }
}

/// Stores the ids the clients took into a new table `table (phase, client, n, <one column per
/// family>)` and asserts, in SQL over the stored rows, for each family of `TIME_BASED`: no
/// duplicate; each client's ids strictly increase; every id of a phase is greater than every id of
/// the phases before it.
pub fn assert_ids_unique_and_ordered(db: &mut Client, table: &str, clients: &[ClientIds]) {
    const CHUNK: usize = 50_000;
    let columns: Vec<String> = TIME_BASED.iter().map(|f| format!("{} {}", f.column, f.sql_type)).collect();
    db.batch_execute(&format!("CREATE TABLE {table} (phase int, client int, n int, {})", columns.join(", "))).unwrap();
    // One text array per family, cast to the family's type in SQL.
    let casts: Vec<String> = TIME_BASED.iter().enumerate().map(|(i, f)| format!("{}::{}", column_alias(i), f.sql_type)).collect();
    let arrays: Vec<String> = (0..TIME_BASED.len()).map(|i| format!("${}::text[]", i + 4)).collect();
    let aliases: Vec<String> = (0..TIME_BASED.len()).map(column_alias).collect();
    let insert = format!(
        "INSERT INTO {table} SELECT $1, $2, $3::int + n::int, {}
           FROM unnest({}) WITH ORDINALITY AS i({}, n)",
        casts.join(", "),
        arrays.join(", "),
        aliases.join(", ")
    );
    let mut total = 0i64;
    for (client, taken) in clients.iter().enumerate() {
        for (chunk_number, chunk) in taken.ids.chunks(CHUNK).enumerate() {
            let first = (chunk_number * CHUNK) as i32;
            let per_family: Vec<Vec<&str>> = (0..TIME_BASED.len()).map(|i| chunk.iter().map(|row| row[i].as_str()).collect()).collect();
            let (phase, client) = (taken.phase, client as i32);
            let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&phase, &client, &first];
            params.extend(per_family.iter().map(|ids| ids as &(dyn postgres::types::ToSql + Sync)));
            db.execute(&insert, &params).unwrap();
            total += chunk.len() as i64;
        }
    }
    assert!(total > 0, "{table}: the clients took no ids");
    for column in TIME_BASED.iter().map(|f| f.column) {
        assert_unique_and_increasing(db, table, column, total);
        // Sorted by id, the phases must never go back: then every id of a phase is greater than
        // every id of the phases before.
        let overlapping: i64 = db
            .query_one(
                &format!(
                    "SELECT count(*) FROM (SELECT phase, lag(phase) OVER (ORDER BY {column}) AS previous FROM {table}) AS p
                      WHERE phase < previous"
                ),
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(overlapping, 0, "{table}: every {column} of a phase is greater than every {column} of the phases before");
    }
}
