------------------------------------------------------------------------------------------------
-- The node registry: in the database that pg_idgen.node_registry names, one row per node id
-- that a server leased (src/node/mod.rs). Every database with the extension has the table; only
-- the one the servers point at is used. pg_dump carries the rows.
------------------------------------------------------------------------------------------------
CREATE TABLE node_lease (
    node_id       int PRIMARY KEY CHECK (node_id >= 0),
    holder        text NOT NULL,        -- the server start that holds it: a random token
    holder_name   text NOT NULL,        -- the server, for people and for its own restarts: host, port, system identifier
    layout        text NOT NULL,        -- the snowflake layout and epoch of its ids
    fixed         boolean NOT NULL,     -- configured (pg_idgen.node_id) rather than picked
    expires_at    timestamptz NOT NULL, -- the registry's clock: the holder stops by then
    reusable_at   timestamptz NOT NULL, -- expires_at + the holder's clock-skew margin
    ids_before_us bigint NOT NULL,      -- every id made under this node id is of an earlier time (Unix µs)
    floor_us      bigint NOT NULL,      -- the holder's ids start at this time: the earlier holders' ids_before_us
    acquired_at   timestamptz NOT NULL,
    renewed_at    timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('node_lease', '');
COMMENT ON TABLE node_lease IS
    'Node ids leased to servers by the pg_idgen lease worker (used in the database pg_idgen.node_registry names).';

-- Takes a node id for a server start: the one it holds already (an answer that was lost), the
-- one it is configured with (or prefers: the node id it made ids with before), its own from an
-- earlier start whose lease has ended, or a free one: never leased before first, then one whose
-- lease ran out more than its margin ago (never a configured one). Returns it and the time its
-- ids must start at (floor_us: every earlier holder's ids lie below). Why a function that looks
-- its table up: the schema is found in pg_extension when it runs, not written in at install
-- time, so renaming the schema cannot point it at another table.
CREATE FUNCTION pg_idgen_node_lease_take(
    holder text, holder_name text, layout text, wanted int, max_node_id int,
    ttl_ms int, margin_ms int, ids_before_us bigint, prefer boolean,
    OUT node_id int, OUT floor_us bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- The table, named through the extension's schema, whose owner must be a superuser: the name is
    -- parsed again by each statement below, and the owner of the schema could otherwise rename
    -- it away in between and plant a look-alike (src/remote.rs, extension_schema).
    t text := (SELECT pg_catalog.format('%I.node_lease', n.nspname)
                 FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
                   ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'
                  AND COALESCE(
                       (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                         WHERE r.oid OPERATOR(pg_catalog.=) CASE
                             WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                             THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                             ELSE n.nspowner END), false));
    other record;
    chosen int;
    longest interval;
BEGIN
    IF t IS NULL THEN
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
    -- A registry that just started may have come back from a backup or an older standby: a lease
    -- it lost would look free. Until the longest lease and its margin have passed since the
    -- start, a server gets only the row it holds already, and nothing else.
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(l.reusable_at OPERATOR(pg_catalog.-) l.renewed_at) FROM %s l', t) INTO longest;
    IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) (pg_catalog.pg_postmaster_start_time() OPERATOR(pg_catalog.+)
           GREATEST(longest, pg_catalog.make_interval(secs => (ttl_ms OPERATOR(pg_catalog.+) margin_ms) OPERATOR(pg_catalog./) 1000.0))) THEN
        EXECUTE pg_catalog.format('SELECT l.node_id FROM %s l WHERE l.holder OPERATOR(pg_catalog.=) $1 ORDER BY l.node_id LIMIT 1', t)
            INTO chosen USING holder;
        IF chosen IS NULL OR (NOT prefer AND chosen OPERATOR(pg_catalog.<>) COALESCE(wanted, chosen)) THEN
            RAISE EXCEPTION USING ERRCODE = '57P03',
                MESSAGE = 'the node registry started less than a lease and its margin ago',
                DETAIL = 'It may have lost leases (a restore, a failover to a standby that was behind); it hands out node ids once every such lease has run out.';
        END IF;
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
    -- A new holder's ids start above every earlier holder's (floor_us); the same holder keeps
    -- its floor, so an answer lost after the commit loses nothing.
    EXECUTE pg_catalog.format(
        'INSERT INTO %s AS l (node_id, holder, holder_name, layout, fixed, expires_at, reusable_at, ids_before_us, floor_us, acquired_at, renewed_at)
         VALUES ($1, $2, $3, $4, $5, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $6 OPERATOR(pg_catalog./) 1000.0),
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($6 OPERATOR(pg_catalog.+) $7) OPERATOR(pg_catalog./) 1000.0),
                 $8, 0, pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp())
         ON CONFLICT (node_id) DO UPDATE SET
             holder = EXCLUDED.holder, holder_name = EXCLUDED.holder_name, layout = EXCLUDED.layout, fixed = EXCLUDED.fixed,
             expires_at = EXCLUDED.expires_at, reusable_at = EXCLUDED.reusable_at,
             ids_before_us = GREATEST(l.ids_before_us, EXCLUDED.ids_before_us),
             floor_us = CASE WHEN l.holder OPERATOR(pg_catalog.=) EXCLUDED.holder THEN l.floor_us ELSE l.ids_before_us END,
             acquired_at = CASE WHEN l.holder OPERATOR(pg_catalog.=) EXCLUDED.holder THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
             renewed_at = EXCLUDED.renewed_at
         RETURNING l.floor_us', t)
        INTO floor_us USING chosen, holder, holder_name, layout, wanted IS NOT NULL AND NOT prefer, ttl_ms, margin_ms, ids_before_us;
    -- One row per holder: another it took (an answer lost after a commit) is free again; its
    -- ids_before_us stays, and becomes the next holder's floor.
    EXECUTE pg_catalog.format(
        'UPDATE %s AS l SET expires_at = pg_catalog.clock_timestamp(), reusable_at = pg_catalog.clock_timestamp()
          WHERE l.holder OPERATOR(pg_catalog.=) $1 AND l.node_id OPERATOR(pg_catalog.<>) $2', t)
        USING holder, chosen;
    node_id := chosen;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint, boolean) IS
    'Node registry: leases a node id to a server start (called by the pg_idgen lease worker over libpq).';

-- Renews a lease its holder still has; false when another server holds the id now, or when the
-- registry lost what the holder last committed (ids_before_us went back: a restore, a failover).
CREATE FUNCTION pg_idgen_node_lease_renew(holder text, node_id int, ttl_ms int, margin_ms int, ids_before_us bigint, committed_us bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- The table, named through the extension's schema, whose owner must be a superuser: the name is
    -- parsed again by each statement below, and the owner of the schema could otherwise rename
    -- it away in between and plant a look-alike (src/remote.rs, extension_schema).
    t text := (SELECT pg_catalog.format('%I.node_lease', n.nspname)
                 FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
                   ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'
                  AND COALESCE(
                       (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                         WHERE r.oid OPERATOR(pg_catalog.=) CASE
                             WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                             THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                             ELSE n.nspowner END), false));
    renewed boolean;
BEGIN
    IF t IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'pg_idgen''s schema in the node registry is owned by a role that is not a superuser';
    END IF;
    IF ttl_ms NOT BETWEEN 1000 AND 3600000 OR margin_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pg_idgen_node_lease_renew(): an argument is out of range';
    END IF;
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    EXECUTE pg_catalog.format(
        'UPDATE %s AS l SET
             expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $3 OPERATOR(pg_catalog./) 1000.0),
             reusable_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($3 OPERATOR(pg_catalog.+) $4) OPERATOR(pg_catalog./) 1000.0),
             ids_before_us = GREATEST(l.ids_before_us, $5),
             renewed_at = pg_catalog.clock_timestamp()
          WHERE l.node_id OPERATOR(pg_catalog.=) $2 AND l.holder OPERATOR(pg_catalog.=) $1
            AND l.ids_before_us OPERATOR(pg_catalog.>=) $6
         RETURNING true', t)
        INTO renewed USING holder, node_id, ttl_ms, margin_ms, ids_before_us, committed_us;
    RETURN COALESCE(renewed, false);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint, bigint) IS
    'Node registry: renews a node id lease its holder still has (called by the pg_idgen lease worker over libpq).';

-- Only the role the lease workers connect as may lease (GRANT EXECUTE to it); both functions run
-- as the extension's owner, so that role needs no right on the table.
REVOKE EXECUTE ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint, bigint) FROM PUBLIC;
