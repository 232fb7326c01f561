//! `snowflake_next()`: time + node + sequence ids from one atomic in shared memory.
//!
//! The shared state is the last id's `tick << sequence_bits | sequence` (the node bits are
//! constant and left out), advanced by the engine in `monotonic`: ids only grow, also when the
//! clock steps back or a tick's sequence is used up.

use pgrx::prelude::*;

use crate::errors;
use crate::layout::{Layout, Parts};
use crate::monotonic::Generator;
use crate::{settings, shmem};

/// A new tick's sequence starts at a random offset below this (or a quarter of the sequence
/// space, if smaller), so `id % N` stays even when ids are made slowly. A multiple of 16 keeps
/// `id % 2^k` exactly even.
const MAX_START_OFFSET: u64 = 64;

#[pg_extern(volatile, parallel_safe)]
/// The next snowflake id of this server: unique, and greater than every id it handed out before.
fn snowflake_next() -> i64 {
    // Why first: without shared_preload_libraries, that is the error to fix, not the node id.
    shmem::shared();
    let config = settings::config();
    let node_id = config.node_id.unwrap_or_else(|| errors::node_id_unset());
    let layout = &config.layout;
    let (slot, _) = generator(layout).take("snowflake_next()");
    id_of_state(layout, slot, node_id)
}

#[pg_extern(volatile)]
/// Makes every snowflake id this server hands out from now on greater than `id` (an id restored
/// from another server, say), durably. Like `setval()` after a restore; superusers only, unless
/// granted.
fn snowflake_advance_past(id: i64) {
    shmem::shared();
    let layout = &settings::config().layout;
    let tick = crate::decode::snowflake_parts(layout, id).tick;
    // The next tick: ids of `id`'s own tick from another node id may sort either side of it.
    let state = (tick << layout.sequence_bits) | layout.max_sequence();
    crate::mark::advance_past(&generator(layout), state, "snowflake_advance_past()");
}

/// The id of a generator state (`tick << sequence_bits | sequence`) made on `node_id`.
#[inline]
pub fn id_of_state(layout: &Layout, state: u64, node_id: u32) -> i64 {
    layout.compose(Parts { tick: state >> layout.sequence_bits, node_id: node_id as u64, sequence: state & layout.max_sequence() })
}

#[inline]
pub fn generator(layout: &Layout) -> Generator {
    Generator {
        name: "snowflake",
        key: "snowflake",
        clock: layout.clock(),
        counter_bits: layout.sequence_bits,
        tick_start_below: MAX_START_OFFSET.min((layout.max_sequence() + 1) / 4),
        cell: |state| &state.snowflake,
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    // The test cluster preloads pg_idgen with node id 7 and the default twitter layout (lib.rs).
    use pgrx::prelude::*;

    #[pg_test]
    fn snowflake_next_increases_and_carries_this_node() {
        let ids: Vec<i64> = (0..10_000)
            .map(|_| Spi::get_one::<i64>("SELECT snowflake_next()").unwrap().unwrap())
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids of one backend strictly increase");
        let node = Spi::get_one::<i32>(&format!("SELECT (id_decode({})).node_id", ids[0])).unwrap();
        assert_eq!(node, Some(7));
    }
}
