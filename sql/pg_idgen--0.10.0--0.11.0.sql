-- pg_idgen 0.10.0 -> 0.11.0. A copy of what the modules declare: the upgrade test compares an
-- updated database with a fresh install. Each change has a section of its own below.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.11.0'" to load this file. \quit

-- At the segment authority (src/seq/store_state.rs): where the rows of seq_section and
-- seq_section_lease were written. A server start, a new WAL timeline (a standby promoted) or
-- another database (a copy) counts as a reset: the authority then gives no section to a server
-- that does not hold it for the longest lease and margin it gave, so that live holders repair the
-- maxima first. So does CREATE EXTENSION. Not in pg_dump: a restored copy must not describe
-- where it was restored (a restore with servers running is not covered: docs/many-servers.md).
CREATE TABLE seq_store_state (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    timeline       text NOT NULL,        -- the WAL timeline the rows were written on
    database_oid   oid NOT NULL,         -- the database they were written in
    server_started timestamptz NOT NULL, -- pg_postmaster_start_time() of the server that wrote them
    reset_at       timestamptz NOT NULL, -- when the latest reset began: the wait runs from here
    longest_ms     bigint NOT NULL,      -- the longest lease and margin given since (ms)
    why            text NOT NULL         -- what the latest reset was
);
INSERT INTO seq_store_state (timeline, database_oid, server_started, reset_at, longest_ms, why)
    SELECT pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8), d.oid,
           pg_catalog.pg_postmaster_start_time(), pg_catalog.clock_timestamp(), 0, 'pg_idgen was installed (it may be a restore of a dump)'
      FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
COMMENT ON TABLE seq_store_state IS
    'At the segment authority: where its sections'' rows were written (timeline, database, server start), and its latest reset, after which it gives no section out for a lease and margin.';

-- seq_status() (src/seq/status.rs) shows the sections leased from a segment authority too: this
-- database's held sections and the server's sections taken, released, handed over, lost and
-- refused. A function's columns cannot change in place: dropped and created again, with its
-- comment and privileges as a fresh install has them.
DROP FUNCTION seq_status();
CREATE  FUNCTION "seq_status"() RETURNS TABLE (
	"cache_sections" INT,  /* i32 */
	"cached_sections" INT,  /* i32 */
	"loading_sections" INT,  /* i32 */
	"numbers_served" bigint,  /* i64 */
	"loads" bigint,  /* i64 */
	"raises" bigint,  /* i64 */
	"evictions" bigint,  /* i64 */
	"waits" bigint,  /* i64 */
	"persisted_sections" bigint,  /* i64 */
	"held_sections" INT,  /* i32 */
	"sections_taken" bigint,  /* i64 */
	"sections_released" bigint,  /* i64 */
	"sections_handed_over" bigint,  /* i64 */
	"sections_lost" bigint,  /* i64 */
	"sections_refused" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_status_wrapper';
COMMENT ON FUNCTION seq_status() IS
    'Per-key sequences: sections the cache holds and this database has cached or loading, numbers served, loads, raises, evictions and waits since start, persisted sections; with a segment authority, sections held under a lease, and sections taken, released, handed over, lost and refused since start.';
REVOKE EXECUTE ON FUNCTION seq_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seq_status() TO pg_monitor;
