//! Compact text forms of ids, both ways: Crockford base32 (`base32`) at a fixed width per type,
//! so the text sorts like the id. A UUID is 26 digits (as a ULID is written), an ObjectId 20,
//! a snowflake id 13 (against 19 decimal digits).

use pgrx::prelude::*;

use crate::base32::{Base32Error, Width};
use crate::c_function::{self, c_functions};
use crate::errors;
use crate::objectid::{self, ObjectId, OBJECTID_LEN};
use crate::tables::{display, TextBytes};

const UUID: Width = Width::of_bits(128);
const OBJECTID: Width = Width::of_bits(8 * OBJECTID_LEN as u32);
/// Snowflake ids are never negative: 63 bits.
const SNOWFLAKE: Width = Width::of_bits(63);

#[pg_extern(immutable, parallel_safe, name = "id_to_base32")]
/// A UUID as 26 Crockford base32 digits (the ULID form), sorting like the UUID.
fn uuid_to_base32(id: pgrx::Uuid) -> String {
    UUID.encode(u128::from_be_bytes(*id.as_bytes()))
}

#[pg_extern(immutable, parallel_safe)]
/// The UUID written as 26 Crockford base32 digits.
fn uuid_from_base32(text: TextBytes) -> pgrx::Uuid {
    pgrx::Uuid::from_bytes(decode(UUID, "a uuid", text).to_be_bytes())
}

#[pg_extern(immutable, parallel_safe, name = "id_to_base32")]
/// A snowflake id as 13 Crockford base32 digits, sorting like the id.
fn snowflake_to_base32(id: i64) -> String {
    let id = crate::decode::require_snowflake(id);
    SNOWFLAKE.encode(id as u128)
}

#[pg_extern(immutable, parallel_safe)]
/// The snowflake id written as 13 Crockford base32 digits.
fn snowflake_from_base32(text: TextBytes) -> i64 {
    decode(SNOWFLAKE, "a snowflake id", text) as i64
}

c_functions! {
    /// `id_to_base32(objectid)`: 20 Crockford base32 digits.
    fn pg_idgen_objectid_to_base32 / pg_finfo_pg_idgen_objectid_to_base32 (fcinfo) {
        let id = objectid::arg(fcinfo, 0);
        let mut wide = [0u8; 16];
        wide[16 - OBJECTID_LEN..].copy_from_slice(&id.0);
        OBJECTID.encode(u128::from_be_bytes(wide)).into_datum().unwrap()
    }

    /// `objectid_from_base32(text)`.
    fn pg_idgen_objectid_from_base32 / pg_finfo_pg_idgen_objectid_from_base32 (fcinfo) {
        let text: &[u8] = c_function::arg(fcinfo, 0);
        let wide = decode(OBJECTID, "an objectid", TextBytes(text)).to_be_bytes();
        objectid::datum(ObjectId(wide[16 - OBJECTID_LEN..].try_into().unwrap()))
    }
}

/// The value of `text` at `width`, or the error PostgreSQL gives for bad input of a type
/// (22P02), quoting the text. `a_type` names the type with its article ("an objectid").
/// Why bytes: in a database whose encoding is not UTF-8 the text may not be UTF-8; every digit
/// is ASCII, so any other byte is simply not one.
pub(crate) fn decode(width: Width, a_type: &str, text: TextBytes) -> u128 {
    let detail = match text.0.iter().position(|b| !b.is_ascii()) {
        Some(position) => format!("Character {} is not ASCII, so not a Crockford base32 digit.", position + 1),
        // ASCII is UTF-8: from_utf8 cannot fail here.
        None => match width.decode(std::str::from_utf8(text.0).unwrap_or_default()) {
            Ok(value) => return value,
            Err(Base32Error::Length(count)) => format!("It has {count} characters; {a_type} is {} base32 digits.", width.digits),
            Err(Base32Error::Digit(ch, position)) => format!("Character {position} ({ch:?}) is not a Crockford base32 digit."),
            Err(Base32Error::Overflow) => format!("The value has more than the {} bits of {a_type}.", width.bits),
        },
    };
    let type_name = a_type.split_once(' ').map_or(a_type, |(_, name)| name);
    errors::raise(
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        // As tags are shown: non-ASCII bytes of a text that is not UTF-8 as \xNN, valid in every encoding.
        format!("invalid base32 {type_name}: \"{}\"", display(text.0)),
        Some(detail),
        Some("Crockford base32 digits are 0-9 and A-Z without I, L, O and U, in either case."),
    )
}

pgrx::extension_sql!(
    r#"
CREATE FUNCTION id_to_base32(id objectid) RETURNS text
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_to_base32' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION id_to_base32(objectid) IS
    'An ObjectId as 20 Crockford base32 digits, sorting like the ObjectId.';
CREATE FUNCTION objectid_from_base32(text text) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_from_base32' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_from_base32(text) IS
    'The ObjectId written as 20 Crockford base32 digits.';
COMMENT ON FUNCTION id_to_base32(uuid) IS
    'A UUID as 26 Crockford base32 digits (the ULID form), sorting like the UUID.';
COMMENT ON FUNCTION uuid_from_base32(text) IS
    'The UUID written as 26 Crockford base32 digits (a ULID reads as the same 128 bits).';
COMMENT ON FUNCTION id_to_base32(bigint) IS
    'A snowflake id as 13 Crockford base32 digits, sorting like the id.';
COMMENT ON FUNCTION snowflake_from_base32(text) IS
    'The snowflake id written as 13 Crockford base32 digits.';
"#,
    name = "text_form",
    requires = ["objectid", uuid_to_base32, uuid_from_base32, snowflake_to_base32, snowflake_from_base32]
);
