-- Migrating an existing table in one call: a serial, IDENTITY or nextval() column, or an integer
-- column without a default, switches to snowflake ids or segment numbers, every new value above
-- every existing one. PL/pgSQL on the catalogs with the caller's privileges: ALTER TABLE needs
-- the owner of the table (and of every table whose foreign key is widened with it).
--
-- Why search_path = pg_catalog, pg_temp: a relation given as regclass then prints with its
-- schema in the dynamic SQL, and no object of the caller's schemas can stand in for one of ours.
-- Why row_security = off: a maximum read under a row-level security policy could miss rows; off,
-- such a table is an error instead of a wrong start.
-- Why pg_idgen's own functions are called through the schema idgen_internal, never by the name
-- of the extension's schema: that schema (often public) belongs to the database owner, who can
-- rename it at any moment, even while a superuser's conversion waits for a lock, create a new one
-- under the old name and plant functions there. idgen_internal belongs to the superuser who
-- installed the extension, and its functions are SQL-standard bodies (BEGIN ATOMIC), which
-- PostgreSQL parses once, at install time, and keeps as references to pg_idgen's functions by
-- OID: no name is looked up when they run. A new column default, which must name the generator,
-- is checked after it is set: it must call pg_idgen's own function (by OID), or nothing is done.

CREATE SCHEMA idgen_internal;
COMMENT ON SCHEMA idgen_internal IS
    'pg_idgen: fixed references to its own functions, for its PL/pgSQL (not for direct use).';
GRANT USAGE ON SCHEMA idgen_internal TO PUBLIC;

CREATE FUNCTION idgen_internal.snowflake_next() RETURNS bigint
LANGUAGE sql VOLATILE BEGIN ATOMIC SELECT @extschema@.snowflake_next(); END;
CREATE FUNCTION idgen_internal.snowflake_advance_past(id bigint) RETURNS void
LANGUAGE sql VOLATILE BEGIN ATOMIC SELECT @extschema@.snowflake_advance_past(id); END;
CREATE FUNCTION idgen_internal.may_advance_snowflake() RETURNS boolean
LANGUAGE sql STABLE BEGIN ATOMIC
    SELECT pg_catalog.has_function_privilege('@extschema@.snowflake_advance_past(bigint)'::pg_catalog.regprocedure::pg_catalog.oid, 'EXECUTE');
END;
CREATE FUNCTION idgen_internal.segment_create(tag text, first_number bigint, step int, description text) RETURNS void
LANGUAGE sql VOLATILE BEGIN ATOMIC SELECT @extschema@.segment_create(tag, first_number, step, description); END;
CREATE FUNCTION idgen_internal.require_preload() RETURNS bigint
LANGUAGE sql VOLATILE BEGIN ATOMIC SELECT pg_catalog.count(*) FROM @extschema@.pg_idgen_generators(); END;
-- The generators a converted column's default calls, as OIDs (a regprocedure constant is bound at install).
CREATE FUNCTION idgen_internal.snowflake_generator() RETURNS oid
LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT '@extschema@.snowflake_next()'::pg_catalog.regprocedure::pg_catalog.oid; END;
CREATE FUNCTION idgen_internal.segment_generator() RETURNS oid
LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT '@extschema@.segment_next(text)'::pg_catalog.regprocedure::pg_catalog.oid; END;
COMMENT ON FUNCTION idgen_internal.snowflake_next() IS 'Internal: snowflake_next(), bound by OID.';
COMMENT ON FUNCTION idgen_internal.snowflake_advance_past(bigint) IS 'Internal: snowflake_advance_past(), bound by OID.';
COMMENT ON FUNCTION idgen_internal.may_advance_snowflake() IS 'Internal: whether the caller may call snowflake_advance_past().';
COMMENT ON FUNCTION idgen_internal.segment_create(text, bigint, int, text) IS 'Internal: segment_create(), bound by OID.';
COMMENT ON FUNCTION idgen_internal.require_preload() IS 'Internal: raises 55000 unless pg_idgen is preloaded (pg_idgen_generators(), bound by OID).';
COMMENT ON FUNCTION idgen_internal.snowflake_generator() IS 'Internal: the OID of snowflake_next(), which a converted column''s default must call.';
COMMENT ON FUNCTION idgen_internal.segment_generator() IS 'Internal: the OID of segment_next(text), which a converted column''s default must call.';

-- A sequence whose numbers a segment tag continues must hand out no more: set to its maximum
-- (its minimum if descending) and to NO CYCLE, its next nextval() fails (2200H).
CREATE FUNCTION idgen_internal.stop_sequence(sequence_name regclass)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE pg_catalog.format('ALTER SEQUENCE %s NO CYCLE', sequence_name);
    PERFORM pg_catalog.setval(sequence_name,
                              CASE WHEN s.seqincrement OPERATOR(pg_catalog.>) 0 THEN s.seqmax ELSE s.seqmin END,
                              true)
       FROM pg_catalog.pg_sequence AS s
      WHERE s.seqrelid OPERATOR(pg_catalog.=) sequence_name;
END
$$;
COMMENT ON FUNCTION idgen_internal.stop_sequence(regclass) IS
    'Internal: sets a sequence to its maximum (minimum if descending) and NO CYCLE, so that nextval() on it fails.';

-- A sequence's last value is the largest number it handed out only if it ascends and never
-- wrapped: a descending or cycling one is refused (checked before the conversion's ALTER
-- SEQUENCE … NO CYCLE, which would hide the cycling).
CREATE FUNCTION idgen_internal.require_ascending(sequence_name regclass)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    increment bigint;
    cycles    boolean;
BEGIN
    SELECT s.seqincrement, s.seqcycle INTO increment, cycles FROM pg_catalog.pg_sequence AS s
     WHERE s.seqrelid OPERATOR(pg_catalog.=) sequence_name;
    IF increment OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'sequence % is descending', sequence_name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('Its increment is %s: its last value is not the largest number it handed out.', increment);
    END IF;
    IF cycles THEN
        RAISE EXCEPTION 'sequence % cycles', sequence_name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Once it wrapped around, its last value is not the largest number it handed out.',
                  HINT = pg_catalog.format('If it never wrapped: ALTER SEQUENCE %s NO CYCLE, then convert.', sequence_name);
    END IF;
END
$$;
COMMENT ON FUNCTION idgen_internal.require_ascending(regclass) IS
    'Internal: refuses a descending or cycling sequence, whose last value is not the largest number it handed out.';

-- Segment numbers are served only on a server that preloads pg_idgen: a tag made elsewhere, with
-- its sequence stopped and its column's default switched, would leave every insert failing. (A
-- server with a segment authority refuses in segment_create(), which the conversion calls.)
CREATE FUNCTION idgen_internal.require_segments(caller text)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM idgen_internal.require_preload();  -- 55000 without shared_preload_libraries
END
$$;
COMMENT ON FUNCTION idgen_internal.require_segments(text) IS
    'Internal: refuses unless segment numbers are served (pg_idgen preloaded).';

-- The conversions name tables and sequences in statements that wait for locks, and PostgreSQL
-- looks a name up again after such a wait: the owner of a schema could rename it meanwhile and
-- put a relation of its own under the name (with a CHECK constraint, a view's function, a cast)
-- to run as the caller. And ALTER TABLE … TYPE runs a table's CHECK constraints with the
-- caller's privileges. So a relation is named only when the caller owns it and its schema is the
-- caller's or a superuser's (pg_database_owner's: the database owner's): nobody else can rename
-- either. A superuser converts another role's table as that role (SET ROLE).
CREATE FUNCTION idgen_internal.require_own_relation(rel regclass, caller text)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    me          oid := (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER);
    owner       oid;
    schema      name;
    schema_by   oid;
BEGIN
    SELECT c.relowner, n.nspname,
           CASE WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                THEN (SELECT d.datdba FROM pg_catalog.pg_database AS d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                ELSE n.nspowner END
      INTO owner, schema, schema_by
      FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE c.oid OPERATOR(pg_catalog.=) rel;
    IF owner OPERATOR(pg_catalog.<>) me THEN
        RAISE EXCEPTION '%: % belongs to %, not to %', caller, rel, owner::pg_catalog.regrole, CURRENT_USER
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A conversion alters and reads it with your privileges: its constraints would run with them.',
                  HINT = pg_catalog.format('Convert as its owner: SET ROLE %I; then call %s again.', owner::pg_catalog.regrole, caller);
    END IF;
    -- A member of the schema's owner may rename it already: trusted, unless the caller is a
    -- superuser (a member of every role, and the one to protect).
    IF schema_by OPERATOR(pg_catalog.<>) me
       AND NOT COALESCE((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) schema_by), false)
       AND (COALESCE((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) me), false)
            OR NOT pg_catalog.pg_has_role(me, schema_by, 'MEMBER')) THEN
        RAISE EXCEPTION '%: schema % of % belongs to %, who could rename it while the conversion waits for a lock', caller, schema, rel, schema_by::pg_catalog.regrole
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The conversion names the relation after waiting for locks; a renamed schema would give the name to another relation, whose code would run with your privileges.',
                  HINT = pg_catalog.format('Let a superuser or the table''s owner own schema %I (ALTER SCHEMA %I OWNER TO …), or convert as a member of %I that is not a superuser.', schema, schema, schema_by::pg_catalog.regrole);
    END IF;
END
$$;
COMMENT ON FUNCTION idgen_internal.require_own_relation(regclass, text) IS
    'Internal: refuses a relation the caller does not own, or whose schema another role than the caller or a superuser owns.';

-- The work shared by snowflake_convert_column() and segment_convert_column(); `family` is
-- 'snowflake' or 'segment' (then `tag` and `step` make the tag).
CREATE FUNCTION idgen_internal.convert_column(table_name regclass, column_name name, family text,
                                        tag text, step int)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS $convert$
DECLARE
    caller      text := pg_catalog.format('%s_convert_column()', family);
    target      text;       -- "schema.table.column", for messages
    rel_kind    "char";
    col_attnum  smallint;
    col_type    oid;
    col_typmod  int;
    col_identity "char";
    col_generated "char";
    col_inherited int;
    default_oid  oid;
    default_expr text;
    sequences   regclass[] := '{}';
    identity_sequence regclass;
    identity_sequence_name text;    -- printed before DROP IDENTITY drops it
    seq         regclass;
    dep_type    "char";
    seq_last    bigint;
    seq_called  boolean;
    largest     bigint;     -- of the column's values and its sequences' handed-out numbers
    first_number bigint;
    must_advance boolean := false;
    widen       record;
    new_default text;
    others      text;
    alterations text[] := '{}';   -- one ALTER TABLE per table to widen, run once all are checked
    altered     regclass[];       -- the tables to widen
    widened_table regclass;
    widened     text[] := '{}';   -- what they widen, for the notices
    statement   text;
    next_id     bigint;
    generator   oid;        -- the function the new default must call
    converted_by oid;       -- pg_idgen's generator that the default calls already, if it does
BEGIN
    IF table_name IS NULL OR column_name IS NULL THEN
        RAISE EXCEPTION '%: table_name and column_name must not be NULL', caller
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF family IS NULL OR family NOT IN ('snowflake', 'segment') THEN
        RAISE EXCEPTION 'idgen_internal.convert_column: family must be snowflake or segment, not %', pg_catalog.quote_nullable(family)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Call snowflake_convert_column() or segment_convert_column().';
    END IF;
    IF family OPERATOR(pg_catalog.=) 'segment' AND tag IS NULL THEN
        RAISE EXCEPTION '%: tag must not be NULL', caller USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF family OPERATOR(pg_catalog.=) 'segment' THEN
        PERFORM idgen_internal.require_segments(caller);
    END IF;

    -- Why the kind before the lock: LOCK TABLE takes views too, and refuses sequences with a
    -- message that does not say what to give instead.
    SELECT c.relkind INTO rel_kind FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) table_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', table_name::oid USING ERRCODE = 'undefined_table';
    END IF;
    IF rel_kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', table_name
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = pg_catalog.format('It is %s.', CASE rel_kind
                      WHEN 'v' THEN 'a view' WHEN 'm' THEN 'a materialized view'
                      WHEN 'S' THEN 'a sequence' WHEN 'f' THEN 'a foreign table'
                      WHEN 'i' THEN 'an index' WHEN 'I' THEN 'a partitioned index'
                      WHEN 'c' THEN 'a composite type' WHEN 't' THEN 'a TOAST table'
                      ELSE 'not an ordinary or partitioned table' END),
                  HINT = CASE WHEN rel_kind IN ('v', 'm') THEN 'Convert the column of the table its rows come from.'
                              ELSE 'Give an ordinary or a partitioned table.' END;
    END IF;

    PERFORM idgen_internal.require_own_relation(table_name, caller);
    -- Why ACCESS EXCLUSIVE before anything is read: no insert can slip in between reading the
    -- largest value and switching the default (ALTER TABLE would take this lock anyway).
    EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', table_name);

    SELECT a.attnum, a.atttypid, a.atttypmod, a.attidentity, a.attgenerated, a.attinhcount
      INTO col_attnum, col_type, col_typmod, col_identity, col_generated, col_inherited
      FROM pg_catalog.pg_attribute AS a
     WHERE a.attrelid OPERATOR(pg_catalog.=) table_name
       AND a.attname OPERATOR(pg_catalog.=) column_name
       AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', column_name, table_name
            USING ERRCODE = 'undefined_column';
    END IF;
    target := pg_catalog.format('%s.%I', table_name, column_name);
    -- A column a partition or child inherits is its parent's: converting it here alone cannot
    -- work. Name the root (first parents up), which converts it with the rest.
    IF col_inherited OPERATOR(pg_catalog.>) 0 THEN
        WITH RECURSIVE up(relid, depth) AS (
            SELECT table_name::pg_catalog.oid, 0
            UNION ALL
            SELECT i.inhparent, u.depth OPERATOR(pg_catalog.+) 1 FROM up AS u
              JOIN pg_catalog.pg_inherits AS i
                ON i.inhrelid OPERATOR(pg_catalog.=) u.relid AND i.inhseqno OPERATOR(pg_catalog.=) 1
        )
        SELECT up.relid::pg_catalog.regclass::text INTO others FROM up ORDER BY up.depth DESC LIMIT 1;
        RAISE EXCEPTION 'column % is inherited from a parent table', target
            USING ERRCODE = 'wrong_object_type',
                  HINT = pg_catalog.format('Convert it at the root, %s: its partitions and children are converted with it.', others);
    END IF;
    IF col_attnum OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'column "%" of relation % is a system column', column_name, table_name
            USING ERRCODE = 'undefined_column',
                  HINT = 'Give the name of a column of your own.';
    END IF;
    IF col_generated OPERATOR(pg_catalog.<>) '' THEN
        RAISE EXCEPTION 'cannot convert % to %: it is a generated column', target,
                        CASE family WHEN 'snowflake' THEN 'snowflake ids' ELSE 'segment numbers' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its values are computed from other columns.';
    END IF;
    IF col_type NOT IN ('pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype,
                        'pg_catalog.int8'::pg_catalog.regtype) THEN
        RAISE EXCEPTION 'cannot convert % of type % to %', target,
                        pg_catalog.format_type(col_type, col_typmod),
                        CASE family WHEN 'snowflake' THEN 'snowflake ids' ELSE 'segment numbers' END
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Only smallint, integer and bigint columns can be converted; they become bigint.';
    END IF;

    -- The default must be a nextval() call, the only default whose values we can follow.
    SELECT d.oid, pg_catalog.pg_get_expr(d.adbin, d.adrelid)
      INTO default_oid, default_expr
      FROM pg_catalog.pg_attrdef AS d
     WHERE d.adrelid OPERATOR(pg_catalog.=) table_name AND d.adnum OPERATOR(pg_catalog.=) col_attnum;
    -- A default that calls pg_idgen's generator is a conversion done already: dropping it, as the
    -- refusal below says for other defaults, would undo it.
    SELECT d.refobjid INTO converted_by
      FROM pg_catalog.pg_depend AS d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) default_oid
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY[idgen_internal.snowflake_generator(), idgen_internal.segment_generator()])
     LIMIT 1;
    IF converted_by IS NOT NULL THEN
        RAISE EXCEPTION 'column % is converted already', target
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('Its default is %s.', default_expr),
                  HINT = CASE WHEN converted_by OPERATOR(pg_catalog.=) CASE family WHEN 'snowflake' THEN idgen_internal.snowflake_generator()
                                                                                   ELSE idgen_internal.segment_generator() END
                              THEN 'Nothing to convert: new rows take their values from that default.'
                              ELSE pg_catalog.format('To switch it to %s, drop that default first (ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT), then convert it.',
                                                     CASE family WHEN 'snowflake' THEN 'snowflake ids' ELSE 'segment numbers' END,
                                                     table_name, column_name) END;
    END IF;
    -- pg_get_expr() writes nextval('seq'::regclass), cast to the column's type if it is not bigint.
    IF default_expr IS NOT NULL AND default_expr OPERATOR(pg_catalog.!~)
       $re$^\(?nextval\('([^']|'')*'::regclass\)(\)::(smallint|integer|bigint))?$$re$ THEN
        RAISE EXCEPTION 'cannot convert %: its default is not a nextval() call', target
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('The default is %s.', default_expr),
                  HINT = pg_catalog.format('Drop the default first (ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT), then convert the column.',
                                           table_name, column_name);
    END IF;

    -- The column's sequences: its identity sequence, a sequence owned by it (serial), and any
    -- sequence its default calls.
    FOR seq, dep_type IN
        SELECT d.objid::pg_catalog.regclass, d.deptype
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_class AS s ON s.oid OPERATOR(pg_catalog.=) d.objid AND s.relkind OPERATOR(pg_catalog.=) 'S'
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) table_name
           AND d.refobjsubid OPERATOR(pg_catalog.=) col_attnum
           AND d.deptype IN ('a', 'i')
        UNION
        SELECT d.refobjid::pg_catalog.regclass, 'n'
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_class AS s ON s.oid OPERATOR(pg_catalog.=) d.refobjid AND s.relkind OPERATOR(pg_catalog.=) 'S'
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) default_oid
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
         ORDER BY 1
    LOOP
        IF dep_type OPERATOR(pg_catalog.=) 'i' THEN
            identity_sequence := seq;
        ELSIF NOT seq OPERATOR(pg_catalog.=) ANY (sequences) THEN
            sequences := pg_catalog.array_append(sequences, seq);
        END IF;
    END LOOP;

    FOREACH seq IN ARRAY pg_catalog.array_append(sequences, identity_sequence) LOOP
        CONTINUE WHEN seq IS NULL;
        PERFORM idgen_internal.require_ascending(seq);
    END LOOP;
    IF family OPERATOR(pg_catalog.=) 'segment' THEN
        -- A sequence left to hand out numbers would hand out the tag's: it is exhausted below,
        -- which a sequence that other columns use must not be.
        SELECT pg_catalog.string_agg(pg_catalog.format('%s (%s.%I)', d.refobjid::pg_catalog.regclass,
                                                       ad.adrelid::pg_catalog.regclass, a.attname), ', ')
          INTO others
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_attrdef AS ad ON ad.oid OPERATOR(pg_catalog.=) d.objid
          JOIN pg_catalog.pg_attribute AS a
            ON a.attrelid OPERATOR(pg_catalog.=) ad.adrelid AND a.attnum OPERATOR(pg_catalog.=) ad.adnum
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid::pg_catalog.regclass OPERATOR(pg_catalog.=) ANY (sequences)
           AND d.objid OPERATOR(pg_catalog.<>) default_oid
           -- The partitions and inheritance children of the table copy its default; the new
           -- default replaces theirs too.
           AND NOT (a.attname OPERATOR(pg_catalog.=) column_name AND ad.adrelid IN (
                   WITH RECURSIVE tree(relid) AS (
                       SELECT table_name::pg_catalog.oid
                       UNION
                       SELECT i.inhrelid FROM tree AS t
                         JOIN pg_catalog.pg_inherits AS i ON i.inhparent OPERATOR(pg_catalog.=) t.relid)
                   SELECT tree.relid FROM tree));
        IF others IS NOT NULL THEN
            RAISE EXCEPTION 'cannot convert % to segment numbers: its sequence is the default of other columns too', target
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = pg_catalog.format('Used by: %s. The conversion stops the sequence (the tag continues its numbers), which would break them.', others),
                      HINT = 'Give the other columns sequences of their own first, or convert this column to snowflake ids.';
        END IF;
        -- Why ALTER SEQUENCE first: it locks each sequence against nextval() until commit, so
        -- no number is handed out between reading the sequence and stopping it.
        FOREACH seq IN ARRAY pg_catalog.array_append(sequences, identity_sequence) LOOP
            CONTINUE WHEN seq IS NULL;
            PERFORM idgen_internal.require_own_relation(seq, caller);
            EXECUTE pg_catalog.format('ALTER SEQUENCE %s NO CYCLE', seq);
        END LOOP;
    END IF;

    -- Every new value must be above every existing one: the rows' (children and partitions
    -- included) and every number the column's sequences handed out, used or not.
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(%I)::pg_catalog.int8 FROM %s', column_name, table_name)
       INTO largest;
    FOREACH seq IN ARRAY pg_catalog.array_append(sequences, identity_sequence) LOOP
        CONTINUE WHEN seq IS NULL;
        -- By OID: a sequence only read need not be the caller's (NULL: never called).
        seq_last := pg_catalog.pg_sequence_last_value(seq);
        seq_called := seq_last IS NOT NULL;
        IF seq_called AND (largest IS NULL OR seq_last OPERATOR(pg_catalog.>) largest) THEN
            largest := seq_last;
        END IF;
    END LOOP;

    IF family OPERATOR(pg_catalog.=) 'snowflake' THEN
        -- Why snowflake_next() and not snowflake_min(clock_timestamp()): every later id of this
        -- server is above the id it returns now, exactly, also while the generator runs ahead of
        -- the wall clock or lags it (a forward step not followed yet). The id taken here is a
        -- gap, like a rolled-back insert's.
        next_id := idgen_internal.snowflake_next();
        must_advance := COALESCE(largest OPERATOR(pg_catalog.>=) next_id, false);
        IF must_advance AND NOT idgen_internal.may_advance_snowflake() THEN
            RAISE EXCEPTION 'permission denied for function snowflake_advance_past'
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = pg_catalog.format('The largest value of %s, %s, is not below the snowflake ids this server makes now: they must be advanced past it first.',
                                                 target, largest),
                      HINT = 'Ask a superuser to GRANT EXECUTE ON FUNCTION snowflake_advance_past(bigint) to you.';
        END IF;
        generator := idgen_internal.snowflake_generator();
        new_default := pg_catalog.format('%s()', generator::pg_catalog.regproc);
    ELSE
        first_number := GREATEST(largest, 0) OPERATOR(pg_catalog.+) 1;
        BEGIN
            PERFORM idgen_internal.segment_create(tag, first_number, step, pg_catalog.format('numbers of %s', target));
        EXCEPTION WHEN unique_violation OR duplicate_object THEN
            RAISE EXCEPTION 'segment tag "%" already exists', tag
                USING ERRCODE = 'duplicate_object',
                      HINT = pg_catalog.format('Choose another tag, or drop this one first with segment_drop(%L) if no table uses it.', tag);
        END;
        RAISE NOTICE 'created segment tag "%" starting at %', tag, first_number;
        generator := idgen_internal.segment_generator();
        new_default := pg_catalog.format('%s(%L::pg_catalog.text)', generator::pg_catalog.regproc, tag);
    END IF;

    IF col_identity OPERATOR(pg_catalog.<>) '' THEN
        identity_sequence_name := identity_sequence::text;
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', table_name, column_name);
        RAISE NOTICE 'dropped the identity of %, and its sequence %', target, identity_sequence_name;
    END IF;

    -- Widening: the column and every foreign-key column that references it, directly or through
    -- other foreign keys, become bigint: they will hold the new values too. Why conparentid = 0:
    -- the constraints a partitioned table's partitions inherit follow their parent's ALTER.
    FOR widen IN
        WITH RECURSIVE referencing(relid, attnum) AS (
            SELECT table_name::oid, col_attnum
            UNION
            SELECT c.conrelid, c.conkey[pg_catalog.array_position(c.confkey, r.attnum)]
              FROM referencing AS r
              JOIN pg_catalog.pg_constraint AS c
                ON c.confrelid OPERATOR(pg_catalog.=) r.relid
               AND r.attnum OPERATOR(pg_catalog.=) ANY (c.confkey)
             WHERE c.contype OPERATOR(pg_catalog.=) 'f' AND c.conparentid OPERATOR(pg_catalog.=) 0
        )
        SELECT r.relid::pg_catalog.regclass AS rel,
               pg_catalog.array_agg(a.attname ORDER BY a.attnum) AS columns,
               pg_catalog.array_agg(pg_catalog.format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum) AS types
          FROM referencing AS r
          JOIN pg_catalog.pg_attribute AS a
            ON a.attrelid OPERATOR(pg_catalog.=) r.relid AND a.attnum OPERATOR(pg_catalog.=) r.attnum
         WHERE a.atttypid IN ('pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype)
         GROUP BY r.relid
         ORDER BY r.relid OPERATOR(pg_catalog.<>) table_name::oid,
                  r.relid::pg_catalog.regclass::text COLLATE "C"
    LOOP
        altered := pg_catalog.array_append(altered, widen.rel);
        -- One ALTER TABLE per table: one rewrite, also when it references itself.
        alterations := pg_catalog.array_append(alterations, pg_catalog.format('ALTER TABLE %s %s', widen.rel,
            (SELECT pg_catalog.string_agg(pg_catalog.format('ALTER COLUMN %I TYPE pg_catalog.int8', c), ', ')
               FROM pg_catalog.unnest(widen.columns) AS c)));
        FOR i IN 1 .. pg_catalog.array_length(widen.columns, 1) LOOP
            widened := pg_catalog.array_append(widened, pg_catalog.format('%s.%I from %s', widen.rel,
                                                                          widen.columns[i], widen.types[i]));
        END LOOP;
    END LOOP;
    -- Why only tables of the converted table's owner: ALTER TABLE rewrites them, their partitions
    -- and inheritance children, running their CHECK constraints with the caller's privileges; a
    -- table the caller did not name, owned by a role that may only reference this one, must not
    -- get to run code as, say, a superuser.
    WITH RECURSIVE tree(relid) AS (
        SELECT r::pg_catalog.oid FROM pg_catalog.unnest(altered) AS r
        UNION
        SELECT i.inhrelid FROM tree AS t
          JOIN pg_catalog.pg_inherits AS i ON i.inhparent OPERATOR(pg_catalog.=) t.relid
    )
    SELECT pg_catalog.string_agg(pg_catalog.format('%s (owned by %s)', c.oid::pg_catalog.regclass,
                                                   c.relowner::pg_catalog.regrole), ', ' ORDER BY c.oid::pg_catalog.regclass::text COLLATE "C")
      INTO others
      FROM tree AS t JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) t.relid
     WHERE c.relowner OPERATOR(pg_catalog.<>)
           (SELECT o.relowner FROM pg_catalog.pg_class AS o WHERE o.oid OPERATOR(pg_catalog.=) table_name);
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'cannot widen % to bigint: tables that would be altered with it belong to other roles', target
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('They are %s: their foreign keys reference it, or they inherit from a table that is widened. Altered here, their constraints would run with your privileges.', others),
                  HINT = 'Their owners widen those columns first (ALTER TABLE … ALTER COLUMN … TYPE bigint), then convert again.';
    END IF;
    FOREACH widened_table IN ARRAY COALESCE(altered, ARRAY[]::pg_catalog.regclass[]) LOOP
        PERFORM idgen_internal.require_own_relation(widened_table, caller);
    END LOOP;
    FOREACH statement IN ARRAY alterations LOOP
        EXECUTE statement;
    END LOOP;
    FOREACH statement IN ARRAY widened LOOP
        RAISE NOTICE 'widened % to bigint', statement;
    END LOOP;

    EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', table_name, column_name, new_default);
    -- Why check: the default was parsed from a name, after the waits for locks; a schema renamed
    -- meanwhile could have given it a planted function. It must call the generator alone, by OID.
    IF (SELECT pg_catalog.array_agg(DISTINCT d.refobjid) FROM pg_catalog.pg_attrdef AS ad
          JOIN pg_catalog.pg_depend AS d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                                         AND d.objid OPERATOR(pg_catalog.=) ad.oid
                                         AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
         WHERE ad.adrelid OPERATOR(pg_catalog.=) table_name AND ad.adnum OPERATOR(pg_catalog.=) col_attnum)
       IS DISTINCT FROM ARRAY[generator] THEN
        RAISE EXCEPTION 'the new default of % does not call pg_idgen''s %', target, generator::pg_catalog.regprocedure
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('It is %s: the extension''s schema was renamed while the conversion waited, and a function of that name planted.', new_default),
                  HINT = 'Nothing was converted. Find out who renamed the schema.';
    END IF;
    RAISE NOTICE 'default of % is now %', target, new_default;
    FOREACH seq IN ARRAY sequences LOOP
        IF family OPERATOR(pg_catalog.=) 'segment' THEN
            PERFORM idgen_internal.stop_sequence(seq);
            RAISE NOTICE 'sequence % is stopped (nextval() on it fails: tag "%" continues its numbers); drop it once nothing uses it', seq, tag;
        ELSE
            RAISE NOTICE 'sequence % is left in place; drop it once nothing else uses it', seq;
        END IF;
    END LOOP;

    IF must_advance THEN
        -- Last: it is not undone by a rollback, so every step that could fail comes before it.
        PERFORM idgen_internal.snowflake_advance_past(largest);
        RAISE NOTICE 'advanced snowflake ids past %, the largest value of %', largest, target;
    ELSIF family OPERATOR(pg_catalog.=) 'snowflake' AND largest IS NOT NULL THEN
        RAISE NOTICE 'snowflake ids are above every value of % already (the largest is %)', target, largest;
    END IF;
END
$convert$;
COMMENT ON FUNCTION idgen_internal.convert_column(regclass, name, text, text, int) IS
    'Internal: the work of snowflake_convert_column() and segment_convert_column().';

CREATE FUNCTION snowflake_convert_column(table_name regclass, column_name name)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM idgen_internal.convert_column(table_name, column_name, 'snowflake', NULL, NULL);
END
$$;
COMMENT ON FUNCTION snowflake_convert_column(regclass, name) IS
    'Switches a serial, IDENTITY or nextval() column (or an integer one without a default) to DEFAULT snowflake_next(): widens it and its foreign keys to bigint, advances the ids past its largest value if needed.';

CREATE FUNCTION segment_convert_column(table_name regclass, column_name name, tag text,
                                       step int DEFAULT 1000)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM idgen_internal.convert_column(table_name, column_name, 'segment', tag, step);
END
$$;
COMMENT ON FUNCTION segment_convert_column(regclass, name, text, int) IS
    'Switches a serial, IDENTITY or nextval() column (or an integer one without a default) to DEFAULT segment_next(tag): creates the tag above its largest value, widens it and its foreign keys to bigint.';

CREATE FUNCTION segment_create_from_sequence(tag text, sequence_name regclass, step int DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel_kind     "char";
    increment    bigint;
    seq_max      bigint;
    seq_last     bigint;
    seq_called   boolean;
    first_number bigint;
BEGIN
    IF tag IS NULL OR sequence_name IS NULL THEN
        RAISE EXCEPTION 'segment_create_from_sequence: tag and sequence_name must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM idgen_internal.require_segments('segment_create_from_sequence()');
    SELECT c.relkind INTO rel_kind FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) sequence_name;
    IF rel_kind IS DISTINCT FROM 'S' THEN
        RAISE EXCEPTION '% is not a sequence', sequence_name USING ERRCODE = 'wrong_object_type';
    END IF;
    PERFORM idgen_internal.require_ascending(sequence_name);
    PERFORM idgen_internal.require_own_relation(sequence_name, 'segment_create_from_sequence()');
    SELECT s.seqincrement, s.seqmax INTO increment, seq_max FROM pg_catalog.pg_sequence AS s
     WHERE s.seqrelid OPERATOR(pg_catalog.=) sequence_name;
    -- Why ALTER SEQUENCE first: it locks the sequence against nextval() until commit, so no
    -- number is handed out between reading it and stopping it.
    EXECUTE pg_catalog.format('ALTER SEQUENCE %s NO CYCLE', sequence_name);
    -- The sequence's next value: the one its next nextval() would return.
    EXECUTE pg_catalog.format('SELECT last_value, is_called FROM %s', sequence_name) INTO seq_last, seq_called;
    IF seq_called AND seq_last OPERATOR(pg_catalog.>) (seq_max OPERATOR(pg_catalog.-) increment) THEN
        RAISE EXCEPTION 'sequence % has no next value', sequence_name
            USING ERRCODE = 'sequence_generator_limit_exceeded',
                  DETAIL = pg_catalog.format('It handed out its maximum, %s (or a segment tag continues it already).', seq_max);
    END IF;
    first_number := CASE WHEN seq_called THEN seq_last OPERATOR(pg_catalog.+) increment ELSE seq_last END;
    BEGIN
        PERFORM idgen_internal.segment_create(tag, first_number, step, pg_catalog.format('continues sequence %s', sequence_name));
    EXCEPTION WHEN unique_violation OR duplicate_object THEN
        RAISE EXCEPTION 'segment tag "%" already exists', tag
            USING ERRCODE = 'duplicate_object',
                  HINT = pg_catalog.format('Choose another tag, or drop this one first with segment_drop(%L) if no table uses it.', tag);
    END;
    PERFORM idgen_internal.stop_sequence(sequence_name);
    RAISE NOTICE 'sequence % is stopped (nextval() on it fails: tag "%" continues its numbers)', sequence_name, tag;
    RETURN first_number;
END
$$;
COMMENT ON FUNCTION segment_create_from_sequence(text, regclass, int) IS
    'Creates a segment tag whose first number is the next value of a sequence, and stops the sequence (nextval() on it fails); returns that number.';
