COMMENT ON FUNCTION snowflake_next() IS
    'Next snowflake id (time | node | sequence) of this server: unique, greater than every id it handed out before.';
COMMENT ON FUNCTION id_decode(bigint) IS
    'Takes a snowflake id apart: ts (start of its time tick), node_id, sequence.';
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
    'The time a snowflake id was made, to the precision of the layout''s time unit.';
COMMENT ON FUNCTION snowflake_min_id(timestamptz) IS
    'Smallest snowflake id made at or after a time, for WHERE id >= snowflake_min_id(...) range scans.';
COMMENT ON FUNCTION pg_idgen_status() IS
    'Node id, layout, epoch, end of the time bits, last id, lead over the clock, clock steps backwards seen.';
