-- pg_idgen 0.9.0 -> 0.10.0. A copy of what the modules declare: the upgrade test compares an
-- updated database with a fresh install. Each change has a section of its own below.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.10.0'" to load this file. \quit

-- Per-key sequences on many servers (src/seq/store.rs): the leases of sections at the segment
-- authority, and the two functions other servers' workers call there.
-- At the segment authority (pg_idgen.segment_authority), which servers lease sections from
-- (src/seq/store.rs): which server serves each section now. A lease's generation is its fencing
-- token: a raise is accepted only from the holder with the current generation. Not in pg_dump:
-- a restored authority waits out every lease before it gives a section to another server, and
-- learns the live holders' leases from their renewals.
CREATE TABLE seq_section_lease (
    space        text NOT NULL,
    section      bigint NOT NULL,
    holder       text NOT NULL,
    holder_start text NOT NULL,
    generation   bigint NOT NULL CHECK (generation > 0),
    expires_at   timestamptz NOT NULL,
    reusable_at  timestamptz NOT NULL,
    -- The server that last asked for the section, and when: its holder hands it over at its next
    -- renewal, and for a lease after that it is this server's to take.
    wanted_by    text,
    wanted_at    timestamptz,
    PRIMARY KEY (space, section)
);
COMMENT ON TABLE seq_section_lease IS
    'At the segment authority: the server that serves each section of per-key sequences, until when, and its lease''s generation (fencing token).';

CREATE  FUNCTION "pg_idgen_seq_sections"(
	"holder" TEXT, /* & str */
	"holder_start" TEXT, /* & str */
	"ttl_ms" INT, /* i32 */
	"margin_ms" INT, /* i32 */
	"space" text, /* TextBytes */
	"space_id" INT, /* i32 */
	"section_keys" INT, /* i32 */
	"sections" bigint[], /* Vec < i64 > */
	"generations" bigint[], /* Vec < i64 > */
	"raises" bigint[], /* Vec < i64 > */
	"limits" bigint[] /* Vec < i64 > */
) RETURNS TABLE (
	"section" bigint,  /* i64 */
	"outcome" TEXT,  /* String */
	"generation" bigint,  /* i64 */
	"old_max" bigint,  /* Option < i64 > */
	"new_max" bigint,  /* Option < i64 > */
	"held_by" TEXT  /* Option < String > */
)
STRICT VOLATILE SECURITY DEFINER
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'pg_idgen_seq_sections_wrapper';

CREATE  FUNCTION "pg_idgen_seq_spaces"() RETURNS TABLE (
	"space" text,  /* TextOut */
	"id" INT,  /* i32 */
	"step" INT,  /* i32 */
	"section_keys" INT,  /* i32 */
	"text_key_hash" text,  /* TextOut */
	"secret" bytea  /* :: std :: option :: Option < Vec < u8 > > */
)
STRICT VOLATILE SECURITY DEFINER
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'pg_idgen_seq_spaces_wrapper';

COMMENT ON FUNCTION pg_idgen_seq_spaces() IS
    'Segment authority: the spaces of per-key sequences and their secrets, for other servers'' pg_idgen workers (called over libpq).';
COMMENT ON FUNCTION pg_idgen_seq_sections(text, text, int, int, text, int, int, bigint[], bigint[], bigint[], bigint[]) IS
    'Segment authority: takes, raises, renews and releases sections of per-key sequences for another server''s pg_idgen worker (called over libpq).';
-- Only the role the other servers' workers connect as (GRANT EXECUTE to it).
REVOKE EXECUTE ON FUNCTION pg_idgen_seq_spaces() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_idgen_seq_sections(text, text, int, int, text, int, int, bigint[], bigint[], bigint[], bigint[]) FROM PUBLIC;

-- seq_lease_status() (src/seq/leased.rs): the sections a server holds under leases of the authority.
CREATE  FUNCTION "seq_lease_status"() RETURNS TABLE (
	"leased" bool,  /* bool */
	"held_sections" INT,  /* i32 */
	"taken" bigint,  /* i64 */
	"released" bigint,  /* i64 */
	"handed_over" bigint,  /* i64 */
	"lost" bigint,  /* i64 */
	"refused" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'seq_lease_status_wrapper';

COMMENT ON FUNCTION seq_lease_status() IS
    'Per-key sequences with a segment authority: sections this database holds under a lease, and the server''s sections taken, released, handed over, lost and refused since start.';
REVOKE EXECUTE ON FUNCTION seq_lease_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seq_lease_status() TO pg_monitor;

-- A copy of the segment authority's space on a server whose sections are leased from it
-- (src/seq/mirror.rs): its maxima live at the authority, never in this database.
ALTER TABLE seq_space ADD COLUMN copied boolean NOT NULL DEFAULT false;
