//! `pg_idgen.*` settings: declared in `_PG_init`, read and validated once at postmaster start.
//!
//! Every setting is postmaster-level: ids made under one layout must decode under the same one,
//! so nothing here may change while the server runs. When the library is preloaded, an invalid
//! value stops the server with a FATAL message that names the setting. When it is not preloaded
//! (only decoders can run then), the same checks raise an ERROR on first use instead.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::layout::{Layout, LayoutError, Preset};

/// "-1" for the bit and unit settings: take the value from `pg_idgen.layout`.
const FROM_PRESET: i32 = -1;
/// "-1" for `pg_idgen.node_id`: no node id configured; generators refuse to run.
const NODE_ID_UNSET: i32 = -1;

static NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(NODE_ID_UNSET);
static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"2025-01-01 00:00:00+00"));
static LAYOUT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"twitter"));
static TIME_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static NODE_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static TIME_UNIT: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static MAX_CLOCK_BORROW: GucSetting<i32> = GucSetting::<i32>::new(1000);
static MAX_CLOCK_WAIT: GucSetting<i32> = GucSetting::<i32>::new(1000);
static CLOCK_RESERVE: GucSetting<i32> = GucSetting::<i32>::new(5000);
static CLOCK_STEP_POLICY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"keep_generating"));
static MAX_TAGS: GucSetting<i32> = GucSetting::<i32>::new(1024);
static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"postgres"));
static SEGMENT_WAIT_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(5000);
static SEGMENT_PREFETCH_PERCENT: GucSetting<i32> = GucSetting::<i32>::new(10);
static SEGMENT_MAX_STEP: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);
static SEGMENT_FAST_RANGE: GucSetting<i32> = GucSetting::<i32>::new(15 * 60 * 1000);
static SEGMENT_SLOW_RANGE: GucSetting<i32> = GucSetting::<i32>::new(30 * 60 * 1000);

/// The integer settings, with the raw text that postgresql.conf gave them (see `declare`).
struct IntSetting {
    name: &'static CStr,
    setting: &'static GucSetting<i32>,
    short: &'static CStr,
    flags: GucFlags,
}

const INT_SETTINGS: [IntSetting; 14] = [
    IntSetting {
        name: c"pg_idgen.node_id",
        setting: &NODE_ID,
        short: c"Node id written into every snowflake id (0 .. 2^node_bits - 1; -1 = unset).",
        flags: GucFlags::empty(),
    },
    IntSetting {
        name: c"pg_idgen.time_bits",
        setting: &TIME_BITS,
        short: c"Bits of time in a snowflake id (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
    },
    IntSetting {
        name: c"pg_idgen.node_bits",
        setting: &NODE_BITS,
        short: c"Bits of node id in a snowflake id (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
    },
    IntSetting {
        name: c"pg_idgen.sequence_bits",
        setting: &SEQUENCE_BITS,
        short: c"Bits of per-tick sequence in a snowflake id (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
    },
    IntSetting {
        name: c"pg_idgen.time_unit",
        setting: &TIME_UNIT,
        short: c"Length of one snowflake time tick (-1 = from pg_idgen.layout).",
        flags: GucFlags::UNIT_MS,
    },
    IntSetting {
        name: c"pg_idgen.max_clock_borrow",
        setting: &MAX_CLOCK_BORROW,
        short: c"How far snowflake ids may run ahead of the wall clock before calls wait.",
        flags: GucFlags::UNIT_MS,
    },
    IntSetting {
        name: c"pg_idgen.max_clock_wait",
        setting: &MAX_CLOCK_WAIT,
        short: c"How long a generator call may wait for the clock or a new high-water mark before it raises an error.",
        flags: GucFlags::UNIT_MS,
    },
    IntSetting {
        name: c"pg_idgen.clock_reserve",
        setting: &CLOCK_RESERVE,
        short: c"How far ahead of the time in use the clock worker keeps the persisted high-water mark.",
        flags: GucFlags::UNIT_MS,
    },
    IntSetting {
        name: c"pg_idgen.max_tags",
        setting: &MAX_TAGS,
        short: c"Segment tags that can be cached in shared memory at once.",
        flags: GucFlags::empty(),
    },
    IntSetting {
        name: c"pg_idgen.segment_wait_timeout",
        setting: &SEGMENT_WAIT_TIMEOUT,
        short: c"How long segment_next() waits for a new range before it raises an error.",
        flags: GucFlags::UNIT_MS,
    },
    IntSetting {
        name: c"pg_idgen.segment_prefetch_percent",
        setting: &SEGMENT_PREFETCH_PERCENT,
        short: c"Share of a segment range used up when the worker is asked to load the next one.",
        flags: GucFlags::empty(),
    },
    IntSetting {
        name: c"pg_idgen.segment_max_step",
        setting: &SEGMENT_MAX_STEP,
        short: c"Largest step the dynamic step may grow a segment range to.",
        flags: GucFlags::empty(),
    },
    IntSetting {
        name: c"pg_idgen.segment_fast_range",
        setting: &SEGMENT_FAST_RANGE,
        short: c"A segment range used up faster than this doubles the next step.",
        flags: GucFlags::UNIT_MS,
    },
    IntSetting {
        name: c"pg_idgen.segment_slow_range",
        setting: &SEGMENT_SLOW_RANGE,
        short: c"A segment range that lasted longer than this halves the next step.",
        flags: GucFlags::UNIT_MS,
    },
];

/// The validated configuration every module reads. Fixed for the life of the server.
#[derive(Clone, Debug)]
pub struct Config {
    pub layout: Layout,
    pub node_id: Option<u32>,
    pub max_clock_borrow_ms: u64,
    pub max_clock_wait_ms: u64,
    pub clock_reserve_ms: u64,
    pub clock_step_policy: StepPolicy,
    pub segments: SegmentConfig,
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
        match name.to_ascii_lowercase().as_str() {
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
    pub database: String,
    pub wait_timeout_ms: u64,
    pub prefetch_percent: u64,
    pub max_step: u64,
    pub fast_range_ms: u64,
    pub slow_range_ms: u64,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Declares the settings. Called from `_PG_init`, preloaded or not.
pub fn declare(preloading: bool) {
    // Why read the raw text first: for a custom setting that postgresql.conf set before the
    // library loaded, PostgreSQL only WARNs about a value it cannot parse and keeps the default.
    // A mistyped node id must stop the server instead, so the raw text is checked below.
    let raw_values: Vec<Option<String>> = INT_SETTINGS.iter().map(|s| raw_setting(s.name)).collect();

    // Why not always Postmaster: PostgreSQL refuses (FATAL) to create postmaster-level settings
    // after start, which is when a library that is not preloaded gets loaded. Then only the
    // decoders can run, and they read the settings once per session.
    let context = || if preloading { GucContext::Postmaster } else { GucContext::Sighup };
    for s in &INT_SETTINGS {
        // Why the full i32 range: range checks happen in `load`, where they can be fatal.
        GucRegistry::define_int_guc(s.name, s.short, c"", s.setting, i32::MIN, i32::MAX, context(), s.flags);
    }
    GucRegistry::define_string_guc(
        c"pg_idgen.epoch",
        c"Time zero of snowflake ids (a timestamptz, not in the future).",
        c"",
        &EPOCH,
        context(),
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pg_idgen.database",
        c"Database the pg_idgen worker connects to; segment tags live in it.",
        c"",
        &DATABASE,
        context(),
        GucFlags::empty(),
    );
    GucRegistry::define_string_guc(
        c"pg_idgen.clock_step_policy",
        c"When the wall clock steps back: keep_generating (from the monotonic clock) or refuse (raise an error).",
        c"",
        &CLOCK_STEP_POLICY,
        context(),
        GucFlags::empty(),
    );
    GucRegistry::define_string_guc(
        c"pg_idgen.layout",
        c"Snowflake layout preset: twitter (41/10/12, 1 ms), sonyflake (39/16/8, 10 ms), uidgen (28/22/13, 1 s).",
        c"",
        &LAYOUT,
        context(),
        GucFlags::default(),
    );
    unsafe { pg_sys::MarkGUCPrefixReserved(c"pg_idgen".as_ptr()) };

    if preloading {
        for (s, raw) in INT_SETTINGS.iter().zip(&raw_values) {
            if let Some(raw) = raw {
                require_integer(s.name, raw, s.flags);
            }
        }
        let config = load(PgLogLevel::FATAL);
        log_start_line(&config);
        let _ = CONFIG.set(config);
    }
}

/// The server's configuration. In a backend of a preloaded server this was fixed at start;
/// otherwise it is read now, and an invalid setting raises an ERROR.
pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| load(PgLogLevel::ERROR))
}

fn raw_setting(name: &CStr) -> Option<String> {
    let value = unsafe { pg_sys::GetConfigOption(name.as_ptr(), true, false) };
    if value.is_null() {
        None
    } else {
        Some(unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned())
    }
}

fn require_integer(name: &CStr, raw: &str, flags: GucFlags) {
    let text = CString::new(raw).unwrap_or_default();
    let mut parsed = 0i32;
    let ok = unsafe { pg_sys::parse_int(text.as_ptr(), &mut parsed, flags.bits(), std::ptr::null_mut()) };
    if !ok {
        invalid(PgLogLevel::FATAL, name, raw, "It must be an integer.");
    }
}

/// Reports an invalid setting at `level` (FATAL at server start, ERROR later).
fn invalid(level: PgLogLevel, name: &CStr, value: &str, detail: &str) -> ! {
    let name = name.to_string_lossy();
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("invalid value for parameter \"{name}\": \"{value}\""),
        "pg_idgen::settings",
    )
    .set_detail(detail)
    .set_hint(format!("Correct {name} in postgresql.conf and start the server again."))
    .report(level);
    unreachable!("an ERROR or FATAL report does not return")
}

fn load(level: PgLogLevel) -> Config {
    let preset_text = string_value(&LAYOUT, "twitter");
    let Some(preset) = Preset::from_name(&preset_text) else {
        invalid(level, c"pg_idgen.layout", &preset_text, "Known layouts are twitter, sonyflake and uidgen.")
    };
    let pick = |setting: &GucSetting<i32>, from_preset: u32| match setting.get() {
        FROM_PRESET => Ok(from_preset),
        v => u32::try_from(v).map_err(|_| v),
    };
    let base = preset.layout();
    let bits = [
        (c"pg_idgen.time_bits", pick(&TIME_BITS, base.time_bits)),
        (c"pg_idgen.node_bits", pick(&NODE_BITS, base.node_bits)),
        (c"pg_idgen.sequence_bits", pick(&SEQUENCE_BITS, base.sequence_bits)),
        (c"pg_idgen.time_unit", pick(&TIME_UNIT, base.unit_ms as u32)),
    ];
    let mut values = [0u32; 4];
    for (i, (name, value)) in bits.iter().enumerate() {
        match value {
            Ok(v) => values[i] = *v,
            Err(v) => invalid(level, name, &v.to_string(), "It must be -1 (from pg_idgen.layout) or not negative."),
        }
    }
    let epoch_text = string_value(&EPOCH, "2025-01-01 00:00:00+00");
    let epoch_us = parse_epoch(level, &epoch_text);
    let layout = match Layout::new(preset, values[0], values[1], values[2], values[3] as u64, epoch_us) {
        Ok(layout) => layout,
        Err(e) => {
            let (name, value) = match e {
                LayoutError::TimeBits(_) => (c"pg_idgen.time_bits", values[0].to_string()),
                LayoutError::NodeBits(_) => (c"pg_idgen.node_bits", values[1].to_string()),
                LayoutError::SequenceBits(_) => (c"pg_idgen.sequence_bits", values[2].to_string()),
                LayoutError::TimeUnit(_) => (c"pg_idgen.time_unit", values[3].to_string()),
                LayoutError::Sum(_) => (c"pg_idgen.layout", format!("{}/{}/{}", values[0], values[1], values[2])),
                LayoutError::EpochInFuture | LayoutError::TimeBitsExhausted => (c"pg_idgen.epoch", epoch_text.clone()),
            };
            invalid(level, name, &value, &e.to_string())
        }
    };

    let node_id = match NODE_ID.get() {
        NODE_ID_UNSET => None,
        v if v >= 0 && (v as u64) <= layout.max_node_id() => Some(v as u32),
        v => invalid(
            level,
            c"pg_idgen.node_id",
            &v.to_string(),
            &format!("With {} node bits it must be between 0 and {} (or -1, unset).", layout.node_bits, layout.max_node_id()),
        ),
    };
    let within = |name: &CStr, setting: &GucSetting<i32>, range: std::ops::RangeInclusive<i32>| match setting.get() {
        v if range.contains(&v) => v as u64,
        v => invalid(level, name, &v.to_string(), &format!("It must be between {} and {}.", range.start(), range.end())),
    };
    let segments = SegmentConfig {
        max_tags: within(c"pg_idgen.max_tags", &MAX_TAGS, 1..=1_000_000) as usize,
        database: string_value(&DATABASE, "postgres"),
        wait_timeout_ms: within(c"pg_idgen.segment_wait_timeout", &SEGMENT_WAIT_TIMEOUT, 1..=i32::MAX),
        prefetch_percent: within(c"pg_idgen.segment_prefetch_percent", &SEGMENT_PREFETCH_PERCENT, 0..=99),
        max_step: within(c"pg_idgen.segment_max_step", &SEGMENT_MAX_STEP, 1..=i32::MAX),
        fast_range_ms: within(c"pg_idgen.segment_fast_range", &SEGMENT_FAST_RANGE, 0..=i32::MAX),
        slow_range_ms: within(c"pg_idgen.segment_slow_range", &SEGMENT_SLOW_RANGE, 0..=i32::MAX),
    };
    if segments.slow_range_ms < segments.fast_range_ms {
        invalid(
            level,
            c"pg_idgen.segment_slow_range",
            &segments.slow_range_ms.to_string(),
            "It must not be shorter than pg_idgen.segment_fast_range.",
        );
    }
    let policy_text = string_value(&CLOCK_STEP_POLICY, "keep_generating");
    let Some(clock_step_policy) = StepPolicy::from_name(&policy_text) else {
        invalid(level, c"pg_idgen.clock_step_policy", &policy_text, "It must be keep_generating or refuse.")
    };
    Config {
        layout,
        node_id,
        max_clock_borrow_ms: within(c"pg_idgen.max_clock_borrow", &MAX_CLOCK_BORROW, 0..=i32::MAX),
        max_clock_wait_ms: within(c"pg_idgen.max_clock_wait", &MAX_CLOCK_WAIT, 0..=i32::MAX),
        // Why at least a second: the clock worker moves the mark when half the reserve is left,
        // and looks every 100 ms; less would make generator calls wait for it.
        clock_reserve_ms: within(c"pg_idgen.clock_reserve", &CLOCK_RESERVE, 1000..=3_600_000),
        clock_step_policy,
        segments,
    }
}

fn string_value(setting: &GucSetting<Option<CString>>, default: &str) -> String {
    setting.get().map(|s| s.to_string_lossy().trim().to_string()).unwrap_or_else(|| default.to_string())
}

/// Parses the epoch with PostgreSQL's own timestamptz input, so any spelling psql accepts works.
fn parse_epoch(level: PgLogLevel, text: &str) -> i64 {
    let parsed = PgTryBuilder::new(|| text.parse::<TimestampWithTimeZone>().ok())
        .catch_others(|_| None)
        .execute();
    match parsed {
        Some(ts) if ts.is_finite() => crate::clock::pg_to_unix_micros(ts.into_inner()),
        _ => invalid(level, c"pg_idgen.epoch", text, "It must be a finite timestamp with time zone."),
    }
}

fn log_start_line(config: &Config) {
    let layout = &config.layout;
    let node = config.node_id.map_or("unset".to_string(), |n| n.to_string());
    pgrx::log!(
        "pg_idgen: snowflake layout {}/{}/{} ({}), {} ms per tick, epoch {}, node id {}; the time bits last until {}",
        layout.time_bits,
        layout.node_bits,
        layout.sequence_bits,
        layout.preset.name(),
        layout.unit_ms,
        crate::clock::format_unix_micros(layout.epoch_us),
        node,
        crate::clock::format_unix_micros(layout.clock().end_us()),
    );
}
