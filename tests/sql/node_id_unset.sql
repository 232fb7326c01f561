-- The library is preloaded but pg_idgen.node_id is not set.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- Generating refuses, and says what to do: a silent default could be shared by two servers.
SELECT snowflake_next();
SELECT sqlstate_of('SELECT snowflake_next()');
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), customer text);
INSERT INTO orders (customer) VALUES ('ada');
SELECT count(*) FROM orders;

-- Decoding needs no node id.
SELECT * FROM id_decode(4194324522);

SELECT node_id, layout, last_id FROM pg_idgen_status();

-- Segment numbers are served in every database with the extension, not only in
-- pg_idgen.database ("postgres"): here a worker of this database starts on the first call.
CREATE TABLE elsewhere (id serial PRIMARY KEY);
INSERT INTO elsewhere DEFAULT VALUES;
\set SHOW_CONTEXT never
SELECT segment_convert_column('elsewhere', 'id', 'elsewhere');
\set SHOW_CONTEXT errors
INSERT INTO elsewhere DEFAULT VALUES RETURNING id;
SELECT segment_next('elsewhere') AS next_number;
DROP TABLE elsewhere;
SELECT segment_drop('elsewhere');
