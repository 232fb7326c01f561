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
COMMENT ON TABLE segment_tag IS
    'Segment tags: max_id is the last number of the last range the pg_idgen worker allocated; step is the smallest range.';

-- Whatever removes or rewrites rows retires the cached ranges of their tags, and max_id never
-- moves back (src/segment/table.rs). Why ENABLE ALWAYS: with session_replication_role = replica
-- (logical replication's apply worker, some restore tools) ordinary triggers do not fire.
CREATE FUNCTION pg_idgen_segment_tag_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'pg_idgen_segment_tag_changed' LANGUAGE C;
COMMENT ON FUNCTION pg_idgen_segment_tag_changed() IS
    'Trigger on segment_tag: retires the cached ranges of tags whose rows changed or went; refuses to move max_id back.';
REVOKE EXECUTE ON FUNCTION pg_idgen_segment_tag_changed() FROM PUBLIC;
CREATE TRIGGER segment_tag_changed AFTER UPDATE OR DELETE ON segment_tag
    FOR EACH ROW EXECUTE FUNCTION pg_idgen_segment_tag_changed();
CREATE TRIGGER segment_tag_truncated AFTER TRUNCATE ON segment_tag
    FOR EACH STATEMENT EXECUTE FUNCTION pg_idgen_segment_tag_changed();
ALTER TABLE segment_tag ENABLE ALWAYS TRIGGER segment_tag_changed;
ALTER TABLE segment_tag ENABLE ALWAYS TRIGGER segment_tag_truncated;
