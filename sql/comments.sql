COMMENT ON FUNCTION snowflake_next() IS
    'Next snowflake id (time | node | sequence) of this server: unique, greater than every id it handed out before.';
COMMENT ON FUNCTION id_decode(bigint) IS
    'Takes a snowflake id apart: ts (start of its time tick), node_id, sequence.';
COMMENT ON FUNCTION snowflake_advance_past(bigint) IS
    'Makes every snowflake id this server hands out from now on greater than the given id, durably (like setval after a restore).';
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
    'The time a snowflake id was made, to the precision of the layout''s time unit.';
COMMENT ON FUNCTION snowflake_min_id(timestamptz) IS
    'Smallest snowflake id made at or after a time, for WHERE id >= snowflake_min_id(...) range scans.';
COMMENT ON FUNCTION pg_idgen_status() IS
    'Node id, layout, epoch, end of the time bits, last id, clock step policy, lead of the ids over the wall clock, wall-clock steps seen, persisted high-water mark.';
COMMENT ON TYPE objectid IS
    'MongoDB ObjectId: 4 bytes of Unix seconds, 5 random bytes, a 3-byte counter; 12 bytes, ordered by time.';
COMMENT ON FUNCTION objectid_gen() IS
    'Next ObjectId (current BSON spec) of this server: unique, greater than every ObjectId it made before.';
COMMENT ON FUNCTION objectid_advance_past(objectid) IS
    'Makes every ObjectId this server makes from now on greater than the given one, durably (after a restore from another server).';
COMMENT ON FUNCTION objectid_timestamp(objectid) IS
    'The second an ObjectId was made.';
COMMENT ON FUNCTION objectid_min(timestamptz) IS
    'Smallest ObjectId of the second of a time, for WHERE id >= objectid_min(...) range scans.';
COMMENT ON FUNCTION id_decode(objectid) IS
    'Takes an ObjectId apart: ts (its second), random (5 bytes), counter.';
COMMENT ON FUNCTION uuid_v7_next() IS
    'Next RFC 9562 UUIDv7 of this server: greater than every UUID it made before, from any backend.';
COMMENT ON FUNCTION uuid_v7_advance_past(uuid) IS
    'Makes every UUIDv7 this server makes from now on greater than the given one, durably (after a restore from another server).';
COMMENT ON FUNCTION uuid_v7_min(timestamptz) IS
    'Smallest UUIDv7 of the millisecond of a time, for WHERE id >= uuid_v7_min(...) range scans.';
COMMENT ON FUNCTION id_decode(uuid) IS
    'Takes a UUID apart: ts (versions 1, 6, 7; NULL for others), version, sequence (v7 counter, v1/v6 clock sequence).';
COMMENT ON FUNCTION objectid_in(cstring) IS 'objectid text input: 24 hexadecimal digits, either case.';
COMMENT ON FUNCTION objectid_out(objectid) IS 'objectid text output: 24 lowercase hexadecimal digits.';
COMMENT ON FUNCTION objectid_recv(internal) IS 'objectid binary input: its 12 bytes.';
COMMENT ON FUNCTION objectid_send(objectid) IS 'objectid binary output: its 12 bytes.';
COMMENT ON FUNCTION objectid(bytea) IS 'Cast from bytea: exactly 12 bytes.';
COMMENT ON FUNCTION bytea(objectid) IS 'Cast to bytea: the 12 bytes.';
COMMENT ON FUNCTION objectid_cmp(objectid, objectid) IS 'Btree support: -1, 0 or 1 in byte (= time) order.';
COMMENT ON FUNCTION objectid_eq(objectid, objectid) IS 'Implements objectid = objectid.';
COMMENT ON FUNCTION objectid_ne(objectid, objectid) IS 'Implements objectid <> objectid.';
COMMENT ON FUNCTION objectid_lt(objectid, objectid) IS 'Implements objectid < objectid.';
COMMENT ON FUNCTION objectid_le(objectid, objectid) IS 'Implements objectid <= objectid.';
COMMENT ON FUNCTION objectid_gt(objectid, objectid) IS 'Implements objectid > objectid.';
COMMENT ON FUNCTION objectid_ge(objectid, objectid) IS 'Implements objectid >= objectid.';
COMMENT ON FUNCTION objectid_hash(objectid) IS 'Hash support: hash of the 12 bytes.';
COMMENT ON FUNCTION objectid_hash_extended(objectid, bigint) IS 'Hash support with a seed (hash partitioning).';
COMMENT ON TABLE segment_tag IS
    'Segment tags: max_id is the last number of the last range the pg_idgen worker allocated; step is the smallest range.';
COMMENT ON FUNCTION segment_next(text) IS
    'Next number of a segment tag: unique and increasing per tag, served from ranges cached in shared memory.';
COMMENT ON FUNCTION segment_create(text, bigint, int, text) IS
    'Creates a segment tag whose first number is start; step is the size of its smallest range.';
COMMENT ON FUNCTION segment_drop(text) IS
    'Drops a segment tag; its cached numbers are never served again.';
COMMENT ON FUNCTION segment_status() IS
    'One row per cached segment tag: current and next range, next value, step, ids/s over the last minute, waits.';
COMMENT ON FUNCTION pg_idgen_segment_tag_changed() IS
    'Trigger on segment_tag: retires the cached ranges of tags whose rows changed or went; refuses to move max_id back.';

-- Who may call what (README, "Privileges"). Generators and decoders stay with PUBLIC, like
-- gen_random_uuid(). Moving a generator's floor can push ids far ahead: superusers only, unless
-- granted. segment_status() shows every tag of the database, which segment_tag itself does not.
REVOKE EXECUTE ON FUNCTION snowflake_advance_past(bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION uuid_v7_advance_past(uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION objectid_advance_past(objectid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_idgen_segment_tag_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_status() TO pg_monitor;
