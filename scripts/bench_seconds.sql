-- bench_seconds(expr, n): seconds taken by n calls of expr, streamed, in this backend.
-- Used by scripts/bench.sql and by the build comparison in scripts/bench.sh.
CREATE OR REPLACE FUNCTION bench_seconds(expr text, n int) RETURNS float8
LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz := clock_timestamp();
BEGIN
    -- generate_series in the select list streams its rows (ProjectSet); in FROM it would first
    -- materialise all n of them, and the generator's share of the time would be understated.
    EXECUTE format('SELECT count(%s) FROM (SELECT generate_series(1, %s) AS g) AS s', expr, n);
    RETURN extract(epoch FROM clock_timestamp() - started);
END $$;
