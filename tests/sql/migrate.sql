-- Migrating an existing table in one call. snowflake_convert_column() and
-- segment_convert_column() switch a serial, IDENTITY or nextval() column (or an integer column
-- without a default) to the new default, widen it and every foreign key that references it to
-- bigint, and make every new value greater than every existing one. One call is one transaction:
-- after an error nothing has changed.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- Errors show their DETAIL and HINT, not the PL/pgSQL line they were raised at.
\set SHOW_CONTEXT never
-- Tables of their own: other tests of this phase have tables of the same names.
CREATE SCHEMA migrating;
SET search_path = migrating, public;

-- What a conversion changes: each column's type, default and identity.
CREATE FUNCTION columns_of(VARIADIC tables regclass[])
RETURNS TABLE ("column" text, type text, "default" text, identity "char")
LANGUAGE sql AS $$
    SELECT format('%s.%I', a.attrelid::regclass, a.attname), format_type(a.atttypid, a.atttypmod),
           pg_get_expr(d.adbin, d.adrelid), a.attidentity
      FROM pg_attribute AS a
      LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = ANY (tables) AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY array_position(tables, a.attrelid::regclass), a.attnum
$$;

-- A serial primary key and the tables that reference it: directly (orders), through another
-- foreign key (accounts -> account_notes), and in a two-column foreign key (shipments: only
-- its customer column is widened, not the region).
CREATE TABLE customers (id serial PRIMARY KEY, region smallint NOT NULL DEFAULT 1, name text,
                        UNIQUE (id, region));
CREATE TABLE orders (id serial PRIMARY KEY, customer_id int REFERENCES customers);
CREATE TABLE accounts (customer_id int PRIMARY KEY REFERENCES customers, opened date);
CREATE TABLE account_notes (customer_id int REFERENCES accounts, note text);
CREATE TABLE shipments (customer_id int, region smallint,
                        FOREIGN KEY (customer_id, region) REFERENCES customers (id, region));
INSERT INTO customers (name) SELECT 'customer ' || g FROM generate_series(1, 3) AS g;
INSERT INTO orders (customer_id) VALUES (1), (2), (3);
INSERT INTO accounts VALUES (1, '2024-01-01'), (3, '2024-02-01');
INSERT INTO account_notes VALUES (3, 'prefers email');
INSERT INTO shipments VALUES (2, 1);
SELECT snowflake_convert_column('customers', 'id');
SELECT * FROM columns_of('customers', 'orders', 'accounts', 'account_notes', 'shipments');
-- The serial sequence is left in place (dropping it is the user's call).
SELECT to_regclass('customers_id_seq') IS NOT NULL AS sequence_kept;
-- New rows get snowflake ids of this node, above every old id; the foreign keys still hold.
INSERT INTO customers (name) VALUES ('new customer');
SELECT id > 3 AS above_old_ids, (id_decode(id)).node_id FROM customers WHERE name = 'new customer';
INSERT INTO accounts SELECT id, '2025-01-01' FROM customers WHERE name = 'new customer';
INSERT INTO account_notes SELECT id, 'new' FROM customers WHERE name = 'new customer';
INSERT INTO account_notes VALUES (2, 'no account');
SELECT count(*) AS customers, count(*) FILTER (WHERE id > 3) AS with_snowflake_ids FROM customers;

-- An IDENTITY column: the identity and its sequence go; plain inserts use the new default.
CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, what text);
INSERT INTO events (what) VALUES ('a'), ('b');
SELECT snowflake_convert_column('events', 'id');
SELECT * FROM columns_of('events');
SELECT to_regclass('events_id_seq') IS NULL AS identity_sequence_gone;
INSERT INTO events (what) VALUES ('c') RETURNING id > 2 AS above_old_ids;

-- A DEFAULT nextval() of a sequence shared with another table: that table keeps using it.
CREATE SEQUENCE shared_ids;
CREATE TABLE notes_a (id bigint PRIMARY KEY DEFAULT nextval('shared_ids'), body text);
CREATE TABLE notes_b (id bigint PRIMARY KEY DEFAULT nextval('shared_ids'), body text);
INSERT INTO notes_a (body) VALUES ('a1');
INSERT INTO notes_b (body) VALUES ('b1'), ('b2');
SELECT snowflake_convert_column('notes_a', 'id');
SELECT * FROM columns_of('notes_a', 'notes_b');
INSERT INTO notes_b (body) VALUES ('b3') RETURNING id;

-- An integer column without a default, and a smallserial: both become bigint.
CREATE TABLE legacy (id int PRIMARY KEY, small smallserial);
INSERT INTO legacy VALUES (10), (20);
SELECT snowflake_convert_column('legacy', 'id');
SELECT snowflake_convert_column('legacy', 'small');
SELECT * FROM columns_of('legacy');

-- A partitioned table: the maximum counts the rows of every partition, the partitions are
-- widened with it, and the new default holds for them.
CREATE TABLE readings (id int, region text, value numeric, PRIMARY KEY (id, region))
    PARTITION BY LIST (region);
CREATE TABLE readings_eu PARTITION OF readings FOR VALUES IN ('eu');
CREATE TABLE readings_us PARTITION OF readings FOR VALUES IN ('us');
INSERT INTO readings VALUES (7, 'eu', 1), (50, 'us', 2);
SELECT segment_convert_column('readings', 'id', 'readings');
SELECT * FROM columns_of('readings', 'readings_us');
SELECT tag, max_id, step, description FROM segment_tag WHERE tag = 'readings';
INSERT INTO readings (region, value) VALUES ('us', 3) RETURNING id;
INSERT INTO readings_eu (region, value) VALUES ('eu', 4) RETURNING id;

-- Ids restored from elsewhere ahead of this server's: a superuser's conversion advances the
-- snowflake ids past them (the NOTICE names the time-dependent id, so it is hidden here).
CREATE TABLE restored (id bigint PRIMARY KEY);
INSERT INTO restored SELECT snowflake_min(clock_timestamp() + interval '1 second');
SET client_min_messages = warning;
SELECT snowflake_convert_column('restored', 'id');
RESET client_min_messages;
INSERT INTO restored DEFAULT VALUES;
SELECT count(*) AS rows, max(id) > min(id) AS new_id_above_restored FROM restored;
-- (Wait until the wall clock has caught up with those ids, for the tests after this one.)
DO $$
BEGIN
    WHILE snowflake_min(clock_timestamp()) <= (SELECT max(id) FROM restored) LOOP
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;

-- Advancing the ids is for superusers (or roles granted snowflake_advance_past): the owner of
-- a table with ids an hour ahead gets 42501 (its DETAIL names that id), and nothing changes.
CREATE ROLE regress_pg_idgen_migrate;
GRANT USAGE ON SCHEMA migrating TO regress_pg_idgen_migrate;
CREATE TABLE ahead (id bigint PRIMARY KEY);
INSERT INTO ahead SELECT snowflake_min(clock_timestamp() + interval '1 hour');
ALTER TABLE ahead OWNER TO regress_pg_idgen_migrate;
SET ROLE regress_pg_idgen_migrate;
\set VERBOSITY terse
SELECT snowflake_convert_column('ahead', 'id');
\set VERBOSITY default
SELECT sqlstate_of($$SELECT snowflake_convert_column('ahead', 'id')$$);
RESET ROLE;
SELECT * FROM columns_of('ahead');

-- A table whose owner sees only some of its rows (forced row-level security) is refused rather
-- than given a start above only those.
CREATE TABLE private (id serial PRIMARY KEY);
INSERT INTO private DEFAULT VALUES;
ALTER TABLE private ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY,
    OWNER TO regress_pg_idgen_migrate;
SET ROLE regress_pg_idgen_migrate;
SELECT snowflake_convert_column('private', 'id');
RESET ROLE;
SELECT * FROM columns_of('private');

-- Segment numbers: the tag's first number is above the rows and above every number the
-- column's sequence handed out, also of rows deleted since (5 here, not 3).
CREATE TABLE invoices (no serial PRIMARY KEY, total numeric);
INSERT INTO invoices (total) SELECT g FROM generate_series(1, 5) AS g;
DELETE FROM invoices WHERE no > 3;
SELECT segment_convert_column('invoices', 'no', 'invoice_no', step => 10);
SELECT * FROM columns_of('invoices');
SELECT tag, max_id, step, description FROM segment_tag WHERE tag = 'invoice_no';
INSERT INTO invoices (total) VALUES (6), (7) RETURNING no;
-- The sequence is stopped: whatever still calls nextval() on it fails (2200H) rather than hand
-- out the tag's numbers.
SELECT nextval('invoices_no_seq');
SELECT sqlstate_of($$SELECT nextval('invoices_no_seq')$$) AS stopped;

-- segment_create_from_sequence(): the tag continues where the sequence's next nextval() would,
-- and the sequence is stopped (2200H), as above.
CREATE SEQUENCE ticket_seq START 100 INCREMENT 5;
SELECT segment_create_from_sequence('tickets_unused', 'ticket_seq') AS first_number;
SELECT sqlstate_of($$SELECT nextval('ticket_seq')$$) AS stopped;
CREATE SEQUENCE used_seq START 100 INCREMENT 5;
SELECT nextval('used_seq'), nextval('used_seq');
SELECT segment_create_from_sequence('tickets_used', 'used_seq', step => 50) AS first_number;
SELECT tag, max_id, step, description FROM segment_tag WHERE tag LIKE 'tickets%' ORDER BY tag;
SELECT segment_next('tickets_used') AS continues_the_sequence;
-- Errors: not a sequence (42809), a descending sequence (22023), a tag that exists (42710).
SELECT segment_create_from_sequence('t', 'invoices');
SELECT sqlstate_of($$SELECT segment_create_from_sequence('t', 'invoices')$$);
CREATE SEQUENCE countdown INCREMENT -1;
SELECT segment_create_from_sequence('t', 'countdown');
SELECT sqlstate_of($$SELECT segment_create_from_sequence('t', 'countdown')$$);
-- A cycling sequence is refused (55000), by both: once it wrapped around, its last value is not
-- the largest number it handed out.
CREATE SEQUENCE cycling CYCLE;
CREATE TABLE wraps (id bigint DEFAULT nextval('cycling'));
SELECT snowflake_convert_column('wraps', 'id');
SELECT segment_create_from_sequence('t', 'cycling');
SELECT sqlstate_of($$SELECT segment_create_from_sequence('t', 'cycling')$$);
CREATE SEQUENCE spare_seq;
SELECT segment_create_from_sequence('tickets_used', 'spare_seq');
SELECT sqlstate_of($$SELECT segment_create_from_sequence('tickets_used', 'spare_seq')$$);
-- A stopped sequence has no next value to continue from (2200H).
SELECT segment_create_from_sequence('tickets_again', 'ticket_seq');
SELECT sqlstate_of($$SELECT segment_create_from_sequence('tickets_again', 'ticket_seq')$$);
SELECT segment_create_from_sequence(NULL, 'ticket_seq');

-- Errors of the conversions, each naming the table and the column.
CREATE TABLE docs (code text PRIMARY KEY, n int DEFAULT 42,
                   twice bigint GENERATED ALWAYS AS (n * 2) STORED);
CREATE VIEW docs_view AS SELECT code, n FROM docs;
-- Not an integer column (42804).
SELECT snowflake_convert_column('docs', 'code');
SELECT sqlstate_of($$SELECT snowflake_convert_column('docs', 'code')$$);
-- Not a table (42809).
SELECT snowflake_convert_column('docs_view', 'n');
SELECT sqlstate_of($$SELECT snowflake_convert_column('docs_view', 'n')$$);
SELECT snowflake_convert_column('shared_ids', 'last_value');
-- A generated column (55000).
SELECT snowflake_convert_column('docs', 'twice');
SELECT sqlstate_of($$SELECT snowflake_convert_column('docs', 'twice')$$);
-- A default that is not nextval() (55000): drop it first.
SELECT segment_convert_column('docs', 'n', 'docs_n');
SELECT sqlstate_of($$SELECT segment_convert_column('docs', 'n', 'docs_n')$$);
-- A column converted already (55000): its default calls pg_idgen's generator, which a second
-- call must not tell to drop.
SELECT segment_convert_column('invoices', 'no', 'invoice_no_again');
SELECT sqlstate_of($$SELECT segment_convert_column('invoices', 'no', 'invoice_no_again')$$);
SELECT snowflake_convert_column('invoices', 'no');
-- No such column, or a system column (42703).
SELECT snowflake_convert_column('docs', 'nope');
SELECT sqlstate_of($$SELECT snowflake_convert_column('docs', 'nope')$$);
SELECT snowflake_convert_column('docs', 'ctid');
SELECT sqlstate_of($$SELECT snowflake_convert_column('docs', 'ctid')$$);
-- NULL arguments (22004).
SELECT snowflake_convert_column('docs', NULL);
SELECT segment_convert_column('docs', 'n', NULL);
-- A tag that exists (42710): the table is left as it was.
CREATE TABLE receipts (no serial PRIMARY KEY);
SELECT segment_convert_column('receipts', 'no', 'invoice_no');
SELECT sqlstate_of($$SELECT segment_convert_column('receipts', 'no', 'invoice_no')$$);
SELECT * FROM columns_of('receipts');
-- A partitioned table with a serial column converts at its root: its partitions' copies of the
-- default are not "other columns".
CREATE TABLE measured (id serial, at date NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE measured_2026 PARTITION OF measured FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
INSERT INTO measured (at) VALUES ('2026-05-01'), ('2026-06-01');
SELECT segment_convert_column('measured', 'id', 'measured');
SELECT * FROM columns_of('measured', 'measured_2026');
INSERT INTO measured (at) VALUES ('2026-07-01') RETURNING id;
-- A partition's inherited column alone is refused (42809), naming the root that converts it; a
-- column of the child's own converts.
SELECT segment_convert_column('measured_2026', 'id', 'partition_only');
CREATE TABLE kin (n int);
CREATE TABLE kin_child (own serial) INHERITS (kin);
CREATE TABLE kin_grandchild () INHERITS (kin_child);
SELECT snowflake_convert_column('kin_grandchild', 'n');
SELECT snowflake_convert_column('kin_child', 'own');
SELECT * FROM columns_of('kin_child', 'kin_grandchild');
-- The shared worker is not a door past the checks: an unknown family is refused (22023).
SELECT idgen_internal.convert_column('measured', 'id', 'Segment', 'x', 10);
-- A sequence that other columns use too cannot be stopped for a tag (55000).
CREATE SEQUENCE pair_seq;
CREATE TABLE pair_a (id int DEFAULT nextval('pair_seq'));
CREATE TABLE pair_b (id int DEFAULT nextval('pair_seq'));
SELECT segment_convert_column('pair_a', 'id', 'pairs');
SELECT sqlstate_of($$SELECT segment_convert_column('pair_a', 'id', 'pairs')$$);
SELECT nextval('pair_seq') AS still_running;
-- A referencing table of another owner is not altered behind its owner's back (42501): its
-- constraints would run with the caller's privileges. Nothing changes.
CREATE TABLE owned (id serial PRIMARY KEY);
CREATE TABLE referrer (ref int REFERENCES owned);
ALTER TABLE referrer OWNER TO regress_pg_idgen_migrate;
SELECT snowflake_convert_column('owned', 'id');
SELECT sqlstate_of($$SELECT snowflake_convert_column('owned', 'id')$$);
SELECT * FROM columns_of('owned', 'referrer');
-- Likewise an inheritance child of another owner, which ALTER TABLE on its parent rewrites too.
CREATE TABLE base (id serial PRIMARY KEY);
CREATE TABLE derived () INHERITS (base);
ALTER TABLE derived OWNER TO regress_pg_idgen_migrate;
SELECT snowflake_convert_column('base', 'id');
SELECT * FROM columns_of('base', 'derived');

-- What PostgreSQL refuses surfaces as its own error, and the whole call rolls back: a view on a
-- referencing column fails the widening after the referenced table was widened and the tag
-- created; afterwards both tables, their defaults and the tag table are as before.
CREATE TABLE parents (id serial PRIMARY KEY);
CREATE TABLE children (parent_id int REFERENCES parents);
CREATE VIEW children_view AS SELECT parent_id FROM children;
INSERT INTO parents DEFAULT VALUES;
SELECT segment_convert_column('parents', 'id', 'parents');
SELECT * FROM columns_of('parents', 'children');
SELECT count(*) AS parents_tags FROM segment_tag WHERE tag = 'parents';
-- A view on the converted column itself, likewise.
CREATE VIEW parents_view AS SELECT id FROM parents;
DROP VIEW children_view;
SELECT snowflake_convert_column('parents', 'id');
SELECT sqlstate_of($$SELECT snowflake_convert_column('parents', 'id')$$);
SELECT * FROM columns_of('parents', 'children');
-- A column of the partition key cannot change its type.
CREATE TABLE by_id (id serial PRIMARY KEY) PARTITION BY RANGE (id);
SELECT snowflake_convert_column('by_id', 'id');
SELECT * FROM columns_of('by_id');
-- Without the view, the same call converts both tables.
DROP VIEW parents_view;
SELECT segment_convert_column('parents', 'id', 'parents');
SELECT * FROM columns_of('parents', 'children');

-- A conversion runs only as the table's owner, on relations in schemas that only the caller or
-- a superuser own (42501): converting another role's table, a superuser would run its CHECK
-- constraints; and the owner of a schema could rename it while the conversion waits for a lock,
-- to put a relation of its own under the name. Nothing changes.
CREATE TABLE theirs (id serial PRIMARY KEY CHECK (id > 0));
ALTER TABLE theirs OWNER TO regress_pg_idgen_migrate;
SELECT snowflake_convert_column('theirs', 'id');
CREATE SCHEMA lent AUTHORIZATION regress_pg_idgen_migrate;
CREATE TABLE lent.mine (id serial PRIMARY KEY);
SELECT segment_convert_column('lent.mine', 'id', 'mine');
SELECT * FROM columns_of('theirs', 'lent.mine');
DROP SCHEMA lent CASCADE;

-- Clean up.
DROP SCHEMA migrating CASCADE;
RESET search_path;
DROP SEQUENCE IF EXISTS shared_ids, ticket_seq, countdown;
DROP ROLE regress_pg_idgen_migrate;
SELECT segment_drop(tag) FROM segment_tag
 WHERE tag IN ('readings', 'invoice_no', 'tickets_unused', 'tickets_used', 'parents', 'measured');
