-- Settings are fixed at server start: ids made under one layout must decode under it.
SHOW pg_idgen.node_id;
SHOW pg_idgen.layout;
SHOW pg_idgen.epoch;
SHOW pg_idgen.time_bits;
SHOW pg_idgen.max_clock_borrow;
SHOW pg_idgen.max_clock_wait;
SHOW pg_idgen.clock_reserve;
SHOW pg_idgen.clock_step_policy;

-- None can change while the server runs.
SET pg_idgen.node_id = 8;
SET pg_idgen.layout = 'sonyflake';
SET pg_idgen.max_clock_borrow = '5s';
SET pg_idgen.clock_step_policy = 'refuse';
ALTER SYSTEM SET pg_idgen.node_id = 'seven';

-- ALTER SYSTEM checks each value as the next start would: nothing it accepts stops the server.
ALTER SYSTEM SET pg_idgen.node_id = '1.5';
-- A node id must fit the node bits of the server's layout (10 here): the next start would refuse
-- 5000. (RESET, in case it was taken: the next phase restarts this server.)
ALTER SYSTEM SET pg_idgen.node_id = 5000;
ALTER SYSTEM RESET pg_idgen.node_id;
ALTER SYSTEM SET pg_idgen.epoch = 'now';
ALTER SYSTEM SET pg_idgen.epoch = '2999-01-01 00:00:00+00';
ALTER SYSTEM SET pg_idgen.database = '';
ALTER SYSTEM SET pg_idgen.time_bits = 10;
ALTER SYSTEM SET pg_idgen.max_tags = 0;
ALTER SYSTEM SET pg_idgen.layout = 'leaf';
ALTER SYSTEM SET pg_idgen.clock_forward_delay = '2h';
ALTER SYSTEM SET pg_idgen.nodeid = 3;
-- The node registry's connection string is checked by libpq's parser; the lease by its bounds.
ALTER SYSTEM SET pg_idgen.node_registry = 'host=registry nonsense';
ALTER SYSTEM SET pg_idgen.node_registry = 'hots=registry';
ALTER SYSTEM SET pg_idgen.segment_authority = 'host=''unterminated';
ALTER SYSTEM SET pg_idgen.node_lease_ttl = '1s';
ALTER SYSTEM SET pg_idgen.remote_timeout = '100ms';
-- The epoch is read as the server reads it at start (ISO, year first, UTC), whatever the session says.
SET datestyle = 'SQL, DMY';
ALTER SYSTEM SET pg_idgen.epoch = '13/01/2025';
RESET datestyle;
-- A valid value is accepted (and taken back here).
ALTER SYSTEM SET pg_idgen.node_id = 9;
ALTER SYSTEM RESET pg_idgen.node_id;

-- The namespace is reserved: a misspelt setting is an error, not a silent new variable.
SET pg_idgen.nodeid = 8;

SELECT name, context, unit, short_desc <> '' AS documented
  FROM pg_settings WHERE name LIKE 'pg_idgen.%' ORDER BY name;

-- The registry's connection string may hold a password: superusers only.
CREATE ROLE settings_reader;
SET ROLE settings_reader;
SHOW pg_idgen.node_registry;
SELECT count(*) FROM pg_settings WHERE name = 'pg_idgen.node_registry';
RESET ROLE;
DROP ROLE settings_reader;
-- Without a registry, no lease: node_lease_status() has no row.
SELECT count(*) FROM node_lease_status();
-- Without an authority, segments are local: segment_authority_status() has no row.
SELECT count(*) FROM segment_authority_status();
