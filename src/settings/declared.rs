//! The settings as PostgreSQL knows them: each declared once, with its default, range, unit and
//! check hook, in the two tables below (integers and strings); the hooks that check a value
//! whenever one is set; the refusal of unknown `pg_idgen.*` names at start.

use std::ffi::{c_char, c_void, CStr, CString};

use pgrx::datum::TimestampWithTimeZone;
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use super::parse::{self, IntRange, FROM_PRESET, NAMEDATALEN};

const _: () = assert!(NAMEDATALEN == pg_sys::NAMEDATALEN as usize, "the server's NAMEDATALEN is the one parse checks names against");

// Each setting's value, with its default: the one place that states it. Why a string setting's
// default is not repeated where it is read: PostgreSQL never sets a string setting whose default
// is not NULL to NULL.
pub(super) static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"2025-01-01 00:00:00+00"));
pub(super) static NODE_ID: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c""));
pub(super) static LAYOUT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"twitter"));
pub(super) static CLOCK_STEP_POLICY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"keep_generating"));
pub(super) static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"postgres"));
pub(super) static NODE_REGISTRY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c""));
pub(super) static SEGMENT_AUTHORITY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c""));
pub(super) static SEQ_SECTIONS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"local"));
pub(super) static TIME_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
pub(super) static NODE_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
pub(super) static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
pub(super) static TIME_UNIT: GucSetting<i32> = GucSetting::<i32>::new(FROM_PRESET);
pub(super) static MAX_CLOCK_BORROW: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub(super) static MAX_CLOCK_WAIT: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub(super) static CLOCK_RESERVE: GucSetting<i32> = GucSetting::<i32>::new(5000);
pub(super) static CLOCK_FORWARD_DELAY: GucSetting<i32> = GucSetting::<i32>::new(60_000);
pub(super) static MAX_TAGS: GucSetting<i32> = GucSetting::<i32>::new(1024);
pub(super) static SEQ_CACHE_SECTIONS: GucSetting<i32> = GucSetting::<i32>::new(1024);
pub(super) static SEGMENT_WAIT_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(5000);
pub(super) static SEGMENT_PREFETCH_PERCENT: GucSetting<i32> = GucSetting::<i32>::new(10);
pub(super) static SEGMENT_MAX_STEP: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);
pub(super) static SEGMENT_FAST_RANGE: GucSetting<i32> = GucSetting::<i32>::new(15 * 60 * 1000);
pub(super) static SEGMENT_SLOW_RANGE: GucSetting<i32> = GucSetting::<i32>::new(30 * 60 * 1000);
pub(super) static NODE_LEASE_TTL: GucSetting<i32> = GucSetting::<i32>::new(30_000);
pub(super) static NODE_LEASE_MARGIN: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub(super) static SEQ_LEASE_TTL: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub(super) static SEQ_LEASE_MARGIN: GucSetting<i32> = GucSetting::<i32>::new(1_000);
pub(super) static NODE_LEASE_MAX_LEAD: GucSetting<i32> = GucSetting::<i32>::new(30_000);
pub(super) static REMOTE_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(5_000);

/// An integer setting: its name, value, description, unit and the values it may take.
pub(super) struct IntSetting {
    pub(super) name: &'static CStr,
    pub(super) setting: &'static GucSetting<i32>,
    short: &'static CStr,
    flags: GucFlags,
    range: IntRange,
}

const MAX_UNIT_MS: i32 = 86_400_000;

pub(super) const INT_SETTINGS: [IntSetting; 21] = [
    IntSetting {
        name: c"pg_idgen.time_bits",
        setting: &TIME_BITS,
        short: c"Bits of time in a snowflake id, 16 to 62 (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
        range: IntRange::or_from_preset(16, 62),
    },
    IntSetting {
        name: c"pg_idgen.node_bits",
        setting: &NODE_BITS,
        short: c"Bits of node id in a snowflake id, 0 to 31 (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
        range: IntRange::or_from_preset(0, 31),
    },
    IntSetting {
        name: c"pg_idgen.sequence_bits",
        setting: &SEQUENCE_BITS,
        short: c"Bits of per-tick sequence in a snowflake id, 1 to 31 (-1 = from pg_idgen.layout).",
        flags: GucFlags::empty(),
        range: IntRange::or_from_preset(1, 31),
    },
    IntSetting {
        name: c"pg_idgen.time_unit",
        setting: &TIME_UNIT,
        short: c"Length of one snowflake time tick, 1 ms to 1 day (-1 = from pg_idgen.layout).",
        flags: GucFlags::UNIT_MS,
        range: IntRange::or_from_preset(1, MAX_UNIT_MS),
    },
    IntSetting {
        name: c"pg_idgen.max_clock_borrow",
        setting: &MAX_CLOCK_BORROW,
        short: c"How far snowflake, ObjectId and UUIDv7 ids may run ahead of their clock before calls wait.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, i32::MAX),
    },
    IntSetting {
        name: c"pg_idgen.max_clock_wait",
        setting: &MAX_CLOCK_WAIT,
        short: c"How long a generator call may wait for the clock or a new high-water mark before it raises an error.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, i32::MAX),
    },
    IntSetting {
        name: c"pg_idgen.clock_reserve",
        setting: &CLOCK_RESERVE,
        // Why at least a second: the clock worker moves the mark when half the reserve is left,
        // and looks every 100 ms; less would make generator calls wait for it.
        short: c"How far ahead of the time in use the clock worker keeps the persisted high-water mark, 1 s to 1 h.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(1000, 3_600_000),
    },
    IntSetting {
        name: c"pg_idgen.clock_forward_delay",
        setting: &CLOCK_FORWARD_DELAY,
        short: c"How long the wall clock must stay ahead after a forward step of over 1 s before the generators follow it.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, 3_600_000),
    },
    IntSetting {
        name: c"pg_idgen.max_tags",
        setting: &MAX_TAGS,
        short: c"Segment tags that can be cached in shared memory at once.",
        flags: GucFlags::empty(),
        range: IntRange::new(1, 1_000_000),
    },
    IntSetting {
        name: c"pg_idgen.seq_cache_sections",
        setting: &SEQ_CACHE_SECTIONS,
        short: c"Sections of per-key sequences that can be cached in shared memory at once (2,992 bytes each).",
        flags: GucFlags::empty(),
        range: IntRange::new(1, 1_000_000),
    },
    IntSetting {
        name: c"pg_idgen.segment_wait_timeout",
        setting: &SEGMENT_WAIT_TIMEOUT,
        short: c"How long segment_next() waits for a new range, or for a locked tag table, before it raises an error.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(1, i32::MAX),
    },
    IntSetting {
        name: c"pg_idgen.segment_prefetch_percent",
        setting: &SEGMENT_PREFETCH_PERCENT,
        short: c"Share of a segment range used up when the worker is asked to load the next one.",
        flags: GucFlags::empty(),
        range: IntRange::new(0, 99),
    },
    IntSetting {
        name: c"pg_idgen.segment_max_step",
        setting: &SEGMENT_MAX_STEP,
        short: c"Largest step the dynamic step may grow a segment range to.",
        flags: GucFlags::empty(),
        range: IntRange::new(1, i32::MAX),
    },
    IntSetting {
        name: c"pg_idgen.segment_fast_range",
        setting: &SEGMENT_FAST_RANGE,
        short: c"A segment range used up faster than this doubles the next step.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, i32::MAX),
    },
    IntSetting {
        name: c"pg_idgen.segment_slow_range",
        setting: &SEGMENT_SLOW_RANGE,
        short: c"A segment range that lasted longer than this halves the next step.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, i32::MAX),
    },
    IntSetting {
        name: c"pg_idgen.node_lease_ttl",
        setting: &NODE_LEASE_TTL,
        // Why at least 3 s: the lease is renewed every third of it, and each renewal may take up
        // to pg_idgen.remote_timeout, at least a second.
        short: c"How long a node id leased from pg_idgen.node_registry stays this server's without renewal, 3 s to 1 h.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(3000, 3_600_000),
    },
    IntSetting {
        name: c"pg_idgen.node_lease_margin",
        setting: &NODE_LEASE_MARGIN,
        short: c"How long past its expiry a node id lease is kept from other servers: the clock-skew margin, 0 to 1 h.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, 3_600_000),
    },
    IntSetting {
        name: c"pg_idgen.seq_lease_ttl",
        setting: &SEQ_LEASE_TTL,
        // Why at least 3 s: the leases are renewed every third of it, and each renewal may take
        // up to pg_idgen.remote_timeout, at least a second.
        short: c"How long a section of per-key sequences leased from the segment authority (pg_idgen.seq_sections = authority) stays this server's without renewal, 3 s to 1 h.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(3000, 3_600_000),
    },
    IntSetting {
        name: c"pg_idgen.seq_lease_margin",
        setting: &SEQ_LEASE_MARGIN,
        short: c"How long past its expiry a section lease is kept from other servers: the clock-rate margin, 0 to 1 h.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, 3_600_000),
    },
    IntSetting {
        name: c"pg_idgen.node_lease_max_lead",
        setting: &NODE_LEASE_MAX_LEAD,
        // Why a bound at all: a registry restored from an older copy cannot see the ids made after
        // it, and knows them to lie before its start plus this (src/node/registry.sql).
        short: c"How far ahead of the node registry's clock leased snowflake ids may run, 0 to 1 h; read by the registry and by the servers that lease from it.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(0, 3_600_000),
    },
    IntSetting {
        name: c"pg_idgen.remote_timeout",
        setting: &REMOTE_TIMEOUT,
        short: c"The longest pg_idgen waits for a remote server (connecting, or one statement), 1 s to 10 min.",
        flags: GucFlags::UNIT_MS,
        range: IntRange::new(1000, 600_000),
    },
];

/// A string setting and the check its values must pass (the text of an error is its DETAIL).
pub(super) struct StringSetting {
    pub(super) name: &'static CStr,
    pub(super) setting: &'static GucSetting<Option<CString>>,
    short: &'static CStr,
    pub(super) flags: GucFlags,
    pub(super) check: fn(&str) -> Result<(), String>,
}

pub(super) const STRING_SETTINGS: [StringSetting; 8] = [
    StringSetting {
        name: c"pg_idgen.node_id",
        setting: &NODE_ID,
        short: c"Node id written into every snowflake id: 0 .. 2^node_bits - 1, unique per server (empty = unset).",
        flags: GucFlags::empty(),
        check: |text| parse::check_node_id(text, super::CONFIG.get().map(|config| &config.layout)),
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
        check: |text| parse::parse_preset(text).map(|_| ()),
    },
    StringSetting {
        name: c"pg_idgen.clock_step_policy",
        setting: &CLOCK_STEP_POLICY,
        short: c"When the wall clock steps back: keep_generating (from the monotonic clock) or refuse (raise an error).",
        flags: GucFlags::empty(),
        check: |text| parse::parse_step_policy(text).map(|_| ()),
    },
    StringSetting {
        name: c"pg_idgen.database",
        setting: &DATABASE,
        short: c"Database whose segment worker starts with the server (other databases get theirs on demand).",
        flags: GucFlags::empty(),
        check: parse::check_database_name,
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
    StringSetting {
        name: c"pg_idgen.seq_sections",
        setting: &SEQ_SECTIONS,
        short: c"Where the sections of per-key sequences come from: local (each database's own tables) or authority (leased from pg_idgen.segment_authority, for many servers).",
        flags: GucFlags::empty(),
        check: |text| parse::parse_seq_sections(text).map(|_| ()),
    },
];

/// Defines every setting, postmaster-level when the library is being preloaded. Why not always:
/// PostgreSQL refuses (FATAL) to create postmaster-level settings after start, which is when a
/// library that is not preloaded gets loaded. Then only the decoders can run, and they read the
/// settings once per session.
pub(super) fn define(preloading: bool) {
    let context = || if preloading { GucContext::Postmaster } else { GucContext::Sighup };
    for (s, check) in INT_SETTINGS.iter().zip(INT_CHECKS) {
        // SAFETY: the settings are statics, and the hooks never unwind into PostgreSQL.
        unsafe {
            GucRegistry::define_int_guc_with_hooks(
                s.name,
                s.short,
                c"",
                s.setting,
                s.range.min,
                s.range.max,
                context(),
                s.flags,
                Some(check),
                None,
                None,
            )
        };
    }
    for (s, check) in STRING_SETTINGS.iter().zip(STRING_CHECKS) {
        // SAFETY: as above.
        unsafe { GucRegistry::define_string_guc_with_hooks(s.name, s.short, c"", s.setting, context(), s.flags, Some(check), None, None) };
    }
}

/// Reserves the `pg_idgen.` prefix: PostgreSQL then refuses to create another name under it (and
/// removes the placeholders of unknown ones, so `refuse_unknown_names` runs before).
pub(super) fn reserve_prefix() {
    // SAFETY: in _PG_init, after every pg_idgen.* setting is defined.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"pg_idgen".as_ptr()) };
}

type IntCheck = unsafe extern "C-unwind" fn(*mut i32, *mut *mut c_void, pg_sys::GucSource::Type) -> bool;
type StringCheck = unsafe extern "C-unwind" fn(*mut *mut c_char, *mut *mut c_void, pg_sys::GucSource::Type) -> bool;

/// `[f::<0>, f::<1>, …]`: one check hook per setting, at its index in its table.
macro_rules! checks {
    ($f:ident as $t:ty; $($i:literal)*) => { [$($f::<$i> as $t),*] };
}

/// The check hook of each integer setting. Why one function per setting: a C function pointer
/// cannot carry which setting it checks. Why typed by the table's length: a setting added without
/// its hook, or a hook without its setting, does not compile.
const INT_CHECKS: [IntCheck; INT_SETTINGS.len()] = checks!(check_int as IntCheck; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20);
/// The check hook of each string setting (as `INT_CHECKS`).
const STRING_CHECKS: [StringCheck; STRING_SETTINGS.len()] = checks!(check_string as StringCheck; 0 1 2 3 4 5 6 7);

unsafe extern "C-unwind" fn check_int<const I: usize>(newval: *mut i32, _extra: *mut *mut c_void, _source: pg_sys::GucSource::Type) -> bool {
    // SAFETY: PostgreSQL passes a valid pointer to the new value; the guard turns a panic into an
    // ERROR instead of unwinding into C.
    unsafe { pg_sys::panic::pgrx_extern_c_guard(|| report_check(INT_SETTINGS[I].range.check(*newval))) }
}

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

/// The raw text of an integer setting, parsed as PostgreSQL parses it (units included).
pub(super) fn check_int_text(s: &IntSetting, raw: &str) -> Result<(), String> {
    let text = CString::new(raw).map_err(|_| "It must be an integer.".to_string())?;
    let mut parsed = 0i32;
    // SAFETY: parse_int reads the C string and writes the result; no hint is asked for.
    let ok = unsafe { pg_sys::parse_int(text.as_ptr(), &mut parsed, s.flags.bits(), std::ptr::null_mut()) };
    if !ok {
        return Err(if s.flags.is_empty() { "It must be an integer.".into() } else { "It must be a duration in ms, s, min or h.".into() });
    }
    s.range.check(parsed)
}

/// Names under `pg_idgen.` that no setting has: a misspelt setting would otherwise be ignored
/// with a WARNING, and the server would run with the default.
pub(super) fn refuse_unknown_names() {
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
        let known: Vec<String> =
            INT_SETTINGS.iter().map(|s| s.name).chain(STRING_SETTINGS.iter().map(|s| s.name)).map(|n| n.to_string_lossy().into_owned()).collect();
        ErrorReport::new(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("unrecognized configuration parameter \"{name}\""), "pg_idgen::settings")
            .set_detail(format!("pg_idgen's settings are {}.", known.join(", ")))
            .set_hint(format!("Correct the name in {source} and start the server again."))
            .report(PgLogLevel::FATAL);
    }
}

/// Where a setting's value was read: the configuration file and line (`ALTER SYSTEM` writes
/// postgresql.auto.conf), or "postgresql.conf" when PostgreSQL did not note it.
pub(super) fn source_of(name: &CStr) -> String {
    // SAFETY: as in refuse_unknown_names; the strings are the GUC machinery's, copied before use.
    let found =
        unsafe {
            guc_variables().iter().map(|&v| &*v).find(|v| CStr::from_ptr(v.name).to_bytes().eq_ignore_ascii_case(name.to_bytes())).and_then(|v| {
                (!v.sourcefile.is_null()).then(|| format!("{} (line {})", CStr::from_ptr(v.sourcefile).to_string_lossy(), v.sourceline))
            })
        };
    found.unwrap_or_else(|| "postgresql.conf".into())
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

pub(super) fn raw_setting(name: &CStr) -> Option<String> {
    // SAFETY: GetConfigOption returns NULL or a C string owned by the GUC machinery.
    let value = unsafe { pg_sys::GetConfigOption(name.as_ptr(), true, false) };
    // SAFETY: non-null, so a C string of the GUC machinery's, read before anything can change it.
    (!value.is_null()).then(|| unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned())
}

/// The epoch as an absolute instant (Unix µs). Without a UTC offset it is read as UTC, and dates
/// are read year first (ISO), whatever the session's `timezone` and `DateStyle`: `ALTER SYSTEM`
/// must read the text as the next start will, and time zero must not move when those settings
/// change. Words that name a moment relative to now ("now", "today", …) are refused: the
/// postmaster has no "now" that would mean anything to the next start.
pub(super) fn parse_epoch(text: &str) -> Result<i64, String> {
    parse::refuse_relative_time(text)?;
    let parsed = with_fixed_date_rules(|| PgTryBuilder::new(|| text.parse::<TimestampWithTimeZone>().ok()).catch_others(|_| None).execute());
    let unix_us = match parsed {
        Some(ts) if ts.is_finite() => crate::clock::pg_to_unix_micros(ts.into_inner()),
        _ => return Err("It must be a finite timestamp with time zone.".into()),
    };
    parse::refuse_future_epoch(unix_us, crate::clock::wall_unix_micros())
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
