-- Text keys of per-key sequences (docs/sequences.md#text-keys): told apart by their bytes, and
-- hashed with a secret of their space.
SELECT seq_space_create('tk_a', step => 100), seq_space_create('tk_b', step => 100);

-- Keys equal but spelled differently. Under a nondeterministic collation 'Berlin', 'berlin' and
-- 'BERLIN' are one value to the table and its unique indexes; pg_idgen tells keys apart by their
-- bytes (a collation's sort keys change with its library's version, and a key's counter must not),
-- so it refuses such keys (0A000) rather than give them three counters. With ICU (Debian's
-- PostgreSQL), the case-insensitive collation of the issue; a build without ICU (PyPI's 16-18)
-- cannot make a nondeterministic collation, so there a copy of "C" whose catalog row says it is
-- nondeterministic, which is what pg_idgen reads of a collation. The rest is the same for both.
DO $$
BEGIN
    CREATE COLLATION tk_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
EXCEPTION WHEN feature_not_supported THEN
    CREATE COLLATION tk_ci FROM "C";
    UPDATE pg_catalog.pg_collation SET collisdeterministic = false WHERE collname = 'tk_ci';
END $$;
SELECT collname, collisdeterministic FROM pg_collation WHERE collname = 'tk_ci';

-- seq_fill() on a key column of that collation: refused at the first row, nothing numbered.
CREATE TABLE tk_cities (city text COLLATE tk_ci NOT NULL, n bigint, title text);
CREATE TRIGGER tk_cities_n BEFORE INSERT ON tk_cities FOR EACH ROW EXECUTE FUNCTION seq_fill('tk_a', 'city', 'n');
INSERT INTO tk_cities (city) VALUES ('Berlin'), ('berlin'), ('BERLIN') RETURNING city, n;
SELECT sqlstate_of($$INSERT INTO tk_cities (city) VALUES ('Berlin')$$);
-- The same through a varchar column, and through a domain over text that carries the collation.
CREATE DOMAIN tk_city AS text COLLATE tk_ci;
CREATE TABLE tk_other (v varchar(20) COLLATE tk_ci, d tk_city, n bigint);
CREATE TRIGGER tk_other_v BEFORE INSERT ON tk_other FOR EACH ROW EXECUTE FUNCTION seq_fill('tk_a', 'v', 'n');
INSERT INTO tk_other (v) VALUES ('Berlin');
DROP TRIGGER tk_other_v ON tk_other;
CREATE TRIGGER tk_other_d BEFORE INSERT ON tk_other FOR EACH ROW EXECUTE FUNCTION seq_fill('tk_a', 'd', 'n');
INSERT INTO tk_other (d) VALUES ('Berlin');
-- Refused also when the insert gives the number: the trigger does not fit the table, whatever the row.
INSERT INTO tk_cities VALUES ('Berlin', 7, 'imported') RETURNING city, n;
-- The column given a deterministic collation (as the hint says): each spelling is a key of its own,
-- for the table too.
ALTER TABLE tk_cities ALTER COLUMN city TYPE text COLLATE "C";
INSERT INTO tk_cities (city) VALUES ('Berlin'), ('berlin'), ('Berlin') RETURNING city, n;

-- Called directly, the text functions refuse a key of that collation too; COLLATE "C" numbers it.
SELECT seq_next_text('tk_b', 'Berlin' COLLATE tk_ci);
SELECT seq_current_text('tk_b', 'Berlin' COLLATE tk_ci);
SELECT seq_key('tk_b', 'Berlin' COLLATE tk_ci);
SELECT seq_next_text('tk_b', 'Berlin' COLLATE "C") AS berlin, seq_next_text('tk_b', 'berlin' COLLATE "C") AS lower_case;
-- Types whose equality is not their bytes' are not key columns at all (42804): char(n) ignores its
-- padding, citext the case; name and the rest are refused likewise.
CREATE EXTENSION citext;
CREATE TABLE tk_types (padded char(8), ci citext, nm name, n bigint);
CREATE TRIGGER tk_padded BEFORE INSERT ON tk_types FOR EACH ROW EXECUTE FUNCTION seq_fill('tk_a', 'padded', 'n');
INSERT INTO tk_types (padded) VALUES ('Berlin');
DROP TRIGGER tk_padded ON tk_types;
CREATE TRIGGER tk_ci BEFORE INSERT ON tk_types FOR EACH ROW EXECUTE FUNCTION seq_fill('tk_a', 'ci', 'n');
INSERT INTO tk_types (ci) VALUES ('Berlin');
DROP TRIGGER tk_ci ON tk_types;
CREATE TRIGGER tk_nm BEFORE INSERT ON tk_types FOR EACH ROW EXECUTE FUNCTION seq_fill('tk_a', 'nm', 'n');
INSERT INTO tk_types (nm) VALUES ('Berlin');
DROP TABLE tk_cities, tk_other, tk_types;
DROP DOMAIN tk_city;
DROP EXTENSION citext;
DROP COLLATION tk_ci;

-- Chosen text keys. Each space made by seq_space_create() hashes its text keys with SipHash-2-4
-- under a secret of its own: the same text is another key in another space, and a tenant who
-- chooses its texts cannot aim at another key's counter without the secret. seq_key(space, key)
-- is the key seq_next_text() numbers.
SELECT space, text_key_hash FROM seq_space WHERE space LIKE 'tk\_%' ORDER BY space;
SELECT seq_key('tk_a', 'alice') <> seq_key('tk_b', 'alice') AS keyed_per_space,
       seq_key('tk_a', 'alice') = seq_key('tk_a', 'alice') AS stable,
       seq_key('tk_a', 'alice') <> seq_key('tk_a', 'bob') AS another_text;
SELECT seq_next_text('tk_a', 'alice') AS first, seq_next('tk_a', seq_key('tk_a', 'alice')) AS second,
       seq_current_text('tk_a', 'alice') AS current, seq_next_text('tk_b', 'alice') AS other_space;
-- The secret: 16 bytes from the operating system's random source, one for each space, in a table
-- of its own.
SELECT count(*) AS secrets, bool_and(octet_length(secret) = 16) AS sixteen_bytes, count(DISTINCT secret) AS distinct_secrets
  FROM seq_space_secret WHERE space LIKE 'tk\_%';
SELECT relrowsecurity AS row_level_security, relacl IS NULL AS no_grants FROM pg_class WHERE oid = 'seq_space_secret'::regclass;

-- A role that may number text keys and read pg_idgen's other tables cannot read the secret:
-- nothing is granted on its table; granted SELECT on it all the same (GRANT … ON ALL TABLES IN
-- SCHEMA), it sees no row (row-level security, no policy).
CREATE ROLE tk_reader;
GRANT EXECUTE ON FUNCTION seq_next_text(text, text), seq_key(text, text) TO tk_reader;
GRANT SELECT ON seq_space, seq_section, segment_tag TO tk_reader;
SET ROLE tk_reader;
SELECT seq_next_text('tk_a', 'alice') AS third, seq_key('tk_a', 'alice') = seq_key('tk_a', 'alice') AS has_the_key;
SELECT space, text_key_hash FROM seq_space WHERE space = 'tk_a';
SELECT * FROM seq_space_secret;
RESET ROLE;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO tk_reader;
SET ROLE tk_reader;
SELECT count(*) AS secrets_seen FROM seq_space_secret;
RESET ROLE;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM tk_reader;
REVOKE ALL ON FUNCTION seq_next_text(text, text), seq_key(text, text) FROM tk_reader;
DROP ROLE tk_reader;

-- What would give a space's text keys other counters is refused (22023): another secret, its row
-- deleted (but by seq_space_drop()), the table truncated, the space's hash changed.
UPDATE seq_space_secret SET secret = '\x00000000000000000000000000000000' WHERE space = 'tk_a';
UPDATE seq_space_secret SET space = 'tk_c' WHERE space = 'tk_a';
DELETE FROM seq_space_secret WHERE space = 'tk_a';
TRUNCATE seq_space_secret;
UPDATE seq_space SET text_key_hash = 'fnv-1a' WHERE space = 'tk_a';
SELECT seq_next_text('tk_a', 'alice') AS fourth;

-- A row of seq_space that does not say how its text keys are hashed is one of a space made before
-- 0.9.0 (a row inserted by hand, a dump of 0.8.0 restored): unkeyed, FNV-1a 64 and SplitMix64's
-- finaliser, the key 0.8.0 gave its texts (seq_key('alice') then: -4192475849746331044).
INSERT INTO seq_space (space, step, section_keys) VALUES ('tk_old', 100, 256);
SELECT text_key_hash, seq_key('tk_old', 'alice') AS key_of_alice FROM seq_space WHERE space = 'tk_old';
SELECT seq_next_text('tk_old', 'alice') AS first, seq_next('tk_old', -4192475849746331044) AS second;
-- A space that says it is keyed but whose secret is missing (its row restored without the
-- secret's) refuses its text keys (55000): a new secret would number them from 1 again. Its
-- bigint keys go on.
INSERT INTO seq_space (space, step, section_keys, text_key_hash) VALUES ('tk_lost', 100, 256, 'siphash-2-4');
SELECT seq_next_text('tk_lost', 'alice');
SELECT seq_key('tk_lost', 'alice');
SELECT sqlstate_of($$SELECT seq_next_text('tk_lost', 'alice')$$);
SELECT seq_next('tk_lost', 1) AS bigint_key;
-- seq_key() needs its space (42704); the key of a text alone, without a space, is no more.
SELECT seq_key('tk_none', 'alice');
SELECT seq_key('alice');

-- Dropped, a space's secret goes with it; created again, it has a new one.
SELECT seq_key('tk_a', 'alice') AS old_key \gset
SELECT seq_space_drop('tk_a'), seq_space_drop('tk_b'), seq_space_drop('tk_old'), seq_space_drop('tk_lost');
SELECT count(*) AS secrets_left FROM seq_space_secret WHERE space LIKE 'tk\_%';
SELECT seq_space_create('tk_a');
SELECT seq_key('tk_a', 'alice') <> :old_key AS new_secret, seq_next_text('tk_a', 'alice') AS first_again;
SELECT seq_space_drop('tk_a');
