#!/usr/bin/env bash
# The insert benchmark: what an INSERT costs with each key type as a table's primary key.
#   ./dev bench inserts [--pg N]                          (the full run: some 15 minutes)
#   PGBENCH_SECONDS=2 ROUNDS=1 BIG_ROWS=2000000 BENCH_OUT=/tmp/inserts ./dev bench inserts
#                                                         (a quick look, not over docs/)
#
# One cluster; six tables, one per key type, each `id <type> PRIMARY KEY DEFAULT <generator>`:
# bigserial, snowflake_next(), segment_next('bench'), objectid_gen(), uuid_v7_next(),
# gen_random_uuid(); on PostgreSQL 18 also core uuidv7(). Measured, in interleaved rounds (the order of the keys rotates each round):
#   1. rows/s inserting with 1, 2 and 4 pgbench clients, in batches of 1,000 rows a transaction and
#      one row a transaction; WAL bytes per row (pg_current_wal_insert_lsn differences) and, for
#      single rows, the 99th percentile of the latency (pgbench's per-transaction log);
#   2. the primary-key index size after 1 million and BIG_ROWS (10 million) rows, and WAL bytes per
#      row while filling it;
#   3. the index size after a mixed workload: 1 million rows, then 10 times 100,000 rows inserted and
#      the 100,000 oldest deleted, then VACUUM.
# Writes docs/bench-inserts.csv (every measurement), docs/bench-inserts.md (the summary table:
# best and median) and one PNG a figure under docs/ (scripts/plot_inserts.py, matplotlib); on
# PostgreSQL 16-18, under docs/pgN/.
cd "$(dirname "$0")/.."
source scripts/lib.sh

PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}
ROUNDS=${ROUNDS:-3}
BIG_ROWS=${BIG_ROWS:-10000000}
PORT=54332
default_out=docs
[ "$PG_MAJOR" = 15 ] || default_out=docs/pg$PG_MAJOR
OUT=${BENCH_OUT:-$default_out}
CSV=$OUT/bench-inserts.csv
KEYS=(bigserial snowflake segment objectid uuid_v7 gen_random_uuid)
# PostgreSQL 18's own UUIDv7 generator, the yardstick of uuid_v7_next().
[ "$PG_MAJOR" -lt 18 ] || KEYS+=(core_uuidv7)

install_extension
ensure_matplotlib
trap 'cluster_remove bench-inserts' EXIT
cluster_remove bench-inserts
# Why these settings: shared_buffers large enough that the 10 million row indexes stay in memory
# (the figures then show the keys, not the disk); checkpoints far apart, so that full-page images
# do not swamp the WAL figures (every key pays them alike after a checkpoint).
cluster_start bench-inserts $PORT "shared_preload_libraries = 'pg_idgen'" "pg_idgen.node_id = 1" \
    "shared_buffers = '2GB'" "max_wal_size = '20GB'" "checkpoint_timeout = '1h'" "max_connections = 20"
psql_bench() { cluster_psql bench-inserts -qAt "$@"; }

psql_bench <<'SQL'
CREATE EXTENSION pg_idgen;
SELECT segment_create('bench', step => 1000);
CREATE TABLE bench_bigserial       (id bigserial PRIMARY KEY,                               payload bigint NOT NULL);
CREATE TABLE bench_snowflake       (id bigint   PRIMARY KEY DEFAULT snowflake_next(),       payload bigint NOT NULL);
CREATE TABLE bench_segment         (id bigint   PRIMARY KEY DEFAULT segment_next('bench'),  payload bigint NOT NULL);
CREATE TABLE bench_objectid        (id objectid PRIMARY KEY DEFAULT objectid_gen(),         payload bigint NOT NULL);
CREATE TABLE bench_uuid_v7         (id uuid     PRIMARY KEY DEFAULT uuid_v7_next(),         payload bigint NOT NULL);
CREATE TABLE bench_gen_random_uuid (id uuid     PRIMARY KEY DEFAULT gen_random_uuid(),      payload bigint NOT NULL);
SQL
[ "$PG_MAJOR" -lt 18 ] ||
    psql_bench -c "CREATE TABLE bench_core_uuidv7 (id uuid PRIMARY KEY DEFAULT uuidv7(), payload bigint NOT NULL)"

mkdir -p "$OUT"
echo "figure,key,clients,mode,round,value" >"$CSV"
record() { echo "$1,$2,$3,$4,$5,$6" >>"$CSV"; }
wal_lsn() { psql_bench -c "SELECT pg_current_wal_insert_lsn()"; }
wal_bytes() { psql_bench -c "SELECT pg_wal_lsn_diff('$2', '$1')"; }
index_bytes() { psql_bench -c "SELECT pg_relation_size('bench_$1_pkey')"; }

# 1. Throughput, WAL per row and latency with pgbench.
scripts=$WORK_ROOT/bench-inserts-scripts
mkdir -p "$scripts" && chown postgres:postgres "$scripts"
for key in "${KEYS[@]}"; do
    echo "INSERT INTO bench_$key (payload) SELECT g FROM generate_series(1, 1000) AS g;" >"$scripts/$key-batch.sql"
    echo "INSERT INTO bench_$key (payload) VALUES (1);" >"$scripts/$key-single.sql"
done
say "1/3 rows/s, WAL bytes per row, p99 latency: ${#KEYS[@]} keys x clients 1, 2, 4 x batch and single rows, ${PGBENCH_SECONDS}s each, $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order each round, so that no key always runs first (or last) in a round.
    order=("${KEYS[@]:$(((round - 1) % ${#KEYS[@]}))}" "${KEYS[@]:0:$(((round - 1) % ${#KEYS[@]}))}")
    for key in "${order[@]}"; do
        for clients in 1 2 4; do
            for mode in batch single; do
                psql_bench -c "TRUNCATE bench_$key" -c "CHECKPOINT"
                rows_per_tx=$([ $mode = batch ] && echo 1000 || echo 1)
                logdir=$WORK_ROOT/bench-inserts-log
                rm -rf "$logdir" && mkdir -p "$logdir" && chown postgres:postgres "$logdir"
                before=$(wal_lsn)
                tps=$(cd "$logdir" && "$PG_BIN/pgbench" -n -h "$WORK_ROOT/bench-inserts/socket" -p $PORT -U postgres \
                    -c "$clients" -j "$clients" -T "$PGBENCH_SECONDS" -l -f "$scripts/$key-$mode.sql" postgres 2>/dev/null |
                    awk '/^tps/ { print $3 }')
                after=$(wal_lsn)
                rows=$(psql_bench -c "SELECT count(*) FROM bench_$key")
                rate=$(awk -v t="$tps" -v r="$rows_per_tx" 'BEGIN { printf "%.0f", t * r }')
                record rows_per_second "$key" "$clients" "$mode" "$round" "$rate"
                record wal_bytes_per_row "$key" "$clients" "$mode" "$round" "$(awk -v b="$(wal_bytes "$before" "$after")" -v n="$rows" 'BEGIN { printf "%.1f", b / n }')"
                if [ $mode = single ]; then
                    # The third field of pgbench's transaction log is the latency in microseconds.
                    p99=$(cat "$logdir"/pgbench_log.* | awk '{ print $3 }' | sort -n |
                        awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.3f", v[i] / 1000 }')
                    record p99_latency_ms "$key" "$clients" "$mode" "$round" "$p99"
                fi
                printf '  round %s  %-16s %s client(s) %-6s %12s rows/s\n' "$round" "$key" "$clients" "$mode" "$rate" >&2
            done
        done
    done
done

# 2. Index size after 1 million and BIG_ROWS rows; WAL bytes per row while filling.
say "2/3 primary-key index size after 1,000,000 and $BIG_ROWS rows"
for key in "${KEYS[@]}"; do
    psql_bench -c "TRUNCATE bench_$key" -c "CHECKPOINT"
    filled=0
    before=$(wal_lsn)
    for target in 1000000 "$BIG_ROWS"; do
        while [ "$filled" -lt "$target" ]; do
            psql_bench -c "INSERT INTO bench_$key (payload) SELECT g FROM generate_series(1, 100000) AS g"
            filled=$((filled + 100000))
        done
        record index_bytes "$key" 1 "$target" 1 "$(index_bytes "$key")"
        if [ "$target" = 1000000 ]; then
            record wal_bytes_per_row "$key" 1 fill 1 "$(awk -v b="$(wal_bytes "$before" "$(wal_lsn)")" 'BEGIN { printf "%.1f", b / 1000000 }')"
        fi
    done
    printf '  %-16s index %s bytes after %s rows\n' "$key" "$(index_bytes "$key")" "$BIG_ROWS" >&2
    psql_bench -c "TRUNCATE bench_$key"
done

# 3. The mixed workload: the oldest rows deleted as new ones arrive, then VACUUM. `payload` is the
#    row's number in insertion order: 1 to 1,000,000 first, then 100,000 more a cycle.
say "3/3 index size after 1,000,000 rows, 10 x (100,000 inserted, 100,000 oldest deleted), VACUUM"
for key in "${KEYS[@]}"; do
    psql_bench -c "TRUNCATE bench_$key" -c "INSERT INTO bench_$key (payload) SELECT g FROM generate_series(1, 1000000) AS g"
    for cycle in $(seq 1 10); do
        psql_bench -c "INSERT INTO bench_$key (payload) SELECT 1000000 + 100000 * ($cycle - 1) + g FROM generate_series(1, 100000) AS g" \
            -c "DELETE FROM bench_$key WHERE payload <= 100000 * $cycle"
    done
    psql_bench -c "VACUUM bench_$key"
    record index_bytes_mixed "$key" 1 mixed 1 "$(index_bytes "$key")"
    printf '  %-16s index %s bytes after the mixed workload\n' "$key" "$(index_bytes "$key")" >&2
    psql_bench -c "TRUNCATE bench_$key"
done

say "report: $CSV, $OUT/bench-inserts.md and the plots"
python3 scripts/plot_inserts.py "$CSV" "$OUT"
cat "$OUT/bench-inserts.md"
