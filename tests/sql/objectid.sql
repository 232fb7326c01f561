-- The objectid type and objectid_gen().
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- Text input: 24 hex digits in either case; output is lowercase.
SELECT '65678901AABBCCDDEE001122'::objectid AS from_upper, '65678901aabbccddee001122'::objectid AS from_lower;
SELECT 'ffffffffffffffffffffffff'::objectid AS largest, '000000000000000000000000'::objectid AS smallest;

-- Bad input quotes what it was given (SQLSTATE 22P02).
SELECT ''::objectid;
SELECT '65678901aabbccddee00112'::objectid;
SELECT '65678901aabbccddee0011223'::objectid;
SELECT '65678901aabbccddee00112g'::objectid;
SELECT ' 65678901aabbccddee001122'::objectid;
SELECT sqlstate_of($$SELECT 'xyz'::objectid$$);

-- Fixed length: 12 bytes, not a varlena.
SELECT typlen, typbyval, typalign, typstorage FROM pg_type WHERE typname = 'objectid';
SELECT pg_column_size('65678901aabbccddee001122'::objectid) AS bytes;

-- Casts to and from bytea and text.
SELECT '65678901aabbccddee001122'::objectid::bytea;
SELECT '\x65678901aabbccddee001122'::bytea::objectid;
SELECT '\x6567'::bytea::objectid;
SELECT sqlstate_of($$SELECT '\x6567'::bytea::objectid$$);
SELECT '65678901aabbccddee001122'::text::objectid::text;

-- Operators and ordering: byte order, which puts earlier seconds first.
SELECT a, b, a = b AS eq, a <> b AS ne, a < b AS lt, a <= b AS le, a > b AS gt, a >= b AS ge
  FROM (VALUES ('65678901aabbccddee001122'::objectid, '65678901aabbccddee001123'::objectid),
               ('65678901aabbccddee001122', '65678901aabbccddee001122'),
               ('656789020000000000000000', '65678901ffffffffffffffff')) AS v(a, b);
SELECT id FROM (VALUES ('65678902000000000000000a'::objectid), ('65678901ffffffffffffffff'),
                       ('00000000000000000000ffff')) AS v(id) ORDER BY id;

-- Generated ids: unique, increasing, their time is now.
CREATE TABLE docs (id objectid PRIMARY KEY DEFAULT objectid_gen(), body text);
INSERT INTO docs (body) SELECT 'doc ' || g FROM generate_series(1, 10000) AS g;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids FROM docs;
SELECT bool_and(id > previous) AS strictly_increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY body_n) AS previous
          FROM (SELECT id, substr(body, 5)::int AS body_n FROM docs) AS d) AS p;
SELECT bool_and(objectid_timestamp(id) BETWEEN date_trunc('second', now()) - interval '1 minute' AND clock_timestamp())
       AS made_now
  FROM docs;
SELECT count(DISTINCT (id_decode(id)).random) AS random_parts FROM docs;

-- Btree index: equality and range scans use it.
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM docs WHERE id = '65678901aabbccddee001122';
EXPLAIN (COSTS OFF) SELECT count(*) FROM docs WHERE id >= objectid_min(now() - interval '1 hour');
RESET enable_seqscan;
SELECT count(*) AS last_hour FROM docs WHERE id >= objectid_min(now() - interval '1 hour');

-- Hash index and hash join.
CREATE INDEX docs_id_hash ON docs USING hash (id);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM docs WHERE id = '65678901aabbccddee001122';
RESET enable_seqscan;
SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM docs AS a JOIN docs AS b USING (id);
SELECT count(*) AS joined FROM docs AS a JOIN docs AS b USING (id);
RESET enable_mergejoin;
RESET enable_nestloop;
SELECT count(*) AS hash_partitions_agree
  FROM (SELECT satisfies_hash_partition('docs'::regclass, 1, 0, id) FROM docs LIMIT 1) AS s;

-- COPY BINARY round trip goes through send/receive. Why a file in the data directory: it goes
-- with the test's cluster, and no two runs on one machine share it.
CREATE TEMP TABLE docs_copy (id objectid, body text);
DO $$
DECLARE
    file text := pg_catalog.current_setting('data_directory') || '/pg_idgen_regress_objectid.bin';
BEGIN
    EXECUTE pg_catalog.format('COPY docs TO %L WITH (FORMAT binary)', file);
    EXECUTE pg_catalog.format('COPY docs_copy FROM %L WITH (FORMAT binary)', file);
END
$$;
SELECT count(*) AS copied, count(*) FILTER (WHERE d.id = c.id AND d.body = c.body) AS identical
  FROM docs AS d JOIN docs_copy AS c USING (body);

-- Decoding, against a known value: 0x65678901 seconds = 2023-11-29 18:54:57 UTC.
SELECT * FROM id_decode('65678901aabbccddee001122'::objectid);
SELECT objectid_timestamp('65678901aabbccddee001122');
SELECT objectid_min('2023-11-29 18:54:57.999+00');
SELECT objectid_min('1970-01-01 00:00:00+00');
SELECT objectid_min('1969-12-31 23:59:59+00');
SELECT objectid_min('2106-02-07 06:28:16+00');
SELECT objectid_min('infinity');
-- Their arguments have names, as the other families' do (id, ts, text).
SELECT objectid_timestamp(id => '65678901aabbccddee001122') AS ts, objectid_min(ts => '2023-11-29 18:54:57+00') AS min,
       objectid_from_base32(text => '0SB7H40TNEYCVQQ00492') AS from_base32;
SELECT id_decode(NULL::objectid) IS NULL AS null_row, objectid_timestamp(NULL) IS NULL AS null_ts;

SELECT p.oid::regprocedure, provolatile, proparallel
  FROM pg_proc AS p
 WHERE proname IN ('objectid_gen', 'objectid_next', 'objectid_timestamp', 'objectid_min')
    OR (proname = 'id_decode' AND proargtypes[0] = 'objectid'::regtype)
 ORDER BY p.oid::regprocedure::text COLLATE "C";  -- by name, the same in every locale

-- objectid_next is the grammar's name for objectid_gen: one sequence of ObjectIds between them.
SELECT objectid_gen() < objectid_next() AS next_after_gen, objectid_next() < objectid_gen() AS gen_after_next;

-- min() and max(), as for every ordered type; they read the end of a btree index.
CREATE TABLE sorted (id objectid PRIMARY KEY);
INSERT INTO sorted VALUES ('65678901aabbccddee001122'), ('65678902000000000000000a'), ('00000000000000000000ffff');
SELECT min(id), max(id), min(id) < max(id) AS ordered FROM sorted;
SELECT min(id) IS NULL AND max(id) IS NULL AS empty_is_null FROM sorted WHERE false;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT max(id) FROM sorted;
RESET enable_seqscan;
-- Btree deduplication is allowed (equal ObjectIds are equal bytes), as for uuid.
SELECT amproc::regproc FROM pg_amproc
 WHERE amprocfamily = (SELECT opcfamily FROM pg_opclass WHERE opcname = 'objectid_ops') AND amprocnum = 4;

-- BRIN: minmax by default (ObjectIds made in time order), bloom for equality.
CREATE TABLE logged (id objectid NOT NULL DEFAULT objectid_next(), n int);
INSERT INTO logged (n) SELECT g FROM generate_series(1, 5000) AS g;
CREATE INDEX logged_brin ON logged USING brin (id) WITH (pages_per_range = 4);
CREATE INDEX logged_bloom ON logged USING brin (id objectid_bloom_ops);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM logged WHERE id >= objectid_min(now() - interval '1 minute');
RESET enable_seqscan;
SELECT count(*) = 5000 AS found_by_brin FROM logged WHERE id >= objectid_min(now() - interval '1 hour');
-- Equality through the bloom index alone.
DROP INDEX logged_brin;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT n FROM logged WHERE id = '65678901aabbccddee001122';
SELECT count(*) AS found_by_bloom FROM logged WHERE id = (SELECT id FROM logged WHERE n = 4321);
RESET enable_seqscan;
DROP TABLE logged, sorted;
