-- This phase's server caches at most two segment tags at once (pg_idgen.max_tags = 2).
SET timezone = 'UTC';

-- A third tag in use at once finds no slot: 53400, naming the setting; its numbers are not lost
-- (the tag's row is untouched) and it gets them once a slot is free.
SELECT segment_create('one'), segment_create('two'), segment_create('three');
SELECT segment_next('one') AS one, segment_next('two') AS two;
SELECT segment_next('three');
SELECT sqlstate_of($$SELECT segment_next('three')$$);
SELECT max_id FROM segment_tag WHERE tag = 'three';
-- Dropping a tag frees its slot.
SELECT segment_drop('one');
SELECT segment_next('three') AS three;
SELECT segment_drop('two'), segment_drop('three');

-- seq_space_drop() runs only at READ COMMITTED: at a higher isolation level its snapshot could
-- miss sections made after it (25001), and nothing is dropped.
SELECT seq_space_create('isolated');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT seq_space_drop('isolated');
ROLLBACK;
SELECT count(*) AS still_there FROM seq_space WHERE space = 'isolated';
SELECT seq_space_drop('isolated');
