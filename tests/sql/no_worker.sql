-- This phase's server cannot start the worker of pg_idgen.database, which is this database
-- ("pg_idgen_regress"): max_worker_processes = 2 holds the logical replication launcher and
-- pg_idgen's clock worker, and the postmaster refuses to register a third background worker ("too
-- many background workers" in its log). So no worker runs for this database, and none is started
-- on demand: that is only done for databases other than pg_idgen.database.
-- (pg_idgen.segment_wait_timeout = 500: how long a call waits for the worker.)
SET timezone = 'UTC';

-- A call that needs a range waits the timeout, then says that the worker is not running (55000)
-- and where to look; so does a per-key sequence whose section must be loaded. Nothing is handed
-- out meanwhile.
SELECT segment_create('one');
SELECT segment_next('one');
SELECT sqlstate_of($$SELECT segment_next('one')$$);
SELECT sqlstate_of($$SELECT segment_next_range('one', 10)$$);
SELECT seq_space_create('tickets');
SELECT seq_next('tickets', 1);
SELECT sqlstate_of($$SELECT seq_next('tickets', 1)$$);
SELECT sqlstate_of($$SELECT seq_next_text('tickets', 'a')$$);
SELECT seq_current('tickets', 1);
SELECT segment_drop('one');
SELECT seq_space_drop('tickets');
