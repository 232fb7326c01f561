-- Every phase starts here: the extension installs, and each of its functions has a comment.
CREATE EXTENSION pg_idgen;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- Who may call what: PUBLIC may generate and decode; moving a generator's floor and the
-- trigger are for superusers; segment_status() for pg_monitor (README, "Privileges").
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_execute,
       has_function_privilege('pg_monitor', p.oid, 'EXECUTE') AS pg_monitor_may_execute
  FROM pg_depend AS d
  JOIN pg_proc AS p ON p.oid = d.objid AND d.classid = 'pg_proc'::regclass
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_idgen')
 ORDER BY p.oid::regprocedure::text COLLATE "C";  -- by name, the same in every locale

-- The SQLSTATE a statement fails with, for tests of error paths.
CREATE FUNCTION sqlstate_of(statement text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
