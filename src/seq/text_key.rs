//! Text keys: the bigint key a text stands for in a space, and what may be a text key.
//!
//! - A space made by `seq_space_create()` (from 0.9.0) hashes its texts with SipHash-2-4 under a
//!   secret of its own: 16 bytes from the operating system's random source, made with the space
//!   and kept in `seq_space_secret`, which nobody but the tables' owner can read. Why keyed: a
//!   tenant who chooses its texts must not be able to aim at another text's counter (and read how
//!   many numbers it took); without the secret it cannot compute where a text goes. Why SipHash:
//!   a pseudorandom function made for short inputs and hash-flooding (Rust's own `HashMap`
//!   default), a few tens of nanoseconds for a short text, from the `siphasher` crate; its output
//!   is fixed by the published algorithm (the unit test holds it to the paper's vector).
//! - A space made before (`text_key_hash = 'fnv-1a'`) keeps FNV-1a 64 and SplitMix64's finaliser:
//!   its sections hold the numbers its texts were given, and any other mapping would start each
//!   text below them. The column's default says the same of a row that does not name it (a row
//!   inserted by hand, a dump of 0.8.0 restored).
//! - A keyed space whose secret is missing (a dump restored without the secret's row) refuses its
//!   text keys: a new secret would number every text from 1 again.
//! - A text key is its bytes. Texts that a nondeterministic collation calls equal ('Berlin' and
//!   'berlin' under a case-insensitive one) are one value to a table and its unique indexes; the
//!   key of the bytes would give them separate counters, and the key of the collation's sort key
//!   would change with the collation library's version (and the counters with it). So a key of a
//!   nondeterministic collation is refused (0A000).

use pgrx::pg_sys;
use pgrx::prelude::*;
use siphasher::sip::SipHasher24;

use super::cache::hash_bytes;
use crate::errors;
use crate::tables::display;

/// `seq_space.text_key_hash` of a space made before 0.9.0 (and the column's default).
pub const UNKEYED: &[u8] = b"fnv-1a";
/// `seq_space.text_key_hash` of a space made by `seq_space_create()` from 0.9.0.
pub const KEYED: &[u8] = b"siphash-2-4";
/// The bytes of a space's secret.
pub const SECRET_LEN: usize = 16;

/// How a space maps its text keys to bigint keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKeys {
    /// FNV-1a 64 of the bytes, then SplitMix64's finaliser: a space made before 0.9.0.
    Unkeyed,
    /// SipHash-2-4 of the bytes under the space's secret (its two halves, little-endian).
    Keyed(u64, u64),
    /// Keyed, but the space's secret is missing.
    SecretMissing,
}

impl TextKeys {
    /// The mapping of a space whose `text_key_hash` is `hash` (None: a table without the column,
    /// pg_idgen's SQL objects from before 0.9.0), with its secret if it needs one.
    pub fn of_row(space: &[u8], hash: Option<&[u8]>, secret: impl FnOnce() -> Option<[u8; SECRET_LEN]>) -> TextKeys {
        match hash {
            None => TextKeys::Unkeyed,
            Some(hash) if hash == UNKEYED => TextKeys::Unkeyed,
            Some(hash) if hash == KEYED => secret().map_or(TextKeys::SecretMissing, TextKeys::keyed),
            Some(other) => errors::raise(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                format!("sequence space \"{}\" has an unknown text_key_hash \"{}\"", display(space), display(other)),
                None,
                None,
            ),
        }
    }

    /// SipHash-2-4 under `secret`, read as two little-endian halves (as SipHash's reference does).
    pub fn keyed(secret: [u8; SECRET_LEN]) -> TextKeys {
        let half = |i: usize| u64::from_le_bytes(secret[i..i + 8].try_into().expect("8 bytes"));
        TextKeys::Keyed(half(0), half(8))
    }

    /// What the space's cached sections carry of it besides its id and section size
    /// (`cache::SectionId::space_hash`): the hash of its name, and for a keyed space its secret's
    /// too. Why the secret: an extension created anew numbers its spaces' ids from 1 again, so a
    /// space made anew can have the id, name and section size of one that a backend still knows;
    /// that backend maps texts with the old secret, and must not find the new space's sections
    /// with the keys it makes (it would hand a text a number that its new key had already
    /// given it). Not finding them, it reads the space's row again.
    pub fn space_hash(self, name: &[u8]) -> u64 {
        match self {
            TextKeys::Keyed(k0, k1) => hash_bytes(name) ^ SipHasher24::new_with_keys(k0, k1).hash(b"pg_idgen space"),
            TextKeys::Unkeyed | TextKeys::SecretMissing => hash_bytes(name),
        }
    }

    /// The bigint key of `text`; None when the space's secret is missing.
    #[inline]
    pub fn key(self, text: &[u8]) -> Option<i64> {
        match self {
            TextKeys::Unkeyed => Some(hash_bytes(text) as i64),
            TextKeys::Keyed(k0, k1) => Some(SipHasher24::new_with_keys(k0, k1).hash(text) as i64),
            TextKeys::SecretMissing => None,
        }
    }
}

/// A new space's secret.
pub fn new_secret() -> [u8; SECRET_LEN] {
    crate::random::os_bytes()
}

#[cold]
pub fn secret_missing(space: &[u8]) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("sequence space \"{}\" has no secret for its text keys", display(space)),
        Some("Its text keys are hashed with a secret kept in seq_space_secret, and the space's row there is missing (a dump restored without it?). A new secret would number every text key of the space from 1 again.".into()),
        Some("Restore the space's row of seq_space_secret from a dump made by a superuser. Its bigint keys (seq_next) are served meanwhile."),
    )
}

/// The "POSIX" collation's OID, fixed in pg_collation.dat. Why not pg_sys's: PostgreSQL 18's
/// headers no longer name it.
const POSIX_COLLATION_OID: pg_sys::Oid = pg_sys::Oid::from_u32(951);

/// Whether texts equal under `collation` are equal bytes. The database's default collation is
/// deterministic (PostgreSQL allows no other), and so are "C" and "POSIX": answered without a
/// catalog lookup, which only other collations cost.
#[inline]
pub fn is_deterministic(collation: pg_sys::Oid) -> bool {
    matches!(collation, pg_sys::InvalidOid | pg_sys::DEFAULT_COLLATION_OID | pg_sys::C_COLLATION_OID | POSIX_COLLATION_OID)
        // SAFETY: a catalog lookup of a collation a column or an expression has.
        || unsafe { pg_sys::get_collation_isdeterministic(collation) }
}

/// Why a key of a nondeterministic collation is refused (the DETAIL of the error).
pub const NONDETERMINISTIC: &str = "Text keys are told apart by their bytes. Under a nondeterministic collation texts spelled differently can be equal ('Berlin' and 'berlin'), and would get separate counters.";

/// The name of a collation as the catalog stores it (in the database's encoding).
#[cold]
pub fn collation_name(collation: pg_sys::Oid) -> Vec<u8> {
    // SAFETY: the collation exists (a column or an expression has it); the name is palloc'd.
    unsafe {
        let name = pg_sys::get_collation_name(collation);
        if name.is_null() {
            collation.to_u32().to_string().into_bytes()
        } else {
            std::ffi::CStr::from_ptr(name).to_bytes().to_vec()
        }
    }
}

/// Refuses (0A000) a text key passed to `function` under a nondeterministic collation.
#[inline]
pub fn require_deterministic_argument(collation: pg_sys::Oid, function: &str) {
    if !is_deterministic(collation) {
        refuse_argument(collation, function);
    }
}

#[cold]
fn refuse_argument(collation: pg_sys::Oid, function: &str) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("{function}: a text key cannot have the nondeterministic collation \"{}\"", display(&collation_name(collation))),
        Some(NONDETERMINISTIC.into()),
        Some(
            "Pass the key as key COLLATE \"C\" (every spelling then has a counter of its own), or normalise it first, e.g. lower(key) COLLATE \"C\".",
        ),
    )
}

crate::c_function::c_functions! {
    /// `seq_key(text)` as pg_idgen 0.8.0's SQL declares it, until `ALTER EXTENSION pg_idgen
    /// UPDATE` replaces it with `seq_key(space, key)`: every space of that SQL is unkeyed.
    fn seq_key_wrapper / pg_finfo_seq_key_wrapper (fcinfo) {
        let text = crate::c_function::arg::<&[u8]>(fcinfo, 0);
        pg_sys::Datum::from(hash_bytes(text) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::TextKeys;

    /// Claim: a keyed space's text keys are SipHash-2-4 as published: the paper's test vector
    /// (key 00 01 … 0f, message 00 01 … 0e: a129ca6149be45e5), with the secret read as two
    /// little-endian halves; an unkeyed space's are 0.8.0's (FNV-1a 64 and SplitMix64 of "alice");
    /// a space whose secret is missing has none.
    #[test]
    fn text_keys_are_fixed_by_their_algorithm() {
        let secret: [u8; 16] = std::array::from_fn(|i| i as u8);
        let message: Vec<u8> = (0..15).collect();
        assert_eq!(TextKeys::keyed(secret).key(&message), Some(0xa129_ca61_49be_45e5_u64 as i64));
        assert_eq!(TextKeys::Unkeyed.key(b"alice"), Some(-4192475849746331044));
        assert_eq!(TextKeys::SecretMissing.key(b"alice"), None);
    }
}
