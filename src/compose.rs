//! Ids for a given time, or from given parts: for backfills, imports and tests. They are made
//! from their arguments and random bits, not by the generators: nothing makes them unique or
//! orders them against the generators' ids, and none of them moves a generator.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::c_function::{self, c_functions};
use crate::decode::tick_of;
use crate::families::{OBJECTID_SHAPE, UUID_V7_SHAPE};
use crate::layout::Parts;
use crate::objectid::{self, ObjectId};
use crate::{errors, random, settings, uuid7};

#[pg_extern(stable, parallel_safe)]
/// The snowflake id of the tick of `ts`, `node_id` and `sequence`, under this server's layout.
fn snowflake_from_parts(ts: TimestampWithTimeZone, node_id: i32, sequence: default!(i32, 0)) -> i64 {
    let layout = &settings::config().layout;
    let in_range = |value: i32, max: u64, what: &str| {
        u64::try_from(value).ok().filter(|&v| v <= max).unwrap_or_else(|| {
            errors::raise(
                PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("{what} {value} does not fit in this server's snowflake layout"),
                Some(format!("The layout ({}) holds {what}s from 0 to {max}.", layout.describe(crate::clock::format_unix_micros))),
                None,
            )
        })
    };
    let node_id = in_range(node_id, layout.max_node_id(), "node id");
    let sequence = in_range(sequence, layout.max_sequence(), "sequence");
    layout.compose(Parts { tick: tick_of(&layout.clock(), "snowflake ids", ts), node_id, sequence })
}

#[pg_extern(volatile, parallel_safe)]
/// A version 7 UUID of the millisecond of `ts`, its counter and the rest random.
fn uuid_v7_at(ts: TimestampWithTimeZone) -> pgrx::Uuid {
    let ms = tick_of(&UUID_V7_SHAPE.clock, "UUIDv7s", ts);
    let mut counter = [0u8; 2];
    let mut rand_b = [0u8; 8];
    random::fill(&mut counter);
    random::fill(&mut rand_b);
    pgrx::Uuid::from_bytes(uuid7::from_parts(ms, u16::from_ne_bytes(counter), rand_b))
}

c_functions! {
    /// `objectid_at(timestamptz)`: an ObjectId of the second of `ts`, its 8 other bytes random.
    fn pg_idgen_objectid_at / pg_finfo_pg_idgen_objectid_at (fcinfo) {
        let ts: TimestampWithTimeZone = c_function::arg(fcinfo, 0);
        let seconds = tick_of(&OBJECTID_SHAPE.clock, "ObjectIds", ts) as u32;
        let mut rest = [0u8; 8];
        random::fill(&mut rest);
        let counter = u32::from_be_bytes([0, rest[5], rest[6], rest[7]]);
        objectid::datum(ObjectId::from_parts(seconds, rest[0..5].try_into().unwrap(), counter))
    }
}

pgrx::extension_sql!(
    r#"
CREATE FUNCTION objectid_at(ts timestamptz) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_at' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_at(timestamptz) IS
    'An ObjectId of the second of a time, its other 8 bytes random: for backfills and tests, not unique by construction.';
COMMENT ON FUNCTION uuid_v7_at(timestamptz) IS
    'A UUIDv7 of the millisecond of a time, its counter and the rest random: for backfills and tests, not unique by construction.';
COMMENT ON FUNCTION snowflake_from_parts(timestamptz, int, int) IS
    'The snowflake id of a time''s tick, a node id and a sequence under this server''s layout: for backfills and tests, not unique by construction.';
"#,
    name = "compose",
    requires = ["objectid", snowflake_from_parts, uuid_v7_at]
);
