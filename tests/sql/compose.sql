-- Ids for a given time, or from given parts: made from their arguments and random bits, not by
-- the generators. The server runs with node id 7 and the twitter layout from 2025-01-01.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- snowflake_from_parts(ts, node_id, sequence): the tick of ts (rounded down), as id_decode reads it.
SELECT snowflake_from_parts('2025-01-01 00:00:00.005+00', 3, 2) = (5::bigint << 22) | (3 << 12) | 2 AS bits;
SELECT * FROM id_decode(snowflake_from_parts('2026-05-06 07:08:09.0109+00', 1023, 4095));
SELECT snowflake_from_parts('2026-05-06+00', 1) = snowflake_from_parts('2026-05-06+00', 1, 0) AS sequence_defaults_to_0;
-- Outside the layout: errors (22003, 22008), never a wrong id.
SELECT snowflake_from_parts(now(), 1024);
SELECT snowflake_from_parts(now(), -1);
SELECT snowflake_from_parts(now(), 0, 4096);
SELECT snowflake_from_parts('2024-12-31+00', 0);
SELECT snowflake_from_parts('infinity', 0);
SELECT sqlstate_of($$SELECT snowflake_from_parts(now(), 1024)$$) AS bad_node,
       sqlstate_of($$SELECT snowflake_from_parts('2024-12-31+00', 0)$$) AS before_epoch;
-- Composing does not move the generator: the next id is of now, not of a composed future time.
SELECT snowflake_from_parts('2090-01-01+00', 7) > 0 AS composed;
SELECT snowflake_timestamp(snowflake_next()) < '2090-01-01+00' AS generator_unmoved;

-- uuid_v7_at(ts) and objectid_at(ts): the time of ts, the rest random.
SELECT uuid_v7_timestamp(uuid_v7_at('2026-01-02 03:04:05.6789+00')) AS uuid_ms,
       (id_decode(uuid_v7_at(now()))).version AS version,
       objectid_timestamp(objectid_at('2026-01-02 03:04:05.6789+00')) AS objectid_second;
SELECT count(DISTINCT uuid_v7_at('2026-01-02+00')) AS distinct_uuids,
       count(DISTINCT objectid_at('2026-01-02+00')) AS distinct_objectids
  FROM generate_series(1, 1000);
SELECT uuid_v7_at('1969-12-31 23:59:59+00');
SELECT objectid_at('2106-02-07 06:28:16+00');
SELECT objectid_at('-infinity');
SELECT sqlstate_of($$SELECT uuid_v7_at('1969-12-31+00')$$) AS before_1970;
SELECT p.oid::regprocedure, provolatile, proparallel, proisstrict
  FROM pg_proc AS p
 WHERE proname IN ('snowflake_from_parts', 'uuid_v7_at', 'objectid_at')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
