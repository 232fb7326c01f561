-- seq_fill()'s errors in a LATIN1 database: the table's and the columns' names reach the client
-- as they are (here in UTF-8, the client's encoding), not as mis-decoded bytes. The names are
-- stored in LATIN1, whose bytes for ä, ö, ü, ß and é are not UTF-8.
CREATE DATABASE pg_idgen_latin1 TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
\c pg_idgen_latin1
SET client_encoding = 'UTF8';
CREATE EXTENSION pg_idgen;
SELECT seq_space_create('städte');
CREATE TABLE bestellungen_städte (
    städte_nr bigint,
    größe numeric,
    straße text,
    nummer_é bigint,
    nummer_klein integer,
    kennzeichen_ü bigint GENERATED ALWAYS AS (städte_nr * 2) STORED
);
-- A column that does not exist (42703).
CREATE TRIGGER fehlt BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'schlüssel', 'nummer_é');
INSERT INTO bestellungen_städte (städte_nr) VALUES (1);
DROP TRIGGER fehlt ON bestellungen_städte;
-- A generated column (39P01).
CREATE TRIGGER erzeugt BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'städte_nr', 'kennzeichen_ü');
INSERT INTO bestellungen_städte (städte_nr) VALUES (1);
DROP TRIGGER erzeugt ON bestellungen_städte;
-- A NULL key (23502).
CREATE TRIGGER nummern BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'straße', 'nummer_é');
INSERT INTO bestellungen_städte (straße) VALUES (NULL);
DROP TRIGGER nummern ON bestellungen_städte;
-- A key column of a type that is not a key (42804).
CREATE TRIGGER größe BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'größe', 'nummer_é');
INSERT INTO bestellungen_städte (größe) VALUES (1.5);
DROP TRIGGER größe ON bestellungen_städte;
-- A number column of a type that is not a number (42804).
CREATE TRIGGER text_nummer BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'städte_nr', 'straße');
INSERT INTO bestellungen_städte (städte_nr) VALUES (1);
DROP TRIGGER text_nummer ON bestellungen_städte;
-- A key column of a nondeterministic collation (0A000): the collation's name is stored in LATIN1
-- too. A copy of "C" that the catalog marks nondeterministic, which is what pg_idgen reads of a
-- collation (seq_text_keys makes an ICU one where the build has ICU).
CREATE COLLATION "größe_ci" FROM "C";
UPDATE pg_catalog.pg_collation SET collisdeterministic = false WHERE collname = 'größe_ci';
ALTER TABLE bestellungen_städte ADD COLUMN ort_ä text COLLATE "größe_ci";
CREATE TRIGGER ort BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'ort_ä', 'nummer_é');
INSERT INTO bestellungen_städte (ort_ä) VALUES ('Köln');
DROP TRIGGER ort ON bestellungen_städte;
-- Used right, the trigger numbers the rows per key.
CREATE TRIGGER richtig BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'straße', 'nummer_é');
INSERT INTO bestellungen_städte (straße) VALUES ('Hauptstraße'), ('Hauptstraße'), ('Lindenallee')
RETURNING straße, nummer_é;
DROP TRIGGER richtig ON bestellungen_städte;
-- A number past an integer column's range (22003).
CREATE TRIGGER klein BEFORE INSERT ON bestellungen_städte
    FOR EACH ROW EXECUTE FUNCTION seq_fill('städte', 'städte_nr', 'nummer_klein');
INSERT INTO bestellungen_städte (städte_nr) VALUES (7) RETURNING nummer_klein;
UPDATE seq_section SET max_seq = 2147483647 WHERE space = 'städte';
INSERT INTO bestellungen_städte (städte_nr) VALUES (7);
\c postgres
DROP DATABASE pg_idgen_latin1;
