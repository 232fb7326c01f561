//! Decoders: every id family back into its parts, and the helpers for time-range scans.
//!
//! `id_decode` is overloaded for `bigint`, `objectid` and `uuid`; a column name means the same
//! thing in every overload (`ts`: the start of the id's time unit; `sequence`: the counter within
//! that unit). None needs shared_preload_libraries.
//!
//! The snowflake decoders read the server's layout and epoch, settings: they are STABLE, not
//! IMMUTABLE, since an index built on a decoded value would silently go wrong if the layout
//! changed across a restart. The ObjectId and UUID decoders depend on nothing but their
//! argument and are IMMUTABLE.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::c_function::{self, c_functions, column};
use crate::clock;
use crate::clock::tick::TickClock;
use crate::errors;
use crate::families::{OBJECTID_SHAPE, UUID_V7_SHAPE};
use crate::layout::{Layout, LayoutError, Parts, Preset};
use crate::objectid::{self, ObjectId};
use crate::settings;
use crate::uuid7;

// The hand-written declarations (row results, objectid arguments) and every decoder's comment.
pgrx::extension_sql_file!(
    "decode.sql",
    name = "decode",
    requires =
        ["objectid", snowflake_timestamp, snowflake_min_id, snowflake_timestamp_in_layout, snowflake_min_in_layout, uuid_v7_min, uuid_v7_timestamp]
);

c_functions! {
    /// `id_decode(bigint) → (ts timestamptz, node_id int, sequence int)`.
    fn pg_idgen_decode_snowflake / pg_finfo_pg_idgen_decode_snowflake (fcinfo) {
        let id: i64 = c_function::arg(fcinfo, 0);
        let layout = &settings::config().layout;
        let parts = snowflake_parts(layout, id);
        let ts = clock::unix_micros_to_timestamptz(layout.clock().tick_start_us(parts.tick));
        c_function::return_row(
            fcinfo,
            &[column("ts", ts), column("node_id", parts.node_id as i32), column("sequence", parts.sequence as i32)],
        )
    }
}

pub fn snowflake_parts(layout: &Layout, id: i64) -> Parts {
    let id = require_snowflake(id);
    let bits = layout.total_bits();
    // Why: a layout of fewer than 63 bits (js_safe) never made a larger id; decoded, its time
    // would be tens of thousands of years ahead.
    if bits < 63 && id >> bits != 0 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{id} is not a snowflake id of this layout"),
            Some(format!("The layout ({}) makes ids below 2^{bits}.", layout.describe(clock::format_unix_micros))),
            None,
        );
    }
    layout.decompose(id)
}

/// `id`, if it can be a snowflake id: an error for a negative one.
pub fn require_snowflake(id: i64) -> i64 {
    if id < 0 {
        errors::raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{id} is not a snowflake id"),
            Some("Snowflake ids are never negative: their sign bit is always 0.".into()),
            None,
        );
    }
    id
}

#[pg_extern(stable, parallel_safe)]
/// The time a snowflake id was made, to the precision of the layout's time unit.
fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    let layout = &settings::config().layout;
    clock::unix_micros_to_timestamptz(layout.clock().tick_start_us(snowflake_parts(layout, id).tick))
}

#[pg_extern(stable, parallel_safe)]
/// The smallest snowflake id made at or after `ts`, from any node:
/// `WHERE id >= snowflake_min_id(now() - interval '1 day')` is an index range scan.
fn snowflake_min_id(ts: TimestampWithTimeZone) -> i64 {
    let layout = &settings::config().layout;
    let tick = tick_of(&layout.clock(), "snowflake ids", ts);
    layout.compose(Parts { tick, node_id: 0, sequence: 0 })
}

#[pg_extern(immutable, parallel_safe, name = "snowflake_timestamp")]
/// The time of a snowflake id made under the layout the arguments give. IMMUTABLE, unlike the
/// one-argument form: it can back an index, a stored generated column or a partition key.
fn snowflake_timestamp_in_layout(
    id: i64,
    epoch: TimestampWithTimeZone,
    time_unit_ms: default!(i32, 1),
    node_bits: default!(i32, 10),
    sequence_bits: default!(i32, 12),
) -> TimestampWithTimeZone {
    let layout = layout_of_arguments(epoch, time_unit_ms, node_bits, sequence_bits);
    let tick = snowflake_parts(&layout, id).tick;
    // Checked, not saturated: a long tick far from the epoch must be an error, not infinity.
    (tick as i64)
        .checked_mul(layout.unit_us())
        .and_then(|since_epoch| since_epoch.checked_add(layout.epoch_us))
        .and_then(|unix_us| TimestampWithTimeZone::try_from(clock::unix_to_pg_micros(unix_us)).ok())
        .unwrap_or_else(|| {
            errors::raise(
                PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!("the time of snowflake id {id} under this layout is outside the range of timestamptz"),
                None,
                None,
            )
        })
}

#[pg_extern(immutable, parallel_safe, name = "snowflake_min")]
/// The smallest snowflake id made at or after `ts` under the layout the arguments give.
/// IMMUTABLE: for partition bounds.
fn snowflake_min_in_layout(
    ts: TimestampWithTimeZone,
    epoch: TimestampWithTimeZone,
    time_unit_ms: default!(i32, 1),
    node_bits: default!(i32, 10),
    sequence_bits: default!(i32, 12),
) -> i64 {
    let layout = layout_of_arguments(epoch, time_unit_ms, node_bits, sequence_bits);
    layout.compose(Parts { tick: tick_of(&layout.clock(), "snowflake ids", ts), node_id: 0, sequence: 0 })
}

/// The layout of the immutable decoders' arguments. The time takes every bit the node and
/// sequence leave: a layout with fewer time bits makes the same ids, only fewer of them.
fn layout_of_arguments(epoch: TimestampWithTimeZone, time_unit_ms: i32, node_bits: i32, sequence_bits: i32) -> Layout {
    let epoch_us = epoch.is_finite().then(|| epoch.into_inner().checked_add(clock::PG_EPOCH_OFFSET_US)).flatten();
    let Some(epoch_us) = epoch_us else {
        errors::raise(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("invalid snowflake epoch {epoch}"), None, None);
    };
    let layout = match (u32::try_from(node_bits), u32::try_from(sequence_bits), u64::try_from(time_unit_ms)) {
        (Err(_), _, _) => Err(LayoutError::NodeBits(node_bits as i64)),
        (_, Err(_), _) => Err(LayoutError::SequenceBits(sequence_bits as i64)),
        (_, _, Err(_)) => Err(LayoutError::TimeUnit(time_unit_ms as i64)),
        (Ok(node), Ok(sequence), Ok(unit_ms)) => {
            let time_bits = 63u32.saturating_sub(node).saturating_sub(sequence);
            Layout::new(Preset::Twitter, time_bits, node, sequence, unit_ms, epoch_us)
        }
    };
    layout.unwrap_or_else(|error| {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid snowflake layout: {time_unit_ms} ms ticks, {node_bits} node bits, {sequence_bits} sequence bits"),
            Some(error.to_string()),
            Some("pg_idgen_status() shows this server's layout: time_unit, epoch, and the bits as time/node/sequence in layout."),
        )
    })
}

/// The tick of a time on an id family's clock, for the `…_min` helpers. Rounds down: ids of the
/// tick that contains `ts` may have been made after `ts`; starting at the tick's smallest id
/// includes them (and the few made earlier within that tick).
/// `ids` names the family in the plural, as messages say it ("snowflake ids", "ObjectIds").
pub fn tick_of(clock: &TickClock, ids: &str, ts: TimestampWithTimeZone) -> u64 {
    if !ts.is_finite() {
        errors::raise(PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW, format!("{ts} is outside the range of {ids}"), None, None);
    }
    let unix_us = clock::pg_to_unix_micros(ts.into_inner());
    clock.tick_at(unix_us).unwrap_or_else(|| {
        errors::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("time {} is outside the range of {ids}", clock::format_unix_micros(unix_us)),
            Some(format!(
                "{}{} cover {} to {}.",
                ids[..1].to_uppercase(),
                &ids[1..],
                clock::format_unix_micros(clock.epoch_us),
                clock::format_unix_micros(clock.end_us())
            )),
            None,
        )
    })
}

#[pg_extern(immutable, parallel_safe)]
/// The millisecond a UUIDv7 was made; an error for any other UUID.
fn uuid_v7_timestamp(id: pgrx::Uuid) -> TimestampWithTimeZone {
    match uuid7::parts_of_any(id.as_bytes()) {
        (Some(unix_us), 7, _) => clock::unix_micros_to_timestamptz(unix_us),
        _ => errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{id} is not a version 7 UUID"),
            Some("Only UUIDv7s carry the millisecond they were made in; id_decode(uuid) also reads versions 1 and 6.".into()),
            None,
        ),
    }
}

#[pg_extern(immutable, parallel_safe)]
/// The smallest UUIDv7 of the millisecond of `ts`, for `WHERE id >= uuid_v7_min(…)` range scans.
fn uuid_v7_min(ts: TimestampWithTimeZone) -> pgrx::Uuid {
    pgrx::Uuid::from_bytes(uuid7::from_parts(tick_of(&UUID_V7_SHAPE.clock, "UUIDv7s", ts), 0, [0; 8]))
}

c_functions! {
    /// `objectid_timestamp(objectid)`: the second it was made.
    fn pg_idgen_objectid_timestamp / pg_finfo_pg_idgen_objectid_timestamp (fcinfo) {
        let seconds = objectid::arg(fcinfo, 0).seconds() as i64;
        clock::unix_micros_to_timestamptz(seconds * 1_000_000).into_datum().unwrap()
    }

    /// `objectid_min(timestamptz)`: the smallest ObjectId of that second.
    fn pg_idgen_objectid_min / pg_finfo_pg_idgen_objectid_min (fcinfo) {
        let ts: TimestampWithTimeZone = c_function::arg(fcinfo, 0);
        let seconds = tick_of(&OBJECTID_SHAPE.clock, "ObjectIds", ts);
        objectid::datum(ObjectId::from_parts(seconds as u32, [0; 5], 0))
    }

    /// `id_decode(objectid) → (ts timestamptz, random bytea, counter int)`.
    fn pg_idgen_decode_objectid / pg_finfo_pg_idgen_decode_objectid (fcinfo) {
        let id = objectid::arg(fcinfo, 0);
        let ts = clock::unix_micros_to_timestamptz(id.seconds() as i64 * 1_000_000);
        c_function::return_row(fcinfo, &[column("ts", ts), column("random", id.random()), column("counter", id.counter() as i32)])
    }

    /// `id_decode(uuid) → (ts timestamptz, version int, sequence int)`.
    fn pg_idgen_decode_uuid / pg_finfo_pg_idgen_decode_uuid (fcinfo) {
        let uuid: pgrx::Uuid = c_function::arg(fcinfo, 0);
        let bytes: [u8; 16] = *uuid.as_bytes();
        let (unix_us, version, sequence) = uuid7::parts_of_any(&bytes);
        c_function::return_row(
            fcinfo,
            &[column("ts", unix_us.map(clock::unix_micros_to_timestamptz)), column("version", version), column("sequence", sequence)],
        )
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    // The test cluster preloads pg_idgen with node id 7 and the default twitter layout (lib.rs).
    use pgrx::prelude::*;

    #[pg_test]
    fn decoded_time_is_the_time_of_generation() {
        let close = Spi::get_one::<bool>("SELECT abs(extract(epoch FROM snowflake_timestamp(snowflake_next()) - clock_timestamp())) < 1").unwrap();
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
