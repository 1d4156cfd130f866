#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Training speed of one model and global batch under several layouts of the same ranks,
side by side in one run: each round runs every layout once (the order rotating from round
to round), and the table gives the median tokens/s over rounds (each run's median over its
steps after the first two), the bytes each site sent per step (all ranks together) and, for
pipelines, the bubble of one traced step. Also keeps the Chrome trace and the timeline PNG
of the last round's run of the first pipeline layout.

Usage: layouts.py TEXT [--rounds N] [--steps N] [--out DIR]   (gpt_train from $GPT_TRAIN or
build/examples/transformer/gpt_train)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.environ.get("GPT_TRAIN", os.path.join(HERE, "../../../build/examples/transformer/gpt_train"))
MODEL = ["--layers", "4", "--channels", "128", "--heads", "4", "--max-seq", "128", "--seq", "128", "--batch", "4"]
GLOBAL_MICROBATCHES = 8  # per step, over every data-parallel rank
LAYOUTS = [  # name, ranks, flags (micro-batches follow from the data-parallel ranks)
    ("dp4", 4, ["--dp", "4"]),
    ("tp4", 4, ["--tp", "4"]),
    ("tp4 sp", 4, ["--tp", "4", "--sp"]),
    ("pp4 1F1B", 4, ["--pp", "4", "--schedule", "1f1b"]),
    ("pp4 GPipe", 4, ["--pp", "4", "--schedule", "gpipe"]),
    ("tp2 x pp2 1F1B", 4, ["--tp", "2", "--pp", "2", "--schedule", "1f1b"]),
    ("1 rank, 2 threads", 1, ["--threads", "2"]),
]
SITES = ["tp.fwd", "tp.bwd", "tp.grad", "pp.fwd", "pp.bwd", "dp.grad", "emb.sync"]


def run(text, ranks, flags, steps, trace, log):
    dp = int(flags[flags.index("--dp") + 1]) if "--dp" in flags else 1
    cmd = [TRAIN, "--data", text, *MODEL, "--ranks", str(ranks), "--accum", str(GLOBAL_MICROBATCHES // dp),
           "--steps", str(steps), "--val-every", "0", "--val-seqs", "8", "--no-progress", "--log", log,
           "--trace", trace, "--trace-step", str(steps // 2), *flags]
    env = dict(os.environ, OMP_NUM_THREADS="2" if ranks == 1 else "1")
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"layouts.py: {' '.join(cmd)} failed:\n{proc.stdout}")
    with open(log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    steps_ = [r for r in records if r["type"] == "step"][2:]
    summary = next(r for r in records if r["type"] == "summary")
    per_step = {s: statistics.median(r["sites"][s]["raw_bytes"] for r in steps_) for s in SITES}
    return statistics.median(r["tokens_per_s"] for r in steps_), per_step, summary.get("bubbles", [])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("text")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", default="layouts-out")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    speed = {name: [] for name, _, _ in LAYOUTS}
    bytes_, bubbles = {}, {}
    for rnd in range(a.rounds):
        order = LAYOUTS[rnd % len(LAYOUTS):] + LAYOUTS[:rnd % len(LAYOUTS)]
        for name, ranks, flags in order:
            tag = name.replace(" ", "_")
            tok, per_step, bub = run(a.text, ranks, flags, a.steps, os.path.join(a.out, f"{tag}.trace.json"),
                                     os.path.join(a.out, f"{tag}.jsonl"))
            speed[name].append(tok)
            bytes_[name], bubbles[name] = per_step, bub
            print(f"round {rnd}: {name}: {tok:.0f} tokens/s", flush=True)
    tokens = GLOBAL_MICROBATCHES * int(MODEL[MODEL.index("--batch") + 1]) * int(MODEL[MODEL.index("--seq") + 1])
    print(f"\nmodel {' '.join(MODEL)}, {tokens} tokens per step ({GLOBAL_MICROBATCHES} micro-batches), "
          f"{a.steps} steps per run, {a.rounds} rounds\n")
    print("| layout | tokens/s (median) | runs | " + " | ".join(f"{s} MB/step" for s in SITES) + " | bubble |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in SITES) + " | --- |")
    for name, _, _ in LAYOUTS:
        b = bubbles[name]
        bub = (f"{b[0]['measured']:.2f} measured, {b[0]['replayed']:.2f} replayed, {b[0]['theory']:.2f} theory"
               if b else "")
        runs = ", ".join(f"{x:.0f}" for x in speed[name])
        cells = " | ".join(f"{bytes_[name][s] / 1e6:.2f}" if bytes_[name][s] else "" for s in SITES)
        print(f"| {name} | {statistics.median(speed[name]):.0f} | {runs} | {cells} | {bub} |")
    first = LAYOUTS[3][0].replace(" ", "_")
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "../scripts/plot.py"), "--timeline",
                    os.path.join(a.out, f"{first}.trace.json"), "--out", a.out, "--title",
                    f"{LAYOUTS[3][0]}, {GLOBAL_MICROBATCHES} micro-batches: one step"], check=True)


if __name__ == "__main__":
    main()
