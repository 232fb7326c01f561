-- pg_idgen's functions that change its tables for a caller (segment_create, segment_drop,
-- seq_space_create, seq_space_drop) run their statements with the foreign keys of other tables in
-- force, and never run a trigger that the tables' owner has not enabled ALWAYS: a role granted
-- TRIGGER on a table can add one, and it would run with the privileges of whoever calls the
-- function, a superuser perhaps (docs/security.md).

-- A role allowed to create and drop tags and spaces, not a superuser.
CREATE ROLE guard_app;
GRANT SELECT, INSERT, DELETE ON segment_tag, seq_space, seq_section TO guard_app;
GRANT USAGE ON SEQUENCE seq_space_id TO guard_app;
SELECT segment_create('guard_tag'), seq_space_create('guard_space');

-- Tables of the application refer to a tag and a space by foreign key.
CREATE TABLE guard_orders (tag text NOT NULL REFERENCES segment_tag (tag), no bigint);
CREATE TABLE guard_issues (space text NOT NULL REFERENCES seq_space (space), iid bigint);
INSERT INTO guard_orders VALUES ('guard_tag', segment_next('guard_tag'));
INSERT INTO guard_issues VALUES ('guard_space', seq_next('guard_space', 1));

-- The grantee's drops fail as its own DELETE would (23503): the foreign keys hold.
SET ROLE guard_app;
SELECT segment_drop('guard_tag');
SELECT seq_space_drop('guard_space');
SELECT sqlstate_of($$SELECT segment_drop('guard_tag')$$) AS tag_drop, sqlstate_of($$SELECT seq_space_drop('guard_space')$$) AS space_drop;
RESET ROLE;
SELECT o.tag, t.tag IS NOT NULL AS tag_still_there FROM guard_orders AS o LEFT JOIN segment_tag AS t USING (tag);
SELECT i.space, s.space IS NOT NULL AS space_still_there FROM guard_issues AS i LEFT JOIN seq_space AS s USING (space);

-- Once nothing refers to them, the same calls drop them; ON DELETE CASCADE acts as it does for a DELETE.
DELETE FROM guard_orders;
ALTER TABLE guard_issues DROP CONSTRAINT guard_issues_space_fkey,
    ADD FOREIGN KEY (space) REFERENCES seq_space (space) ON DELETE CASCADE;
SET ROLE guard_app;
SELECT segment_drop('guard_tag'), seq_space_drop('guard_space');
RESET ROLE;
SELECT count(*) AS issues_left FROM guard_issues;
DROP TABLE guard_orders, guard_issues;

-- A role granted TRIGGER on the tables (GRANT ALL grants it), not their owner, adds triggers that
-- record who runs them.
CREATE ROLE guard_planter;
CREATE SCHEMA guard_planted AUTHORIZATION guard_planter;
GRANT TRIGGER ON segment_tag, seq_space TO guard_planter;
CREATE TABLE guard_calls (what text, by_user name);
GRANT INSERT ON guard_calls TO PUBLIC;
SET ROLE guard_planter;
CREATE FUNCTION guard_planted.record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.guard_calls VALUES (TG_TABLE_NAME || ' ' || TG_OP, current_user);
    RETURN COALESCE(NEW, OLD);
END $$;
CREATE TRIGGER guard_planted BEFORE INSERT OR DELETE ON segment_tag
    FOR EACH ROW EXECUTE FUNCTION guard_planted.record();
CREATE TRIGGER guard_planted BEFORE INSERT OR DELETE ON seq_space
    FOR EACH ROW EXECUTE FUNCTION guard_planted.record();
RESET ROLE;

-- A superuser's calls are refused (55000, naming the trigger), and the trigger does not run.
SELECT segment_create('guard_planted_tag');
SELECT seq_space_create('guard_planted_space');
SELECT sqlstate_of($$SELECT segment_create('guard_planted_tag')$$) AS tag_create,
       sqlstate_of($$SELECT seq_space_create('guard_planted_space')$$) AS space_create;
SELECT * FROM guard_calls;

-- The tables' owner decides. Enabled REPLICA, a trigger does not fire for these calls (it does
-- for the worker's raises and allocations, which run as replication does: they fire the owner's
-- ALWAYS and REPLICA triggers only).
ALTER TABLE segment_tag ENABLE REPLICA TRIGGER guard_planted;
SELECT segment_create('guard_planted_tag'), segment_drop('guard_planted_tag');
-- Enabled ALWAYS, it fires, as the role that calls.
ALTER TABLE seq_space ENABLE ALWAYS TRIGGER guard_planted;
SELECT seq_space_create('guard_planted_space'), seq_space_drop('guard_planted_space');
SELECT * FROM guard_calls ORDER BY what;

DROP TRIGGER guard_planted ON segment_tag;
DROP TRIGGER guard_planted ON seq_space;
DROP TABLE guard_calls;
DROP SCHEMA guard_planted CASCADE;
REVOKE ALL ON segment_tag, seq_space FROM guard_planter;
DROP ROLE guard_planter;
REVOKE ALL ON segment_tag, seq_space, seq_section FROM guard_app;
REVOKE ALL ON SEQUENCE seq_space_id FROM guard_app;
DROP ROLE guard_app;
