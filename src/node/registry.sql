------------------------------------------------------------------------------------------------
-- The node registry: in the database that pg_idgen.node_registry names, one row per node id
-- that a server leased (src/node/mod.rs). Every database with the extension has the table; only
-- the one the servers point at is used. pg_dump carries the rows.
--
-- What it promises: a node id is handed to a server only with a floor above every id made with
-- it before. A row's ids_before_us bounds the ids of its holders only while the registry keeps
-- every write: a registry that started (it may be a copy restored from a backup or a snapshot)
-- or found itself reset (rows lost, set back or rewritten, a new timeline: node_registry_state)
-- may hold rows older than the truth, and lack rows. What bounds the ids it cannot see is its
-- own clock and its own configuration: it gives no lease longer than its server's
-- pg_idgen.node_lease_ttl and node_lease_margin, and never records an ids_before_us more than
-- the lease and its pg_idgen.node_lease_max_lead ahead of its clock, so every id made before its
-- start or reset is of a time before that moment plus its lease, margin and lead (or the longest
-- it has known). For that long it gives no node id to a server that does not hold one (holders
-- renew), and every floor it hands out afterwards is at least the end of that wait. What it
-- cannot see: its clock behind by more than the margin when it starts or is reset.
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

-- The registry's memory of its own continuity. Rows of node_lease are never deleted, only expired:
-- a node id without a row was never leased, and may be handed out at once. That holds only while
-- the table keeps every row and every renewal, so this row records which file the table was in,
-- how many rows it had, the sum of their renewal times (renewals only move them forward), the
-- server's WAL timeline, the database and the server's start. A table emptied, rewritten or set
-- back under the registry (DELETE, TRUNCATE, DROP and CREATE EXTENSION, pg_restore --clean or
-- --data-only of an older dump, VACUUM FULL), a registry promoted from a standby (a new
-- timeline), a database copied from it (CREATE DATABASE … TEMPLATE), a start of its server (it
-- may be a restored copy), or a holder whose renewal finds its row older than what the registry
-- confirmed to it: each counts as a reset (see the top of this file). Why not in pg_dump: a
-- restored copy would describe another file, which is what it must not do (so a restore is a
-- reset too).
CREATE TABLE node_registry_state (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    lease_file oid NOT NULL,            -- pg_relation_filenode(node_lease) when its rows were last known whole
    lease_rows bigint NOT NULL,         -- how many rows it had then
    renewed_sum numeric NOT NULL,       -- the sum of their renewed_at, in seconds since 1970
    timeline   text NOT NULL,           -- the WAL timeline the registry wrote them on
    ids_before_us bigint NOT NULL,      -- the largest ids_before_us any row has held
    reset_floor_us bigint NOT NULL,     -- that, when the registry was last found reset: lost rows' ids lie below
    reset_at   timestamptz NOT NULL,    -- when the registry began: created, or found reset (its wait runs from here)
    longest    interval NOT NULL,       -- the longest lease, margin and lead (node_lease_max_lead) it has given
    database_oid oid NOT NULL,          -- the database the rows were written in
    server_started timestamptz          -- pg_postmaster_start_time() of the server that wrote them
);
INSERT INTO node_registry_state (only_row, lease_file, lease_rows, renewed_sum, timeline, ids_before_us, reset_floor_us,
                                 reset_at, longest, database_oid, server_started)
    SELECT true, pg_catalog.pg_relation_filenode('@extschema@.node_lease'::pg_catalog.regclass), 0, 0,
           pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8), 0, 0, pg_catalog.clock_timestamp(), interval '0',
           (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()),
           pg_catalog.pg_postmaster_start_time();
COMMENT ON TABLE node_registry_state IS
    'The node registry''s record of node_lease being whole (used in the database pg_idgen.node_registry names).';

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
CREATE FUNCTION pg_idgen_node_registry_began(s name, lease interval, OUT began timestamptz, OUT longest interval, OUT reset_floor_us bigint)
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

-- Records node_lease as whole after the registry's own change of it (a lease taken or renewed).
CREATE FUNCTION pg_idgen_node_registry_record(s name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE pg_catalog.format('UPDATE %1$I.node_registry_state AS r SET (lease_rows, renewed_sum, ids_before_us) =
                                 (SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(pg_catalog.extract(''epoch'', l.renewed_at)), 0),
                                         GREATEST(r.ids_before_us, pg_catalog.max(l.ids_before_us))
                                    FROM %1$I.node_lease l)', s);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_registry_record(name) IS
    'Node registry, internal: records node_lease as whole after a lease was taken or renewed.';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_registry_record(name) FROM PUBLIC;

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
CREATE FUNCTION pg_idgen_node_lease_take(
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
CREATE FUNCTION pg_idgen_node_lease_renew(holder text, node_id int, ttl_ms int, margin_ms int, ids_before_us bigint, committed_us bigint)
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

-- Only the role the lease workers connect as may lease (GRANT EXECUTE to it); both functions run
-- as the extension's owner, so that role needs no right on the table.
REVOKE EXECUTE ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint, bigint) FROM PUBLIC;
