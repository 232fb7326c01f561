-- pg_idgen 0.8.0 -> 0.9.0. A copy of what the modules declare: the upgrade test compares an
-- updated database with a fresh install. Each change has a section of its own below.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.9.0'" to load this file. \quit

-- Per-key sequences, text keys (src/seq/text_key.rs): a space made from now on hashes its text
-- keys with SipHash-2-4 under a secret of its own, kept in seq_space_secret; the spaces that
-- exist keep their unkeyed hash (text_key_hash = 'fnv-1a', the column's default), or their text
-- keys would start again below the numbers they were given. seq_key(text), which had no space,
-- gives way to seq_key(space, key). The drop fails, and with it the update, while a view, an
-- index or a column default uses seq_key(text): replace it with seq_key('space', key) first.
ALTER TABLE seq_space ADD COLUMN text_key_hash text NOT NULL DEFAULT 'fnv-1a'
    CHECK (text_key_hash IN ('fnv-1a', 'siphash-2-4'));
CREATE TABLE seq_space_secret (
    space  text PRIMARY KEY,
    secret bytea NOT NULL CHECK (octet_length(secret) = 16)
);
ALTER TABLE seq_space_secret ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('seq_space_secret', '');
COMMENT ON TABLE seq_space_secret IS
    'Secrets of per-key sequence spaces: the key of SipHash-2-4, which maps a space''s text keys to keys; readable by superusers only.';
COMMENT ON FUNCTION pg_idgen_seq_changed() IS
    'Trigger on seq_space, seq_section and seq_space_secret: retires cached sections whose rows changed; refuses changes that would repeat numbers.';
CREATE TRIGGER seq_space_secret_changed AFTER UPDATE OR DELETE ON seq_space_secret
    FOR EACH ROW EXECUTE FUNCTION pg_idgen_seq_changed();
CREATE TRIGGER seq_space_secret_truncated BEFORE TRUNCATE ON seq_space_secret
    FOR EACH STATEMENT EXECUTE FUNCTION pg_idgen_seq_changed();
ALTER TABLE seq_space_secret ENABLE ALWAYS TRIGGER seq_space_secret_changed;
ALTER TABLE seq_space_secret ENABLE ALWAYS TRIGGER seq_space_secret_truncated;
DROP FUNCTION seq_key(text);
CREATE FUNCTION "seq_key"(
	"space" text, /* TextBytes */
	"key" text /* TextBytes */
) RETURNS bigint /* i64 */
STABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_key_in_space_wrapper';
COMMENT ON FUNCTION seq_next_text(text, text) IS
    'Next number of a text key (seq_key(space, key)) in a space of per-key sequences.';
COMMENT ON FUNCTION seq_current_text(text, text) IS
    'seq_current() of a text key (seq_key(space, key)).';
COMMENT ON FUNCTION seq_key(text, text) IS
    'The bigint key of a text key in a space: SipHash-2-4 of its bytes under the space''s secret (FNV-1a 64 and SplitMix64 for spaces made before 0.9.0).';
REVOKE EXECUTE ON FUNCTION seq_key(text, text) FROM PUBLIC;
