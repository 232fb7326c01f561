-- pg_idgen 0.2.0 → 0.3.0: the segment cache follows its table (a trigger retires the cached ranges
-- of tags whose rows change or go, and max_id never moves back); advancing the time-based
-- generators past an id restored from another server; segment_drop(NULL) is an error rather than
-- NULL; who may call what (README, "Privileges").
\echo Use "ALTER EXTENSION pg_idgen UPDATE" to load this file. \quit

ALTER TABLE segment_tag ADD CONSTRAINT segment_tag_max_id_check CHECK (max_id >= 0);

CREATE FUNCTION pg_idgen_segment_tag_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'pg_idgen_segment_tag_changed' LANGUAGE C;
CREATE TRIGGER segment_tag_changed AFTER UPDATE OR DELETE ON segment_tag
    FOR EACH ROW EXECUTE FUNCTION pg_idgen_segment_tag_changed();
CREATE TRIGGER segment_tag_truncated AFTER TRUNCATE ON segment_tag
    FOR EACH STATEMENT EXECUTE FUNCTION pg_idgen_segment_tag_changed();
ALTER TABLE segment_tag ENABLE ALWAYS TRIGGER segment_tag_changed;
ALTER TABLE segment_tag ENABLE ALWAYS TRIGGER segment_tag_truncated;

CREATE FUNCTION objectid_advance_past(id objectid) RETURNS void
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_advance_past' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION "snowflake_advance_past"("id" bigint) RETURNS void
    STRICT VOLATILE LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_advance_past_wrapper';
CREATE FUNCTION "uuid_v7_advance_past"("id" uuid) RETURNS void
    STRICT VOLATILE LANGUAGE c AS 'MODULE_PATHNAME', 'uuid_v7_advance_past_wrapper';

ALTER FUNCTION segment_drop(text) CALLED ON NULL INPUT;

COMMENT ON FUNCTION snowflake_advance_past(bigint) IS
    'Makes every snowflake id this server hands out from now on greater than the given id, durably (like setval after a restore).';
COMMENT ON FUNCTION objectid_advance_past(objectid) IS
    'Makes every ObjectId this server makes from now on greater than the given one, durably (after a restore from another server).';
COMMENT ON FUNCTION uuid_v7_advance_past(uuid) IS
    'Makes every UUIDv7 this server makes from now on greater than the given one, durably (after a restore from another server).';
COMMENT ON FUNCTION pg_idgen_segment_tag_changed() IS
    'Trigger on segment_tag: retires the cached ranges of tags whose rows changed or went; refuses to move max_id back.';

REVOKE EXECUTE ON FUNCTION snowflake_advance_past(bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION uuid_v7_advance_past(uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION objectid_advance_past(objectid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_idgen_segment_tag_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_status() TO pg_monitor;
