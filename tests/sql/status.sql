-- pg_idgen_status(): configuration and state of the generators.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

SELECT node_id, layout, time_unit, epoch, time_bits_end, ids_per_second_cap
  FROM pg_idgen_status();

SELECT snowflake_next() AS id \gset
SELECT last_id >= :id AS last_id_is_current,
       ahead_of_clock >= interval '0' AS ahead_of_clock_not_negative,
       clock_backward_events,
       largest_clock_backward
  FROM pg_idgen_status();
