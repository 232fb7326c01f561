# Section 3 of scripts/bench.sh, which sources it (its helpers: bench_start, time_calls, column,
# pgbench_run, ratio, multiple; N, ROUNDS, PGBENCH_SECONDS): per-key sequences, all in one cluster,
# against what they are compared with, measured in the same run.
#   a. the section cache's shared memory (pg_shmem_allocations, with 1 section and with enough for
#      SEQ_KEYS_LARGE keys);
#   b. the cold pass: one seq_next() for each of SEQ_KEYS keys, so every section is loaded (one
#      durable write each); then the sections of SEQ_KEYS_LARGE keys loaded by 16 clients at once;
#   c. ns per call, best of ROUNDS, one hot key, SEQ_KEYS keys and SEQ_KEYS_LARGE keys (warm),
#      against segment_next() and nextval();
#   d. durable writes (loads and raises) per million calls, one hot key and SEQ_KEYS keys;
#   e. rows/s with 1, 2 and 4 pgbench clients inserting one row numbered per key a transaction, for
#      1, 10,000 and SEQ_KEYS keys (random, warm): seq_next(), the seq_fill() trigger, a counter row
#      updated in the same statement, a sequence per key (up to 10,000 keys), and a row with no
#      number; WAL bytes per row of each, with and without its full-page images; f. the hot key
#      with fsync = on;
#   g. seq_status() polled beside calls that load cold sections, at a large cache
#      (scripts/bench_seq_status.sh);
#   h. instructions per call of seq_next() on the hot key, and of segment_next() on a tag whose
#      range holds every call, counted by callgrind (when valgrind is there): the figures to
#      compare between builds, which times on a shared machine are not.
# SEQ_KEYS (1000000) and SEQ_KEYS_LARGE (10000000) scale the many-keys runs; N, ROUNDS and
# PGBENCH_SECONDS the rest. SEQ_PARTS (all: "calls inserts status callgrind") chooses the parts:
# calls = a-d, inserts = e-f, status = g, callgrind = h.

SEQ_KEYS=${SEQ_KEYS:-1000000}
SEQ_KEYS_LARGE=${SEQ_KEYS_LARGE:-10000000}
SEQ_PARTS=${SEQ_PARTS:-calls inserts status callgrind}
# The keys a space's section holds (seq_space_create's default), and how many keys get a
# sequence of their own.
SECTION_KEYS=256
SEQUENCE_KEYS=10000
[ "$SEQ_KEYS" -gt "$SEQUENCE_KEYS" ] || { echo "SEQ_KEYS must be above $SEQUENCE_KEYS" >&2; exit 2; }
[ "$SEQ_KEYS_LARGE" -ge "$SEQ_KEYS" ] || { echo "SEQ_KEYS_LARGE must be at least SEQ_KEYS" >&2; exit 2; }
sections=$(((SEQ_KEYS + SECTION_KEYS - 1) / SECTION_KEYS))
large_sections=$(((SEQ_KEYS_LARGE + SECTION_KEYS - 1) / SECTION_KEYS))
# A cache that holds the sections of the large key set, and so those of the smaller one too.
cache_sections=8
while [ "$cache_sections" -lt "$large_sections" ]; do cache_sections=$((cache_sections * 2)); done

seq_part() { [[ " $SEQ_PARTS " == *" $1 "* ]]; }
bench_sql() { cluster_psql bench -qAt "$@"; }
shmem_bytes() { bench_sql -c "SELECT size FROM pg_catalog.pg_shmem_allocations WHERE name = 'pg_idgen'"; }
# seq_pass EXPR CALLS: "seconds loads raises waits evictions" of CALLS calls of EXPR.
seq_pass() { bench_sql -F ' ' -c "SELECT * FROM seq_pass(\$\$$1\$\$, $2)"; }
per_million() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.1f", a * 1e6 / n }'; }
ns_per_call() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.1f", s * 1e9 / n }'; }
# scattered KEYS: an expression of g visiting KEYS keys in a scattered order, every key once in KEYS
# calls: key = g * stride mod KEYS, stride prime to KEYS and about 0.618 of it (consecutive calls
# far apart).
scattered() {
    local stride
    stride=$(bench_sql -c "SELECT min(s) FROM generate_series($1::bigint * 618 / 1000, $1) AS s WHERE gcd(s, $1) = 1")
    echo "(g::bigint * $stride) % $1"
}

# Why these settings: checkpoints only where the script asks for them (before each pgbench run),
# and no autovacuum, whose WAL would land in whichever run it happened to run beside.
seq_conf=("autovacuum = off" "max_wal_size = '20GB'" "checkpoint_timeout = '1h'")
cluster_remove bench

if seq_part calls || seq_part inserts; then
# a. Shared memory: the cache takes seq_cache_sections sections.
bench_start "${seq_conf[@]}" "pg_idgen.seq_cache_sections = 1"
one_section_bytes=$(shmem_bytes)
bench_start "${seq_conf[@]}" "pg_idgen.seq_cache_sections = $cache_sections" "max_connections = 40"
sized_bytes=$(shmem_bytes)
section_bytes=$(((sized_bytes - one_section_bytes) / (cache_sections - 1)))
say "per-key sequences: $SEQ_KEYS keys of $SECTION_KEYS a section = $sections sections, $SEQ_KEYS_LARGE keys = $large_sections;" \
    "pg_idgen.seq_cache_sections = $cache_sections"
echo "pg_idgen's shared memory (pg_shmem_allocations): $one_section_bytes bytes with seq_cache_sections = 1," \
     "$sized_bytes with $cache_sections: $section_bytes bytes a section;" \
     "the cache of $cache_sections sections takes $(awk -v b="$((section_bytes * cache_sections))" 'BEGIN { printf "%.1f", b / 1048576 }') MiB" \
     "(the default, 1024 sections: $(awk -v b="$((section_bytes * 1024))" 'BEGIN { printf "%.1f", b / 1048576 }') MiB)"

bytes_per_sequence=$(bench_sql -v keys="$SEQ_KEYS" -v sequences="$SEQUENCE_KEYS" -f scripts/bench_seq.sql)
scattered_key=$(scattered "$SEQ_KEYS")
scattered_large=$(scattered "$SEQ_KEYS_LARGE")
hot="seq_next('bench', 0)"
many="seq_next('bench', $scattered_key)"
many_large="seq_next('bench', $scattered_large)"

# b. The cold pass; then the large key set's sections, loaded by 16 clients at once (one after
#    another, each load a durable write the call waits for, they would take minutes).
say "per-key sequences: the cold pass, one seq_next() for each of $SEQ_KEYS keys (every section loaded)"
cold=$(seq_pass "$many" "$SEQ_KEYS")
read -r seconds loads raises waits evictions <<<"$cold"
echo "cold pass: $(awk -v s="$seconds" 'BEGIN { printf "%.2f", s }') s = $(ns_per_call "$seconds" "$SEQ_KEYS") ns per call;" \
     "$loads loads (durable writes; $sections sections) = $(awk -v s="$seconds" -v l="$loads" 'BEGIN { printf "%.3f", s * 1000 / l }') ms a load;" \
     "$evictions evictions, $raises raises"
warm_started=$(date +%s.%N)
for client in $(seq 0 15); do
    bench_sql -c "SELECT count(seq_next('bench', s * $SECTION_KEYS)) FROM generate_series($client, $large_sections - 1, 16) AS s" >/dev/null &
done
wait
echo "the $large_sections sections of $SEQ_KEYS_LARGE keys loaded by 16 clients in" \
     "$(awk -v a="$warm_started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s;" \
     "$(bench_sql -c "SELECT cached_sections, evictions FROM seq_status()" | awk -F'|' '{ print $1 " cached, " $2 " evictions" }')"

# c. Cost per call, warm. The scattered keys alone are timed too: the many keys' cost is above them.
time_calls "per-key sequences: cost per call on PostgreSQL $PG_MAJOR, one hot key, $SEQ_KEYS and $SEQ_KEYS_LARGE keys (warm), N=$N" \
    "{g,\"$scattered_key\",\"$scattered_large\",\"$hot\",\"$many\",\"$many_large\",\"segment_next('bench_1k')\",\"nextval('bench_seq')\"}"
segment_ns=$(column "segment_next('bench_1k')" 4)
nextval_ns=$(column "nextval('bench_seq')" 4)
hot_ns=$(column "$hot" 4)
echo "seq_next() one hot key: $hot_ns ns above baseline = $(multiple "$hot_ns" "$segment_ns") segment_next('bench_1k')'s," \
     "$(ratio "$hot_ns" "$nextval_ns") of nextval()'s (goal: <= 2x segment_next)"
for keys in "$SEQ_KEYS" "$SEQ_KEYS_LARGE"; do
    if [ "$keys" = "$SEQ_KEYS" ]; then expr=$many key=$scattered_key; else expr=$many_large key=$scattered_large; fi
    many_ns=$(awk -v a="$(column "$expr" 4)" -v b="$(column "$key" 4)" 'BEGIN { printf "%.1f", a - b }')
    echo "seq_next() $keys keys, warm: $many_ns ns above the scattered key alone = $(multiple "$many_ns" "$segment_ns") segment_next('bench_1k')'s," \
         "$(ratio "$many_ns" "$nextval_ns") of nextval()'s (goal: <= 2x segment_next)"
done

# d. Durable writes: a load or a raise is one committed, flushed transaction of the worker.
say "per-key sequences: durable writes (seq_status() loads + raises) per million calls, $N calls each, warm"
printf '%-16s %10s %8s %8s %8s %10s %22s\n' keys ns/call loads raises waits evictions "durable writes/1M calls"
for pass in hot many; do
    if [ $pass = hot ]; then expr=$hot label="1 (hot)"; else expr=$many label=$SEQ_KEYS; fi
    warm=$(seq_pass "$expr" "$N")
    read -r seconds loads raises waits evictions <<<"$warm"
    printf '%-16s %10s %8s %8s %8s %10s %22s\n' "$label" "$(ns_per_call "$seconds" "$N")" "$loads" "$raises" "$waits" "$evictions" \
        "$(per_million $((loads + raises)) "$N")"
done
fi

if seq_part inserts; then
# e. Inserts numbered per key, one row a transaction.
declare -A NUMBERING=(
    [seq]="INSERT INTO rows_seq (k, n, payload) VALUES (:k, seq_next('bench', :k), 1);"
    [fill]="INSERT INTO rows_fill (k, payload) VALUES (:k, 1);"
    [counter]="WITH c AS (UPDATE counters SET n = n + 1 WHERE k = :k RETURNING n) INSERT INTO rows_counter (k, n, payload) SELECT :k, c.n, 1 FROM c;"
    [sequences]="INSERT INTO rows_sequences (k, n, payload) VALUES (:k, nextval(format('k_%s', :k)), 1);"
    [plain]="INSERT INTO rows_plain (k, n, payload) VALUES (:k, 0, 1);"
)
declare -A LABEL=([seq]="seq_next()" [fill]="seq_fill() trigger" [counter]="UPDATE counter" [sequences]="sequence per key" [plain]="no number")
FAMILIES=(seq fill counter sequences plain)
KEY_COUNTS=(1 "$SEQUENCE_KEYS" "$SEQ_KEYS")
CLIENTS=(1 2 4)
runs=$WORK_ROOT/bench-seq-runs.txt
scripts=$WORK_ROOT/bench-seq-scripts
rm -rf "$scripts" && mkdir -p "$scripts" && : >"$runs"
fits() { [ "$1" != sequences ] || [ "$2" -le "$SEQUENCE_KEYS" ]; }
wal_lsn() { bench_sql -c "SELECT pg_current_wal_insert_lsn()"; }
# fpi_bytes FROM-LSN TO-LSN: bytes of the full-page images in that WAL (pg_waldump's statistics).
fpi_bytes() { as_postgres "$PG_BIN/pg_waldump" --stats -p "$WORK_ROOT/bench/data/pg_wal" -s "$1" -e "$2" | awk '/^Total/ { print $5 }'; }
durable_writes() { bench_sql -c "SELECT loads + raises FROM seq_status()"; }
seq_waits() { bench_sql -c "SELECT waits FROM seq_status()"; }
uses_seq() { [ "$1" = seq ] || [ "$1" = fill ]; }

say "per-key sequences: rows/s inserting one row numbered per key a transaction, pgbench ${PGBENCH_SECONDS}s each"
waits_before=$(seq_waits)
for keys in "${KEY_COUNTS[@]}"; do
    for family in "${FAMILIES[@]}"; do
        fits "$family" "$keys" || continue
        script=$scripts/$family-$keys.sql
        { [ "$keys" = 1 ] && echo '\set k 0' || echo "\\set k random(0, $((keys - 1)))"; echo "${NUMBERING[$family]}"; } >"$script"
        for clients in "${CLIENTS[@]}"; do
            bench_sql -c CHECKPOINT
            wal_before=$(wal_lsn) writes_before=$(durable_writes)
            report=$(pgbench_run "$script" "$clients")
            wal_after=$(wal_lsn) writes_after=$(durable_writes)
            tps=$(awk '/^tps/ { printf "%.0f", $3 }' <<<"$report")
            rows=$(awk '/^number of transactions actually processed/ { print $NF }' <<<"$report")
            wal=$(bench_sql -c "SELECT pg_wal_lsn_diff('$wal_after', '$wal_before')")
            fpi=$(fpi_bytes "$wal_before" "$wal_after")
            echo "$family $keys $clients $tps $rows $wal $fpi $((writes_after - writes_before))" >>"$runs"
            printf '  %-20s %8s keys %s client(s) %10s rows/s\n' "${LABEL[$family]}" "$keys" "$clients" "$tps" >&2
        done
    done
done

# run_field FAMILY KEYS CLIENTS FIELD-NUMBER (4 rows/s, 5 rows, 6 WAL bytes, 7 of them full-page
# images, 8 durable writes).
run_field() { awk -v f="$1" -v k="$2" -v c="$3" -v i="$4" '$1 == f && $2 == k && $3 == c { print $i }' "$runs"; }
# wal_per_row FAMILY KEYS [without-fpi]: WAL bytes per row over the runs of every client count.
wal_per_row() {
    awk -v f="$1" -v k="$2" -v no_fpi="${3:-}" '$1 == f && $2 == k { w += $6 - (no_fpi ? $7 : 0); r += $5 } END { printf "%.1f", w / r }' "$runs"
}

printf '\n%-10s %-20s %12s %12s %12s %14s %14s %s\n' keys numbering "1 client" "2 clients" "4 clients" "WAL bytes/row" "without FPIs" \
    "durable writes/1M rows (1/2/4 clients)"
for keys in "${KEY_COUNTS[@]}"; do
    for family in "${FAMILIES[@]}"; do
        if ! fits "$family" "$keys"; then
            printf '%-10s %-20s not run: %s sequences would be %s relations of %s bytes each on disk, catalog included (measured on the %s): %s GB\n' \
                "$keys" "${LABEL[$family]}" "$keys" "$keys" "$bytes_per_sequence" "$SEQUENCE_KEYS" \
                "$(awk -v b="$bytes_per_sequence" -v k="$keys" 'BEGIN { printf "%.1f", b * k / 1e9 }')"
            continue
        fi
        writes=(-)
        if uses_seq "$family"; then
            writes=()
            for clients in "${CLIENTS[@]}"; do
                writes+=("$(per_million "$(run_field "$family" "$keys" "$clients" 8)" "$(run_field "$family" "$keys" "$clients" 5)")")
            done
        fi
        printf '%-10s %-20s %12s %12s %12s %14s %14s %s\n' "$keys" "${LABEL[$family]}" \
            "$(run_field "$family" "$keys" 1 4)" "$(run_field "$family" "$keys" 2 4)" "$(run_field "$family" "$keys" 4 4)" \
            "$(wal_per_row "$family" "$keys")" "$(wal_per_row "$family" "$keys" without-fpi)" "$(IFS=/; echo "${writes[*]}")"
    done
done
echo "(rows/s; WAL bytes per row over the three runs, each run after a CHECKPOINT, so the first change of a page" \
     "after it writes a full-page image (FPI): shown without them too; durable writes: seq_status() loads + raises;" \
     "calls that waited for the worker in all these runs: $(($(seq_waits) - waits_before)))"

echo
for keys in "${KEY_COUNTS[@]}"; do
    ratios=()
    for clients in "${CLIENTS[@]}"; do
        ratios+=("$(multiple "$(run_field seq "$keys" "$clients" 4)" "$(run_field counter "$keys" "$clients" 4)")")
    done
    echo "seq_next() / UPDATE counter, $keys key(s), rows/s with 1 / 2 / 4 clients: ${ratios[*]}"
done
# Why the row with no number too: no numbering inserts faster than it, so its ratio bounds seq_next()'s.
echo "seq_next() with 4 clients on one hot key: $(multiple "$(run_field seq 1 4 4)" "$(run_field counter 1 4 4)") the UPDATE counter's rows/s" \
     "(goal: >= 10x; the row with no number: $(multiple "$(run_field plain 1 4 4)" "$(run_field counter 1 4 4)"))"
for keys in "${KEY_COUNTS[@]}"; do
    seq_wal=$(wal_per_row seq "$keys") plain_wal=$(wal_per_row plain "$keys")
    echo "WAL bytes per row, $keys key(s): seq_next() $seq_wal, UPDATE counter $(wal_per_row counter "$keys")" \
         "($(wal_per_row counter "$keys" without-fpi) without FPIs), no number $plain_wal: seq_next() adds" \
         "$(awk -v a="$seq_wal" -v b="$plain_wal" 'BEGIN { printf "%+.1f", a - b }') bytes a row to the row's own insert (goal: a little)"
done

# f. The same hot key with durable commits (fsync = on, as a production server has it; the runs
#    above, like every bench cluster, run with fsync = off): the UPDATE counter's row stays locked
#    through its commit's flush, so its inserts queue behind one another, while seq_next()'s share
#    their flushes (group commit).
bench_start "${seq_conf[@]}" "pg_idgen.seq_cache_sections = $cache_sections" "fsync = on"
say "per-key sequences: one hot key with fsync = on, rows/s"
durable=()
for family in seq counter; do
    for clients in "${CLIENTS[@]}"; do
        tps=$(pgbench_run "$scripts/$family-1.sql" "$clients" | awk '/^tps/ { printf "%.0f", $3 }')
        durable+=("$family $clients $tps")
        printf '  %-20s %s client(s) %10s rows/s\n' "${LABEL[$family]}" "$clients" "$tps" >&2
    done
done
durable_tps() { printf '%s\n' "${durable[@]}" | awk -v f="$1" -v c="$2" '$1 == f && $2 == c { print $3 }'; }
for clients in "${CLIENTS[@]}"; do
    echo "fsync = on, one hot key, $clients client(s): seq_next() $(durable_tps seq "$clients") rows/s, UPDATE counter" \
         "$(durable_tps counter "$clients") rows/s = $(multiple "$(durable_tps seq "$clients")" "$(durable_tps counter "$clients")")"
done
cluster_stop bench
fi

if seq_part status; then
    source scripts/bench_seq_status.sh
fi

# h. Instructions per call of the hot key (the figure to compare between builds: each build
#    installed in turn, as the manual's Benchmarks page says).
if seq_part callgrind && command -v valgrind >/dev/null; then
    bench_start "${seq_conf[@]}"
    bench_sql -c "CREATE EXTENSION IF NOT EXISTS pg_idgen" \
        -c "SELECT seq_space_create('bench') WHERE NOT EXISTS (SELECT FROM seq_space WHERE space = 'bench')" \
        -c "SELECT segment_create('bench_1m', step => 1000000) WHERE NOT EXISTS (SELECT FROM segment_tag WHERE tag = 'bench_1m')" >/dev/null
    say "per-key sequences: instructions per call of seq_next() on one hot key (callgrind, 200,000 calls)"
    echo "seq_next('bench', 0): $(instructions_per_call bench "seq_next('bench', 0)" "SELECT seq_next('bench', 0)") instructions per call"
    say "segments, for comparison: instructions per call of segment_next() within one range of 1,000,000 (callgrind)"
    echo "segment_next('bench_1m'): $(instructions_per_call bench "segment_next('bench_1m')" "SELECT segment_next('bench_1m')") instructions per call"
fi
