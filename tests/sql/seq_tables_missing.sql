-- pg_idgen's sequence tables missing while its functions stay: the extension's owner took one out
-- of the extension (ALTER EXTENSION pg_idgen DROP TABLE), and perhaps dropped it then (a plain
-- DROP TABLE of a member is refused). Creating or dropping a space then says that the tables do
-- not exist in this database (42P01) and how to get them back; a call for numbers of a space this
-- session has not used finds no space (42704). In transactions that are rolled back: the tables
-- are back afterwards.
SET timezone = 'UTC';
SELECT seq_space_create('kept');
SELECT seq_space_create('unused');
SELECT seq_next('kept', 1);
SELECT sqlstate_of($$DROP TABLE seq_section$$) AS plain_drop;

-- seq_section dropped.
BEGIN;
ALTER EXTENSION pg_idgen DROP TABLE seq_section;
DROP TABLE seq_section;
SAVEPOINT before_calls;
SELECT seq_space_create('new');
ROLLBACK TO SAVEPOINT before_calls;
SELECT seq_space_drop('kept');
ROLLBACK;

-- seq_space taken out of the extension: not pg_idgen's table any more.
BEGIN;
ALTER EXTENSION pg_idgen DROP TABLE seq_space;
SELECT sqlstate_of($$SELECT seq_space_create('new')$$) AS seq_space_create,
       sqlstate_of($$SELECT seq_space_drop('kept')$$) AS seq_space_drop,
       sqlstate_of($$SELECT seq_next('unused', 1)$$) AS seq_next;
ROLLBACK;

-- Rolled back: the tables are the extension's again, the spaces are there and number.
SELECT seq_next('kept', 1) > 1 AS goes_on, seq_next('unused', 1);
SELECT seq_space_drop('kept'), seq_space_drop('unused');
