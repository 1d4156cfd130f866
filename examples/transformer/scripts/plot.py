#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turns gpt_train JSONL logs into PNG plots: the training loss of every run on one chart,
their validation loss, and the bytes each communication site sent (raw against wire) at the
end of each run. Usage: plot.py --out DIR LOG.jsonl [LOG.jsonl ...]  (labels: the file
names; LABEL=LOG.jsonl to name a run). With --timeline TRACE.json (a Chrome trace from
gpt_train --trace) it also draws DIR/timeline.png, a Gantt chart of every rank's compute,
communication and codec spans: plot.py --timeline TRACE.json --out DIR [--title TEXT]
[LOG.jsonl ...]. Needs Debian's python3-matplotlib."""
import argparse
import json
import os
import sys
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

# A fixed colour per site, so that every chart matches (forward is blue, backward orange).
SITE_COLOURS = {
    "tp.fwd": "#1b9e77", "tp.bwd": "#66c2a5", "tp.grad": "#00441b",
    "pp.fwd": "#6a51a3", "pp.bwd": "#9e9ac8",
    "dp.grad": "#d62728", "dp.param": "#e377c2",
    "emb.sync": "#bcbd22", "stat": "#8c564b", "eval": "#17becf",
}
OTHER_SITES = ["#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
KIND_COLOURS = {"forward": plt.cm.Blues, "backward": plt.cm.Oranges, "update": "#9e9e9e",
                "codec": "black"}
# Lanes inside a rank's band (one unit high): (top, height) of compute, communication, codec,
# asynchronous communication (from enqueue until the wait for it returned).
LANES = [(0.06, 0.36), (0.46, 0.16), (0.66, 0.10), (0.80, 0.12)]
LANE_NAMES = ["compute", "comm", "codec", "async"]
LANE_OF = {"forward": 0, "backward": 0, "update": 0, "comm": 1, "codec": 2, "async": 3}


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


def plot_logs(out, specs):
    runs = []
    for spec in specs:
        label, _, path = spec.rpartition("=")
        runs.append((label or os.path.splitext(os.path.basename(path))[0], load(path)))

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, (steps, _, _) in runs:
        ax.plot([s for s, _ in steps], [l for _, l in steps], label=label, linewidth=1)
    ax.set(xlabel="step", ylabel="training loss (nats/byte)", title="Training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.savefig(os.path.join(out, "loss.png"), dpi=120, bbox_inches="tight")

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, (_, vals, _) in runs:
        if vals:
            ax.plot([s for s, _ in vals], [l for _, l in vals], marker="o", label=label)
    ax.set(xlabel="step", ylabel="validation loss (nats/byte)", title="Validation loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.savefig(os.path.join(out, "val_loss.png"), dpi=120, bbox_inches="tight")

    fig, ax = plt.subplots(figsize=(8, 5))
    # Only the sites that sent bytes in some run: the others would crowd the axis with zeros.
    sites = sorted({s for _, (_, _, summ) in runs for s, v in summ.get("sites", {}).items()
                    if v.get("raw_bytes", 0) or v.get("wire_bytes", 0)})
    width = 0.8 / max(1, 2 * len(runs))
    for i, (label, (_, _, summ)) in enumerate(runs):
        raw = [summ.get("sites", {}).get(s, {}).get("raw_bytes", 0) / 1e6 for s in sites]
        wire = [summ.get("sites", {}).get(s, {}).get("wire_bytes", 0) / 1e6 for s in sites]
        xs = range(len(sites))
        ax.bar([x + (2 * i) * width for x in xs], raw, width, label=f"{label} raw")
        ax.bar([x + (2 * i + 1) * width for x in xs], wire, width, label=f"{label} wire")
    ax.set_xticks([x + width * (len(runs) - 0.5) for x in range(len(sites))], sites, rotation=30, ha="right")
    # The run summary's site totals are summed over every rank of the grid.
    ax.set(ylabel="MB sent, all ranks together", title="Bytes per communication site")
    ax.legend()
    fig.savefig(os.path.join(out, "bytes.png"), dpi=120, bbox_inches="tight")
    plt.close("all")
    return [os.path.join(out, n) for n in ("loss.png", "val_loss.png", "bytes.png")]


def load_trace(path):
    """Returns ({pid: process name}, [span dict]) with ts and dur in milliseconds."""
    try:
        with open(path) as f:
            trace = json.load(f)
    except OSError as e:
        sys.exit(f"plot.py: cannot read {path} ({e.strerror})")
    except json.JSONDecodeError as e:
        sys.exit(f"plot.py: {path}: not JSON ({e})")
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        sys.exit(f"plot.py: {path} has no traceEvents list (not a Chrome trace?)")
    names, spans = {}, []
    for n, e in enumerate(events):
        if not isinstance(e, dict):
            continue
        if e.get("ph") == "M" and e.get("name") == "process_name":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            names[e.get("pid")] = str(args.get("name", ""))
        elif e.get("ph") == "X":
            ts, dur = e.get("ts"), e.get("dur", 0)
            if not all(isinstance(v, (int, float)) for v in (ts, dur)):
                sys.exit(f"plot.py: {path}: traceEvents[{n}] has no numeric ts and dur")
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            spans.append({"pid": e.get("pid", 0), "tid": e.get("tid", 0),
                          "name": str(e.get("name", "")), "cat": e.get("cat", ""),
                          "ts": ts / 1e3, "dur": dur / 1e3, "step": args.get("step"),
                          "mb": args.get("microbatch", -1)})
    if not spans:
        sys.exit(f"plot.py: {path} has no \"X\" (complete) spans to draw")
    return names, spans


def site_colour(site):
    return SITE_COLOURS.get(site) or OTHER_SITES[zlib.crc32(site.encode()) % len(OTHER_SITES)]


def span_colour(s):
    """Face colour and, for forward and backward, the text colour of the micro-batch label."""
    cat = s["cat"]
    if cat in ("forward", "backward"):
        shade = 0.45 + 0.1 * (s["mb"] % 4) if isinstance(s["mb"], int) and s["mb"] >= 0 else 0.6
        return KIND_COLOURS[cat](shade), "white" if shade >= 0.6 else "black"
    if cat in ("comm", "async"):
        return site_colour(s["name"].split(" ")[0]), None
    return KIND_COLOURS.get(cat, "#d0d0d0"), None


def plot_timeline(path, out, title):
    names, spans = load_trace(path)
    pids = sorted({s["pid"] for s in spans} | set(names))
    row = {p: i for i, p in enumerate(pids)}
    t0 = min(s["ts"] for s in spans)
    t1 = max(s["ts"] + s["dur"] for s in spans) - t0
    fig, ax = plt.subplots(figsize=(14, 1.3 + 0.85 * len(pids)), dpi=120)
    ax.set_xlim(-0.01 * t1, t1 * 1.01 or 1)
    ax.set_ylim(len(pids), 0)  # rank 0 on top
    bars = {}  # (rank row, lane) -> ([(x, width)], [colour])
    labels = []
    for s in spans:
        lane = LANE_OF.get(s["cat"], s["tid"] if s["tid"] in (0, 1, 2) else 0)
        face, text = span_colour(s)
        xs, cs = bars.setdefault((row[s["pid"]], lane), ([], []))
        xs.append((s["ts"] - t0, s["dur"]))
        cs.append(face)
        if text and isinstance(s["mb"], int) and s["mb"] >= 0:
            labels.append((s["ts"] - t0, s["dur"], row[s["pid"]], str(s["mb"]), text))
    for (r, lane), (xs, cs) in bars.items():
        top, height = LANES[lane]
        # White gaps between compute spans; thin comm and codec spans would vanish behind them.
        ax.broken_barh(xs, (r + top, height), facecolors=cs, edgecolor="white",
                       linewidth=0.3 if lane == 0 else 0)
    # Micro-batch numbers where the box is wide enough (measured in pixels at the output dpi).
    px_per_ms = (ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0])
    for x, w, r, text, colour in labels:
        if w * px_per_ms >= (0.6 * 7 * len(text) + 3) * fig.dpi / 72:  # 7 pt digits
            top, height = LANES[0]
            ax.text(x + w / 2, r + top + height / 2, text, ha="center", va="center",
                    fontsize=7, color=colour)
    # A thin line where each step starts (its earliest span).
    starts = {}
    for s in spans:
        if s["step"] is not None:
            starts[s["step"]] = min(starts.get(s["step"], s["ts"]), s["ts"])
    top_of_axes = blended_transform_factory(ax.transData, ax.transAxes)
    for step, ts in sorted(starts.items(), key=lambda kv: kv[1]):
        ax.axvline(ts - t0, color="black", linewidth=0.6, linestyle="--", alpha=0.6)
        ax.text(ts - t0, 1.005, f"step {step}", transform=top_of_axes, fontsize=7,
                ha="left", va="bottom")
    ax.set_yticks([i + 0.5 for i in range(len(pids))],
                  [names.get(p) or f"rank {p}" for p in pids])
    right = blended_transform_factory(ax.transAxes, ax.transData)
    for i in range(len(pids)):
        ax.axhline(i, color="#808080", linewidth=0.5)
        for (top, height), lane in zip(LANES, LANE_NAMES):
            ax.text(1.003, i + top + height / 2, lane, transform=right, fontsize=6,
                    va="center", color="#505050")
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("time since the first span (ms)")
    ax.set_title(title or f"Timeline: {os.path.basename(path)}", pad=14)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    cats = {s["cat"] for s in spans}
    handles = [Patch(color=KIND_COLOURS["forward"](0.6), label="forward"),
               Patch(color=KIND_COLOURS["backward"](0.6), label="backward"),
               Patch(color=KIND_COLOURS["update"], label="update")]
    sites = {s["name"].split(" ")[0] for s in spans if s["cat"] == "comm"}
    ordered = [x for x in SITE_COLOURS if x in sites] + sorted(sites - set(SITE_COLOURS))
    handles += [Patch(color=site_colour(x), label=x) for x in ordered]
    if "codec" in cats:
        handles.append(Patch(color="black", label="codec"))
    below = 0.5 / (ax.get_position().height * fig.get_figheight())  # half an inch down
    ncol = len(handles) if len(handles) <= 14 else (len(handles) + 1) // 2
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -below), ncol=ncol,
              fontsize=8, frameon=False)
    name = os.path.join(out, "timeline.png")
    fig.savefig(name, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [name]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the PNG files")
    ap.add_argument("--timeline", metavar="TRACE.json",
                    help="Chrome trace from gpt_train --trace: draw DIR/timeline.png")
    ap.add_argument("--title", help="title of the timeline chart (default: the file name)")
    ap.add_argument("logs", nargs="*", metavar="[LABEL=]LOG.jsonl")
    a = ap.parse_args()
    if not a.logs and not a.timeline:
        ap.error("give LOG.jsonl files, --timeline TRACE.json, or both")
    os.makedirs(a.out, exist_ok=True)
    written = plot_logs(a.out, a.logs) if a.logs else []
    if a.timeline:
        written += plot_timeline(a.timeline, a.out, a.title)
    for name in written:
        print(name)


if __name__ == "__main__":
    main()
