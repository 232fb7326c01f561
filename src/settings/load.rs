//! Reading the settings into the `Config` (`parse::config_from` checks and combines them), and
//! reporting an invalid one: FATAL at server start, ERROR in a backend of a server that did not
//! preload the library.

use std::ffi::{CStr, CString};

use pgrx::datum::TimestampWithTimeZone;
use pgrx::guc::GucSetting;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use super::declared::*;
use super::parse::{self, node_id_text, Config, Raw};

/// The configuration the settings make, or a report at `level` that names the first invalid one.
pub(super) fn load(level: PgLogLevel) -> Config {
    let epoch = text(&EPOCH);
    let raw = Raw {
        layout: text(&LAYOUT),
        time_bits: TIME_BITS.get(),
        node_bits: NODE_BITS.get(),
        sequence_bits: SEQUENCE_BITS.get(),
        time_unit_ms: TIME_UNIT.get(),
        epoch_us: parse_epoch(&epoch),
        epoch,
        node_id: text(&NODE_ID),
        database: text(&DATABASE),
        clock_step_policy: text(&CLOCK_STEP_POLICY),
        node_registry: text(&NODE_REGISTRY),
        segment_authority: text(&SEGMENT_AUTHORITY),
        max_clock_borrow_ms: MAX_CLOCK_BORROW.get(),
        max_clock_wait_ms: MAX_CLOCK_WAIT.get(),
        clock_reserve_ms: CLOCK_RESERVE.get(),
        clock_forward_delay_ms: CLOCK_FORWARD_DELAY.get(),
        max_tags: MAX_TAGS.get(),
        seq_cache_sections: SEQ_CACHE_SECTIONS.get(),
        segment_wait_timeout_ms: SEGMENT_WAIT_TIMEOUT.get(),
        segment_prefetch_percent: SEGMENT_PREFETCH_PERCENT.get(),
        segment_max_step: SEGMENT_MAX_STEP.get(),
        segment_fast_range_ms: SEGMENT_FAST_RANGE.get(),
        segment_slow_range_ms: SEGMENT_SLOW_RANGE.get(),
        node_lease_ttl_ms: NODE_LEASE_TTL.get(),
        node_lease_margin_ms: NODE_LEASE_MARGIN.get(),
        node_lease_max_lead_ms: NODE_LEASE_MAX_LEAD.get(),
        remote_timeout_ms: REMOTE_TIMEOUT.get(),
    };
    parse::config_from(&raw, crate::clock::wall_unix_micros()).unwrap_or_else(|invalid| {
        let name = CString::new(invalid.name).expect("a setting's name");
        match invalid.hint {
            Some(hint) => invalid_with_hint(level, &name, &invalid.value, &invalid.detail, hint),
            None => self::invalid(level, &name, &invalid.value, &invalid.detail),
        }
    })
}

/// A string setting's text, trimmed.
fn text(setting: &GucSetting<Option<CString>>) -> String {
    setting.get().map(|s| s.to_string_lossy().trim().to_string()).unwrap_or_default()
}

/// Reports an invalid setting at `level` (FATAL at server start, ERROR later).
pub(super) fn invalid(level: PgLogLevel, name: &CStr, value: &str, detail: &str) -> ! {
    let hint = format!("Correct {} in postgresql.conf and start the server again.", name.to_string_lossy());
    invalid_with_hint(level, name, value, detail, &hint)
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

/// The server log's line about the configuration it started with.
pub(super) fn log_start_line(config: &Config) {
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
