#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Reproduces, at small scale, what the research behind ccl found about compressing
model-parallel and data-parallel traffic. Every arm (a layout and a compression setting)
trains the same model on the same data and token budget at several seeds; every row
compares two arms paired by seed (usually an arm and the uncompressed baseline of its
layout) and decides by the mean paired difference of the final validation loss and its
95 % interval. Writes the JSONL logs into OUT, the plots and the table into the trainer's
README.

Usage: run.py [--scale full|tiny] [--out DIR] [--only PREFIX...] [--seeds N] [--force]
              [--keep-going] [--no-run] [--list] [--readme PATH] [--no-readme]
              [--train GPT_TRAIN] [--data TEXT]
  full  the README's table (several hours on a 2-core machine: run it in the background,
        over several sittings if need be; every finished run is kept);
  tiny  seconds per run, two seeds, for CI: checks that every arm runs and that every row
        is computed, not that it reproduces.
Runs already in OUT are reused unless --force: a log with its summary, made by the same
configuration (trainer arguments, seed, link, data size: the key in <run>.key), so a run
interrupted, or whose arm changed, runs again and nothing else does. --no-run builds the
table and plots from the runs that are complete, marking the rows that lack seeds. The
slow-link rows need root (network namespaces, tc); without it they say so and are left out."""

import argparse
import os
import subprocess
import sys

from arms import ARMS, BEGIN, END, HERE, README, ROOT, SCALES
from runner import cached, can_shape_links, execute, plan_run, run_name, schedule
from verdicts import Table, build_rows, markdown
from plots import plots


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="full")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", nargs="*", default=None, help="arm names starting with these prefixes")
    ap.add_argument("--seeds", type=int, default=None, help="run at most this many seeds of each arm")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--keep-going", action="store_true", help="a failed run is reported, the others go on")
    ap.add_argument("--no-run", action="store_true", help="only build the table and plots from finished runs")
    ap.add_argument("--list", action="store_true", help="print the runs still to do, in order, and stop")
    ap.add_argument("--readme", default=README)
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--train", default=os.path.join(ROOT, "build", "examples", "transformer", "gpt_train"))
    ap.add_argument("--data", default=None, help="text file (default: the King James Bible, as scripts/main.sh)")
    a = ap.parse_args()
    out = a.out or os.path.join(ROOT, "build", f"experiments-{a.scale}")
    os.makedirs(out, exist_ok=True)
    if not a.no_run and not os.access(a.train, os.X_OK):
        sys.exit(f"run.py: {a.train} is not built")
    data = a.data or os.path.join(out, "kjv.txt")
    if not a.data and not os.path.exists(data):
        with open(data, "w") as f:
            subprocess.run(["bible", "-f", "gen1:1-rev22:21"], stdout=f, check=True)
    os.environ["EXPERIMENTS_DATA"] = os.path.abspath(data)
    have_links = can_shape_links()
    if not have_links:
        print("run.py: no root or no network namespaces here: the slow-link rows are left out", flush=True)
    arms = [x for x in ARMS.values() if have_links or not x.link]
    selected = [x for x in arms if a.only is None or any(x.name.startswith(p) for p in a.only)]
    order = [(x, k) for x, k in schedule(a.scale, selected) if a.seeds is None or x.tera or k < a.seeds]
    if a.list:
        todo = [run_name(x, k, a.scale) for x, k in order
                if a.force or not cached(out, *[plan_run(x, k, a.scale, a.train, out)[i] for i in (0, 3)])]
        print("\n".join(todo) + f"\n{len(todo)} runs to do")
        return
    failed = []
    if not a.no_run:
        for x, k in order:
            if execute(x, k, a.scale, a.train, out, a.force) is None:
                if not a.keep_going:
                    sys.exit(f"run.py: {run_name(x, k, a.scale)} failed")
                failed.append(run_name(x, k, a.scale))
    # The table takes every finished run of the current configuration, run now or before.
    results = {}
    for x in arms:
        for k in range(SCALES[a.scale]["rounds"] if x.tera else len(SCALES[a.scale]["seeds"])):
            name, _, _, key = plan_run(x, k, a.scale, a.train, out)
            r = cached(out, name, key)
            if r:
                results.setdefault(x.name, {})[k] = r
    t = Table(results, a.scale)
    rows = build_rows(results, a.scale, have_links)
    text = markdown(rows, a.scale)
    print(text)
    # The README's plots live beside it; other runs keep theirs with their logs.
    plot_dir = out if a.no_readme else os.path.join(HERE, "..", "images", "experiments")
    os.makedirs(plot_dir, exist_ok=True)
    written = plots(t, plot_dir)
    for p in written:
        print(f"plot: {p}")
    if not a.no_readme:
        rel = os.path.relpath(plot_dir, os.path.dirname(os.path.abspath(a.readme)))
        text += "\n\n" + " ".join(f"![{os.path.basename(p)[:-4]}]({rel}/{os.path.basename(p)})" for p in written)
        with open(a.readme) as f:
            readme = f.read()
        if BEGIN not in readme or END not in readme:
            sys.exit(f"run.py: {a.readme} has no {BEGIN} ... {END} section")
        head, rest = readme.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(a.readme, "w") as f:
            f.write(head + BEGIN + "\n" + text + "\n" + END + tail)
        print(f"run.py: wrote the table into {a.readme}")
    if failed:
        sys.exit(f"run.py: {len(failed)} runs failed: {' '.join(failed)}")


if __name__ == "__main__":
    main()
