//! A row of a table read column by column, by name, with each column's type checked first: what
//! pg_idgen's triggers read of the rows they fire for, and its lookups of the row they found.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::errors;

/// Whose row a row is, for the error when it lacks a column asked for (or has it of another type).
#[derive(Clone, Copy)]
pub enum Owner {
    /// A trigger function of pg_idgen's (`function`), fired on a table that should be `table`.
    Trigger { function: &'static str, table: &'static str },
    /// A table of pg_idgen's, found through the catalogs.
    Table(&'static str),
}

/// A tuple of an open relation, and whose row it should be.
pub struct Row {
    relation: pg_sys::Relation,
    tuple: pg_sys::HeapTuple,
    owner: Owner,
}

impl Row {
    /// # Safety
    /// `tuple` is a valid tuple of the open `relation`, both for as long as the row is read.
    pub unsafe fn new(relation: pg_sys::Relation, tuple: pg_sys::HeapTuple, owner: Owner) -> Row {
        Row { relation, tuple, owner }
    }

    /// The column `name`'s number, if the relation has it, of type `type_oid`.
    fn column_if_any(&self, name: &CStr, type_oid: pg_sys::Oid) -> Option<i16> {
        // SAFETY: the relation is open (`new`'s contract).
        unsafe {
            let relation = (*self.relation).rd_id;
            let attnum = pg_sys::get_attnum(relation, name.as_ptr());
            (attnum > 0 && pg_sys::get_atttype(relation, attnum) == type_oid).then_some(attnum)
        }
    }

    /// The column `name`'s number, if it is of type `type_oid`; an error that names the owner
    /// otherwise.
    fn column(&self, name: &CStr, type_oid: pg_sys::Oid) -> i16 {
        let Some(attnum) = self.column_if_any(name, type_oid) else {
            let column = name.to_string_lossy();
            match self.owner {
                Owner::Trigger { function, table } => errors::raise(
                    PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                    format!("{function} fired on a table without the {column} column of {table}"),
                    None,
                    None,
                ),
                Owner::Table(table) => errors::raise(
                    PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                    format!("pg_idgen's {table} has no {column} column of its type"),
                    None,
                    None,
                ),
            }
        };
        attnum
    }

    /// The value of column number `attnum`, None when NULL.
    fn datum(&self, attnum: i16) -> Option<pg_sys::Datum> {
        let mut null = false;
        // SAFETY: a valid tuple of the open relation (`new`'s contract), and one of its columns.
        let datum = unsafe { pg_sys::heap_getattr(self.tuple, attnum as i32, (*self.relation).rd_att, &mut null) };
        (!null).then_some(datum)
    }

    /// The bytes of a varlena column (text, bytea) by its number, None when NULL.
    fn varlena_at(&self, attnum: i16) -> Option<Vec<u8>> {
        let datum = self.datum(attnum)?;
        // SAFETY: a varlena datum of the tuple; the bytes are copied while the tuple is valid.
        unsafe { <&[u8]>::from_polymorphic_datum(datum, false, pg_sys::TEXTOID) }.map(<[u8]>::to_vec)
    }

    /// A text column's bytes (in the database's encoding), None when NULL.
    pub fn text(&self, name: &CStr) -> Option<Vec<u8>> {
        self.varlena_at(self.column(name, pg_sys::TEXTOID))
    }

    /// A text column that a table of pg_idgen's SQL before the version that added it lacks: its
    /// bytes, None when NULL or lacking (or of another type).
    pub fn optional_text(&self, name: &CStr) -> Option<Vec<u8>> {
        self.varlena_at(self.column_if_any(name, pg_sys::TEXTOID)?)
    }

    /// A bytea column's bytes that the table may lack (as `optional_text`).
    pub fn optional_bytes(&self, name: &CStr) -> Option<Vec<u8>> {
        self.varlena_at(self.column_if_any(name, pg_sys::BYTEAOID)?)
    }

    /// A boolean column that a table of pg_idgen's SQL before the version that added it lacks: its
    /// value, None when NULL or lacking (or of another type).
    pub fn optional_bool(&self, name: &CStr) -> Option<bool> {
        let datum = self.datum(self.column_if_any(name, pg_sys::BOOLOID)?)?;
        // SAFETY: a bool datum.
        unsafe { bool::from_datum(datum, false) }
    }

    /// An int column's value, None when NULL.
    pub fn int(&self, name: &CStr) -> Option<i32> {
        let datum = self.datum(self.column(name, pg_sys::INT4OID))?;
        // SAFETY: an int4 datum.
        unsafe { i32::from_datum(datum, false) }
    }

    /// A bigint column's value, None when NULL.
    pub fn bigint(&self, name: &CStr) -> Option<i64> {
        let datum = self.datum(self.column(name, pg_sys::INT8OID))?;
        // SAFETY: an int8 datum.
        unsafe { i64::from_datum(datum, false) }
    }

    /// A bytea column's bytes, None when NULL.
    pub fn bytes(&self, name: &CStr) -> Option<Vec<u8>> {
        self.varlena_at(self.column(name, pg_sys::BYTEAOID))
    }

    /// An oid column's value by its number (a catalog's, whose columns are fixed), None when NULL.
    pub fn oid_at(&self, attnum: i16) -> Option<pg_sys::Oid> {
        // SAFETY: an oid datum, per the caller's catalog.
        self.datum(attnum).and_then(|datum| unsafe { pg_sys::Oid::from_datum(datum, false) })
    }

    /// A "char" column's value by its number (a catalog's), None when NULL.
    pub fn char_at(&self, attnum: i16) -> Option<u8> {
        self.datum(attnum).map(|datum| datum.value() as u8)
    }
}
