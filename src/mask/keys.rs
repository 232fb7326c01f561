//! Mask keys: the table that holds them, each backend's cache of their expanded AES key
//! schedules, and creating, exporting and importing them.
//!
//! - A key version is a row of `idgen_internal.mask_key`: an AES key for FF1 (16, 24 or 32
//!   bytes; made ones are 32) and an AES-256 key for the checks of the text forms, both from the
//!   CSPRNG of `crate::random`. The highest version is the current one.
//! - Only superusers read the rows: no privilege on the table is granted, and row-level security
//!   is enabled and forced without a policy, so `pg_read_all_data` (which grants SELECT but does
//!   not bypass row security) sees no row. The masking functions read the rows through the C API
//!   (no SQL, no row security) and hand out only masked values.
//! - Each backend expands the keys once (`CACHE`) and keeps them until the table changes: the
//!   table's statement trigger sends a relcache invalidation for it, which PostgreSQL delivers to
//!   every backend after the change commits (and to this backend at its next command, or at
//!   abort), and `relation_changed` then drops the cache. Another backend's rotation is seen from
//!   the next transaction on; the rows are read with a fresh snapshot, taken after the
//!   invalidation was processed, so a reload never sees the state from before it.

use std::cell::{Cell, RefCell};
use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::ff1::{Cipher, Domain};
use crate::errors;
use crate::tables;

pub const KEY_TABLE: &CStr = c"mask_key";
/// The first line of an exported key text; its number is the format's version.
const EXPORT_HEADER: &str = "pg_idgen mask keys 1";
/// How many precomputed domains and checks a key version keeps (bounded: purposes are caller text).
const MEMO_LIMIT: usize = 64;

/// One key version's secret bytes.
struct Material {
    version: u32,
    aes_key: Vec<u8>,
    check_key: Vec<u8>,
}

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

/// The keys of this database as this backend last read them, ascending by version.
struct Keys {
    versions: Vec<KeyVersion>,
}

thread_local! {
    static CACHE: RefCell<Option<Keys>> = const { RefCell::new(None) };
    /// Set by `relation_changed` when the cache must be read again (a Cell: the callback may
    /// come while the cache is borrowed, and must not panic).
    static STALE: Cell<bool> = const { Cell::new(true) };
    /// The key table the cache was read from: invalidations of other relations are ignored.
    static CACHED_TABLE: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::InvalidOid) };
    /// Counts invalidations, so that a read during which one came is read again next time.
    static INVALIDATIONS: Cell<u64> = const { Cell::new(0) };
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

/// Runs `f` on the database's keys, reading them first if this backend has not since they last
/// changed. Raises when the extension's key table is missing.
fn with_keys<T>(f: impl FnOnce(&[KeyVersion]) -> T) -> T {
    if STALE.get() || CACHE.with(|c| c.borrow().is_none()) {
        let table = require_table();
        let before = INVALIDATIONS.get();
        CACHED_TABLE.set(table);
        let versions = read_material(table)
            .into_iter()
            .map(|m| {
                let (Some(ff1), Some(check)) = (Cipher::new(&m.aes_key), Cipher::new(&m.check_key)) else {
                    errors::raise(
                        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                        format!("mask key version {} has keys of a wrong length", m.version),
                        None,
                        None,
                    )
                };
                KeyVersion { version: m.version, ff1, check, memo: RefCell::new(Vec::new()) }
            })
            .collect();
        CACHE.with(|c| *c.borrow_mut() = Some(Keys { versions }));
        // An invalidation that came while reading: read again at the next call.
        STALE.set(INVALIDATIONS.get() != before);
    }
    CACHE.with(|c| f(&c.borrow().as_ref().expect("just read").versions))
}

/// Runs `f` on key version `version`, or the current (highest) one when None; raises 55000
/// when there is no key, 42704 when there is no such version.
pub fn with_version<T>(version: Option<u32>, f: impl FnOnce(&KeyVersion) -> T) -> T {
    let found = with_keys(|versions| {
        let key = match version {
            None => versions.last(),
            Some(v) => versions.iter().find(|k| k.version == v),
        };
        key.map(|k| Ok(f(k))).unwrap_or(Err(versions.is_empty()))
    });
    match (found, version) {
        (Ok(value), _) => value,
        (Err(true), _) => no_key(),
        (Err(false), Some(v)) => errors::raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("mask key version {v} does not exist in this database"),
            None,
            Some("Import it from the server that made it: id_mask_key_export() there, id_mask_key_import() here."),
        ),
        (Err(false), None) => unreachable!("a non-empty list has a last version"),
    }
}

/// The first `Some` that `f` gives for the versions `v` with `v % modulus == residue`, newest
/// first; `Err(true)` when there is no key at all, `Err(false)` when none such or all gave None.
pub fn find_in_versions<T>(modulus: u32, residue: u32, mut f: impl FnMut(&KeyVersion) -> Option<T>) -> Result<T, (bool, Vec<u32>)> {
    with_keys(|versions| {
        let mut tried = Vec::new();
        for key in versions.iter().rev().filter(|k| k.version % modulus == residue) {
            tried.push(key.version);
            if let Some(found) = f(key) {
                return Ok(found);
            }
        }
        Err((versions.is_empty(), tried))
    })
}

#[cold]
pub fn no_key() -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "this database has no mask key".into(),
        Some("Public numbers are made with a key that the server keeps; none has been made or imported here.".into()),
        Some("A superuser creates one with SELECT id_mask_key_create(), or imports one with id_mask_key_import()."),
    )
}

fn require_table() -> pg_sys::Oid {
    tables::extension_table_oid(KEY_TABLE).unwrap_or_else(|| {
        errors::raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            "pg_idgen's mask key table does not exist in this database".into(),
            None,
            Some("CREATE EXTENSION pg_idgen in this database first (or ALTER EXTENSION pg_idgen UPDATE)."),
        )
    })
}

/// Every key version's bytes, ascending, read through the C API with a fresh snapshot (also in
/// parallel workers and on a hot standby; no row security applies to it).
fn read_material(table: pg_sys::Oid) -> Vec<Material> {
    let mut found = Vec::new();
    // SAFETY: the table is opened and locked, scanned with a freshly taken snapshot (a NULL
    // snapshot makes systable_beginscan take the catalog snapshot, taken anew for a relation that
    // is not a catalog), and closed; the lock is kept to the end of the transaction.
    unsafe {
        let relation = pg_sys::table_open(table, pg_sys::AccessShareLock as i32);
        let attribute = |name: &CStr| pg_sys::get_attnum(table, name.as_ptr()) as i32;
        let (version_at, aes_at, check_at) = (attribute(c"version"), attribute(c"aes_key"), attribute(c"check_key"));
        let scan = pg_sys::systable_beginscan(relation, pg_sys::InvalidOid, false, std::ptr::null_mut(), 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() {
                break;
            }
            let desc = (*relation).rd_att;
            let mut null = false;
            let version = i32::from_datum(pg_sys::heap_getattr(tuple, version_at, desc, &mut null), null);
            let aes_key = <&[u8]>::from_datum(pg_sys::heap_getattr(tuple, aes_at, desc, &mut null), null).map(<[u8]>::to_vec);
            let check_key = <&[u8]>::from_datum(pg_sys::heap_getattr(tuple, check_at, desc, &mut null), null).map(<[u8]>::to_vec);
            match (version, aes_key, check_key) {
                (Some(version), Some(aes_key), Some(check_key)) if version > 0 => {
                    found.push(Material { version: version as u32, aes_key, check_key })
                }
                _ => errors::raise(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "a row of pg_idgen's mask_key is incomplete".into(), None, None),
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(relation, pg_sys::NoLock as i32);
    }
    found.sort_by_key(|m| m.version);
    found
}

/// Raises 42501 unless the caller is a superuser: the key functions read the rows through the C
/// API, so EXECUTE alone must not be enough (a superuser may have granted it).
fn require_superuser(function: &str) {
    // SAFETY: a catalog lookup of the current user.
    if !unsafe { pg_sys::superuser() } {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("permission denied for {function}"),
            Some("Mask keys are read and written by superusers only.".into()),
            None,
        )
    }
}

/// Runs pg_idgen's statement on the key table, with the search path pinned, as a change the
/// caller asked for that fires triggers on `events` (`tables::Run::Change`: none the table's owner
/// did not enable ALWAYS); an error is raised.
fn on_key_table<T>(table: pg_sys::Oid, events: u32, statement: &str, run: impl FnOnce(&str) -> Result<T, pgrx::spi::SpiError>) -> T {
    tables::run_on_tables(&[("{keys}", table)], tables::Run::Change { events }, statement, run)
        .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Adds key versions; the table's lock keeps two sessions from numbering versions alike.
fn insert(table: pg_sys::Oid, material: &Material) {
    let args = [(material.version as i32).into(), material.aes_key.as_slice().into(), material.check_key.as_slice().into()];
    on_key_table(table, pg_sys::TRIGGER_TYPE_INSERT, "INSERT INTO {keys} (version, aes_key, check_key) VALUES ($1, $2, $3)", |sql| {
        Spi::run_with_args(sql, &args)
    });
}

fn lock(table: pg_sys::Oid) {
    on_key_table(table, 0, "LOCK TABLE {keys} IN SHARE ROW EXCLUSIVE MODE", Spi::run);
}

#[pg_extern(volatile)]
/// Makes a new key version from the server's CSPRNG and makes it current; returns its number.
/// Superusers only.
fn id_mask_key_create() -> i32 {
    require_superuser("id_mask_key_create()");
    let table = require_table();
    lock(table);
    let version = read_material(table).last().map_or(1, |m| m.version + 1);
    let mut material = Material { version, aes_key: vec![0; 32], check_key: vec![0; 32] };
    crate::random::fill(&mut material.aes_key);
    crate::random::fill(&mut material.check_key);
    insert(table, &material);
    version as i32
}

#[pg_extern(volatile)]
/// Every key version as text for id_mask_key_import() on another server. The text is as secret
/// as the keys. Superusers only.
fn id_mask_key_export() -> String {
    require_superuser("id_mask_key_export()");
    let material = read_material(require_table());
    if material.is_empty() {
        no_key();
    }
    let mut text = String::from(EXPORT_HEADER);
    for m in &material {
        text.push_str(&format!("\nversion {} aes {} check {}", m.version, hex(&m.aes_key), hex(&m.check_key)));
    }
    text
}

#[pg_extern(volatile)]
/// Adds the key versions of a text made by id_mask_key_export() that this database lacks;
/// versions it has must hold the same keys. Returns how many it added. Superusers only.
fn id_mask_key_import(keys: &str) -> i32 {
    require_superuser("id_mask_key_import()");
    let imported = parse_export(keys).unwrap_or_else(|problem| {
        // Why no DETAIL with the text: it is a secret, and error messages go to the log.
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid mask key text: {problem}"),
            None,
            Some("Pass the whole text that id_mask_key_export() returned."),
        )
    });
    let table = require_table();
    lock(table);
    let present = read_material(table);
    let mut added = 0;
    for m in &imported {
        match present.iter().find(|p| p.version == m.version) {
            Some(p) if p.aes_key == m.aes_key && p.check_key == m.check_key => {}
            Some(_) => errors::raise(
                PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
                format!("mask key version {} exists in this database with other keys", m.version),
                Some("Public numbers made with one would not unmask with the other; nothing was imported.".into()),
                Some("Import into a database whose versions came from the same server, or compare the two with id_mask_key_export()."),
            ),
            None => {
                insert(table, m);
                added += 1;
            }
        }
    }
    added
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key versions of an exported text, or what is wrong with it (never quoting it).
fn parse_export(text: &str) -> Result<Vec<Material>, String> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines.next() != Some(EXPORT_HEADER) {
        return Err(format!("it does not start with \"{EXPORT_HEADER}\""));
    }
    let unhex = |field: &str, what: &str, line: usize| -> Result<Vec<u8>, String> {
        if field.len() % 2 != 0 || !field.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("line {line}: the {what} key is not hexadecimal"));
        }
        Ok((0..field.len()).step_by(2).map(|i| u8::from_str_radix(&field[i..i + 2], 16).unwrap()).collect())
    };
    let mut found: Vec<Material> = Vec::new();
    for (index, line) in lines.enumerate() {
        let number = index + 2;
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let ["version", version, "aes", aes, "check", check] = fields[..] else {
            return Err(format!("line {number} is not \"version N aes HEX check HEX\""));
        };
        let version = version.parse::<i32>().ok().filter(|&v| v > 0).ok_or(format!("line {number}: the version is not a positive integer"))? as u32;
        let material = Material { version, aes_key: unhex(aes, "aes", number)?, check_key: unhex(check, "check", number)? };
        if ![16, 24, 32].contains(&material.aes_key.len()) || material.check_key.len() != 32 {
            return Err(format!("line {number}: an aes key is 16, 24 or 32 bytes and a check key 32"));
        }
        if found.iter().any(|m| m.version == version) {
            return Err(format!("line {number}: version {version} appears twice"));
        }
        found.push(material);
    }
    if found.is_empty() {
        return Err("it holds no key version".into());
    }
    Ok(found)
}

c_functions! {
    /// The statement trigger on `mask_key` (AFTER INSERT OR UPDATE OR DELETE, and TRUNCATE): every
    /// backend drops its cached keys once the change commits.
    fn pg_idgen_mask_key_changed / pg_finfo_pg_idgen_mask_key_changed (fcinfo) {
        let trigger = crate::c_function::trigger_data(fcinfo, "pg_idgen_mask_key_changed()");
        pg_sys::CacheInvalidateRelcache(trigger.tg_relation);
        pg_sys::Datum::from(0)
    }
}

use crate::c_function::c_functions;

#[cfg(test)]
mod tests {
    use super::parse_export;

    #[test]
    fn exported_text_is_parsed_and_bad_text_is_refused_without_quoting_it() {
        let key = "00".repeat(32);
        let good = format!("pg_idgen mask keys 1\nversion 1 aes {key} check {key}\n version 3 aes {} check {key} \n", "ab".repeat(16));
        let parsed = parse_export(&good).unwrap();
        assert_eq!(parsed.iter().map(|m| (m.version, m.aes_key.len())).collect::<Vec<_>>(), [(1, 32), (3, 16)]);
        for (bad, problem) in [
            ("", "does not start"),
            ("pg_idgen mask keys 1", "no key version"),
            (&format!("pg_idgen mask keys 1\nversion 0 aes {key} check {key}") as &str, "not a positive integer"),
            (&format!("pg_idgen mask keys 1\nversion 1 aes {} check {key}", "zz".repeat(32)), "not hexadecimal"),
            (&format!("pg_idgen mask keys 1\nversion 1 aes {} check {key}", "00".repeat(20)), "16, 24 or 32"),
            (&format!("pg_idgen mask keys 1\nversion 1 aes {key} check {key}\nversion 1 aes {key} check {key}"), "twice"),
            (&format!("pg_idgen mask keys 1\nversion 1 aes {key}"), "is not \"version"),
        ] {
            let error = parse_export(bad).err().unwrap();
            assert!(error.contains(problem), "{error}");
            assert!(!error.contains("zz") && !error.contains(&key), "the message quotes no key: {error}");
        }
    }
}
