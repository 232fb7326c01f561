-- Decoders, with the default layout (twitter 41/10/12, 1 ms) and epoch 2025-01-01 00:00:00+00.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- 1000 ms after the epoch, node 5, sequence 42: (1000 << 22) | (5 << 12) | 42.
SELECT (1000::bigint << 22) | (5 << 12) | 42 AS id;
SELECT * FROM id_decode(4194324522);
SELECT (id_decode(4194324522)).ts, (id_decode(4194324522)).node_id, (id_decode(4194324522)).sequence;

-- The smallest and the largest id.
SELECT * FROM id_decode(0);
SELECT * FROM id_decode(9223372036854775807);

-- Millisecond precision, no truncation: one tick apart is one millisecond apart.
SELECT snowflake_timestamp(4194304000 + (1 << 22)) - snowflake_timestamp(4194304000) AS one_tick;
SELECT snowflake_timestamp(4194324522);

-- A NULL id decodes to NULL and keeps its row.
SELECT id, (id_decode(id)).ts, snowflake_timestamp(id)
  FROM (VALUES (NULL::bigint), (4194324522)) AS v(id);
SELECT id_decode(NULL::bigint) IS NULL AS null_row;

-- Negative numbers are never snowflake ids.
SELECT id_decode(-1);
SELECT snowflake_timestamp(-4194324522);
SELECT sqlstate_of('SELECT id_decode(-1)');

-- The smallest id of a time, for range scans.
SELECT snowflake_min_id('2025-01-01 00:00:01+00');
SELECT snowflake_min_id('2025-01-01 00:00:01.000999+00') AS same_millisecond;
SELECT snowflake_min_id('2025-01-01 00:00:00+00') AS at_the_epoch;
SELECT snowflake_min_id(snowflake_timestamp(4194324522)) <= 4194324522 AS at_or_below_the_id;
SELECT snowflake_min_id(NULL) IS NULL AS null_in_null_out;
SELECT snowflake_min_id('2024-12-31 23:59:59.999+00');
SELECT snowflake_min_id('2100-01-01 00:00:00+00');
SELECT snowflake_min_id('infinity');
SELECT sqlstate_of($$SELECT snowflake_min_id('2024-12-31')$$);

-- It is what makes "ids of the last day" an index range scan.
CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_next(), payload text);
INSERT INTO events (payload) SELECT 'event ' || g FROM generate_series(1, 1000) AS g;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM events WHERE id >= snowflake_min_id(now() - interval '1 day');
RESET enable_seqscan;
SELECT count(*) AS last_day FROM events WHERE id >= snowflake_min_id(now() - interval '1 day');
SELECT count(*) AS from_tomorrow FROM events WHERE id >= snowflake_min_id(now() + interval '1 day');

-- They read the server's layout, a setting: STABLE, not IMMUTABLE. Safe in parallel workers.
SELECT p.oid::regprocedure, provolatile, proparallel, proisstrict
  FROM pg_proc AS p
 WHERE proname IN ('id_decode', 'snowflake_timestamp', 'snowflake_min_id', 'snowflake_min')
 ORDER BY p.oid::regprocedure::text COLLATE "C";  -- by name, the same in every locale

-- The family grammar: snowflake_min is snowflake_min_id under the grammar's name.
SELECT snowflake_min('2025-01-01 00:00:01+00') = snowflake_min_id('2025-01-01 00:00:01+00') AS same;
SELECT sqlstate_of($$SELECT snowflake_min('2024-12-31')$$);

-- uuid_v7_timestamp: the millisecond of a UUIDv7; any other UUID is an error.
SELECT uuid_v7_timestamp('01936f2e-8c4b-7abc-8def-0123456789ab');
SELECT uuid_v7_timestamp(uuid_v7_min('2026-01-02 03:04:05.678+00')) = '2026-01-02 03:04:05.678+00' AS round_trip;
SELECT uuid_v7_timestamp(NULL) IS NULL AS null_in_null_out;
SELECT sqlstate_of($$SELECT uuid_v7_timestamp('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')$$) AS version_4;
SELECT uuid_v7_timestamp('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11');
