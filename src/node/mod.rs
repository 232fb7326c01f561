//! The node id that snowflake ids carry: fixed by `pg_idgen.node_id`, or leased from a registry
//! database (`pg_idgen.node_registry`) so that no two servers make ids with the same one.
//!
//! Where things are:
//! - here: what a call reads (the node id and its lease, `with_node_id`), the errors, the status;
//! - `registry.sql`: the registry's table and the two functions the lease worker calls there;
//! - `worker`: the lease worker, which takes and renews the lease over libpq (`remote`).
//!
//! ## Why two servers never make the same snowflake id
//!
//! A lease is a row of the registry: node id, holder (a random token of this server start),
//! `expires_at` and `reusable_at` on the registry's clock, and `ids_before_us`. Each renewal
//! reports a time `T` = the generator clock when the renewal was sent + the lease's length, and
//! this server then makes ids of times before `T` only: `T`'s first stamp is the snowflake
//! generator's `cap`, and the generator refuses to pass it. So `ids_before_us` bounds every id
//! ever made under the node id. A server that takes an id over starts its ids at that time
//! (its floor), so the two sets of ids cannot meet, whatever the two clocks say — while the
//! registry's rows are current. For when they are not (a registry restored from a copy, failed
//! over to a standby that lagged, rows put back), the registry never lets `T` run ahead of its own
//! clock by more than the lease and `pg_idgen.node_lease_max_lead`, waits that long after it
//! starts or finds itself reset before it hands out an id, and floors every id it hands out at
//! the end of that wait (`registry.sql`).
//!
//! A server whose node id changes (its lease lapsed and another server took the id) starts the
//! new id's ids in a tick after its last id: in the same tick a lower node id makes smaller ids.
//!
//! Timing adds the behaviour users see: the lease ends, on this server's clock, the lease's
//! length after the renewal was sent (on CLOCK_BOOTTIME, which also counts a suspended
//! machine's sleep); the cap (on the generator clock: CLOCK_MONOTONIC plus an offset) stops the
//! ids about then, and the worker takes the node id away from calls at the deadline too. The
//! registry lets another server take the id only once `reusable_at` (its expiry plus this
//! server's `pg_idgen.node_lease_margin`) has passed on the registry's clock; the margin covers
//! the two clocks running at different rates over one lease.
//!
//! ## The lease word
//!
//! Calls read the node id from `LeaseState::word`, `generation << 32 | (node id + 1)`, before
//! and after taking their stamp; if it changed, the stamp is dropped and the call tries again.
//! The worker changes the word before it lowers the cap and after it raises the cap, so a stamp
//! taken under one node id's cap is never paired with another node id.

pub mod worker;

use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64};
use std::time::Instant;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::engine::{generators, Generator};
use crate::families::{Stamp, SNOWFLAKE};
use crate::settings::{Config, LeaseConfig};
use crate::shmem::{self, CacheLine, Shared};
use crate::{clock, errors, remote, settings};

/// The node id lease as every process sees it: the region `pg_idgen lease`. Written by the lease
/// worker only, but for what creation sets and the flag calls raise:
///
/// | field | written by | protection |
/// |---|---|---|
/// | `word` | the lease worker | one writer; calls read it around their stamp (above) |
/// | `phase`, `deadline_boot_us`, `renewed_at_us`, `committed_us` | the lease worker | one writer |
/// | `holder` | creation | written before any process attaches |
/// | `previous_node_id` | creation (from the mark) | written before any process attaches |
/// | `renew_wanted` | calls at the cap set it, the worker clears it | atomic flag |
/// | `worker_pid`, `worker_latch` | the lease worker, at its start and exit | one writer; calls set the latch |
#[repr(C)]
pub struct LeaseState {
    /// `generation << 32 | (node id + 1)`, low half 0 while no node id is held. Every change of
    /// node id or of its lease's validity takes a new generation: a call that read one word before
    /// taking its stamp and another after drops the stamp.
    pub word: CacheLine<AtomicU64>,
    /// `Phase` as a number.
    pub phase: AtomicU32,
    /// This server start's token in the registry (random, chosen with the shared memory).
    pub holder: [AtomicU64; 2],
    /// When the lease runs out, on this server's CLOCK_BOOTTIME (µs).
    pub deadline_boot_us: AtomicI64,
    /// When it was last renewed or taken, Unix µs.
    pub renewed_at_us: AtomicI64,
    /// The largest `ids_before_us` the registry confirmed (a renewal refuses a row below it).
    pub committed_us: AtomicI64,
    /// The node id this data directory's ids were made with before a registry was set (from the
    /// mark), -1 when none: the first lease prefers it.
    pub previous_node_id: AtomicI64,
    /// Set by a call that reached the lease's cap before its end: renew now.
    pub renew_wanted: AtomicBool,
    /// The lease worker's process id while it runs.
    pub worker_pid: AtomicI32,
    /// Its latch while it runs: a call that finds no lease wakes it.
    pub worker_latch: AtomicPtr<pg_sys::Latch>,
}

pub static LEASE: Shared<LeaseState> = Shared::new(c"pg_idgen lease", init_lease);

/// No node id yet, none preferred, and this server start's random token.
///
/// # Safety
/// As `Region::init`: zeroed memory of ours alone.
unsafe fn init_lease(at: *mut LeaseState) {
    // SAFETY: per the contract.
    let lease = unsafe { &*at };
    lease.previous_node_id.store(-1, Relaxed);
    for (half, bytes) in lease.holder.iter().zip([crate::random::os_bytes::<8>(), crate::random::os_bytes::<8>()]) {
        half.store(u64::from_le_bytes(bytes), Relaxed);
    }
}

/// The lease, or an ERROR that says how to fix a missing `shared_preload_libraries`.
#[inline]
pub fn lease() -> &'static LeaseState {
    LEASE.get()
}

impl LeaseState {
    /// Wakes the lease worker, if it runs: a call found no lease.
    pub fn wake_worker(&self) {
        shmem::set_latch(&self.worker_latch);
    }
}

// The registry's table and functions, in every database with the extension.
pgrx::extension_sql_file!("registry.sql", name = "node_registry");

/// Where the lease stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum Phase {
    /// No lease yet since the start (or the promotion).
    Acquiring = 0,
    Held = 1,
    /// The registry refused: the configured node id is another server's, no id is free, or the
    /// registry uses another layout.
    Refused = 2,
    /// The lease ran out without renewal, or another server holds the id now.
    Lapsed = 3,
}

impl Phase {
    fn from_u32(value: u32) -> Phase {
        match value {
            1 => Phase::Held,
            2 => Phase::Refused,
            3 => Phase::Lapsed,
            _ => Phase::Acquiring,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Phase::Acquiring => "acquiring",
            Phase::Held => "held",
            Phase::Refused => "refused",
            Phase::Lapsed => "lapsed",
        }
    }
}

/// What a new shared memory starts with: no lease, so the snowflake generator is capped at
/// nothing until the worker takes one; without a registry, no cap at all (and the other families
/// never have one). Before the marks are restored, whose limits take the caps into account.
pub fn init(config: &Config) {
    for generator in Generator::all(config) {
        let leased = generator.family.index == SNOWFLAKE.index && config.lease.is_some();
        generator.cell(generators()).cap.store(if leased { 0 } else { Stamp::MAX }, Relaxed);
    }
}

/// Makes the first lease prefer `node_id`, the node id this data directory's ids were made with
/// before a registry was set (`mark::restore_at_start`).
pub fn prefer_node_id(node_id: u32) {
    lease().previous_node_id.store(node_id as i64, Relaxed);
}

/// The snowflake generator, capped by the node id lease: a call whose id would pass the lease's
/// end waits for a renewal (`wait_for_renewal`). Without a registry its cap is never set.
#[inline]
pub fn snowflake_generator(config: &Config) -> Generator {
    Generator::of(&SNOWFLAKE, config).capped_by(wait_for_renewal)
}

/// The node id of a server without a registry (an error when it is unset), or None: then the
/// node id is leased, and stamps are taken through `with_leased_node_id`. Why two functions and
/// not one that takes a closure: a closure called from two places is not inlined, and the fixed
/// node id's path then pays for leases on every call (docs/benchmarks.md counts it).
#[inline(always)]
pub fn fixed_node_id(config: &Config) -> Option<u32> {
    match config.lease {
        None => Some(config.node_id.unwrap_or_else(|| errors::node_id_unset())),
        Some(_) => None,
    }
}

/// Runs `take` (which takes a snowflake stamp) with the leased node id it belongs to: two loads
/// of the lease word around it.
#[inline(never)]
pub fn with_leased_node_id<T>(config: &Config, function: &str, mut take: impl FnMut() -> T) -> (T, u32) {
    let lease = lease();
    loop {
        let word = lease.word.load(Acquire);
        let Some(node_id) = node_of(word) else {
            wait_for_lease(config, function);
            continue;
        };
        let value = take();
        // Acquire, and after the stamp's compare-and-swap: a changed word means the stamp may
        // have been taken under another lease's cap (see the module's comment).
        if lease.word.load(Acquire) == word {
            return (value, node_id);
        }
    }
}

/// The node id a lease word holds.
fn node_of(word: u64) -> Option<u32> {
    ((word as u32) != 0).then(|| (word as u32) - 1)
}

/// The node id snowflake ids are made with now, if any.
pub fn current_node_id(config: &Config) -> Option<u32> {
    match config.lease {
        None => config.node_id,
        Some(_) => node_of(lease().word.load(Acquire)),
    }
}

/// Waits (as long as a call may wait for the clock) for the lease worker to take a lease: right
/// after a start it is on its way. Returns when there is one; raises the reason otherwise.
#[cold]
fn wait_for_lease(config: &Config, function: &str) {
    // Why first: on a standby that is the error to report, not the lease it cannot take.
    errors::refuse_during_recovery(function);
    let lease = lease();
    let started = Instant::now();
    while node_of(lease.word.load(Acquire)).is_none() {
        let phase = Phase::from_u32(lease.phase.load(Relaxed));
        if phase == Phase::Refused || started.elapsed().as_millis() as u64 >= config.max_clock_wait_ms {
            no_lease();
        }
        lease.wake_worker();
        // SAFETY: a plain sleep; interrupts are checked right after.
        unsafe { pgrx::pg_sys::pg_usleep(1_000) };
        pgrx::check_for_interrupts!();
    }
}

/// Called when a snowflake stamp would pass the lease's cap. While the lease lasts (a block or
/// borrowed ids reached its end early), asks the worker to renew now and sleeps a moment;
/// returns the µs waited. Raises once the lease could have run out, or the call waited
/// `pg_idgen.max_clock_wait` in all.
#[cold]
pub fn wait_for_renewal(waited_us: i64) -> i64 {
    let lease = lease();
    let held = Phase::from_u32(lease.phase.load(Relaxed)) == Phase::Held && node_of(lease.word.load(Acquire)).is_some();
    if !held || boot_micros() >= lease.deadline_boot_us.load(Relaxed) || waited_us > settings::config().max_clock_wait_ms as i64 * 1000 {
        no_lease();
    }
    lease.renew_wanted.store(true, Relaxed);
    lease.wake_worker();
    let started = Instant::now();
    // SAFETY: a plain sleep; interrupts are checked right after.
    unsafe { pgrx::pg_sys::pg_usleep(1_000) };
    pgrx::check_for_interrupts!();
    started.elapsed().as_micros() as i64
}

#[cold]
fn no_lease() -> ! {
    let config = settings::config();
    debug_assert!(config.lease.is_some(), "a cap only with a registry");
    let phase = Phase::from_u32(lease().phase.load(Relaxed));
    let message = match (phase, config.node_id) {
        (Phase::Refused, Some(node_id)) => format!("the node registry refuses this server node id {node_id}"),
        (Phase::Refused, None) => "the node registry gives this server no node id".to_string(),
        (Phase::Held | Phase::Lapsed, _) => "this server's node id lease has run out".to_string(),
        (Phase::Acquiring, _) => "this server holds no node id lease yet".to_string(),
    };
    // Why neither the last error nor the registry's address: they may name hosts, ports, users and
    // databases, which pg_idgen.node_registry keeps to superusers (node_lease_status() shows them
    // to monitoring roles, and the server log has them).
    errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("cannot make snowflake ids: {message}"),
        Some("The node registry is the database pg_idgen.node_registry names.".into()),
        Some("Snowflake ids need a node id that no other server uses; the pg_idgen lease worker keeps trying, and calls succeed again once it holds a lease (node_lease_status() and the server log say why it does not)."),
    )
}

/// Refuses to move snowflake ids `lead_us` ahead of the clock when that is more than the registry
/// lets leased ids run ahead (`pg_idgen.node_lease_max_lead`): it would refuse the lease's renewal.
pub fn refuse_lead_past_lease(lease: &LeaseConfig, lead_us: i64) {
    if lead_us > lease.max_lead_ms as i64 * 1000 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("snowflake_advance_past(): the id is {} s ahead of this server's clock, more than pg_idgen.node_lease_max_lead ({} ms)", lead_us / 1_000_000, lease.max_lead_ms),
            Some("While node ids are leased from a registry, ids may run ahead of its clock by at most that much: a registry restored from an older copy can only tell that far which ids were made.".into()),
            Some("Raise pg_idgen.node_lease_max_lead on the registry's server and on every server that leases from it, or call again once the clock is closer to the id."),
        );
    }
}

/// The current time on the clock lease deadlines are measured with: the monotonic clock that
/// also counts a suspended machine's sleep (CLOCK_BOOTTIME), in µs.
pub fn boot_micros() -> i64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    now.tv_sec * 1_000_000 + now.tv_nsec / 1000
}

#[pg_extern(volatile, parallel_safe)]
/// Where this server's node id lease stands: one row, or none without `pg_idgen.node_registry`.
// Why allowed: pgrx takes the columns' names from the `name!` in the signature.
#[allow(clippy::type_complexity)]
fn node_lease_status() -> TableIterator<
    'static,
    (
        name!(registry, String),
        name!(node_id, Option<i32>),
        name!(state, String),
        name!(expires_in_ms, Option<i64>),
        name!(renewed_at, Option<TimestampWithTimeZone>),
        name!(failures_in_a_row, i64),
        name!(failures, i64),
        name!(last_error, Option<String>),
        name!(worker_pid, Option<i32>),
    ),
> {
    let lease = lease();
    let config = settings::config();
    let Some(lease_config) = &config.lease else {
        return TableIterator::new(Vec::new());
    };
    let word = lease.word.load(Acquire);
    let node_id = node_of(word);
    let renewed_at_us = lease.renewed_at_us.load(Relaxed);
    let (failures_in_a_row, failures, last_error) = remote::registry().failures_shown();
    let row = (
        remote::describe_conninfo(&lease_config.registry),
        node_id.map(|n| n as i32),
        if errors::recovery_is_over() { Phase::from_u32(lease.phase.load(Relaxed)).name().to_string() } else { "standby".to_string() },
        node_id.map(|_| (lease.deadline_boot_us.load(Relaxed) - boot_micros()).max(0) / 1000),
        (renewed_at_us != 0).then(|| clock::unix_micros_to_timestamptz(renewed_at_us)),
        failures_in_a_row,
        failures,
        last_error,
        Some(lease.worker_pid.load(Relaxed)).filter(|&pid| pid != 0),
    );
    TableIterator::new(vec![row])
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION node_lease_status() IS
    'Where this server''s node id lease from pg_idgen.node_registry stands (no row without a registry).';
-- Its last_error may name users and addresses: monitoring roles only, as segment_status().
REVOKE EXECUTE ON FUNCTION node_lease_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION node_lease_status() TO pg_monitor;
"#,
    name = "node_lease_status_comment",
    requires = [node_lease_status]
);
