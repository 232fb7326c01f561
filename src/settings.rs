//! `pg_idgen.*` settings: declared in `_PG_init`, validated whenever a value is set (check hooks,
//! so `ALTER SYSTEM` refuses what the next start would refuse), and read once at postmaster start.
//!
//! Every setting is postmaster-level: ids made under one layout must decode under the same one,
//! so nothing here may change while the server runs. When the library is preloaded, an invalid
//! value stops the server with a FATAL message that names the setting, and so does a misspelt
//! `pg_idgen.*` name. When it is not preloaded (only decoders can run then), the same checks raise
//! an ERROR on first use instead.
//!
//! Each value is checked on its own by its check hook (at start, `SET`, `ALTER SYSTEM`); what
//! depends on several settings (the bits adding up to at most 63, the node id fitting the node bits) can
//! only be checked at start.

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::OnceLock;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::layout::{Layout, LayoutError, Preset};

/// "-1" for the bit and unit settings: take the value from `pg_idgen.layout`.
const FROM_PRESET: i32 = -1;
const DEFAULT_EPOCH: &str = "2025-01-01 00:00:00+00";

static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"2025-01-01 00:00:00+00"));
static NODE_ID: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c""));
static LAYOUT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"twitter"));
static CLOCK_STEP_POLICY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"keep_generating"));
static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"postgres"));
static NODE_REGISTRY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c""));
static SEGMENT_AUTHORITY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c""));
static TIME_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static NODE_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static TIME_UNIT: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
static MAX_CLOCK_BORROW: GucSetting<i32> = GucSetting::<i32>::new(1000);
static MAX_CLOCK_WAIT: GucSetting<i32> = GucSetting::<i32>::new(1000);
static CLOCK_RESERVE: GucSetting<i32> = GucSetting::<i32>::new(5000);
static CLOCK_FORWARD_DELAY: GucSetting<i32> = GucSetting::<i32>::new(60_000);
static MAX_TAGS: GucSetting<i32> = GucSetting::<i32>::new(1024);
static SEQ_CACHE_SECTIONS: GucSetting<i32> = GucSetting::<i32>::new(1024);
static SEGMENT_WAIT_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(5000);
static SEGMENT_PREFETCH_PERCENT: GucSetting<i32> = GucSetting::<i32>::new(10);
static SEGMENT_MAX_STEP: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);
static SEGMENT_FAST_RANGE: GucSetting<i32> = GucSetting::<i32>::new(15 * 60 * 1000);
static SEGMENT_SLOW_RANGE: GucSetting<i32> = GucSetting::<i32>::new(30 * 60 * 1000);
static NODE_LEASE_TTL: GucSetting<i32> = GucSetting::<i32>::new(30_000);
static NODE_LEASE_MARGIN: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static NODE_LEASE_MAX_LEAD: GucSetting<i32> = GucSetting::<i32>::new(30_000);
static REMOTE_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(5_000);

/// An integer setting: its range, and values inside the range that are still invalid.
struct IntSetting {
    name: &'static CStr,
    setting: &'static GucSetting<i32>,
    short: &'static CStr,
    flags: GucFlags,
    min: i32,
    max: i32,
    /// Values between `min` and `max` that are not allowed (a gap after the -1 "from preset").
    gap: Option<(i32, i32)>,
}

const MAX_UNIT_MS: i32 = 86_400_000;

const INT_SETTINGS: [IntSetting; 19] = [
    IntSetting {
        name: c"pg_idgen.time_bits",
        setting: &TIME_BITS,
        short: c"Bits of time in a snowflake id, 16 to 62 (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
        min: FROM_PRESET,
        max: 62,
        gap: Some((0, 15)),
    },
    IntSetting {
        name: c"pg_idgen.node_bits",
        setting: &NODE_BITS,
        short: c"Bits of node id in a snowflake id, 0 to 31 (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
        min: FROM_PRESET,
        max: 31,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.sequence_bits",
        setting: &SEQUENCE_BITS,
        short: c"Bits of per-tick sequence in a snowflake id, 1 to 31 (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
        min: FROM_PRESET,
        max: 31,
        gap: Some((0, 0)),
    },
    IntSetting {
        name: c"pg_idgen.time_unit",
        setting: &TIME_UNIT,
        short: c"Length of one snowflake time tick, 1 ms to 1 day (-1 = from pg_idgen.layout).",
        flags: GucFlags::UNIT_MS,
        min: FROM_PRESET,
        max: MAX_UNIT_MS,
        gap: Some((0, 0)),
    },
    IntSetting {
        name: c"pg_idgen.max_clock_borrow",
        setting: &MAX_CLOCK_BORROW,
        short: c"How far snowflake, ObjectId and UUIDv7 ids may run ahead of their clock before calls wait.",
        flags: GucFlags::UNIT_MS,
        min: 0,
        max: i32::MAX,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.max_clock_wait",
        setting: &MAX_CLOCK_WAIT,
        short: c"How long a generator call may wait for the clock or a new high-water mark before it raises an error.",
        flags: GucFlags::UNIT_MS,
        min: 0,
        max: i32::MAX,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.clock_reserve",
        setting: &CLOCK_RESERVE,
        // Why at least a second: the clock worker moves the mark when half the reserve is left,
        // and looks every 100 ms; less would make generator calls wait for it.
        short: c"How far ahead of the time in use the clock worker keeps the persisted high-water mark, 1 s to 1 h.",
        flags: GucFlags::UNIT_MS,
        min: 1000,
        max: 3_600_000,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.clock_forward_delay",
        setting: &CLOCK_FORWARD_DELAY,
        short: c"How long the wall clock must stay ahead after a forward step of over 1 s before the generators follow it.",
        flags: GucFlags::UNIT_MS,
        min: 0,
        max: 3_600_000,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.max_tags",
        setting: &MAX_TAGS,
        short: c"Segment tags that can be cached in shared memory at once.",
        flags: GucFlags::empty(),
        min: 1,
        max: 1_000_000,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.seq_cache_sections",
        setting: &SEQ_CACHE_SECTIONS,
        short: c"Sections of per-key sequences that can be cached in shared memory at once (2,992 bytes each).",
        flags: GucFlags::empty(),
        min: 1,
        max: 1_000_000,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.segment_wait_timeout",
        setting: &SEGMENT_WAIT_TIMEOUT,
        short: c"How long segment_next() waits for a new range, or for a locked tag table, before it raises an error.",
        flags: GucFlags::UNIT_MS,
        min: 1,
        max: i32::MAX,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.segment_prefetch_percent",
        setting: &SEGMENT_PREFETCH_PERCENT,
        short: c"Share of a segment range used up when the worker is asked to load the next one.",
        flags: GucFlags::empty(),
        min: 0,
        max: 99,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.segment_max_step",
        setting: &SEGMENT_MAX_STEP,
        short: c"Largest step the dynamic step may grow a segment range to.",
        flags: GucFlags::empty(),
        min: 1,
        max: i32::MAX,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.segment_fast_range",
        setting: &SEGMENT_FAST_RANGE,
        short: c"A segment range used up faster than this doubles the next step.",
        flags: GucFlags::UNIT_MS,
        min: 0,
        max: i32::MAX,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.segment_slow_range",
        setting: &SEGMENT_SLOW_RANGE,
        short: c"A segment range that lasted longer than this halves the next step.",
        flags: GucFlags::UNIT_MS,
        min: 0,
        max: i32::MAX,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.node_lease_ttl",
        setting: &NODE_LEASE_TTL,
        // Why at least 3 s: the lease is renewed every third of it, and each renewal may take up
        // to pg_idgen.remote_timeout, at least a second.
        short: c"How long a node id leased from pg_idgen.node_registry stays this server's without renewal, 3 s to 1 h.",
        flags: GucFlags::UNIT_MS,
        min: 3000,
        max: 3_600_000,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.node_lease_margin",
        setting: &NODE_LEASE_MARGIN,
        short: c"How long past its expiry a node id lease is kept from other servers: the clock-skew margin, 0 to 1 h.",
        flags: GucFlags::UNIT_MS,
        min: 0,
        max: 3_600_000,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.node_lease_max_lead",
        setting: &NODE_LEASE_MAX_LEAD,
        // Why a bound at all: a registry restored from an older copy cannot see the ids made after
        // it, and knows them to lie before its start plus this (src/node/registry.sql).
        short: c"How far ahead of the node registry's clock leased snowflake ids may run, 0 to 1 h; read by the registry and by the servers that lease from it.",
        flags: GucFlags::UNIT_MS,
        min: 0,
        max: 3_600_000,
        gap: None,
    },
    IntSetting {
        name: c"pg_idgen.remote_timeout",
        setting: &REMOTE_TIMEOUT,
        short: c"The longest pg_idgen waits for a remote server (connecting, or one statement), 1 s to 10 min.",
        flags: GucFlags::UNIT_MS,
        min: 1000,
        max: 600_000,
        gap: None,
    },
];

/// A string setting and the check its values must pass (the text of an error is its DETAIL).
struct StringSetting {
    name: &'static CStr,
    setting: &'static GucSetting<Option<CString>>,
    short: &'static CStr,
    flags: GucFlags,
    check: fn(&str) -> Result<(), String>,
}

const STRING_SETTINGS: [StringSetting; 7] = [
    StringSetting {
        name: c"pg_idgen.node_id",
        setting: &NODE_ID,
        short: c"Node id written into every snowflake id: 0 .. 2^node_bits - 1, unique per server (empty = unset).",
        flags: GucFlags::empty(),
        check: check_node_id,
    },
    StringSetting {
        name: c"pg_idgen.epoch",
        setting: &EPOCH,
        short: c"Time zero of snowflake ids: a fixed instant, not in the future (UTC unless an offset is given).",
        flags: GucFlags::empty(),
        check: |text| parse_epoch(text).map(|_| ()),
    },
    StringSetting {
        name: c"pg_idgen.layout",
        setting: &LAYOUT,
        short: c"Snowflake layout preset: twitter (41/10/12, 1 ms), sonyflake (39/16/8, 10 ms), uidgen (28/22/13, 1 s), js_safe (41/4/8, 1 ms: ids below 2^53).",
        flags: GucFlags::empty(),
        check: |text| parse_preset(text).map(|_| ()),
    },
    StringSetting {
        name: c"pg_idgen.clock_step_policy",
        setting: &CLOCK_STEP_POLICY,
        short: c"When the wall clock steps back: keep_generating (from the monotonic clock) or refuse (raise an error).",
        flags: GucFlags::empty(),
        check: |text| parse_step_policy(text).map(|_| ()),
    },
    StringSetting {
        name: c"pg_idgen.database",
        setting: &DATABASE,
        short: c"Database whose segment worker starts with the server (other databases get theirs on demand).",
        flags: GucFlags::empty(),
        check: check_database_name,
    },
    StringSetting {
        name: c"pg_idgen.node_registry",
        setting: &NODE_REGISTRY,
        short: c"libpq connection string of the database that leases node ids to servers (empty = none).",
        // Why superuser only: like primary_conninfo, it may hold a password.
        flags: GucFlags::SUPERUSER_ONLY,
        check: crate::remote::check_conninfo,
    },
    StringSetting {
        name: c"pg_idgen.segment_authority",
        setting: &SEGMENT_AUTHORITY,
        short: c"libpq connection string of the database whose tag table serves segment ranges to many servers (empty = each database's own tag table).",
        flags: GucFlags::SUPERUSER_ONLY,
        check: crate::remote::check_conninfo,
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
    /// Sections of per-key sequences cached in shared memory (they share the segment worker).
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
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Declares the settings. Called from `_PG_init`, preloaded or not.
pub fn declare(preloading: bool) {
    // Why read the raw text first: for a custom setting that postgresql.conf set before the
    // library loaded, PostgreSQL only WARNs about a value its check refuses and keeps the
    // default. A mistyped node id must stop the server instead, so the raw text is checked below.
    let raw_ints: Vec<Option<String>> = INT_SETTINGS.iter().map(|s| raw_setting(s.name)).collect();
    let raw_strings: Vec<Option<String>> = STRING_SETTINGS.iter().map(|s| raw_setting(s.name)).collect();

    // Why not always Postmaster: PostgreSQL refuses (FATAL) to create postmaster-level settings
    // after start, which is when a library that is not preloaded gets loaded. Then only the
    // decoders can run, and they read the settings once per session.
    let context = || if preloading { GucContext::Postmaster } else { GucContext::Sighup };
    define_int_settings(context);
    define_string_settings(context);

    if preloading {
        refuse_unknown_names();
        for (s, raw) in INT_SETTINGS.iter().zip(&raw_ints) {
            if let Some(Err(detail)) = raw.as_deref().map(|raw| check_int_text(s, raw)) {
                invalid(PgLogLevel::FATAL, s.name, raw.as_deref().unwrap_or_default(), &detail);
            }
        }
        for (s, raw) in STRING_SETTINGS.iter().zip(&raw_strings) {
            if let Some(Err(detail)) = raw.as_deref().map(s.check) {
                // A connection string may hold a password: the message does not repeat it.
                let shown = if s.flags.contains(GucFlags::SUPERUSER_ONLY) { "…" } else { raw.as_deref().unwrap_or_default() };
                invalid(PgLogLevel::FATAL, s.name, shown, &detail);
            }
        }
        let config = load(PgLogLevel::FATAL);
        log_start_line(&config);
        let _ = CONFIG.set(config);
    }
    // SAFETY: in _PG_init, after every pg_idgen.* setting is defined.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"pg_idgen".as_ptr()) };
}

/// The server's configuration. In a backend of a preloaded server this was fixed at start;
/// otherwise it is read now, and an invalid setting raises an ERROR.
pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| load(PgLogLevel::ERROR))
}

fn define_int_settings(context: impl Fn() -> GucContext) {
    /// One check hook per integer setting: a C function pointer cannot carry which one it is.
    unsafe extern "C-unwind" fn check_int<const I: usize>(
        newval: *mut i32,
        _extra: *mut *mut c_void,
        _source: pg_sys::GucSource::Type,
    ) -> bool {
        // SAFETY: PostgreSQL passes a valid pointer to the new value; the guard turns a panic
        // into an ERROR instead of unwinding into C.
        unsafe { pg_sys::panic::pgrx_extern_c_guard(|| report_check(check_int_value(&INT_SETTINGS[I], *newval))) }
    }
    macro_rules! hooks {
        ($($i:literal)*) => { [$(Some(check_int::<$i> as unsafe extern "C-unwind" fn(*mut i32, *mut *mut c_void, pg_sys::GucSource::Type) -> bool)),*] };
    }
    let hooks = hooks!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18);
    for (s, hook) in INT_SETTINGS.iter().zip(hooks) {
        // SAFETY: the settings are statics, and the hooks never unwind into PostgreSQL.
        unsafe {
            GucRegistry::define_int_guc_with_hooks(
                s.name, s.short, c"", s.setting, s.min, s.max, context(), s.flags, hook, None, None,
            )
        };
    }
}

fn define_string_settings(context: impl Fn() -> GucContext) {
    unsafe extern "C-unwind" fn check_string<const I: usize>(
        newval: *mut *mut c_char,
        _extra: *mut *mut c_void,
        _source: pg_sys::GucSource::Type,
    ) -> bool {
        // SAFETY: PostgreSQL passes a pointer to the new value, a C string or NULL.
        unsafe {
            pg_sys::panic::pgrx_extern_c_guard(|| {
                let text = if (*newval).is_null() { Ok("") } else { CStr::from_ptr(*newval).to_str() };
                match text {
                    Ok(text) => report_check((STRING_SETTINGS[I].check)(text)),
                    Err(_) => report_check(Err("It must be UTF-8 text.".into())),
                }
            })
        }
    }
    macro_rules! hooks {
        ($($i:literal)*) => { [$(Some(check_string::<$i> as unsafe extern "C-unwind" fn(*mut *mut c_char, *mut *mut c_void, pg_sys::GucSource::Type) -> bool)),*] };
    }
    let hooks = hooks!(0 1 2 3 4 5 6);
    for (s, hook) in STRING_SETTINGS.iter().zip(hooks) {
        // SAFETY: as above.
        unsafe { GucRegistry::define_string_guc_with_hooks(s.name, s.short, c"", s.setting, context(), s.flags, hook, None, None) };
    }
}

/// Tells PostgreSQL the result of a check hook: on failure, the reason becomes the error's DETAIL.
fn report_check(result: Result<(), String>) -> bool {
    match result {
        Ok(()) => true,
        Err(detail) => {
            let detail = CString::new(detail).unwrap_or_default();
            // SAFETY: PostgreSQL reads (and frees with its memory context) the palloc'd string.
            unsafe {
                pg_sys::GUC_check_errcode(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as i32);
                pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(detail.as_ptr());
            }
            false
        }
    }
}

fn check_int_value(s: &IntSetting, value: i32) -> Result<(), String> {
    let in_gap = s.gap.is_some_and(|(low, high)| (low..=high).contains(&value));
    if value < s.min || value > s.max || in_gap {
        let allowed = match s.gap {
            Some((_, high)) => format!("-1 (from pg_idgen.layout) or {} to {}", high + 1, s.max),
            None => format!("{} to {}", s.min, s.max),
        };
        return Err(format!("It must be {allowed}."));
    }
    Ok(())
}

/// The raw text of an integer setting, parsed as PostgreSQL parses it (units included).
fn check_int_text(s: &IntSetting, raw: &str) -> Result<(), String> {
    let text = CString::new(raw).map_err(|_| "It must be an integer.".to_string())?;
    let mut parsed = 0i32;
    // SAFETY: parse_int reads the C string and writes the result; no hint is asked for.
    let ok = unsafe { pg_sys::parse_int(text.as_ptr(), &mut parsed, s.flags.bits(), std::ptr::null_mut()) };
    if !ok {
        return Err(if s.flags.is_empty() { "It must be an integer.".into() } else { "It must be a duration in ms, s, min or h.".into() });
    }
    check_int_value(s, parsed)
}

/// Names under `pg_idgen.` that no setting has: a misspelt setting would otherwise be ignored
/// with a WARNING, and the server would run with the default.
fn refuse_unknown_names() {
    // SAFETY: every entry of the GUC table is a valid variable; read in the postmaster while nothing
    // changes it.
    let unknown = unsafe {
        guc_variables()
            .iter()
            .map(|&v| &*v)
            .filter(|v| v.flags & pg_sys::GUC_CUSTOM_PLACEHOLDER as i32 != 0)
            .map(|v| CStr::from_ptr(v.name).to_string_lossy().into_owned())
            .find(|name| name.to_ascii_lowercase().starts_with("pg_idgen."))
    };
    if let Some(name) = unknown {
        let source = CString::new(name.as_str()).map(|n| source_of(&n)).unwrap_or_else(|_| "postgresql.conf".into());
        let known: Vec<String> = INT_SETTINGS
            .iter()
            .map(|s| s.name)
            .chain(STRING_SETTINGS.iter().map(|s| s.name))
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        ErrorReport::new(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("unrecognized configuration parameter \"{name}\""), "pg_idgen::settings")
            .set_detail(format!("pg_idgen's settings are {}.", known.join(", ")))
            .set_hint(format!("Correct the name in {source} and start the server again."))
            .report(PgLogLevel::FATAL);
    }
}

/// Every GUC variable of the server, placeholders of custom settings included.
///
/// # Safety
/// Only while no setting is defined or removed (the slice is PostgreSQL's table, or on 16 and later
/// a palloc'd copy of its pointers).
#[cfg(feature = "pg15")]
unsafe fn guc_variables() -> &'static [*mut pg_sys::config_generic] {
    // SAFETY: the table holds GetNumConfigOptions() entries.
    unsafe { std::slice::from_raw_parts(pg_sys::get_guc_variables(), pg_sys::GetNumConfigOptions() as usize) }
}

/// Every GUC variable of the server, placeholders of custom settings included. Why another body:
/// PostgreSQL 16 keeps the variables in a hash table and returns an array of them with its length.
///
/// # Safety
/// As above.
#[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
unsafe fn guc_variables() -> &'static [*mut pg_sys::config_generic] {
    let mut count = 0;
    // SAFETY: the array (palloc'd in the current memory context) holds `count` entries.
    unsafe {
        let variables = pg_sys::get_guc_variables(&mut count);
        std::slice::from_raw_parts(variables, count as usize)
    }
}

fn raw_setting(name: &CStr) -> Option<String> {
    // SAFETY: GetConfigOption returns NULL or a C string owned by the GUC machinery.
    let value = unsafe { pg_sys::GetConfigOption(name.as_ptr(), true, false) };
    if value.is_null() {
        None
    } else {
        Some(unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned())
    }
}

/// Reports an invalid setting at `level` (FATAL at server start, ERROR later), with a hint that
/// names the file the value came from.
fn invalid(level: PgLogLevel, name: &CStr, value: &str, detail: &str) -> ! {
    let hint = format!("Correct {} in {} and start the server again.", name.to_string_lossy(), source_of(name));
    invalid_with_hint(level, name, value, detail, &hint)
}

/// Where a setting's value was read: the configuration file and line (`ALTER SYSTEM` writes
/// postgresql.auto.conf), or "postgresql.conf" when PostgreSQL did not note it.
fn source_of(name: &CStr) -> String {
    // SAFETY: as in refuse_unknown_names; the strings are the GUC machinery's, copied before use.
    let found = unsafe {
        guc_variables().iter().map(|&v| &*v).find(|v| CStr::from_ptr(v.name).to_bytes().eq_ignore_ascii_case(name.to_bytes())).and_then(|v| {
            (!v.sourcefile.is_null()).then(|| format!("{} (line {})", CStr::from_ptr(v.sourcefile).to_string_lossy(), v.sourceline))
        })
    };
    found.unwrap_or_else(|| "postgresql.conf".into())
}

fn invalid_with_hint(level: PgLogLevel, name: &CStr, value: &str, detail: &str, hint: &str) -> ! {
    let name = name.to_string_lossy();
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("invalid value for parameter \"{name}\": \"{value}\""),
        "pg_idgen::settings",
    )
    .set_detail(detail)
    .set_hint(hint)
    .report(level);
    unreachable!("an ERROR or FATAL report does not return")
}

fn parse_preset(text: &str) -> Result<Preset, String> {
    Preset::from_name(text).ok_or_else(|| "Known layouts are twitter, sonyflake, uidgen and js_safe.".into())
}

fn parse_step_policy(text: &str) -> Result<StepPolicy, String> {
    StepPolicy::from_name(text).ok_or_else(|| "It must be keep_generating or refuse.".into())
}

/// The check of `pg_idgen.node_id` whenever it is set: a whole number, and once the server runs,
/// one that fits the node bits of its layout. Why only then: at start the layout is read after
/// the node id, and `load` checks the two together; later (`ALTER SYSTEM`) the running layout is
/// the one the next start has, unless the layout is changed too (in postgresql.conf, together).
fn check_node_id(text: &str) -> Result<(), String> {
    match (parse_node_id(text)?, CONFIG.get()) {
        (Some(node_id), Some(config)) if node_id as u64 > config.layout.max_node_id() => Err(node_id_out_of_layout(&config.layout)),
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

/// A node id: empty (or -1) for unset, else a plain non-negative integer — never rounded, so
/// "1.5" is an error rather than node 2.
fn parse_node_id(text: &str) -> Result<Option<u32>, String> {
    let text = text.trim();
    if text.is_empty() || text == "-1" {
        return Ok(None);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("It must be a whole number from 0 to 2^node_bits - 1, or empty (unset).".into());
    }
    text.parse::<u32>().ok().filter(|&n| n <= i32::MAX as u32).map(Some).ok_or_else(|| "It is too large.".into())
}

/// The epoch as an absolute instant (Unix µs). Without a UTC offset it is read as UTC, and dates
/// are read year first (ISO), whatever the session's `timezone` and `DateStyle`: `ALTER SYSTEM`
/// must read the text as the next start will, and time zero must not move when those settings
/// change. Words that name a moment relative to now ("now", "today", …) are refused: the
/// postmaster has no "now" that would mean anything to the next start.
fn parse_epoch(text: &str) -> Result<i64, String> {
    let lower = text.to_ascii_lowercase();
    if ["now", "today", "tomorrow", "yesterday"].iter().any(|word| lower.contains(word)) {
        return Err("It must be a fixed instant, such as '2025-01-01 00:00:00+00', not one relative to the time of reading.".into());
    }
    let parsed = with_fixed_date_rules(|| {
        PgTryBuilder::new(|| text.parse::<TimestampWithTimeZone>().ok()).catch_others(|_| None).execute()
    });
    let unix_us = match parsed {
        Some(ts) if ts.is_finite() => crate::clock::pg_to_unix_micros(ts.into_inner()),
        _ => return Err("It must be a finite timestamp with time zone.".into()),
    };
    if unix_us > crate::clock::wall_unix_micros() {
        return Err(LayoutError::EpochInFuture.to_string());
    }
    Ok(unix_us)
}

/// Runs `f` with the session's time zone set to UTC and dates read as ISO, year first; then
/// restores them.
fn with_fixed_date_rules<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: pg_tzset returns a cached zone that lives for the process; the previous values are
    // put back before returning (f catches its own errors).
    unsafe {
        let previous = (pg_sys::session_timezone, pg_sys::DateStyle, pg_sys::DateOrder);
        let utc = pg_sys::pg_tzset(c"UTC".as_ptr());
        if !utc.is_null() {
            pg_sys::session_timezone = utc;
        }
        pg_sys::DateStyle = pg_sys::USE_ISO_DATES as i32;
        pg_sys::DateOrder = pg_sys::DATEORDER_YMD as i32;
        let result = f();
        (pg_sys::session_timezone, pg_sys::DateStyle, pg_sys::DateOrder) = previous;
        result
    }
}

fn check_database_name(text: &str) -> Result<(), String> {
    if text.is_empty() {
        Err("It must name a database.".into())
    } else if text.len() >= pg_sys::NAMEDATALEN as usize {
        Err(format!("A database name is at most {} bytes.", pg_sys::NAMEDATALEN - 1))
    } else {
        Ok(())
    }
}

fn load(level: PgLogLevel) -> Config {
    let preset_text = string_value(&LAYOUT, "twitter");
    let preset = parse_preset(&preset_text).unwrap_or_else(|detail| invalid(level, c"pg_idgen.layout", &preset_text, &detail));
    let base = preset.layout();
    let pick = |setting: &GucSetting<i32>, from_preset: u32| match setting.get() {
        FROM_PRESET => from_preset,
        v => v as u32, // the check hook let only -1 and non-negative values through
    };
    let time_bits = pick(&TIME_BITS, base.time_bits);
    let node_bits = pick(&NODE_BITS, base.node_bits);
    let sequence_bits = pick(&SEQUENCE_BITS, base.sequence_bits);
    let unit_ms = pick(&TIME_UNIT, base.unit_ms as u32) as u64;
    let epoch_text = string_value(&EPOCH, DEFAULT_EPOCH);
    let epoch_us = parse_epoch(&epoch_text).unwrap_or_else(|detail| invalid(level, c"pg_idgen.epoch", &epoch_text, &detail));
    let layout = match Layout::new(preset, time_bits, node_bits, sequence_bits, unit_ms, epoch_us)
        .and_then(Layout::keeps_preset)
        .and_then(|layout| layout.usable_at(crate::clock::wall_unix_micros())) {
        Ok(layout) => layout,
        Err(e) => {
            let (name, value) = match e {
                LayoutError::TimeBits(_) => (c"pg_idgen.time_bits", time_bits.to_string()),
                LayoutError::NodeBits(_) => (c"pg_idgen.node_bits", node_bits.to_string()),
                LayoutError::SequenceBits(_) => (c"pg_idgen.sequence_bits", sequence_bits.to_string()),
                LayoutError::TimeUnit(_) => (c"pg_idgen.time_unit", unit_ms.to_string()),
                LayoutError::Sum(_) | LayoutError::NotJsSafe(_) => (c"pg_idgen.layout", format!("{time_bits}/{node_bits}/{sequence_bits}")),
                LayoutError::EpochInFuture => (c"pg_idgen.epoch", epoch_text.clone()),
                LayoutError::TimeBitsExhausted => invalid_with_hint(
                    level,
                    c"pg_idgen.time_bits",
                    &time_bits.to_string(),
                    &e.to_string(),
                    // Why not "a later epoch": on a server that made ids, that makes smaller ones.
                    "Choose more time bits (pg_idgen.time_bits) or a longer tick (pg_idgen.time_unit). Do not move pg_idgen.epoch later on a server that has made ids: its new ids would be smaller than old ones (pg_idgen refuses to start then).",
                ),
            };
            invalid(level, name, &value, &e.to_string())
        }
    };

    let node_text = string_value(&NODE_ID, "");
    let node_id = match parse_node_id(&node_text) {
        Ok(Some(n)) if n as u64 > layout.max_node_id() => invalid(level, c"pg_idgen.node_id", &node_text, &node_id_out_of_layout(&layout)),
        Ok(node_id) => node_id,
        Err(detail) => invalid(level, c"pg_idgen.node_id", &node_text, &detail),
    };
    let database = string_value(&DATABASE, "postgres");
    if let Err(detail) = check_database_name(&database) {
        invalid(level, c"pg_idgen.database", &database, &detail);
    }
    let int = |setting: &GucSetting<i32>| setting.get().max(0) as u64;
    let segments = SegmentConfig {
        max_tags: int(&MAX_TAGS) as usize,
        seq_cache_sections: int(&SEQ_CACHE_SECTIONS) as usize,
        database,
        wait_timeout_ms: int(&SEGMENT_WAIT_TIMEOUT),
        prefetch_percent: int(&SEGMENT_PREFETCH_PERCENT),
        max_step: int(&SEGMENT_MAX_STEP),
        fast_range_ms: int(&SEGMENT_FAST_RANGE),
        slow_range_ms: int(&SEGMENT_SLOW_RANGE),
        authority: Some(string_value(&SEGMENT_AUTHORITY, "")).filter(|a| !a.is_empty()),
        remote_timeout_ms: int(&REMOTE_TIMEOUT),
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
    let clock_step_policy =
        parse_step_policy(&policy_text).unwrap_or_else(|detail| invalid(level, c"pg_idgen.clock_step_policy", &policy_text, &detail));
    let registry = string_value(&NODE_REGISTRY, "");
    let lease = (!registry.is_empty()).then(|| LeaseConfig {
        registry,
        ttl_ms: int(&NODE_LEASE_TTL),
        margin_ms: int(&NODE_LEASE_MARGIN),
        max_lead_ms: int(&NODE_LEASE_MAX_LEAD),
        remote_timeout_ms: int(&REMOTE_TIMEOUT).min(int(&NODE_LEASE_TTL) / 3),
    });
    // Ids run ahead of the clock by up to the borrow, and after a crash from the mark they restart
    // above (up to the reserve ahead) by the borrow again: a lead the registry refused would stop
    // snowflake ids instead.
    let (borrow_ms, reserve_ms) = (int(&MAX_CLOCK_BORROW), int(&CLOCK_RESERVE));
    if let Some(lease) = &lease {
        if lease.max_lead_ms < reserve_ms + 2 * borrow_ms {
            invalid(
                level,
                c"pg_idgen.node_lease_max_lead",
                &lease.max_lead_ms.to_string(),
                &format!("With a node registry it must be at least pg_idgen.clock_reserve plus twice pg_idgen.max_clock_borrow ({reserve_ms} + 2 × {borrow_ms} ms): ids run that far ahead of the clock after a crash."),
            );
        }
    }
    Config {
        layout,
        node_id,
        lease,
        max_clock_borrow_ms: int(&MAX_CLOCK_BORROW),
        max_clock_wait_ms: int(&MAX_CLOCK_WAIT),
        clock_reserve_ms: int(&CLOCK_RESERVE),
        clock_forward_delay_ms: int(&CLOCK_FORWARD_DELAY),
        clock_step_policy,
        segments,
    }
}

/// A node id for messages: the number, or "unset".
pub fn node_id_text(node_id: Option<u32>) -> String {
    node_id.map_or("unset".into(), |n| n.to_string())
}

fn string_value(setting: &GucSetting<Option<CString>>, default: &str) -> String {
    setting.get().map(|s| s.to_string_lossy().trim().to_string()).unwrap_or_else(|| default.to_string())
}

fn log_start_line(config: &Config) {
    let layout = &config.layout;
    pgrx::log!(
        "pg_idgen: snowflake layout {}/{}/{} ({}), {} ms per tick, epoch {}, node id {}; the time bits last until {}",
        layout.time_bits,
        layout.node_bits,
        layout.sequence_bits,
        layout.preset.name(),
        layout.unit_ms,
        crate::clock::format_unix_micros(layout.epoch_us),
        node_id_text(config.node_id),
        crate::clock::format_unix_micros(layout.clock().end_us()),
    );
}
