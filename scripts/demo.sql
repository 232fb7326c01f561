-- The demo that `./dev run` shows: a table keyed by snowflake ids, decoded back in SQL.
\echo '--- CREATE EXTENSION pg_idgen; a table with id bigint PRIMARY KEY DEFAULT snowflake_next()'
DROP TABLE IF EXISTS orders;
CREATE EXTENSION IF NOT EXISTS pg_idgen;
-- A demo cluster kept from an earlier version gets the current SQL objects.
SET client_min_messages = warning;
ALTER EXTENSION pg_idgen UPDATE;
RESET client_min_messages;
CREATE TABLE orders (
    id       bigint PRIMARY KEY DEFAULT snowflake_next(),
    customer text NOT NULL
);
INSERT INTO orders (customer) VALUES ('ada'), ('grace'), ('edsger');
INSERT INTO orders (customer) SELECT 'bulk ' || g FROM generate_series(1, 1000) AS g;

\echo '--- the first rows, decoded with id_decode'
SELECT o.id, o.customer, d.ts, d.node_id, d.sequence
  FROM orders AS o, id_decode(o.id) AS d
 ORDER BY o.id
 LIMIT 5;

\echo '--- rows of the last hour, found by an index range scan on the id'
SELECT count(*) AS rows_last_hour
  FROM orders
 WHERE id >= snowflake_min_id(now() - interval '1 hour');

\echo '--- pg_idgen_status()'
\x on
SELECT * FROM pg_idgen_status();
