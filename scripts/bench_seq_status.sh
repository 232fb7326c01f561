# Part g of scripts/bench_seq.sh, which sources it (its helpers: bench_start, bench_sql,
# as_postgres, say; seq_conf): seq_status() polled beside calls that load cold sections, at a large
# section cache. What a whole-cache scan under the sections' lock costs shows here: a poll that
# reads every section holds the lock while the calls that take a section for a cold key, and the
# worker that publishes its load, wait for it.
#   1. STATUS_CACHE_SECTIONS (524288) cached sections, STATUS_FILL (100000) of them loaded first
#      (random keys far apart, by STATUS_FILL_CLIENTS clients);
#   2. STATUS_SECONDS (10) of one client taking the first number of a cold key (a key of a section
#      never used: each call takes a section and waits for its load), alone;
#   3. the same beside a client polling seq_status() in a loop;
#   then each call's latency from pgbench's log: the cold calls' p50, p99 and max, alone and beside
#   the polls, and the polls' own (which bound from above how long a poll holds the lock).
STATUS_CACHE_SECTIONS=${STATUS_CACHE_SECTIONS:-524288}
STATUS_FILL=${STATUS_FILL:-100000}
STATUS_FILL_CLIENTS=${STATUS_FILL_CLIENTS:-32}
STATUS_SECONDS=${STATUS_SECONDS:-10}

status_logs=$WORK_ROOT/bench-status-logs
rm -rf "$status_logs" && as_postgres mkdir -p "$status_logs"
# Why keys this far apart: every call a section of its own (256 keys a section), never one used before.
echo "\\set k random(0, 1000000000000) * 256
SELECT seq_next('cold', :k);" >"$status_logs/cold.sql"
echo "SELECT * FROM seq_status();" >"$status_logs/poll.sql"
chmod a+r "$status_logs"/*.sql

# status_pgbench NAME SCRIPT CLIENTS [pgbench option ...]: pgbench against the bench cluster, each
# transaction's latency logged under NAME.
status_pgbench() {
    local name=$1 script=$2 clients=$3
    shift 3
    (cd "$status_logs" && as_postgres "$PG_BIN/pgbench" -n -h "$WORK_ROOT/bench/socket" -p $PORT -U postgres \
        -c "$clients" -j "$((clients < 2 ? clients : 2))" -f "$script" -l --log-prefix="$name" "$@" postgres \
        >"$name.out" 2>&1) || { cat "$status_logs/$name.out" >&2; return 1; }
}
# latencies NAME: "p50 p99 max count" of the transactions logged under NAME, in ms.
latencies() {
    cat "$status_logs/$1".* | awk '{ print $3 / 1000 }' | sort -n |
        awk '{ v[NR] = $1 } END { printf "%.2f %.2f %.2f %d", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1], v[NR], NR }'
}

bench_start "${seq_conf[@]}" "pg_idgen.seq_cache_sections = $STATUS_CACHE_SECTIONS" "max_connections = $((STATUS_FILL_CLIENTS + 10))"
bench_sql -c "CREATE EXTENSION IF NOT EXISTS pg_idgen" -c "SELECT seq_space_create('cold')" >/dev/null
say "seq_status() beside cold keys: $STATUS_FILL sections of $STATUS_CACHE_SECTIONS loaded first ($STATUS_FILL_CLIENTS clients)"
fill_started=$(date +%s.%N)
status_pgbench fill cold.sql "$STATUS_FILL_CLIENTS" -t "$((STATUS_FILL / STATUS_FILL_CLIENTS))"
echo "filled: $(bench_sql -c "SELECT cached_sections FROM seq_status()") sections cached in" \
     "$(awk -v a="$fill_started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

status_pgbench alone cold.sql 1 -T "$STATUS_SECONDS"
status_pgbench beside cold.sql 1 -T "$STATUS_SECONDS" &
cold_pid=$!
status_pgbench polls poll.sql 1 -T "$STATUS_SECONDS"
wait "$cold_pid"
printf '%-46s %10s %10s %10s %8s\n' "ms per call ($STATUS_SECONDS s each)" p50 p99 max calls
for run in alone beside polls; do
    case $run in
    alone) label="first call of a cold key, alone" ;;
    beside) label="first call of a cold key, beside the polls" ;;
    polls) label="seq_status() poll" ;;
    esac
    read -r p50 p99 max count <<<"$(latencies "$run")"
    printf '%-46s %10s %10s %10s %8s\n' "$label" "$p50" "$p99" "$max" "$count"
done
cluster_stop bench
