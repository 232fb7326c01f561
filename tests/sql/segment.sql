-- Segment numbers: dense, increasing numbers per tag. The worker serves database "postgres".
-- A session's very first call with an empty tag is refused at once.
\c -
SELECT segment_next('');
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- A tag starts at 1 by default; `start` lets a table continue from its existing max id.
SELECT segment_create('invoice');
SELECT segment_create('order', start => 5000, step => 100, description => 'orders, migrated from a sequence');
SELECT tag, max_id, step, description FROM segment_tag ORDER BY tag;

SELECT segment_next('invoice') AS first, segment_next('invoice') AS second;
SELECT segment_next('order') AS continues_at_start;

-- Dense and increasing within a statement, over many ranges.
SELECT count(*) AS numbers, count(DISTINCT n) AS distinct_numbers, min(n), max(n),
       bool_and(n > previous) AS strictly_increasing
  FROM (SELECT n, lag(n) OVER (ORDER BY g) AS previous
          FROM (SELECT g, segment_next('order') AS n FROM generate_series(1, 20000) AS g) AS made) AS pairs;

-- Like nextval(): a rolled-back transaction's numbers are not reissued (a gap).
BEGIN;
SELECT segment_next('invoice') AS taken_and_rolled_back;
ROLLBACK;
SELECT segment_next('invoice') AS after_rollback;

-- The worker moved max_id past every number handed out, in its own committed transactions.
SELECT max_id >= 25000 AS max_id_covers_all FROM segment_tag WHERE tag = 'order';

-- Status of the cached tags.
SELECT tag, next_value, current_start <= next_value AND next_value <= current_end AS within_current,
       step >= 100 AS step_at_least_the_tags
  FROM segment_status() WHERE tag = 'invoice';
SELECT tag FROM segment_status() ORDER BY tag;

-- Errors: unknown tags (42704) take no slot; invalid names and steps are 22023; a tag that
-- exists is 42710, as a sequence space that exists.
SELECT segment_next('no_such_tag');
SELECT sqlstate_of($$SELECT segment_next('no_such_tag')$$);
SELECT count(*) AS slots_used FROM segment_status();
SELECT segment_next('');
SELECT segment_next(repeat('x', 64));
SELECT sqlstate_of($$SELECT segment_next(repeat('x', 64))$$);
SELECT segment_create('bad step', step => 0);
SELECT segment_create('bad start', start => 0);
SELECT segment_create('invoice');
SELECT sqlstate_of($$SELECT segment_create('invoice')$$);
SELECT segment_next(NULL) IS NULL AS null_tag_null_number;
SELECT segment_create(NULL);
SELECT segment_create('null step', step => NULL);
SELECT segment_drop(NULL);

-- Dropping a tag: its cached numbers are never served again.
SELECT segment_drop('invoice');
SELECT segment_next('invoice');
SELECT segment_drop('invoice');
SELECT sqlstate_of($$SELECT segment_drop('invoice')$$);

-- A tag created in a transaction is not visible to the worker until it commits (55000: commit first).
BEGIN;
SELECT segment_create('uncommitted');
SELECT segment_next('uncommitted');
ROLLBACK;

-- The cache follows the table, whatever changes its rows: a deleted and re-created tag gets its
-- new row's numbers, never numbers cached for the old row (a range the worker had in flight for
-- the old row may become a gap, as long as the dynamic step had made it: no bound to test).
SELECT segment_create('cycle', step => 10);
SELECT array_agg(n) AS first_row FROM (SELECT segment_next('cycle') AS n FROM generate_series(1, 5)) AS s;
DELETE FROM segment_tag WHERE tag = 'cycle';
SELECT segment_next('cycle');
SELECT segment_create('cycle', start => 1001, step => 10);
CREATE TEMP TABLE cycle_numbers AS SELECT segment_next('cycle') AS n FROM generate_series(1, 5);
-- Why a statement of its own: the new row's max_id is read after the worker's allocations commit.
SELECT min(n) >= 1001 AND max(n) <= (SELECT max_id FROM segment_tag WHERE tag = 'cycle') AS from_the_new_row
  FROM cycle_numbers;
-- max_id never moves back (numbers below it may have been handed out); moved forward, the next
-- number follows at once (above it, after at most the gap of a range the worker had in flight for
-- the old numbers when the row moved).
SELECT segment_create('still', start => 101);
UPDATE segment_tag SET max_id = 50 WHERE tag = 'still';
SELECT sqlstate_of($$UPDATE segment_tag SET max_id = 0 WHERE tag = 'cycle'$$);
UPDATE segment_tag SET max_id = 1000000 WHERE tag = 'cycle';
SELECT segment_next('cycle') BETWEEN 1000001 AND 1000100 AS follows_the_moved_max_id;
SELECT segment_drop('cycle'), segment_drop('still');

-- Segment numbers work in parallel plans and read-only transactions: a tag is looked up without
-- SQL and without a transaction id.
CREATE TABLE parallel_rows AS SELECT g FROM generate_series(1, 10000) AS g;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
-- Why through pg_settings: PostgreSQL 16 renamed force_parallel_mode to debug_parallel_query.
SELECT pg_catalog.set_config(name, 'on', false) AS parallel_forced
  FROM pg_catalog.pg_settings WHERE name IN ('force_parallel_mode', 'debug_parallel_query');
SELECT segment_create('parallel');
EXPLAIN (COSTS OFF) SELECT count(DISTINCT segment_next('parallel')) FROM parallel_rows;
SELECT count(DISTINCT segment_next('parallel')) AS distinct_numbers FROM parallel_rows;
SELECT pg_catalog.set_config(name, 'off', false) AS parallel_forced
  FROM pg_catalog.pg_settings WHERE name IN ('force_parallel_mode', 'debug_parallel_query');
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
DROP TABLE parallel_rows;
BEGIN READ ONLY;
SELECT segment_next('parallel') AS in_a_read_only_transaction;
COMMIT;

-- Privileges: managing tags needs write access to the tag table; taking numbers needs EXECUTE
-- on segment_next, which can be granted.
CREATE ROLE segment_user;
REVOKE EXECUTE ON FUNCTION segment_next(text) FROM PUBLIC;
SET ROLE segment_user;
SELECT segment_next('order');
SELECT segment_create('mine');
RESET ROLE;
GRANT EXECUTE ON FUNCTION segment_next(text) TO segment_user;
SELECT segment_create('unseen');
SET ROLE segment_user;
SELECT segment_next('order') > 25000 AS granted;
-- EXECUTE is enough: the role cannot read the tag table, yet a tag it has not used is found.
SELECT count(*) FROM segment_tag;
SELECT segment_next('unseen') AS found_without_select;
RESET ROLE;
GRANT EXECUTE ON FUNCTION segment_next(text) TO PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_next(text) FROM segment_user;
DROP ROLE segment_user;

-- From another database: a clear error naming the one the worker serves.
-- (tested in the system tests, which can connect to a second database)

SELECT p.oid::regprocedure, provolatile, proparallel, proisstrict
  FROM pg_proc AS p
 WHERE proname IN ('segment_next', 'segment_create', 'segment_drop', 'segment_status')
   AND pronamespace <> 'idgen_internal'::regnamespace
 ORDER BY p.oid::regprocedure::text COLLATE "C";  -- by name, the same in every locale

-- TRUNCATE retires every cached tag of the database.
TRUNCATE segment_tag;
SELECT segment_next('order');
SELECT count(*) AS cached_tags FROM segment_status();

-- The segment authority's allocation (called by other servers' workers) gives a range only as
-- the whole of a statement that commits on its own: a caller must never see a range that is
-- then rolled back, and so allocated again.
SELECT segment_create('authority', step => 10);
SELECT max_id, len FROM pg_idgen_segment_allocate('authority', 0);
SELECT max_id, len FROM pg_idgen_segment_allocate($$authority$$::text, 25::bigint);
BEGIN;
SELECT * FROM pg_idgen_segment_allocate('authority', 0);
ROLLBACK;
DO $$ BEGIN PERFORM * FROM pg_idgen_segment_allocate('authority', 0); RAISE EXCEPTION 'rolled back'; END $$;
SELECT * FROM pg_idgen_segment_allocate('authority', 0) UNION ALL SELECT 0, 0;
SELECT max_id + 0 AS max_id FROM pg_idgen_segment_allocate('authority', 0);
SELECT * FROM pg_idgen_segment_allocate('authority', (SELECT 0));
SET default_transaction_isolation = 'serializable';
SELECT * FROM pg_idgen_segment_allocate('authority', 0);
RESET default_transaction_isolation;
-- None of the refused calls took a range.
SELECT max_id FROM segment_tag WHERE tag = 'authority';
