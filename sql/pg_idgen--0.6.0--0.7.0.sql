-- pg_idgen 0.6.0 -> 0.7.0. The conversions reach pg_idgen's own functions through the schema
-- idgen_internal (SQL-standard bodies bound to them by OID; their PL/pgSQL helpers move there from
-- the extension's schema) and check a new column default's function by OID. The node registry
-- keeps a record of its own continuity (node_registry_state) and its functions pin
-- session_replication_role = replica. The function bodies are copies of src/migrate.sql and
-- src/node/registry.sql: the upgrade test compares them with a fresh install.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.7.0'" to load this file. \quit

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
        EXCEPTION WHEN unique_violation THEN
            RAISE EXCEPTION 'segment tag "%" exists already', tag
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

CREATE OR REPLACE FUNCTION snowflake_convert_column(table_name regclass, column_name name)
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

CREATE OR REPLACE FUNCTION segment_convert_column(table_name regclass, column_name name, tag text,
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

CREATE OR REPLACE FUNCTION segment_create_from_sequence(tag text, sequence_name regclass, step int DEFAULT 1000)
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
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'segment tag "%" exists already', tag
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

-- The registry's memory of its own continuity. Rows of node_lease are never deleted, only expired:
-- a node id without a row was never leased, and may be handed out at once. That holds only while
-- the table keeps every row and every renewal, so this row records which file the table was in,
-- how many rows it had, the sum of their renewal times (renewals only move them forward) and the
-- server's WAL timeline. A table emptied, rewritten or set back under the registry (DELETE,
-- TRUNCATE, DROP and CREATE EXTENSION, pg_restore --clean or --data-only of an older dump,
-- VACUUM FULL), or a registry promoted from a standby (a new timeline), no longer matches: it
-- then counts as reset, and, as after its start, hands out node ids a server does not hold only
-- once the longest lease and margin it knows of has passed since the reset, and above the end of
-- that wait (lost rows took their floors with them). Why not in pg_dump: a restored copy would
-- describe another file, which is what it must not do (so a restore is a reset too).
CREATE TABLE node_registry_state (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    lease_file oid NOT NULL,            -- pg_relation_filenode(node_lease) when its rows were last known whole
    lease_rows bigint NOT NULL,         -- how many rows it had then
    renewed_sum numeric NOT NULL,       -- the sum of their renewed_at, in seconds since 1970
    timeline   text NOT NULL,           -- the WAL timeline the registry wrote them on
    ids_before_us bigint NOT NULL,      -- the largest ids_before_us any row has held
    reset_floor_us bigint NOT NULL,     -- that, when the registry was last found reset: lost rows' ids lie below
    reset_at   timestamptz NOT NULL,    -- when the registry began: created, or found reset
    longest    interval NOT NULL        -- the longest lease and margin it has given
);
-- (An updated registry begins now: until its leases' length and margin have passed, it gives
-- only the node ids servers hold.)
INSERT INTO node_registry_state
    SELECT true, pg_catalog.pg_relation_filenode('@extschema@.node_lease'::pg_catalog.regclass), pg_catalog.count(*),
           COALESCE(pg_catalog.sum(pg_catalog.extract('epoch', l.renewed_at)), 0),
           pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8),
           COALESCE(pg_catalog.max(l.ids_before_us), 0), 0, pg_catalog.clock_timestamp(),
           COALESCE(pg_catalog.max(l.reusable_at OPERATOR(pg_catalog.-) l.renewed_at), interval '0')
      FROM @extschema@.node_lease AS l;
COMMENT ON TABLE node_registry_state IS
    'The node registry''s record of node_lease being whole (used in the database pg_idgen.node_registry names).';

-- Checks that node_lease is the table the registry's leases were given from (see above), and
-- records a reset otherwise. Returns when the registry began and the longest lease and margin it
-- knows of (with `lease`, the caller's). Takes the state row's lock: calls of the registry run one
-- at a time from here. Called only by the two functions below, in the schema they trust.
CREATE FUNCTION pg_idgen_node_registry_began(s name, lease interval, OUT began timestamptz, OUT longest interval, OUT reset_floor_us bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease_file oid := pg_catalog.pg_relation_filenode(pg_catalog.format('%I.node_lease', s)::pg_catalog.regclass);
    timeline text := pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8);
    lease_rows bigint;
    renewed_sum numeric;
    known record;
BEGIN
    -- Why a table lock and an update in place, never a new row: a second call waiting here must
    -- find the row the first one left, or it would count a reset of its own and lose `longest`.
    EXECUTE pg_catalog.format('LOCK TABLE %I.node_registry_state IN EXCLUSIVE MODE', s);
    EXECUTE pg_catalog.format('SELECT r.lease_file, r.lease_rows, r.renewed_sum, r.timeline, r.ids_before_us, r.reset_floor_us, r.reset_at, r.longest
                                 FROM %I.node_registry_state r', s)
        INTO known;
    EXECUTE pg_catalog.format('SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(pg_catalog.extract(''epoch'', l.renewed_at)), 0)
                                 FROM %I.node_lease l', s)
        INTO lease_rows, renewed_sum;
    longest := GREATEST(known.longest, lease);
    began := known.reset_at;
    reset_floor_us := known.reset_floor_us;
    IF known.lease_file IS NULL OR known.lease_file OPERATOR(pg_catalog.<>) lease_file
       OR known.lease_rows OPERATOR(pg_catalog.<>) lease_rows OR known.renewed_sum OPERATOR(pg_catalog.>) renewed_sum
       OR known.timeline OPERATOR(pg_catalog.<>) timeline THEN
        RAISE LOG 'pg_idgen node registry: node_lease is not what its leases were given from (% rows, renewals summing to % s, in file % on timeline %; expected %, %, %, %): it counts as reset, and hands out node ids not held only after % from now',
            lease_rows, renewed_sum, lease_file, timeline, known.lease_rows, known.renewed_sum, known.lease_file, known.timeline, longest;
        began := pg_catalog.clock_timestamp();
        reset_floor_us := COALESCE(known.ids_before_us, 0);
        EXECUTE pg_catalog.format('INSERT INTO %I.node_registry_state AS r VALUES (true, $1, $2, $3, $4, $5, $5, $6, $7)
                                     ON CONFLICT (only_row) DO UPDATE SET lease_file = $1, lease_rows = $2, renewed_sum = $3, timeline = $4,
                                                                          reset_floor_us = $5, reset_at = $6, longest = $7', s)
            USING lease_file, lease_rows, renewed_sum, timeline, reset_floor_us, began, longest;
    ELSIF longest OPERATOR(pg_catalog.>) known.longest THEN
        EXECUTE pg_catalog.format('UPDATE %I.node_registry_state SET longest = $1', s) USING longest;
    END IF;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_registry_began(name, interval) IS
    'Node registry, internal: when the registry began (created, or found reset), the longest lease and margin it knows of, and the floor of node ids whose rows a reset lost.';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_registry_began(name, interval) FROM PUBLIC;

-- Records node_lease as whole after the registry's own change of it (a lease taken or renewed).
CREATE FUNCTION pg_idgen_node_registry_record(s name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE pg_catalog.format('UPDATE %1$I.node_registry_state AS r SET (lease_rows, renewed_sum, ids_before_us) =
                                 (SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(pg_catalog.extract(''epoch'', l.renewed_at)), 0),
                                         GREATEST(r.ids_before_us, pg_catalog.max(l.ids_before_us))
                                    FROM %1$I.node_lease l)', s);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_registry_record(name) IS
    'Node registry, internal: records node_lease as whole after a lease was taken or renewed.';
REVOKE EXECUTE ON FUNCTION pg_idgen_node_registry_record(name) FROM PUBLIC;

-- Takes a node id for a server start (none, with the time to ask again, while the registry is in
-- the wait after its start or reset): the one it holds already (an answer that was lost), the
-- one it is configured with (or prefers: the node id it made ids with before), its own from an
-- earlier start whose lease has ended, or a free one: never leased before first, then one whose
-- lease ran out more than its margin ago (never a configured one). Returns it and the time its
-- ids must start at (floor_us: every earlier holder's ids lie below). Why a function that looks
-- its table up: the schema is found in pg_extension when it runs, not written in at install
-- time, so renaming the schema cannot point it at another table. Why session_replication_role
-- = replica (both functions): a trigger that a role granted TRIGGER on node_lease adds would
-- otherwise run with the privileges of the superuser these functions run as.
CREATE OR REPLACE FUNCTION pg_idgen_node_lease_take(
    holder text, holder_name text, layout text, wanted int, max_node_id int,
    ttl_ms int, margin_ms int, ids_before_us bigint, prefer boolean,
    OUT node_id int, OUT floor_us bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET session_replication_role = replica
AS $$
DECLARE
    -- The table, named through the extension's schema, whose owner must be a superuser: the name is
    -- parsed again by each statement below, and the owner of the schema could otherwise rename
    -- it away in between and plant a look-alike (src/remote.rs, extension_schema).
    s name := (SELECT n.nspname
                 FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
                   ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'
                  AND COALESCE(
                       (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                         WHERE r.oid OPERATOR(pg_catalog.=) CASE
                             WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                             THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                             ELSE n.nspowner END), false));
    t text := pg_catalog.format('%I.node_lease', s);
    began timestamptz;
    window_end timestamptz;
    other record;
    chosen int;
    longest interval;
    held_longest interval;
    reset_floor_us bigint;
BEGIN
    IF s IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'pg_idgen''s schema in the node registry is owned by a role that is not a superuser';
    END IF;
    IF holder IS NULL OR holder_name IS NULL OR layout IS NULL OR max_node_id IS NULL OR ttl_ms IS NULL
       OR margin_ms IS NULL OR ids_before_us IS NULL OR prefer IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'pg_idgen_node_lease_take(): only the wanted node id may be NULL';
    END IF;
    IF max_node_id NOT BETWEEN 0 AND 2147483646 OR wanted NOT BETWEEN 0 AND max_node_id
       OR ttl_ms NOT BETWEEN 1000 AND 3600000 OR margin_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pg_idgen_node_lease_take(): an argument is out of range';
    END IF;
    -- The commit must be durable before the lease is used, whatever the session or a pooler says.
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    -- A registry that just started may have come back from a backup or an older standby, and one
    -- found reset (above node_registry_state) has lost rows: a lease it lost would look free.
    -- Until the longest lease and its margin have passed since the start or the reset, a server
    -- gets only the row it holds already, and nothing else: no node id, and the time from which
    -- it may ask again in floor_us. Why an answer and not an error: an error would roll back the
    -- record of the reset, and the wait would start anew at every call.
    EXECUTE pg_catalog.format('SELECT r.began, r.longest, r.reset_floor_us FROM %I.pg_idgen_node_registry_began($1, $2) AS r', s)
        INTO began, longest, reset_floor_us USING s, pg_catalog.make_interval(secs => (ttl_ms OPERATOR(pg_catalog.+) margin_ms) OPERATOR(pg_catalog./) 1000.0);
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(l.reusable_at OPERATOR(pg_catalog.-) l.renewed_at) FROM %s l', t) INTO held_longest;
    window_end := GREATEST(pg_catalog.pg_postmaster_start_time(), began) OPERATOR(pg_catalog.+) GREATEST(longest, held_longest);
    IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) window_end THEN
        EXECUTE pg_catalog.format('SELECT l.node_id FROM %s l WHERE l.holder OPERATOR(pg_catalog.=) $1 ORDER BY l.node_id LIMIT 1', t)
            INTO chosen USING holder;
        IF chosen IS NULL OR (NOT prefer AND chosen OPERATOR(pg_catalog.<>) COALESCE(wanted, chosen)) THEN
            node_id := NULL;
            floor_us := (pg_catalog.extract('epoch', window_end) OPERATOR(pg_catalog.*) 1000000::pg_catalog.numeric)::pg_catalog.int8;
            RETURN;
        END IF;
        wanted := chosen; -- the row it holds, and no other (a preferred id's row may be one it lost)
    END IF;
    -- One taker at a time: two servers must not pick the same free id.
    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', t);
    EXECUTE pg_catalog.format('SELECT l.layout FROM %s l WHERE l.layout OPERATOR(pg_catalog.<>) $1 LIMIT 1', t)
        INTO other USING layout;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('the node registry leases node ids for snowflake layout %s, not %s', other.layout, layout),
            HINT = 'Every server that leases node ids from one registry must use the same layout and epoch.';
    END IF;
    EXECUTE pg_catalog.format('SELECT l.node_id FROM %s l WHERE l.holder OPERATOR(pg_catalog.=) $1 ORDER BY l.node_id LIMIT 1', t)
        INTO chosen USING holder;
    IF chosen IS NOT NULL AND wanted IS NOT NULL AND chosen OPERATOR(pg_catalog.<>) wanted THEN
        chosen := NULL;
    END IF;
    IF chosen IS NULL AND wanted IS NOT NULL THEN
        -- Held by another server until its margin has passed; this server's own row from an
        -- earlier start may be taken once its lease has ended (the floor keeps the ids apart).
        EXECUTE pg_catalog.format(
            'SELECT l.holder_name, l.expires_at FROM %s l WHERE l.node_id OPERATOR(pg_catalog.=) $1
                AND l.reusable_at OPERATOR(pg_catalog.>=) pg_catalog.clock_timestamp()
                AND NOT (l.holder_name OPERATOR(pg_catalog.=) $2 AND l.expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp())', t)
            INTO other USING wanted, holder_name;
        IF other IS NULL THEN
            chosen := wanted;
        ELSIF NOT prefer THEN
            RAISE EXCEPTION USING ERRCODE = '55006',
                MESSAGE = pg_catalog.format('node id %s is held by %s', wanted, other.holder_name),
                DETAIL = pg_catalog.format('Its lease runs until %s, and the margin after.', other.expires_at),
                HINT = 'Two servers must not share a node id: give this server another pg_idgen.node_id, or leave it unset to lease a free one.';
        END IF;
    END IF;
    IF chosen IS NULL THEN
        EXECUTE pg_catalog.format(
            'SELECT l.node_id FROM %s l WHERE l.holder_name OPERATOR(pg_catalog.=) $1 AND NOT l.fixed
                AND l.expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp() ORDER BY l.node_id LIMIT 1', t)
            INTO chosen USING holder_name;
    END IF;
    IF chosen IS NULL THEN
        -- The lowest id never leased (a gap below the largest, or the one after it).
        EXECUTE pg_catalog.format(
            'SELECT g FROM (SELECT 0 AS g WHERE NOT EXISTS (SELECT FROM %1$s l WHERE l.node_id OPERATOR(pg_catalog.=) 0)
                            UNION ALL
                            SELECT l.node_id OPERATOR(pg_catalog.+) 1 FROM %1$s l
                             WHERE l.node_id OPERATOR(pg_catalog.<) $1
                               AND NOT EXISTS (SELECT FROM %1$s m WHERE m.node_id OPERATOR(pg_catalog.=) (l.node_id OPERATOR(pg_catalog.+) 1))) AS free
              WHERE g OPERATOR(pg_catalog.<=) $1 ORDER BY g LIMIT 1', t)
            INTO chosen USING max_node_id;
    END IF;
    IF chosen IS NULL THEN
        EXECUTE pg_catalog.format(
            'SELECT l.node_id FROM %s l WHERE NOT l.fixed AND l.node_id OPERATOR(pg_catalog.<=) $1
                AND l.reusable_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp() ORDER BY l.ids_before_us, l.node_id LIMIT 1', t)
            INTO chosen USING max_node_id;
    END IF;
    IF chosen IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '53400',
            MESSAGE = pg_catalog.format('no free node id: all %s are leased', max_node_id OPERATOR(pg_catalog.+) 1);
    END IF;
    -- A new holder's ids start above every earlier holder's (floor_us); the same holder keeps
    -- its floor, so an answer lost after the commit loses nothing.
    EXECUTE pg_catalog.format(
        'INSERT INTO %s AS l (node_id, holder, holder_name, layout, fixed, expires_at, reusable_at, ids_before_us, floor_us, acquired_at, renewed_at)
         VALUES ($1, $2, $3, $4, $5, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $6 OPERATOR(pg_catalog./) 1000.0),
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($6 OPERATOR(pg_catalog.+) $7) OPERATOR(pg_catalog./) 1000.0),
                 $8, $9, pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp())
         ON CONFLICT (node_id) DO UPDATE SET
             holder = EXCLUDED.holder, holder_name = EXCLUDED.holder_name, layout = EXCLUDED.layout, fixed = EXCLUDED.fixed,
             expires_at = EXCLUDED.expires_at, reusable_at = EXCLUDED.reusable_at,
             ids_before_us = GREATEST(l.ids_before_us, EXCLUDED.ids_before_us),
             floor_us = CASE WHEN l.holder OPERATOR(pg_catalog.=) EXCLUDED.holder THEN l.floor_us ELSE l.ids_before_us END,
             acquired_at = CASE WHEN l.holder OPERATOR(pg_catalog.=) EXCLUDED.holder THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
             renewed_at = EXCLUDED.renewed_at
         RETURNING l.floor_us', t)
        INTO floor_us USING chosen, holder, holder_name, layout, wanted IS NOT NULL AND NOT prefer, ttl_ms, margin_ms, ids_before_us,
                            GREATEST((pg_catalog.extract('epoch', window_end) OPERATOR(pg_catalog.*) 1000000::pg_catalog.numeric)::pg_catalog.int8, reset_floor_us);
    -- One row per holder: another it took (an answer lost after a commit) is free again; its
    -- ids_before_us stays, and becomes the next holder's floor.
    EXECUTE pg_catalog.format(
        'UPDATE %s AS l SET expires_at = pg_catalog.clock_timestamp(), reusable_at = pg_catalog.clock_timestamp()
          WHERE l.holder OPERATOR(pg_catalog.=) $1 AND l.node_id OPERATOR(pg_catalog.<>) $2', t)
        USING holder, chosen;
    -- What the registry knows whole now: the new row, the renewal.
    EXECUTE pg_catalog.format('SELECT FROM %I.pg_idgen_node_registry_record($1)', s) USING s;
    node_id := chosen;
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_take(text, text, text, int, int, int, int, bigint, boolean) IS
    'Node registry: leases a node id to a server start (called by the pg_idgen lease worker over libpq).';

-- Renews a lease its holder still has; false when another server holds the id now, or when the
-- registry lost what the holder last committed (ids_before_us went back: a restore, a failover).
CREATE OR REPLACE FUNCTION pg_idgen_node_lease_renew(holder text, node_id int, ttl_ms int, margin_ms int, ids_before_us bigint, committed_us bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET session_replication_role = replica
AS $$
DECLARE
    -- The table, named through the extension's schema, whose owner must be a superuser: the name is
    -- parsed again by each statement below, and the owner of the schema could otherwise rename
    -- it away in between and plant a look-alike (src/remote.rs, extension_schema).
    s name := (SELECT n.nspname
                 FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
                   ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'
                  AND COALESCE(
                       (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                         WHERE r.oid OPERATOR(pg_catalog.=) CASE
                             WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                             THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                             ELSE n.nspowner END), false));
    t text := pg_catalog.format('%I.node_lease', s);
    renewed boolean;
BEGIN
    IF s IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'pg_idgen''s schema in the node registry is owned by a role that is not a superuser';
    END IF;
    IF ttl_ms NOT BETWEEN 1000 AND 3600000 OR margin_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'pg_idgen_node_lease_renew(): an argument is out of range';
    END IF;
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    -- A reset registry (rows lost) renews only the rows it still has.
    EXECUTE pg_catalog.format('SELECT FROM %I.pg_idgen_node_registry_began($1, $2)', s)
        USING s, pg_catalog.make_interval(secs => (ttl_ms OPERATOR(pg_catalog.+) margin_ms) OPERATOR(pg_catalog./) 1000.0);
    EXECUTE pg_catalog.format(
        'UPDATE %s AS l SET
             expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $3 OPERATOR(pg_catalog./) 1000.0),
             reusable_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($3 OPERATOR(pg_catalog.+) $4) OPERATOR(pg_catalog./) 1000.0),
             ids_before_us = GREATEST(l.ids_before_us, $5),
             renewed_at = pg_catalog.clock_timestamp()
          WHERE l.node_id OPERATOR(pg_catalog.=) $2 AND l.holder OPERATOR(pg_catalog.=) $1
            AND l.ids_before_us OPERATOR(pg_catalog.>=) $6
         RETURNING true', t)
        INTO renewed USING holder, node_id, ttl_ms, margin_ms, ids_before_us, committed_us;
    EXECUTE pg_catalog.format('SELECT FROM %I.pg_idgen_node_registry_record($1)', s) USING s;
    RETURN COALESCE(renewed, false);
END
$$;
COMMENT ON FUNCTION pg_idgen_node_lease_renew(text, int, int, int, bigint, bigint) IS
    'Node registry: renews a node id lease its holder still has (called by the pg_idgen lease worker over libpq).';


-- The helpers of 0.6.0, which were called by name through the extension's schema.
DROP FUNCTION pg_idgen_convert_column(regclass, name, text, text, int);
DROP FUNCTION pg_idgen_require_segments(text);
DROP FUNCTION pg_idgen_require_ascending(regclass);
DROP FUNCTION pg_idgen_stop_sequence(regclass);
