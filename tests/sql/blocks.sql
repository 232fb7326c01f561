-- Blocks: n ids in one call, taken at once. The worker serves database "postgres".
SET timezone = 'UTC';

-- snowflake_next_range(n): the next n snowflake ids of this server, increasing, and above the
-- ids before; a later call's ids are above them all.
CREATE TEMP TABLE block AS SELECT id FROM snowflake_next_range(10000) AS id;
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
       bool_and((id_decode(id)).node_id = 7) AS this_node FROM block;
SELECT snowflake_next() > (SELECT max(id) FROM block) AS next_is_above;
SELECT bool_and(id > previous) AS increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY id) AS previous FROM snowflake_next_range(100) AS id) AS b;
-- Within a tick the ids are consecutive integers; a new tick starts a new run.
SELECT bool_and(id - previous = 1 OR (id_decode(id)).ts > (id_decode(previous)).ts) AS consecutive_within_a_tick
  FROM (SELECT id, lag(id) OVER (ORDER BY id) AS previous FROM snowflake_next_range(20000) AS id) AS b
 WHERE previous IS NOT NULL;
SELECT snowflake_next_range(0);
SELECT snowflake_next_range(5000000);
SELECT sqlstate_of($$SELECT snowflake_next_range(0)$$) AS zero;

-- segment_next_range(tag, n): the first of n consecutive numbers, all the caller's.
SELECT segment_create('batch', step => 100);
SELECT segment_next('batch') AS single;
SELECT segment_next_range('batch', 10) AS block_of_10, segment_next('batch') AS after_it;
-- A block larger than the range in shared memory waits for a range that holds it.
SELECT segment_next_range('batch', 1000) AS block_of_1000 \gset
SELECT :block_of_1000 > 12 AS after_the_first_block, segment_next('batch') >= :block_of_1000 + 1000 AS next_is_after_it;
-- Blocks and single numbers never overlap: 200 blocks of 1 to 300 and single numbers.
CREATE TEMP TABLE taken (n bigint);
INSERT INTO taken
SELECT first + k
  FROM (SELECT segment_next_range('batch', (g % 300) + 1) AS first, (g % 300) + 1 AS size FROM generate_series(1, 200) AS g) AS b,
       LATERAL generate_series(0, size - 1) AS k;
INSERT INTO taken SELECT segment_next('batch') FROM generate_series(1, 5000);
SELECT count(*) AS numbers, count(DISTINCT n) = count(*) AS all_distinct FROM taken;
SELECT segment_next_range('batch', 0);
SELECT segment_next_range('batch', 1073741825);
SELECT segment_next_range('no such tag', 5);
SELECT sqlstate_of($$SELECT segment_next_range('batch', -1)$$) AS negative,
       sqlstate_of($$SELECT segment_next_range('no such tag', 5)$$) AS unknown;
SELECT segment_drop('batch');

-- Near bigint's end: a block larger than the numbers left fails (2200H, naming
-- segment_next_range) and takes nothing; the tag's max_id stays, and every number left is
-- still served. 'edge' has 150 numbers, 9223372036854775658 to 9223372036854775807.
SELECT segment_create('edge', start => 9223372036854775658, step => 100);
-- As the tag's first call: the worker finds 150 left, allocates nothing, and says so.
SELECT segment_next_range('edge', 151);
SELECT max_id FROM segment_tag WHERE tag = 'edge';
-- A block of exactly what is left takes it all in one range.
SELECT segment_next_range('edge', 150) AS all_that_is_left;
SELECT max_id FROM segment_tag WHERE tag = 'edge';
SELECT segment_next('edge');
SELECT segment_next_range('edge', 1);
SELECT sqlstate_of($$SELECT segment_next_range('edge', 1)$$) AS at_the_end;
-- 'edge2' has 150 numbers too. After a single number (a range of 100 in shared memory, 50 left
-- after it), a block of 100 fits neither: it fails at once, and the 149 numbers left are served.
SELECT segment_create('edge2', start => 9223372036854775658, step => 100);
SELECT segment_next('edge2') AS first;
SELECT segment_next_range('edge2', 100);
SELECT max_id FROM segment_tag WHERE tag = 'edge2';
SELECT count(*) AS served, min(n) AS lowest, max(n) AS highest, count(DISTINCT n) = count(*) AS all_distinct
  FROM (SELECT segment_next('edge2') AS n FROM generate_series(1, 149)) AS s;
SELECT segment_next('edge2');
SELECT segment_drop('edge'), segment_drop('edge2');
