-- pg_idgen 0.5.0 -> 0.6.0: node ids leased from a registry (pg_idgen.node_registry), segment
-- ranges from a shared authority (pg_idgen.segment_authority). Every database gets the registry's
-- table and functions (src/node/registry.sql, copied below: the upgrade test compares the
-- function bodies), node_lease_status(), the authority's pg_idgen_segment_allocate() and
-- segment_authority_status(). The library of 0.6.0 also serves the declarations of 0.5.0
-- unchanged until this script has run.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.6.0'" to load this file. \quit

CREATE FUNCTION node_lease_status() RETURNS TABLE (
	registry text,
	node_id int,
	state text,
	expires_in_ms bigint,
	renewed_at timestamp with time zone,
	failures_in_a_row bigint,
	failures bigint,
	last_error text,
	worker_pid int
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'node_lease_status_wrapper';
COMMENT ON FUNCTION node_lease_status() IS
    'Where this server''s node id lease from pg_idgen.node_registry stands (no row without a registry).';

CREATE FUNCTION pg_idgen_segment_allocate(tag text, min_len bigint) RETURNS TABLE (
	max_id bigint,
	len bigint
)
STRICT VOLATILE SECURITY DEFINER
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'pg_idgen_segment_allocate_wrapper';
COMMENT ON FUNCTION pg_idgen_segment_allocate(text, bigint) IS
    'Segment authority: allocates the next range of a tag for another server''s pg_idgen worker (called over libpq).';
REVOKE EXECUTE ON FUNCTION pg_idgen_segment_allocate(text, bigint) FROM PUBLIC;

CREATE FUNCTION segment_authority_status() RETURNS TABLE (
	authority text,
	reachable bool,
	succeeded_at timestamp with time zone,
	failures_in_a_row bigint,
	failures bigint,
	last_error text
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'segment_authority_status_wrapper';
COMMENT ON FUNCTION segment_authority_status() IS
    'Whether the segment authority (pg_idgen.segment_authority) answers this server''s worker (no row without one).';

------------------------------------------------------------------------------------------------
-- The node registry: in the database that pg_idgen.node_registry names, one row per node id
-- that a server leased (src/node/lease.rs). Every database with the extension has the table;
-- only the one the servers point at is used. pg_dump carries the rows: a restored registry
-- still knows below which time every id of each node id lies.
------------------------------------------------------------------------------------------------
CREATE TABLE node_lease (
    node_id       int PRIMARY KEY CHECK (node_id >= 0),
    holder        text NOT NULL,        -- the server start that holds it: a random token
    holder_name   text NOT NULL,        -- the same, for people: host, port, system identifier
    layout        text NOT NULL,        -- the snowflake layout and epoch of its ids
    fixed         boolean NOT NULL,     -- configured (pg_idgen.node_id) rather than picked
    expires_at    timestamptz NOT NULL, -- the registry's clock: the holder stops by then
    reusable_at   timestamptz NOT NULL, -- expires_at + the holder's clock-skew margin
    ids_before_us bigint NOT NULL,      -- every id made under this node id is of an earlier time (Unix µs)
    acquired_at   timestamptz NOT NULL,
    renewed_at    timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('node_lease', '');
COMMENT ON TABLE node_lease IS
    'Node ids leased to servers by the pg_idgen lease worker (used in the database pg_idgen.node_registry names).';

-- Takes a node id for a server start: the one it holds already (an answer that was lost), the
-- one it is configured with, or a free one: never leased before first, then one whose lease ran
-- out more than its margin ago (never a configured one). Returns it and the time below which every
-- earlier holder's ids lie. Why a function that looks its table up: the schema is found in
-- pg_extension when it runs, not written in at install time, so renaming the schema cannot point
-- it at another table.
CREATE FUNCTION pg_idgen_node_lease_take(
    holder text, holder_name text, layout text, wanted int, max_node_id int,
    ttl_ms int, margin_ms int, ids_before_us bigint,
    OUT node_id int, OUT previous_ids_before_us bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := pg_catalog.format('%I.node_lease',
        (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
             ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
          WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'));
    other record;
    chosen int;
BEGIN
    IF holder IS NULL OR layout IS NULL OR max_node_id IS NULL OR ttl_ms IS NULL OR margin_ms IS NULL OR ids_before_us IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'pg_idgen_node_lease_take(): only the wanted node id may be NULL';
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
    IF wanted IS NULL THEN
        EXECUTE pg_catalog.format('SELECT l.node_id FROM %s l WHERE l.holder OPERATOR(pg_catalog.=) $1', t)
            INTO chosen USING holder;
        IF chosen IS NULL THEN
            EXECUTE pg_catalog.format(
                'SELECT g FROM pg_catalog.generate_series(0, $1) g LEFT JOIN %s l ON l.node_id OPERATOR(pg_catalog.=) g
                  WHERE l.node_id IS NULL
                     OR (NOT l.fixed AND l.reusable_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp())
                  ORDER BY l.node_id IS NOT NULL, g LIMIT 1', t)
                INTO chosen USING max_node_id;
        END IF;
        IF chosen IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '53400',
                MESSAGE = pg_catalog.format('no free node id: all %s are leased', max_node_id OPERATOR(pg_catalog.+) 1);
        END IF;
    ELSE
        chosen := wanted;
        EXECUTE pg_catalog.format(
            'SELECT l.holder_name, l.expires_at FROM %s l WHERE l.node_id OPERATOR(pg_catalog.=) $1
                AND l.holder OPERATOR(pg_catalog.<>) $2 AND l.reusable_at OPERATOR(pg_catalog.>=) pg_catalog.clock_timestamp()', t)
            INTO other USING chosen, holder;
        IF other IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = '55006',
                MESSAGE = pg_catalog.format('node id %s is held by %s', chosen, other.holder_name),
                DETAIL = pg_catalog.format('Its lease runs until %s, and the margin after.', other.expires_at),
                HINT = 'Two servers must not share a node id: give this server another pg_idgen.node_id, or leave it unset to lease a free one.';
        END IF;
    END IF;
    -- This server's own ids need no floor: they are below its own earlier ids_before_us already.
    EXECUTE pg_catalog.format('SELECT l.ids_before_us FROM %s l WHERE l.node_id OPERATOR(pg_catalog.=) $1
                                  AND l.holder OPERATOR(pg_catalog.<>) $2', t)
        INTO previous_ids_before_us USING chosen, holder;
    EXECUTE pg_catalog.format(
        'INSERT INTO %s AS l (node_id, holder, holder_name, layout, fixed, expires_at, reusable_at, ids_before_us, acquired_at, renewed_at)
         VALUES ($1, $2, $3, $4, $5, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $6 OPERATOR(pg_catalog./) 1000.0),
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($6 OPERATOR(pg_catalog.+) $7) OPERATOR(pg_catalog./) 1000.0),
                 $8, pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp())
         ON CONFLICT (node_id) DO UPDATE SET
             holder = EXCLUDED.holder, holder_name = EXCLUDED.holder_name, layout = EXCLUDED.layout, fixed = EXCLUDED.fixed,
             expires_at = EXCLUDED.expires_at, reusable_at = EXCLUDED.reusable_at,
             ids_before_us = GREATEST(l.ids_before_us, EXCLUDED.ids_before_us),
             acquired_at = CASE WHEN l.holder OPERATOR(pg_catalog.=) EXCLUDED.holder THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
             renewed_at = EXCLUDED.renewed_at', t)
        USING chosen, holder, holder_name, layout, wanted IS NOT NULL, ttl_ms, margin_ms, ids_before_us;
    node_id := chosen;
    previous_ids_before_us := COALESCE(previous_ids_before_us, 0);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint) IS
    'Node registry: leases a node id to a server start (called by the pg_idgen lease worker over libpq).';

-- Renews a lease its holder still has; false when another server holds the id now.
CREATE FUNCTION pg_idgen_node_lease_renew(holder text, node_id int, ttl_ms int, margin_ms int, ids_before_us bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := pg_catalog.format('%I.node_lease',
        (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
             ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
          WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'));
    renewed boolean;
BEGIN
    EXECUTE pg_catalog.format(
        'UPDATE %s AS l SET
             expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $3 OPERATOR(pg_catalog./) 1000.0),
             reusable_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($3 OPERATOR(pg_catalog.+) $4) OPERATOR(pg_catalog./) 1000.0),
             ids_before_us = GREATEST(l.ids_before_us, $5),
             renewed_at = pg_catalog.clock_timestamp()
          WHERE l.node_id OPERATOR(pg_catalog.=) $2 AND l.holder OPERATOR(pg_catalog.=) $1
         RETURNING true', t)
        INTO renewed USING holder, node_id, ttl_ms, margin_ms, ids_before_us;
    RETURN COALESCE(renewed, false);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint) IS
    'Node registry: renews a node id lease its holder still has (called by the pg_idgen lease worker over libpq).';

-- Only the role the lease workers connect as may lease (GRANT EXECUTE to it); both functions run
-- as the extension's owner, so that role needs no right on the table.
REVOKE EXECUTE ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint) FROM PUBLIC;
