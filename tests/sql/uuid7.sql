-- uuid_v7_next() and decoding of UUIDs.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- Version 7, RFC variant, increasing, the time is now.
CREATE TABLE items (n int, id uuid DEFAULT uuid_v7_next());
INSERT INTO items (n) SELECT g FROM generate_series(1, 10000) AS g;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids FROM items;
SELECT bool_and(substr(id::text, 15, 1) = '7') AS version_7,
       bool_and(substr(id::text, 20, 1) IN ('8', '9', 'a', 'b')) AS rfc_variant
  FROM items;
SELECT bool_and(id > previous) AS strictly_increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS previous FROM items) AS p;
SELECT bool_and((id_decode(id)).ts BETWEEN now() - interval '1 minute' AND clock_timestamp()) AS made_now
  FROM items;
SELECT DISTINCT (id_decode(id)).version FROM items;

-- Decoding known values. v7: 0x017F22E279B0 ms = 2022-02-22 19:22:22 UTC (RFC 9562 appendix A.6).
SELECT * FROM id_decode('017f22e2-79b0-7cc3-98c4-dc0c0c07398f'::uuid);
-- v1 and v6 of the RFC's examples (A.1, A.5): the same instant, 2022-02-22 19:22:22 UTC.
SELECT * FROM id_decode('c232ab00-9414-11ec-b3c8-9f6bdeced846'::uuid);
SELECT * FROM id_decode('1ec9414c-232a-6b00-b3c8-9f6bdeced846'::uuid);
-- v4 has no time; neither do the nil and max UUIDs.
SELECT * FROM id_decode('919108f7-52d1-4320-9bac-f847db4148a8'::uuid);
SELECT * FROM id_decode('00000000-0000-0000-0000-000000000000'::uuid);
SELECT * FROM id_decode('ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid);
SELECT id_decode(NULL::uuid) IS NULL AS null_row;

-- The smallest UUIDv7 of a millisecond, for range scans.
SELECT uuid_v7_min('2022-02-22 19:22:22+00');
SELECT uuid_v7_min('2022-02-22 19:22:22.000999+00') AS same_millisecond;
SELECT uuid_v7_min('2022-02-22 19:22:22+00') <= '017f22e2-79b0-7cc3-98c4-dc0c0c07398f' AS at_or_below;
SELECT uuid_v7_min('1970-01-01 00:00:00+00');
SELECT uuid_v7_min('1969-12-31 23:59:59+00');
SELECT uuid_v7_min('infinity');
CREATE INDEX items_id ON items (id);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM items WHERE id >= uuid_v7_min(now() - interval '1 hour');
RESET enable_seqscan;
SELECT count(*) AS last_hour FROM items WHERE id >= uuid_v7_min(now() - interval '1 hour');

SELECT p.oid::regprocedure, provolatile, proparallel
  FROM pg_proc AS p
 WHERE proname IN ('uuid_v7_next', 'uuid_v7_min', 'uuid_v7_timestamp')
    OR (proname = 'id_decode' AND proargtypes[0] = 'uuid'::regtype)
 ORDER BY p.oid::regprocedure::text COLLATE "C";  -- by name, the same in every locale
