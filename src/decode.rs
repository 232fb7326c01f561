//! Decoders: snowflake ids back into their parts, and the helpers for time-range scans.
//!
//! They read only the server's layout and epoch, so they work without shared_preload_libraries.
//! They are STABLE, not IMMUTABLE: the layout is a setting, and an index built on a decoded
//! value would silently go wrong if the layout changed across a restart.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::clock;
use crate::errors;
use crate::layout::{Layout, Parts};
use crate::record::{self, function_info_v1};
use crate::settings;

function_info_v1!(pg_finfo_pg_idgen_decode_snowflake);

/// `id_decode(bigint) → (ts timestamptz, node_id int, sequence int)`, declared in `sql/`.
///
/// # Safety
/// Called by PostgreSQL with a `bigint` argument, as declared.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn pg_idgen_decode_snowflake(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let id: i64 = unsafe { record::arg(fcinfo, 0) };
    let layout = &settings::config().layout;
    let parts = snowflake_parts(layout, id);
    let ts = clock::unix_micros_to_timestamptz(layout.tick_start_us(parts.tick));
    unsafe {
        record::return_row(
            fcinfo,
            &[ts.into_datum(), (parts.node_id as i32).into_datum(), (parts.sequence as i32).into_datum()],
        )
    }
}

fn snowflake_parts(layout: &Layout, id: i64) -> Parts {
    if id < 0 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{id} is not a snowflake id"),
            Some("Snowflake ids are never negative: their sign bit is always 0.".into()),
            None,
        );
    }
    layout.decompose(id)
}

#[pg_extern(stable, parallel_safe)]
/// The time a snowflake id was made, to the precision of the layout's time unit.
fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    let layout = &settings::config().layout;
    clock::unix_micros_to_timestamptz(layout.tick_start_us(snowflake_parts(layout, id).tick))
}

#[pg_extern(stable, parallel_safe)]
/// The smallest snowflake id made at or after `ts`, from any node:
/// `WHERE id >= snowflake_min_id(now() - interval '1 day')` is an index range scan.
fn snowflake_min_id(ts: TimestampWithTimeZone) -> i64 {
    let layout = &settings::config().layout;
    if !ts.is_finite() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "infinite timestamps have no snowflake id".into(),
            None,
            None,
        );
    }
    let unix_us = clock::pg_to_unix_micros(ts.into_inner());
    // Why round down: ids of the tick that contains `ts` may have been made after `ts`; starting
    // at the tick's smallest id includes them (and the few made earlier within that tick).
    let Some(tick) = layout.tick_at(unix_us) else {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("time {} is outside the snowflake layout", clock::format_unix_micros(unix_us)),
            Some(format!(
                "Snowflake ids of this server cover {} to {}.",
                clock::format_unix_micros(layout.epoch_us),
                clock::format_unix_micros(layout.end_of_time_us())
            )),
            None,
        )
    };
    layout.compose(Parts { tick, node_id: 0, sequence: 0 })
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    // The test cluster preloads pg_idgen with node id 7 and the default twitter layout (lib.rs).
    use pgrx::prelude::*;

    #[pg_test]
    fn decoded_time_is_the_time_of_generation() {
        let close = Spi::get_one::<bool>(
            "SELECT abs(extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp())) < 1",
        )
        .unwrap();
        assert_eq!(close, Some(true));
    }

    #[pg_test]
    fn min_id_of_a_time_is_below_every_later_id_and_above_every_earlier_one() {
        let row = Spi::get_two::<bool, bool>(
            "WITH t AS (SELECT clock_timestamp() AS at)
             SELECT snowflake_next() >= snowflake_min_id(at),
                    snowflake_min_id(at - interval '1 ms') < snowflake_min_id(at)
               FROM t",
        )
        .unwrap();
        assert_eq!(row, (Some(true), Some(true)));
        let exact = Spi::get_one::<i64>("SELECT snowflake_min_id('2025-01-01 00:00:00.005+00')").unwrap();
        assert_eq!(exact, Some(5 << 22), "5 ms after the default epoch, node 0, sequence 0");
    }

    #[pg_test]
    #[should_panic(expected = "is not a snowflake id")]
    fn negative_ids_are_not_decoded() {
        Spi::run("SELECT id_decode(-1)").unwrap();
    }
}
