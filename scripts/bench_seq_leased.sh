# Section 6 of scripts/bench.sh, which sources it (its helpers: cluster_start, cluster_psql, say,
# ratio; N, ROUNDS): per-key sequences on many servers, leased from a segment authority, in one run:
#   a. ns per call of seq_next() on a hot key whose section the server holds, against seq_next() on
#      a server without an authority, nextval() and gen_random_uuid(), best of ROUNDS;
#   b. the first call of a section: taken from the authority (cold), and asked for from another
#      server that holds it (handover), p50 and p99 in ms;
#   c. numbers/s of two servers, each calling its own keys (routed), and of one client whose calls
#      of one key alternate between the two servers (what ignoring routing costs: each call waits
#      until the other server handed the section over);
#   d. round trips to the authority per million numbers of the hot key (pg_stat_user_functions at
#      the authority: raises and renewals);
#   e. instructions per call of the hot key, leased and without an authority (callgrind, when
#      valgrind is there): the cost of the lease check, which times on a shared machine blur.
# The servers' leases last 3 s (pg_idgen.seq_lease_ttl), so that a section no call uses moves
# within seconds.

LEASED_CALLS=${LEASED_CALLS:-200}
AUTH_PORT=54341
lease_conf=("pg_idgen.seq_lease_ttl = '3s'" "pg_idgen.seq_lease_margin = '500ms'" "pg_idgen.segment_wait_timeout = '10s'")
# leased_start NAME PORT: (re)starts a server taking its per-key sequences from the authority;
# leased_server NAME PORT: makes one.
leased_start() {
    cluster_start "$1" "$2" "shared_preload_libraries = 'pg_idgen'" "${lease_conf[@]}" "pg_idgen.seq_sections = authority" \
        "pg_idgen.segment_authority = 'host=$WORK_ROOT/bench_auth/socket port=$AUTH_PORT dbname=postgres user=idgen'"
}
leased_server() {
    leased_start "$1" "$2"
    cluster_psql "$1" -q -c "CREATE EXTENSION pg_idgen" -f scripts/bench_seconds.sql
}
leased_sql() { cluster_psql "$1" -qAt -c "$2"; }
# best_ns CLUSTER EXPR: ns per call of EXPR, best of ROUNDS runs of N calls.
best_ns() {
    local best= s
    for ((r = 0; r < ROUNDS; r++)); do
        s=$(leased_sql "$1" "SELECT bench_seconds(\$\$$2\$\$, $N)")
        best=$(awk -v a="$s" -v b="$best" 'BEGIN { print (b == "" || a < b) ? a : b }')
    done
    awk -v s="$best" -v n="$N" 'BEGIN { printf "%.1f", s * 1e9 / n }'
}
# first_call_ms CLUSTER SPACE FROM TO: p50 and p99 (ms) of the first seq_next() of keys FROM..TO.
first_call_ms() {
    leased_sql "$1" "CREATE TEMP TABLE lat (ms float8);
        DO \$\$ DECLARE t timestamptz; BEGIN
            FOR k IN $3 .. $4 LOOP
                t := clock_timestamp(); PERFORM seq_next('$2', k);
                INSERT INTO lat VALUES (extract(epoch FROM clock_timestamp() - t) * 1000);
            END LOOP; END \$\$;
        SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ms p50, '
            || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ms p99, '
            || round(max(ms)::numeric, 2) || ' ms at most' FROM lat"
}
# The calls of pg_idgen_seq_sections() the authority counted. Why the sleep: a session reports its
# counts when it has been idle a while (up to 10 s), and the workers' sessions stay connected.
authority_round_trips() {
    sleep 11
    leased_sql bench_auth "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'pg_idgen_seq_sections'"
}

if [ -n "${ONLY_LEASED:-}" ] || [ -z "${ONLY_COMPARE:-}${ONLY_SEQ:-}${ONLY_MASK:-}" ]; then
    for c in bench_auth bench_s1 bench_s2 bench_local; do cluster_remove "$c"; done
    trap 'for c in bench_auth bench_s1 bench_s2 bench_local bench; do cluster_remove "$c"; done' EXIT
    cluster_start bench_auth $AUTH_PORT "shared_preload_libraries = 'pg_idgen'" "${lease_conf[@]}" "track_functions = 'all'"
    cluster_psql bench_auth -q -c "CREATE EXTENSION pg_idgen" -c "CREATE ROLE idgen LOGIN" \
        -c "GRANT EXECUTE ON FUNCTION pg_idgen_seq_spaces(), pg_idgen_seq_sections(text, text, int, int, text, int, int, bigint[], bigint[], bigint[], bigint[]) TO idgen" \
        -c "SELECT seq_space_create('hot'), seq_space_create('cold', section_keys => 1), seq_space_create('moved', section_keys => 1), seq_space_create('routed')" >/dev/null
    leased_server bench_s1 54342
    leased_server bench_s2 54343
    cluster_start bench_local 54344 "shared_preload_libraries = 'pg_idgen'"
    cluster_psql bench_local -q -c "CREATE EXTENSION pg_idgen" -c "CREATE SEQUENCE s" -c "SELECT seq_space_create('hot')" -f scripts/bench_seconds.sql
    # The authority gives no section for its lease and margin after its start (it may be a copy).
    sleep 4

    say "a. one hot key, N=$N, best of $ROUNDS (ns per call, the empty loop included)"
    leased_sql bench_s1 "SELECT seq_next('hot', 1)" >/dev/null
    before=$(authority_round_trips)
    leased=$(best_ns bench_s1 "seq_next('hot', 1)")
    calls=$(((ROUNDS + 0) * N))
    after=$(authority_round_trips)
    local_ns=$(best_ns bench_local "seq_next('hot', 1)")
    nextval_ns=$(best_ns bench_local "nextval('s')")
    uuid_ns=$(best_ns bench_local "gen_random_uuid()")
    echo "seq_next, section leased from the authority: $leased ns"
    echo "seq_next, one server without an authority:   $local_ns ns ($(ratio "$leased" "$local_ns") of it for the leased one; goal: within 110%)"
    echo "nextval(): $nextval_ns ns; gen_random_uuid(): $uuid_ns ns"
    echo "d. round trips to the authority per million numbers of the hot key: $(awk -v a="$((after - before))" -v n="$calls" 'BEGIN { printf "%.1f", a * 1e6 / n }') ($((after - before)) for $calls numbers)"

    if command -v valgrind >/dev/null; then
        say "e. instructions per call of seq_next() on the hot key (callgrind)"
        echo "leased from the authority: $(instructions_per_call bench_s1 "seq_next('hot', 1)" "SELECT seq_next('hot', 1)")"
        echo "without an authority:      $(instructions_per_call bench_local "seq_next('hot', 1)" "SELECT seq_next('hot', 1)")"
        leased_start bench_s1 54342
    fi

    say "b. the first call of a section ($LEASED_CALLS sections)"
    echo "taken from the authority:        $(first_call_ms bench_s1 cold 1 "$LEASED_CALLS")"
    leased_sql bench_s1 "SELECT count(seq_next('moved', k)) FROM generate_series(1, $LEASED_CALLS) AS k" >/dev/null
    echo "held by another server:          $(first_call_ms bench_s2 moved 1 "$LEASED_CALLS")  (the first call asks; the first server hands them over at its next renewal, every second here)"

    say "c. numbers/s of two servers: each its own keys, and one key alternating between them"
    # Each server its own 1,000 keys (4 sections of 256 keys), far apart.
    routed() {
        leased_sql "$1" "SELECT count(seq_next('routed', $2 + g % 1000)) FROM generate_series(1, 2000000) AS g" >/dev/null
    }
    started=$(date +%s.%N)
    routed bench_s1 0 &
    routed bench_s2 1000000 &
    wait
    echo "routed: $(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", 4000000 / (e - s) }') numbers/s (2 servers, 1 client each)"
    # Each call on the other server asks for the section and waits until the first hands it over
    # (at its next renewal, every second here): what sending a key's calls to any server costs.
    started=$(date +%s.%N)
    for ((i = 0; i < 4; i++)); do
        leased_sql bench_s$((i % 2 + 1)) "SELECT seq_next('routed', 5000)" >/dev/null
    done
    echo "alternating: $(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f numbers/s (4 calls in %.1f s)", 4 / (e - s), e - s }')"
    for c in bench_auth bench_s1 bench_s2 bench_local; do cluster_remove "$c"; done
fi
