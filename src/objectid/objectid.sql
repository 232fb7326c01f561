-- The objectid type: MongoDB ObjectId, 12 bytes at fixed length (not a varlena), and its
-- generator. Plain C functions of mod.rs beside this file (see src/c_function.rs).
CREATE TYPE objectid;

CREATE FUNCTION objectid_in(cstring) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_in(cstring) IS 'objectid text input: 24 hexadecimal digits, either case.';
CREATE FUNCTION objectid_out(objectid) RETURNS cstring
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_out(objectid) IS 'objectid text output: 24 lowercase hexadecimal digits.';
CREATE FUNCTION objectid_recv(internal) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_recv(internal) IS 'objectid binary input: its 12 bytes.';
CREATE FUNCTION objectid_send(objectid) RETURNS bytea
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_send(objectid) IS 'objectid binary output: its 12 bytes.';

CREATE TYPE objectid (
    INPUT = objectid_in,
    OUTPUT = objectid_out,
    RECEIVE = objectid_recv,
    SEND = objectid_send,
    INTERNALLENGTH = 12,
    ALIGNMENT = char,
    STORAGE = plain
);
COMMENT ON TYPE objectid IS
    'MongoDB ObjectId: 4 bytes of Unix seconds, 5 random bytes, a 3-byte counter; 12 bytes, ordered by time.';

-- Casts: to and from bytea (exactly 12 bytes) and text (24 hex digits).
CREATE FUNCTION objectid(bytea) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_from_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid(bytea) IS 'Cast from bytea: exactly 12 bytes.';
CREATE FUNCTION bytea(objectid) RETURNS bytea
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_to_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bytea(objectid) IS 'Cast to bytea: the 12 bytes.';
CREATE CAST (bytea AS objectid) WITH FUNCTION objectid(bytea);
CREATE CAST (objectid AS bytea) WITH FUNCTION bytea(objectid);
CREATE CAST (text AS objectid) WITH INOUT;
CREATE CAST (objectid AS text) WITH INOUT AS ASSIGNMENT;

-- Comparison: byte order, which is time order.
CREATE FUNCTION objectid_cmp(objectid, objectid) RETURNS int
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_cmp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_cmp(objectid, objectid) IS 'Btree support: -1, 0 or 1 in byte (= time) order.';
CREATE FUNCTION objectid_eq(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_eq' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION objectid_eq(objectid, objectid) IS 'Implements objectid = objectid.';
CREATE FUNCTION objectid_ne(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_ne' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION objectid_ne(objectid, objectid) IS 'Implements objectid <> objectid.';
CREATE FUNCTION objectid_lt(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_lt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION objectid_lt(objectid, objectid) IS 'Implements objectid < objectid.';
CREATE FUNCTION objectid_le(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_le' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION objectid_le(objectid, objectid) IS 'Implements objectid <= objectid.';
CREATE FUNCTION objectid_gt(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_gt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION objectid_gt(objectid, objectid) IS 'Implements objectid > objectid.';
CREATE FUNCTION objectid_ge(objectid, objectid) RETURNS bool
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_ge' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION objectid_ge(objectid, objectid) IS 'Implements objectid >= objectid.';
CREATE FUNCTION objectid_hash(objectid) RETURNS int
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_hash' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_hash(objectid) IS 'Hash support: hash of the 12 bytes.';
CREATE FUNCTION objectid_hash_extended(objectid, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_hash_extended' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_hash_extended(objectid, bigint) IS 'Hash support with a seed (hash partitioning).';

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

-- Function 4, btequalimage: equal ObjectIds are equal bytes, so btree indexes may deduplicate.
CREATE OPERATOR CLASS objectid_ops DEFAULT FOR TYPE objectid USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 objectid_cmp(objectid, objectid),
    FUNCTION 4 btequalimage(oid);
CREATE OPERATOR CLASS objectid_hash_ops DEFAULT FOR TYPE objectid USING hash AS
    OPERATOR 1 =,
    FUNCTION 1 objectid_hash(objectid),
    FUNCTION 2 objectid_hash_extended(objectid, bigint);
-- BRIN, as uuid has: minmax suits ObjectIds made in time order (a table filled by objectid_next()),
-- bloom suits ObjectIds imported in any order (equality only).
CREATE OPERATOR CLASS objectid_minmax_ops DEFAULT FOR TYPE objectid USING brin AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 brin_minmax_opcinfo(internal),
    FUNCTION 2 brin_minmax_add_value(internal, internal, internal, internal),
    FUNCTION 3 brin_minmax_consistent(internal, internal, internal),
    FUNCTION 4 brin_minmax_union(internal, internal, internal);
CREATE OPERATOR CLASS objectid_bloom_ops FOR TYPE objectid USING brin AS
    OPERATOR 1 =,
    FUNCTION 1 brin_bloom_opcinfo(internal),
    FUNCTION 2 brin_bloom_add_value(internal, internal, internal, internal),
    FUNCTION 3 brin_bloom_consistent(internal, internal, internal, int),
    FUNCTION 4 brin_bloom_union(internal, internal, internal),
    FUNCTION 5 brin_bloom_options(internal),
    FUNCTION 11 objectid_hash(objectid);

-- min() and max(), as every ordered type has; SORTOP lets them read the end of a btree index.
CREATE FUNCTION objectid_larger(objectid, objectid) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_larger' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_larger(objectid, objectid) IS 'The larger of two ObjectIds (max() support).';
CREATE FUNCTION objectid_smaller(objectid, objectid) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_smaller' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION objectid_smaller(objectid, objectid) IS 'The smaller of two ObjectIds (min() support).';
CREATE AGGREGATE min(objectid) (SFUNC = objectid_smaller, STYPE = objectid,
    COMBINEFUNC = objectid_smaller, SORTOP = <, PARALLEL = SAFE);
COMMENT ON AGGREGATE min(objectid) IS 'The smallest (earliest) ObjectId.';
CREATE AGGREGATE max(objectid) (SFUNC = objectid_larger, STYPE = objectid,
    COMBINEFUNC = objectid_larger, SORTOP = >, PARALLEL = SAFE);
COMMENT ON AGGREGATE max(objectid) IS 'The largest (latest) ObjectId.';


-- The generator: objectid_next() is the name of the family grammar (<family>_next);
-- objectid_gen() stays for column defaults written before it.
CREATE FUNCTION objectid_next() RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_gen' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION objectid_next() IS
    'Next ObjectId (current BSON spec) of this server: unique, greater than every ObjectId it made before.';
CREATE FUNCTION objectid_gen() RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_gen' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION objectid_advance_past(id objectid) RETURNS void
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_advance_past' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION objectid_gen() IS
    'The same as objectid_next(), under its name before version 0.4.0.';
COMMENT ON FUNCTION objectid_advance_past(objectid) IS
    'Makes every ObjectId this server makes from now on greater than the given one, durably (after a restore from another server).';
-- Moving a generator's floor can push ids far ahead: superusers only, unless granted.
REVOKE EXECUTE ON FUNCTION objectid_advance_past(objectid) FROM PUBLIC;
