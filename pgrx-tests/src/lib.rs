//! Throwaway PostgreSQL 15 clusters for system tests.
//!
//! A cluster runs as the `postgres` user (the tests run as root, which PostgreSQL refuses), in
//! its own directory under `$PG_IDGEN_WORK` (default `/tmp/pg_idgen`), on 127.0.0.1 and a port
//! the test chooses. Dropping a `Cluster` stops it and removes its files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
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
