//! `seq_fill()`: the trigger that numbers a row per key, since a column default cannot read
//! another column. `CREATE TRIGGER … BEFORE INSERT ON issues FOR EACH ROW EXECUTE FUNCTION
//! seq_fill('issues', 'project_id', 'iid')` sets `iid` to `seq_next('issues', project_id)`
//! when it is NULL.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::next::{next, Key};
use super::text_key::{collation_name, is_deterministic, NONDETERMINISTIC};
use crate::c_function::{function_info_v1, guarded_in_database_encoding};
use crate::errors::{raise_in_database_encoding, DatabaseText};

const USAGE: &str =
    "Use it as: CREATE TRIGGER name BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION seq_fill('space', 'key_column', 'number_column').";

fn usage_error(message: DatabaseText) -> ! {
    raise_in_database_encoding(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, message, None, Some(USAGE))
}

/// `seq_fill: <what> column "<column>" of relation "<relation>"`: the start of most of its
/// messages, with the names as the database stores them (`DatabaseText`).
fn about_column(what: &str, column: &CStr, relation: &[u8]) -> DatabaseText {
    DatabaseText::default()
        .ascii("seq_fill: ")
        .ascii(what)
        .ascii("column \"")
        .name(column.to_bytes())
        .ascii("\" of relation \"")
        .name(relation)
        .ascii("\"")
}

/// The attribute number of a column named by a trigger argument. A generated column is refused:
/// its key is computed after BEFORE triggers run, and its number would be computed over ours.
///
/// # Safety
/// `relation` is the trigger's relation, open.
unsafe fn attribute(relation: pg_sys::Relation, name: &CStr, relation_name: &[u8]) -> i32 {
    // SAFETY: per the function's contract; the attribute is looked up by SPI_fnumber first.
    unsafe {
        let attnum = pg_sys::SPI_fnumber((*relation).rd_att, name.as_ptr());
        if attnum <= 0 {
            raise_in_database_encoding(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                about_column("", name, relation_name).ascii(" does not exist"),
                None,
                None,
            )
        }
        if pg_sys::get_attgenerated((*relation).rd_id, attnum as i16) != 0 {
            usage_error(about_column("", name, relation_name).ascii(" is a generated column"));
        }
        attnum
    }
}

function_info_v1!(pg_finfo_seq_fill);

/// The trigger: numbers the row's number column from its key column when it is NULL.
///
/// # Safety
/// Called by PostgreSQL with the arguments its SQL declaration gives.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn seq_fill(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls the function with a valid fcinfo; the guard catches what unwinds.
    unsafe { guarded_in_database_encoding(move || fill(fcinfo)) }
}

/// # Safety
/// `fcinfo` is the call's.
unsafe fn fill(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the trigger data is checked to be there; the relation, its descriptor and the row
    // are the trigger's, valid during the call; the arguments are NUL-terminated strings.
    unsafe {
        let trigger = crate::c_function::trigger_data(fcinfo, "seq_fill()");
        let event = trigger.tg_event;
        if event & pg_sys::TRIGGER_EVENT_TIMINGMASK != pg_sys::TRIGGER_EVENT_BEFORE
            || event & pg_sys::TRIGGER_EVENT_ROW == 0
            || event & pg_sys::TRIGGER_EVENT_OPMASK != pg_sys::TRIGGER_EVENT_INSERT
        {
            usage_error(DatabaseText::default().ascii("seq_fill() must fire BEFORE INSERT FOR EACH ROW"));
        }
        let definition = &*trigger.tg_trigger;
        if definition.tgnargs != 3 {
            usage_error(
                DatabaseText::default()
                    .ascii(&format!("seq_fill() takes 3 arguments (space, key column, number column), not {}", definition.tgnargs)),
            );
        }
        let argument = |i: usize| CStr::from_ptr(*definition.tgargs.add(i));
        let (space, key_column, number_column) = (argument(0), argument(1), argument(2));
        let relation = trigger.tg_relation;
        let relation_name = CStr::from_ptr(pg_sys::get_rel_name((*relation).rd_id)).to_bytes();
        let desc = (*relation).rd_att;
        let key_attnum = attribute(relation, key_column, relation_name);
        let number_attnum = attribute(relation, number_column, relation_name);
        // The columns first, for every row: a trigger that does not fit its table is refused at
        // its first row, whether that row brings its number or not.
        let (mut key_type, mut typmod, mut key_collation) = (pg_sys::InvalidOid, 0, pg_sys::InvalidOid);
        pg_sys::get_atttypetypmodcoll((*relation).rd_id, key_attnum as i16, &mut key_type, &mut typmod, &mut key_collation);
        // A domain over a key type is read as its base type (its constraints held on insert).
        let key_type = pg_sys::getBaseType(key_type);
        if !matches!(key_type, pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID | pg_sys::TEXTOID | pg_sys::VARCHAROID) {
            raise_in_database_encoding(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                about_column("key ", key_column, relation_name).ascii(" must be smallint, integer, bigint, text or varchar"),
                None,
                None,
            );
        }
        // A text column's collation is the column's own, or its domain's.
        if !is_deterministic(key_collation) {
            raise_in_database_encoding(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                about_column("key ", key_column, relation_name)
                    .ascii(" has the nondeterministic collation \"")
                    .name(&collation_name(key_collation))
                    .ascii("\""),
                Some(DatabaseText::default().ascii(NONDETERMINISTIC)),
                Some("Give the key column a deterministic collation (ALTER TABLE t ALTER COLUMN k TYPE text COLLATE \"C\"), or key the rows by a normalised form of the text (lower(k)) in a column of its own."),
            );
        }
        let number_type = pg_sys::SPI_gettypeid(desc, number_attnum);
        if number_type != pg_sys::INT8OID && number_type != pg_sys::INT4OID {
            raise_in_database_encoding(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                about_column("number ", number_column, relation_name).ascii(" must be bigint or integer"),
                // Why not a domain: a value a BEFORE trigger sets is not checked against it.
                Some(
                    DatabaseText::default()
                        .ascii("Not a domain over them either: the value the trigger sets would not be checked against its constraints."),
                ),
                None,
            );
        }
        let tuple = trigger.tg_trigtuple;
        let mut null = false;
        pg_sys::heap_getattr(tuple, number_attnum, desc, &mut null);
        if !null {
            return pg_sys::Datum::from(tuple); // numbered by the caller
        }
        let key_datum = pg_sys::heap_getattr(tuple, key_attnum, desc, &mut null);
        if null {
            raise_in_database_encoding(
                PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
                about_column("key ", key_column, relation_name).ascii(" is NULL"),
                Some(DatabaseText::default().ascii("A row is numbered per key: it needs its key.")),
                None,
            );
        }
        let key = match key_type {
            pg_sys::INT2OID => Key::Int(i64::from(i16::from_datum(key_datum, false).unwrap_or_default())),
            pg_sys::INT4OID => Key::Int(i64::from(i32::from_datum(key_datum, false).unwrap_or_default())),
            pg_sys::INT8OID => Key::Int(i64::from_datum(key_datum, false).unwrap_or_default()),
            _ => Key::Text(<&[u8]>::from_polymorphic_datum(key_datum, false, pg_sys::TEXTOID).unwrap_or_default()),
        };
        let number = next(space.to_bytes(), key);
        let value = if number_type == pg_sys::INT4OID {
            let Ok(small) = i32::try_from(number) else {
                raise_in_database_encoding(
                    PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                    DatabaseText::default()
                        .ascii(&format!("seq_fill: number {number} is out of range for integer column \""))
                        .name(number_column.to_bytes())
                        .ascii("\""),
                    None,
                    Some("Make the column bigint."),
                )
            };
            pg_sys::Datum::from(small)
        } else {
            pg_sys::Datum::from(number)
        };
        let mut replace_null = false;
        let mut value = value;
        let mut column = number_attnum;
        // Why raw pointers: the parameters are `*mut` up to PostgreSQL 16 and `*const` from 17 on.
        let changed = pg_sys::heap_modify_tuple_by_cols(tuple, desc, 1, &raw mut column, &raw mut value, &raw mut replace_null);
        pg_sys::Datum::from(changed)
    }
}

pgrx::extension_sql!(
    r#"
CREATE FUNCTION seq_fill() RETURNS trigger
    AS 'MODULE_PATHNAME', 'seq_fill' LANGUAGE C;
COMMENT ON FUNCTION seq_fill() IS
    'Trigger: BEFORE INSERT FOR EACH ROW EXECUTE FUNCTION seq_fill(space, key_column, number_column) sets a NULL number column to seq_next(space, key).';
-- As seq_next(): only roles granted it may create such a trigger.
REVOKE EXECUTE ON FUNCTION seq_fill() FROM PUBLIC;
"#,
    name = "seq_fill"
);
