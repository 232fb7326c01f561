//! The registry of time-based id families: what each family's ids are made of, and its place in
//! shared memory, in the mark file and in `pg_idgen_generators()`. Pure data and arithmetic: no
//! PostgreSQL, no shared memory.
//!
//! The generator engine (`engine`), the high-water marks (`mark`), the status rows (`status`)
//! and the clock worker (through `mark`) iterate over `FAMILIES`; none of them names a family
//! except the snowflake family's layout and node id, which the mark records. A new family is a
//! module of its own (its SQL functions), an entry here, and its tests.

use crate::clock::tick::TickClock;
use crate::layout::Layout;

/// A generator's packed position: `tick << counter_bits | counter`. Every family keeps its last
/// value, its floor and its limit as stamps; they only grow.
pub type Stamp = u64;

/// How a family's ids count time: its clock, the width of its counter, and where a new tick's
/// counter starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub clock: TickClock,
    pub counter_bits: u32,
    /// A new tick's counter starts at a random value below this. Why random: ids made slowly
    /// would otherwise all end in counter 0, and a table sharded by `id % N` would put them all on
    /// one shard. Why small: the rest of the tick stays free for the ids made in it.
    pub tick_start_below: u64,
}

impl Shape {
    /// ```
    /// use pg_idgen::families::OBJECTID_SHAPE as shape;
    /// let stamp = shape.stamp(1_700_000_000, 42); // a second, and the counter within it
    /// assert_eq!(stamp, 1_700_000_000 << 24 | 42);
    /// assert_eq!((shape.tick_of(stamp), shape.counter_of(stamp)), (1_700_000_000, 42));
    /// assert_eq!(shape.start_us(stamp), 1_700_000_000_000_000);
    /// ```
    #[inline]
    pub fn stamp(&self, tick: u64, counter: u64) -> Stamp {
        tick << self.counter_bits | counter
    }

    #[inline]
    pub fn tick_of(&self, stamp: Stamp) -> u64 {
        stamp >> self.counter_bits
    }

    #[inline]
    pub fn counter_of(&self, stamp: Stamp) -> u64 {
        stamp & ((1 << self.counter_bits) - 1)
    }

    /// The first stamp of the first tick that starts at or after `unix_us`: every stamp below it
    /// belongs to a tick that started before.
    pub fn first_stamp_from(&self, unix_us: i64) -> Stamp {
        self.stamp(self.clock.first_tick_from(unix_us), 0)
    }

    /// The Unix time at which the tick of `stamp` starts.
    pub fn start_us(&self, stamp: Stamp) -> i64 {
        self.clock.tick_start_us(self.tick_of(stamp))
    }

    /// The Unix time at which the tick of `stamp` ends.
    pub fn end_us(&self, stamp: Stamp) -> i64 {
        self.clock.tick_start_us(self.tick_of(stamp) + 1)
    }

    /// Ids per second one server can make at most: a tick's counter space, per second.
    pub fn ids_per_second_cap(&self) -> u64 {
        ((1u128 << self.counter_bits) * 1_000_000 / self.clock.unit_us as u128) as u64
    }
}

/// A time-based family.
pub struct Family {
    /// Its place in `FAMILIES`, in shared memory and in the mark file.
    pub index: usize,
    /// Its name in the mark file. Persisted: never changed once a release wrote it.
    pub key: &'static str,
    /// Its name in SQL: the prefix of its functions (`<sql_name>_next()`), and its row of
    /// `pg_idgen_generators()`.
    pub sql_name: &'static str,
    /// Its name in messages.
    pub name: &'static str,
    /// Its shape; only the snowflake family's depends on the configured layout.
    pub shape: fn(&Layout) -> Shape,
}

/// Snowflake ids: the layout's ticks, its sequence bits as the counter (the node bits are constant
/// and left out of the stamp).
pub static SNOWFLAKE: Family = Family { index: 0, key: "snowflake", sql_name: "snowflake", name: "snowflake", shape: snowflake_shape };

/// ObjectIds: Unix seconds in 4 bytes (until 2106-02-07), a 3-byte counter. Why each second's
/// counter starts low instead of running on across seconds as drivers do: a counter that wraps
/// inside a second must carry into the next one to keep the ids increasing, which would borrow a
/// second at every wrap; starting low leaves 16,776,960 values to every second.
pub static OBJECTID: Family = Family { index: 1, key: "objectid", sql_name: "objectid", name: "objectid", shape: |_| OBJECTID_SHAPE };
pub const OBJECTID_SHAPE: Shape =
    Shape { clock: TickClock { epoch_us: 0, unit_us: 1_000_000, max_tick: u32::MAX as u64 }, counter_bits: 24, tick_start_below: 256 };

/// UUIDv7s: Unix milliseconds in 48 bits (until the year 10889), a 12-bit counter in rand_a
/// (RFC 9562 §6.2, method 1). Its key, `uuid7`, is older than the functions' `uuid_v7_` prefix;
/// mark files hold it.
pub static UUID_V7: Family = Family { index: 2, key: "uuid7", sql_name: "uuid_v7", name: "UUIDv7", shape: |_| UUID_V7_SHAPE };
pub const UUID_V7_SHAPE: Shape =
    Shape { clock: TickClock { epoch_us: 0, unit_us: 1000, max_tick: (1 << 48) - 1 }, counter_bits: 12, tick_start_below: 256 };

/// Every time-based family, in the order of their indexes.
pub static FAMILIES: [&Family; COUNT] = [&SNOWFLAKE, &OBJECTID, &UUID_V7];
pub const COUNT: usize = 3;

/// A snowflake tick's sequence starts at a random offset below this (or a quarter of the sequence
/// space, if smaller), so `id % N` stays even when ids are made slowly. A multiple of 16 keeps
/// `id % 2^k` exactly even.
const SNOWFLAKE_MAX_START_OFFSET: u64 = 64;

fn snowflake_shape(layout: &Layout) -> Shape {
    Shape {
        clock: layout.clock(),
        counter_bits: layout.sequence_bits,
        tick_start_below: SNOWFLAKE_MAX_START_OFFSET.min((layout.max_sequence() + 1) / 4),
    }
}

/// The family with this key in the mark file.
pub fn by_key(key: &str) -> Option<&'static Family> {
    FAMILIES.iter().copied().find(|family| family.key == key)
}

#[cfg(test)]
mod tests {
    use super::{by_key, FAMILIES, OBJECTID_SHAPE, UUID_V7_SHAPE};

    #[test]
    fn every_family_has_its_index_and_a_distinct_key() {
        for (i, family) in FAMILIES.iter().enumerate() {
            assert_eq!(family.index, i, "{}", family.key);
            assert_eq!(by_key(family.key).map(|f| f.index), Some(i));
        }
        assert!(by_key("ulid").is_none());
        let mut sql_names: Vec<&str> = FAMILIES.iter().map(|f| f.sql_name).collect();
        sql_names.dedup();
        assert_eq!(sql_names.len(), FAMILIES.len(), "each family has a name of its own in SQL");
    }

    #[test]
    fn stamps_pack_tick_and_counter() {
        let s = OBJECTID_SHAPE.stamp(0x6567_8901, 0xAB_CDEF);
        assert_eq!((OBJECTID_SHAPE.tick_of(s), OBJECTID_SHAPE.counter_of(s)), (0x6567_8901, 0xAB_CDEF));
        assert_eq!(OBJECTID_SHAPE.start_us(s), 0x6567_8901 * 1_000_000);
        assert_eq!(OBJECTID_SHAPE.end_us(s), 0x6567_8902 * 1_000_000);
        assert_eq!(OBJECTID_SHAPE.first_stamp_from(1_000_001), OBJECTID_SHAPE.stamp(2, 0), "the first tick starting at or after");
        assert_eq!(UUID_V7_SHAPE.ids_per_second_cap(), 4_096_000);
        assert_eq!(OBJECTID_SHAPE.ids_per_second_cap(), 16_777_216);
    }
}
