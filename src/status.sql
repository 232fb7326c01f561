-- pg_idgen_status() returns a row whose columns the library fills by name (src/c_function.rs):
-- the declaration of an older version keeps working with a newer library.
CREATE FUNCTION pg_idgen_status(
        OUT node_id int,
        OUT layout text,
        OUT time_unit interval,
        OUT epoch timestamptz,
        OUT time_bits_end timestamptz,
        OUT ids_per_second_cap bigint,
        OUT last_id bigint,
        OUT clock_step_policy text,
        OUT ahead_of_clock interval,
        OUT clock_backward_events bigint,
        OUT largest_clock_backward interval,
        OUT clock_forward_events bigint,
        OUT largest_clock_forward interval,
        OUT high_water_mark timestamptz,
        OUT clock_reserve interval,
        OUT mark_advanced_at timestamptz,
        OUT clock_worker_pid int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_status'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION pg_idgen_status() IS
    'Node id, layout, epoch, end of the time bits, last id, clock step policy, lead of the ids over the wall clock, wall-clock steps seen, persisted high-water mark.';
COMMENT ON FUNCTION pg_idgen_generators() IS
    'One row per time-based id family: time unit, end of its time, ids/s cap, time of the last id made, floor, persisted high-water mark.';
