-- snowflake_next(): the server runs with pg_idgen.node_id = 7 and the default twitter layout.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- The everyday use: a primary key that fills itself.
CREATE TABLE orders (
    id       bigint PRIMARY KEY DEFAULT snowflake_next(),
    customer text NOT NULL
);
INSERT INTO orders (customer) SELECT 'customer ' || g FROM generate_series(1, 10000) AS g;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids FROM orders;

-- Every id carries this server's node id and the time it was made.
SELECT DISTINCT (id_decode(id)).node_id FROM orders;
SELECT bool_and(snowflake_timestamp(id) BETWEEN now() - interval '1 minute' AND clock_timestamp())
       AS made_during_this_test
  FROM orders;

-- Ids of one statement strictly increase in the order they were made.
SELECT bool_and(id > previous) AS strictly_increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS previous
          FROM (SELECT n, snowflake_next() AS id FROM generate_series(1, 20000) AS n) AS made) AS pairs;

-- And the next statement's ids are greater still.
SELECT snowflake_next() > (SELECT max(id) FROM orders) AS later_is_greater;

-- Volatile (a new value each call) and parallel safe (the state is in shared memory).
SELECT proname, provolatile, proparallel, prorettype::regtype
  FROM pg_proc WHERE proname = 'snowflake_next' AND pronamespace <> 'idgen_internal'::regnamespace;

-- Advancing past an id (after a restore from another server): refused for an id nothing can be
-- above, or a UUID of another version. (Valid calls are tested on clusters of their own: they move
-- this server's ids.)
SELECT snowflake_advance_past(9223372036854775807);
SELECT objectid_advance_past('ffffffffffffffffffffffff');
SELECT uuid_v7_advance_past('6ccd780c-baba-4026-9564-5b8c656024db');
SELECT snowflake_advance_past(-1);
