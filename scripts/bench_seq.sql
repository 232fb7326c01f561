-- The objects of the per-key sequence part of the benchmark (scripts/bench_seq.sh), in its
-- throwaway cluster. psql variables: keys (the most keys a run numbers: counters 0 .. keys - 1),
-- sequences (how many sequences k_0, k_1, … to create). Prints the bytes each sequence added to
-- the database.
\set QUIET on
CREATE EXTENSION IF NOT EXISTS pg_idgen;
\ir bench_seconds.sql
DO $$ BEGIN PERFORM seq_space_create('bench'); END $$;

-- seq_pass(expr, n): seconds of n calls of expr (bench_seconds), and what the section cache did
-- meanwhile (seq_status() is counted server-wide: the benchmark is alone on its cluster).
CREATE FUNCTION seq_pass(expr text, n int, OUT seconds float8, OUT loads bigint, OUT raises bigint,
                         OUT waits bigint, OUT evictions bigint)
LANGUAGE plpgsql AS $$
DECLARE
    before record;
BEGIN
    SELECT * INTO before FROM seq_status();
    seconds := bench_seconds(expr, n);
    SELECT s.loads - before.loads, s.raises - before.raises, s.waits - before.waits,
           s.evictions - before.evictions
      INTO loads, raises, waits, evictions
      FROM seq_status() AS s;
END $$;

-- One table a way of numbering, all alike; no index, so that a row's WAL is its insert's and its
-- number's. rows_fill's number comes from the seq_fill() trigger.
CREATE TABLE rows_seq (k bigint NOT NULL, n bigint NOT NULL, payload bigint NOT NULL);
CREATE TABLE rows_fill (LIKE rows_seq);
CREATE TABLE rows_counter (LIKE rows_seq);
CREATE TABLE rows_sequences (LIKE rows_seq);
CREATE TABLE rows_plain (LIKE rows_seq);
CREATE TRIGGER number_row BEFORE INSERT ON rows_fill
    FOR EACH ROW EXECUTE FUNCTION seq_fill('bench', 'k', 'n');

-- What users do without per-key sequences: a counter row per key, updated in the inserting
-- transaction.
CREATE TABLE counters (k bigint PRIMARY KEY, n bigint NOT NULL);
INSERT INTO counters SELECT k, 0 FROM generate_series(0, :keys - 1) AS k;
VACUUM (ANALYZE) counters;

-- Or a sequence per key.
SELECT pg_database_size(current_database()) AS size_before_sequences \gset
SELECT format('CREATE SEQUENCE k_%s', i) FROM generate_series(0, :sequences - 1) AS i \gexec
CHECKPOINT;
SELECT (pg_database_size(current_database()) - :size_before_sequences) / :sequences AS bytes_per_sequence;
