//! Throwaway PostgreSQL 15 clusters for system tests.
//!
//! A cluster runs as the `postgres` user (the tests run as root, which PostgreSQL refuses), in
//! its own directory under `$PG_IDGEN_WORK` (default `/tmp/pg_idgen`), on 127.0.0.1 and a port
//! the test chooses. Dropping a `Cluster` stops it and removes its files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

pub use postgres::{Client, NoTls};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

pub struct Cluster {
    pub dir: PathBuf,
    pub port: u16,
}

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

fn bin(name: &str) -> String {
    format!("{PG_BIN}/{name}")
}

impl Cluster {
    /// A new, empty cluster (initdb), not started.
    pub fn init(name: &str, port: u16) -> Cluster {
        let cluster = Cluster::at(name, port);
        let _ = fs::remove_dir_all(&cluster.dir);
        let data = cluster.data();
        let out = as_postgres(bin("initdb").as_str(), &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"]);
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        cluster.append_postgresql_conf("include_if_exists = 'cluster.conf'");
        cluster
    }

    /// A cluster whose data directory something else creates (pg_basebackup).
    pub fn at(name: &str, port: u16) -> Cluster {
        let root = work_root();
        let out = as_postgres("mkdir", &["-p", root.to_str().unwrap()]);
        assert!(out.status.success(), "cannot create {}: {}", root.display(), String::from_utf8_lossy(&out.stderr));
        Cluster { dir: root.join(format!("system-{name}")), port }
    }

    pub fn data(&self) -> String {
        self.dir.join("data").to_string_lossy().into_owned()
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
            "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nfsync = off\n",
            self.port,
            self.data()
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

    /// Starts the server and waits until it accepts connections; on failure, the server log.
    pub fn try_start(&self) -> Result<(), String> {
        let log = self.log_path();
        let _ = fs::remove_file(&log);
        let out = as_postgres(
            bin("pg_ctl").as_str(),
            &["-D", &self.data(), "-l", log.to_str().unwrap(), "-w", "-t", "60", "start"],
        );
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
        let _ = as_postgres(bin("pg_ctl").as_str(), &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    /// Kills the postmaster with SIGKILL, as a crash would, and waits for its backends to go.
    pub fn kill9(&self) {
        let pid_file = fs::read_to_string(Path::new(&self.data()).join("postmaster.pid")).expect("postmaster.pid");
        let pid = pid_file.lines().next().unwrap().trim().to_string();
        let out = Command::new("kill").args(["-9", &pid]).output().unwrap();
        assert!(out.status.success(), "kill -9 {pid}");
        // Backends notice the postmaster's death and exit; the next start needs them gone.
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let busy = Command::new("pgrep").args(["-f", &format!("postgres: .*{}", self.port)]).output().unwrap();
            let alive = Command::new("kill").args(["-0", &pid]).output().unwrap().status.success();
            if !alive && busy.stdout.is_empty() {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts the server after a crash: retries while the old processes let go of shared memory.
    pub fn restart_after_crash(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
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
        let config = format!("host=127.0.0.1 port={} user=postgres dbname={database}", self.port);
        let deadline = Instant::now() + Duration::from_secs(30);
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

    /// Makes this cluster a streaming standby of `primary` (pg_basebackup -R) and starts it.
    pub fn standby_of(name: &str, port: u16, primary: &Cluster) -> Cluster {
        let standby = Cluster::at(name, port);
        let _ = fs::remove_dir_all(&standby.dir);
        let out = as_postgres(
            bin("pg_basebackup").as_str(),
            &["-h", "127.0.0.1", "-p", &primary.port.to_string(), "-U", "postgres", "-D", &standby.data(), "-R", "-X", "stream"],
        );
        assert!(out.status.success(), "pg_basebackup failed: {}", String::from_utf8_lossy(&out.stderr));
        standby
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_postgres(bin("pg_ctl").as_str(), &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A cluster with pg_idgen preloaded, the given extra settings, started, extension created.
pub fn started_cluster(name: &str, port: u16, settings: &[&str]) -> Cluster {
    let cluster = Cluster::init(name, port);
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
    cluster
        .connect()
        .batch_execute(&format!("CREATE TABLE {table} (client int, n int, id {sql_type}, made_at timestamptz)"))
        .unwrap();
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

    let mut db = cluster.connect();
    let row = db.query_one(&format!("SELECT count(*), count(DISTINCT id) FROM {table}"), &[]).unwrap();
    let (total, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(total, (clients * per_client) as i64, "{table}: every id was stored");
    assert_eq!(distinct, total, "{table}: every id is distinct");
    let not_increasing: i64 = db
        .query_one(
            &format!(
                "SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY client ORDER BY n) AS previous FROM {table}) AS p
                  WHERE id <= previous"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(not_increasing, 0, "{table}: each client's ids strictly increase");
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
