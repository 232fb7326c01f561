------------------------------------------------------------------------------------------------
-- Per-key sequences: one row per space (its step and section size), one row per section with
-- the persisted maximum of its keys. The worker raises max_seq in its own transactions; pg_dump
-- carries the rows.
------------------------------------------------------------------------------------------------
CREATE SEQUENCE seq_space_id AS int;
CREATE TABLE seq_space (
    space        text PRIMARY KEY CHECK (octet_length(space) BETWEEN 1 AND 63),
    id           int NOT NULL UNIQUE DEFAULT nextval('seq_space_id'),
    step         int NOT NULL CHECK (step > 0),
    section_keys int NOT NULL CHECK (section_keys BETWEEN 1 AND 256),
    description  text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
ALTER SEQUENCE seq_space_id OWNED BY seq_space.id;
CREATE TABLE seq_section (
    space      text NOT NULL,
    section    bigint NOT NULL,
    max_seq    bigint NOT NULL CHECK (max_seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, section)
);
SELECT pg_catalog.pg_extension_config_dump('seq_space', '');
SELECT pg_catalog.pg_extension_config_dump('seq_space_id', '');
SELECT pg_catalog.pg_extension_config_dump('seq_section', '');
COMMENT ON TABLE seq_space IS
    'Per-key sequence spaces: step is how far the worker raises a section at least; section_keys how many neighbouring keys share a section.';
COMMENT ON TABLE seq_section IS
    'Sections of per-key sequences: max_seq is at least every number handed out for the section''s keys; the pg_idgen worker raises it.';

-- Whatever changes or removes rows retires the cached sections of the database; a change that
-- would hand numbers out again (max_seq moved back, a space's keys mapped anew, rows deleted
-- outside seq_space_drop()) is refused. ENABLE ALWAYS: as for segment_tag.
CREATE FUNCTION pg_idgen_seq_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'pg_idgen_seq_changed' LANGUAGE C;
COMMENT ON FUNCTION pg_idgen_seq_changed() IS
    'Trigger on seq_space and seq_section: retires cached sections whose rows changed; refuses changes that would repeat numbers.';
REVOKE EXECUTE ON FUNCTION pg_idgen_seq_changed() FROM PUBLIC;
CREATE TRIGGER seq_space_changed AFTER UPDATE OR DELETE ON seq_space
    FOR EACH ROW EXECUTE FUNCTION pg_idgen_seq_changed();
CREATE TRIGGER seq_space_truncated BEFORE TRUNCATE ON seq_space
    FOR EACH STATEMENT EXECUTE FUNCTION pg_idgen_seq_changed();
CREATE TRIGGER seq_section_changed AFTER UPDATE OR DELETE ON seq_section
    FOR EACH ROW EXECUTE FUNCTION pg_idgen_seq_changed();
CREATE TRIGGER seq_section_truncated BEFORE TRUNCATE ON seq_section
    FOR EACH STATEMENT EXECUTE FUNCTION pg_idgen_seq_changed();
ALTER TABLE seq_space ENABLE ALWAYS TRIGGER seq_space_changed;
ALTER TABLE seq_space ENABLE ALWAYS TRIGGER seq_space_truncated;
ALTER TABLE seq_section ENABLE ALWAYS TRIGGER seq_section_changed;
ALTER TABLE seq_section ENABLE ALWAYS TRIGGER seq_section_truncated;
