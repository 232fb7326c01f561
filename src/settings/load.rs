//! Reading the settings into the `Config` (`parse::config_from` checks and combines them), and
//! reporting an invalid one: FATAL at server start, ERROR in a backend of a server that did not
//! preload the library.

use std::ffi::{CStr, CString};

use pgrx::guc::{GucFlags, GucSetting};
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
        seq_sections: text(&SEQ_SECTIONS),
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
        seq_lease_ttl_ms: SEQ_LEASE_TTL.get(),
        seq_lease_margin_ms: SEQ_LEASE_MARGIN.get(),
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

/// The raw text of every setting that postgresql.conf (or the command line) gave, before the
/// settings are defined. Why: for a custom setting set before the library loaded, PostgreSQL only
/// WARNs about a value its check refuses and keeps the default; a mistyped node id must stop the
/// server instead, so `refuse_invalid_texts` checks these.
pub(super) struct RawTexts {
    ints: Vec<Option<String>>,
    strings: Vec<Option<String>>,
}

pub(super) fn raw_texts() -> RawTexts {
    RawTexts {
        ints: INT_SETTINGS.iter().map(|s| raw_setting(s.name)).collect(),
        strings: STRING_SETTINGS.iter().map(|s| raw_setting(s.name)).collect(),
    }
}

/// Stops the server (FATAL) at the first raw text a setting's check refuses.
pub(super) fn refuse_invalid_texts(raw: &RawTexts) {
    for (s, raw) in INT_SETTINGS.iter().zip(&raw.ints) {
        if let Some(Err(detail)) = raw.as_deref().map(|raw| check_int_text(s, raw)) {
            invalid(PgLogLevel::FATAL, s.name, raw.as_deref().unwrap_or_default(), &detail);
        }
    }
    for (s, raw) in STRING_SETTINGS.iter().zip(&raw.strings) {
        if let Some(Err(detail)) = raw.as_deref().map(s.check) {
            // A connection string may hold a password: the message does not repeat it.
            let shown = if s.flags.contains(GucFlags::SUPERUSER_ONLY) { "…" } else { raw.as_deref().unwrap_or_default() };
            invalid(PgLogLevel::FATAL, s.name, shown, &detail);
        }
    }
}

/// A string setting's text, trimmed.
fn text(setting: &GucSetting<Option<CString>>) -> String {
    setting.get().map(|s| s.to_string_lossy().trim().to_string()).unwrap_or_default()
}

/// Reports an invalid setting at `level` (FATAL at server start, ERROR later), with a hint that
/// names the file the value came from.
pub(super) fn invalid(level: PgLogLevel, name: &CStr, value: &str, detail: &str) -> ! {
    let hint = format!("Correct {} in {} and start the server again.", name.to_string_lossy(), source_of(name));
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
