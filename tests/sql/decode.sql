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

-- IMMUTABLE decoding: the layout as arguments (epoch; time unit in ms, node bits and sequence
-- bits default to twitter's). The same answer as the server's layout gives, for its layout.
SELECT snowflake_timestamp(s, '2025-01-01+00') = snowflake_timestamp(s) AS same_time,
       snowflake_min('2026-03-04 05:06:07.089+00', '2025-01-01+00') = snowflake_min('2026-03-04 05:06:07.089+00') AS same_min
  FROM (SELECT snowflake_next() AS s) AS n;
-- Another layout: 39 bits of 10 ms, 16 node bits, 8 sequence bits (sonyflake), from 2014-09-01.
SELECT snowflake_timestamp((1000::bigint << 24) | (5 << 8) | 3, '2014-09-01+00', 10, 16, 8) AS sonyflake_10_s;
SELECT snowflake_min('2014-09-01 00:00:10+00', '2014-09-01+00', time_unit_ms => 10, node_bits => 16, sequence_bits => 8)
       = 1000::bigint << 24 AS sonyflake_min;
-- Bad layouts and times are errors (22023, 22008), never a wrong time.
SELECT snowflake_timestamp(1, '2025-01-01+00', 0);
SELECT snowflake_timestamp(1, '2025-01-01+00', 1, 32, 12);
SELECT snowflake_timestamp(1, '2025-01-01+00', 1, 10, 0);
SELECT snowflake_timestamp(1, '2025-01-01+00', 1, -1, 12);
SELECT snowflake_timestamp(1, 'infinity');
SELECT snowflake_timestamp(9223372036854775807, '2025-01-01+00', 86400000, 0, 1);
SELECT snowflake_timestamp(-1, '2025-01-01+00');
SELECT snowflake_min('2024-12-31+00', '2025-01-01+00');
SELECT sqlstate_of($$SELECT snowflake_timestamp(1, '2025-01-01+00', 0)$$) AS bad_unit,
       sqlstate_of($$SELECT snowflake_min('2024-12-31+00', '2025-01-01+00')$$) AS before_epoch;
SELECT p.oid::regprocedure, provolatile, proparallel, proisstrict
  FROM pg_proc AS p
 WHERE proname IN ('snowflake_timestamp', 'snowflake_min') AND pronargs = 5
 ORDER BY p.oid::regprocedure::text COLLATE "C";

-- What IMMUTABLE allows: an expression index, a stored generated column, and range partitions
-- by the time inside the id, whose bounds are ids (snowflake_min of each month) so that a query
-- on id ranges is pruned to the partitions of its months.
CREATE TABLE readings (id bigint NOT NULL DEFAULT snowflake_next(), value int,
                       made timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id, '2025-01-01+00')) STORED)
    PARTITION BY RANGE (id);
CREATE TABLE readings_2026_11 PARTITION OF readings
    FOR VALUES FROM (snowflake_min('2026-11-01+00', '2025-01-01+00')) TO (snowflake_min('2026-12-01+00', '2025-01-01+00'));
CREATE TABLE readings_2026_12 PARTITION OF readings
    FOR VALUES FROM (snowflake_min('2026-12-01+00', '2025-01-01+00')) TO (snowflake_min('2027-01-01+00', '2025-01-01+00'));
CREATE TABLE readings_later PARTITION OF readings DEFAULT;
CREATE INDEX ON readings ((snowflake_timestamp(id, '2025-01-01+00')));
INSERT INTO readings (id, value)
SELECT snowflake_from_parts(ts, 1, 0), 1
  FROM (VALUES ('2026-11-15+00'::timestamptz), ('2026-12-24+00'), ('2027-02-01+00')) AS v(ts);
SELECT tableoid::regclass AS partition, made FROM readings ORDER BY id;
EXPLAIN (COSTS OFF)
SELECT * FROM readings WHERE id >= snowflake_min('2026-12-01+00', '2025-01-01+00') AND id < snowflake_min('2026-12-02+00', '2025-01-01+00');
DROP TABLE readings;
