//! Which texts may be keys of per-key sequences (`seq_next_text()`, `seq_key()`, `seq_fill()`).
//!
//! A text key is its bytes. Texts that a nondeterministic collation calls equal ('Berlin' and
//! 'berlin' under a case-insensitive one) are one value to a table and its unique indexes; the
//! key of the bytes would give them separate counters, and the key of the collation's sort key
//! would change with the collation library's version (and the counters with it). So a key of a
//! nondeterministic collation is refused (0A000).

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::errors;
use crate::tables::display;

/// Whether texts equal under `collation` are equal bytes. The database's default collation is
/// deterministic (PostgreSQL allows no other), and so are "C" and "POSIX": answered without a
/// catalog lookup, which only other collations cost.
#[inline]
pub fn is_deterministic(collation: pg_sys::Oid) -> bool {
    matches!(collation, pg_sys::InvalidOid | pg_sys::DEFAULT_COLLATION_OID | pg_sys::C_COLLATION_OID | pg_sys::POSIX_COLLATION_OID)
        // SAFETY: a catalog lookup of a collation a column or an expression has.
        || unsafe { pg_sys::get_collation_isdeterministic(collation) }
}

/// Refuses (0A000) a text key of a nondeterministic collation: `message` gets the collation's name.
#[cold]
pub fn refuse_nondeterministic(collation: pg_sys::Oid, message: impl FnOnce(&str) -> String, hint: &str) -> ! {
    // SAFETY: the collation exists (a column or an expression has it); the name is palloc'd.
    let name = unsafe {
        let name = pg_sys::get_collation_name(collation);
        if name.is_null() { format!("{}", collation.to_u32()) } else { display(std::ffi::CStr::from_ptr(name).to_bytes()) }
    };
    errors::raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        message(&name),
        Some("Text keys are told apart by their bytes. Under a nondeterministic collation texts spelled differently can be equal ('Berlin' and 'berlin'), and would get separate counters.".into()),
        Some(hint),
    )
}

/// Refuses a text key passed to `function` under a nondeterministic collation.
#[inline]
pub fn require_deterministic_argument(collation: pg_sys::Oid, function: &str) {
    if !is_deterministic(collation) {
        refuse_nondeterministic(
            collation,
            |name| format!("{function}: a text key cannot have the nondeterministic collation \"{name}\""),
            "Pass the key as key COLLATE \"C\" (every spelling then has a counter of its own), or normalise it first, e.g. lower(key) COLLATE \"C\".",
        );
    }
}
