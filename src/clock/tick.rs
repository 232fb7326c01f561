//! Ticks: the time of a time-based id, counted in a fixed unit from an epoch, and the stamp a
//! generator keeps. Pure arithmetic: no PostgreSQL, no shared memory.

/// The clock a generator counts in: ticks of `unit_us` since `epoch_us` (Unix microseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickClock {
    pub epoch_us: i64,
    pub unit_us: i64,
    /// The largest tick the id format can hold.
    pub max_tick: u64,
}

impl TickClock {
    /// The tick of a Unix time, or None before the epoch or past `max_tick`. Rounds down: every
    /// instant inside a tick belongs to it.
    ///
    /// ```
    /// use pg_idgen::clock::tick::TickClock;
    /// // Milliseconds since 2025-01-01, 41 bits of them.
    /// let clock = TickClock { epoch_us: 1_735_689_600_000_000, unit_us: 1000, max_tick: (1 << 41) - 1 };
    /// assert_eq!(clock.tick_at(1_735_689_600_001_999), Some(1));
    /// assert_eq!(clock.tick_at(1_735_689_599_999_999), None, "before the epoch");
    /// ```
    #[inline]
    pub fn tick_at(&self, unix_us: i64) -> Option<u64> {
        let since_epoch = unix_us.checked_sub(self.epoch_us)?;
        if since_epoch < 0 {
            return None;
        }
        // Why the special case: dividing by the literal compiles to a multiplication, and 1 ms
        // ticks are on the hot path of snowflake_next() and uuid_v7_next().
        let tick = if self.unit_us == 1000 { since_epoch / 1000 } else { since_epoch / self.unit_us } as u64;
        (tick <= self.max_tick).then_some(tick)
    }

    /// The Unix time (microseconds) at which a tick begins.
    pub fn tick_start_us(&self, tick: u64) -> i64 {
        self.epoch_us.saturating_add((tick as i64).saturating_mul(self.unit_us))
    }

    /// The first instant (Unix microseconds) past `max_tick`.
    pub fn end_us(&self) -> i64 {
        self.tick_start_us(self.max_tick).saturating_add(self.unit_us)
    }

    /// The first tick that starts at or after a Unix time (`max_tick + 1` past the end).
    pub fn first_tick_from(&self, unix_us: i64) -> u64 {
        let since_epoch = unix_us.saturating_sub(self.epoch_us);
        if since_epoch <= 0 {
            return 0;
        }
        (since_epoch as u64).div_ceil(self.unit_us as u64).min(self.max_tick + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::TickClock;

    #[test]
    fn a_mark_maps_to_the_first_tick_starting_at_or_after_it() {
        // 1 ms ticks from Unix second 1, ticks 0 ..= 99.
        let clock = TickClock { epoch_us: 1_000_000, unit_us: 1000, max_tick: 99 };
        assert_eq!(clock.first_tick_from(0), 0, "before the epoch");
        assert_eq!(clock.first_tick_from(1_000_000), 0, "the start of tick 0");
        assert_eq!(clock.first_tick_from(1_000_001), 1, "inside tick 0: tick 0 may hold ids before the mark");
        assert_eq!(clock.first_tick_from(1_001_000), 1);
        assert_eq!(clock.first_tick_from(i64::MAX), 100, "past the end: max_tick + 1");
        for mark in [1_000_001, 1_050_500, 1_099_999] {
            let first = clock.first_tick_from(mark);
            assert!(clock.tick_start_us(first) >= mark && clock.tick_start_us(first - 1) < mark, "mark {mark}");
        }
    }

    #[test]
    fn ticks_round_down_and_stop_at_the_clock_end() {
        let clock = TickClock { epoch_us: 1_000_000, unit_us: 1000, max_tick: 99 };
        assert_eq!(clock.tick_at(999_999), None, "before the epoch");
        assert_eq!(clock.tick_at(1_000_999), Some(0), "inside the first tick");
        assert_eq!(clock.tick_at(clock.end_us() - 1), Some(99));
        assert_eq!(clock.tick_at(clock.end_us()), None, "past the last tick");
    }
}
