-- Text keys of per-key sequences (docs/sequences.md#text-keys): told apart by their bytes.
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
SELECT seq_key('Berlin' COLLATE tk_ci);
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

SELECT seq_space_drop('tk_a'), seq_space_drop('tk_b');
