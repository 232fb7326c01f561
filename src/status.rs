//! `pg_idgen_status()`: what the generators are configured as and where they stand.

use std::sync::atomic::Ordering::Relaxed;

use pgrx::datum::Interval;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::clock;
use crate::layout::Parts;
use crate::c_function::{self, c_functions};
use crate::{settings, shmem};

c_functions! {
    /// `pg_idgen_status()`, one row; its columns are declared in `sql/`.
    fn pg_idgen_status / pg_finfo_pg_idgen_status (fcinfo) {
        status_row(fcinfo)
    }
}

/// # Safety
/// `fcinfo` is the call of `pg_idgen_status()`, declared with the ten OUT columns built here.
unsafe fn status_row(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let state = shmem::shared();
    let config = settings::config();
    let layout = &config.layout;
    let now_us = clock::wall_unix_micros();

    let slot = state.snowflake_last.load(Relaxed);
    let last_tick = slot >> layout.sequence_bits;
    let last_id = match (slot, config.node_id) {
        (0, _) | (_, None) => None,
        (_, Some(node_id)) => {
            Some(layout.compose(Parts { tick: last_tick, node_id: node_id as u64, sequence: slot & layout.max_sequence() }))
        }
    };
    let ahead_us = if slot == 0 { 0 } else { (layout.clock().tick_start_us(last_tick) - now_us).max(0) };

    let values = [
        config.node_id.map(|n| n as i32).into_datum(),
        format!("{} {}/{}/{}", layout.preset.name(), layout.time_bits, layout.node_bits, layout.sequence_bits).into_datum(),
        Interval::from_micros(layout.unit_us()).into_datum(),
        clock::unix_micros_to_timestamptz(layout.epoch_us).into_datum(),
        clock::unix_micros_to_timestamptz(layout.clock().end_us()).into_datum(),
        (layout.ids_per_second_cap() as i64).into_datum(),
        last_id.into_datum(),
        Interval::from_micros(ahead_us).into_datum(),
        (state.clock_backward_events.load(Relaxed) as i64).into_datum(),
        Interval::from_micros(state.clock_backward_max_us.load(Relaxed) as i64).into_datum(),
    ];
    unsafe { c_function::return_row(fcinfo, &values) }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    // The test cluster preloads pg_idgen with node id 7 and the default twitter layout (lib.rs).
    use pgrx::prelude::*;

    #[pg_test]
    fn status_reports_the_configuration() {
        let row = Spi::get_three::<i32, String, i64>(
            "SELECT node_id, layout, ids_per_second_cap FROM pg_idgen_status()",
        )
        .unwrap();
        assert_eq!(row, (Some(7), Some("twitter 41/10/12".to_string()), Some(4_096_000)));
    }
}
