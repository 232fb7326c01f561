//! `snowflake_next()`: time + node + sequence ids from one atomic in shared memory.
//!
//! The shared state is the last id's stamp, `tick << sequence_bits | sequence` (the node bits are
//! constant and left out), advanced by the engine in `engine`: ids only grow, also when the
//! clock steps back or a tick's sequence is used up.

use pgrx::prelude::*;

use crate::errors;
use crate::families::Stamp;
use crate::layout::{Layout, Parts};
use crate::{node, settings, shmem};

#[pg_extern(volatile, parallel_safe)]
/// The next snowflake id of this server: unique, and greater than every id it handed out before.
fn snowflake_next() -> i64 {
    // Why first: without shared_preload_libraries, that is the error to fix, not the node id.
    shmem::require_preloaded();
    let config = settings::config();
    let generator = node::snowflake_generator(config);
    let (stamp, node_id) = match node::fixed_node_id(config) {
        Some(node_id) => (generator.take("snowflake_next()").0, node_id),
        None => node::with_leased_node_id(config, "snowflake_next()", || generator.take("snowflake_next()").0),
    };
    id_of_stamp(&config.layout, stamp, node_id)
}

#[pg_extern(volatile, parallel_safe)]
/// `n` snowflake ids in one call, in increasing order: the next `n` of this server, taken at once
/// (no other call's ids fall between them). Within one tick they are consecutive integers.
fn snowflake_next_range(n: i64) -> SetOfIterator<'static, i64> {
    shmem::require_preloaded();
    let config = settings::config();
    let generator = node::snowflake_generator(config);
    let max_block = generator.max_block(config);
    if !(1..=max_block as i64).contains(&n) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid block size {n} for snowflake ids"),
            Some(format!(
                "A block holds 1 to {max_block} ids: one tick's sequence times the ticks ids may run ahead of the clock, less one (pg_idgen.max_clock_borrow, {} ms, at most half of pg_idgen.clock_reserve, {} ms).",
                config.max_clock_borrow_ms, config.clock_reserve_ms
            )),
            None,
        )
    }
    let take = || generator.take_block("snowflake_next_range()", n as u64).0;
    let (first, node_id) = match node::fixed_node_id(config) {
        Some(node_id) => (take(), node_id),
        None => node::with_leased_node_id(config, "snowflake_next_range()", take),
    };
    let layout = config.layout;
    SetOfIterator::new((first..first + n as u64).map(move |stamp| id_of_stamp(&layout, stamp, node_id)))
}

#[pg_extern(volatile)]
/// Makes every snowflake id this server hands out from now on greater than `id` (an id restored
/// from another server, say), durably. Like `setval()` after a restore; superusers only, unless
/// granted.
fn snowflake_advance_past(id: i64) {
    let state = crate::engine::generators();
    let config = settings::config();
    let generator = node::snowflake_generator(config);
    let tick = crate::decode::snowflake_parts(&config.layout, id).tick;
    // The next tick: ids of `id`'s own tick from another node id may sort either side of it.
    let last_of_tick = generator.shape.stamp(tick, config.layout.max_sequence());
    if let Some(lease) = &config.lease {
        node::refuse_lead_past_lease(lease, generator.shape.end_us(last_of_tick) - state.clock.now_us());
    }
    crate::mark::advance_past(&generator, last_of_tick, "snowflake_advance_past()");
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION snowflake_next() IS
    'Next snowflake id (time | node | sequence) of this server: unique, greater than every id it handed out before.';
COMMENT ON FUNCTION snowflake_next_range(bigint) IS
    'The next n snowflake ids of this server, taken at once, in increasing order.';
COMMENT ON FUNCTION snowflake_advance_past(bigint) IS
    'Makes every snowflake id this server hands out from now on greater than the given id, durably (like setval after a restore).';
-- Moving a generator's floor can push ids far ahead: superusers only, unless granted.
REVOKE EXECUTE ON FUNCTION snowflake_advance_past(bigint) FROM PUBLIC;
"#,
    name = "snowflake",
    requires = [snowflake_next, snowflake_next_range, snowflake_advance_past]
);

/// The id of a snowflake stamp (`tick << sequence_bits | sequence`) made on `node_id`.
#[inline]
pub fn id_of_stamp(layout: &Layout, stamp: Stamp, node_id: u32) -> i64 {
    layout.compose(Parts { tick: stamp >> layout.sequence_bits, node_id: node_id as u64, sequence: stamp & layout.max_sequence() })
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    // The test cluster preloads pg_idgen with node id 7 and the default twitter layout (lib.rs).
    use pgrx::prelude::*;

    #[pg_test]
    fn snowflake_next_increases_and_carries_this_node() {
        let ids: Vec<i64> = (0..10_000).map(|_| Spi::get_one::<i64>("SELECT snowflake_next()").unwrap().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids of one backend strictly increase");
        let node = Spi::get_one::<i32>(&format!("SELECT (id_decode({})).node_id", ids[0])).unwrap();
        assert_eq!(node, Some(7));
    }
}
