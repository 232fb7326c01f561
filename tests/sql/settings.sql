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

-- The namespace is reserved: a misspelt setting is an error, not a silent new variable.
SET pg_idgen.nodeid = 8;

SELECT name, context, unit, short_desc <> '' AS documented
  FROM pg_settings WHERE name LIKE 'pg_idgen.%' ORDER BY name;
