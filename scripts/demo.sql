-- The demo that `./dev run` shows: a table keyed by each family (snowflake ids, segment numbers,
-- per-key sequences, ObjectIds, UUIDv7s), its ids decoded back in SQL and written as compact text,
-- then where the generators stand, and where to read next (every page of the manual).
\echo '--- CREATE EXTENSION pg_idgen'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_idgen;
-- A demo cluster kept from an earlier version gets the current SQL objects, and the tables of an
-- earlier run go.
ALTER EXTENSION pg_idgen UPDATE;
DROP TABLE IF EXISTS orders, invoices, issues, docs, items;
-- segment_drop() and segment_create() return nothing: \g /dev/null leaves out their empty rows.
SELECT segment_drop(tag) FROM segment_tag WHERE tag = 'invoice' \g /dev/null
SELECT seq_space_drop(space) FROM seq_space WHERE space = 'issues' \g /dev/null
RESET client_min_messages;

\echo '--- snowflake ids: orders (id bigint PRIMARY KEY DEFAULT snowflake_next()), decoded with id_decode'
CREATE TABLE orders (
    id       bigint PRIMARY KEY DEFAULT snowflake_next(),
    customer text NOT NULL
);
INSERT INTO orders (customer) VALUES ('ada'), ('grace'), ('edsger');
INSERT INTO orders (customer) SELECT 'bulk ' || g FROM generate_series(1, 1000) AS g;
SELECT o.id, id_to_base32(o.id) AS base32, o.customer, d.ts, d.node_id, d.sequence
  FROM orders AS o, id_decode(o.id) AS d
 ORDER BY o.id
 LIMIT 3;

\echo '--- rows of the last hour, found by an index range scan on the id'
SELECT count(*) AS rows_last_hour
  FROM orders
 WHERE id >= snowflake_min(now() - interval '1 hour');

\echo '--- segment numbers: invoices (no bigint PRIMARY KEY DEFAULT segment_next(''invoice'')), dense per tag'
SELECT segment_create('invoice', start => 1, step => 1000, description => 'the demo''s invoices') \g /dev/null
CREATE TABLE invoices (
    no       bigint PRIMARY KEY DEFAULT segment_next('invoice'),
    customer text NOT NULL
);
INSERT INTO invoices (customer) VALUES ('ada'), ('grace'), ('edsger');
SELECT no, customer FROM invoices ORDER BY no;
\echo '--- segment_status(): the ranges cached in shared memory (segment numbers carry no time to decode)'
SELECT tag, current_start, current_end, next_value, step FROM segment_status() WHERE tag = 'invoice';

\echo '--- per-key sequences: issues numbered 1, 2, 3 … per project (the seq_fill trigger: iid = seq_next(''issues'', project_id))'
SELECT seq_space_create('issues', step => 100, description => 'the demo''s issue numbers') \g /dev/null
CREATE TABLE issues (
    project_id bigint,
    iid        bigint,
    title      text NOT NULL,
    PRIMARY KEY (project_id, iid)
);
CREATE TRIGGER issues_iid BEFORE INSERT ON issues
    FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'project_id', 'iid');
INSERT INTO issues (project_id, title)
VALUES (42, 'crash on start'), (42, 'typo in README'), (7, 'first issue of project 7'), (42, 'slow query');
SELECT project_id, iid, title FROM issues ORDER BY project_id, iid;
\echo '--- a key''s last number, and a text key''s first (seq_current, seq_next_text)'
SELECT seq_current('issues', 42) AS project_42_so_far, seq_next_text('issues', 'project:docs') AS a_text_key;

\echo '--- public numbers: each issue''s number as a customer sees it, with nothing of the id in it (id_mask_decimal: FF1 under a key the server keeps)'
SELECT id_mask_key_create() WHERE NOT EXISTS (SELECT FROM idgen_internal.mask_key) \g /dev/null
SELECT project_id, iid, id_mask_decimal(project_id * 1000000 + iid, 12, 'issues') AS public_number,
       id_unmask_decimal(id_mask_decimal(project_id * 1000000 + iid, 12, 'issues'), 'issues') AS back
  FROM issues ORDER BY project_id, iid;

\echo '--- ObjectIds: docs (id objectid PRIMARY KEY DEFAULT objectid_next())'
CREATE TABLE docs (id objectid PRIMARY KEY DEFAULT objectid_next(), body jsonb NOT NULL);
INSERT INTO docs (body) VALUES ('{"title": "a"}'), ('{"title": "b"}'), ('{"title": "c"}');
\echo '--- UUIDv7s: items (id uuid PRIMARY KEY DEFAULT uuid_v7_next())'
CREATE TABLE items (id uuid PRIMARY KEY DEFAULT uuid_v7_next(), name text NOT NULL);
INSERT INTO items (name) VALUES ('bolt'), ('nut'), ('washer');

\echo '--- their ids, taken apart by id_decode (as jsonb: the parts differ by family), and as compact text'
SELECT 'docs' AS "table", x.id::text AS id, id_to_base32(x.id) AS base32, to_jsonb(id_decode(x.id)) AS id_decode
  FROM docs AS x
UNION ALL
SELECT 'items', i.id::text, id_to_base32(i.id), to_jsonb(id_decode(i.id)) FROM items AS i
 ORDER BY 1, 2;

\echo '--- pg_idgen_generators(): each time-based family'
SELECT family, time_unit, time_end, ids_per_second_cap, last_made FROM pg_idgen_generators() ORDER BY family;

\echo '--- pg_idgen_status()'
\x on
SELECT * FROM pg_idgen_status();
\x off

\echo 'Where to read next (in this repository):'
\echo '  README.md                          the front page: why pg_idgen, the families, which to use'
\echo '  docs/installation-and-upgrades.md  a package or cargo-pgrx, the settings, upgrades'
\echo '  docs/snowflake.md                  snowflake layouts, functions, pg_idgen_status()'
\echo '  docs/segments.md                   segment tags and ranges'
\echo '  docs/sequences.md                  per-key sequences: spaces, sections, seq_fill, text keys'
\echo '  docs/public-numbers.md             order numbers that show nothing: id_mask(), keys, rotation'
\echo '  docs/objectid.md                   the objectid type'
\echo '  docs/uuidv7.md                     UUIDv7, also on a hot standby'
\echo '  docs/compact-text.md               the base32 forms above'
\echo '  docs/migration.md                  a serial column to snowflake ids or a segment tag, in one call'
\echo '  docs/many-servers.md               node ids from a registry, one segment number space, Citus'
\echo '  docs/clock-safety.md               the generator clock, the high-water marks, what each event costs'
\echo '  docs/security.md                   who may call what, what runs as a superuser'
\echo '  docs/settings.md                   every setting'
\echo '  docs/functions.md                  every function, type and aggregate'
\echo '  docs/benchmarks.md                 calls per second, inserts with each key type'
\echo '  docs/bench-inserts.md              the insert benchmark''s last run'
\echo '  docs/peers.md                      pg_idgen beside pgEdge snowflake, pg_idkit, pgx_ulid, pg_uuidv7, uuidv7()'
\echo '  docs/development.md                where things are, the tests, the benchmarks'
