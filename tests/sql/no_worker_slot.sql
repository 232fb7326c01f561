-- This phase's server has no background worker slot to spare (max_worker_processes = 3: the
-- logical replication launcher, pg_idgen's clock worker and the worker of pg_idgen.database,
-- "postgres"). This database is not pg_idgen.database, so its calls need a worker of its own.
-- (pg_idgen.segment_wait_timeout = 500: how long a call waits for one.)
SET timezone = 'UTC';

-- No worker slot for this database's worker: a call that needs a range says so (53400) and names
-- the setting to raise; so does a per-key sequence whose section must be loaded.
SELECT segment_create('one');
SELECT segment_next('one');
SELECT sqlstate_of($$SELECT segment_next('one')$$);
SELECT seq_space_create('tickets');
SELECT seq_next('tickets', 1);
SELECT sqlstate_of($$SELECT seq_next('tickets', 1)$$);
SELECT segment_drop('one');
SELECT seq_space_drop('tickets');
