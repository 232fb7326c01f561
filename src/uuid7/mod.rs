//! `uuid_v7_next()`: RFC 9562 version 7 UUIDs, strictly increasing across every backend.
//!
//! Layout (big-endian, 128 bits):
//! `| 48: Unix ms | 4: version 0111 | 12: counter (rand_a) | 2: variant 10 | 62: random (rand_b) |`.
//! The ms and the counter share one stamp in shared memory (`ms << 12 | counter`),
//! advanced by the `engine` (RFC 9562 §6.2, method 1: a dedicated counter). A new
//! millisecond starts the counter at a small random value; a full counter carries into the next
//! millisecond (time borrowed, bounded like snowflake). rand_b comes from a CSPRNG seeded in
//! each backend.

mod bytes;

pub use self::bytes::{from_parts, parts_of_any, v7_parts};

use pgrx::prelude::*;

use crate::engine::Generator;
use crate::families::{UUID_V7, UUID_V7_SHAPE};
use crate::random;

const GENERATOR: Generator = Generator::fixed(&UUID_V7, UUID_V7_SHAPE);

#[pg_extern(volatile, parallel_safe)]
/// The next UUIDv7 of this server: greater than every one it handed out before, from any backend.
fn uuid_v7_next() -> pgrx::Uuid {
    let (stamp, _) = GENERATOR.take_even_on_standby();
    let mut rand_b = [0u8; 8];
    random::fill(&mut rand_b);
    let (ms, counter) = (UUID_V7_SHAPE.tick_of(stamp), UUID_V7_SHAPE.counter_of(stamp));
    pgrx::Uuid::from_bytes(from_parts(ms, counter as u16, rand_b))
}

#[pg_extern(volatile)]
/// Makes every UUIDv7 this server hands out from now on greater than `id`, durably (after a
/// restore from another server). Superusers only, unless granted.
fn uuid_v7_advance_past(id: pgrx::Uuid) {
    crate::shmem::require_preloaded();
    let Some((ms, counter)) = v7_parts(id.as_bytes()) else {
        crate::errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{id} is not a version 7 UUID"),
            Some("Only UUIDv7s carry the time and counter that uuid_v7_next() continues from.".into()),
            None,
        );
    };
    crate::mark::advance_past(&GENERATOR, UUID_V7_SHAPE.stamp(ms, counter as u64), "uuid_v7_advance_past()");
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION uuid_v7_next() IS
    'Next RFC 9562 UUIDv7 of this server: greater than every UUID it made before, from any backend.';
COMMENT ON FUNCTION uuid_v7_advance_past(uuid) IS
    'Makes every UUIDv7 this server makes from now on greater than the given one, durably (after a restore from another server).';
-- Moving a generator's floor can push ids far ahead: superusers only, unless granted.
REVOKE EXECUTE ON FUNCTION uuid_v7_advance_past(uuid) FROM PUBLIC;
"#,
    name = "uuid7",
    requires = [uuid_v7_next, uuid_v7_advance_past]
);

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn generated_uuids_are_version_7_and_increase() {
        let ok = Spi::get_one::<bool>(
            "SELECT bool_and(u > p) AND bool_and(substr(u::text, 15, 1) = '7')
                    AND bool_and(substr(u::text, 20, 1) IN ('8', '9', 'a', 'b'))
               FROM (SELECT u, lag(u) OVER (ORDER BY n) AS p
                       FROM (SELECT n, uuid_v7_next() AS u FROM generate_series(1, 5000) AS n) AS g) AS s
              WHERE p IS NOT NULL",
        )
        .unwrap();
        assert_eq!(ok, Some(true));
    }
}
