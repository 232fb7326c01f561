-- pg_idgen 0.8.0 -> 0.9.0. A copy of what the modules declare: the upgrade test compares an
-- updated database with a fresh install. Each change has a section of its own below.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.9.0'" to load this file. \quit

------------------------------------------------------------------------------------------------
-- The node registry: every floor above every id made with the node id, whatever happened to the
-- registry's rows. It gives no lease longer than its own server's settings allow, bounds how far
-- ids run ahead of its clock (pg_idgen.node_lease_max_lead), counts its server's start, a copied
-- database and a holder's evidence of lost commits as resets, and gives no node id for its lease,
-- margin and lead after one. Copied from src/node/registry.sql.
------------------------------------------------------------------------------------------------
ALTER TABLE node_registry_state ADD COLUMN database_oid oid, ADD COLUMN server_started timestamptz;
-- Leases that 0.8.0 gave had no bound on how far ahead of the clock their ids ran: the registry
-- remembers the longest its rows show (and their margin), so that its wait after a reset covers them.
UPDATE node_registry_state AS r
   SET database_oid = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()),
       server_started = pg_catalog.pg_postmaster_start_time(),
       longest = GREATEST(r.longest,
                          (SELECT pg_catalog.max(pg_catalog.make_interval(secs => (l.ids_before_us OPERATOR(pg_catalog./) 1000000.0
                                                                                    OPERATOR(pg_catalog.-) pg_catalog.extract('epoch', l.renewed_at))::pg_catalog.float8)
                                                 OPERATOR(pg_catalog.+) (l.reusable_at OPERATOR(pg_catalog.-) l.expires_at))
                             FROM node_lease l));
ALTER TABLE node_registry_state ALTER COLUMN database_oid SET NOT NULL;

-- Records a reset: from `since` on (or from the latest renewal the rows show, if later: a server
-- started with its clock behind) the registry waits the longest lease, margin and lead it knows
-- of before it gives a node id to a server that holds none; node ids whose rows were lost go out
-- above every bound it had seen. Returns when the wait began. Expects the state row's lock.
CREATE FUNCTION pg_idgen_node_registry_reset(s name, why text, longest interval, since timestamptz) RETURNS timestamptz
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    began timestamptz;
    lease_file oid := pg_catalog.pg_relation_filenode(pg_catalog.format('%I.node_lease', s)::pg_catalog.regclass);
    timeline text := pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8);
    lease_rows bigint;
    renewed_sum numeric;
    latest timestamptz;
BEGIN
    EXECUTE pg_catalog.format('SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(pg_catalog.extract(''epoch'', l.renewed_at)), 0),
                                      GREATEST(pg_catalog.max(l.renewed_at), pg_catalog.max(l.acquired_at))
                                 FROM %I.node_lease l', s)
        INTO lease_rows, renewed_sum, latest;
    began := GREATEST(since, latest);
    RAISE LOG 'pg_idgen node registry: %; it counts as reset, and hands out node ids not held only after % from %', why, longest, began;
    EXECUTE pg_catalog.format(
        'INSERT INTO %I.node_registry_state AS r (only_row, lease_file, lease_rows, renewed_sum, timeline, ids_before_us, reset_floor_us,
                                                  reset_at, longest, database_oid, server_started)
              VALUES (true, $1, $2, $3, $4, 0, 0, $5, $6, $7, pg_catalog.pg_postmaster_start_time())
         ON CONFLICT (only_row) DO UPDATE SET lease_file = $1, lease_rows = $2, renewed_sum = $3, timeline = $4,
                                              reset_floor_us = r.ids_before_us, reset_at = $5, longest = $6, database_oid = $7,
                                              server_started = pg_catalog.pg_postmaster_start_time()', s)
        USING lease_file, lease_rows, renewed_sum, timeline, began, longest,
              (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database());
    RETURN began;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_registry_reset(name, text, interval, timestamptz) IS
    'Node registry, internal: records a reset, from which the registry waits before it gives node ids to servers that hold none.';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_registry_reset(name, text, interval, timestamptz) FROM PUBLIC;

-- Checks that node_lease is the table the registry's leases were given from, in this database and
-- since this server started (see above), and records a reset otherwise. Returns when the
-- registry's last wait began, the longest lease, margin and lead it knows of (with `lease`, the
-- caller's), and the floor of node ids whose rows a reset lost. Takes the state row's lock: calls
-- of the registry run one at a time from here. Called only by the functions below, in the schema
-- they trust.
CREATE OR REPLACE FUNCTION pg_idgen_node_registry_began(s name, lease interval, OUT began timestamptz, OUT longest interval, OUT reset_floor_us bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease_file oid := pg_catalog.pg_relation_filenode(pg_catalog.format('%I.node_lease', s)::pg_catalog.regclass);
    timeline text := pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8);
    database_oid oid := (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database());
    lease_rows bigint;
    renewed_sum numeric;
    known record;
    why text;
    since timestamptz;
BEGIN
    -- Why a table lock and an update in place, never a new row: a second call waiting here must
    -- find the row the first one left, or it would count a reset of its own and lose `longest`.
    EXECUTE pg_catalog.format('LOCK TABLE %I.node_registry_state IN EXCLUSIVE MODE', s);
    EXECUTE pg_catalog.format('SELECT r.lease_file, r.lease_rows, r.renewed_sum, r.timeline, r.reset_floor_us, r.reset_at, r.longest,
                                      r.database_oid, r.server_started
                                 FROM %I.node_registry_state r', s)
        INTO known;
    EXECUTE pg_catalog.format('SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(pg_catalog.extract(''epoch'', l.renewed_at)), 0)
                                 FROM %I.node_lease l', s)
        INTO lease_rows, renewed_sum;
    longest := GREATEST(known.longest, lease);
    began := known.reset_at;
    reset_floor_us := known.reset_floor_us;
    IF known.lease_file IS NULL OR known.lease_file OPERATOR(pg_catalog.<>) lease_file
       OR known.lease_rows OPERATOR(pg_catalog.<>) lease_rows OR known.renewed_sum OPERATOR(pg_catalog.>) renewed_sum
       OR known.timeline OPERATOR(pg_catalog.<>) timeline OR known.database_oid OPERATOR(pg_catalog.<>) database_oid THEN
        since := pg_catalog.clock_timestamp();
        why := pg_catalog.format('node_lease is not what its leases were given from (%s rows, renewals summing to %s s, in file %s on timeline %s of database %s; expected %s, %s, %s, %s, %s)',
                                 lease_rows, renewed_sum, lease_file, timeline, database_oid,
                                 known.lease_rows, known.renewed_sum, known.lease_file, known.timeline, known.database_oid);
    ELSIF known.server_started IS DISTINCT FROM pg_catalog.pg_postmaster_start_time() THEN
        -- The wait runs from the start (or the latest renewal the rows show: see the function).
        since := pg_catalog.pg_postmaster_start_time();
        why := 'its server started (it may be a copy restored from a backup or a snapshot)';
    END IF;
    IF why IS NOT NULL THEN
        EXECUTE pg_catalog.format('SELECT %I.pg_idgen_node_registry_reset($1, $2, $3, $4)', s)
            INTO began USING s, why, longest, since;
        EXECUTE pg_catalog.format('SELECT r.reset_floor_us FROM %I.node_registry_state r', s) INTO reset_floor_us;
    ELSIF longest OPERATOR(pg_catalog.>) known.longest THEN
        EXECUTE pg_catalog.format('UPDATE %I.node_registry_state SET longest = $1', s) USING longest;
    END IF;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_registry_began(name, interval) IS
    'Node registry, internal: when the registry''s wait began (created, started, or found reset), the longest lease, margin and lead it knows of, and the floor of node ids whose rows a reset lost.';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_registry_began(name, interval) FROM PUBLIC;

-- The registry server's own value of a pg_idgen time setting: its configuration, never a
-- session's. Where pg_idgen is loaded, the setting cannot be changed in a session (it is
-- postmaster-level); where it is not, it is a placeholder any session could SET, so the value
-- is read from the configuration files instead (this runs as the superuser that owns pg_idgen).
CREATE FUNCTION pg_idgen_node_registry_setting(setting_name text, default_value interval) RETURNS interval
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    value text;
    parsed interval;
BEGIN
    SELECT pg_catalog.btrim(g.setting) INTO value FROM pg_catalog.pg_settings g
     WHERE g.name OPERATOR(pg_catalog.=) setting_name AND g.context OPERATOR(pg_catalog.=) ANY (ARRAY['postmaster', 'sighup']);
    IF NOT FOUND THEN
        SELECT pg_catalog.btrim(f.setting) INTO value FROM pg_catalog.pg_file_settings f
         WHERE f.name OPERATOR(pg_catalog.=) setting_name AND f.error IS NULL
         ORDER BY f.seqno DESC LIMIT 1;
    END IF;
    IF value IS NULL OR value OPERATOR(pg_catalog.=) '' THEN
        RETURN default_value;
    END IF;
    BEGIN
        -- A number alone is milliseconds, as for every pg_idgen time setting.
        IF value OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
            parsed := pg_catalog.make_interval(secs => value::pg_catalog.numeric OPERATOR(pg_catalog./) 1000);
        ELSE
            parsed := value::pg_catalog.interval;
        END IF;
    EXCEPTION WHEN data_exception OR invalid_datetime_format THEN
        parsed := NULL;
    END;
    IF parsed IS NULL OR parsed OPERATOR(pg_catalog.<) interval '0' OR parsed OPERATOR(pg_catalog.>) interval '1 hour' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('invalid value for %s in the node registry''s configuration: "%s"', setting_name, value),
            HINT = 'Set it in the registry server''s postgresql.conf to a time from 0 to 1h.';
    END IF;
    RETURN parsed;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_registry_setting(text, interval) IS
    'Node registry, internal: a pg_idgen time setting as the registry''s server is configured (lease, margin, lead).';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_registry_setting(text, interval) FROM PUBLIC;

-- The registry's own limits, from its server's configuration (pg_idgen_node_registry_setting):
-- a caller whose lease or margin is longer than the registry's is refused, so that the wait after
-- a start or reset, which the registry reckons from its own settings, covers every lease it gives.
-- Returns how far ahead of the registry's clock ids may run, and that wait.
CREATE FUNCTION pg_idgen_node_lease_limits(s name, ttl_ms int, margin_ms int, OUT max_lead interval, OUT longest interval)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ttl interval;
    margin interval;
BEGIN
    EXECUTE pg_catalog.format('SELECT %1$I.pg_idgen_node_registry_setting(''pg_idgen.node_lease_ttl'', interval ''30 s''),
                                      %1$I.pg_idgen_node_registry_setting(''pg_idgen.node_lease_margin'', interval ''10 s''),
                                      %1$I.pg_idgen_node_registry_setting(''pg_idgen.node_lease_max_lead'', interval ''30 s'')', s)
        INTO ttl, margin, max_lead;
    IF pg_catalog.make_interval(secs => ttl_ms OPERATOR(pg_catalog./) 1000.0) OPERATOR(pg_catalog.>) ttl
       OR pg_catalog.make_interval(secs => margin_ms OPERATOR(pg_catalog./) 1000.0) OPERATOR(pg_catalog.>) margin THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('this server''s node id lease (%s ms, margin %s ms) is longer than the node registry allows (pg_idgen.node_lease_ttl %s, pg_idgen.node_lease_margin %s on its server)',
                                        ttl_ms, margin_ms, ttl, margin),
            HINT = 'Give the registry''s server a pg_idgen.node_lease_ttl and pg_idgen.node_lease_margin at least as long as those of every server that leases from it.';
    END IF;
    longest := ttl OPERATOR(pg_catalog.+) margin OPERATOR(pg_catalog.+) max_lead;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_limits(name, integer, integer) IS
    'Node registry, internal: refuses a lease longer than the registry''s own settings allow; returns the lead its ids may have and the registry''s wait after a start or reset.';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_lease_limits(name, integer, integer) FROM PUBLIC;

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
    -- it away in between and plant a look-alike (src/remote/session.rs, extension_schema).
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
    t text;
    began timestamptz;
    window_end timestamptz;
    other record;
    chosen int;
    longest interval;
    held_longest interval;
    reset_floor_us bigint;
    max_lead interval;
    own_longest interval;
    window_end_us bigint;
BEGIN
    IF s IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'pg_idgen''s schema in the node registry is owned by a role that is not a superuser';
    END IF;
    -- Why only now: formatting a NULL schema name would fail first, with another error.
    t := pg_catalog.format('%I.node_lease', s);
    IF holder IS NULL OR holder_name IS NULL OR layout IS NULL OR max_node_id IS NULL OR ttl_ms IS NULL
       OR margin_ms IS NULL OR ids_before_us IS NULL OR prefer IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'pg_idgen_node_lease_take(): only the wanted node id may be NULL';
    END IF;
    IF max_node_id NOT BETWEEN 0 AND 2147483646 OR wanted NOT BETWEEN 0 AND max_node_id
       OR ttl_ms NOT BETWEEN 3000 AND 3600000 OR margin_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pg_idgen_node_lease_take(): an argument is out of range';
    END IF;
    -- The commit must be durable before the lease is used, whatever the session or a pooler says.
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    EXECUTE pg_catalog.format('SELECT l.max_lead, l.longest FROM %I.pg_idgen_node_lease_limits($1, $2, $3) AS l', s)
        INTO max_lead, own_longest USING s, ttl_ms, margin_ms;
    -- The wait after a start or reset (see the top of this file): no node id, and the time from
    -- which to ask again in floor_us. Not even the row the server holds (an answer it lost): a
    -- registry set back may show it a row that another server took over after it, and that
    -- server's ids may lie ahead. Why an answer and not an error: an error would roll back the
    -- record of the reset, and the wait would start anew at every call.
    EXECUTE pg_catalog.format('SELECT r.began, r.longest, r.reset_floor_us FROM %I.pg_idgen_node_registry_began($1, $2) AS r', s)
        INTO began, longest, reset_floor_us
        USING s, own_longest;
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(l.reusable_at OPERATOR(pg_catalog.-) l.renewed_at) FROM %s l', t) INTO held_longest;
    -- The longest of: the registry's own lease, margin and lead (pg_idgen_node_lease_limits), any
    -- it has known, and any its rows show.
    window_end := began OPERATOR(pg_catalog.+) GREATEST(longest, held_longest OPERATOR(pg_catalog.+) max_lead);
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
        -- Why 55000 and not a refusal: the lead passes as the clock catches up.
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = pg_catalog.format('this server''s ids run ahead of the node registry''s clock by more than the lease and pg_idgen.node_lease_max_lead (%s)', max_lead),
            DETAIL = pg_catalog.format('Its next lease would cover ids up to %s s past the registry''s clock.',
                                       pg_catalog.round((ids_before_us::pg_catalog.numeric OPERATOR(pg_catalog.-) pg_catalog.extract('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000000)
                                                        OPERATOR(pg_catalog./) 1000000, 1)),
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
    -- it away in between and plant a look-alike (src/remote/session.rs, extension_schema).
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
    t text;
    renewed boolean;
    max_lead interval;
    own_longest interval;
    longest interval;
    other record;
BEGIN
    IF s IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'pg_idgen''s schema in the node registry is owned by a role that is not a superuser';
    END IF;
    -- Why only now: formatting a NULL schema name would fail first, with another error.
    t := pg_catalog.format('%I.node_lease', s);
    IF ttl_ms NOT BETWEEN 3000 AND 3600000 OR margin_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pg_idgen_node_lease_renew(): an argument is out of range';
    END IF;
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    EXECUTE pg_catalog.format('SELECT l.max_lead, l.longest FROM %I.pg_idgen_node_lease_limits($1, $2, $3) AS l', s)
        INTO max_lead, own_longest USING s, ttl_ms, margin_ms;
    -- A reset registry (rows lost) renews only the rows it still has.
    EXECUTE pg_catalog.format('SELECT r.longest FROM %I.pg_idgen_node_registry_began($1, $2) AS r', s)
        INTO longest
        USING s, own_longest;
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
    -- A holder's row gone, or older than what the registry confirmed to it: the registry lost
    -- commits without noticing (a copy swapped in under a running server, say). Count a reset,
    -- so that the ids other lost rows bounded are waited out too.
    IF renewed IS NULL THEN
        EXECUTE pg_catalog.format('SELECT l.holder, l.ids_before_us FROM %s l WHERE l.node_id OPERATOR(pg_catalog.=) $1', t)
            INTO other USING node_id;
        IF other IS NULL OR (other.holder OPERATOR(pg_catalog.=) holder AND other.ids_before_us OPERATOR(pg_catalog.<) committed_us) THEN
            EXECUTE pg_catalog.format('SELECT %I.pg_idgen_node_registry_reset($1, $2, $3, pg_catalog.clock_timestamp())', s)
                USING s, pg_catalog.format('the holder of node id %s found its row %s', node_id,
                                           CASE WHEN other IS NULL THEN 'gone' ELSE 'older than what the registry confirmed to it' END),
                      longest;
        END IF;
    END IF;
    EXECUTE pg_catalog.format('SELECT FROM %I.pg_idgen_node_registry_record($1)', s) USING s;
    RETURN COALESCE(renewed, false);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint, bigint) IS
    'Node registry: renews a node id lease its holder still has (called by the pg_idgen lease worker over libpq).';

-- Public numbers (src/mask/): the functions, the key table, its history and its triggers.
-- id_mask
CREATE  FUNCTION "id_mask"(
	"id" bigint, /* i64 */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_wrapper';
-- id_mask_base32
CREATE  FUNCTION "id_mask_base32"(
	"id" bigint, /* i64 */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS TEXT /* String */
STRICT STABLE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_mask_base32_wrapper';
-- id_mask_decimal
CREATE  FUNCTION "id_mask_decimal"(
	"id" bigint, /* i64 */
	"digits" INT, /* i32 */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS TEXT /* String */
STRICT STABLE PARALLEL RESTRICTED
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
STABLE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_unmask_wrapper';
-- id_unmask_base32
CREATE  FUNCTION "id_unmask_base32"(
	"masked" text, /* TextBytes */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_unmask_base32_wrapper';
-- id_unmask_decimal
CREATE  FUNCTION "id_unmask_decimal"(
	"masked" text, /* TextBytes */
	"purpose" text DEFAULT '' /* TextBytes */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL RESTRICTED
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

------------------------------------------------------------------------------------------------
-- Hints and names: a column converted already is said to be so (not "drop the default"), a tag
-- that exists is 42710 with a hint; the ObjectId functions' arguments get the names of the other
-- families' (id, ts, text). Adding a name to an unnamed argument keeps the function (its OID,
-- privileges and the objects that use it): CREATE OR REPLACE, not DROP.
------------------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION objectid_timestamp(id objectid) RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION objectid_min(ts timestamptz) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_min' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION objectid_from_base32(text text) RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_from_base32' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OR REPLACE FUNCTION idgen_internal.convert_column(table_name regclass, column_name name, family text,
                                        tag text, step int)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS $convert$
DECLARE
    caller      text := pg_catalog.format('%s_convert_column()', family);
    target      text;       -- "schema.table.column", for messages
    rel_kind    "char";
    col_attnum  smallint;
    col_type    oid;
    col_typmod  int;
    col_identity "char";
    col_generated "char";
    col_inherited int;
    default_oid  oid;
    default_expr text;
    sequences   regclass[] := '{}';
    identity_sequence regclass;
    identity_sequence_name text;    -- printed before DROP IDENTITY drops it
    seq         regclass;
    dep_type    "char";
    seq_last    bigint;
    seq_called  boolean;
    largest     bigint;     -- of the column's values and its sequences' handed-out numbers
    first_number bigint;
    must_advance boolean := false;
    widen       record;
    new_default text;
    others      text;
    alterations text[] := '{}';   -- one ALTER TABLE per table to widen, run once all are checked
    altered     regclass[];       -- the tables to widen
    widened_table regclass;
    widened     text[] := '{}';   -- what they widen, for the notices
    statement   text;
    next_id     bigint;
    generator   oid;        -- the function the new default must call
    converted_by oid;       -- pg_idgen's generator that the default calls already, if it does
BEGIN
    IF table_name IS NULL OR column_name IS NULL THEN
        RAISE EXCEPTION '%: table_name and column_name must not be NULL', caller
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF family IS NULL OR family NOT IN ('snowflake', 'segment') THEN
        RAISE EXCEPTION 'idgen_internal.convert_column: family must be snowflake or segment, not %', pg_catalog.quote_nullable(family)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Call snowflake_convert_column() or segment_convert_column().';
    END IF;
    IF family OPERATOR(pg_catalog.=) 'segment' AND tag IS NULL THEN
        RAISE EXCEPTION '%: tag must not be NULL', caller USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF family OPERATOR(pg_catalog.=) 'segment' THEN
        PERFORM idgen_internal.require_segments(caller);
    END IF;

    -- Why the kind before the lock: LOCK TABLE takes views too, and refuses sequences with a
    -- message that does not say what to give instead.
    SELECT c.relkind INTO rel_kind FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) table_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', table_name::oid USING ERRCODE = 'undefined_table';
    END IF;
    IF rel_kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', table_name
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = pg_catalog.format('It is %s.', CASE rel_kind
                      WHEN 'v' THEN 'a view' WHEN 'm' THEN 'a materialized view'
                      WHEN 'S' THEN 'a sequence' WHEN 'f' THEN 'a foreign table'
                      WHEN 'i' THEN 'an index' WHEN 'I' THEN 'a partitioned index'
                      WHEN 'c' THEN 'a composite type' WHEN 't' THEN 'a TOAST table'
                      ELSE 'not an ordinary or partitioned table' END),
                  HINT = CASE WHEN rel_kind IN ('v', 'm') THEN 'Convert the column of the table its rows come from.'
                              ELSE 'Give an ordinary or a partitioned table.' END;
    END IF;

    PERFORM idgen_internal.require_own_relation(table_name, caller);
    -- Why ACCESS EXCLUSIVE before anything is read: no insert can slip in between reading the
    -- largest value and switching the default (ALTER TABLE would take this lock anyway).
    EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', table_name);

    SELECT a.attnum, a.atttypid, a.atttypmod, a.attidentity, a.attgenerated, a.attinhcount
      INTO col_attnum, col_type, col_typmod, col_identity, col_generated, col_inherited
      FROM pg_catalog.pg_attribute AS a
     WHERE a.attrelid OPERATOR(pg_catalog.=) table_name
       AND a.attname OPERATOR(pg_catalog.=) column_name
       AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', column_name, table_name
            USING ERRCODE = 'undefined_column';
    END IF;
    target := pg_catalog.format('%s.%I', table_name, column_name);
    -- A column a partition or child inherits is its parent's: converting it here alone cannot
    -- work. Name the root (first parents up), which converts it with the rest.
    IF col_inherited OPERATOR(pg_catalog.>) 0 THEN
        WITH RECURSIVE up(relid, depth) AS (
            SELECT table_name::pg_catalog.oid, 0
            UNION ALL
            SELECT i.inhparent, u.depth OPERATOR(pg_catalog.+) 1 FROM up AS u
              JOIN pg_catalog.pg_inherits AS i
                ON i.inhrelid OPERATOR(pg_catalog.=) u.relid AND i.inhseqno OPERATOR(pg_catalog.=) 1
        )
        SELECT up.relid::pg_catalog.regclass::text INTO others FROM up ORDER BY up.depth DESC LIMIT 1;
        RAISE EXCEPTION 'column % is inherited from a parent table', target
            USING ERRCODE = 'wrong_object_type',
                  HINT = pg_catalog.format('Convert it at the root, %s: its partitions and children are converted with it.', others);
    END IF;
    IF col_attnum OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'column "%" of relation % is a system column', column_name, table_name
            USING ERRCODE = 'undefined_column',
                  HINT = 'Give the name of a column of your own.';
    END IF;
    IF col_generated OPERATOR(pg_catalog.<>) '' THEN
        RAISE EXCEPTION 'cannot convert % to %: it is a generated column', target,
                        CASE family WHEN 'snowflake' THEN 'snowflake ids' ELSE 'segment numbers' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its values are computed from other columns.';
    END IF;
    IF col_type NOT IN ('pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype,
                        'pg_catalog.int8'::pg_catalog.regtype) THEN
        RAISE EXCEPTION 'cannot convert % of type % to %', target,
                        pg_catalog.format_type(col_type, col_typmod),
                        CASE family WHEN 'snowflake' THEN 'snowflake ids' ELSE 'segment numbers' END
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Only smallint, integer and bigint columns can be converted; they become bigint.';
    END IF;

    -- The default must be a nextval() call, the only default whose values we can follow.
    SELECT d.oid, pg_catalog.pg_get_expr(d.adbin, d.adrelid)
      INTO default_oid, default_expr
      FROM pg_catalog.pg_attrdef AS d
     WHERE d.adrelid OPERATOR(pg_catalog.=) table_name AND d.adnum OPERATOR(pg_catalog.=) col_attnum;
    -- A default that calls pg_idgen's generator is a conversion done already: dropping it, as the
    -- refusal below says for other defaults, would undo it.
    SELECT d.refobjid INTO converted_by
      FROM pg_catalog.pg_depend AS d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) default_oid
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY[idgen_internal.snowflake_generator(), idgen_internal.segment_generator()])
     LIMIT 1;
    IF converted_by IS NOT NULL THEN
        RAISE EXCEPTION 'column % is converted already', target
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('Its default is %s.', default_expr),
                  HINT = CASE WHEN converted_by OPERATOR(pg_catalog.=) CASE family WHEN 'snowflake' THEN idgen_internal.snowflake_generator()
                                                                                   ELSE idgen_internal.segment_generator() END
                              THEN 'Nothing to convert: new rows take their values from that default.'
                              ELSE pg_catalog.format('To switch it to %s, drop that default first (ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT), then convert it.',
                                                     CASE family WHEN 'snowflake' THEN 'snowflake ids' ELSE 'segment numbers' END,
                                                     table_name, column_name) END;
    END IF;
    -- pg_get_expr() writes nextval('seq'::regclass), cast to the column's type if it is not bigint.
    IF default_expr IS NOT NULL AND default_expr OPERATOR(pg_catalog.!~)
       $re$^\(?nextval\('([^']|'')*'::regclass\)(\)::(smallint|integer|bigint))?$$re$ THEN
        RAISE EXCEPTION 'cannot convert %: its default is not a nextval() call', target
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('The default is %s.', default_expr),
                  HINT = pg_catalog.format('Drop the default first (ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT), then convert the column.',
                                           table_name, column_name);
    END IF;

    -- The column's sequences: its identity sequence, a sequence owned by it (serial), and any
    -- sequence its default calls.
    FOR seq, dep_type IN
        SELECT d.objid::pg_catalog.regclass, d.deptype
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_class AS s ON s.oid OPERATOR(pg_catalog.=) d.objid AND s.relkind OPERATOR(pg_catalog.=) 'S'
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) table_name
           AND d.refobjsubid OPERATOR(pg_catalog.=) col_attnum
           AND d.deptype IN ('a', 'i')
        UNION
        SELECT d.refobjid::pg_catalog.regclass, 'n'
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_class AS s ON s.oid OPERATOR(pg_catalog.=) d.refobjid AND s.relkind OPERATOR(pg_catalog.=) 'S'
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) default_oid
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
         ORDER BY 1
    LOOP
        IF dep_type OPERATOR(pg_catalog.=) 'i' THEN
            identity_sequence := seq;
        ELSIF NOT seq OPERATOR(pg_catalog.=) ANY (sequences) THEN
            sequences := pg_catalog.array_append(sequences, seq);
        END IF;
    END LOOP;

    FOREACH seq IN ARRAY pg_catalog.array_append(sequences, identity_sequence) LOOP
        CONTINUE WHEN seq IS NULL;
        PERFORM idgen_internal.require_ascending(seq);
    END LOOP;
    IF family OPERATOR(pg_catalog.=) 'segment' THEN
        -- A sequence left to hand out numbers would hand out the tag's: it is exhausted below,
        -- which a sequence that other columns use must not be.
        SELECT pg_catalog.string_agg(pg_catalog.format('%s (%s.%I)', d.refobjid::pg_catalog.regclass,
                                                       ad.adrelid::pg_catalog.regclass, a.attname), ', ')
          INTO others
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_attrdef AS ad ON ad.oid OPERATOR(pg_catalog.=) d.objid
          JOIN pg_catalog.pg_attribute AS a
            ON a.attrelid OPERATOR(pg_catalog.=) ad.adrelid AND a.attnum OPERATOR(pg_catalog.=) ad.adnum
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid::pg_catalog.regclass OPERATOR(pg_catalog.=) ANY (sequences)
           AND d.objid OPERATOR(pg_catalog.<>) default_oid
           -- The partitions and inheritance children of the table copy its default; the new
           -- default replaces theirs too.
           AND NOT (a.attname OPERATOR(pg_catalog.=) column_name AND ad.adrelid IN (
                   WITH RECURSIVE tree(relid) AS (
                       SELECT table_name::pg_catalog.oid
                       UNION
                       SELECT i.inhrelid FROM tree AS t
                         JOIN pg_catalog.pg_inherits AS i ON i.inhparent OPERATOR(pg_catalog.=) t.relid)
                   SELECT tree.relid FROM tree));
        IF others IS NOT NULL THEN
            RAISE EXCEPTION 'cannot convert % to segment numbers: its sequence is the default of other columns too', target
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = pg_catalog.format('Used by: %s. The conversion stops the sequence (the tag continues its numbers), which would break them.', others),
                      HINT = 'Give the other columns sequences of their own first, or convert this column to snowflake ids.';
        END IF;
        -- Why ALTER SEQUENCE first: it locks each sequence against nextval() until commit, so
        -- no number is handed out between reading the sequence and stopping it.
        FOREACH seq IN ARRAY pg_catalog.array_append(sequences, identity_sequence) LOOP
            CONTINUE WHEN seq IS NULL;
            PERFORM idgen_internal.require_own_relation(seq, caller);
            EXECUTE pg_catalog.format('ALTER SEQUENCE %s NO CYCLE', seq);
        END LOOP;
    END IF;

    -- Every new value must be above every existing one: the rows' (children and partitions
    -- included) and every number the column's sequences handed out, used or not.
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(%I)::pg_catalog.int8 FROM %s', column_name, table_name)
       INTO largest;
    FOREACH seq IN ARRAY pg_catalog.array_append(sequences, identity_sequence) LOOP
        CONTINUE WHEN seq IS NULL;
        -- By OID: a sequence only read need not be the caller's (NULL: never called).
        seq_last := pg_catalog.pg_sequence_last_value(seq);
        seq_called := seq_last IS NOT NULL;
        IF seq_called AND (largest IS NULL OR seq_last OPERATOR(pg_catalog.>) largest) THEN
            largest := seq_last;
        END IF;
    END LOOP;

    IF family OPERATOR(pg_catalog.=) 'snowflake' THEN
        -- Why snowflake_next() and not snowflake_min(clock_timestamp()): every later id of this
        -- server is above the id it returns now, exactly, also while the generator runs ahead of
        -- the wall clock or lags it (a forward step not followed yet). The id taken here is a
        -- gap, like a rolled-back insert's.
        next_id := idgen_internal.snowflake_next();
        must_advance := COALESCE(largest OPERATOR(pg_catalog.>=) next_id, false);
        IF must_advance AND NOT idgen_internal.may_advance_snowflake() THEN
            RAISE EXCEPTION 'permission denied for function snowflake_advance_past'
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = pg_catalog.format('The largest value of %s, %s, is not below the snowflake ids this server makes now: they must be advanced past it first.',
                                                 target, largest),
                      HINT = 'Ask a superuser to GRANT EXECUTE ON FUNCTION snowflake_advance_past(bigint) to you.';
        END IF;
        generator := idgen_internal.snowflake_generator();
        new_default := pg_catalog.format('%s()', generator::pg_catalog.regproc);
    ELSE
        first_number := GREATEST(largest, 0) OPERATOR(pg_catalog.+) 1;
        BEGIN
            PERFORM idgen_internal.segment_create(tag, first_number, step, pg_catalog.format('numbers of %s', target));
        EXCEPTION WHEN unique_violation OR duplicate_object THEN
            RAISE EXCEPTION 'segment tag "%" already exists', tag
                USING ERRCODE = 'duplicate_object',
                      HINT = pg_catalog.format('Choose another tag, or drop this one first with segment_drop(%L) if no table uses it.', tag);
        END;
        RAISE NOTICE 'created segment tag "%" starting at %', tag, first_number;
        generator := idgen_internal.segment_generator();
        new_default := pg_catalog.format('%s(%L::pg_catalog.text)', generator::pg_catalog.regproc, tag);
    END IF;

    IF col_identity OPERATOR(pg_catalog.<>) '' THEN
        identity_sequence_name := identity_sequence::text;
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', table_name, column_name);
        RAISE NOTICE 'dropped the identity of %, and its sequence %', target, identity_sequence_name;
    END IF;

    -- Widening: the column and every foreign-key column that references it, directly or through
    -- other foreign keys, become bigint: they will hold the new values too. Why conparentid = 0:
    -- the constraints a partitioned table's partitions inherit follow their parent's ALTER.
    FOR widen IN
        WITH RECURSIVE referencing(relid, attnum) AS (
            SELECT table_name::oid, col_attnum
            UNION
            SELECT c.conrelid, c.conkey[pg_catalog.array_position(c.confkey, r.attnum)]
              FROM referencing AS r
              JOIN pg_catalog.pg_constraint AS c
                ON c.confrelid OPERATOR(pg_catalog.=) r.relid
               AND r.attnum OPERATOR(pg_catalog.=) ANY (c.confkey)
             WHERE c.contype OPERATOR(pg_catalog.=) 'f' AND c.conparentid OPERATOR(pg_catalog.=) 0
        )
        SELECT r.relid::pg_catalog.regclass AS rel,
               pg_catalog.array_agg(a.attname ORDER BY a.attnum) AS columns,
               pg_catalog.array_agg(pg_catalog.format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum) AS types
          FROM referencing AS r
          JOIN pg_catalog.pg_attribute AS a
            ON a.attrelid OPERATOR(pg_catalog.=) r.relid AND a.attnum OPERATOR(pg_catalog.=) r.attnum
         WHERE a.atttypid IN ('pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype)
         GROUP BY r.relid
         ORDER BY r.relid OPERATOR(pg_catalog.<>) table_name::oid,
                  r.relid::pg_catalog.regclass::text COLLATE "C"
    LOOP
        altered := pg_catalog.array_append(altered, widen.rel);
        -- One ALTER TABLE per table: one rewrite, also when it references itself.
        alterations := pg_catalog.array_append(alterations, pg_catalog.format('ALTER TABLE %s %s', widen.rel,
            (SELECT pg_catalog.string_agg(pg_catalog.format('ALTER COLUMN %I TYPE pg_catalog.int8', c), ', ')
               FROM pg_catalog.unnest(widen.columns) AS c)));
        FOR i IN 1 .. pg_catalog.array_length(widen.columns, 1) LOOP
            widened := pg_catalog.array_append(widened, pg_catalog.format('%s.%I from %s', widen.rel,
                                                                          widen.columns[i], widen.types[i]));
        END LOOP;
    END LOOP;
    -- Why only tables of the converted table's owner: ALTER TABLE rewrites them, their partitions
    -- and inheritance children, running their CHECK constraints with the caller's privileges; a
    -- table the caller did not name, owned by a role that may only reference this one, must not
    -- get to run code as, say, a superuser.
    WITH RECURSIVE tree(relid) AS (
        SELECT r::pg_catalog.oid FROM pg_catalog.unnest(altered) AS r
        UNION
        SELECT i.inhrelid FROM tree AS t
          JOIN pg_catalog.pg_inherits AS i ON i.inhparent OPERATOR(pg_catalog.=) t.relid
    )
    SELECT pg_catalog.string_agg(pg_catalog.format('%s (owned by %s)', c.oid::pg_catalog.regclass,
                                                   c.relowner::pg_catalog.regrole), ', ' ORDER BY c.oid::pg_catalog.regclass::text COLLATE "C")
      INTO others
      FROM tree AS t JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) t.relid
     WHERE c.relowner OPERATOR(pg_catalog.<>)
           (SELECT o.relowner FROM pg_catalog.pg_class AS o WHERE o.oid OPERATOR(pg_catalog.=) table_name);
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'cannot widen % to bigint: tables that would be altered with it belong to other roles', target
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('They are %s: their foreign keys reference it, or they inherit from a table that is widened. Altered here, their constraints would run with your privileges.', others),
                  HINT = 'Their owners widen those columns first (ALTER TABLE … ALTER COLUMN … TYPE bigint), then convert again.';
    END IF;
    FOREACH widened_table IN ARRAY COALESCE(altered, ARRAY[]::pg_catalog.regclass[]) LOOP
        PERFORM idgen_internal.require_own_relation(widened_table, caller);
    END LOOP;
    FOREACH statement IN ARRAY alterations LOOP
        EXECUTE statement;
    END LOOP;
    FOREACH statement IN ARRAY widened LOOP
        RAISE NOTICE 'widened % to bigint', statement;
    END LOOP;

    EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', table_name, column_name, new_default);
    -- Why check: the default was parsed from a name, after the waits for locks; a schema renamed
    -- meanwhile could have given it a planted function. It must call the generator alone, by OID.
    IF (SELECT pg_catalog.array_agg(DISTINCT d.refobjid) FROM pg_catalog.pg_attrdef AS ad
          JOIN pg_catalog.pg_depend AS d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                                         AND d.objid OPERATOR(pg_catalog.=) ad.oid
                                         AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
         WHERE ad.adrelid OPERATOR(pg_catalog.=) table_name AND ad.adnum OPERATOR(pg_catalog.=) col_attnum)
       IS DISTINCT FROM ARRAY[generator] THEN
        RAISE EXCEPTION 'the new default of % does not call pg_idgen''s %', target, generator::pg_catalog.regprocedure
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('It is %s: the extension''s schema was renamed while the conversion waited, and a function of that name planted.', new_default),
                  HINT = 'Nothing was converted. Find out who renamed the schema.';
    END IF;
    RAISE NOTICE 'default of % is now %', target, new_default;
    FOREACH seq IN ARRAY sequences LOOP
        IF family OPERATOR(pg_catalog.=) 'segment' THEN
            PERFORM idgen_internal.stop_sequence(seq);
            RAISE NOTICE 'sequence % is stopped (nextval() on it fails: tag "%" continues its numbers); drop it once nothing uses it', seq, tag;
        ELSE
            RAISE NOTICE 'sequence % is left in place; drop it once nothing else uses it', seq;
        END IF;
    END LOOP;

    IF must_advance THEN
        -- Last: it is not undone by a rollback, so every step that could fail comes before it.
        PERFORM idgen_internal.snowflake_advance_past(largest);
        RAISE NOTICE 'advanced snowflake ids past %, the largest value of %', largest, target;
    ELSIF family OPERATOR(pg_catalog.=) 'snowflake' AND largest IS NOT NULL THEN
        RAISE NOTICE 'snowflake ids are above every value of % already (the largest is %)', target, largest;
    END IF;
END
$convert$;

CREATE OR REPLACE FUNCTION segment_create_from_sequence(tag text, sequence_name regclass, step int DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel_kind     "char";
    increment    bigint;
    seq_max      bigint;
    seq_last     bigint;
    seq_called   boolean;
    first_number bigint;
BEGIN
    IF tag IS NULL OR sequence_name IS NULL THEN
        RAISE EXCEPTION 'segment_create_from_sequence: tag and sequence_name must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM idgen_internal.require_segments('segment_create_from_sequence()');
    SELECT c.relkind INTO rel_kind FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) sequence_name;
    IF rel_kind IS DISTINCT FROM 'S' THEN
        RAISE EXCEPTION '% is not a sequence', sequence_name USING ERRCODE = 'wrong_object_type';
    END IF;
    PERFORM idgen_internal.require_ascending(sequence_name);
    PERFORM idgen_internal.require_own_relation(sequence_name, 'segment_create_from_sequence()');
    SELECT s.seqincrement, s.seqmax INTO increment, seq_max FROM pg_catalog.pg_sequence AS s
     WHERE s.seqrelid OPERATOR(pg_catalog.=) sequence_name;
    -- Why ALTER SEQUENCE first: it locks the sequence against nextval() until commit, so no
    -- number is handed out between reading it and stopping it.
    EXECUTE pg_catalog.format('ALTER SEQUENCE %s NO CYCLE', sequence_name);
    -- The sequence's next value: the one its next nextval() would return.
    EXECUTE pg_catalog.format('SELECT last_value, is_called FROM %s', sequence_name) INTO seq_last, seq_called;
    IF seq_called AND seq_last OPERATOR(pg_catalog.>) (seq_max OPERATOR(pg_catalog.-) increment) THEN
        RAISE EXCEPTION 'sequence % has no next value', sequence_name
            USING ERRCODE = 'sequence_generator_limit_exceeded',
                  DETAIL = pg_catalog.format('It handed out its maximum, %s (or a segment tag continues it already).', seq_max);
    END IF;
    first_number := CASE WHEN seq_called THEN seq_last OPERATOR(pg_catalog.+) increment ELSE seq_last END;
    BEGIN
        PERFORM idgen_internal.segment_create(tag, first_number, step, pg_catalog.format('continues sequence %s', sequence_name));
    EXCEPTION WHEN unique_violation OR duplicate_object THEN
        RAISE EXCEPTION 'segment tag "%" already exists', tag
            USING ERRCODE = 'duplicate_object',
                  HINT = pg_catalog.format('Choose another tag, or drop this one first with segment_drop(%L) if no table uses it.', tag);
    END;
    PERFORM idgen_internal.stop_sequence(sequence_name);
    RAISE NOTICE 'sequence % is stopped (nextval() on it fails: tag "%" continues its numbers)', sequence_name, tag;
    RETURN first_number;
END
$$;

------------------------------------------------------------------------------------------------
-- The extension's comment names every family (CREATE EXTENSION takes it from the control file;
-- ALTER EXTENSION UPDATE does not).
------------------------------------------------------------------------------------------------
COMMENT ON EXTENSION pg_idgen IS 'Unique ids made inside PostgreSQL: Snowflake, segment numbers, per-key sequences, ObjectId, UUIDv7, and their decoders';

------------------------------------------------------------------------------------------------
-- Per-key sequences, text keys (src/seq/text_key.rs): a space made from now on hashes its text
-- keys with SipHash-2-4 under a secret of its own, kept in seq_space_secret; the spaces that
-- exist keep their unkeyed hash (text_key_hash = 'fnv-1a', the column's default), or their text
-- keys would start again below the numbers they were given. seq_key(text), which had no space,
-- gives way to seq_key(space, key). The drop fails, and with it the update, while a view, an
-- index or a column default uses seq_key(text): replace it with seq_key('space', key) first.
------------------------------------------------------------------------------------------------
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
