//! Tags and names as pg_idgen takes and shows them: their bytes in the database's encoding, which
//! need not be UTF-8.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::nullable::Nullable;
use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin};
use pgrx::prelude::*;

/// The text of an argument as its bytes, in the database's encoding: tags need not be UTF-8
/// (pgrx's `&str` would refuse them in a LATIN1 database).
#[derive(Clone, Copy, Debug)]
pub struct TextBytes<'a>(pub &'a [u8]);

impl FromDatum for TextBytes<'_> {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, typoid: pg_sys::Oid) -> Option<Self> {
        // SAFETY: text and bytea are both varlenas; the slice borrows the (detoasted) argument.
        unsafe { <&[u8]>::from_polymorphic_datum(datum, is_null, typoid) }.map(TextBytes)
    }
}

// SAFETY: the argument is unboxed through `FromDatum` above, which borrows the varlena for the
// call's lifetime `'fcx` and reads nothing else.
unsafe impl<'fcx> ArgAbi<'fcx> for TextBytes<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: the caller guarantees the argument is a text datum.
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        // SAFETY: as above.
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

// SAFETY: the SQL type declared, text, is the type whose datums `FromDatum` reads.
unsafe impl SqlTranslatable for TextBytes<'_> {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(TextBytes);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("text"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("text")));
}

/// Text made of bytes in the database's encoding, as a result: a tag shown as it is stored.
#[derive(Clone, Debug)]
pub struct TextOut(pub Vec<u8>);

impl IntoDatum for TextOut {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        // SAFETY: cstring_to_text_with_len copies the bytes into a palloc'd text.
        Some(pg_sys::Datum::from(unsafe { pg_sys::cstring_to_text_with_len(self.0.as_ptr().cast(), self.0.len() as i32) }))
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::TEXTOID
    }
}

// SAFETY: the datum returned is the text that `into_datum` built, of the declared type.
unsafe impl BoxRet for TextOut {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        match self.into_datum() {
            // SAFETY: a text datum for a function declared to return text.
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}

// SAFETY: the SQL type declared, text, is the type of the datums `into_datum` builds.
unsafe impl SqlTranslatable for TextOut {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(TextOut);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("text"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("text")));
}

/// A tag for messages: as it is when its bytes are UTF-8 (they are then also the database's own
/// bytes), with other bytes written `\xNN`, so that a message never carries invalid text.
pub fn display(tag: &[u8]) -> String {
    match std::str::from_utf8(tag) {
        Ok(text) => text.to_string(),
        Err(_) => tag.iter().map(|&b| if b.is_ascii() { (b as char).to_string() } else { format!("\\x{b:02x}") }).collect(),
    }
}

/// Names of pg_idgen's things (segment tags, sequence spaces) are 1 to this many bytes.
pub const MAX_NAME_LEN: usize = 63;

/// A kind of name, in the words of its errors.
pub struct Name {
    /// What it names: "segment tag", "sequence space".
    pub kind: &'static str,
    /// How the DETAIL calls one: "A tag", "A space name".
    pub called: &'static str,
}

impl Name {
    /// Checks a name (1 to `MAX_NAME_LEN` bytes) before any lookup: 22023 otherwise.
    pub fn check(&self, name: &[u8]) {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            crate::errors::raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid {} \"{}\"", self.kind, display(&name[..name.len().min(80)])),
                Some(format!("{} is 1 to {MAX_NAME_LEN} bytes long, not {}.", self.called, name.len())),
                None,
            )
        }
    }

    /// The name as messages give it: `segment tag "t"`.
    pub fn quoted(&self, name: &[u8]) -> String {
        format!("{} \"{}\"", self.kind, display(name))
    }

    /// The error of a name that does not exist here (42704), with why (`detail`) and, when there
    /// is one, what to do (`hint`).
    #[cold]
    pub fn unknown(&self, name: &[u8], detail: &str, hint: Option<&str>) -> ! {
        crate::errors::raise(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("{} does not exist", self.quoted(name)), Some(detail.into()), hint)
    }
}

/// A text datum of `bytes` for SPI, typed `text` (a bytea varlena has the same representation).
pub fn text_arg(bytes: &[u8]) -> pgrx::datum::DatumWithOid<'_> {
    // SAFETY: the bytes are a valid text value in the database's encoding.
    unsafe { pgrx::datum::DatumWithOid::new(bytes, pg_sys::TEXTOID) }
}
