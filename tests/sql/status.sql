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

-- Clock safety: the policy, the wall-clock steps seen (none here), and the persisted high-water
-- mark, which the clock worker keeps ahead of the ids in use by at most the reserve.
SELECT clock_step_policy, clock_reserve, clock_backward_events, largest_clock_backward,
       clock_forward_events, largest_clock_forward
  FROM pg_idgen_status();
SELECT high_water_mark > clock_timestamp() AS mark_ahead_of_now,
       high_water_mark <= clock_timestamp() + clock_reserve AS mark_within_reserve,
       mark_advanced_at <= clock_timestamp() AS mark_advanced,
       clock_worker_pid IS NOT NULL AS clock_worker_runs
  FROM pg_idgen_status();

-- One row per time-based family. last_made is the time of its last id since the start (NULL
-- before the first); the floor and the high-water mark bound every id it hands out.
SELECT family, time_unit, time_end, ids_per_second_cap FROM pg_idgen_generators() ORDER BY family;
-- A family is named as its functions are: family || '_next()' is its generator.
SELECT family, to_regprocedure(family || '_next()') IS NOT NULL AS its_generator_exists
  FROM pg_idgen_generators() ORDER BY family;
SELECT objectid_next() IS NOT NULL AS made, uuid_v7_next() IS NOT NULL AS made_too;
SELECT family,
       last_made <= clock_timestamp() AS last_made_not_ahead,
       floor <= last_made AS floor_at_or_below_last,
       high_water_mark > last_made AS mark_ahead_of_last
  FROM pg_idgen_generators() ORDER BY family;
