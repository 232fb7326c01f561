-- Hand-written objects that pgrx cannot derive. They are plain C functions (src/c_function.rs).

------------------------------------------------------------------------------------------------
-- The objectid type: MongoDB ObjectId, 12 bytes at fixed length (not a varlena).
------------------------------------------------------------------------------------------------
CREATE TYPE objectid;

CREATE FUNCTION objectid_in(cstring) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION objectid_out(objectid) RETURNS cstring
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION objectid_recv(internal) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION objectid_send(objectid) RETURNS bytea
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE objectid (
    INPUT = objectid_in,
    OUTPUT = objectid_out,
    RECEIVE = objectid_recv,
    SEND = objectid_send,
    INTERNALLENGTH = 12,
    ALIGNMENT = char,
    STORAGE = plain
);

-- Casts: to and from bytea (exactly 12 bytes) and text (24 hex digits).
CREATE FUNCTION objectid(bytea) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_from_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bytea(objectid) RETURNS bytea
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_to_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE CAST (bytea AS objectid) WITH FUNCTION objectid(bytea);
CREATE CAST (objectid AS bytea) WITH FUNCTION bytea(objectid);
CREATE CAST (text AS objectid) WITH INOUT;
CREATE CAST (objectid AS text) WITH INOUT AS ASSIGNMENT;

-- Comparison: byte order, which is time order.
CREATE FUNCTION objectid_cmp(objectid, objectid) RETURNS int
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_cmp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION objectid_eq(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_eq' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION objectid_ne(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_ne' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION objectid_lt(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_lt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION objectid_le(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_le' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION objectid_gt(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_gt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION objectid_ge(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_ge' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION objectid_hash(objectid) RETURNS int
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_hash' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION objectid_hash_extended(objectid, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_hash_extended' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR = (LEFTARG = objectid, RIGHTARG = objectid, FUNCTION = objectid_eq,
    COMMUTATOR = =, NEGATOR = <>, RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = objectid, RIGHTARG = objectid, FUNCTION = objectid_ne,
    COMMUTATOR = <>, NEGATOR = =, RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = objectid, RIGHTARG = objectid, FUNCTION = objectid_lt,
    COMMUTATOR = >, NEGATOR = >=, RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = objectid, RIGHTARG = objectid, FUNCTION = objectid_le,
    COMMUTATOR = >=, NEGATOR = >, RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = objectid, RIGHTARG = objectid, FUNCTION = objectid_gt,
    COMMUTATOR = <, NEGATOR = <=, RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = objectid, RIGHTARG = objectid, FUNCTION = objectid_ge,
    COMMUTATOR = <=, NEGATOR = <, RESTRICT = scalargesel, JOIN = scalargejoinsel);

CREATE OPERATOR CLASS objectid_ops DEFAULT FOR TYPE objectid USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 objectid_cmp(objectid, objectid);
CREATE OPERATOR CLASS objectid_hash_ops DEFAULT FOR TYPE objectid USING hash AS
    OPERATOR 1 =,
    FUNCTION 1 objectid_hash(objectid),
    FUNCTION 2 objectid_hash_extended(objectid, bigint);

------------------------------------------------------------------------------------------------
-- Generators and decoders that use objectid or return rows.
------------------------------------------------------------------------------------------------
CREATE FUNCTION objectid_gen() RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_gen' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION objectid_advance_past(id objectid) RETURNS void
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_advance_past' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION objectid_timestamp(objectid) RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION objectid_min(timestamptz) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_min' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION id_decode(id bigint,
                          OUT ts timestamptz, OUT node_id int, OUT sequence int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_decode_snowflake'
    LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION id_decode(id objectid,
                          OUT ts timestamptz, OUT random bytea, OUT counter int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_decode_objectid'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION id_decode(id uuid,
                          OUT ts timestamptz, OUT version int, OUT sequence int)
    RETURNS record
    AS 'MODULE_PATHNAME', 'pg_idgen_decode_uuid'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

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

------------------------------------------------------------------------------------------------
-- Segment tags: one row per tag. max_id is the last number of the last range allocated; the
-- worker moves it forward in its own transactions. pg_dump carries the rows.
------------------------------------------------------------------------------------------------
CREATE TABLE segment_tag (
    tag         text PRIMARY KEY CHECK (octet_length(tag) BETWEEN 1 AND 63),
    max_id      bigint NOT NULL CHECK (max_id >= 0),
    step        int NOT NULL CHECK (step > 0),
    description text,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('segment_tag', '');

-- Whatever removes or rewrites rows retires the cached ranges of their tags, and max_id never
-- moves back (src/segment_table.rs). Why ENABLE ALWAYS: with session_replication_role = replica
-- (logical replication's apply worker, some restore tools) ordinary triggers do not fire.
CREATE FUNCTION pg_idgen_segment_tag_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'pg_idgen_segment_tag_changed' LANGUAGE C;
CREATE TRIGGER segment_tag_changed AFTER UPDATE OR DELETE ON segment_tag
    FOR EACH ROW EXECUTE FUNCTION pg_idgen_segment_tag_changed();
CREATE TRIGGER segment_tag_truncated AFTER TRUNCATE ON segment_tag
    FOR EACH STATEMENT EXECUTE FUNCTION pg_idgen_segment_tag_changed();
ALTER TABLE segment_tag ENABLE ALWAYS TRIGGER segment_tag_changed;
ALTER TABLE segment_tag ENABLE ALWAYS TRIGGER segment_tag_truncated;
