-- pg_idgen 0.8.0 -> 0.9.0. A copy of what the modules declare: the upgrade test compares an
-- updated database with a fresh install. Each change has a section of its own below.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.9.0'" to load this file. \quit

------------------------------------------------------------------------------------------------
-- The node registry: every floor above every id made with the node id, whatever happened to the
-- registry's rows (pg_idgen.node_lease_max_lead bounds how far ids run ahead of its clock, and
-- it gives no node id for that long after a start or reset). Copied from src/node/registry.sql.
------------------------------------------------------------------------------------------------
-- How far ahead of the registry's clock a holder's ids may run (pg_idgen.node_lease_max_lead of
-- the registry's server: its GUC when pg_idgen is loaded there, else its postgresql.conf text,
-- else the default).
CREATE FUNCTION pg_idgen_node_registry_max_lead() RETURNS interval
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := pg_catalog.btrim(pg_catalog.current_setting('pg_idgen.node_lease_max_lead', true));
    lead interval;
BEGIN
    IF setting IS NULL OR setting OPERATOR(pg_catalog.=) '' THEN
        RETURN interval '30 s';
    END IF;
    BEGIN
        -- A number alone is milliseconds, as for every pg_idgen time setting.
        IF setting OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
            lead := pg_catalog.make_interval(secs => setting::pg_catalog.numeric OPERATOR(pg_catalog./) 1000);
        ELSE
            lead := setting::pg_catalog.interval;
        END IF;
    EXCEPTION WHEN data_exception OR invalid_datetime_format THEN
        lead := NULL;
    END;
    IF lead IS NULL OR lead OPERATOR(pg_catalog.<) interval '0' OR lead OPERATOR(pg_catalog.>) interval '1 hour' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('invalid value for pg_idgen.node_lease_max_lead in the node registry: "%s"', setting),
            HINT = 'Set it on the registry''s server to a time from 0 to 1h, such as 60s.';
    END IF;
    RETURN lead;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_registry_max_lead() IS
    'Node registry, internal: how far ahead of the registry''s clock leased ids may run (pg_idgen.node_lease_max_lead).';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_registry_max_lead() FROM PUBLIC;

-- Takes a node id for a server start (none, with the time to ask again, while the registry is in
-- the wait after its start or reset: see the top of this file): the one it holds already (an
-- answer that was lost), the one it is configured with (or prefers: the node id it made ids with
-- before), its own from an earlier start whose lease has ended, or a free one: never leased
-- before first, then one whose lease ran out more than its margin ago (never a configured one).
-- Returns it and the time its ids must start at (floor_us: every earlier holder's ids lie
-- below). Refuses a server whose ids already run further ahead of the registry's clock than
-- pg_idgen.node_lease_max_lead allows. Why a function that looks its table up: the schema is
-- found in pg_extension when it runs, not written in at install time, so renaming the schema
-- cannot point it at another table. Why session_replication_role
-- = replica (both functions): a trigger that a role granted TRIGGER on node_lease adds would
-- otherwise run with the privileges of the superuser these functions run as.
CREATE OR REPLACE FUNCTION pg_idgen_node_lease_take(
    holder text, holder_name text, layout text, wanted int, max_node_id int,
    ttl_ms int, margin_ms int, ids_before_us bigint, prefer boolean,
    OUT node_id int, OUT floor_us bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET session_replication_role = replica
AS $$
DECLARE
    -- The table, named through the extension's schema, whose owner must be a superuser: the name is
    -- parsed again by each statement below, and the owner of the schema could otherwise rename
    -- it away in between and plant a look-alike (src/remote.rs, extension_schema).
    s name := (SELECT n.nspname
                 FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
                   ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'
                  AND COALESCE(
                       (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                         WHERE r.oid OPERATOR(pg_catalog.=) CASE
                             WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                             THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                             ELSE n.nspowner END), false));
    t text := pg_catalog.format('%I.node_lease', s);
    began timestamptz;
    window_end timestamptz;
    other record;
    chosen int;
    longest interval;
    held_longest interval;
    reset_floor_us bigint;
    max_lead interval;
    window_end_us bigint;
BEGIN
    IF s IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'pg_idgen''s schema in the node registry is owned by a role that is not a superuser';
    END IF;
    IF holder IS NULL OR holder_name IS NULL OR layout IS NULL OR max_node_id IS NULL OR ttl_ms IS NULL
       OR margin_ms IS NULL OR ids_before_us IS NULL OR prefer IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'pg_idgen_node_lease_take(): only the wanted node id may be NULL';
    END IF;
    IF max_node_id NOT BETWEEN 0 AND 2147483646 OR wanted NOT BETWEEN 0 AND max_node_id
       OR ttl_ms NOT BETWEEN 1000 AND 3600000 OR margin_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pg_idgen_node_lease_take(): an argument is out of range';
    END IF;
    -- The commit must be durable before the lease is used, whatever the session or a pooler says.
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    EXECUTE pg_catalog.format('SELECT %I.pg_idgen_node_registry_max_lead()', s) INTO max_lead;
    -- The wait after a start or reset (see the top of this file): no node id, and the time from
    -- which to ask again in floor_us. Not even the row the server holds (an answer it lost): a
    -- registry set back may show it a row that another server took over after it, and that
    -- server's ids may lie ahead. Why an answer and not an error: an error would roll back the
    -- record of the reset, and the wait would start anew at every call.
    EXECUTE pg_catalog.format('SELECT r.began, r.longest, r.reset_floor_us FROM %I.pg_idgen_node_registry_began($1, $2) AS r', s)
        INTO began, longest, reset_floor_us
        USING s, pg_catalog.make_interval(secs => (ttl_ms OPERATOR(pg_catalog.+) margin_ms) OPERATOR(pg_catalog./) 1000.0) OPERATOR(pg_catalog.+) max_lead;
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(l.reusable_at OPERATOR(pg_catalog.-) l.renewed_at) FROM %s l', t) INTO held_longest;
    window_end := GREATEST(pg_catalog.pg_postmaster_start_time(), began)
                  OPERATOR(pg_catalog.+) GREATEST(longest, held_longest OPERATOR(pg_catalog.+) max_lead);
    window_end_us := (pg_catalog.extract('epoch', window_end) OPERATOR(pg_catalog.*) 1000000::pg_catalog.numeric)::pg_catalog.int8;
    IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) window_end THEN
        node_id := NULL;
        floor_us := window_end_us;
        RETURN;
    END IF;
    -- Why every operation in parentheses: OPERATOR() gives each the same precedence.
    IF ids_before_us OPERATOR(pg_catalog.>) ((pg_catalog.extract('epoch', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_lead)
                                              OPERATOR(pg_catalog.*) 1000000::pg_catalog.numeric)::pg_catalog.int8
                                             OPERATOR(pg_catalog.+) (ttl_ms::pg_catalog.int8 OPERATOR(pg_catalog.*) 1000)) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('this server''s ids run ahead of the node registry''s clock by more than the lease and pg_idgen.node_lease_max_lead (%s)', max_lead),
            DETAIL = pg_catalog.format('Its next lease would cover ids up to %s.', pg_catalog.to_timestamp(ids_before_us OPERATOR(pg_catalog./) 1000000.0)),
            HINT = 'Wait until the server''s clock has caught up with its ids, or raise pg_idgen.node_lease_max_lead on the registry''s server and on every server that leases from it.';
    END IF;
    -- One taker at a time: two servers must not pick the same free id.
    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', t);
    EXECUTE pg_catalog.format('SELECT l.layout FROM %s l WHERE l.layout OPERATOR(pg_catalog.<>) $1 LIMIT 1', t)
        INTO other USING layout;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('the node registry leases node ids for snowflake layout %s, not %s', other.layout, layout),
            HINT = 'Every server that leases node ids from one registry must use the same layout and epoch.';
    END IF;
    EXECUTE pg_catalog.format('SELECT l.node_id FROM %s l WHERE l.holder OPERATOR(pg_catalog.=) $1 ORDER BY l.node_id LIMIT 1', t)
        INTO chosen USING holder;
    IF chosen IS NOT NULL AND wanted IS NOT NULL AND chosen OPERATOR(pg_catalog.<>) wanted THEN
        chosen := NULL;
    END IF;
    IF chosen IS NULL AND wanted IS NOT NULL THEN
        -- Held by another server until its margin has passed; this server's own row from an
        -- earlier start may be taken once its lease has ended (the floor keeps the ids apart).
        EXECUTE pg_catalog.format(
            'SELECT l.holder_name, l.expires_at FROM %s l WHERE l.node_id OPERATOR(pg_catalog.=) $1
                AND l.reusable_at OPERATOR(pg_catalog.>=) pg_catalog.clock_timestamp()
                AND NOT (l.holder_name OPERATOR(pg_catalog.=) $2 AND l.expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp())', t)
            INTO other USING wanted, holder_name;
        IF other IS NULL THEN
            chosen := wanted;
        ELSIF NOT prefer THEN
            RAISE EXCEPTION USING ERRCODE = '55006',
                MESSAGE = pg_catalog.format('node id %s is held by %s', wanted, other.holder_name),
                DETAIL = pg_catalog.format('Its lease runs until %s, and the margin after.', other.expires_at),
                HINT = 'Two servers must not share a node id: give this server another pg_idgen.node_id, or leave it unset to lease a free one.';
        END IF;
    END IF;
    IF chosen IS NULL THEN
        EXECUTE pg_catalog.format(
            'SELECT l.node_id FROM %s l WHERE l.holder_name OPERATOR(pg_catalog.=) $1 AND NOT l.fixed
                AND l.expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp() ORDER BY l.node_id LIMIT 1', t)
            INTO chosen USING holder_name;
    END IF;
    IF chosen IS NULL THEN
        -- The lowest id never leased (a gap below the largest, or the one after it).
        EXECUTE pg_catalog.format(
            'SELECT g FROM (SELECT 0 AS g WHERE NOT EXISTS (SELECT FROM %1$s l WHERE l.node_id OPERATOR(pg_catalog.=) 0)
                            UNION ALL
                            SELECT l.node_id OPERATOR(pg_catalog.+) 1 FROM %1$s l
                             WHERE l.node_id OPERATOR(pg_catalog.<) $1
                               AND NOT EXISTS (SELECT FROM %1$s m WHERE m.node_id OPERATOR(pg_catalog.=) (l.node_id OPERATOR(pg_catalog.+) 1))) AS free
              WHERE g OPERATOR(pg_catalog.<=) $1 ORDER BY g LIMIT 1', t)
            INTO chosen USING max_node_id;
    END IF;
    IF chosen IS NULL THEN
        EXECUTE pg_catalog.format(
            'SELECT l.node_id FROM %s l WHERE NOT l.fixed AND l.node_id OPERATOR(pg_catalog.<=) $1
                AND l.reusable_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp() ORDER BY l.ids_before_us, l.node_id LIMIT 1', t)
            INTO chosen USING max_node_id;
    END IF;
    IF chosen IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '53400',
            MESSAGE = pg_catalog.format('no free node id: all %s are leased', max_node_id OPERATOR(pg_catalog.+) 1);
    END IF;
    -- A new holder's ids start above every earlier holder's (floor_us): the row's bound, and the
    -- end of the last wait, above every id the row may not know of; the same holder keeps its
    -- floor, so an answer lost after the commit loses nothing.
    EXECUTE pg_catalog.format(
        'INSERT INTO %s AS l (node_id, holder, holder_name, layout, fixed, expires_at, reusable_at, ids_before_us, floor_us, acquired_at, renewed_at)
         VALUES ($1, $2, $3, $4, $5, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $6 OPERATOR(pg_catalog./) 1000.0),
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($6 OPERATOR(pg_catalog.+) $7) OPERATOR(pg_catalog./) 1000.0),
                 $8, $9, pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp())
         ON CONFLICT (node_id) DO UPDATE SET
             holder = EXCLUDED.holder, holder_name = EXCLUDED.holder_name, layout = EXCLUDED.layout, fixed = EXCLUDED.fixed,
             expires_at = EXCLUDED.expires_at, reusable_at = EXCLUDED.reusable_at,
             ids_before_us = GREATEST(l.ids_before_us, EXCLUDED.ids_before_us),
             floor_us = CASE WHEN l.holder OPERATOR(pg_catalog.=) EXCLUDED.holder THEN GREATEST(l.floor_us, EXCLUDED.floor_us)
                             ELSE GREATEST(l.ids_before_us, EXCLUDED.floor_us) END,
             acquired_at = CASE WHEN l.holder OPERATOR(pg_catalog.=) EXCLUDED.holder THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
             renewed_at = EXCLUDED.renewed_at
         RETURNING l.floor_us', t)
        INTO floor_us USING chosen, holder, holder_name, layout, wanted IS NOT NULL AND NOT prefer, ttl_ms, margin_ms, ids_before_us,
                            GREATEST(window_end_us, reset_floor_us);
    -- One row per holder: another it took (an answer lost after a commit) is free again; its
    -- ids_before_us stays, and becomes the next holder's floor.
    EXECUTE pg_catalog.format(
        'UPDATE %s AS l SET expires_at = pg_catalog.clock_timestamp(), reusable_at = pg_catalog.clock_timestamp()
          WHERE l.holder OPERATOR(pg_catalog.=) $1 AND l.node_id OPERATOR(pg_catalog.<>) $2', t)
        USING holder, chosen;
    -- What the registry knows whole now: the new row, the renewal.
    EXECUTE pg_catalog.format('SELECT FROM %I.pg_idgen_node_registry_record($1)', s) USING s;
    node_id := chosen;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint, boolean) IS
    'Node registry: leases a node id to a server start (called by the pg_idgen lease worker over libpq).';

-- Renews a lease its holder still has; false when another server holds the id now, when the
-- registry lost what the holder last committed (ids_before_us went back: a restore, a failover),
-- or when the holder's ids would run ahead of the registry's clock by more than the lease and
-- pg_idgen.node_lease_max_lead (its next take says so).
CREATE OR REPLACE FUNCTION pg_idgen_node_lease_renew(holder text, node_id int, ttl_ms int, margin_ms int, ids_before_us bigint, committed_us bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET session_replication_role = replica
AS $$
DECLARE
    -- The table, named through the extension's schema, whose owner must be a superuser: the name is
    -- parsed again by each statement below, and the owner of the schema could otherwise rename
    -- it away in between and plant a look-alike (src/remote.rs, extension_schema).
    s name := (SELECT n.nspname
                 FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
                   ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'
                  AND COALESCE(
                       (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                         WHERE r.oid OPERATOR(pg_catalog.=) CASE
                             WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                             THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                             ELSE n.nspowner END), false));
    t text := pg_catalog.format('%I.node_lease', s);
    renewed boolean;
    max_lead interval;
BEGIN
    IF s IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'pg_idgen''s schema in the node registry is owned by a role that is not a superuser';
    END IF;
    IF ttl_ms NOT BETWEEN 1000 AND 3600000 OR margin_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pg_idgen_node_lease_renew(): an argument is out of range';
    END IF;
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    EXECUTE pg_catalog.format('SELECT %I.pg_idgen_node_registry_max_lead()', s) INTO max_lead;
    -- A reset registry (rows lost) renews only the rows it still has.
    EXECUTE pg_catalog.format('SELECT FROM %I.pg_idgen_node_registry_began($1, $2)', s)
        USING s, pg_catalog.make_interval(secs => (ttl_ms OPERATOR(pg_catalog.+) margin_ms) OPERATOR(pg_catalog./) 1000.0) OPERATOR(pg_catalog.+) max_lead;
    EXECUTE pg_catalog.format(
        'UPDATE %s AS l SET
             expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $3 OPERATOR(pg_catalog./) 1000.0),
             reusable_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($3 OPERATOR(pg_catalog.+) $4) OPERATOR(pg_catalog./) 1000.0),
             ids_before_us = GREATEST(l.ids_before_us, $5),
             renewed_at = pg_catalog.clock_timestamp()
          WHERE l.node_id OPERATOR(pg_catalog.=) $2 AND l.holder OPERATOR(pg_catalog.=) $1
            AND l.ids_before_us OPERATOR(pg_catalog.>=) $6
            AND $5 OPERATOR(pg_catalog.<=) ((pg_catalog.extract(''epoch'', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) $7)
                                                OPERATOR(pg_catalog.*) 1000000::pg_catalog.numeric)::pg_catalog.int8
                                               OPERATOR(pg_catalog.+) ($3::pg_catalog.int8 OPERATOR(pg_catalog.*) 1000))
         RETURNING true', t)
        INTO renewed USING holder, node_id, ttl_ms, margin_ms, ids_before_us, committed_us, max_lead;
    EXECUTE pg_catalog.format('SELECT FROM %I.pg_idgen_node_registry_record($1)', s) USING s;
    RETURN COALESCE(renewed, false);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint, bigint) IS
    'Node registry: renews a node id lease its holder still has (called by the pg_idgen lease worker over libpq).';
-- Public numbers (src/mask/): the functions, the key table and its trigger.
-- id_mask
CREATE  FUNCTION "id_mask"(
	"id" bigint, /* i64 */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_wrapper';
-- id_mask_base32
CREATE  FUNCTION "id_mask_base32"(
	"id" bigint, /* i64 */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS TEXT /* String */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_base32_wrapper';
-- id_mask_decimal
CREATE  FUNCTION "id_mask_decimal"(
	"id" bigint, /* i64 */
	"digits" INT, /* i32 */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS TEXT /* String */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_decimal_wrapper';
-- keys::id_mask_key_create
CREATE  FUNCTION "id_mask_key_create"() RETURNS INT /* i32 */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_key_create_wrapper';
-- keys::id_mask_key_export
CREATE  FUNCTION "id_mask_key_export"() RETURNS TEXT /* String */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_key_export_wrapper';
-- keys::id_mask_key_import
CREATE  FUNCTION "id_mask_key_import"(
	"keys" TEXT /* & str */
) RETURNS INT /* i32 */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_key_import_wrapper';
-- id_unmask
CREATE  FUNCTION "id_unmask"(
	"masked" bigint, /* Option < i64 > */
	"purpose" text DEFAULT '', /* Option < TextBytes > */
	"version" INT DEFAULT NULL /* Option < i32 > */
) RETURNS bigint /* Option < i64 > */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_unmask_wrapper';
-- id_unmask_base32
CREATE  FUNCTION "id_unmask_base32"(
	"masked" text, /* TextBytes */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_unmask_base32_wrapper';
-- id_unmask_decimal
CREATE  FUNCTION "id_unmask_decimal"(
	"masked" text, /* TextBytes */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_unmask_decimal_wrapper';
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
REVOKE ALL ON idgen_internal.mask_key FROM PUBLIC;
ALTER TABLE idgen_internal.mask_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE idgen_internal.mask_key FORCE ROW LEVEL SECURITY;
ALTER TABLE idgen_internal.mask_key ALTER COLUMN aes_key SET STATISTICS 0;
ALTER TABLE idgen_internal.mask_key ALTER COLUMN check_key SET STATISTICS 0;
SELECT pg_catalog.pg_extension_config_dump('idgen_internal.mask_key', '');
COMMENT ON TABLE idgen_internal.mask_key IS
    'Mask keys of public numbers (id_mask()): superusers only. The highest version is current; older ones unmask what they made.';

-- Every backend drops its cached key schedules once a change of the keys commits. ENABLE
-- ALWAYS: pg_idgen's own statements run with session_replication_role = replica.
CREATE FUNCTION idgen_internal.pg_idgen_mask_key_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'pg_idgen_mask_key_changed' LANGUAGE C;
COMMENT ON FUNCTION idgen_internal.pg_idgen_mask_key_changed() IS
    'Trigger on idgen_internal.mask_key: every backend reads the keys again once the change commits.';
REVOKE EXECUTE ON FUNCTION idgen_internal.pg_idgen_mask_key_changed() FROM PUBLIC;
CREATE TRIGGER mask_key_changed AFTER INSERT OR UPDATE OR DELETE ON idgen_internal.mask_key
    FOR EACH STATEMENT EXECUTE FUNCTION idgen_internal.pg_idgen_mask_key_changed();
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
    'Makes a new mask key version from the server''s CSPRNG and makes it current. Superusers only.';
COMMENT ON FUNCTION id_mask_key_export() IS
    'Every mask key version as text for id_mask_key_import() on another server: a secret. Superusers only.';
COMMENT ON FUNCTION id_mask_key_import(text) IS
    'Adds the mask key versions of an exported text that this database lacks; returns how many. Superusers only.';
REVOKE EXECUTE ON FUNCTION id_mask(bigint, text), id_unmask(bigint, text, integer),
    id_mask_decimal(bigint, integer, text), id_unmask_decimal(text, text),
    id_mask_base32(bigint, text), id_unmask_base32(text, text),
    id_mask_key_create(), id_mask_key_export(), id_mask_key_import(text) FROM PUBLIC;
