//! `pg_idgen_status()`: what the generators are configured as and where they stand.

use std::sync::atomic::Ordering::Relaxed;

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::c_function::{self, c_functions, column};
use crate::clock;
use crate::engine::{generators, Generator};
use crate::families::{self, SNOWFLAKE};
use crate::{mark, settings, snowflake};

// pg_idgen_status()'s declaration (a row filled by column name), and both functions' comments.
pgrx::extension_sql_file!("status.sql", name = "status", requires = [pg_idgen_generators]);

c_functions! {
    /// `pg_idgen_status()`, one row; its columns are declared in `status.sql`.
    fn pg_idgen_status / pg_finfo_pg_idgen_status (fcinfo) {
        status_row(fcinfo)
    }
}

/// # Safety
/// `fcinfo` is the call of `pg_idgen_status()`, declared with OUT columns named and typed as here.
unsafe fn status_row(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let state = generators();
    let (marks, watch) = (mark::marks(), crate::clock::WATCH.get());
    let config = settings::config();
    let layout = &config.layout;
    let now_us = clock::wall_unix_micros();

    // Only an id handed out since the start: the state below the floor was never one.
    let last = Generator::of(&SNOWFLAKE, config).last_handed_out(state);
    let node_id = crate::node::current_node_id(config);
    let last_id = last.zip(node_id).map(|(last, node_id)| snowflake::id_of_stamp(layout, last, node_id));
    // How far ids are ahead of the wall clock: the generators' clock, or the newest id if later.
    let ahead_us = (state.clock.now_us().max(mark::newest_id_us(config)) - now_us).max(0);
    let steps = &watch.steps;
    let advanced_at_us = marks.advanced_at_us.load(Relaxed);

    let columns = [
        column("node_id", node_id.map(|n| n as i32)),
        column("layout", format!("{} {}/{}/{}", layout.preset.name(), layout.time_bits, layout.node_bits, layout.sequence_bits)),
        column("time_unit", Interval::from_micros(layout.unit_us())),
        column("epoch", clock::unix_micros_to_timestamptz(layout.epoch_us)),
        column("time_bits_end", clock::unix_micros_to_timestamptz(layout.clock().end_us())),
        column("ids_per_second_cap", layout.ids_per_second_cap() as i64),
        column("last_id", last_id),
        column("clock_step_policy", config.clock_step_policy.name()),
        column("ahead_of_clock", Interval::from_micros(ahead_us)),
        column("clock_backward_events", steps.backward_count.load(Relaxed) as i64),
        column("largest_clock_backward", Interval::from_micros(steps.backward_max_us.load(Relaxed) as i64)),
        column("clock_forward_events", steps.forward_count.load(Relaxed) as i64),
        column("largest_clock_forward", Interval::from_micros(steps.forward_max_us.load(Relaxed) as i64)),
        column("high_water_mark", clock::unix_micros_to_timestamptz(marks.latest_durable_us())),
        column("clock_reserve", Interval::from_micros(config.clock_reserve_ms as i64 * 1000)),
        column("mark_advanced_at", (advanced_at_us != 0).then(|| clock::unix_micros_to_timestamptz(advanced_at_us))),
        column("clock_worker_pid", Some(watch.worker_pid.load(Relaxed)).filter(|&pid| pid != 0)),
    ];
    // SAFETY: the call's own fcinfo; each column's datum is of its type.
    unsafe { c_function::return_row(fcinfo, &columns) }
}

#[pg_extern(volatile, parallel_safe)]
/// One row per time-based family (`families::FAMILIES`): its clock, its capacity, the time of
/// its last value handed out since the start (NULL before the first), its floor and its durable
/// high-water mark. A new family adds a row.
// Why allowed: pgrx takes a set-returning function's column names from the `name!` in its
// signature, so its row type cannot be named apart.
#[allow(clippy::type_complexity)]
fn pg_idgen_generators() -> TableIterator<
    'static,
    (
        name!(family, String),
        name!(time_unit, Interval),
        name!(time_end, TimestampWithTimeZone),
        name!(ids_per_second_cap, i64),
        name!(last_made, Option<TimestampWithTimeZone>),
        name!(floor, TimestampWithTimeZone),
        name!(high_water_mark, TimestampWithTimeZone),
    ),
> {
    let state = generators();
    let config = settings::config();
    let rows = Generator::all(config).map(|generator| {
        let shape = &generator.shape;
        let floor = generator.cell(state).floor.load(Relaxed);
        (
            generator.family.sql_name.to_string(),
            Interval::from_micros(shape.clock.unit_us),
            clock::unix_micros_to_timestamptz(shape.clock.end_us()),
            shape.ids_per_second_cap() as i64,
            generator.last_handed_out(state).map(|last| clock::unix_micros_to_timestamptz(shape.start_us(last))),
            clock::unix_micros_to_timestamptz(shape.start_us(floor)),
            clock::unix_micros_to_timestamptz(mark::marks().durable_us[generator.family.index].load(Relaxed)),
        )
    });
    debug_assert_eq!(rows.len(), families::COUNT);
    TableIterator::new(rows)
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    // The test cluster preloads pg_idgen with node id 7 and the default twitter layout (lib.rs).
    use pgrx::prelude::*;

    #[pg_test]
    fn status_reports_the_configuration() {
        let row = Spi::get_three::<i32, String, i64>("SELECT node_id, layout, ids_per_second_cap FROM pg_idgen_status()").unwrap();
        assert_eq!(row, (Some(7), Some("twitter 41/10/12".to_string()), Some(4_096_000)));
    }
}
