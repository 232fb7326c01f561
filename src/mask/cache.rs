//! Each backend's mask keys, expanded (AES key schedules, and per purpose and form what FF1 and
//! the check precompute), and when it reads them again.
//!
//! - **Invalidation.** A change of the key table sends a relcache invalidation for it: pg_idgen's
//!   own functions send it themselves, and the table's triggers for every other change (a row
//!   trigger, which logical replication's apply fires too, and a `TRUNCATE` trigger, all `ENABLE
//!   ALWAYS`). PostgreSQL delivers it to every backend once the change commits (and to the
//!   changing backend at its next command, or at rollback); `relation_changed` marks the keys
//!   stale.
//! - **Statements.** PostgreSQL takes in invalidations at a transaction's start and when a
//!   backend takes a lock it did not hold, which a prepared statement run again in one
//!   transaction does not. So at the first call of each statement (`Statement`), this backend
//!   takes them in itself (`AcceptInvalidationMessages`) and reads the keys again if they are
//!   stale: a statement uses every change committed before it began. The rows are read with a
//!   fresh snapshot, taken after the invalidation was processed, so a reload never sees the
//!   state from before the change that caused it.
//! - **Within a statement** nothing is read again: the functions are `STABLE`. And each call
//!   site keeps the keys of its first call in its `FmgrInfo` for as long as the executor keeps
//!   that (`with_keys`): one execution, a cursor's whole life, also when a statement nested in
//!   it (a function's) reads newer keys.
//! - **Parallel query.** A parallel worker would start with no keys and read the newest, which
//!   its leader need not hold yet: the functions are `PARALLEL RESTRICTED`, and a worker that
//!   is made to call one anyway (by a function wrongly marked `PARALLEL SAFE`) is refused.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::ff1::{Cipher, Domain};
use super::keys::{self, Material};
use crate::errors;

/// How many precomputed domains and checks a key version keeps (bounded: purposes are caller text).
const MEMO_LIMIT: usize = 64;

/// What the precomputation of a key version is for: an FF1 domain, or the check of a text form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Ff1 { radix: u32, n: u32 },
    Check { form: u8, width: u8 },
}

enum Precomputed {
    Ff1(Domain),
    Check([u8; 16]),
}

/// A key version, expanded: its ciphers and what it has precomputed per purpose.
pub struct KeyVersion {
    pub version: u32,
    ff1: Cipher,
    check: Cipher,
    memo: RefCell<Vec<(Vec<u8>, Use, Precomputed)>>,
}

impl KeyVersion {
    fn new(material: &Material) -> KeyVersion {
        let (Some(ff1), Some(check)) = (Cipher::new(&material.aes_key), Cipher::new(&material.check_key)) else {
            errors::raise(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                format!("mask key version {} has keys of a wrong length", material.version),
                None,
                None,
            )
        };
        KeyVersion { version: material.version, ff1, check, memo: RefCell::new(Vec::new()) }
    }

    fn memoized<T>(&self, purpose: &[u8], wanted: Use, make: impl FnOnce() -> Precomputed, read: impl FnOnce(&Precomputed) -> T) -> T {
        let mut memo = self.memo.borrow_mut();
        if let Some((_, _, found)) = memo.iter().find(|(p, u, _)| *u == wanted && p.as_slice() == purpose) {
            return read(found);
        }
        if memo.len() >= MEMO_LIMIT {
            memo.clear();
        }
        let made = make();
        let value = read(&made);
        memo.push((purpose.to_vec(), wanted, made));
        value
    }

    /// FF1 over `0 .. radix^n` with this key and `purpose` as the tweak: `x` enciphered, or
    /// deciphered when `inverse`. The caller keeps `x` below radix^n, and radix^n in
    /// `ff1::Domain`'s range.
    pub fn permute(&self, purpose: &[u8], radix: u32, n: u32, x: u128, inverse: bool) -> u128 {
        self.memoized(
            purpose,
            Use::Ff1 { radix, n },
            || Precomputed::Ff1(Domain::new(&self.ff1, radix, n, purpose).expect("a domain of a public number's form")),
            |p| match p {
                Precomputed::Ff1(domain) if inverse => domain.decrypt(&self.ff1, x),
                Precomputed::Ff1(domain) => domain.encrypt(&self.ff1, x),
                Precomputed::Check(_) => unreachable!("an FF1 use holds a domain"),
            },
        )
    }

    /// The check of `value` in text form `form` of width `width`: a CBC-MAC with the check key
    /// over one block naming the form, width, version and purpose length, the purpose in whole
    /// blocks, and the value's block. The first block fixes the message's length, so the
    /// messages are prefix-free, as CBC-MAC needs.
    pub fn check(&self, purpose: &[u8], form: u8, width: u8, value: u128) -> [u8; 16] {
        let chain = self.memoized(
            purpose,
            Use::Check { form, width },
            || {
                let mut head = vec![0u8; 16];
                head[..4].copy_from_slice(b"PIDC");
                head[4] = form;
                head[5] = width;
                head[6..10].copy_from_slice(&self.version.to_be_bytes());
                head[10] = purpose.len() as u8;
                head.extend_from_slice(purpose);
                head.resize(head.len().next_multiple_of(16), 0);
                Precomputed::Check(self.check.cbc_mac([0; 16], &head))
            },
            |p| match p {
                Precomputed::Check(chain) => *chain,
                Precomputed::Ff1(_) => unreachable!("a check use holds a chain"),
            },
        );
        self.check.cbc_mac(chain, &value.to_be_bytes())
    }
}

/// The keys of this database as this backend read them, ascending by version.
pub struct Keys {
    versions: Vec<KeyVersion>,
}

/// A statement, as far as the keys go: the transaction, when its top-level statement began
/// (each protocol message of a client starts anew), the command within the transaction (a
/// statement that changed something, the keys included, ends in a new command), the
/// subtransaction (a rollback to a savepoint starts a new one), and how many transactions had
/// ended when its snapshot was taken (the statements of one query string share the rest; one
/// that began after another session's commit has a newer count).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Statement {
    transaction: u32,
    started: i64,
    command: u32,
    subtransaction: u32,
    ended_transactions: u64,
}

impl Statement {
    fn now() -> Statement {
        // SAFETY: plain reads of this backend's transaction state (MyProc is valid in a backend,
        // the active snapshot while it is set).
        unsafe {
            #[cfg(any(feature = "pg15", feature = "pg16"))]
            let transaction = (*pg_sys::MyProc).lxid;
            #[cfg(any(feature = "pg17", feature = "pg18"))]
            let transaction = (*pg_sys::MyProc).vxid.lxid;
            Statement {
                transaction,
                started: pg_sys::GetCurrentStatementStartTimestamp(),
                command: pg_sys::GetCurrentCommandId(false),
                subtransaction: pg_sys::GetCurrentSubTransactionId(),
                ended_transactions: if pg_sys::ActiveSnapshotSet() { (*pg_sys::GetActiveSnapshot()).snapXactCompletionCount } else { 0 },
            }
        }
    }
}

thread_local! {
    /// The keys as last read; None when they must be read (never read, or there were none).
    static CACHE: RefCell<Option<Rc<Keys>>> = const { RefCell::new(None) };
    /// Set by `relation_changed` when the cache must be read again (a Cell: the callback may
    /// come while the cache is borrowed, and must not panic).
    static STALE: Cell<bool> = const { Cell::new(true) };
    /// The key table the cache was read from: invalidations of other relations are ignored.
    static CACHED_TABLE: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::InvalidOid) };
    /// Counts invalidations, so that a read during which one came is read again next time.
    static INVALIDATIONS: Cell<u64> = const { Cell::new(0) };
    /// The statement whose first call last checked the cache.
    static CHECKED_IN: Cell<Option<Statement>> = const { Cell::new(None) };
}

/// The relcache callback: the key table changed (or every relation did).
#[pg_guard]
extern "C-unwind" fn relation_changed(_arg: pg_sys::Datum, relation: pg_sys::Oid) {
    if relation == pg_sys::InvalidOid || relation == CACHED_TABLE.get() {
        STALE.set(true);
        INVALIDATIONS.set(INVALIDATIONS.get() + 1);
    }
}

/// Registers the invalidation callback. Called from `_PG_init`, in every process that loads the
/// library: masking works with or without the preload.
pub fn register_invalidation() {
    // SAFETY: a plain function pointer with the signature PostgreSQL calls.
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(relation_changed), pg_sys::Datum::from(0)) };
}

/// The keys for this statement: the cached ones, unless this is a statement's first call and a
/// change committed since they were read (then read again). Keys that are none are not cached:
/// the next call looks again.
fn statement_keys() -> Rc<Keys> {
    let statement = Statement::now();
    if let Some(keys) = CACHE.with(|c| c.borrow().clone()) {
        if CHECKED_IN.get() == Some(statement) {
            return keys;
        }
        // SAFETY: processes this backend's pending invalidations, as taking a lock would.
        unsafe { pg_sys::AcceptInvalidationMessages() };
        if !STALE.get() {
            CHECKED_IN.set(Some(statement));
            return keys;
        }
    }
    let table = keys::require_table();
    let before = INVALIDATIONS.get();
    CACHED_TABLE.set(table);
    let keys = Rc::new(Keys { versions: keys::read_material(table).iter().map(KeyVersion::new).collect() });
    // An invalidation that came while reading: read again at the next statement.
    STALE.set(INVALIDATIONS.get() != before);
    CHECKED_IN.set(Some(statement));
    CACHE.with(|c| *c.borrow_mut() = (!keys.versions.is_empty()).then(|| keys.clone()));
    keys
}

/// Drops a call site's hold on its keys when the executor frees its `FmgrInfo`.
unsafe extern "C-unwind" fn release(keys: *mut std::ffi::c_void) {
    // SAFETY: `keys` is the pointer `with_keys` made with Rc::into_raw, released once.
    drop(unsafe { Rc::from_raw(keys.cast_const().cast::<Keys>()) });
}

/// Runs `f` on the keys of the call site of `fcinfo`: those of its first call in this
/// execution, kept in its `FmgrInfo` until the executor frees it.
fn with_keys<T>(fcinfo: pg_sys::FunctionCallInfo, f: impl FnOnce(&Keys) -> T) -> T {
    // SAFETY: `fcinfo` is the call's, its flinfo the call site's; fn_extra is ours (a plain C
    // function's, not set-returning, and fmgr's SET/SECURITY DEFINER wrapper calls us with a
    // FmgrInfo of its own); what it points to lives as long as fn_mcxt, whose reset callback
    // releases it.
    unsafe {
        if pg_sys::ParallelWorkerNumber >= 0 {
            errors::raise(
                PgSqlErrorCode::ERRCODE_INVALID_TRANSACTION_STATE,
                "public numbers cannot be made or read in a parallel worker".into(),
                Some("A parallel worker would read the mask keys itself, which need not be those its leader uses.".into()),
                Some("Mark the function that calls it PARALLEL RESTRICTED, as id_mask() and the other mask functions are."),
            )
        }
        let flinfo = (*fcinfo).flinfo;
        if flinfo.is_null() {
            return f(&statement_keys());
        }
        let held = (*flinfo).fn_extra.cast_const().cast::<Keys>();
        if !held.is_null() {
            return f(&*held);
        }
        let keys = statement_keys();
        if !keys.versions.is_empty() && !(*flinfo).fn_mcxt.is_null() {
            let context = (*flinfo).fn_mcxt;
            let callback =
                pg_sys::MemoryContextAllocZero(context, size_of::<pg_sys::MemoryContextCallback>()).cast::<pg_sys::MemoryContextCallback>();
            let raw = Rc::into_raw(keys.clone()).cast_mut().cast::<std::ffi::c_void>();
            (*callback).func = Some(release);
            (*callback).arg = raw;
            pg_sys::MemoryContextRegisterResetCallback(context, callback);
            (*flinfo).fn_extra = raw;
        }
        f(&keys)
    }
}

/// Runs `f` on key version `version`, or the current (highest) one when None; raises 55000
/// when there is no key, 42704 when there is no such version.
pub fn with_version<T>(fcinfo: pg_sys::FunctionCallInfo, version: Option<u32>, f: impl FnOnce(&KeyVersion) -> T) -> T {
    let found = with_keys(fcinfo, |keys| {
        let key = match version {
            None => keys.versions.last(),
            Some(v) => keys.versions.iter().find(|k| k.version == v),
        };
        key.map(|k| Ok(f(k))).unwrap_or(Err(keys.versions.is_empty()))
    });
    match (found, version) {
        (Ok(value), _) => value,
        (Err(true), _) => keys::no_key(),
        (Err(false), Some(v)) => errors::raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("mask key version {v} does not exist in this database"),
            None,
            Some("Import it from the server that made it: id_mask_key_export() there, id_mask_key_import() here."),
        ),
        (Err(false), None) => unreachable!("a non-empty list has a last version"),
    }
}

/// `f` run on the one version present whose digit (`keys::digit`) is `digit`; `Err(true)` when
/// there is no key at all, `Err(false)` when no version has that digit.
pub fn with_digit<T>(fcinfo: pg_sys::FunctionCallInfo, digit: u32, f: impl FnOnce(&KeyVersion) -> T) -> Result<T, bool> {
    with_keys(fcinfo, |keys| keys.versions.iter().find(|k| keys::digit(k.version) == digit).map(f).ok_or(keys.versions.is_empty()))
}
