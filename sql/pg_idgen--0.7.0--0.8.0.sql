-- pg_idgen 0.7.0 -> 0.8.0: per-key sequences (seq_*), their tables and their trigger. A copy of
-- what src/seq/ declares: the upgrade test compares an updated database with a fresh install.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.8.0'" to load this file. \quit

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

CREATE  FUNCTION "seq_current"(
	"space" text, /* TextBytes */
	"key" bigint /* i64 */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_current_wrapper';

CREATE  FUNCTION "seq_current_text"(
	"space" text, /* TextBytes */
	"key" text /* TextBytes */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_current_text_wrapper';

CREATE  FUNCTION "seq_key"(
	"key" text /* TextBytes */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_key_wrapper';

CREATE  FUNCTION "seq_next"(
	"space" text, /* TextBytes */
	"key" bigint /* i64 */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_next_wrapper';

CREATE  FUNCTION "seq_next_text"(
	"space" text, /* TextBytes */
	"key" text /* TextBytes */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_next_text_wrapper';

CREATE  FUNCTION "seq_space_create"(
	"space" text, /* Option < TextBytes > */
	"step" INT DEFAULT 1000, /* Option < i32 > */
	"section_keys" INT DEFAULT 256, /* Option < i32 > */
	"description" text DEFAULT NULL /* Option < TextBytes > */
) RETURNS void
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_space_create_wrapper';

CREATE  FUNCTION "seq_space_drop"(
	"space" text /* Option < TextBytes > */
) RETURNS void
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_space_drop_wrapper';

CREATE  FUNCTION "seq_status"() RETURNS TABLE (
	"cache_sections" INT,  /* i32 */
	"cached_sections" INT,  /* i32 */
	"loading_sections" INT,  /* i32 */
	"numbers_served" bigint,  /* i64 */
	"loads" bigint,  /* i64 */
	"raises" bigint,  /* i64 */
	"evictions" bigint,  /* i64 */
	"waits" bigint,  /* i64 */
	"persisted_sections" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_status_wrapper';

CREATE FUNCTION seq_fill() RETURNS trigger
    AS 'MODULE_PATHNAME', 'seq_fill' LANGUAGE C;
COMMENT ON FUNCTION seq_fill() IS
    'Trigger: BEFORE INSERT FOR EACH ROW EXECUTE FUNCTION seq_fill(space, key_column, number_column) sets a NULL number column to seq_next(space, key).';
-- As seq_next(): only roles granted it may create such a trigger.
REVOKE EXECUTE ON FUNCTION seq_fill() FROM PUBLIC;

COMMENT ON FUNCTION seq_next(text, bigint) IS
    'Next number of a key in a space of per-key sequences: strictly above every number handed out for the key before; a new key starts at 1.';
COMMENT ON FUNCTION seq_next_text(text, text) IS
    'Next number of a text key (seq_key(key)) in a space of per-key sequences.';
COMMENT ON FUNCTION seq_current(text, bigint) IS
    'A number at least every number handed out for the key so far, and below its next one; no increment.';
COMMENT ON FUNCTION seq_current_text(text, text) IS
    'seq_current() of a text key (seq_key(key)).';
COMMENT ON FUNCTION seq_key(text) IS
    'The bigint key of a text key: FNV-1a 64 of its bytes, mixed by SplitMix64''s finaliser; stable across versions and servers.';
-- Each new section a call touches is a row the worker writes: only roles granted it may number.
REVOKE EXECUTE ON FUNCTION seq_next(text, bigint), seq_next_text(text, text), seq_current(text, bigint), seq_current_text(text, text) FROM PUBLIC;

COMMENT ON FUNCTION seq_space_create(text, int, int, text) IS
    'Creates a space of per-key sequences: step is how far a section is raised at least, section_keys how many neighbouring keys share one.';
COMMENT ON FUNCTION seq_space_drop(text) IS
    'Drops a space of per-key sequences and its sections; created anew, its keys start again at 1.';

COMMENT ON FUNCTION seq_status() IS
    'Per-key sequences: sections the cache holds and this database has cached or loading, numbers served, loads, raises, evictions and waits since start, persisted sections.';
REVOKE EXECUTE ON FUNCTION seq_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seq_status() TO pg_monitor;
