#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Plots scale_project's CSV: predicted allreduce time against ranks, one panel per
inter-node link speed, one line per algorithm and codec.

    build/perf/scale/scale_project --csv scale.csv && perf/scale/plot.py scale.csv out.png

Needs Debian's python3-matplotlib (scripts/setup.sh installs it).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    links = sorted({float(r["gbits"]) for r in rows})
    fig, axes = plt.subplots(1, len(links), figsize=(5 * len(links), 4.5), sharey=True)
    if len(links) == 1:
        axes = [axes]
    for ax, g in zip(axes, links):
        series = defaultdict(list)
        for r in rows:
            if float(r["gbits"]) == g:
                series[r["variant"]].append((int(r["ranks"]), float(r["seconds"]) * 1e3))
        for name, pts in series.items():
            pts.sort()
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            if name == "best uncompressed":  # the baseline, under the rows it is one of
                ax.plot(xs, ys, "-", color="black", lw=5, alpha=0.25, zorder=0, label=name)
                continue
            style = "-" if name.startswith("hier") else "--" if name.startswith("twoshot") else ":"
            ax.plot(xs, ys, style, marker="o", ms=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{g:.0f} Gbit/s per GPU between nodes")
        ax.set_xlabel("ranks (8 GPUs a node)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("predicted ms, 256 MiB fp32 allreduce")
    axes[-1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
