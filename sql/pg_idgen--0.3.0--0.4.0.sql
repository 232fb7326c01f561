-- pg_idgen 0.3.0 -> 0.4.0: one naming grammar for every family (<family>_next, <family>_timestamp,
-- <family>_min; the old names stay), and the time-based families as rows. The library of 0.4.0
-- also serves the declarations of 0.3.0 unchanged until this script has run.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.4.0'" to load this file. \quit

CREATE FUNCTION objectid_next() RETURNS objectid
    AS 'MODULE_PATHNAME', 'pg_idgen_objectid_gen' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION objectid_next() IS
    'Next ObjectId (current BSON spec) of this server: unique, greater than every ObjectId it made before.';
COMMENT ON FUNCTION objectid_gen() IS
    'The same as objectid_next(), under its name before version 0.4.0.';
-- Whoever may call objectid_gen() may call objectid_next(), and nobody else: an administrator who
-- revoked the generator from PUBLIC must not find it open again under its new name. Then the
-- privileges are the administrator's, not the extension's: GRANT and REVOKE in an extension script
-- record themselves as the function's initial privileges (pg_init_privs), which pg_dump leaves
-- out, so a dump restored into a fresh install would open objectid_next() to PUBLIC again.
DO $$
DECLARE
    gen_oid pg_catalog.oid := '@extschema@.objectid_gen()'::pg_catalog.regprocedure;
    next_oid pg_catalog.oid := '@extschema@.objectid_next()'::pg_catalog.regprocedure;
    gen_acl pg_catalog.aclitem[];
    entry record;
BEGIN
    SELECT p.proacl INTO gen_acl FROM pg_catalog.pg_proc AS p WHERE p.oid OPERATOR(pg_catalog.=) gen_oid;
    IF gen_acl IS NULL THEN
        RETURN; -- the default for both: PUBLIC may call them
    END IF;
    -- Everyone but the owner loses what the new function got at creation (default privileges too).
    FOR entry IN
        SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                             ELSE pg_catalog.quote_ident(r.rolname) END AS grantee
          FROM pg_catalog.pg_proc AS p,
               pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
          LEFT JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) a.grantee
         WHERE p.oid OPERATOR(pg_catalog.=) next_oid AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION @extschema@.objectid_next() FROM %s', entry.grantee);
    END LOOP;
    FOR entry IN
        SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                    ELSE pg_catalog.quote_ident(r.rolname) END AS grantee,
               a.is_grantable
          FROM pg_catalog.aclexplode(gen_acl) AS a
          LEFT JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) a.grantee
         WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.objectid_next() TO %s%s', entry.grantee,
                                  CASE WHEN entry.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    DELETE FROM pg_catalog.pg_init_privs AS i
     WHERE i.objoid OPERATOR(pg_catalog.=) next_oid
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objsubid OPERATOR(pg_catalog.=) 0;
END $$;

CREATE FUNCTION snowflake_min(ts timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'snowflake_min_id_wrapper' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowflake_min(timestamptz) IS
    'Smallest snowflake id made at or after a time, for WHERE id >= snowflake_min(...) range scans.';
COMMENT ON FUNCTION snowflake_min_id(timestamptz) IS
    'The same as snowflake_min(), under its name before version 0.4.0.';

CREATE FUNCTION uuid_v7_timestamp(id uuid) RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'uuid_v7_timestamp_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION uuid_v7_timestamp(uuid) IS
    'The millisecond a UUIDv7 was made.';

CREATE FUNCTION pg_idgen_generators() RETURNS TABLE (
        family text,
        time_unit interval,
        time_end timestamptz,
        ids_per_second_cap bigint,
        last_made timestamptz,
        floor timestamptz,
        high_water_mark timestamptz)
    AS 'MODULE_PATHNAME', 'pg_idgen_generators_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_idgen_generators() IS
    'One row per time-based id family: time unit, end of its time, ids/s cap, time of the last id made, floor, persisted high-water mark.';
