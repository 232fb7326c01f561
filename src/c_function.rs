//! Plain C functions declared in hand-written SQL (`sql/`), for what pgrx cannot declare:
//! the fixed-length `objectid` type's support functions, and functions that return one row with
//! named columns (`OUT` parameters).
//!
//! Why not pgrx's `TableIterator` for rows: that makes a set-returning function, and a
//! set-returning decoder silently drops rows whose id is NULL from
//! `SELECT id, (id_decode(id)).ts FROM t`.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// Declares `PG_FUNCTION_INFO_V1(name)` for functions written as
/// `unsafe extern "C-unwind" fn name(fcinfo) -> Datum` and declared in hand-written SQL:
/// `function_info_v1!(pg_finfo_name)`.
macro_rules! function_info_v1 {
    ($($finfo:ident),+ $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            #[doc(hidden)]
            pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
                const V1: ::pgrx::pg_sys::Pg_finfo_record = ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
                &V1
            }
        )+
    };
}
pub(crate) use function_info_v1;

/// Declares C functions: `c_functions! { fn symbol / pg_finfo_symbol (fcinfo) { body } … }`;
/// the body evaluates to the result `Datum`.
macro_rules! c_functions {
    ($( $(#[$doc:meta])* fn $name:ident / $finfo:ident ($fcinfo:ident) $body:block )+) => {
        $(
            $crate::c_function::function_info_v1!($finfo);
            $(#[$doc])*
            ///
            /// # Safety
            /// Called by PostgreSQL with the arguments its SQL declaration gives.
            #[unsafe(no_mangle)]
            pub unsafe extern "C-unwind" fn $name($fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
                // What #[pg_guard] does (it cannot be applied inside a macro_rules expansion):
                // a Rust panic or a PostgreSQL error becomes a proper ERROR, not a crash.
                #[allow(unused_unsafe)]
                // SAFETY: PostgreSQL calls the function with a valid fcinfo; the guard catches what unwinds.
                unsafe { ::pgrx::pg_sys::panic::pgrx_extern_c_guard(move || $body) }
            }
        )+
    };
}
pub(crate) use c_functions;

/// What the `c_functions!` wrapper does, for a C function whose errors may name things in the
/// database's encoding (`errors::raise_in_database_encoding`): those are caught inside pgrx's
/// guard and thrown after it, their bytes untouched; everything else as in `c_functions!`.
///
/// # Safety
/// Called as the whole body of the C function `extern "C-unwind" fn(fcinfo) -> Datum`, with nothing
/// of its own to drop.
pub unsafe fn guarded_in_database_encoding(body: impl FnOnce() -> pg_sys::Datum) -> pg_sys::Datum {
    // SAFETY: per the function's contract; the guard catches what unwinds out of `body`.
    match unsafe { pg_sys::panic::pgrx_extern_c_guard(move || crate::errors::catch_in_database_encoding(body)) } {
        Ok(datum) => datum,
        // SAFETY: outside the guard, with nothing left to drop (the error is plain pointers).
        Err(error) => unsafe { error.throw() },
    }
}

/// The trigger data of a call of `function`, or an ERROR (39P01) when it was not called as a
/// trigger.
///
/// # Safety
/// `fcinfo` is the call's.
pub unsafe fn trigger_data<'a>(fcinfo: pg_sys::FunctionCallInfo, function: &str) -> &'a pg_sys::TriggerData {
    // SAFETY: per the function's contract; the context is checked to be trigger data first.
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            crate::errors::raise(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                format!("{function} must be called as a trigger"),
                None,
                None,
            );
        }
        &*(context as *const pg_sys::TriggerData)
    }
}

/// One column of a result row: its name, its type, its value (None = NULL).
pub struct Column {
    pub name: &'static str,
    pub type_oid: pg_sys::Oid,
    pub value: Option<pg_sys::Datum>,
}

/// A column of type `T`'s SQL type.
pub fn column<T: IntoDatum>(name: &'static str, value: T) -> Column {
    Column { name, type_oid: T::type_oid(), value: value.into_datum() }
}

/// Builds the function's result row from `columns`, matched to the declared OUT columns by name:
/// a declaration with fewer columns (that of an older version of the extension) gets those it
/// names, so old SQL keeps working with a newer library. A declared column the library does not
/// make, or makes with another type, is an error that says to update the extension.
///
/// # Safety
/// `fcinfo` is the call's own, and each column's datum is of its `type_oid`.
pub unsafe fn return_row(fcinfo: pg_sys::FunctionCallInfo, columns: &[Column]) -> pg_sys::Datum {
    // SAFETY: get_call_result_type reads the call's own declaration; the tuple is formed from
    // datums of the declared types (checked below) and lives in the call's memory context.
    unsafe {
        let mut tupdesc: pg_sys::TupleDesc = std::ptr::null_mut();
        if pg_sys::get_call_result_type(fcinfo, std::ptr::null_mut(), &mut tupdesc) != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE {
            crate::errors::raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                "function returning a record called in a context that cannot accept it".into(),
                None,
                None,
            );
        }
        let tupdesc = pg_sys::BlessTupleDesc(tupdesc);
        let natts = (*tupdesc).natts as usize;
        let mut datums = Vec::with_capacity(natts);
        let mut nulls = Vec::with_capacity(natts);
        // Why pgrx's PgTupleDesc: it knows where each major keeps the attributes (PostgreSQL 18
        // moved them behind compact_attrs).
        let described = pgrx::PgTupleDesc::from_pg_unchecked(tupdesc);
        for attribute in described.iter() {
            let name = std::ffi::CStr::from_ptr(attribute.attname.data.as_ptr()).to_string_lossy();
            // Why these errors: the SQL objects of another version of the extension than its library.
            let update = Some("The extension's SQL objects and its library are of different versions: run ALTER EXTENSION pg_idgen UPDATE.");
            let Some(column) = columns.iter().find(|c| c.name == name) else {
                crate::errors::raise(
                    PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!("this function is declared with a column \"{name}\" that the pg_idgen library does not return"),
                    None,
                    update,
                );
            };
            if column.type_oid != attribute.atttypid {
                crate::errors::raise(
                    PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!(
                        "column \"{name}\" of this function is declared as {}, but the pg_idgen library returns {}",
                        type_name(attribute.atttypid),
                        type_name(column.type_oid)
                    ),
                    None,
                    update,
                );
            }
            datums.push(column.value.unwrap_or(pg_sys::Datum::from(0)));
            nulls.push(column.value.is_none());
        }
        let tuple = pg_sys::heap_form_tuple(tupdesc, datums.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::HeapTupleHeaderGetDatum((*tuple).t_data)
    }
}

/// A type's name, for messages.
fn type_name(type_oid: pg_sys::Oid) -> String {
    // SAFETY: format_type_be returns a palloc'd name for any oid ("???" for an unknown one).
    unsafe { std::ffi::CStr::from_ptr(pg_sys::format_type_be(type_oid)) }.to_string_lossy().into_owned()
}

/// Argument `n` of a strict function as a Rust value (never NULL: strict functions are not
/// called with NULL arguments).
///
/// # Safety
/// The argument has the SQL type that `T` stands for.
pub unsafe fn arg<T: FromDatum>(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> T {
    // SAFETY: per the function's contract, argument n is of the type T stands for.
    unsafe { pgrx::fcinfo::pg_getarg::<T>(fcinfo, n) }.expect("strict function called with a NULL argument")
}
