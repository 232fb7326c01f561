//! The extension's shared memory, kept as PostgreSQL's own subsystems keep theirs
//! (`XShmemSize()`/`XShmemInit()`, `ShmemInitStruct`): each component owns a region of its own —
//! a named struct beside the table that says who writes which of its fields — with a tranche of
//! LWLocks where it has locks. A region is requested at postmaster start, built once in new
//! memory before any other process exists (and again after a crash, which wipes shared memory),
//! and found by every process it forks.
//!
//! This module keeps the machinery: the `Region` a component implements (`Shared<T>` for a struct
//! of a fixed size), the hooks that request and build the regions `install_hooks` is given, the
//! guard of an LWLock and the setting of a worker's latch. It names no component: `lib.rs` lists
//! the regions.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

use pgrx::pg_sys;
use pgrx::prelude::*;

/// Keeps a hot atomic on a cache line of its own, so that writers of neighbouring fields do not
/// slow its readers down.
#[repr(C, align(64))]
#[derive(Default)]
pub struct CacheLine<T>(pub T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A component's region of shared memory.
pub trait Region: Sync {
    /// Its name in PostgreSQL's index of shared memory (`pg_shmem_allocations`), and of its LWLock
    /// tranche if it has one.
    fn name(&self) -> &'static CStr;
    /// Its size in bytes (settings read at start may decide it).
    fn size(&self) -> usize;
    /// How many LWLocks its tranche holds (0: none).
    fn lwlocks(&self) -> u32 {
        0
    }
    /// Builds the region in new memory, zeroed, which no other process uses yet.
    ///
    /// # Safety
    /// `at` points to `size()` bytes of zeroed shared memory, aligned to a cache line.
    unsafe fn init(&self, at: *mut u8);
    /// Records where the region and its LWLocks (the first of its tranche, or null) are, in the
    /// postmaster: the processes it forks inherit them.
    fn attach(&self, at: *mut u8, lwlocks: *mut pg_sys::LWLockPadded);
}

/// Where a region is (null until attached: the library was not preloaded), and its LWLock if it
/// has one: what every kind of region below records, in the postmaster, for the processes it forks.
struct Place {
    has_lock: bool,
    at: AtomicPtr<u8>,
    lock: AtomicPtr<pg_sys::LWLock>,
}

impl Place {
    const fn new(has_lock: bool) -> Place {
        Place { has_lock, at: AtomicPtr::new(std::ptr::null_mut()), lock: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// Where the region starts, or an ERROR that says how to fix `shared_preload_libraries`.
    #[inline]
    fn at(&self) -> *mut u8 {
        let at = self.at.load(Ordering::Relaxed);
        if at.is_null() {
            not_preloaded();
        }
        at
    }

    fn lwlocks(&self) -> u32 {
        self.has_lock as u32
    }

    fn attach(&self, at: *mut u8, lwlocks: *mut pg_sys::LWLockPadded) {
        self.at.store(at, Ordering::Relaxed);
        // SAFETY: with a lock, the tranche holds one LWLock, which `lwlocks` points at.
        self.lock.store(if self.has_lock { unsafe { &raw mut (*lwlocks).lock } } else { std::ptr::null_mut() }, Ordering::Relaxed);
    }

    fn exclusive(&self) -> LockGuard {
        self.at();
        LockGuard::exclusive(self.lock.load(Ordering::Relaxed))
    }

    fn shared(&self) -> LockGuard {
        self.at();
        LockGuard::shared(self.lock.load(Ordering::Relaxed))
    }
}

/// A region that holds one `T`, all of whose fields are valid when zeroed (atomics, arrays of
/// them), and the LWLock that guards its rare changes if it has one.
pub struct Shared<T: 'static> {
    name: &'static CStr,
    /// What zeroed memory needs besides to be a valid `T` (a condition variable initialised,
    /// random bytes drawn); run once per new region.
    init: unsafe fn(*mut T),
    place: Place,
}

impl<T: Sync + 'static> Shared<T> {
    /// A region named `name`, with no LWLock.
    pub const fn new(name: &'static CStr, init: unsafe fn(*mut T)) -> Shared<T> {
        Shared { name, init, place: Place::new(false) }
    }

    /// A region named `name`, with one LWLock (its tranche has the region's name).
    pub const fn with_lock(name: &'static CStr, init: unsafe fn(*mut T)) -> Shared<T> {
        Shared { name, init, place: Place::new(true) }
    }

    /// The region, or an ERROR that says how to fix a missing `shared_preload_libraries`.
    #[inline]
    pub fn get(&self) -> &'static T {
        // SAFETY: attached, so it points at the region, a `T` initialised before any process could
        // attach, for the life of the server.
        unsafe { &*self.place.at().cast::<T>() }
    }

    /// Holds the region's LWLock exclusively while the guard lives.
    pub fn exclusive(&self) -> LockGuard {
        self.place.exclusive()
    }

    /// Holds the region's LWLock shared while the guard lives.
    pub fn shared(&self) -> LockGuard {
        self.place.shared()
    }
}

/// The `init` of a region whose zeroed memory is all it needs.
///
/// # Safety
/// None needed: it does nothing.
pub unsafe fn zeroed_is_ready<T>(_: *mut T) {}

impl<T: Sync + 'static> Region for Shared<T> {
    fn name(&self) -> &'static CStr {
        self.name
    }

    fn size(&self) -> usize {
        std::mem::size_of::<T>()
    }

    fn lwlocks(&self) -> u32 {
        self.place.lwlocks()
    }

    unsafe fn init(&self, at: *mut u8) {
        debug_assert!(at.align_offset(std::mem::align_of::<T>()) == 0);
        // SAFETY: per the trait's contract the memory is zeroed, large and aligned enough, and
        // ours alone; every `T` of a `Shared` is valid zeroed, and `init` completes the rest.
        unsafe { (self.init)(at.cast::<T>()) };
    }

    fn attach(&self, at: *mut u8, lwlocks: *mut pg_sys::LWLockPadded) {
        self.place.attach(at, lwlocks);
    }
}

/// A region that holds `count()` of `T` (a count that settings read at start decide), each valid
/// when zeroed but for what `init` does to it, and the LWLock that guards their rare changes.
pub struct SharedSlice<T: 'static> {
    name: &'static CStr,
    count: fn() -> usize,
    /// What a zeroed element needs besides; run on each element of a new region.
    init: unsafe fn(*mut T),
    place: Place,
    /// `count()`, recorded where the region is attached: calls read it beside the region's place
    /// instead of calling `count` (a segment call's hot path takes its slot through `get`).
    len: AtomicUsize,
}

impl<T: Sync + 'static> SharedSlice<T> {
    /// A region named `name` of `count()` elements, with one LWLock (its tranche has the region's
    /// name).
    pub const fn with_lock(name: &'static CStr, count: fn() -> usize, init: unsafe fn(*mut T)) -> SharedSlice<T> {
        SharedSlice { name, count, init, place: Place::new(true), len: AtomicUsize::new(0) }
    }

    /// The elements, or an ERROR that says how to fix a missing `shared_preload_libraries`.
    #[inline]
    pub fn get(&self) -> &'static [T] {
        let at = self.place.at().cast::<T>();
        // SAFETY: attached: `len` (`count()`) elements, initialised before any process could
        // attach, for the life of the server.
        unsafe { std::slice::from_raw_parts(at, self.len.load(Ordering::Relaxed)) }
    }

    /// Holds the region's LWLock exclusively while the guard lives.
    pub fn exclusive(&self) -> LockGuard {
        self.place.exclusive()
    }

    /// Holds the region's LWLock shared while the guard lives.
    pub fn shared(&self) -> LockGuard {
        self.place.shared()
    }
}

impl<T: Sync + 'static> Region for SharedSlice<T> {
    fn name(&self) -> &'static CStr {
        self.name
    }

    fn size(&self) -> usize {
        (self.count)() * std::mem::size_of::<T>()
    }

    fn lwlocks(&self) -> u32 {
        self.place.lwlocks()
    }

    unsafe fn init(&self, at: *mut u8) {
        debug_assert!(at.align_offset(std::mem::align_of::<T>()) == 0);
        for i in 0..(self.count)() {
            // SAFETY: per the trait's contract the memory holds `count()` zeroed elements, ours alone.
            unsafe { (self.init)(at.cast::<T>().add(i)) };
        }
    }

    fn attach(&self, at: *mut u8, lwlocks: *mut pg_sys::LWLockPadded) {
        self.len.store((self.count)(), Ordering::Relaxed);
        self.place.attach(at, lwlocks);
    }
}

/// A region of `size()` bytes, zeroed, whose owner lays its parts out (a cache of several arrays
/// sized by settings), and the LWLock that guards their rare changes if it has one.
pub struct SharedBytes {
    name: &'static CStr,
    size: fn() -> usize,
    place: Place,
}

impl SharedBytes {
    /// A region named `name` of `size()` bytes, with no LWLock.
    pub const fn new(name: &'static CStr, size: fn() -> usize) -> SharedBytes {
        SharedBytes { name, size, place: Place::new(false) }
    }

    /// A region named `name` of `size()` bytes, with one LWLock (its tranche has the region's name).
    pub const fn with_lock(name: &'static CStr, size: fn() -> usize) -> SharedBytes {
        SharedBytes { name, size, place: Place::new(true) }
    }

    /// Where the region starts (on a cache line), or an ERROR that says how to fix a missing
    /// `shared_preload_libraries`.
    #[inline]
    pub fn start(&self) -> *mut u8 {
        self.place.at()
    }

    /// Holds the region's LWLock exclusively while the guard lives.
    pub fn exclusive(&self) -> LockGuard {
        self.place.exclusive()
    }

    /// Holds the region's LWLock shared while the guard lives.
    pub fn shared(&self) -> LockGuard {
        self.place.shared()
    }
}

impl Region for SharedBytes {
    fn name(&self) -> &'static CStr {
        self.name
    }

    fn size(&self) -> usize {
        (self.size)()
    }

    fn lwlocks(&self) -> u32 {
        self.place.lwlocks()
    }

    unsafe fn init(&self, _at: *mut u8) {}

    fn attach(&self, at: *mut u8, lwlocks: *mut pg_sys::LWLockPadded) {
        self.place.attach(at, lwlocks);
    }
}

/// What happens besides building the regions: once all of them are new (at start, after a
/// crash), in the postmaster before any other process exists; and when the postmaster's shared
/// memory goes (`clean`: a clean exit, every other process gone; else a crash's teardown).
#[derive(Clone, Copy)]
pub struct Hooks {
    pub regions: &'static [&'static dyn Region],
    pub on_create: fn(),
    pub on_exit: fn(clean: bool),
}

/// Set in `_PG_init`, read by the hooks.
static HOOKS: OnceLock<Hooks> = OnceLock::new();
/// The hooks that were installed before ours, called first. Why not `static mut`: they are set
/// once, before the hooks can run.
static PREVIOUS_REQUEST_HOOK: OnceLock<pg_sys::shmem_request_hook_type> = OnceLock::new();
static PREVIOUS_STARTUP_HOOK: OnceLock<pg_sys::shmem_startup_hook_type> = OnceLock::new();
/// Set in the postmaster once the regions are attached; inherited by every process it forks.
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Installs the hooks that request and build the regions. Called from `_PG_init` only when the
/// library is being preloaded: shared memory cannot be added later.
pub fn install_hooks(hooks: Hooks) {
    let _ = HOOKS.set(hooks);
    // SAFETY: _PG_init runs once, in the postmaster, before any hook can be called; PostgreSQL's
    // hook variables are plain C globals, chained by saving the previous value.
    unsafe {
        let _ = PREVIOUS_REQUEST_HOOK.set(pg_sys::shmem_request_hook);
        pg_sys::shmem_request_hook = Some(request_shared_memory);
        let _ = PREVIOUS_STARTUP_HOOK.set(pg_sys::shmem_startup_hook);
        pg_sys::shmem_startup_hook = Some(attach_shared_memory);
    }
}

fn hooks() -> &'static Hooks {
    HOOKS.get().expect("shared-memory hooks installed")
}

/// What PostgreSQL adds to a struct's size when it allocates it: it starts each on a cache line.
const ALIGNMENT_SLACK: usize = 128;

#[pg_guard]
unsafe extern "C-unwind" fn request_shared_memory() {
    // SAFETY: the request hook runs once, in the postmaster; the previous hook is chained first.
    unsafe {
        if let Some(previous) = PREVIOUS_REQUEST_HOOK.get().copied().flatten() {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous());
        }
        for region in hooks().regions {
            pg_sys::RequestAddinShmemSpace(region.size() + ALIGNMENT_SLACK);
            if region.lwlocks() > 0 {
                pg_sys::RequestNamedLWLockTranche(region.name().as_ptr(), region.lwlocks() as i32);
            }
        }
    }
}

/// Runs in the postmaster at start and again after every crash-restart, which wipes shared
/// memory: every region is then built anew, and `Hooks::on_create` runs.
#[pg_guard]
unsafe extern "C-unwind" fn attach_shared_memory() {
    // SAFETY: AddinShmemInitLock serialises the creation; the pointers are recorded once per
    // creation, in the postmaster, and inherited by every process it forks.
    unsafe {
        if let Some(previous) = PREVIOUS_STARTUP_HOOK.get().copied().flatten() {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous());
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(ADDIN_SHMEM_INIT_LOCK)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut created = false;
        for region in hooks().regions {
            let mut found = false;
            let at = pg_sys::ShmemInitStruct(region.name().as_ptr(), region.size(), &mut found).cast::<u8>();
            if !found {
                at.write_bytes(0, region.size());
                region.init(at);
                created = true;
            }
            let lwlocks = if region.lwlocks() > 0 { pg_sys::GetNamedLWLockTranche(region.name().as_ptr()) } else { std::ptr::null_mut() };
            region.attach(at, lwlocks);
        }
        ATTACHED.store(true, Ordering::Relaxed);
        if created {
            (hooks().on_create)();
        }
        pg_sys::LWLockRelease(lock);
        if !pg_sys::IsUnderPostmaster {
            pg_sys::on_shmem_exit(Some(at_postmaster_shmem_exit), pg_sys::Datum::from(0));
        }
    }
}

/// Runs in the postmaster when shared memory goes: at a clean exit (code 0) or when it is torn
/// down after a crash.
#[pg_guard]
unsafe extern "C-unwind" fn at_postmaster_shmem_exit(code: i32, _arg: pg_sys::Datum) {
    if is_attached() {
        (hooks().on_exit)(code == 0);
    }
}

/// `AddinShmemInitLock` is a C macro: slot 21 of the main LWLock array in PostgreSQL 15.
const ADDIN_SHMEM_INIT_LOCK: usize = 21;

/// Whether the library was preloaded and its shared memory is there.
#[inline]
pub fn is_attached() -> bool {
    ATTACHED.load(Ordering::Relaxed)
}

/// Raises the ERROR that says how to fix a missing `shared_preload_libraries`, unless the library
/// was preloaded: what a generator checks first.
#[inline]
pub fn require_preloaded() {
    if !is_attached() {
        not_preloaded();
    }
}

/// Sets a worker's latch, published while the worker runs (null otherwise).
pub fn set_latch(latch: &AtomicPtr<pg_sys::Latch>) {
    let latch = latch.load(Ordering::Acquire);
    if !latch.is_null() {
        // SAFETY: each worker clears its pointer before its latch goes away.
        unsafe { pg_sys::SetLatch(latch) };
    }
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

/// The ERROR of a call that needs shared memory in a server that did not preload the library: it
/// says how to fix `shared_preload_libraries`.
#[cold]
pub fn not_preloaded() -> ! {
    crate::errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "pg_idgen must be loaded via shared_preload_libraries to generate ids".into(),
        None,
        Some("Add pg_idgen to shared_preload_libraries in postgresql.conf and restart the server."),
    )
}
