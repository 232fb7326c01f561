"""The generator clock against the wall clock and the high-water mark (docs/clock-safety.md).

A model of what "How" on that page describes, not a measurement: the wall clock steps back 10 s at
20 s and is set right again at 45 s; the generator clock never goes back; the durable high-water
mark is kept pg_idgen.clock_reserve (5 s) ahead of the time in use and moved when half of that is
left. Drawn by scripts/draw_diagrams.sh: python3 docs/diagrams/clock.py docs/clock.png
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESERVE = 5.0  # pg_idgen.clock_reserve, s
STEP_AT, STEP = 20.0, 10.0  # the wall clock steps back 10 s at 20 s of real time
FIX_AT = 45.0  # and is set right (forward) at 45 s
END = 60.0
DT = 0.05


def wall(t):
    return t - STEP if STEP_AT <= t < FIX_AT else t


times = [i * DT for i in range(int(END / DT) + 1)]
generator, marks = [], []
gen = 0.0
mark = RESERVE
for t in times:
    # The generator clock follows the wall clock forwards only (the monotonic clock plus an
    # offset the clock worker raises when the wall clock gains on it).
    gen = max(gen + DT, wall(t)) if t > 0 else 0.0
    # The worker moves the mark when half the reserve is left: written, flushed, then used.
    if mark - gen <= RESERVE / 2:
        mark = gen + RESERVE
    generator.append(gen)
    marks.append(mark)

fig, ax = plt.subplots(figsize=(8.5, 4.6), dpi=110)
ax.plot(times, [wall(t) for t in times], color="#c04040", linewidth=1.6, label="wall clock")
ax.plot(times, generator, color="#2060a0", linewidth=2.4, label="generator clock: the time of new ids")
ax.step(times, marks, where="post", color="#5a8a5a", linewidth=1.4, linestyle="--",
        label="durable high-water mark (no id reaches it)")
ax.axvspan(STEP_AT, FIX_AT, color="#f4e4e4", alpha=0.6, linewidth=0)
ax.annotate("the wall clock steps back 10 s:\nthe generator clock runs on,\nids keep coming, none repeats",
            xy=(STEP_AT + 0.3, wall(STEP_AT + 0.3)), xytext=(23, 2.5), fontsize=8.5,
            arrowprops=dict(arrowstyle="->", color="#555555"))
ax.annotate("set right again: both agree,\nno jump ahead of the ids", xy=(FIX_AT, FIX_AT), xytext=(46.5, 30),
            fontsize=8.5, arrowprops=dict(arrowstyle="->", color="#555555"))
ax.annotate("moved when half of the 5 s reserve is left\n(files and WAL flushed first)", xy=(8.0, marks[int(8.0 / DT)]),
            xytext=(0.5, 24), fontsize=8.5, arrowprops=dict(arrowstyle="->", color="#555555"))
ax.set_xlabel("real time (s)")
ax.set_ylabel("clock reading (s)")
ax.set_xlim(0, END)
ax.set_ylim(-2, END + RESERVE + 2)
ax.grid(True, color="#e6e6e6")
ax.legend(loc="upper left", fontsize=8.5, frameon=False)
ax.set_title("pg_idgen's clocks when the wall clock steps back", fontsize=11)
fig.tight_layout()
fig.savefig(sys.argv[1] if len(sys.argv) > 1 else "clock.png")
