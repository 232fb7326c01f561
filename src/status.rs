//! `pg_idgen_status()`: what the generators are configured as and where they stand.

use std::sync::atomic::Ordering::Relaxed;

use pgrx::datum::Interval;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::clock;
use crate::c_function::{self, c_functions};
use crate::{mark, settings, shmem, snowflake};

c_functions! {
    /// `pg_idgen_status()`, one row; its columns are declared in `sql/`.
    fn pg_idgen_status / pg_finfo_pg_idgen_status (fcinfo) {
        status_row(fcinfo)
    }
}

/// # Safety
/// `fcinfo` is the call of `pg_idgen_status()`, declared with the seventeen OUT columns built here.
unsafe fn status_row(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let state = shmem::shared();
    let config = settings::config();
    let layout = &config.layout;
    let now_us = clock::wall_unix_micros();

    // Only an id handed out since the start: the state below the floor was never one.
    let last = snowflake::generator(layout).last_handed_out(state);
    let last_id = last.zip(config.node_id).map(|(last, node_id)| snowflake::id_of_state(layout, last, node_id));
    // How far ids are ahead of the wall clock: the generators' clock, or the newest id if later.
    let ahead_us = (state.generator_clock.now_us().max(mark::newest_id_us(state, config)) - now_us).max(0);
    let steps = &state.clock_steps;
    let advanced_at_us = state.mark.advanced_at_us.load(Relaxed);

    let values = [
        config.node_id.map(|n| n as i32).into_datum(),
        format!("{} {}/{}/{}", layout.preset.name(), layout.time_bits, layout.node_bits, layout.sequence_bits).into_datum(),
        Interval::from_micros(layout.unit_us()).into_datum(),
        clock::unix_micros_to_timestamptz(layout.epoch_us).into_datum(),
        clock::unix_micros_to_timestamptz(layout.clock().end_us()).into_datum(),
        (layout.ids_per_second_cap() as i64).into_datum(),
        last_id.into_datum(),
        config.clock_step_policy.name().into_datum(),
        Interval::from_micros(ahead_us).into_datum(),
        (steps.backward_count.load(Relaxed) as i64).into_datum(),
        Interval::from_micros(steps.backward_max_us.load(Relaxed) as i64).into_datum(),
        (steps.forward_count.load(Relaxed) as i64).into_datum(),
        Interval::from_micros(steps.forward_max_us.load(Relaxed) as i64).into_datum(),
        clock::unix_micros_to_timestamptz(state.mark.latest_durable_us()).into_datum(),
        Interval::from_micros(config.clock_reserve_ms as i64 * 1000).into_datum(),
        (advanced_at_us != 0).then(|| clock::unix_micros_to_timestamptz(advanced_at_us)).into_datum(),
        Some(state.clock_worker_pid.load(Relaxed)).filter(|&pid| pid != 0).into_datum(),
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
