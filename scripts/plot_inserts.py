#!/usr/bin/env python3
"""The insert benchmark's report: from the CSV of every measurement (scripts/bench_inserts.sh),
a summary table in Markdown (median and best of the rounds, ratios to bigserial) and one PNG per
figure, all beside the CSV.

    python3 scripts/plot_inserts.py docs/bench-inserts.csv docs
"""

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

# In the order of the tables and plots; a key the CSV lacks (core_uuidv7 before PostgreSQL 18) is left out.
ALL_KEYS = ["bigserial", "snowflake", "segment", "objectid", "uuid_v7", "core_uuidv7", "gen_random_uuid"]
LABELS = {
    "bigserial": "bigserial",
    "snowflake": "snowflake_next()",
    "segment": "segment_next()",
    "objectid": "objectid_gen()",
    "uuid_v7": "uuid_v7_next()",
    "core_uuidv7": "uuidv7() (core, PostgreSQL 18)",
    "gen_random_uuid": "gen_random_uuid()",
}
CLIENTS = ["1", "2", "4"]


def load(path):
    """{(figure, key, clients, mode): [value of each round]}"""
    values = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            values[(row["figure"], row["key"], row["clients"], row["mode"])].append(float(row["value"]))
    return values


def median(values, figure, key, clients, mode):
    v = values.get((figure, key, clients, mode))
    return statistics.median(v) if v else None


def best(values, figure, key, clients, mode, higher_is_better=True):
    v = values.get((figure, key, clients, mode))
    if not v:
        return None
    return max(v) if higher_is_better else min(v)


def number(x, digits=0):
    return "–" if x is None else f"{x:,.{digits}f}"


def ratio(x, base):
    return "–" if x is None or not base else f"{x / base:.2f}×"


def grouped_bars(ax, series, groups, ylabel, title):
    """series: {key: [value per group]}; bars grouped by group, one colour a key."""
    width = 0.8 / len(series)
    for i, (key, heights) in enumerate(series.items()):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, [h or 0 for h in heights], width, label=LABELS[key])
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:,.2f}"))
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)


def plot(out, name, series, groups, ylabel, title):
    fig, ax = plt.subplots(figsize=(9, 4.5))
    grouped_bars(ax, series, groups, ylabel, title)
    fig.tight_layout()
    fig.savefig(out / name, dpi=100)
    plt.close(fig)


def main(csv_path, out_dir):
    global KEYS
    values = load(csv_path)
    KEYS = [k for k in ALL_KEYS if any(key == k for (_, key, _, _) in values)]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = []

    # Rows per second.
    lines.append("| key | batch, 1 client | batch, 2 | batch, 4 | single rows, 1 client | single, 2 | single, 4 |")
    lines.append("|---|---|---|---|---|---|---|")
    for key in KEYS:
        cells = []
        for mode in ["batch", "single"]:
            base = median(values, "rows_per_second", "bigserial", "1", mode)
            for clients in CLIENTS:
                m = median(values, "rows_per_second", key, clients, mode)
                b = best(values, "rows_per_second", key, clients, mode)
                cell = f"{number(m)} (best {number(b)})"
                if clients == "1":
                    cell += f", {ratio(m, base)} bigserial"
                cells.append(cell)
        lines.append(f"| `{LABELS[key]}` | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("rows/s, median of the rounds (best in brackets); the ratio is to bigserial's median.")
    lines.append("")

    # Index size, WAL, latency.
    big = sorted({k[3] for k in values if k[0] == "index_bytes" and k[3] != "1000000"})
    big_mode = big[0] if big else "10000000"
    lines.append(
        f"| key | index after 1M rows | after {int(big_mode) // 1000000}M rows | after the mixed workload | WAL bytes/row (batch fill) | WAL bytes/row (single rows, 1 client) | p99 latency of single-row inserts, 1 / 2 / 4 clients |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    base_1m = median(values, "index_bytes", "bigserial", "1", "1000000")
    base_big = median(values, "index_bytes", "bigserial", "1", big_mode)
    base_mixed = median(values, "index_bytes_mixed", "bigserial", "1", "mixed")
    for key in KEYS:
        mb = lambda b: None if b is None else b / 1024 / 1024  # noqa: E731
        i1 = median(values, "index_bytes", key, "1", "1000000")
        ib = median(values, "index_bytes", key, "1", big_mode)
        im = median(values, "index_bytes_mixed", key, "1", "mixed")
        fill = median(values, "wal_bytes_per_row", key, "1", "fill")
        single = median(values, "wal_bytes_per_row", key, "1", "single")
        p99 = " / ".join(number(median(values, "p99_latency_ms", key, c, "single"), 3) for c in CLIENTS)
        lines.append(
            f"| `{LABELS[key]}` | {number(mb(i1), 1)} MB ({ratio(i1, base_1m)}) | {number(mb(ib), 1)} MB ({ratio(ib, base_big)})"
            f" | {number(mb(im), 1)} MB ({ratio(im, base_mixed)}) | {number(fill, 1)} | {number(single, 1)} | {p99} ms |"
        )
    lines.append("")
    lines.append(f"Index sizes with the ratio to bigserial's; the large size is after {int(big_mode):,} rows.")
    (out / "bench-inserts.md").write_text("\n".join(lines) + "\n")

    # Plots.
    for mode, title in [("batch", "1,000 rows a transaction"), ("single", "one row a transaction")]:
        series = {k: [median(values, "rows_per_second", k, c, mode) for c in CLIENTS] for k in KEYS}
        plot(out, f"inserts-{mode}.png", series, [f"{c} client(s)" for c in CLIENTS], "rows/s (median)", f"INSERT throughput, {title}")
    series = {k: [median(values, "p99_latency_ms", k, c, "single") for c in CLIENTS] for k in KEYS}
    plot(out, "latency-p99.png", series, [f"{c} client(s)" for c in CLIENTS], "ms", "p99 latency of single-row inserts")
    series = {k: [median(values, "wal_bytes_per_row", k, "1", m) for m in ["fill", "single"]] for k in KEYS}
    plot(out, "wal-per-row.png", series, ["batch fill", "single rows"], "bytes", "WAL written per row")
    series = {k: [(median(values, "index_bytes", k, "1", n) or 0) / 1024 / 1024 for n in ["1000000", big_mode]] for k in KEYS}
    plot(out, "index-size.png", series, ["1M rows", f"{int(big_mode) // 1000000}M rows"], "MB", "primary-key index size")
    series = {k: [(median(values, "index_bytes_mixed", k, "1", "mixed") or 0) / 1024 / 1024] for k in KEYS}
    plot(out, "index-size-mixed.png", series, ["after inserts, deletes of the oldest rows and VACUUM"], "MB", "primary-key index size, mixed workload")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
