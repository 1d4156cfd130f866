#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turns gpt_train JSONL logs into PNG plots: the training loss of every run on one chart,
their validation loss, and the bytes each communication site sent (raw against wire) at the
end of each run. Usage: plot.py --out DIR LOG.jsonl [LOG.jsonl ...]  (labels: the file
names; LABEL=LOG.jsonl to name a run). Needs Debian's python3-matplotlib."""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    steps, vals, summary, last = [], [], None, None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot.py: {path}:{n}: not JSON ({e})")
            kind = r.get("type")
            if kind == "step":
                steps.append((r["step"], r["loss"]))
                last = r
            elif kind == "val":
                vals.append((r["step"], r["val_loss"]))
            elif kind == "summary":
                summary = r
    if not steps:
        sys.exit(f"plot.py: {path} has no step records")
    return steps, vals, summary or last


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the PNG files")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    runs = []
    for spec in a.logs:
        label, _, path = spec.rpartition("=")
        runs.append((label or os.path.splitext(os.path.basename(path))[0], load(path)))

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, (steps, _, _) in runs:
        ax.plot([s for s, _ in steps], [l for _, l in steps], label=label, linewidth=1)
    ax.set(xlabel="step", ylabel="training loss (nats/byte)", title="Training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.savefig(os.path.join(a.out, "loss.png"), dpi=120, bbox_inches="tight")

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, (_, vals, _) in runs:
        if vals:
            ax.plot([s for s, _ in vals], [l for _, l in vals], marker="o", label=label)
    ax.set(xlabel="step", ylabel="validation loss (nats/byte)", title="Validation loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.savefig(os.path.join(a.out, "val_loss.png"), dpi=120, bbox_inches="tight")

    fig, ax = plt.subplots(figsize=(8, 5))
    sites = sorted({s for _, (_, _, summ) in runs for s in summ.get("sites", {})})
    width = 0.8 / max(1, 2 * len(runs))
    for i, (label, (_, _, summ)) in enumerate(runs):
        raw = [summ["sites"].get(s, {}).get("raw_bytes", 0) / 1e6 for s in sites]
        wire = [summ["sites"].get(s, {}).get("wire_bytes", 0) / 1e6 for s in sites]
        xs = range(len(sites))
        ax.bar([x + (2 * i) * width for x in xs], raw, width, label=f"{label} raw")
        ax.bar([x + (2 * i + 1) * width for x in xs], wire, width, label=f"{label} wire")
    ax.set_xticks([x + width * (len(runs) - 0.5) for x in range(len(sites))], sites)
    ax.set(ylabel="MB sent by rank 0", title="Bytes per communication site")
    ax.legend()
    fig.savefig(os.path.join(a.out, "bytes.png"), dpi=120, bbox_inches="tight")
    for name in ("loss.png", "val_loss.png", "bytes.png"):
        print(os.path.join(a.out, name))


if __name__ == "__main__":
    main()
