//! The settings' values checked and combined into the `Config` every module reads: pure, without
//! PostgreSQL, so every rule is tested here. The text of each error is the DETAIL of the report
//! that `load` makes of it, naming the setting.

use crate::layout::{Layout, LayoutError, Preset};

/// "-1" for the bit and unit settings: take the value from `pg_idgen.layout`.
pub const FROM_PRESET: i32 = -1;

/// PostgreSQL's NAMEDATALEN: a database name is at most 63 bytes (`declared` checks that the
/// server was built with it).
pub const NAMEDATALEN: usize = 64;

/// The validated configuration every module reads. Fixed for the life of the server.
#[derive(Clone, Debug)]
pub struct Config {
    pub layout: Layout,
    pub node_id: Option<u32>,
    pub max_clock_borrow_ms: u64,
    pub max_clock_wait_ms: u64,
    pub clock_reserve_ms: u64,
    pub clock_forward_delay_ms: u64,
    pub clock_step_policy: StepPolicy,
    pub segments: SegmentConfig,
    pub lease: Option<LeaseConfig>,
}

/// The node-id lease, when `pg_idgen.node_registry` is set.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The registry's libpq connection string.
    pub registry: String,
    pub ttl_ms: u64,
    pub margin_ms: u64,
    /// How far ahead of the registry's clock this server's ids may run (`advance_past` refuses
    /// more; the registry enforces its own value).
    pub max_lead_ms: u64,
    /// The longest one remote call may take; at most a third of the lease.
    pub remote_timeout_ms: u64,
}

/// What the time-based generators do while the wall clock is behind the ids already handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepPolicy {
    /// Count on from the later of the wall clock and the high-water mark, with the monotonic clock.
    KeepGenerating,
    /// Raise an error until the wall clock has caught up (Leaf's behaviour).
    Refuse,
}

impl StepPolicy {
    fn from_name(name: &str) -> Option<StepPolicy> {
        match name.trim().to_ascii_lowercase().as_str() {
            "keep_generating" => Some(StepPolicy::KeepGenerating),
            "refuse" => Some(StepPolicy::Refuse),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StepPolicy::KeepGenerating => "keep_generating",
            StepPolicy::Refuse => "refuse",
        }
    }
}

/// Settings of the segment cache and its worker.
#[derive(Clone, Debug)]
pub struct SegmentConfig {
    pub max_tags: usize,
    /// Sections of per-key sequences cached in shared memory (they share the database worker).
    pub seq_cache_sections: usize,
    pub database: String,
    pub wait_timeout_ms: u64,
    pub prefetch_percent: u64,
    pub max_step: u64,
    pub fast_range_ms: u64,
    pub slow_range_ms: u64,
    /// The segment authority's libpq connection string, when ranges come from another server.
    pub authority: Option<String>,
    /// The longest one call to it may take.
    pub remote_timeout_ms: u64,
    /// Whether the sections of per-key sequences are leased from the authority
    /// (`pg_idgen.seq_sections = authority`) rather than this server's own.
    pub seq_leased: bool,
    /// How long a section leased from the authority stays this server's without renewal, and how
    /// long past that the authority keeps it from others.
    pub seq_lease_ttl_ms: u64,
    pub seq_lease_margin_ms: u64,
}

/// The values an integer setting may take: its range, and values inside the range that are still
/// invalid.
#[derive(Clone, Copy, Debug)]
pub struct IntRange {
    pub min: i32,
    pub max: i32,
    /// Values between `min` and `max` that are not allowed (a gap after the -1 "from preset").
    pub gap: Option<(i32, i32)>,
}

impl IntRange {
    pub const fn new(min: i32, max: i32) -> IntRange {
        IntRange { min, max, gap: None }
    }

    /// -1 ("from pg_idgen.layout"), or `min_given` to `max`.
    pub const fn or_from_preset(min_given: i32, max: i32) -> IntRange {
        IntRange { min: FROM_PRESET, max, gap: if min_given > 0 { Some((0, min_given - 1)) } else { None } }
    }

    pub fn check(&self, value: i32) -> Result<(), String> {
        let in_gap = self.gap.is_some_and(|(low, high)| (low..=high).contains(&value));
        if value < self.min || value > self.max || in_gap {
            let allowed = match self.gap {
                Some((_, high)) => format!("-1 (from pg_idgen.layout) or {} to {}", high + 1, self.max),
                None => format!("{} to {}", self.min, self.max),
            };
            return Err(format!("It must be {allowed}."));
        }
        Ok(())
    }
}

pub fn parse_preset(text: &str) -> Result<Preset, String> {
    Preset::from_name(text).ok_or_else(|| "Known layouts are twitter, sonyflake, uidgen and js_safe.".into())
}

/// `pg_idgen.seq_sections`: whether per-key sequences are leased from the segment authority.
pub fn parse_seq_sections(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "local" | "" => Ok(false),
        "authority" => Ok(true),
        _ => Err("It is local (each database's own tables) or authority (sections leased from pg_idgen.segment_authority).".into()),
    }
}

pub fn parse_step_policy(text: &str) -> Result<StepPolicy, String> {
    StepPolicy::from_name(text).ok_or_else(|| "It must be keep_generating or refuse.".into())
}

/// A node id: empty (or -1) for unset, else a plain non-negative integer — never rounded, so
/// "1.5" is an error rather than node 2.
pub fn parse_node_id(text: &str) -> Result<Option<u32>, String> {
    let text = text.trim();
    if text.is_empty() || text == "-1" {
        return Ok(None);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("It must be a whole number from 0 to 2^node_bits - 1, or empty (unset).".into());
    }
    text.parse::<u32>().ok().filter(|&n| n <= i32::MAX as u32).map(Some).ok_or_else(|| "It is too large.".into())
}

/// The check of `pg_idgen.node_id` whenever it is set: a whole number, and once the server runs
/// (`layout`: the running server's), one that fits the node bits of its layout. Why only then: at
/// start the layout is read after the node id, and `config_from` checks the two together; later
/// (`ALTER SYSTEM`) the running layout is the one the next start has, unless the layout is changed
/// too (in postgresql.conf, together).
pub fn check_node_id(text: &str, layout: Option<&Layout>) -> Result<(), String> {
    match (parse_node_id(text)?, layout) {
        (Some(node_id), Some(layout)) if node_id as u64 > layout.max_node_id() => Err(node_id_out_of_layout(layout)),
        _ => Ok(()),
    }
}

/// Why a node id is too large for a layout.
fn node_id_out_of_layout(layout: &Layout) -> String {
    format!(
        "With the {} node bits of this server's layout it must be between 0 and {} (or empty, unset); a layout with more node bits is set in pg_idgen.node_bits or pg_idgen.layout.",
        layout.node_bits,
        layout.max_node_id()
    )
}

/// Refuses an epoch that names a moment relative to now ("now", "today", …): the postmaster has
/// no "now" that would mean anything to the next start.
pub fn refuse_relative_time(text: &str) -> Result<(), String> {
    let lower = text.to_ascii_lowercase();
    if ["now", "today", "tomorrow", "yesterday"].iter().any(|word| lower.contains(word)) {
        return Err("It must be a fixed instant, such as '2025-01-01 00:00:00+00', not one relative to the time of reading.".into());
    }
    Ok(())
}

/// An epoch (Unix µs) that is not in the future at `now_us`.
pub fn refuse_future_epoch(epoch_us: i64, now_us: i64) -> Result<i64, String> {
    if epoch_us > now_us {
        return Err(LayoutError::EpochInFuture.to_string());
    }
    Ok(epoch_us)
}

pub fn check_database_name(text: &str) -> Result<(), String> {
    if text.is_empty() {
        Err("It must name a database.".into())
    } else if text.len() >= NAMEDATALEN {
        Err(format!("A database name is at most {} bytes.", NAMEDATALEN - 1))
    } else {
        Ok(())
    }
}

/// A node id for messages: the number, or "unset".
pub fn node_id_text(node_id: Option<u32>) -> String {
    node_id.map_or("unset".into(), |n| n.to_string())
}

/// What `load` read from the settings, before they are checked together: the text of each string
/// setting (trimmed), the value of each integer one (already within its `IntRange`: the check
/// hooks saw to that), and the epoch as `load` parsed it (Unix µs, or why not).
#[derive(Clone, Debug)]
pub struct Raw {
    pub layout: String,
    pub time_bits: i32,
    pub node_bits: i32,
    pub sequence_bits: i32,
    pub time_unit_ms: i32,
    pub epoch: String,
    pub epoch_us: Result<i64, String>,
    pub node_id: String,
    pub database: String,
    pub clock_step_policy: String,
    pub node_registry: String,
    pub segment_authority: String,
    pub seq_sections: String,
    pub max_clock_borrow_ms: i32,
    pub max_clock_wait_ms: i32,
    pub clock_reserve_ms: i32,
    pub clock_forward_delay_ms: i32,
    pub max_tags: i32,
    pub seq_cache_sections: i32,
    pub segment_wait_timeout_ms: i32,
    pub segment_prefetch_percent: i32,
    pub segment_max_step: i32,
    pub segment_fast_range_ms: i32,
    pub segment_slow_range_ms: i32,
    pub node_lease_ttl_ms: i32,
    pub node_lease_margin_ms: i32,
    pub seq_lease_ttl_ms: i32,
    pub seq_lease_margin_ms: i32,
    pub node_lease_max_lead_ms: i32,
    pub remote_timeout_ms: i32,
}

/// Why the settings cannot be used: the setting to correct, its value as shown, why, and a hint
/// when the usual one ("correct it and start again") would mislead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub name: &'static str,
    pub value: String,
    pub detail: String,
    pub hint: Option<&'static str>,
}

impl Invalid {
    fn new(name: &'static str, value: impl ToString, detail: impl ToString) -> Invalid {
        Invalid { name, value: value.to_string(), detail: detail.to_string(), hint: None }
    }
}

/// The configuration the settings make, checked together, in the order a reader meets them: the
/// layout (preset, bits, tick, epoch), the node id in it, the database, the segments, the clock
/// step policy, the lease. `now_us`: the wall clock, before which the layout's time must start and
/// after which its time bits must last.
pub fn config_from(raw: &Raw, now_us: i64) -> Result<Config, Invalid> {
    let preset = parse_preset(&raw.layout).map_err(|detail| Invalid::new("pg_idgen.layout", &raw.layout, detail))?;
    let base = preset.layout();
    let pick = |value: i32, from_preset: u32| match value {
        FROM_PRESET => from_preset,
        v => v as u32, // the check hook let only -1 and non-negative values through
    };
    let time_bits = pick(raw.time_bits, base.time_bits);
    let node_bits = pick(raw.node_bits, base.node_bits);
    let sequence_bits = pick(raw.sequence_bits, base.sequence_bits);
    let unit_ms = pick(raw.time_unit_ms, base.unit_ms as u32) as u64;
    let epoch_us = raw.epoch_us.clone().map_err(|detail| Invalid::new("pg_idgen.epoch", &raw.epoch, detail))?;
    let layout = Layout::new(preset, time_bits, node_bits, sequence_bits, unit_ms, epoch_us)
        .and_then(Layout::keeps_preset)
        .and_then(|layout| layout.usable_at(now_us))
        .map_err(|e| match e {
            LayoutError::TimeBits(_) => Invalid::new("pg_idgen.time_bits", time_bits, e),
            LayoutError::NodeBits(_) => Invalid::new("pg_idgen.node_bits", node_bits, e),
            LayoutError::SequenceBits(_) => Invalid::new("pg_idgen.sequence_bits", sequence_bits, e),
            LayoutError::TimeUnit(_) => Invalid::new("pg_idgen.time_unit", unit_ms, e),
            LayoutError::Sum(_) | LayoutError::NotJsSafe(_) => Invalid::new("pg_idgen.layout", format!("{time_bits}/{node_bits}/{sequence_bits}"), e),
            LayoutError::EpochInFuture => Invalid::new("pg_idgen.epoch", &raw.epoch, e),
            LayoutError::TimeBitsExhausted => Invalid {
                // Why not "a later epoch": on a server that made ids, that makes smaller ones.
                hint: Some("Choose more time bits (pg_idgen.time_bits) or a longer tick (pg_idgen.time_unit). Do not move pg_idgen.epoch later on a server that has made ids: its new ids would be smaller than old ones (pg_idgen refuses to start then)."),
                ..Invalid::new("pg_idgen.time_bits", time_bits, e)
            },
        })?;

    let node_id = match parse_node_id(&raw.node_id) {
        Ok(Some(n)) if n as u64 > layout.max_node_id() => return Err(Invalid::new("pg_idgen.node_id", &raw.node_id, node_id_out_of_layout(&layout))),
        Ok(node_id) => node_id,
        Err(detail) => return Err(Invalid::new("pg_idgen.node_id", &raw.node_id, detail)),
    };
    check_database_name(&raw.database).map_err(|detail| Invalid::new("pg_idgen.database", &raw.database, detail))?;
    let int = |value: i32| value.max(0) as u64;
    let segments = SegmentConfig {
        max_tags: int(raw.max_tags) as usize,
        seq_cache_sections: int(raw.seq_cache_sections) as usize,
        database: raw.database.clone(),
        wait_timeout_ms: int(raw.segment_wait_timeout_ms),
        prefetch_percent: int(raw.segment_prefetch_percent),
        max_step: int(raw.segment_max_step),
        fast_range_ms: int(raw.segment_fast_range_ms),
        slow_range_ms: int(raw.segment_slow_range_ms),
        authority: Some(raw.segment_authority.clone()).filter(|a| !a.is_empty()),
        remote_timeout_ms: int(raw.remote_timeout_ms),
        seq_leased: parse_seq_sections(&raw.seq_sections).map_err(|detail| Invalid::new("pg_idgen.seq_sections", &raw.seq_sections, detail))?,
        seq_lease_ttl_ms: int(raw.seq_lease_ttl_ms),
        seq_lease_margin_ms: int(raw.seq_lease_margin_ms),
    };
    if segments.seq_leased && segments.authority.is_none() {
        return Err(Invalid::new(
            "pg_idgen.seq_sections",
            &raw.seq_sections,
            "It is authority, and pg_idgen.segment_authority is not set: set both, or neither.",
        ));
    }
    if segments.slow_range_ms < segments.fast_range_ms {
        return Err(Invalid::new("pg_idgen.segment_slow_range", segments.slow_range_ms, "It must not be shorter than pg_idgen.segment_fast_range."));
    }
    let clock_step_policy =
        parse_step_policy(&raw.clock_step_policy).map_err(|detail| Invalid::new("pg_idgen.clock_step_policy", &raw.clock_step_policy, detail))?;
    let lease = (!raw.node_registry.is_empty()).then(|| LeaseConfig {
        registry: raw.node_registry.clone(),
        ttl_ms: int(raw.node_lease_ttl_ms),
        margin_ms: int(raw.node_lease_margin_ms),
        max_lead_ms: int(raw.node_lease_max_lead_ms),
        remote_timeout_ms: int(raw.remote_timeout_ms).min(int(raw.node_lease_ttl_ms) / 3),
    });
    // Ids run ahead of the clock by up to the borrow, and after a crash from the mark they restart
    // above (up to the reserve ahead) by the borrow again: a lead the registry refused would stop
    // snowflake ids instead.
    let (borrow_ms, reserve_ms) = (int(raw.max_clock_borrow_ms), int(raw.clock_reserve_ms));
    if let Some(lease) = lease.as_ref().filter(|lease| lease.max_lead_ms < reserve_ms + 2 * borrow_ms) {
        return Err(Invalid::new(
            "pg_idgen.node_lease_max_lead",
            lease.max_lead_ms,
            format!("With a node registry it must be at least pg_idgen.clock_reserve plus twice pg_idgen.max_clock_borrow ({reserve_ms} + 2 × {borrow_ms} ms): ids run that far ahead of the clock after a crash."),
        ));
    }
    Ok(Config {
        layout,
        node_id,
        lease,
        max_clock_borrow_ms: borrow_ms,
        max_clock_wait_ms: int(raw.max_clock_wait_ms),
        clock_reserve_ms: reserve_ms,
        clock_forward_delay_ms: int(raw.clock_forward_delay_ms),
        clock_step_policy,
        segments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults of `declared`'s settings, as `load` reads them, with an epoch of 2025.
    fn defaults() -> Raw {
        Raw {
            layout: "twitter".into(),
            time_bits: FROM_PRESET,
            node_bits: FROM_PRESET,
            sequence_bits: FROM_PRESET,
            time_unit_ms: FROM_PRESET,
            epoch: "2025-01-01 00:00:00+00".into(),
            epoch_us: Ok(EPOCH_2025_US),
            node_id: "".into(),
            database: "postgres".into(),
            clock_step_policy: "keep_generating".into(),
            node_registry: "".into(),
            segment_authority: "".into(),
            seq_sections: "local".into(),
            max_clock_borrow_ms: 1000,
            max_clock_wait_ms: 1000,
            clock_reserve_ms: 5000,
            clock_forward_delay_ms: 60_000,
            max_tags: 1024,
            seq_cache_sections: 1024,
            segment_wait_timeout_ms: 5000,
            segment_prefetch_percent: 10,
            segment_max_step: 1_000_000,
            segment_fast_range_ms: 15 * 60 * 1000,
            segment_slow_range_ms: 30 * 60 * 1000,
            node_lease_ttl_ms: 30_000,
            node_lease_margin_ms: 10_000,
            seq_lease_ttl_ms: 10_000,
            seq_lease_margin_ms: 1_000,
            node_lease_max_lead_ms: 30_000,
            remote_timeout_ms: 5000,
        }
    }

    const EPOCH_2025_US: i64 = 1_735_689_600_000_000;
    const NOW_US: i64 = EPOCH_2025_US + 365 * 86_400_000_000;

    fn invalid(raw: Raw) -> Invalid {
        config_from(&raw, NOW_US).expect_err("refused")
    }

    #[test]
    fn the_defaults_make_the_twitter_layout_without_a_node_id_lease_or_authority() {
        let config = config_from(&defaults(), NOW_US).unwrap();
        assert_eq!((config.layout.time_bits, config.layout.node_bits, config.layout.sequence_bits, config.layout.unit_ms), (41, 10, 12, 1));
        assert_eq!(config.layout.epoch_us, EPOCH_2025_US);
        assert_eq!(config.node_id, None);
        assert!(config.lease.is_none() && config.segments.authority.is_none());
        assert_eq!(config.clock_step_policy, StepPolicy::KeepGenerating);
        assert_eq!((config.segments.max_tags, config.segments.wait_timeout_ms), (1024, 5000));
    }

    #[test]
    fn a_node_id_is_a_whole_number_or_unset() {
        assert_eq!(parse_node_id(""), Ok(None));
        assert_eq!(parse_node_id(" -1 "), Ok(None));
        assert_eq!(parse_node_id(" 7 "), Ok(Some(7)));
        assert!(parse_node_id("1.5").unwrap_err().contains("whole number"));
        assert!(parse_node_id("-2").unwrap_err().contains("whole number"));
        assert_eq!(parse_node_id("2147483648"), Err("It is too large.".into()));
        assert_eq!(parse_node_id("2147483647"), Ok(Some(i32::MAX as u32)));
    }

    #[test]
    fn a_node_id_must_fit_the_node_bits() {
        let error = invalid(Raw { node_id: "1024".into(), ..defaults() });
        assert_eq!((error.name, error.value.as_str()), ("pg_idgen.node_id", "1024"));
        assert!(error.detail.starts_with("With the 10 node bits of this server's layout it must be between 0 and 1023"), "{error:?}");
        let layout = config_from(&defaults(), NOW_US).unwrap().layout;
        assert!(check_node_id("1024", Some(&layout)).is_err() && check_node_id("1023", Some(&layout)).is_ok());
        assert!(check_node_id("1024", None).is_ok(), "at start the layout is checked with the node id later");
        let config = config_from(&Raw { node_id: "1023".into(), ..defaults() }, NOW_US).unwrap();
        assert_eq!(config.node_id, Some(1023));
    }

    #[test]
    fn an_integer_is_checked_against_its_range_and_its_gap() {
        let bits = IntRange::or_from_preset(16, 62);
        assert!(bits.check(-1).is_ok() && bits.check(16).is_ok() && bits.check(62).is_ok());
        for value in [0, 15, 63, -2] {
            assert_eq!(bits.check(value), Err("It must be -1 (from pg_idgen.layout) or 16 to 62.".into()), "{value}");
        }
        let node_bits = IntRange::or_from_preset(0, 31);
        assert!(node_bits.check(0).is_ok() && node_bits.gap.is_none());
        assert_eq!(IntRange::new(1000, 3_600_000).check(999), Err("It must be 1000 to 3600000.".into()));
    }

    #[test]
    fn names_of_presets_policies_and_databases() {
        assert_eq!(parse_preset("Sonyflake"), Ok(Preset::Sonyflake));
        assert!(parse_preset("snowflake").is_err());
        assert_eq!(parse_step_policy(" REFUSE "), Ok(StepPolicy::Refuse));
        assert_eq!(parse_step_policy("keep_generating").map(StepPolicy::name), Ok("keep_generating"));
        assert!(parse_step_policy("wait").is_err());
        assert!(check_database_name("").is_err());
        assert!(check_database_name(&"d".repeat(63)).is_ok());
        assert_eq!(check_database_name(&"d".repeat(64)), Err("A database name is at most 63 bytes.".into()));
    }

    #[test]
    fn an_epoch_is_a_fixed_instant_not_in_the_future() {
        for text in ["now", "Today", "tomorrow 12:00", "yesterday"] {
            assert!(refuse_relative_time(text).is_err(), "{text}");
        }
        assert!(refuse_relative_time("2025-01-01 00:00:00+00").is_ok());
        assert_eq!(refuse_future_epoch(NOW_US + 1, NOW_US), Err(LayoutError::EpochInFuture.to_string()));
        let error = invalid(Raw { epoch_us: Err("It must be a finite timestamp with time zone.".into()), ..defaults() });
        assert_eq!((error.name, error.detail.as_str()), ("pg_idgen.epoch", "It must be a finite timestamp with time zone."));
    }

    #[test]
    fn the_bits_and_the_tick_are_checked_together_naming_the_setting() {
        let error = invalid(Raw { time_bits: 42, ..defaults() });
        assert_eq!((error.name, error.value.as_str()), ("pg_idgen.layout", "42/10/12"));
        let error = invalid(Raw { layout: "js_safe".into(), sequence_bits: 12, ..defaults() });
        assert_eq!(error.name, "pg_idgen.layout");
        assert!(error.detail.contains("53"), "{error:?}");
        // 16 bits of milliseconds from 2025 ran out after about a minute.
        let error = invalid(Raw { time_bits: 16, ..defaults() });
        assert_eq!((error.name, error.value.as_str()), ("pg_idgen.time_bits", "16"));
        assert!(error.hint.unwrap().contains("Do not move pg_idgen.epoch later"));
        let error = invalid(Raw { layout: "flake".into(), time_bits: 16, ..defaults() });
        assert_eq!(error.name, "pg_idgen.layout", "the preset is read first");
    }

    #[test]
    fn ranges_and_leases_are_checked_against_each_other() {
        let error = invalid(Raw { segment_slow_range_ms: 1000, segment_fast_range_ms: 2000, ..defaults() });
        assert_eq!((error.name, error.value.as_str()), ("pg_idgen.segment_slow_range", "1000"));
        let leased = Raw { node_registry: "host=registry".into(), ..defaults() };
        let error = invalid(Raw { node_lease_max_lead_ms: 6999, ..leased.clone() });
        assert_eq!(error.name, "pg_idgen.node_lease_max_lead");
        assert!(error.detail.contains("(5000 + 2 × 1000 ms)"), "{error:?}");
        assert!(config_from(&Raw { node_lease_max_lead_ms: 7000, ..leased.clone() }, NOW_US).is_ok());
        let lease = config_from(&Raw { node_lease_ttl_ms: 6000, ..leased }, NOW_US).unwrap().lease.unwrap();
        assert_eq!((lease.registry.as_str(), lease.remote_timeout_ms), ("host=registry", 2000), "a third of the lease at most");
    }

    #[test]
    fn a_node_id_reads_unset_in_messages() {
        assert_eq!(node_id_text(None), "unset");
        assert_eq!(node_id_text(Some(3)), "3");
    }
}
