//! The extension's shared memory: one struct, requested at postmaster start and attached by
//! every backend (the pattern of contrib/pg_stat_statements), followed by an area whose size and
//! content the layers above define (the segment slots). What happens when the memory is created
//! or torn down is theirs too: `install_hooks` takes it as functions, so this module depends on
//! nothing that uses it.
//!
//! Only atomics live here; each generator owns its fields and touches them lock-free.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::clock::{ClockSteps, GeneratorClock};
use crate::families::{self, COUNT as FAMILIES};

/// Keeps a hot atomic on a cache line of its own, so that generators do not slow each other
/// down by writing neighbouring fields.
#[repr(C, align(64))]
#[derive(Default)]
pub struct CacheLine<T>(pub T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The shared state of one time-based generator: three stamps (`families::Stamp`). They share a
/// cache line: every call writes `last` and reads `limit`, and the clock worker writes `limit` only
/// when it moves the mark.
#[repr(C)]
#[derive(Default)]
pub struct GeneratorCell {
    /// The stamp of the last value handed out. Moves only forward, by compare-and-swap.
    pub last: AtomicU64,
    /// The first stamp this generator may not hand out: the lower of `mark_limit` and `cap`.
    /// Written only under `limit_lock` (see `engine::Generator::refresh_limit`).
    pub limit: AtomicU64,
    /// The smallest value it may hand out since the server started or an advance past an id
    /// (see `engine`); read only when a call would borrow past the clock.
    pub floor: AtomicU64,
    /// The floor's own clock: Unix µs minus monotonic µs, so that it read the floor's time when
    /// the floor was raised and runs on at the monotonic clock's speed (see `engine`). Only rises.
    pub floor_clock_offset_us: AtomicI64,
    /// The first tick at or past the durable high-water mark (see `mark`); only rises.
    pub mark_limit: AtomicU64,
    /// A second bound, moved either way: the end of the node id lease for snowflake ids (see
    /// `node`), `Stamp::MAX` for families without one.
    pub cap: AtomicU64,
    /// Taken (a spin lock) to write `limit`: rare, by the clock and lease workers.
    pub limit_lock: AtomicBool,
}

/// The node id lease as every process sees it (see `node`). Written by the lease worker only.
#[repr(C)]
pub struct LeaseState {
    /// `generation << 32 | (node id + 1)`, low half 0 while no node id is held. Every change of
    /// node id or of its lease's validity takes a new generation: a call that read one word before
    /// taking its stamp and another after drops the stamp.
    pub word: CacheLine<AtomicU64>,
    /// `node::Phase` as a number.
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
    /// How its calls to the registry went.
    pub registry: RemoteStatus,
}

/// How the calls of the workers that reach one server went (see `remote::RemoteStatus`'s
/// methods): the lease worker's, or every segment worker's.
#[repr(C)]
pub struct RemoteStatus {
    /// Calls that failed in a row, and in all.
    pub failures_in_a_row: AtomicU64,
    pub failures: AtomicU64,
    /// When a call last succeeded, Unix µs (0: never).
    pub succeeded_at_us: AtomicI64,
    /// The last error, as text (`message_version` odd while it is written).
    pub message_version: AtomicU32,
    pub message_len: AtomicU32,
    pub message: [AtomicU8; REMOTE_MESSAGE_BYTES],
}

/// At most this many databases besides `pg_idgen.database` have a segment worker at once.
pub const MAX_DATABASE_WORKERS: usize = 16;

/// A segment worker for one more database (see `segment::worker`). Taken, claimed and freed
/// only under the segment slot lock; read without it.
#[repr(C)]
pub struct DatabaseWorker {
    /// `epoch << 32 | database OID`; the OID is 0 while the entry is free. Each taking raises the
    /// epoch, so a worker started for an earlier taking cannot claim a later one.
    pub state: AtomicU64,
    /// The worker's latch once it has claimed the entry, null before.
    pub latch: AtomicPtr<pg_sys::Latch>,
    /// When the entry was taken (monotonic ms): a worker that never came up frees it after a while.
    pub taken_at_ms: AtomicI64,
    /// Set when the database is being dropped: the worker abandons any call and exits, since
    /// `DROP DATABASE` waits only 5 s for the database's sessions to go.
    pub stop_wanted: AtomicBool,
}

/// The longest remote error kept.
pub const REMOTE_MESSAGE_BYTES: usize = 480;

/// The high-water marks as every process sees them (see `mark`).
#[repr(C)]
pub struct MarkState {
    /// The durable marks (Unix µs): no generator hands out a value of its mark's time or later.
    pub durable_us: [AtomicI64; FAMILIES],
    /// When the clock worker last moved the marks (Unix µs), 0 before it has.
    pub advanced_at_us: AtomicI64,
    /// The marks both files hold (a standby's replay skips writing older ones).
    pub persisted_us: [AtomicI64; FAMILIES],
    /// Whether this server may have handed out a snowflake id (carried in every record).
    pub snowflake_made: AtomicBool,
}

impl MarkState {
    /// The latest of the durable marks: no id of any family has reached it.
    pub fn latest_durable_us(&self) -> i64 {
        self.durable_us.iter().map(|m| m.load(Relaxed)).max().unwrap_or(0)
    }

    /// The earliest of the durable marks: the generator clock has not reached it (each mark is
    /// kept ahead of the clock; one family's may be far ahead after an advance).
    pub fn earliest_durable_us(&self) -> i64 {
        self.durable_us.iter().map(|m| m.load(Relaxed)).min().unwrap_or(0)
    }

    pub fn persisted(&self) -> [i64; FAMILIES] {
        std::array::from_fn(|i| self.persisted_us[i].load(Relaxed))
    }

    /// Records marks that both files now hold (each only ever rises).
    pub fn note_persisted(&self, marks_us: [i64; FAMILIES]) {
        for (persisted, mark_us) in self.persisted_us.iter().zip(marks_us) {
            persisted.fetch_max(mark_us, Relaxed);
        }
    }
}

/// What the layers above shared memory add to it: the size of their area, what to do once the
/// memory is new (the area zeroed), and what to do when the postmaster exits cleanly. The area
/// starts 64-byte aligned: right after the state, whose size is a multiple of its 64-byte
/// alignment, in shared memory that PostgreSQL aligns to a cache line.
#[derive(Clone, Copy)]
pub struct Hooks {
    pub area_size: fn() -> usize,
    /// Called in the postmaster, before any process can use the state.
    pub on_create: fn(&SharedState, area: *mut u8),
    /// Called in the postmaster when it exits cleanly, every other process gone.
    pub on_clean_exit: fn(),
}

#[repr(C)]
pub struct SharedState {
    /// One cell per time-based family, at the family's index (`families::FAMILIES`).
    pub cells: [CacheLine<GeneratorCell>; families::COUNT],
    /// The 5 random bytes of every ObjectId of this server start.
    pub objectid_random: [u8; 5],
    /// The generators' clock (policy keep_generating). Read by every call, raised rarely.
    pub generator_clock: CacheLine<GeneratorClock>,
    /// The persisted high-water mark and the clock worker's record of wall-clock steps.
    pub mark: MarkState,
    pub clock_steps: ClockSteps,
    /// The clock worker's latch while it runs (null otherwise): a generator that reached the mark
    /// sets it to ask for a new one.
    pub clock_worker_latch: AtomicPtr<pg_sys::Latch>,
    /// Its process id while it runs, 0 otherwise (it is not in pg_stat_activity: it has no
    /// database connection).
    pub clock_worker_pid: AtomicI32,
    /// The segment worker's latch while it runs (null otherwise): backends set it to ask for
    /// ranges.
    pub worker_latch: AtomicPtr<pg_sys::Latch>,
    /// The segment workers of other databases than `pg_idgen.database`, started on demand (see
    /// `segment::worker`).
    pub database_workers: [DatabaseWorker; MAX_DATABASE_WORKERS],
    /// The OID of `pg_idgen.database`, once its worker has connected (0 before).
    pub main_database: AtomicU32,
    /// Broadcast by the worker whenever it published ranges or gave up on a tag.
    pub segment_loaded: pg_sys::ConditionVariable,
    /// The node id lease (with pg_idgen.node_registry).
    pub lease: LeaseState,
    /// The segment worker's calls to the segment authority (with pg_idgen.segment_authority).
    pub segment_authority: RemoteStatus,
}

impl SharedState {
    /// Builds a fresh state in place, and zeroes the area after it. The ObjectId random part is
    /// chosen here, once per server start (and again after a crash), as the BSON spec asks. Then
    /// `on_create` runs (it restores the persisted high-water marks as every generator's floor: no
    /// generator hands out anything before the clock worker has made a new mark durable).
    ///
    /// # Safety
    /// `state` points to enough shared memory for the state and the area, which nobody uses yet.
    unsafe fn init(state: *mut SharedState, area: *mut u8, hooks: &Hooks) {
        // SAFETY: the memory is ours alone (the postmaster, under AddinShmemInitLock), and large
        // enough; all-zero is a valid start for every atomic; the condition variable is initialised.
        unsafe {
            state.write_bytes(0, 1);
            area.write_bytes(0, (hooks.area_size)());
            (*state).objectid_random = crate::random::os_bytes::<5>();
            pg_sys::ConditionVariableInit(&raw mut (*state).segment_loaded);
            let state = &*state;
            let now = crate::clock::ClockPair::read();
            let saved_offset_us = CLOCK_OFFSET_AT_RESET;
            CLOCK_OFFSET_AT_RESET = None;
            (hooks.on_create)(state, area);
            // Why not the wall clock after a crash: it may be in a forward jump the clock worker
            // had not accepted yet (pg_idgen.clock_forward_delay); the new worker decides again.
            // Only an offset the persisted marks cover, though: the memory a crash tore down may
            // hold garbage, and every family's mark stays ahead of the generator clock.
            let covered_us = state.mark.earliest_durable_us() + 1_000_000;
            match saved_offset_us.filter(|offset_us| now.monotonic_us + offset_us <= covered_us) {
                Some(offset_us) => state.generator_clock.raise_to(offset_us, 0),
                None => state.generator_clock.raise_to(now.wall_us, now.monotonic_us),
            }
        }
    }

    /// Wakes the clock worker, if it runs: a generator reached the mark, or a floor was advanced.
    pub fn wake_clock_worker(&self) {
        set_latch(&self.clock_worker_latch);
    }

    /// Wakes the lease worker, if it runs: a call found no lease.
    pub fn wake_lease_worker(&self) {
        set_latch(&self.lease.worker_latch);
    }


    /// The condition variable, as PostgreSQL's functions want it.
    pub fn segment_loaded(&self) -> *mut pg_sys::ConditionVariable {
        (&raw const self.segment_loaded).cast_mut()
    }
}

/// Sets a worker's latch, published while the worker runs (null otherwise).
pub fn set_latch(latch: &AtomicPtr<pg_sys::Latch>) {
    let latch = latch.load(std::sync::atomic::Ordering::Acquire);
    if !latch.is_null() {
        // SAFETY: each worker clears its pointer before its latch goes away.
        unsafe { pg_sys::SetLatch(latch) };
    }
}

/// Bytes of shared memory: the state, then the area of the layers above.
fn shared_size() -> usize {
    std::mem::size_of::<SharedState>() + (hooks().area_size)()
}

/// The generator clock's offset when shared memory was torn down after a crash; postmaster only.
static mut CLOCK_OFFSET_AT_RESET: Option<i64> = None;

/// Set in the postmaster by the startup hook; backends inherit them through fork.
static mut SHARED: *const SharedState = std::ptr::null();
static mut AREA: *mut u8 = std::ptr::null_mut();
static mut SEGMENT_LOCK: *mut pg_sys::LWLock = std::ptr::null_mut();
static mut SEQ_LOCK: *mut pg_sys::LWLock = std::ptr::null_mut();
static mut HOOKS: Option<Hooks> = None;

/// The hooks `install_hooks` was given.
fn hooks() -> Hooks {
    // SAFETY: set once in _PG_init, before any hook runs; read (copied) only after.
    unsafe { HOOKS }.expect("shared-memory hooks installed")
}
const LOCK_TRANCHE: &std::ffi::CStr = c"pg_idgen";
static mut PREV_SHMEM_REQUEST_HOOK: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

/// Installs the hooks that request and create the shared state. Called from `_PG_init` only when
/// the library is being preloaded: shared memory cannot be added later.
pub fn install_hooks(hooks: Hooks) {
    // SAFETY: _PG_init runs once, in the postmaster, before any hook can be called.
    unsafe {
        HOOKS = Some(hooks);
        PREV_SHMEM_REQUEST_HOOK = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request_shared_memory);
        PREV_SHMEM_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(attach_shared_memory);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn request_shared_memory() {
    // SAFETY: the request hook runs once, in the postmaster; the previous hook is chained first.
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST_HOOK {
            pg_sys::ffi::pg_guard_ffi_boundary(|| prev());
        }
        pg_sys::RequestAddinShmemSpace(shared_size());
        pg_sys::RequestNamedLWLockTranche(LOCK_TRANCHE.as_ptr(), 2);
    }
}

/// Runs in the postmaster at start and again after every crash-restart, which wipes shared
/// memory: the state is then built anew, from the persisted high-water mark.
#[pg_guard]
unsafe extern "C-unwind" fn attach_shared_memory() {
    // SAFETY: AddinShmemInitLock serialises the creation; the pointers are set once per creation,
    // in the postmaster, and inherited by every process it forks.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP_HOOK {
            pg_sys::ffi::pg_guard_ffi_boundary(|| prev());
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(ADDIN_SHMEM_INIT_LOCK)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let state = pg_sys::ShmemInitStruct(c"pg_idgen".as_ptr(), shared_size(), &mut found).cast::<SharedState>();
        let area = state.add(1).cast::<u8>();
        if !found {
            SharedState::init(state, area, &hooks());
        }
        SHARED = state;
        AREA = area;
        let locks = pg_sys::GetNamedLWLockTranche(LOCK_TRANCHE.as_ptr());
        SEGMENT_LOCK = &raw mut (*locks).lock;
        SEQ_LOCK = &raw mut (*locks.add(1)).lock;
        pg_sys::LWLockRelease(lock);
        if !pg_sys::IsUnderPostmaster {
            pg_sys::on_shmem_exit(Some(at_postmaster_shmem_exit), pg_sys::Datum::from(0));
        }
    }
}

/// Runs in the postmaster when shared memory goes: at a clean exit (code 0), to save the exact
/// marks; when it is torn down after a crash, to keep the generator clock for the next state.
#[pg_guard]
unsafe extern "C-unwind" fn at_postmaster_shmem_exit(code: i32, _arg: pg_sys::Datum) {
    if !is_attached() {
        return;
    }
    if code == 0 {
        (hooks().on_clean_exit)();
    } else {
        // SAFETY: the postmaster alone runs this, before shared memory is detached.
        unsafe { CLOCK_OFFSET_AT_RESET = Some(shared().generator_clock.offset_us()) };
    }
}

/// `AddinShmemInitLock` is a C macro: slot 21 of the main LWLock array in PostgreSQL 15.
const ADDIN_SHMEM_INIT_LOCK: usize = 21;

/// The shared state, or an ERROR that says how to fix a missing `shared_preload_libraries`.
#[inline]
pub fn shared() -> &'static SharedState {
    let state = unsafe { SHARED };
    if state.is_null() {
        not_preloaded();
    }
    // SAFETY: non-null, so attached: it points at the state for the life of the server.
    unsafe { &*state }
}

/// Whether the library was preloaded and its shared memory is there.
pub fn is_attached() -> bool {
    unsafe { !SHARED.is_null() }
}

/// The area after the state (see `Hooks`); its size is `Hooks::area_size`.
pub fn area() -> *mut u8 {
    shared();
    unsafe { AREA }
}

/// The LWLock that guards registering, dropping and switching segment slots.
pub fn segment_lock() -> *mut pg_sys::LWLock {
    shared();
    unsafe { SEGMENT_LOCK }
}

/// Holds an LWLock of pg_idgen's for its lifetime.
pub struct LockGuard(*mut pg_sys::LWLock);

impl LockGuard {
    pub fn exclusive(lock: *mut pg_sys::LWLock) -> LockGuard {
        // SAFETY: pg_idgen's locks live in shared memory for the life of the server.
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
        LockGuard(lock)
    }

    pub fn shared(lock: *mut pg_sys::LWLock) -> LockGuard {
        // SAFETY: as above.
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED) };
        LockGuard(lock)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // SAFETY: held since `exclusive` or `shared`.
        unsafe { pg_sys::LWLockRelease(self.0) };
    }
}

/// The LWLock that guards taking, evicting and raising the sections of per-key sequences.
pub fn seq_lock() -> *mut pg_sys::LWLock {
    shared();
    unsafe { SEQ_LOCK }
}

#[cold]
fn not_preloaded() -> ! {
    crate::errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "pg_idgen must be loaded via shared_preload_libraries to generate ids".into(),
        None,
        Some("Add pg_idgen to shared_preload_libraries in postgresql.conf and restart the server."),
    )
}
