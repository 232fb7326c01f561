-- One benchmark round set, run by scripts/bench.sh in a throwaway cluster.
-- psql variables: n (calls per measurement), rounds, exprs (a SQL array literal of expressions).
-- Each expression is timed `rounds` times, interleaved, inside one backend; the best time counts
-- (the machine is shared, so the best run is the one least disturbed by others).
\set QUIET on
CREATE EXTENSION IF NOT EXISTS pg_idgen;
CREATE SEQUENCE IF NOT EXISTS bench_seq;
\ir bench_seconds.sql
SELECT count(segment_create(tag, step => step)) AS tags_created
  FROM (VALUES ('bench_1k', 1000), ('bench_100k', 100000)) AS t(tag, step)
 WHERE NOT EXISTS (SELECT FROM segment_tag AS s WHERE s.tag = t.tag) \gset
CREATE TEMP TABLE timing (expr text, seconds float8);
SELECT set_config('bench.exprs', :'exprs', false) AS exprs \gset
DO $$
DECLARE
    e text;
BEGIN
    -- Warm-up, not timed: segment steps grow to their steady size here.
    FOREACH e IN ARRAY current_setting('bench.exprs')::text[] LOOP
        PERFORM bench_seconds(e, current_setting('bench.n')::int);
    END LOOP;
    CREATE TEMP TABLE waits_when_warm AS SELECT tag, waits FROM segment_status();
    FOR r IN 1 .. current_setting('bench.rounds')::int LOOP
        FOREACH e IN ARRAY current_setting('bench.exprs')::text[] LOOP
            INSERT INTO timing VALUES (e, bench_seconds(e, current_setting('bench.n')::int));
        END LOOP;
    END LOOP;
END $$;
\set QUIET off
WITH best AS (
    SELECT expr, min(seconds) AS seconds FROM timing GROUP BY expr
), base AS (
    SELECT seconds FROM best WHERE expr = 'g'
)
SELECT CASE best.expr WHEN 'g' THEN '(empty baseline)' ELSE best.expr END AS "function",
       round(best.seconds::numeric, 3) AS best_s,
       round(:n / best.seconds) AS calls_per_s,
       round(((best.seconds - base.seconds) * 1e9 / :n)::numeric, 1) AS ns_above_baseline
  FROM best, base
 ORDER BY best.seconds;

-- Calls of segment_next() that had to wait for a range during the timed rounds.
SELECT s.tag, s.step, s.waits - w.waits AS waits_when_warm
  FROM segment_status() AS s JOIN waits_when_warm AS w USING (tag)
 ORDER BY s.tag;
