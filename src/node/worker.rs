//! The background worker "pg_idgen lease": takes this server's node id lease from the registry
//! (`pg_idgen.node_registry`) and renews it every third of `pg_idgen.node_lease_ttl`, over libpq.
//!
//! It runs only where the registry is set, and only once recovery is over: a standby makes no
//! snowflake ids, and a promoted standby takes a lease of its own (its primary's token is not
//! its own, so it cannot renew its primary's). It has no database connection and no transaction
//! of its own; each remote call has a deadline (`pg_idgen.remote_timeout`, and never past the
//! lease's end). Its state is in shared memory, so a restarted worker goes on with the lease.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::{boot_micros, node_of, snowflake_generator, Phase};
use super::{lease as shared_lease, LeaseState};
use crate::engine::{generators, Generator, Generators};
use crate::remote::{self, Connection, RemoteError};
use crate::settings::{self, Config, LeaseConfig};

/// How soon a failed call is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// The longest the worker sleeps: it also watches the lease's end.
const LONGEST_SLEEP: Duration = Duration::from_millis(200);

/// Registers the worker when a registry is set. Called from `_PG_init` while preloading.
pub fn register() {
    if settings::config().lease.is_none() {
        return;
    }
    BackgroundWorkerBuilder::new("pg_idgen lease")
        .set_type("pg_idgen lease")
        .set_library("pg_idgen")
        .set_function("pg_idgen_lease_worker_main")
        // Why after recovery: see the module's comment.
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

#[pg_guard]
unsafe extern "C-unwind" fn unpublish(_code: i32, _arg: pg_sys::Datum) {
    let lease = shared_lease();
    lease.worker_latch.store(std::ptr::null_mut(), SeqCst);
    lease.worker_pid.store(0, Relaxed);
}

#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn pg_idgen_lease_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let shared = shared_lease();
    let config = settings::config();
    let lease = config.lease.as_ref().expect("registered only with a registry");
    // SAFETY: MyProc is this process's, valid until exit; `unpublish` clears the pointer first.
    unsafe {
        shared.worker_latch.store(&raw mut (*pg_sys::MyProc).procLatch, SeqCst);
        shared.worker_pid.store(pg_sys::MyProcPid, Relaxed);
        pg_sys::before_shmem_exit(Some(unpublish), pg_sys::Datum::from(0));
    }
    log!("pg_idgen lease worker started; node registry {}", remote::describe_conninfo(&lease.registry));
    let mut worker = LeaseWorker::new(config, lease);
    loop {
        worker.look();
        if !crate::sigterm::wait_latch(worker.sleep()) {
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: rereads postgresql.conf in this process (log settings and the like).
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
    }
    // Why exit code 1: the postmaster starts it again (code 0 would unregister it for good).
    // SAFETY: ends this worker process; nothing of it is used after.
    unsafe { pg_sys::proc_exit(1) };
}

struct LeaseWorker {
    /// The lease in shared memory, and the generators' region.
    shared: &'static LeaseState,
    generators: &'static Generators,
    config: &'static Config,
    lease: &'static LeaseConfig,
    registry: String,
    generator: Generator,
    /// The registry's connection, kept between calls; dropped after any failure to reach it.
    connection: Option<Connection>,
    holder: String,
    holder_name: String,
    layout: String,
    /// When to call the registry next (CLOCK_BOOTTIME µs).
    next_call_us: i64,
}

impl LeaseWorker {
    fn new(config: &'static Config, lease: &'static LeaseConfig) -> LeaseWorker {
        let shared = shared_lease();
        let holder = shared.holder.iter().map(|half| format!("{:016x}", half.load(Relaxed))).collect();
        LeaseWorker {
            shared,
            generators: generators(),
            config,
            lease,
            registry: remote::describe_conninfo(&lease.registry),
            generator: snowflake_generator(config),
            connection: None,
            holder,
            holder_name: holder_name(),
            // Numbers only: the text must not depend on the worker's time zone or date style.
            layout: format!(
                "{}/{}/{} bits, {} ms ticks from Unix time {} µs",
                config.layout.time_bits, config.layout.node_bits, config.layout.sequence_bits, config.layout.unit_ms, config.layout.epoch_us
            ),
            next_call_us: 0,
        }
    }

    /// Ends a lease that ran out, and calls the registry when due.
    fn look(&mut self) {
        let lease = self.shared;
        let now_us = boot_micros();
        if let Some(node_id) = node_of(lease.word.load(SeqCst)) {
            if now_us >= lease.deadline_boot_us.load(Relaxed) {
                self.lapse(&format!(
                    "pg_idgen: the lease of node id {node_id} was not renewed within pg_idgen.node_lease_ttl ({} ms); snowflake ids stop until a lease is held again",
                    self.lease.ttl_ms
                ));
            }
        }
        // A call that reached the cap while the lease lasts asks for a renewal now.
        if lease.renew_wanted.swap(false, SeqCst) {
            self.next_call_us = self.next_call_us.min(now_us);
        }
        if now_us < self.next_call_us {
            return;
        }
        match self.call() {
            Ok(again) => {
                remote::registry().succeeded();
                self.next_call_us = if again { 0 } else { boot_micros() + self.lease.ttl_ms as i64 * 1000 / 3 };
            }
            Err(RemoteError::Stopped) => {}
            Err(error) => {
                if matches!(error, RemoteError::Unreachable(_)) {
                    self.connection = None;
                }
                self.fail(&error);
                self.next_call_us = boot_micros() + RETRY_AFTER.as_micros() as i64;
            }
        }
    }

    /// How long to sleep: until the next call or the lease's end, at most `LONGEST_SLEEP`.
    fn sleep(&self) -> Duration {
        let mut until_us = self.next_call_us;
        if node_of(self.shared.word.load(SeqCst)).is_some() {
            until_us = until_us.min(self.shared.deadline_boot_us.load(Relaxed));
        }
        Duration::from_micros((until_us - boot_micros()).max(1000) as u64).min(LONGEST_SLEEP)
    }

    /// One call: renews the lease held, or takes one. Returns whether to call again at once.
    fn call(&mut self) -> Result<bool, RemoteError> {
        let lease = self.shared;
        let sent_us = boot_micros();
        let ttl_us = self.lease.ttl_ms as i64 * 1000;
        // Every id made under this lease is of a time before this: the generator clock as the
        // call is sent (or the last id, when ahead of it), plus the lease (see the module comment
        // of `node`).
        // The end of the last id's tick: after a take moved the floor to a tick's start, a lease
        // reckoned from the tick before would not reach it when ticks are longer than leases.
        let last_us = self.generator.shape.end_us(self.generator.cell(self.generators).last.load(SeqCst));
        let ids_before_us = self.generators.clock.now_us().max(last_us) + ttl_us;
        let word = lease.word.load(SeqCst);
        let held = node_of(word).filter(|_| Phase::from_u32(lease.phase.load(Relaxed)) == Phase::Held);
        // A renewal must be answered while the lease lasts; anything else within the timeout.
        let mut timeout_us = self.lease.remote_timeout_ms as i64 * 1000;
        if held.is_some() {
            let left_us = lease.deadline_boot_us.load(Relaxed) - sent_us;
            if left_us > 0 {
                timeout_us = timeout_us.min(left_us);
            }
        }
        let deadline = Instant::now() + Duration::from_micros(timeout_us as u64);
        let stop = crate::sigterm::received;
        if self.connection.is_none() {
            let connection = Connection::open(&self.lease.registry, "pg_idgen lease", None, deadline, &stop)?;
            remote::pin_session(&connection, self.lease.remote_timeout_ms, deadline, &stop)?;
            self.connection = Some(connection);
        }
        let connection = self.connection.as_ref().expect("opened above");
        let schema = remote::extension_schema(connection, deadline, &stop)?;
        let (ttl, margin, before) = (self.lease.ttl_ms.to_string(), self.lease.margin_ms.to_string(), ids_before_us.to_string());
        match held {
            Some(node_id) => {
                let sql = format!(
                    "SELECT {schema}.pg_idgen_node_lease_renew($1::pg_catalog.text, $2::pg_catalog.int4, $3::pg_catalog.int4, $4::pg_catalog.int4, $5::pg_catalog.int8, $6::pg_catalog.int8)"
                );
                let node = node_id.to_string();
                // What the registry confirmed last: if its row is below, it lost commits.
                let committed = lease.committed_us.load(SeqCst).to_string();
                let params = [&self.holder, &node, &ttl, &margin, &before, &committed].map(|p| p.as_bytes());
                let rows = connection.query(&sql, &params, deadline, &stop)?;
                if rows.first().and_then(|row| row[0].as_deref()) == Some("t") {
                    self.publish(node_id, sent_us, ids_before_us, false);
                    Ok(false)
                } else {
                    self.lapse(&format!(
                        "pg_idgen: the node registry no longer gives node id {node_id} to this server (another server holds it, or the registry lost the lease); snowflake ids stop until this server holds a lease again"
                    ));
                    Ok(true)
                }
            }
            None => {
                // The configured node id; else, once, the one this data directory made ids with
                // before (moving to a registry), preferred but not insisted on.
                let previous = lease.previous_node_id.load(SeqCst);
                let (wanted, prefer) = match self.config.node_id {
                    Some(n) => (Some(n), false),
                    None => ((previous >= 0).then_some(previous as u32), true),
                };
                let sql = format!(
                    "SELECT node_id, floor_us FROM {schema}.pg_idgen_node_lease_take($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.text, NULLIF($4::pg_catalog.text, '')::pg_catalog.int4, $5::pg_catalog.int4, $6::pg_catalog.int4, $7::pg_catalog.int4, $8::pg_catalog.int8, $9::pg_catalog.bool)"
                );
                let max_node_id = self.config.layout.max_node_id().min(i32::MAX as u64 - 1);
                let wanted_text = wanted.map(|n| n.to_string()).unwrap_or_default();
                let (max_text, prefer_text) = (max_node_id.to_string(), prefer.to_string());
                let params = [&self.holder, &self.holder_name, &self.layout, &wanted_text, &max_text, &ttl, &margin, &before, &prefer_text]
                    .map(|p| p.as_bytes());
                let rows = connection.query(&sql, &params, deadline, &stop)?;
                if let Some(row) = rows.first().filter(|row| row[0].is_none()) {
                    // The registry's wait after its start or a reset (see registry.sql).
                    let from = row[1].as_deref().and_then(|us| us.parse::<i64>().ok()).map(crate::clock::format_unix_micros);
                    return Err(RemoteError::Refused {
                        sqlstate: "57P03".into(),
                        message: format!(
                            "the node registry started or was reset less than its lease, margin and lead (pg_idgen.node_lease_max_lead) ago (it may have lost leases); it hands out node ids from {}",
                            from.unwrap_or_else(|| "later".into())
                        ),
                    });
                }
                let parsed = rows.first().and_then(|row| Some((row[0].as_deref()?.parse::<u32>().ok()?, row[1].as_deref()?.parse::<i64>().ok()?)));
                let Some((node_id, floor_us)) = parsed.filter(|&(n, _)| n as u64 <= max_node_id && (prefer || wanted.is_none() || wanted == Some(n)))
                else {
                    return Err(RemoteError::Refused {
                        sqlstate: "XX000".into(),
                        message: "the registry's answer is not a node id this server may use".into(),
                    });
                };
                lease.previous_node_id.store(-1, SeqCst);
                // Above every id an earlier holder made (see the module comment of `node`), and
                // in a tick after every id this server made: in the tick of its last id, a lower
                // node id than the one it was made with would make smaller ids.
                let shape = self.generator.shape;
                let last = self.generator.cell(self.generators).last.load(SeqCst);
                let floor = shape.first_stamp_from(floor_us.max(shape.end_us(last)));
                if self.generator.cell(self.generators).floor.load(SeqCst) < floor {
                    // Why not published yet: an earlier holder's clock may have been ahead, and
                    // this lease's end, reckoned before the floor was known, need not be above
                    // it. The next call takes the same id again (the registry keeps the floor of
                    // a holder's row), reckoning the end from the floor.
                    self.generator.raise_floor(self.generators, floor);
                    crate::clock::wake_worker();
                    return Ok(true);
                }
                self.publish(node_id, sent_us, ids_before_us, true);
                Ok(false)
            }
        }
    }

    /// Makes a lease taken or renewed at `sent_us` the one calls use: the floor (done by the
    /// caller), then the cap, then the lease word.
    fn publish(&self, node_id: u32, sent_us: i64, ids_before_us: i64, taken: bool) {
        let lease = self.shared;
        self.generator.set_cap(self.generators, self.generator.shape.first_stamp_from(ids_before_us));
        lease.committed_us.fetch_max(ids_before_us, SeqCst);
        lease.deadline_boot_us.store(sent_us + self.lease.ttl_ms as i64 * 1000, SeqCst);
        lease.renewed_at_us.store(crate::clock::wall_unix_micros(), Relaxed);
        let word = lease.word.load(SeqCst);
        let was_held = node_of(word) == Some(node_id) && Phase::from_u32(lease.phase.load(Relaxed)) == Phase::Held;
        lease.phase.store(Phase::Held as u32, SeqCst);
        if !was_held {
            lease.word.store((((word >> 32) + 1) << 32) | (node_id as u64 + 1), SeqCst);
            log!(
                "pg_idgen: {} node id {node_id} from the node registry ({}), for {} ms at a time",
                if taken { "leased" } else { "renewed the lease of" },
                self.registry,
                self.lease.ttl_ms
            );
        }
    }

    /// Takes the node id away from calls (the lease word first, then the cap).
    fn lapse(&self, why: &str) {
        let lease = self.shared;
        let word = lease.word.load(SeqCst);
        lease.word.store(((word >> 32) + 1) << 32, SeqCst);
        self.generator.set_cap(self.generators, 0);
        lease.phase.store(Phase::Lapsed as u32, SeqCst);
        warning!("{why}");
    }

    /// Records a failed call; the registry's refusal of a lease not held yet is the phase too.
    fn fail(&self, error: &RemoteError) {
        let lease = self.shared;
        // Only a refusal that will not pass by itself soon makes calls give up at once: the id
        // is another server's, none is free, the layout differs. A lock or a timeout does not.
        let refusal = matches!(error, RemoteError::Refused { sqlstate, .. } if ["55006", "53400", "22023"].contains(&sqlstate.as_str()));
        if refusal && node_of(lease.word.load(SeqCst)).is_none() {
            lease.phase.store(Phase::Refused as u32, SeqCst);
        }
        let message = error.to_string();
        let in_a_row = remote::registry().failed(&message, true);
        if in_a_row == 1 || in_a_row.is_multiple_of(30) {
            warning!("pg_idgen lease worker: the node registry ({}) failed ({in_a_row} in a row): {message}", self.registry);
        }
    }
}

/// This server for people: host name, port and system identifier (a standby shares its
/// primary's; the holder token tells them apart).
fn holder_name() -> String {
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most the buffer's length.
    unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) };
    let host = String::from_utf8_lossy(&host[..host.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned();
    // SAFETY: plain reads of the postmaster's settings and the control file's identifier.
    let (port, system) = unsafe { (pg_sys::PostPortNumber, pg_sys::GetSystemIdentifier()) };
    format!("{host} port {port} system {system}")
}
