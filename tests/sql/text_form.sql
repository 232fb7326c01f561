-- Compact text: Crockford base32 at a fixed width per type (uuid 26, objectid 20, snowflake 13
-- digits), both ways; the text sorts like the id (byte order, COLLATE "C").
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- Known values: a UUID is written as its ULID; the extremes of each width.
SELECT id_to_base32('01912c4b-6d7e-7f00-8000-000000000001'::uuid) AS uuid_as_ulid,
       id_to_base32('00000000-0000-0000-0000-000000000000'::uuid) AS uuid_zero,
       id_to_base32('ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid) AS uuid_max;
SELECT id_to_base32('65678901aabbccddee001122'::objectid) AS objectid,
       id_to_base32('ffffffffffffffffffffffff'::objectid) AS objectid_max;
SELECT id_to_base32(0::bigint) AS zero, id_to_base32(4096::bigint) AS small,
       id_to_base32(9223372036854775807) AS bigint_max;
SELECT uuid_from_base32('01J4P4PVBYFW08000000000001') AS uuid,
       objectid_from_base32('0SB7H40TNEYCVQQ00492') AS objectid,
       snowflake_from_base32('7ZZZZZZZZZZZZ') AS snowflake;
-- Lower case reads the same; I and L read as 1, O as 0 (Crockford).
SELECT snowflake_from_base32('00000000000lo') = 32 AND snowflake_from_base32('00000000000iO') = 32 AS aliases,
       uuid_from_base32('01j4p4pvbyfw08000000000001') = '01912c4b-6d7e-7f00-8000-000000000001' AS lower_case;

-- Round trips, and text order is id order, over generated ids of every family.
SELECT bool_and(uuid_from_base32(id_to_base32(u)) = u) AS uuids,
       bool_and(objectid_from_base32(id_to_base32(o)) = o) AS objectids,
       bool_and(snowflake_from_base32(id_to_base32(s)) = s) AS snowflakes
  FROM (SELECT uuid_v7_next() AS u, objectid_next() AS o, snowflake_next() AS s FROM generate_series(1, 1000)) AS g;
SELECT bool_and(text_now > text_before) AS text_sorts_like_the_id
  FROM (SELECT id_to_base32(s) COLLATE "C" AS text_now, lag(id_to_base32(s)) OVER (ORDER BY s) COLLATE "C" AS text_before
          FROM (SELECT snowflake_next() AS s FROM generate_series(1, 1000)) AS g) AS t
 WHERE text_before IS NOT NULL;

-- Malformed text is 22P02, saying what is wrong; a negative bigint is no snowflake id (22003).
SELECT uuid_from_base32('01J4P4PVBYFW0800000000000');
SELECT uuid_from_base32('81J4P4PVBYFW08000000000001');
SELECT objectid_from_base32('0SB7H40TNEYCVQQ0049U');
SELECT objectid_from_base32('2SB7H40TNEYCVQQ00492');
SELECT snowflake_from_base32('8000000000000');
SELECT snowflake_from_base32('0000-00000000');
SELECT snowflake_from_base32('');
SELECT snowflake_from_base32('00000000000é0');
SELECT id_to_base32(-1::bigint);
SELECT sqlstate_of($$SELECT snowflake_from_base32('x')$$) AS malformed,
       sqlstate_of($$SELECT id_to_base32(-1::bigint)$$) AS negative;
SELECT id_to_base32(NULL::uuid) IS NULL AND uuid_from_base32(NULL) IS NULL AS null_in_null_out;
SELECT p.oid::regprocedure, provolatile, proparallel, proisstrict
  FROM pg_proc AS p
 WHERE proname IN ('id_to_base32', 'uuid_from_base32', 'objectid_from_base32', 'snowflake_from_base32')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
