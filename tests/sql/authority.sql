-- A server whose segment tags live at a segment authority (pg_idgen.segment_authority): here the
-- server itself, its database postgres. This server refuses segment_create() (its tags are the
-- authority's), so the authority's tag is inserted as segment_create() would.
\c postgres
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_idgen;
RESET client_min_messages;
INSERT INTO segment_tag (tag, max_id, step) VALUES ('at_the_authority', 0, 100);
\c pg_idgen_regress

-- The numbers come from the authority's tag.
SELECT segment_next('at_the_authority'), segment_next('at_the_authority');

-- A tag the authority lacks (42704): the hint sends the user to the authority, since this
-- server refuses to create tags (55000).
SELECT segment_next('nowhere');
SELECT segment_create('nowhere');

\c postgres
DELETE FROM segment_tag WHERE tag = 'at_the_authority';
