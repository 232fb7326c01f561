-- PostgreSQL 18 reads and makes UUIDv7s in core: uuid_extract_timestamp() (which reads only version 1
-- before 18) and uuidv7(). Core and id_decode() find the same time in each other's UUIDs (run on 18 and later).
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- uuid_v7_next()'s UUIDs, read by core.
CREATE TABLE public.core_uuid_items AS
SELECT g AS n, public.uuid_v7_next() AS id FROM pg_catalog.generate_series(1, 10000) AS g;
SELECT pg_catalog.count(*) AS ids,
       pg_catalog.count(*) FILTER (WHERE (public.id_decode(id)).ts = pg_catalog.uuid_extract_timestamp(id)) AS same_time,
       pg_catalog.count(*) FILTER (WHERE (public.id_decode(id)).version = pg_catalog.uuid_extract_version(id)) AS same_version
  FROM public.core_uuid_items;

-- The RFC's example (RFC 9562 appendix A.6), and the smallest UUIDv7 of a millisecond.
SELECT (public.id_decode(u)).ts AS id_decode, pg_catalog.uuid_extract_timestamp(u) AS core
  FROM (VALUES ('017f22e2-79b0-7cc3-98c4-dc0c0c07398f'::uuid)) AS v(u);
SELECT (public.id_decode(u)).ts AS id_decode, pg_catalog.uuid_extract_timestamp(u) AS core
  FROM (VALUES (public.uuid_v7_min('2026-11-25 23:59:59.999+00'))) AS v(u);
DROP TABLE public.core_uuid_items;

-- Core uuidv7()'s UUIDs, read by id_decode().
CREATE TABLE public.core_uuidv7_items AS
SELECT g AS n, pg_catalog.uuidv7() AS id FROM pg_catalog.generate_series(1, 10000) AS g;
SELECT pg_catalog.count(*) AS ids,
       pg_catalog.count(*) FILTER (WHERE (public.id_decode(id)).ts = pg_catalog.uuid_extract_timestamp(id)) AS same_time,
       pg_catalog.count(*) FILTER (WHERE (public.id_decode(id)).version = 7) AS version_7
  FROM public.core_uuidv7_items;
DROP TABLE public.core_uuidv7_items;

-- A UUID of each, made one after the other, decode to times within a second of each other.
SELECT (public.id_decode(ours)).ts - pg_catalog.uuid_extract_timestamp(core)
       BETWEEN interval '-1 second' AND interval '1 second' AS same_moment
  FROM (SELECT public.uuid_v7_next() AS ours, pg_catalog.uuidv7() AS core) AS made;
