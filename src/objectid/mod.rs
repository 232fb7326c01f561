//! The `objectid` type (MongoDB ObjectId, 12 bytes, stored at fixed length) and `objectid_gen()`.
//!
//! Layout (current BSON spec), big-endian:
//! `| 4 bytes: Unix seconds | 5 bytes: random, once per server start | 3 bytes: counter |`.
//! The seconds and the counter share one stamp in shared memory (`seconds << 24 | counter`)
//! advanced by the `engine`: each second's counter starts at a random value below 256;
//! only past 16.7 million ObjectIds in one second does it carry into the next second (time
//! borrowed, bounded like snowflake), so no two ObjectIds of a server are ever equal and each is
//! greater than every one made before it.
//!
//! The type's functions are plain C functions declared in `objectid.sql` beside this file; the
//! bytes themselves are `id.rs`.

mod id;

pub use self::id::{ObjectId, OBJECTID_LEN};

use std::cmp::Ordering;
use std::ffi::{CStr, CString};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::c_function::{self, c_functions};
use crate::engine::Generator;
use crate::errors;
use crate::families::{OBJECTID, OBJECTID_SHAPE};

const GENERATOR: Generator = Generator::fixed(&OBJECTID, OBJECTID_SHAPE);

// The type, its operators and casts, and the generator's declarations: all plain C functions.
pgrx::extension_sql_file!("objectid.sql", name = "objectid");

/// Argument `n`, an `objectid` (passed by reference: a pointer to its 12 bytes).
///
/// # Safety
/// Argument `n` of the call is a non-NULL `objectid`.
pub unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> ObjectId {
    // SAFETY: per the contract, argument n is a non-NULL objectid: a pointer to 12 bytes.
    unsafe {
        let datum = (*fcinfo).args.as_slice(n + 1)[n].value;
        ObjectId(*datum.cast_mut_ptr::<[u8; OBJECTID_LEN]>())
    }
}

/// An `objectid` result, copied into memory that PostgreSQL owns.
pub fn datum(id: ObjectId) -> pg_sys::Datum {
    // SAFETY: palloc returns 12 writable bytes in the current memory context, or raises an ERROR.
    unsafe {
        let bytes = pg_sys::palloc(OBJECTID_LEN).cast::<[u8; OBJECTID_LEN]>();
        bytes.write(id.0);
        pg_sys::Datum::from(bytes)
    }
}

fn invalid_text(input: &str) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        format!("invalid input syntax for type objectid: \"{input}\""),
        Some("An objectid is written as 24 hexadecimal digits.".into()),
        None,
    )
}

fn invalid_length(length: usize) -> ! {
    errors::raise(
        PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
        format!("invalid length for type objectid: {length} bytes"),
        Some("An objectid is exactly 12 bytes.".into()),
        None,
    )
}

fn compare(fcinfo: pg_sys::FunctionCallInfo) -> Ordering {
    // SAFETY: only the comparison functions call this, declared with two objectid arguments.
    unsafe { arg(fcinfo, 0).cmp(&arg(fcinfo, 1)) }
}

extern "C-unwind" {
    // PostgreSQL's own hash of a byte string (common/hashfn.h), as hash indexes of bytea use.
    fn hash_bytes(k: *const u8, keylen: i32) -> u32;
    fn hash_bytes_extended(k: *const u8, keylen: i32, seed: u64) -> u64;
}

c_functions! {
    /// `objectid_in(cstring)`: text input.
    fn pg_idgen_objectid_in / pg_finfo_pg_idgen_objectid_in (fcinfo) {
        let text = CStr::from_ptr((*fcinfo).args.as_slice(1)[0].value.cast_mut_ptr::<std::ffi::c_char>());
        let text = text.to_string_lossy();
        datum(ObjectId::parse(&text).unwrap_or_else(|| invalid_text(&text)))
    }

    /// `objectid_out(objectid)`: lowercase hex.
    fn pg_idgen_objectid_out / pg_finfo_pg_idgen_objectid_out (fcinfo) {
        let text = CString::new(arg(fcinfo, 0).to_hex()).unwrap();
        pg_sys::Datum::from(pg_sys::pstrdup(text.as_ptr()))
    }

    /// `objectid_recv(internal)`: binary input, the 12 bytes.
    fn pg_idgen_objectid_recv / pg_finfo_pg_idgen_objectid_recv (fcinfo) {
        let buffer = (*fcinfo).args.as_slice(1)[0].value.cast_mut_ptr::<pg_sys::StringInfoData>();
        let remaining = ((*buffer).len - (*buffer).cursor) as usize;
        if remaining != OBJECTID_LEN {
            invalid_length(remaining);
        }
        let bytes = pg_sys::pq_getmsgbytes(buffer, OBJECTID_LEN as i32).cast::<[u8; OBJECTID_LEN]>();
        datum(ObjectId(*bytes))
    }

    /// `objectid_send(objectid)`: binary output, the 12 bytes.
    fn pg_idgen_objectid_send / pg_finfo_pg_idgen_objectid_send (fcinfo) {
        pg_sys::Datum::from(pgrx::rust_byte_slice_to_bytea(&arg(fcinfo, 0).0).into_pg())
    }

    /// `objectid::bytea`.
    fn pg_idgen_objectid_to_bytea / pg_finfo_pg_idgen_objectid_to_bytea (fcinfo) {
        pg_sys::Datum::from(pgrx::rust_byte_slice_to_bytea(&arg(fcinfo, 0).0).into_pg())
    }

    /// `bytea::objectid`: exactly 12 bytes.
    fn pg_idgen_objectid_from_bytea / pg_finfo_pg_idgen_objectid_from_bytea (fcinfo) {
        let bytes: &[u8] = c_function::arg(fcinfo, 0);
        let bytes: [u8; OBJECTID_LEN] = bytes.try_into().unwrap_or_else(|_| invalid_length(bytes.len()));
        datum(ObjectId(bytes))
    }

    fn pg_idgen_objectid_cmp / pg_finfo_pg_idgen_objectid_cmp (fcinfo) {
        pg_sys::Datum::from(compare(fcinfo) as i32)
    }
    fn pg_idgen_objectid_eq / pg_finfo_pg_idgen_objectid_eq (fcinfo) {
        pg_sys::Datum::from(compare(fcinfo).is_eq())
    }
    fn pg_idgen_objectid_ne / pg_finfo_pg_idgen_objectid_ne (fcinfo) {
        pg_sys::Datum::from(compare(fcinfo).is_ne())
    }
    fn pg_idgen_objectid_lt / pg_finfo_pg_idgen_objectid_lt (fcinfo) {
        pg_sys::Datum::from(compare(fcinfo).is_lt())
    }
    fn pg_idgen_objectid_le / pg_finfo_pg_idgen_objectid_le (fcinfo) {
        pg_sys::Datum::from(compare(fcinfo).is_le())
    }
    fn pg_idgen_objectid_gt / pg_finfo_pg_idgen_objectid_gt (fcinfo) {
        pg_sys::Datum::from(compare(fcinfo).is_gt())
    }
    fn pg_idgen_objectid_ge / pg_finfo_pg_idgen_objectid_ge (fcinfo) {
        pg_sys::Datum::from(compare(fcinfo).is_ge())
    }

    /// `objectid_larger(objectid, objectid)`: max()'s step.
    fn pg_idgen_objectid_larger / pg_finfo_pg_idgen_objectid_larger (fcinfo) {
        datum(arg(fcinfo, 0).max(arg(fcinfo, 1)))
    }
    /// `objectid_smaller(objectid, objectid)`: min()'s step.
    fn pg_idgen_objectid_smaller / pg_finfo_pg_idgen_objectid_smaller (fcinfo) {
        datum(arg(fcinfo, 0).min(arg(fcinfo, 1)))
    }

    fn pg_idgen_objectid_hash / pg_finfo_pg_idgen_objectid_hash (fcinfo) {
        let id = arg(fcinfo, 0);
        pg_sys::Datum::from(hash_bytes(id.0.as_ptr(), OBJECTID_LEN as i32))
    }
    fn pg_idgen_objectid_hash_extended / pg_finfo_pg_idgen_objectid_hash_extended (fcinfo) {
        let id = arg(fcinfo, 0);
        let seed: i64 = c_function::arg(fcinfo, 1);
        pg_sys::Datum::from(hash_bytes_extended(id.0.as_ptr(), OBJECTID_LEN as i32, seed as u64))
    }

    /// `objectid_advance_past(objectid)`: every ObjectId made from now on is greater, durably.
    fn pg_idgen_objectid_advance_past / pg_finfo_pg_idgen_objectid_advance_past (fcinfo) {
        crate::shmem::require_preloaded();
        // The next second: within one second, the random bytes (ours or the id's) decide the order.
        let last_of_second = OBJECTID_SHAPE.stamp(arg(fcinfo, 0).seconds() as u64, 0xFF_FFFF);
        crate::mark::advance_past(&GENERATOR, last_of_second, "objectid_advance_past()");
        pg_sys::Datum::from(0)
    }

    /// `objectid_gen()`: a new ObjectId, greater than every one this server made before.
    fn pg_idgen_objectid_gen / pg_finfo_pg_idgen_objectid_gen (fcinfo) {
        let _ = fcinfo;
        datum(generate())
    }
}

fn generate() -> ObjectId {
    let (stamp, state) = GENERATOR.take_even_on_standby();
    ObjectId::from_parts(OBJECTID_SHAPE.tick_of(stamp) as u32, state.objectid_random, OBJECTID_SHAPE.counter_of(stamp) as u32)
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn generated_ids_increase_within_a_backend() {
        let ids: Vec<String> = Spi::connect(|client| {
            client
                .select("SELECT objectid_gen()::text FROM generate_series(1, 5000)", None, &[])
                .unwrap()
                .map(|row| row.get::<String>(1).unwrap().unwrap())
                .collect()
        });
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "hex order is byte order, and ids increase");
    }
}
