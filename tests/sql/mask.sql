-- Public numbers (docs/public-numbers.md): ids masked by FF1 over AES with keys the server keeps,
-- and unmasked again. Keys made by the server are random, so only what no key can change is
-- printed for them; the NIST keys imported below give fixed numbers.
SET timezone = 'UTC';

-- Every mask function is STABLE (keys can change between statements, so not IMMUTABLE) and
-- PARALLEL RESTRICTED (only the leader of a parallel plan masks: a worker would read the keys
-- itself, newer than the leader's); EXECUTE is granted per role.
SELECT p.oid::regprocedure AS function, p.provolatile AS volatility, p.proparallel AS parallel,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_execute
  FROM pg_proc AS p WHERE p.proname LIKE 'id\_%mask%' ORDER BY 1::text COLLATE "C";

-- No key yet: the hint names the function that makes one.
SELECT id_mask(1);
SELECT id_unmask_decimal('1000000000000');

-- NIST SP 800-38G's FF1 samples through the SQL functions. The sample keys (AES-128, -192 and
-- -256) are imported as versions 1, 2 and 3 (with arbitrary check keys); the highest version is
-- the current one. The decimal form of 123456789 in 13 digits is the version's last digit, FF1
-- radix 10 of the 10 digits 0123456789, and 2 check digits; the purpose is FF1's tweak.
SELECT id_mask_key_import('pg_idgen mask keys 1
version 1 aes 2b7e151628aed2a6abf7158809cf4f3c check 1111111111111111111111111111111111111111111111111111111111111111') AS imported;
SELECT substr(id_mask_decimal(123456789, 13), 2, 10) AS sample_1,                  -- 2433477484
       substr(id_mask_decimal(123456789, 13, '9876543210'), 2, 10) AS sample_2;    -- 6124200773
SELECT id_mask_decimal(123456789, 13) AS v1_no_purpose, id_mask_decimal(123456789, 13, '9876543210') AS v1_purpose;
-- Numbers made under version 1, kept to check below that no later version takes them for its own.
CREATE TABLE mask_v1_numbers AS SELECT g, id_mask_decimal(g, 12) AS decimal FROM generate_series(1, 3000) AS g;
SELECT id_mask_key_import('pg_idgen mask keys 1
version 2 aes 2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f check 1111111111111111111111111111111111111111111111111111111111111111') AS imported;
SELECT substr(id_mask_decimal(123456789, 13), 2, 10) AS sample_4,                  -- 2830668132
       substr(id_mask_decimal(123456789, 13, '9876543210'), 2, 10) AS sample_5;    -- 2496655549
SELECT id_mask_key_import('pg_idgen mask keys 1
version 3 aes 2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94 check 1111111111111111111111111111111111111111111111111111111111111111') AS imported;
SELECT substr(id_mask_decimal(123456789, 13), 2, 10) AS sample_7,                  -- 6657667009
       substr(id_mask_decimal(123456789, 13, '9876543210'), 2, 10) AS sample_8;    -- 1001623463
-- Each version's numbers unmask, old ones too: the first digit names the version.
SELECT n, id_unmask_decimal(n, p) AS id
  FROM (VALUES ('1243347748478', ''), ('1612420077307', '9876543210')) AS v(n, p);
SELECT id_unmask_decimal(id_mask_decimal(123456789, 13, '9876543210'), '9876543210') AS current_version;

-- Importing what is already here adds nothing; other keys under a version here are refused.
SELECT id_mask_key_import(id_mask_key_export()) AS imported_again;
SELECT id_mask_key_import('pg_idgen mask keys 1
version 1 aes 2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94 check 1111111111111111111111111111111111111111111111111111111111111111');
SELECT id_mask_key_import('pg_idgen mask keys 1
version 9 aes 00 check 00');

-- What was not made with a key version and purpose of this database is refused, with a SQLSTATE.
SELECT id_mask_decimal(42, 12, 'orders') AS for_orders;
SELECT id_unmask_decimal(id_mask_decimal(42, 12, 'orders'), 'invoices');
SELECT id_unmask_decimal(overlay(id_mask_decimal(42, 12, 'orders') PLACING '0' FROM 5 FOR 1), 'orders');
SELECT id_mask_base32(42, 'orders') AS for_orders;
SELECT id_unmask_base32(id_mask_base32(42, 'orders'), 'invoices');
SELECT id_unmask_decimal('512345678901');   -- no version 5, 14, 23, …
SELECT id_unmask_decimal('012345678901');   -- no version has the digit 0
SELECT id_unmask_decimal('12345678x01');
-- 22 digits: 19 FF1 digits hold 10^19 values, more than the 2^63 ids. A number whose check
-- digits match (each 19 digits have one such pair) but that unmasks above the largest id is refused.
SELECT id_unmask_decimal('3999999999999999991889');
SELECT id_unmask_decimal('3999999999999999991754') AS checks_and_fits;
SELECT id_unmask_base32('4ZZZZZZZZZZZZZZZ');   -- second digit above 7
SELECT id_unmask_base32('40000000000000');
SELECT id_unmask_base32('5000000000000000');   -- no version 5, 14, 23, …
SELECT id_unmask_base32('A000000000000000');   -- nor a letter
SELECT id_unmask(-1);
SELECT id_unmask(1, version => 0);
SELECT id_unmask(1, version => 7);
SELECT id_mask(1, repeat('p', 65));
SELECT id_unmask(NULL) IS NULL AS null_in_null_out, id_mask_base32(NULL) IS NULL AS strict;

-- A public number finds its row through the primary key: the function is evaluated once, and its
-- value is the index scan's key. (The planner evaluates it for its estimates too: the numbers
-- here are version 3's.)
CREATE TABLE mask_orders (id bigint PRIMARY KEY, customer text);
INSERT INTO mask_orders SELECT g, 'customer ' || g FROM generate_series(1, 10000) AS g;
ANALYZE mask_orders;
EXPLAIN (COSTS OFF) SELECT * FROM mask_orders WHERE id = id_unmask_decimal('308861881718', 'orders');
PREPARE find_order(text) AS SELECT customer FROM mask_orders WHERE id = id_unmask_base32($1, 'orders');
EXPLAIN (COSTS OFF) EXECUTE find_order('37FNJS7H8H7CZ320');
SELECT customer FROM mask_orders WHERE id = id_unmask_decimal(id_mask_decimal(4242, 12, 'orders'), 'orders');
EXECUTE find_order(id_mask_base32(4343, 'orders'));
DEALLOCATE find_order;
DROP TABLE mask_orders;

-- A new key from the server's CSPRNG becomes current; the NIST versions still unmask.
SELECT id_mask_key_create() AS created;
SELECT id_unmask_decimal('1243347748478') AS version_1_still_unmasks;
SELECT substr(id_mask_decimal(123456789, 13), 1, 1) AS current_version_digit,
       substr(id_mask_decimal(123456789, 13), 2, 10) <> '6657667009' AS another_key;

-- The bigint form: a bijection of 0 .. 2^63-1 (both ends, and 100,000 ids), never negative.
SELECT id_unmask(id_mask(0)) AS zero, id_unmask(id_mask(9223372036854775807)) AS largest,
       id_mask(0) >= 0 AND id_mask(9223372036854775807) >= 0 AS not_negative;
SELECT count(*) AS ids, count(DISTINCT m) AS distinct_masks, count(*) FILTER (WHERE id_unmask(m) <> g) AS wrong,
       count(*) FILTER (WHERE m < 0) AS negative
  FROM (SELECT g, id_mask(g) AS m FROM generate_series(0, 99999) AS g) AS s;
-- A purpose maps an id elsewhere; another purpose or version does not unmask it.
SELECT id_mask(5, 'orders') <> id_mask(5, 'invoices') AS purposes_differ,
       id_unmask(id_mask(5, 'orders'), 'orders') AS same_purpose,
       id_unmask(id_mask(5, 'orders'), 'invoices') <> 5 AS other_purpose,
       id_unmask(id_mask(5, 'orders'), 'orders', version => 3) <> 5 AS other_version;
-- Rotation: an old version unmasks its bigint public numbers when named.
SELECT id_unmask(id_mask(5), version => 4) AS current_named;

-- The decimal form: exactly the digits asked for; ids that do not fit are refused.
SELECT d, length(id_mask_decimal(999999, d)) AS length, id_unmask_decimal(id_mask_decimal(999999, d)) AS back
  FROM unnest(ARRAY[9, 12, 22]) AS d;
SELECT count(*) AS ids, count(DISTINCT t) AS distinct_texts,
       count(*) FILTER (WHERE id_unmask_decimal(t, 'shop 7') <> g) AS wrong, min(length(t)), max(length(t))
  FROM (SELECT g, id_mask_decimal(g, 12, 'shop 7') AS t FROM generate_series(0, 19999) AS g) AS s;
SELECT id_mask_decimal(1000000000, 12);
SELECT id_unmask_decimal(id_mask_decimal(9223372036854775807, 22)) AS largest_in_22_digits;
SELECT id_mask_decimal(1, 8);
SELECT id_mask_decimal(-1, 12);

-- The base32 form: 16 digits, either case; the middle 13 are id_mask()'s number.
SELECT length(t) AS length, id_unmask_base32(t) AS back, id_unmask_base32(lower(t)) AS lower_case,
       substr(t, 2, 13) = id_to_base32(id_mask(77)) AS middle_is_bigint_form
  FROM (SELECT id_mask_base32(77) AS t) AS s;
SELECT count(*) FILTER (WHERE id_unmask_base32(id_mask_base32(g, 'x'), 'x') <> g) AS wrong
  FROM generate_series(9223372036854765807, 9223372036854775807) AS g;

-- Keys are for superusers: a role with EXECUTE on the mask functions masks and unmasks, but reads
-- no key, even with pg_read_all_data and pg_read_all_settings, and even with EXECUTE on export.
CREATE ROLE mask_app IN ROLE pg_read_all_data, pg_read_all_settings;
GRANT EXECUTE ON FUNCTION id_mask(bigint, text), id_unmask(bigint, text, integer), id_mask_base32(bigint, text),
    id_unmask_base32(text, text), id_mask_key_export() TO mask_app;
SET ROLE mask_app;
SELECT id_unmask(id_mask(42)) AS unmasked, id_unmask_base32(id_mask_base32(42)) AS unmasked_text;
SELECT count(*) AS key_rows_seen FROM idgen_internal.mask_key;
SELECT id_mask_key_export();
SELECT id_mask_key_create();
SELECT id_mask_decimal(42, 12);
SELECT count(*) AS statistics_rows FROM pg_stats WHERE tablename = 'mask_key';
RESET ROLE;
REVOKE ALL ON FUNCTION id_mask(bigint, text), id_unmask(bigint, text, integer), id_mask_base32(bigint, text),
    id_unmask_base32(text, text), id_mask_key_export() FROM mask_app;
DROP ROLE mask_app;
-- The key columns are never analysed (no statistics hold them); pg_dump carries the table (a superuser's dump holds the keys).
ANALYZE idgen_internal.mask_key;
SELECT attname AS analysed_column FROM pg_stats WHERE tablename = 'mask_key' ORDER BY attname;
SELECT c::regclass AS dumped FROM pg_extension AS e, unnest(e.extconfig) AS c
 WHERE e.extname = 'pg_idgen' AND c::regclass::text LIKE '%mask%';
SELECT relrowsecurity, relforcerowsecurity,
       NOT EXISTS (SELECT FROM aclexplode(relacl) AS a WHERE a.grantee <> relowner) AS granted_to_no_one,
       (SELECT count(*) FROM pg_policy WHERE polrelid = c.oid) AS policies
  FROM pg_class AS c WHERE oid = 'idgen_internal.mask_key'::regclass;

-- Key versions: a number is never given to another key. Retiring the newest version (4) and
-- creating gives 5, not 4 again; the number 4 then names no key, and other keys under it are
-- refused.
DELETE FROM idgen_internal.mask_key WHERE version = 4;
SELECT id_mask_key_create() AS created;
SELECT id_unmask(1, version => 4);
SELECT id_mask_key_import('pg_idgen mask keys 1
version 4 aes 0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a check 3333333333333333333333333333333333333333333333333333333333333333');

-- The text forms name a version by one digit, 1 + (version - 1) mod 9 (never 0: a decimal number
-- keeps its width as a number), and no two versions present share one: a text is only ever
-- checked and unmasked under the version that made it. An import of a version whose digit a
-- present version has is refused: 11 would read as version 2 (and, were the digit the version's
-- last, as version 1, whose numbers its check digits would then take for its own 1 time in 100).
SELECT id_mask_key_import('pg_idgen mask keys 1
version 11 aes 000102030405060708090a0b0c0d0e0f check 2222222222222222222222222222222222222222222222222222222222222222');
SELECT count(*) AS numbers, count(*) FILTER (WHERE id_unmask_decimal(decimal) <> g) AS wrong_ids FROM mask_v1_numbers;
DROP TABLE mask_v1_numbers;

-- Within one statement every call uses the same keys: a version created halfway through (here by
-- the statement itself, as version 6) is used from the next statement on.
SELECT count(DISTINCT left(m, 1)) AS digits_used, count(*) AS numbers
  FROM (SELECT id_mask_base32(g) AS m, CASE WHEN g = 500 THEN id_mask_key_create() END AS created
          FROM generate_series(1, 1000) AS g) AS s;
SELECT left(id_mask_base32(1), 1) AS next_statement_digit;

-- id_mask_key_create() takes the next version whose digit no present version has: with 1 to 3 and
-- 5 to 9 present, 13 (digit 4). With nine present it refuses, and the hint names the oldest.
SELECT id_mask_key_import('pg_idgen mask keys 1' || string_agg(format(E'\nversion %s aes %s check %s', v, repeat(to_hex(v), 32), repeat('33', 32)), ''))
       AS imported FROM generate_series(7, 9) AS v;
SELECT id_mask_key_create() AS created;
SELECT id_mask_key_create();
DELETE FROM idgen_internal.mask_key WHERE version = 1;
SELECT id_mask_key_create() AS created;
SELECT left(id_mask_decimal(7, 12), 1) AS decimal_digit, left(id_mask_base32(7), 1) AS base32_digit,
       id_unmask_decimal(id_mask_decimal(7, 12)) AS decimal_back, id_unmask_base32(id_mask_base32(7)) AS base32_back;
-- Every version held here, kept when it is retired (pg_dump carries them too).
SELECT version, octet_length(fingerprint) AS fingerprint_bytes, version IN (SELECT version FROM idgen_internal.mask_key) AS present
  FROM idgen_internal.mask_key_history ORDER BY version;
-- An import does not bring a retired version back, even with its own keys.
SELECT id_mask_key_import('pg_idgen mask keys 1
version 1 aes 2b7e151628aed2a6abf7158809cf4f3c check 1111111111111111111111111111111111111111111111111111111111111111') AS imported;

-- pg_restore --disable-triggers ends with ALTER TABLE ... ENABLE TRIGGER ALL, which leaves the key
-- table's triggers firing for ordinary sessions only, not under session_replication_role =
-- replica (as pg_idgen's own statements and logical replication run): a key made then is seen
-- all the same, from the next statement. (Version 20: digit 2, not 0.)
DELETE FROM idgen_internal.mask_key WHERE version = 2;
ALTER TABLE idgen_internal.mask_key ENABLE TRIGGER ALL;
SELECT left(id_mask_base32(1), 1) AS digit_before;
SELECT id_mask_key_create() AS created;
SELECT left(id_mask_base32(1), 1) AS digit_after, left(id_mask_decimal(1, 12), 1) AS decimal_digit_after;
ALTER TABLE idgen_internal.mask_key ENABLE ALWAYS TRIGGER mask_key_changed;
ALTER TABLE idgen_internal.mask_key ENABLE ALWAYS TRIGGER mask_key_truncated;

-- Removing the keys (as a superuser may) is seen at once: no key again.
DELETE FROM idgen_internal.mask_key;
SELECT id_mask(1);
