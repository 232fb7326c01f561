//! The bit layout of a snowflake id: `0 | time | node | sequence`, most significant first.
//!
//! Pure arithmetic, no PostgreSQL calls, tested with plain `#[test]`s: the generator and every
//! decoder share it, so an id is always taken apart exactly the way it was put together.

use std::fmt;

use crate::clock::tick::TickClock;

/// Named layouts. The bits and unit of each can be overridden one by one in the settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// 41 bits of milliseconds, 10 node bits, 12 sequence bits: 69 years, 4,096,000 ids/s per node.
    Twitter,
    /// 39 bits of 10 ms, 16 node bits, 8 sequence bits: 174 years, 25,600 ids/s per node.
    Sonyflake,
    /// 28 bits of seconds, 22 node bits, 13 sequence bits: 8.5 years, 8,192 ids/s per node.
    Uidgen,
    /// 41 bits of milliseconds, 4 node bits, 8 sequence bits, 53 in all: ids stay below 2^53, so
    /// a JavaScript number (a JSON number in most parsers) holds them exactly. 69 years,
    /// 256,000 ids/s per node, 16 nodes.
    JsSafe,
}

impl Preset {
    pub fn from_name(name: &str) -> Option<Preset> {
        match name.to_ascii_lowercase().as_str() {
            "twitter" => Some(Preset::Twitter),
            "sonyflake" => Some(Preset::Sonyflake),
            "uidgen" => Some(Preset::Uidgen),
            "js_safe" => Some(Preset::JsSafe),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Preset::Twitter => "twitter",
            Preset::Sonyflake => "sonyflake",
            Preset::Uidgen => "uidgen",
            Preset::JsSafe => "js_safe",
        }
    }

    /// The preset's bits and unit, with the Unix epoch as a placeholder epoch.
    pub fn layout(self) -> Layout {
        let (time_bits, node_bits, sequence_bits, unit_ms) = match self {
            Preset::Twitter => (41, 10, 12, 1),
            Preset::Sonyflake => (39, 16, 8, 10),
            Preset::Uidgen => (28, 22, 13, 1000),
            Preset::JsSafe => (41, 4, 8, 1),
        };
        Layout { preset: self, time_bits, node_bits, sequence_bits, unit_ms, epoch_us: 0 }
    }
}

/// Why a layout was refused; the text is shown to the user as the error's DETAIL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    // i64: the immutable decoders report their int arguments as given, negative ones too.
    TimeBits(i64),
    NodeBits(i64),
    SequenceBits(i64),
    TimeUnit(i64),
    Sum(u32),
    /// js_safe's bits, overridden past 53: its ids would not stay below 2^53.
    NotJsSafe(u32),
    EpochInFuture,
    TimeBitsExhausted,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::TimeBits(v) => write!(f, "Time bits must be between 16 and 62, not {v}."),
            LayoutError::NodeBits(v) => write!(f, "Node bits must be between 0 and 31, not {v}."),
            LayoutError::SequenceBits(v) => write!(f, "Sequence bits must be between 1 and 31, not {v}."),
            LayoutError::TimeUnit(v) => write!(f, "The time unit must be between 1 ms and 1 day, not {v} ms."),
            LayoutError::Sum(v) => write!(f, "Time, node and sequence bits must add up to at most 63, not {v}."),
            LayoutError::NotJsSafe(v) => write!(f, "With js_safe, time, node and sequence bits must add up to at most 53 (ids below 2^53), not {v}."),
            LayoutError::EpochInFuture => write!(f, "The epoch must not be in the future."),
            LayoutError::TimeBitsExhausted => write!(f, "The time bits of this layout have already run out for this epoch."),
        }
    }
}

const MAX_UNIT_MS: u64 = 86_400_000;

/// A validated layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub preset: Preset,
    pub time_bits: u32,
    pub node_bits: u32,
    pub sequence_bits: u32,
    /// Length of one time tick in milliseconds.
    pub unit_ms: u64,
    /// Time zero, microseconds since the Unix epoch.
    pub epoch_us: i64,
}

/// The parts of a snowflake id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub tick: u64,
    pub node_id: u64,
    pub sequence: u64,
}

impl Layout {
    /// Checks the bits and the unit: a layout ids can be made with (or were, for a persisted one).
    /// `usable_now` checks the epoch against the clock.
    pub fn new(preset: Preset, time_bits: u32, node_bits: u32, sequence_bits: u32, unit_ms: u64, epoch_us: i64) -> Result<Layout, LayoutError> {
        if node_bits > 31 {
            return Err(LayoutError::NodeBits(node_bits as i64));
        }
        if !(1..=31).contains(&sequence_bits) {
            return Err(LayoutError::SequenceBits(sequence_bits as i64));
        }
        if !(16..=62).contains(&time_bits) {
            return Err(LayoutError::TimeBits(time_bits as i64));
        }
        if !(1..=MAX_UNIT_MS).contains(&unit_ms) {
            return Err(LayoutError::TimeUnit(unit_ms as i64));
        }
        // Why fewer than 63 may do: ids below 2^53 survive JavaScript numbers (Preset::JsSafe).
        let sum = time_bits + node_bits + sequence_bits;
        if sum > 63 {
            return Err(LayoutError::Sum(sum));
        }
        Ok(Layout { preset, time_bits, node_bits, sequence_bits, unit_ms, epoch_us })
    }

    /// The layout, if it keeps its preset's promise: js_safe ids below 2^53. Checked for the
    /// configured layout only: a persisted one is taken as it was made.
    pub fn keeps_preset(self) -> Result<Layout, LayoutError> {
        if self.preset == Preset::JsSafe && self.total_bits() > 53 {
            return Err(LayoutError::NotJsSafe(self.total_bits()));
        }
        Ok(self)
    }

    /// The bits an id of this layout uses: its ids are below 2^total_bits.
    pub fn total_bits(&self) -> u32 {
        self.time_bits + self.node_bits + self.sequence_bits
    }

    /// The layout, if its epoch has begun and its time bits still have room at `now_us`.
    pub fn usable_at(self, now_us: i64) -> Result<Layout, LayoutError> {
        if self.epoch_us > now_us {
            return Err(LayoutError::EpochInFuture);
        }
        if self.clock().tick_at(now_us).is_none() {
            return Err(LayoutError::TimeBitsExhausted);
        }
        Ok(self)
    }

    pub fn unit_us(&self) -> i64 {
        self.unit_ms as i64 * 1000
    }

    pub fn max_node_id(&self) -> u64 {
        (1u64 << self.node_bits) - 1
    }

    pub fn max_tick(&self) -> u64 {
        (1u64 << self.time_bits) - 1
    }

    pub fn max_sequence(&self) -> u64 {
        (1u64 << self.sequence_bits) - 1
    }

    /// The layout's clock: ticks of its unit since its epoch, as many as the time bits hold.
    pub fn clock(&self) -> TickClock {
        TickClock { epoch_us: self.epoch_us, unit_us: self.unit_us(), max_tick: self.max_tick() }
    }

    /// Ids per second one node can make at most: the sequence space of one tick, per second.
    pub fn ids_per_second_cap(&self) -> u64 {
        (self.max_sequence() + 1) * 1000 / self.unit_ms
    }

    /// ```
    /// use pg_idgen::layout::{Parts, Preset};
    /// let twitter = Preset::Twitter.layout(); // 41 bits of ms, 10 node bits, 12 sequence bits
    /// let id = twitter.compose(Parts { tick: 1000, node_id: 7, sequence: 5 });
    /// assert_eq!(id, (1000 << 22) | (7 << 12) | 5);
    /// assert_eq!(twitter.decompose(id), Parts { tick: 1000, node_id: 7, sequence: 5 });
    /// ```
    pub fn compose(&self, parts: Parts) -> i64 {
        debug_assert!(parts.tick <= self.max_tick() && parts.node_id <= self.max_node_id());
        ((parts.tick << (self.node_bits + self.sequence_bits)) | (parts.node_id << self.sequence_bits) | parts.sequence) as i64
    }

    /// Takes an id apart. The caller rejects negative ids: they are never made.
    pub fn decompose(&self, id: i64) -> Parts {
        let id = id as u64;
        Parts {
            tick: id >> (self.node_bits + self.sequence_bits),
            node_id: (id >> self.sequence_bits) & self.max_node_id(),
            sequence: id & self.max_sequence(),
        }
    }

    /// Whether ids of `other` are made exactly like ids of this layout (the preset is only a name).
    pub fn same_ids(&self, other: &Layout) -> bool {
        (self.time_bits, self.node_bits, self.sequence_bits, self.unit_ms, self.epoch_us)
            == (other.time_bits, other.node_bits, other.sequence_bits, other.unit_ms, other.epoch_us)
    }

    /// A bound above every id this layout can have made, on any node, at times before `mark_us`:
    /// the first id of the first tick that starts at or after the mark (2^63 past the end).
    pub fn bound_before(&self, mark_us: i64) -> u128 {
        (self.clock().first_tick_from(mark_us) as u128) << (self.node_bits + self.sequence_bits)
    }

    /// The first tick whose ids, on every node, are at or above `bound`; None when no tick of this
    /// layout reaches it.
    pub fn first_tick_at_or_above(&self, bound: u128) -> Option<u64> {
        let shift = self.node_bits + self.sequence_bits;
        let tick = bound.div_ceil(1u128 << shift);
        (tick <= self.max_tick() as u128).then_some(tick as u64)
    }

    /// "twitter 41/10/12, 1 ms ticks from 2025-01-01 00:00:00+00", for messages; `format_time`
    /// writes the epoch (Unix µs).
    pub fn describe(&self, format_time: impl Fn(i64) -> String) -> String {
        format!(
            "{} {}/{}/{}, {} ms ticks from {}",
            self.preset.name(),
            self.time_bits,
            self.node_bits,
            self.sequence_bits,
            self.unit_ms,
            format_time(self.epoch_us)
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::{Layout, LayoutError, Parts, Preset};

    fn twitter() -> Layout {
        Layout::new(Preset::Twitter, 41, 10, 12, 1, 0).expect("twitter layout is valid")
    }

    #[test]
    fn compose_then_decompose_gives_the_parts_back() {
        let layout = twitter();
        let parts = Parts { tick: layout.max_tick(), node_id: layout.max_node_id(), sequence: layout.max_sequence() };
        let id = layout.compose(parts);
        assert_eq!(id, i64::MAX, "all parts at their maximum fill all 63 bits");
        assert_eq!(layout.decompose(id), parts);
        let parts = Parts { tick: 123_456_789, node_id: 513, sequence: 4000 };
        assert_eq!(layout.decompose(layout.compose(parts)), parts);
    }

    #[test]
    fn presets_have_the_documented_bits_and_caps() {
        let twitter = Preset::Twitter.layout();
        assert_eq!((twitter.time_bits, twitter.node_bits, twitter.sequence_bits, twitter.unit_ms), (41, 10, 12, 1));
        assert_eq!(twitter.ids_per_second_cap(), 4_096_000);
        let sonyflake = Preset::Sonyflake.layout();
        assert_eq!((sonyflake.time_bits, sonyflake.node_bits, sonyflake.sequence_bits, sonyflake.unit_ms), (39, 16, 8, 10));
        assert_eq!(sonyflake.ids_per_second_cap(), 25_600);
        let uidgen = Preset::Uidgen.layout();
        assert_eq!((uidgen.time_bits, uidgen.node_bits, uidgen.sequence_bits, uidgen.unit_ms), (28, 22, 13, 1000));
        assert_eq!(uidgen.ids_per_second_cap(), 8_192);
        let js_safe = Preset::JsSafe.layout();
        assert_eq!((js_safe.time_bits, js_safe.node_bits, js_safe.sequence_bits, js_safe.unit_ms), (41, 4, 8, 1));
        assert_eq!(js_safe.ids_per_second_cap(), 256_000);
        let largest = js_safe.compose(Parts { tick: js_safe.max_tick(), node_id: js_safe.max_node_id(), sequence: js_safe.max_sequence() });
        assert_eq!(largest, (1 << 53) - 1, "every js_safe id is a safe JavaScript integer");
        assert_eq!(Preset::from_name("SonyFlake"), Some(Preset::Sonyflake));
        assert_eq!(Preset::from_name("leaf"), None);
    }

    #[test]
    fn invalid_layouts_are_refused_with_the_reason() {
        assert_eq!(Layout::new(Preset::Twitter, 42, 10, 12, 1, 0), Err(LayoutError::Sum(64)));
        assert!(Layout::new(Preset::Twitter, 41, 10, 11, 1, 0).is_ok(), "fewer than 63 bits: smaller ids");
        let js_safe = |node_bits| Layout::new(Preset::JsSafe, 41, node_bits, 8, 1, 0).and_then(Layout::keeps_preset);
        assert_eq!(js_safe(10), Err(LayoutError::NotJsSafe(59)), "js_safe keeps its promise");
        assert!(js_safe(4).is_ok());
        assert_eq!(Layout::new(Preset::Twitter, 15, 20, 28, 1, 0), Err(LayoutError::TimeBits(15)));
        assert_eq!(Layout::new(Preset::Twitter, 30, 32, 1, 1, 0), Err(LayoutError::NodeBits(32)));
        assert_eq!(Layout::new(Preset::Twitter, 41, 22, 0, 1, 0), Err(LayoutError::SequenceBits(0)));
        assert_eq!(Layout::new(Preset::Twitter, 41, 10, 12, 0, 0), Err(LayoutError::TimeUnit(0)));
        let now_us = 1_763_800_000_000_000; // 2025-11-22
        let next_year_us = now_us + 366 * 86_400 * 1_000_000;
        let usable = |layout: Result<Layout, LayoutError>| layout.and_then(|l| l.usable_at(now_us));
        assert_eq!(usable(Layout::new(Preset::Twitter, 41, 10, 12, 1, next_year_us)), Err(LayoutError::EpochInFuture));
        // 16 bits of 1 ms from 1970 ran out in 1970.
        assert_eq!(usable(Layout::new(Preset::Twitter, 16, 16, 31, 1, 0)), Err(LayoutError::TimeBitsExhausted));
    }

    #[test]
    fn a_later_epoch_is_safe_only_from_the_time_its_ids_pass_the_old_ones() {
        let old = twitter();
        let later = Layout { epoch_us: 10_000_000, ..old };
        let mark_us = 100_000_000;
        // Old ids below the mark are below tick 100,000 of the old epoch; the later epoch reaches
        // that id only 10 s after the mark.
        let tick = later.first_tick_at_or_above(old.bound_before(mark_us)).expect("reachable");
        assert_eq!(later.clock().tick_start_us(tick), mark_us + 10_000_000);
        let tick = old.first_tick_at_or_above(later.bound_before(mark_us)).expect("reachable");
        assert!(old.clock().tick_start_us(tick) < mark_us, "an earlier epoch is safe at once");
        let slower = Layout { unit_ms: 10, ..old };
        assert!(slower.first_tick_at_or_above(old.bound_before(mark_us)).is_some());
        assert_eq!(old.first_tick_at_or_above(1u128 << 63), None, "nothing reaches past 63 bits");
        assert!(old.same_ids(&Layout { preset: Preset::Sonyflake, ..old }), "the preset is only a name");
    }

    #[test]
    fn ticks_round_down_and_stop_at_the_layout_bounds() {
        let clock = Layout { epoch_us: 1_000_000, ..twitter() }.clock();
        assert_eq!(clock.tick_at(999_999), None, "before the epoch");
        assert_eq!(clock.tick_at(1_000_000), Some(0));
        assert_eq!(clock.tick_at(1_000_999), Some(0), "inside the first millisecond");
        assert_eq!(clock.tick_at(1_001_000), Some(1));
        assert_eq!(clock.tick_at(clock.end_us() - 1), Some(clock.max_tick));
        assert_eq!(clock.tick_at(clock.end_us()), None, "the time bits have run out");
        let seconds = Layout { epoch_us: 1_000_000, unit_ms: 1000, ..twitter() }.clock();
        assert_eq!(seconds.tick_at(1_000_000 + 2_999_999), Some(2));
    }
}
