------------------------------------------------------------------------------------------------
-- Per-key sequences: one row per space (its step, section size and how it hashes text keys), one
-- row per section with the persisted maximum of its keys, and the secret of each space's text
-- keys. The worker raises max_seq in its own transactions; pg_dump carries the rows.
------------------------------------------------------------------------------------------------
CREATE SEQUENCE seq_space_id AS int;
CREATE TABLE seq_space (
    space        text PRIMARY KEY CHECK (octet_length(space) BETWEEN 1 AND 63),
    id           int NOT NULL UNIQUE DEFAULT nextval('seq_space_id'),
    step         int NOT NULL CHECK (step > 0),
    section_keys int NOT NULL CHECK (section_keys BETWEEN 1 AND 256),
    description  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- How text keys map to keys (src/seq/text_key.rs). seq_space_create() says siphash-2-4; a row
    -- that does not say is one of a space made before 0.9.0 (inserted by hand, or a dump of 0.8.0
    -- restored), whose texts were numbered unkeyed.
    text_key_hash text NOT NULL DEFAULT 'fnv-1a' CHECK (text_key_hash IN ('fnv-1a', 'siphash-2-4')),
    -- A copy of the segment authority's space (pg_idgen.seq_sections = authority), made by the
    -- pg_idgen worker: its sections' maxima live at the authority, never here.
    copied       boolean NOT NULL DEFAULT false
);
ALTER SEQUENCE seq_space_id OWNED BY seq_space.id;
CREATE TABLE seq_section (
    space      text NOT NULL,
    section    bigint NOT NULL,
    max_seq    bigint NOT NULL CHECK (max_seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, section)
);
-- The secret of a space's text keys (16 random bytes; SipHash-2-4's key). Nothing is granted on it,
-- and row-level security with no policy hides its rows from any role granted SELECT all the same
-- (not from its owner, superusers and roles with BYPASSRLS); pg_idgen reads it through the C API.
CREATE TABLE seq_space_secret (
    space  text PRIMARY KEY,
    secret bytea NOT NULL CHECK (octet_length(secret) = 16)
);
ALTER TABLE seq_space_secret ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('seq_space', '');
SELECT pg_catalog.pg_extension_config_dump('seq_space_id', '');
SELECT pg_catalog.pg_extension_config_dump('seq_section', '');
SELECT pg_catalog.pg_extension_config_dump('seq_space_secret', '');
-- At the segment authority (pg_idgen.segment_authority), which servers lease sections from
-- (src/seq/store.rs): which server serves each section now. A lease's generation is its fencing
-- token: a raise is accepted only from the holder with the current generation. Not in pg_dump:
-- a restored authority waits out every lease before it gives a section to another server, and
-- learns the live holders' leases from their renewals.
CREATE TABLE seq_section_lease (
    space        text NOT NULL,
    section      bigint NOT NULL,
    holder       text NOT NULL,
    holder_start text NOT NULL,
    generation   bigint NOT NULL CHECK (generation > 0),
    expires_at   timestamptz NOT NULL,
    reusable_at  timestamptz NOT NULL,
    -- The server that last asked for the section, and when: its holder hands it over at its next
    -- renewal, and for a lease after that it is this server's to take.
    wanted_by    text,
    wanted_at    timestamptz,
    PRIMARY KEY (space, section)
);
COMMENT ON TABLE seq_section_lease IS
    'At the segment authority: the server that serves each section of per-key sequences, until when, and its lease''s generation (fencing token).';

-- At the segment authority (src/seq/store_state.rs): where the rows of seq_section and
-- seq_section_lease were written. A server start, a new WAL timeline (a standby promoted) or
-- another database (a copy) counts as a reset: the authority then gives no section to a server
-- that does not hold it for the longest lease and margin it gave, so that live holders repair the
-- maxima first. So does CREATE EXTENSION. Not in pg_dump: a restored copy must not describe
-- where it was restored (a restore with servers running is not covered: docs/many-servers.md).
CREATE TABLE seq_store_state (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    timeline       text NOT NULL,        -- the WAL timeline the rows were written on
    database_oid   oid NOT NULL,         -- the database they were written in
    server_started timestamptz NOT NULL, -- pg_postmaster_start_time() of the server that wrote them
    reset_at       timestamptz NOT NULL, -- when the latest reset began: the wait runs from here
    longest_ms     bigint NOT NULL,      -- the longest lease and margin given since (ms)
    why            text NOT NULL         -- what the latest reset was
);
INSERT INTO seq_store_state (timeline, database_oid, server_started, reset_at, longest_ms, why)
    SELECT pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8), d.oid,
           pg_catalog.pg_postmaster_start_time(), pg_catalog.clock_timestamp(), 0, 'pg_idgen was installed (it may be a restore of a dump)'
      FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
COMMENT ON TABLE seq_store_state IS
    'At the segment authority: where its sections'' rows were written (timeline, database, server start), and its latest reset, after which it gives no section out for a lease and margin.';

COMMENT ON TABLE seq_space IS
    'Per-key sequence spaces: step is how far the worker raises a section at least; section_keys how many neighbouring keys share a section.';
COMMENT ON TABLE seq_section IS
    'Sections of per-key sequences: max_seq is at least every number handed out for the section''s keys; the pg_idgen worker raises it.';
COMMENT ON TABLE seq_space_secret IS
    'Secrets of per-key sequence spaces: the key of SipHash-2-4, which maps a space''s text keys to keys; readable by superusers only.';

-- Whatever changes or removes rows retires the cached sections of the database; a change that
-- would hand numbers out again (max_seq moved back, a space's keys mapped anew, another secret,
-- rows deleted outside seq_space_drop()) is refused. ENABLE ALWAYS: as for segment_tag.
CREATE FUNCTION pg_idgen_seq_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'pg_idgen_seq_changed' LANGUAGE C;
COMMENT ON FUNCTION pg_idgen_seq_changed() IS
    'Trigger on seq_space, seq_section and seq_space_secret: retires cached sections whose rows changed; refuses changes that would repeat numbers.';
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
CREATE TRIGGER seq_space_secret_changed AFTER UPDATE OR DELETE ON seq_space_secret
    FOR EACH ROW EXECUTE FUNCTION pg_idgen_seq_changed();
CREATE TRIGGER seq_space_secret_truncated BEFORE TRUNCATE ON seq_space_secret
    FOR EACH STATEMENT EXECUTE FUNCTION pg_idgen_seq_changed();
ALTER TABLE seq_space_secret ENABLE ALWAYS TRIGGER seq_space_secret_changed;
ALTER TABLE seq_space_secret ENABLE ALWAYS TRIGGER seq_space_secret_truncated;
