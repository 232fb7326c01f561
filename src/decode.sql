-- Decoders declared by hand: they return rows or take an objectid (src/decode.rs), and the
-- comments of the decoders pgrx declares.
CREATE FUNCTION objectid_timestamp(id objectid) RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_timestamp(objectid) IS
    'The second an ObjectId was made.';
CREATE FUNCTION objectid_min(ts timestamptz) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_min' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_min(timestamptz) IS
    'Smallest ObjectId of the second of a time, for WHERE id >= objectid_min(...) range scans.';
CREATE FUNCTION id_decode(id bigint,
                          OUT ts timestamptz, OUT node_id int, OUT sequence int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_decode_snowflake'
    LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION id_decode(bigint) IS
    'Takes a snowflake id apart: ts (start of its time tick), node_id, sequence.';
CREATE FUNCTION id_decode(id objectid,
                          OUT ts timestamptz, OUT random bytea, OUT counter int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_decode_objectid'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION id_decode(objectid) IS
    'Takes an ObjectId apart: ts (its second), random (5 bytes), counter.';
CREATE FUNCTION id_decode(id uuid,
                          OUT ts timestamptz, OUT version int, OUT sequence int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_decode_uuid'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION id_decode(uuid) IS
    'Takes a UUID apart: ts (versions 1, 6, 7; NULL for others), version, sequence (v7 counter, v1/v6 clock sequence).';
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
    'The time a snowflake id was made, to the precision of the layout''s time unit.';
-- snowflake_min() is the name of the family grammar (<family>_min); snowflake_min_id(), its name
-- before version 0.4.0, stays for the queries that use it.
CREATE FUNCTION snowflake_min(ts timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'snowflake_min_id_wrapper' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowflake_min(timestamptz) IS
    'Smallest snowflake id made at or after a time, for WHERE id >= snowflake_min(...) range scans.';
COMMENT ON FUNCTION snowflake_min_id(timestamptz) IS
    'The same as snowflake_min(), under its name before version 0.4.0.';
COMMENT ON FUNCTION uuid_v7_min(timestamptz) IS
    'Smallest UUIDv7 of the millisecond of a time, for WHERE id >= uuid_v7_min(...) range scans.';
COMMENT ON FUNCTION uuid_v7_timestamp(uuid) IS
    'The millisecond a UUIDv7 was made.';
COMMENT ON FUNCTION snowflake_timestamp(bigint, timestamptz, int, int, int) IS
    'The time of a snowflake id under the layout given (epoch, time unit in ms, node bits, sequence bits): IMMUTABLE, for indexes, generated columns and partition keys.';
COMMENT ON FUNCTION snowflake_min(timestamptz, timestamptz, int, int, int) IS
    'Smallest snowflake id made at or after a time under the layout given (epoch, time unit in ms, node bits, sequence bits): IMMUTABLE, for partition bounds.';
