-- The node registry's functions run as a superuser (SECURITY DEFINER) and reach node_lease through
-- pg_idgen's schema: a schema owned by a role that is not a superuser could be made to hold a
-- look-alike table, so both refuse it (42501) and change nothing.
CREATE ROLE registry_schema_owner;
BEGIN;
ALTER SCHEMA public OWNER TO registry_schema_owner;
SELECT sqlstate_of($$SELECT * FROM pg_idgen_node_lease_take('h', 'h', 'twitter', NULL, 1023, 3000, 1000, 0, false)$$) AS take;
SELECT sqlstate_of($$SELECT pg_idgen_node_lease_renew('h', 1, 3000, 1000, 0, 0)$$) AS renew;
SELECT count(*) AS leases FROM node_lease;
\set VERBOSITY terse
SELECT * FROM pg_idgen_node_lease_take('h', 'h', 'twitter', NULL, 1023, 3000, 1000, 0, false);
\set VERBOSITY default
ROLLBACK;
DROP ROLE registry_schema_owner;
