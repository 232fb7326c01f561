-- Functions that return one row with named columns. They are plain C functions (see
-- src/record.rs) so that a NULL id gives a NULL row instead of dropping the row.

CREATE FUNCTION id_decode(id bigint,
                          OUT ts timestamptz, OUT node_id int, OUT sequence int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_decode_snowflake'
    LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION pg_idgen_status(
        OUT node_id int,
        OUT layout text,
        OUT time_unit interval,
        OUT epoch timestamptz,
        OUT time_bits_end timestamptz,
        OUT ids_per_second_cap bigint,
        OUT last_id bigint,
        OUT ahead_of_clock interval,
        OUT clock_backward_events bigint,
        OUT largest_clock_backward interval)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_status'
    LANGUAGE C VOLATILE PARALLEL SAFE;
