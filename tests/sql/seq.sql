-- Per-key sequences: every key of a space has its own increasing numbers (docs/sequences.md).
-- The worker serves database "postgres". Only numbers that no timing can change are printed: a
-- key's numbers within one life of its cached section (1, 2, 3 … for a fresh one), never max_seq
-- after the worker's raises, which grow with the pace of the calls.
SET timezone = 'UTC';

-- A space: step 100 (a raise of a section's persisted maximum goes at least that far), sections
-- of 256 neighbouring keys (the defaults: step 1000, section_keys 256).
SELECT seq_space_create('issues', step => 100, description => 'issue numbers per project');
SELECT seq_space_create('messages');
SELECT space, id > 0 AS has_id, step, section_keys, description FROM seq_space ORDER BY space;
-- pg_dump carries the tables (and the secrets of the spaces' text keys: seq_text_keys).
SELECT c::regclass AS dumped FROM pg_extension AS e, unnest(e.extconfig) AS c
 WHERE e.extname = 'pg_idgen' AND c::regclass::text LIKE 'seq%' ORDER BY 1::text;

-- Each key starts at 1 and counts by itself; neighbours share a section, not a counter.
SELECT seq_next('issues', 42) AS first, seq_next('issues', 42) AS second, seq_next('issues', 7) AS other_key;
-- Any bigint is a key, negative ones and both ends too.
SELECT seq_next('issues', -1) AS minus_one, seq_next('issues', -9223372036854775808) AS smallest,
       seq_next('issues', 9223372036854775807) AS largest;

-- seq_current(): at least every number handed out for the key, below its next; no number taken.
SELECT seq_current('issues', 42) AS current_42, seq_current('issues', 43) AS never_used_neighbour,
       seq_current('issues', 1000000) AS never_used_section;
SELECT seq_next('issues', 42) AS third, seq_current('issues', 42) AS current_42;

-- Strictly increasing and dense within a section's life, across many raises of step 100.
SELECT count(*) AS numbers, count(DISTINCT n) AS distinct_numbers, min(n), max(n),
       bool_and(n > previous) AS strictly_increasing
  FROM (SELECT n, lag(n) OVER (ORDER BY g) AS previous
          FROM (SELECT g, seq_next('issues', 100) AS n FROM generate_series(1, 5000) AS g) AS made) AS pairs;

-- Like nextval(): a rolled-back transaction's number is not handed out again (a gap).
BEGIN;
SELECT seq_next('issues', 42) AS taken_and_rolled_back;
ROLLBACK;
SELECT seq_next('issues', 42) AS after_rollback;
-- No SQL on the hot path: it works in a read-only transaction.
BEGIN READ ONLY;
SELECT seq_next('issues', 42) AS in_read_only_transaction;
COMMIT;

-- The worker persisted one row per section used, each covering its keys' numbers.
SELECT section, max_seq >= 100 AS at_least_a_step FROM seq_section WHERE space = 'issues' ORDER BY section;
SELECT max_seq >= 5000 AS covers_key_100 FROM seq_section WHERE space = 'issues' AND section = 0;

-- Text keys: seq_key(space, key) is the bigint key a text stands for in its space (a hash keyed by
-- the space's secret: seq_text_keys); a text key (seq_next_text) and its seq_key() are one counter.
-- Why a name of its own: an untyped '5' would otherwise pick the text form over key 5.
SELECT seq_key('messages', 'room:general') <> seq_key('messages', 'room:general ') AS trailing_space_is_another_key,
       seq_key('messages', '') IS NOT NULL AS empty_text_is_a_key;
SELECT seq_next_text('messages', 'room:general') AS first, seq_next_text('messages', 'room:general') AS second,
       seq_next('messages', seq_key('messages', 'room:general')) AS third, seq_current_text('messages', 'room:general') AS current;
SELECT seq_next('messages', '5') AS untyped_five_is_key_5, seq_next('messages', 5) AS key_5;
SELECT seq_next('messages', 1001) AS conversation_1001, seq_next_text('messages', 'room:random') AS room_random;

-- NULL in, NULL out (STRICT), as segment_next(NULL).
SELECT seq_next(NULL, 1) IS NULL AS null_space, seq_next('issues', NULL::bigint) IS NULL AS null_key,
       seq_next_text('issues', NULL) IS NULL AS null_text_key, seq_current('issues', NULL::bigint) IS NULL AS null_current;

-- seq_fill(): issue numbers per project, filled by a trigger from the key column.
CREATE TABLE issues (
    project_id bigint NOT NULL,
    iid        bigint NOT NULL,
    title      text NOT NULL,
    PRIMARY KEY (project_id, iid)
);
CREATE TRIGGER issues_iid BEFORE INSERT ON issues
    FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'project_id', 'iid');
INSERT INTO issues (project_id, title)
VALUES (500, 'crash on start'), (500, 'typo in README'), (501, 'first issue of project 501')
RETURNING project_id, iid;
-- A number given by the insert is kept (and takes none).
INSERT INTO issues VALUES (500, 1000, 'imported') RETURNING project_id, iid;
INSERT INTO issues (project_id, title) VALUES (500, 'after the import') RETURNING project_id, iid;

-- Order numbers per shop: a text key column, an integer number column.
SELECT seq_space_create('shop_orders', step => 1000);
CREATE TABLE shop_orders (
    shop_code varchar(20) NOT NULL,
    order_no  integer NOT NULL,
    total     numeric,
    PRIMARY KEY (shop_code, order_no)
);
CREATE TRIGGER shop_orders_no BEFORE INSERT ON shop_orders
    FOR EACH ROW EXECUTE FUNCTION seq_fill('shop_orders', 'shop_code', 'order_no');
INSERT INTO shop_orders (shop_code, total) VALUES ('berlin-01', 19.90), ('berlin-01', 5.00), ('paris-02', 7.50)
RETURNING shop_code, order_no, format('%s-%s', shop_code, lpad(order_no::text, 6, '0')) AS shown;
SELECT seq_current_text('shop_orders', 'berlin-01') AS berlin_current;

-- seq_fill() used wrongly.
SELECT seq_fill();
CREATE TABLE fill_misuse (k bigint, n bigint, t text, u uuid, small smallint, i integer);
CREATE TRIGGER after_insert AFTER INSERT ON fill_misuse FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'k', 'n');
INSERT INTO fill_misuse (k) VALUES (1);
DROP TRIGGER after_insert ON fill_misuse;
CREATE TRIGGER two_arguments BEFORE INSERT ON fill_misuse FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'k');
INSERT INTO fill_misuse (k) VALUES (1);
DROP TRIGGER two_arguments ON fill_misuse;
CREATE TRIGGER no_column BEFORE INSERT ON fill_misuse FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'k', 'number');
INSERT INTO fill_misuse (k) VALUES (1);
DROP TRIGGER no_column ON fill_misuse;
CREATE TRIGGER uuid_key BEFORE INSERT ON fill_misuse FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'u', 'n');
INSERT INTO fill_misuse (u) VALUES ('017f22e2-79b0-7cc3-98c4-dc0c0c07398f');
DROP TRIGGER uuid_key ON fill_misuse;
CREATE TRIGGER text_number BEFORE INSERT ON fill_misuse FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'k', 't');
INSERT INTO fill_misuse (k) VALUES (1);
DROP TRIGGER text_number ON fill_misuse;
CREATE TRIGGER filled BEFORE INSERT ON fill_misuse FOR EACH ROW EXECUTE FUNCTION seq_fill('issues', 'small', 'i');
INSERT INTO fill_misuse (small) VALUES (NULL);
INSERT INTO fill_misuse (small) VALUES (9) RETURNING small, i;
DROP TRIGGER filled ON fill_misuse;
CREATE TRIGGER unknown_space BEFORE INSERT ON fill_misuse FOR EACH ROW EXECUTE FUNCTION seq_fill('no_such_space', 'k', 'n');
INSERT INTO fill_misuse (k) VALUES (1);
DROP TABLE fill_misuse;

-- Errors of the functions: an unknown space (42704), invalid names and arguments (22023), NULLs
-- where a space is made or dropped (22004), a space that exists (42710).
SELECT seq_next('no_such_space', 1);
SELECT sqlstate_of($$SELECT seq_next('no_such_space', 1)$$);
SELECT seq_current_text('no_such_space', 'text key');
SELECT seq_next('', 1);
SELECT seq_next(repeat('x', 64), 1);
SELECT sqlstate_of($$SELECT seq_next(repeat('x', 64), 1)$$);
SELECT seq_space_create('bad step', step => 0);
SELECT seq_space_create('bad sections', section_keys => 0);
SELECT seq_space_create('bad sections', section_keys => 257);
SELECT seq_space_create(repeat('x', 64));
SELECT seq_space_create(NULL);
SELECT seq_space_create('null step', step => NULL);
SELECT sqlstate_of($$SELECT seq_space_create(NULL)$$);
SELECT seq_space_create('issues');
SELECT sqlstate_of($$SELECT seq_space_create('issues')$$);
SELECT seq_space_drop(NULL);
SELECT seq_space_drop('no_such_space');
SELECT sqlstate_of($$SELECT seq_space_drop('no_such_space')$$);

-- A space created in a transaction is not visible to the worker until it commits (55000: commit first).
BEGIN;
SELECT seq_space_create('uncommitted');
SELECT seq_next('uncommitted', 1);
ROLLBACK;

-- What the trigger refuses (22023): whatever could hand a number out again.
DELETE FROM seq_section WHERE space = 'issues';
DELETE FROM seq_space WHERE space = 'issues';
TRUNCATE seq_section;
TRUNCATE seq_space;
UPDATE seq_section SET section = section + 100 WHERE space = 'issues' AND section = 0;
UPDATE seq_section SET space = 'messages' WHERE space = 'issues' AND section = -1;
UPDATE seq_space SET section_keys = 64 WHERE space = 'issues';
UPDATE seq_space SET space = 'tickets' WHERE space = 'issues';
UPDATE seq_space SET id = id + 1000 WHERE space = 'issues';
-- A space of its own marked as a copy of the segment authority's would no longer be numbered here.
UPDATE seq_space SET copied = true WHERE space = 'issues';
SELECT sqlstate_of($$UPDATE seq_space SET id = id + 1000 WHERE space = 'issues'$$);
-- A larger max_seq is taken: every key of the section continues above it (the change retires the
-- database's cached sections). Moving it back is refused.
UPDATE seq_section SET max_seq = 1000000 WHERE space = 'issues' AND section = 0;
SELECT seq_next('issues', 42) AS key_42, seq_next('issues', 43) AS key_43, seq_next('issues', 100) AS key_100;
SELECT seq_current('issues', 44) AS unused_key_of_the_section;
UPDATE seq_section SET max_seq = 999999 WHERE space = 'issues' AND section = 0;
-- Other changes are taken as they are.
UPDATE seq_space SET step = 50, description = 'issue numbers, smaller gaps' WHERE space = 'issues';
SELECT space, step, description FROM seq_space WHERE space = 'issues';

-- A key's last number is bigint's largest; then seq_next() fails like nextval(), and keeps failing.
SELECT seq_space_create('edge', step => 10);
SELECT seq_next('edge', 1) AS first;
UPDATE seq_section SET max_seq = 9223372036854775800 WHERE space = 'edge' AND section = 0;
SELECT seq_next('edge', 1) AS n FROM generate_series(1, 7);
SELECT seq_next('edge', 1);
SELECT seq_next('edge', 1);
SELECT sqlstate_of($$SELECT seq_next('edge', 1)$$);
SELECT seq_current('edge', 1) AS current_at_the_end;
-- Its neighbours have the same section's numbers left (up to the end), no more.
SELECT seq_next('edge', 2) AS neighbour;
-- A text key at the end: the error names the text (a space of one key a section, whose only
-- section is the text's).
SELECT seq_space_create('edge_text', step => 10, section_keys => 1);
SELECT seq_next_text('edge_text', 'last') AS first;
UPDATE seq_section SET max_seq = 9223372036854775806 WHERE space = 'edge_text';
SELECT seq_next_text('edge_text', 'last') AS at_the_end;
SELECT seq_next_text('edge_text', 'last');
-- An integer column filled past 2,147,483,647 is refused (22003), not wrapped.
CREATE TABLE small_numbers (k bigint NOT NULL, n integer);
CREATE TRIGGER small_numbers_n BEFORE INSERT ON small_numbers FOR EACH ROW EXECUTE FUNCTION seq_fill('edge', 'k', 'n');
INSERT INTO small_numbers (k) VALUES (300) RETURNING k, n;
UPDATE seq_section SET max_seq = 2147483647 WHERE space = 'edge' AND section = 1;
INSERT INTO small_numbers (k) VALUES (300);
DROP TABLE small_numbers;

-- The cache at a glance (granted to pg_monitor); no section is leased without a segment authority.
SELECT cache_sections, cached_sections > 0 AS has_cached, numbers_served >= 5000 AS served, loads > 0 AS loaded,
       raises > 0 AS raised, evictions, persisted_sections >= 6 AS persisted, held_sections,
       sections_taken + sections_released + sections_handed_over + sections_lost + sections_refused AS lease_moves
  FROM seq_status();

-- Privileges: numbers need EXECUTE, which PUBLIC does not have (each new section is a row the
-- worker writes); creating a space runs with the caller's rights.
CREATE ROLE seq_maker;
SET ROLE seq_maker;
SELECT seq_next('issues', 7);
SELECT seq_space_create('by_role');
SELECT * FROM seq_status();
RESET ROLE;
GRANT EXECUTE ON FUNCTION seq_next(text, bigint) TO seq_maker;
SET ROLE seq_maker;
SELECT seq_next('issues', 7) > 1 AS numbers_without_table_rights;
RESET ROLE;
GRANT INSERT ON seq_space TO seq_maker;
GRANT USAGE ON SEQUENCE seq_space_id TO seq_maker;
GRANT SELECT, DELETE ON seq_space, seq_section TO seq_maker;
SET ROLE seq_maker;
SELECT seq_space_create('by_role');
SELECT seq_next('by_role', 1) AS first;
SELECT seq_space_drop('by_role');
RESET ROLE;
REVOKE ALL ON seq_space, seq_section FROM seq_maker;
REVOKE ALL ON SEQUENCE seq_space_id FROM seq_maker;
REVOKE ALL ON FUNCTION seq_next(text, bigint) FROM seq_maker;
DROP ROLE seq_maker;

-- Dropping a space: its sections go, its cached numbers are never served again, and created anew
-- its keys start at 1.
SELECT seq_space_drop('messages');
SELECT count(*) AS sections_left FROM seq_section WHERE space = 'messages';
SELECT seq_next('messages', 1001);
SELECT seq_space_create('messages');
SELECT seq_next('messages', 1001) AS again_first, seq_next_text('messages', 'room:general') AS text_key_again_first;

DROP TABLE issues, shop_orders;
