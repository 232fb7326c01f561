//! Mask keys: the tables that hold them, and making, exporting and importing them.
//!
//! - A key version is a row of `idgen_internal.mask_key`: an AES key for FF1 (16, 24 or 32
//!   bytes; made ones are 32) and an AES-256 key for the checks of the text forms. The highest
//!   version is the current one.
//! - Only superusers read the rows: no privilege on the table is granted, and row-level security
//!   is enabled and forced without a policy, so `pg_read_all_data` (which grants SELECT but does
//!   not bypass row security) sees no row. The masking functions read the rows through the C API
//!   (no SQL, no row security) and hand out only masked values.
//! - The text forms name a version by one digit (`digit`). The table's unique index on it keeps
//!   two versions with one digit from being present together, so a text's digit names at most
//!   one version: a number is only ever checked and unmasked under the version that made it.
//! - A version's number names one key for good: `idgen_internal.mask_key_history` keeps every
//!   version this database has held (its number and the fingerprint of its keys) when the
//!   version is retired, i.e. its key row deleted. `id_mask_key_create()` numbers above all of
//!   them; `id_mask_key_import()` refuses other keys under a number held before, and does not
//!   bring a retired version back.
//! - Keys made here are made inside pg_idgen's `INSERT` (`RANDOM_KEY`), never passed to it as
//!   parameters, which pgaudit and auto_explain can log. Imported keys are parameters of its
//!   `INSERT` (docs/public-numbers.md says what to turn off for an import).

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use super::ff1::Cipher;
use crate::tables::{Owner, Row};
use crate::{errors, tables};

pub const KEY_TABLE: &CStr = c"mask_key";
const HISTORY_TABLE: &CStr = c"mask_key_history";
/// The first line of an exported key text; its number is the format's version.
const EXPORT_HEADER: &str = "pg_idgen mask keys 1";
/// How many versions can be present at once: one per digit.
const DIGITS: u32 = 9;
/// The block whose encryption under each of a version's keys is the version's fingerprint.
const FINGERPRINT_BLOCK: [u8; 16] = *b"pg_idgen key id\0";
/// 32 bytes from PostgreSQL's strong random source (`pg_strong_random()`, behind
/// `gen_random_uuid()`): three version 4 UUIDs, 366 random bits, through SHA-256.
const RANDOM_KEY: &str = "pg_catalog.sha256(pg_catalog.uuid_send(pg_catalog.gen_random_uuid()) \
     OPERATOR(pg_catalog.||) pg_catalog.uuid_send(pg_catalog.gen_random_uuid()) \
     OPERATOR(pg_catalog.||) pg_catalog.uuid_send(pg_catalog.gen_random_uuid()))";

/// One key version's secret bytes.
pub struct Material {
    pub version: u32,
    pub aes_key: Vec<u8>,
    pub check_key: Vec<u8>,
}

impl Material {
    /// What tells this version's keys from others without revealing them: AES of a fixed block
    /// under each of its keys.
    fn fingerprint(&self) -> Vec<u8> {
        [&self.aes_key, &self.check_key]
            .iter()
            .flat_map(|key| {
                let mut block = FINGERPRINT_BLOCK;
                Cipher::new(key).expect("a key of a valid length").encrypt(&mut block);
                block
            })
            .collect()
    }
}

/// The digit that names `version` in the text forms: 1 + (version − 1) mod 9, never 0 (a decimal
/// public number keeps its width when read as a number). The unique index `mask_key_digit` on
/// `((version - 1) % 9)` holds the same rule.
pub fn digit(version: u32) -> u32 {
    1 + (version - 1) % DIGITS
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

/// The OID of the extension's table `name`; raises when it is missing.
fn require(name: &CStr) -> pg_sys::Oid {
    tables::extension_table_oid(name).unwrap_or_else(|| {
        errors::raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!("pg_idgen's table {} does not exist in this database", name.to_string_lossy()),
            None,
            Some("CREATE EXTENSION pg_idgen in this database first (or ALTER EXTENSION pg_idgen UPDATE)."),
        )
    })
}

pub fn require_table() -> pg_sys::Oid {
    require(KEY_TABLE)
}

/// Every key version's bytes, ascending, read through the C API with a fresh snapshot (also in
/// a hot standby; no row security applies to it). Waits for a lock on the table at most
/// `pg_idgen.segment_wait_timeout`, then raises 55P03.
pub fn read_material(table: pg_sys::Oid) -> Vec<Material> {
    let deadline_ms = crate::worker::wait::Deadline::new().ms();
    tables::lock_until(table, deadline_ms, &|| "the mask keys".into());
    let mut found = Vec::new();
    // SAFETY: the table is locked; it is scanned with a freshly taken snapshot (a NULL snapshot
    // makes systable_beginscan take the catalog snapshot, taken anew for a relation that is not
    // a catalog), and closed; the lock is kept to the end of the transaction.
    unsafe {
        let relation = pg_sys::table_open(table, pg_sys::NoLock as i32);
        let scan = pg_sys::systable_beginscan(relation, pg_sys::InvalidOid, false, std::ptr::null_mut(), 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() {
                break;
            }
            let row = Row::new(relation, tuple, Owner::Table("mask_key"));
            match (row.int(c"version"), row.bytes(c"aes_key"), row.bytes(c"check_key")) {
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

/// The key table and its history, locked against other key functions for the rest of the
/// transaction (the masking functions read on meanwhile).
struct KeyTables {
    keys: pg_sys::Oid,
    history: pg_sys::Oid,
}

impl KeyTables {
    fn lock() -> KeyTables {
        let tables = KeyTables { keys: require_table(), history: require(HISTORY_TABLE) };
        tables.run(0, "LOCK TABLE {keys} IN SHARE ROW EXCLUSIVE MODE", Spi::run);
        tables
    }

    /// Runs pg_idgen's statement on the tables, with the search path pinned, as a change the
    /// caller asked for that fires triggers on `events` (`tables::Run::Change`: none the tables'
    /// owner did not enable ALWAYS); an error is raised.
    fn run<T>(&self, events: u32, statement: &str, run: impl FnOnce(&str) -> Result<T, pgrx::spi::SpiError>) -> T {
        tables::run_on_tables(&[("{keys}", self.keys), ("{history}", self.history)], tables::Run::Change { events }, statement, run)
            .unwrap_or_else(|message| errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Every version this database has held, with its fingerprint.
    fn history(&self) -> Vec<(u32, Vec<u8>)> {
        self.run(0, "SELECT h.version, h.fingerprint FROM {history} h", |sql| {
            Spi::connect(|client| {
                client
                    .select(sql, None, &[])?
                    .map(|row| Ok((row.get::<i32>(1)?.unwrap_or_default() as u32, row.get::<Vec<u8>>(2)?.unwrap_or_default())))
                    .collect()
            })
        })
    }

    /// Records the versions in the history (those it holds already stay as they are).
    fn remember(&self, versions: &[&Material]) {
        for m in versions {
            let args = [(m.version as i32).into(), m.fingerprint().as_slice().into()];
            self.run(
                pg_sys::TRIGGER_TYPE_INSERT,
                "INSERT INTO {history} (version, fingerprint) VALUES ($1, $2) ON CONFLICT (version) DO NOTHING",
                |sql| Spi::run_with_args(sql, &args),
            );
        }
    }

    /// Every backend reads the keys again once this transaction commits (and this one at its
    /// next statement), whatever the table's triggers do: a restore's `ENABLE TRIGGER ALL` leaves
    /// them firing for ordinary sessions only, and pg_idgen's statements run as replication does.
    fn invalidate(&self) {
        // SAFETY: queues a relcache invalidation of an existing relation.
        unsafe { pg_sys::CacheInvalidateRelcacheByRelid(self.keys) };
    }
}

/// Raises 55000 if `version`'s digit is that of `other` (a version present, or one of the same
/// import), which would then read one's numbers as the other's.
fn refuse_shared_digit(version: u32, other: u32, present: bool) {
    let d = digit(version);
    let (detail, hint) = if present {
        (
            format!("The text forms name a version by one digit, 1 + (version - 1) mod 9: version {other} has {d}, and two versions present must not share one."),
            Some(format!(
                "Retire version {other} first: DELETE FROM idgen_internal.mask_key WHERE version = {other} (its public numbers then no longer unmask)."
            )),
        )
    } else {
        (format!("The text holds versions {other} and {version}, which share the digit {d}; two versions present must not."), None)
    };
    errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("mask key version {version} would share the digit {d} with version {other}"),
        Some(detail),
        hint.as_deref(),
    )
}

#[pg_extern(volatile)]
/// Makes a new key version from PostgreSQL's strong random source and makes it current: the
/// next number above every version this database has held whose digit no present version has.
/// Returns its number. Superusers only.
fn id_mask_key_create() -> i32 {
    require_superuser("id_mask_key_create()");
    let tables = KeyTables::lock();
    let present = read_material(tables.keys);
    if present.len() as u32 >= DIGITS {
        let oldest = present[0].version;
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{} mask key versions are present, one for each digit", present.len()),
            Some(
                "The text forms name a version by one digit, 1 + (version - 1) mod 9; a new version needs a digit that no version present has."
                    .into(),
            ),
            Some(&format!(
                "Retire the oldest first: DELETE FROM idgen_internal.mask_key WHERE version = {oldest} (its public numbers then no longer unmask)."
            )),
        )
    }
    let highest = present.iter().map(|m| m.version).chain(tables.history().into_iter().map(|(v, _)| v)).max().unwrap_or(0);
    let version = (highest + 1..).find(|&v| present.iter().all(|m| digit(m.version) != digit(v))).expect("a free digit");
    if version > i32::MAX as u32 {
        errors::raise(PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED, "no mask key version number is left".into(), None, None)
    }
    let insert = format!("INSERT INTO {{keys}} (version, aes_key, check_key) VALUES ($1, {RANDOM_KEY}, {RANDOM_KEY})");
    tables.run(pg_sys::TRIGGER_TYPE_INSERT, &insert, |sql| Spi::run_with_args(sql, &[(version as i32).into()]));
    let now = read_material(tables.keys);
    tables.remember(&now.iter().collect::<Vec<_>>());
    tables.invalidate();
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
/// versions it has must hold the same keys, a number it held before the same keys, and no two
/// versions present may share a digit. A version retired here is not brought back. Returns how
/// many it added. Superusers only.
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
    let tables = KeyTables::lock();
    let present = read_material(tables.keys);
    let history = tables.history();
    let mut adding: Vec<&Material> = Vec::new();
    for m in &imported {
        let held = history.iter().find(|(v, _)| *v == m.version);
        match present.iter().find(|p| p.version == m.version) {
            Some(p) if p.aes_key == m.aes_key && p.check_key == m.check_key => continue,
            Some(_) => errors::raise(
                PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
                format!("mask key version {} exists in this database with other keys", m.version),
                Some("Public numbers made with one would not unmask with the other; nothing was imported.".into()),
                Some("Import into a database whose versions came from the same server, or compare the two with id_mask_key_export()."),
            ),
            None => {}
        }
        match held {
            Some((_, fingerprint)) if *fingerprint == m.fingerprint() => {
                ErrorReport::new(
                    PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
                    format!("mask key version {} was retired in this database: it is not imported again", m.version),
                    "pg_idgen",
                )
                .set_hint(format!(
                    "To bring it back, deliberately, delete its row of idgen_internal.mask_key_history first (DELETE FROM idgen_internal.mask_key_history WHERE version = {}).",
                    m.version
                ))
                .report(PgLogLevel::NOTICE);
                continue;
            }
            Some(_) => errors::raise(
                PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
                format!("mask key version {} was retired in this database, where it held other keys", m.version),
                Some("A version's number names one key for good: public numbers of the retired version would unmask with the other key; nothing was imported.".into()),
                Some("Import into a database whose versions came from the same server (idgen_internal.mask_key_history lists every version held here)."),
            ),
            None => {}
        }
        if let Some(p) = present.iter().find(|p| digit(p.version) == digit(m.version)) {
            refuse_shared_digit(m.version, p.version, true);
        }
        if let Some(other) = adding.iter().find(|a| digit(a.version) == digit(m.version)) {
            refuse_shared_digit(m.version, other.version, false);
        }
        adding.push(m);
    }
    for m in &adding {
        let args = [(m.version as i32).into(), m.aes_key.as_slice().into(), m.check_key.as_slice().into()];
        tables.run(pg_sys::TRIGGER_TYPE_INSERT, "INSERT INTO {keys} (version, aes_key, check_key) VALUES ($1, $2, $3)", |sql| {
            Spi::run_with_args(sql, &args)
        });
    }
    tables.remember(&present.iter().chain(adding.iter().copied()).collect::<Vec<_>>());
    if !adding.is_empty() {
        tables.invalidate();
    }
    adding.len() as i32
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
        if !field.len().is_multiple_of(2) || !field.bytes().all(|b| b.is_ascii_hexdigit()) {
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
    /// The triggers on `mask_key` (AFTER INSERT OR UPDATE OR DELETE for each row, AFTER TRUNCATE
    /// for the statement): every backend reads the keys again once the change commits.
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
