------------------------------------------------------------------------------------------------
-- Public numbers: the mask keys. One row per key version (the highest is current): an AES key
-- for FF1 and an AES-256 key for the text forms' check digits, made by id_mask_key_create() or
-- brought by id_mask_key_import(). Only superusers read them: no privilege is granted, and row
-- security is forced without a policy, so pg_read_all_data sees no row. pg_dump carries the rows
-- (a superuser's dump holds the keys; a role that cannot read them cannot dump the database
-- without --exclude-table-data). Statistics are not collected on the keys.
------------------------------------------------------------------------------------------------
CREATE TABLE idgen_internal.mask_key (
    version    int PRIMARY KEY CHECK (version > 0),
    aes_key    bytea NOT NULL CHECK (octet_length(aes_key) IN (16, 24, 32)),
    check_key  bytea NOT NULL CHECK (octet_length(check_key) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
-- The text forms name a version by one digit, 1 + (version - 1) mod 9 (src/mask/keys.rs,
-- `digit`): two versions present with one digit would read each other's numbers.
CREATE UNIQUE INDEX mask_key_digit ON idgen_internal.mask_key (((version - 1) % 9));
REVOKE ALL ON idgen_internal.mask_key FROM PUBLIC;
ALTER TABLE idgen_internal.mask_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE idgen_internal.mask_key FORCE ROW LEVEL SECURITY;
ALTER TABLE idgen_internal.mask_key ALTER COLUMN aes_key SET STATISTICS 0;
ALTER TABLE idgen_internal.mask_key ALTER COLUMN check_key SET STATISTICS 0;
SELECT pg_catalog.pg_extension_config_dump('idgen_internal.mask_key', '');
COMMENT ON TABLE idgen_internal.mask_key IS
    'Mask keys of public numbers (id_mask()): superusers only. The highest version is current; older ones unmask what they made.';

-- Every key version this database has held, kept when the version is retired (its mask_key row
-- deleted), so that a number names one key for good: id_mask_key_create() numbers above all of
-- them, id_mask_key_import() refuses other keys under one of them. The fingerprint is AES of a
-- fixed block under each of the version's keys: it tells keys apart and reveals neither.
CREATE TABLE idgen_internal.mask_key_history (
    version     int PRIMARY KEY CHECK (version > 0),
    fingerprint bytea NOT NULL CHECK (octet_length(fingerprint) = 32),
    held_since  timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON idgen_internal.mask_key_history FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('idgen_internal.mask_key_history', '');
COMMENT ON TABLE idgen_internal.mask_key_history IS
    'Every mask key version this database has held, also retired ones: a version number is never given to other keys.';

-- Every backend reads the keys again once a change of them commits. For each row: logical
-- replication's apply fires row triggers only. ENABLE ALWAYS: pg_idgen's own statements and the
-- apply run with session_replication_role = replica. (pg_idgen's functions also invalidate
-- directly: a restore's ENABLE TRIGGER ALL leaves these firing for ordinary sessions only, and
-- pg_idgen's own statements then refuse to run until they are ENABLE ALWAYS again.)
CREATE FUNCTION idgen_internal.pg_idgen_mask_key_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'pg_idgen_mask_key_changed' LANGUAGE C;
COMMENT ON FUNCTION idgen_internal.pg_idgen_mask_key_changed() IS
    'Trigger on idgen_internal.mask_key: every backend reads the keys again once the change commits.';
REVOKE EXECUTE ON FUNCTION idgen_internal.pg_idgen_mask_key_changed() FROM PUBLIC;
CREATE TRIGGER mask_key_changed AFTER INSERT OR UPDATE OR DELETE ON idgen_internal.mask_key
    FOR EACH ROW EXECUTE FUNCTION idgen_internal.pg_idgen_mask_key_changed();
CREATE TRIGGER mask_key_truncated AFTER TRUNCATE ON idgen_internal.mask_key
    FOR EACH STATEMENT EXECUTE FUNCTION idgen_internal.pg_idgen_mask_key_changed();
ALTER TABLE idgen_internal.mask_key ENABLE ALWAYS TRIGGER mask_key_changed;
ALTER TABLE idgen_internal.mask_key ENABLE ALWAYS TRIGGER mask_key_truncated;

-- Masking is a keyed oracle: who may use it is granted per role, as for seq_next().
COMMENT ON FUNCTION id_mask(bigint, text) IS
    'The public number of an id: FF1 over AES with the current key and the purpose, a bijection of 0 to 2^63-1.';
COMMENT ON FUNCTION id_unmask(bigint, text, integer) IS
    'The id of a public number made by id_mask() with the purpose, under key version version (default: current).';
COMMENT ON FUNCTION id_mask_decimal(bigint, integer, text) IS
    'The public number of an id as digits decimal digits (9 to 22): key version digit, FF1 radix 10, 2 check digits.';
COMMENT ON FUNCTION id_unmask_decimal(text, text) IS
    'The id of a public number made by id_mask_decimal() with the purpose; refuses one made otherwise (check digits).';
COMMENT ON FUNCTION id_mask_base32(bigint, text) IS
    'The public number of an id as 16 Crockford base32 digits: key version digit, id_mask() in 13 digits, 2 check digits.';
COMMENT ON FUNCTION id_unmask_base32(text, text) IS
    'The id of a public number made by id_mask_base32() with the purpose; refuses one made otherwise (check digits).';
COMMENT ON FUNCTION id_mask_key_create() IS
    'Makes a new mask key version from the server''s strong random source and makes it current. Superusers only.';
COMMENT ON FUNCTION id_mask_key_export() IS
    'Every mask key version as text for id_mask_key_import() on another server: a secret. Superusers only.';
COMMENT ON FUNCTION id_mask_key_import(text) IS
    'Adds the mask key versions of an exported text that this database lacks; returns how many. Superusers only.';
REVOKE EXECUTE ON FUNCTION id_mask(bigint, text), id_unmask(bigint, text, integer),
    id_mask_decimal(bigint, integer, text), id_unmask_decimal(text, text),
    id_mask_base32(bigint, text), id_unmask_base32(text, text),
    id_mask_key_create(), id_mask_key_export(), id_mask_key_import(text) FROM PUBLIC;
