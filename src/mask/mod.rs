//! Public numbers: a keyed, reversible mask of any id (FF1 over AES, NIST SP 800-38G), with the
//! key held by the server. Three forms of the masked id:
//!
//! | form | what it is | version | check |
//! |---|---|---|---|
//! | `bigint` | FF1 radix 2 over 63 bits: a bijection of 0 … 2^63−1 | given to `id_unmask` (default: current) | none |
//! | decimal, `D` digits | version digit ‖ FF1 radix 10 over `D`−3 digits ‖ 2 check digits | first digit | 1 in 100 |
//! | base32, 16 characters | version digit ‖ the bigint form in 13 digits ‖ 2 check digits | first character | 1 in 1,024 |
//!
//! The version digit is 1 + (version − 1) mod 9 (`keys::digit`), and no two versions present
//! share one: a text is checked and unmasked under the one version its digit names. The purpose
//! is FF1's tweak (its bytes in the database's encoding, up to 64): one id masks to unrelated
//! numbers for two purposes. The check digits are a CBC-MAC of the form, width, version, purpose
//! and FF1's output with a second key of the version (`cache::KeyVersion::check`): a text not
//! made with that version and purpose passes with the probability above, and is otherwise
//! refused (22023). The bigint form has no room for either: every bigint unmasks to some id.
//!
//! The functions are `STABLE` and `PARALLEL RESTRICTED`: every call of a statement uses the keys
//! of its first call, and only a parallel plan's leader masks (`cache`).

mod cache;
mod ff1;
mod keys;

use pgrx::prelude::*;

use crate::base32::Width;
use crate::errors;
use crate::tables::{display, TextBytes};

pub use cache::register_invalidation;

pgrx::extension_sql_file!(
    "mask.sql",
    name = "mask",
    requires = [
        "migrate",
        id_mask,
        id_unmask,
        id_mask_decimal,
        id_unmask_decimal,
        id_mask_base32,
        id_unmask_base32,
        keys::id_mask_key_create,
        keys::id_mask_key_export,
        keys::id_mask_key_import
    ]
);

/// Purposes are FF1 tweaks of up to this many bytes.
const MAX_PURPOSE: usize = 64;
/// The decimal form's widths: the FF1 part needs 6 digits at least (10^6 values, FF1's
/// smallest domain), and 19 hold every id.
const DECIMAL_DIGITS: std::ops::RangeInclusive<i32> = 9..=22;
const DECIMAL_CHECK_DIGITS: u32 = 2;
/// The base32 form: 1 version digit, 13 for the 63 bits, 2 check digits (10 bits).
const BASE32: Width = Width { bits: 80, digits: 16 };
const BASE32_CHECK_BITS: u32 = 10;
/// Form numbers inside the check's first block.
const FORM_DECIMAL: u8 = 1;
const FORM_BASE32: u8 = 2;

fn purpose_bytes<'a>(purpose: TextBytes<'a>) -> &'a [u8] {
    if purpose.0.len() > MAX_PURPOSE {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("purpose \"{}…\" is too long", display(&purpose.0[..20])),
            Some(format!("A purpose is at most {MAX_PURPOSE} bytes, not {}.", purpose.0.len())),
            None,
        )
    }
    purpose.0
}

/// An id to mask: 0 … 2^63−1.
fn require_id(id: i64) -> u128 {
    if id < 0 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("id {id} cannot be masked"),
            Some("Ids to mask are 0 to 9223372036854775807.".into()),
            None,
        )
    }
    id as u128
}

/// A text that is not a public number of this database's keys (22023): its check digits do not
/// match key version `tried`, or (None) it unmasks to more than an id.
#[cold]
fn not_made_here(form: &str, text: &[u8], purpose: &[u8], tried: Option<u32>) -> ! {
    let detail = match tried {
        None => "It unmasks to a value above the largest id, 9223372036854775807.".to_string(),
        Some(version) => format!("Its check digits do not match key version {version} with purpose \"{}\".", display(purpose)),
    };
    errors::raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("\"{}\" is not a {form} public number of this database", display(text)),
        Some(detail),
        Some("Unmask with the purpose it was masked with; a number made on another server needs that server's keys (id_mask_key_import())."),
    )
}

/// The version digit of a text form, 1 to 9, or 22P02.
fn version_digit(form: &str, text: &[u8], digit: u32) -> u32 {
    if !(1..=9).contains(&digit) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid {form} public number: \"{}\"", display(text)),
            Some(format!("Its first digit {} names no key version: versions are named by 1 to 9.", text[0] as char)),
            None,
        )
    }
    digit
}

/// The text form's version digit names no key version here (42704).
#[cold]
fn no_version(form: &str, text: &[u8], digit: char, no_key_at_all: bool) -> ! {
    if no_key_at_all {
        keys::no_key();
    }
    errors::raise(
        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        format!("\"{}\" is not a {form} public number of this database", display(text)),
        Some(format!("Its first digit {digit} names a key version that does not exist here.")),
        Some("A number made on another server needs that server's keys: id_mask_key_export() there, id_mask_key_import() here."),
    )
}

#[pg_extern(stable, parallel_restricted)]
/// The public number of an id: a bijection of 0 … 2^63−1 under the current key and the purpose.
fn id_mask(id: i64, purpose: default!(TextBytes, "''"), fcinfo: pg_sys::FunctionCallInfo) -> i64 {
    let (id, purpose) = (require_id(id), purpose_bytes(purpose));
    cache::with_version(fcinfo, None, |key| key.permute(purpose, 2, 63, id, false)) as i64
}

#[pg_extern(stable, parallel_restricted)]
/// The id of a public number made by id_mask() with the purpose, under key version `version`
/// (default: the current one).
fn id_unmask(
    masked: Option<i64>,
    purpose: default!(Option<TextBytes>, "''"),
    version: default!(Option<i32>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<i64> {
    let (masked, purpose) = (masked?, purpose_bytes(purpose?));
    if masked < 0 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{masked} is not a public number"),
            Some("id_mask() makes numbers from 0 to 9223372036854775807.".into()),
            None,
        )
    }
    let version = version.map(|v| {
        u32::try_from(v).ok().filter(|&v| v > 0).unwrap_or_else(|| {
            errors::raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid mask key version {v}"),
                Some("Versions are numbered from 1.".into()),
                None,
            )
        })
    });
    Some(cache::with_version(fcinfo, version, |key| key.permute(purpose, 2, 63, masked as u128, true)) as i64)
}

/// The decimal form's check digits of FF1 output `value`.
fn decimal_check(key: &cache::KeyVersion, purpose: &[u8], digits: u32, value: u128) -> u64 {
    let tag = key.check(purpose, FORM_DECIMAL, digits as u8, value);
    u64::from_be_bytes(tag[..8].try_into().unwrap()) % 10u64.pow(DECIMAL_CHECK_DIGITS)
}

#[pg_extern(stable, parallel_restricted)]
/// The public number of an id as `digits` decimal digits (9 to 22): the key version's digit,
/// the id under FF1 in digits − 3 digits, 2 check digits.
fn id_mask_decimal(id: i64, digits: i32, purpose: default!(TextBytes, "''"), fcinfo: pg_sys::FunctionCallInfo) -> String {
    let (id, purpose) = (require_id(id), purpose_bytes(purpose));
    if !DECIMAL_DIGITS.contains(&digits) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid number of digits {digits}"),
            Some(format!("The decimal form has {} to {} digits.", DECIMAL_DIGITS.start(), DECIMAL_DIGITS.end())),
            None,
        )
    }
    let n = digits as u32 - 1 - DECIMAL_CHECK_DIGITS;
    if id >= 10u128.pow(n) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("id {id} does not fit in {digits} digits"),
            Some(format!("{digits} digits hold ids below 10^{n} (one digit names the key version, two are check digits).")),
            Some("Give id_mask_decimal() more digits (up to 22)."),
        )
    }
    cache::with_version(fcinfo, None, |key| {
        let value = key.permute(purpose, 10, n, id, false);
        let check = decimal_check(key, purpose, digits as u32, value);
        format!("{}{value:0width$}{check:02}", keys::digit(key.version), width = n as usize)
    })
}

#[pg_extern(stable, parallel_restricted)]
/// The id of a public number made by id_mask_decimal() with the purpose, under the key version
/// its first digit names.
fn id_unmask_decimal(masked: TextBytes, purpose: default!(TextBytes, "''"), fcinfo: pg_sys::FunctionCallInfo) -> i64 {
    let (text, purpose) = (masked.0, purpose_bytes(purpose));
    let digits = text.len() as i32;
    if !DECIMAL_DIGITS.contains(&digits) || !text.iter().all(u8::is_ascii_digit) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid decimal public number: \"{}\"", display(text)),
            Some(format!("A decimal public number is {} to {} digits 0-9.", DECIMAL_DIGITS.start(), DECIMAL_DIGITS.end())),
            None,
        )
    }
    let n = digits as u32 - 1 - DECIMAL_CHECK_DIGITS;
    let number = |range: std::ops::Range<usize>| std::str::from_utf8(&text[range]).unwrap().parse::<u128>().unwrap();
    let (digit, value, check) = (number(0..1) as u32, number(1..1 + n as usize), number(1 + n as usize..text.len()) as u64);
    let found = cache::with_digit(fcinfo, version_digit("decimal", text, digit), |key| {
        (decimal_check(key, purpose, digits as u32, value) == check).then(|| key.permute(purpose, 10, n, value, true)).ok_or(key.version)
    });
    match found {
        Ok(Ok(id)) if id <= i64::MAX as u128 => id as i64,
        Ok(Ok(_)) => not_made_here("decimal", text, purpose, None),
        Ok(Err(version)) => not_made_here("decimal", text, purpose, Some(version)),
        Err(no_key_at_all) => no_version("decimal", text, text[0] as char, no_key_at_all),
    }
}

/// The base32 form's check bits of the bigint form's `value`.
fn base32_check(key: &cache::KeyVersion, purpose: &[u8], value: u128) -> u128 {
    let tag = key.check(purpose, FORM_BASE32, BASE32.digits as u8, value);
    u128::from_be_bytes(tag) >> (128 - BASE32_CHECK_BITS)
}

#[pg_extern(stable, parallel_restricted)]
/// The public number of an id as 16 Crockford base32 digits: the key version's digit,
/// id_mask()'s number in 13 digits, 2 check digits.
fn id_mask_base32(id: i64, purpose: default!(TextBytes, "''"), fcinfo: pg_sys::FunctionCallInfo) -> String {
    let (id, purpose) = (require_id(id), purpose_bytes(purpose));
    cache::with_version(fcinfo, None, |key| {
        let value = key.permute(purpose, 2, 63, id, false);
        let check = base32_check(key, purpose, value);
        BASE32.encode((keys::digit(key.version) as u128) << 75 | value << BASE32_CHECK_BITS | check)
    })
}

#[pg_extern(stable, parallel_restricted)]
/// The id of a public number made by id_mask_base32() with the purpose, under the key version
/// its first digit names.
fn id_unmask_base32(masked: TextBytes, purpose: default!(TextBytes, "''"), fcinfo: pg_sys::FunctionCallInfo) -> i64 {
    let (text, purpose) = (masked.0, purpose_bytes(purpose));
    let value = crate::text_form::decode(BASE32, "a public number", masked);
    let (digit, middle, check) = ((value >> 75) as u32, value >> BASE32_CHECK_BITS & ((1 << 65) - 1), value & ((1 << BASE32_CHECK_BITS) - 1));
    if middle >> 63 != 0 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid base32 public number: \"{}\"", display(text)),
            Some("Its second digit is above 7: the 13 digits after the first hold 63 bits.".into()),
            None,
        )
    }
    let found = cache::with_digit(fcinfo, version_digit("base32", text, digit), |key| {
        (base32_check(key, purpose, middle) == check).then(|| key.permute(purpose, 2, 63, middle, true)).ok_or(key.version)
    });
    match found {
        Ok(Ok(id)) => id as i64,
        Ok(Err(version)) => not_made_here("base32", text, purpose, Some(version)),
        Err(no_key_at_all) => no_version("base32", text, text[0] as char, no_key_at_all),
    }
}
