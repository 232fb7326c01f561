-- The library is not in shared_preload_libraries: CREATE EXTENSION worked (setup), the pure
-- decoders work, and every generator raises an ERROR that says how to fix it.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

SELECT snowflake_next();
SELECT sqlstate_of('SELECT snowflake_next()');
SELECT * FROM pg_idgen_status();
SELECT * FROM pg_idgen_generators();

SELECT * FROM id_decode(4194324522);
SELECT snowflake_timestamp(4194324522);
SELECT snowflake_min_id('2025-01-01 00:00:01+00');

-- Tags can be managed without the library preloaded (nothing is cached, nothing to retire).
SELECT segment_create('unloaded');
SELECT tag, max_id FROM segment_tag;
SELECT segment_drop('unloaded');
SELECT segment_next('unloaded');
-- Converting to segment numbers needs them served: refused before anything changes (55000).
CREATE TABLE unloaded_t (id serial PRIMARY KEY);
\set SHOW_CONTEXT never
SELECT segment_convert_column('unloaded_t', 'id', 'unloaded');
SELECT segment_create_from_sequence('unloaded', 'unloaded_t_id_seq');
SELECT pg_get_expr(adbin, adrelid) AS default_unchanged FROM pg_attrdef WHERE adrelid = 'unloaded_t'::regclass;
\set SHOW_CONTEXT errors
DROP TABLE unloaded_t;

-- Spaces of per-key sequences too (with their secret), and seq_key() computes; numbers need the
-- library preloaded.
SELECT seq_space_create('unloaded', step => 10);
SELECT space, step, section_keys, text_key_hash FROM seq_space;
SELECT count(*) AS secrets FROM seq_space_secret;
SELECT seq_key('unloaded', 'room:general') = seq_key('unloaded', 'room:general') AS has_a_key;
SELECT seq_next('unloaded', 1);
SELECT seq_current_text('unloaded', 'room:general');
SELECT * FROM seq_status();
SELECT seq_space_drop('unloaded');
SELECT count(*) AS spaces_left FROM seq_space;

-- Public numbers need no preload: the keys are a table, each backend's cache is told of changes
-- by relcache invalidations.
SELECT id_mask_key_create() AS created;
SELECT id_unmask(id_mask(5)) AS unmasked, id_unmask_decimal(id_mask_decimal(5, 12)) AS unmasked_decimal;
SELECT id_mask_key_create() AS rotated;
SELECT left(id_mask_base32(5), 1) AS current_version;
