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
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
README = os.path.join(HERE, "..", "README.md")
BEGIN, END = "<!-- experiments-table -->", "<!-- /experiments-table -->"

# The model, data and budget of every run. The global batch is 4 micro-batches of `batch`
# sequences per step in every layout (accum follows from the data-parallel ranks).
SCALES = {
    "full": dict(model=["--layers", "4", "--channels", "128", "--heads", "4", "--max-seq", "128"],
                 seq=128, batch=4, steps=300, val_every=50, val_seqs=256, lr="2e-3", warmup=30,
                 seeds=[1337, 7, 11, 23], need=3, rounds=5),
    "tiny": dict(model=["--layers", "4", "--channels", "32", "--heads", "4", "--max-seq", "16"],
                 seq=16, batch=2, steps=6, val_every=2, val_seqs=4, lr="3e-3", warmup=1,
                 seeds=[1337, 7], need=2, rounds=2),
}
# The statistics. A row's metric is the mean validation loss of a run's last LAST_VALS
# validations; a comparison is the mean over seeds of the paired difference (arm minus
# the arm it is compared with, at the same seed) with its 95 % Student-t interval.
LAST_VALS = 3
MARGIN = 0.01  # nats per byte: "≈" when the whole interval lies within ±MARGIN
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}

# Layouts: the trainer's grid flags, ranks, and what differs from the scale.
#   batch_div  micro-batches of batch/batch_div sequences, batch_div times as many per step
#   steps, layers  a longer run, a deeper model (full scale; tiny scales them down)
LAYOUTS = {
    "tp2pp2": dict(args=["--tp", "2", "--pp", "2", "--accum", "4"]),
    "pp4": dict(args=["--pp", "4", "--accum", "4"]),
    "dp4": dict(args=["--dp", "4", "--accum", "1"]),
    "dp4zero": dict(args=["--dp", "4", "--accum", "1", "--zero"]),
    "pp2dp2": dict(args=["--pp", "2", "--dp", "2", "--accum", "2"]),
    # Optimus-CC's epilogue regime: 16 micro-batches of one sequence (the same tokens).
    "pp4m16": dict(args=["--pp", "4"], batch_div=4),
    # Laskin et al.'s long horizon: 8 blocks over 4 stages, 1,000 steps.
    "pp4long": dict(args=["--pp", "4", "--accum", "4"], steps={"full": 1000, "tiny": 10}, layers=8),
    # TeraPipe with one core per stage: one sequence per step (tera=True runs only).
    "pp2": dict(args=["--pp", "2", "--accum", "1"], ranks=2),
}

# TeraPipe's runs: one long sequence per step, a GPipe pipeline; their measure is the step
# time, so they are rounds (interleaved, one seed), not seeds.
TERA = {"full": dict(seq=1024, steps=30, granularity=64), "tiny": dict(seq=64, steps=4, granularity=8)}

LOCO_BETA, LOCO_RESET = 0.8, 100  # the reset falls within the run (1 call per step)
LOCO = f"feedback=loco:beta={LOCO_BETA}:reset={LOCO_RESET}"
MIDRISE = "int2_midrise"  # 2 bits with four levels, ±0.5 and ±1.5 scales (Bian et al.'s 2-bit)


class Arm:
    def __init__(self, name, layout, flags=(), link=None, tera=False, baseline=None):
        self.name, self.layout, self.flags, self.link, self.tera = name, layout, list(flags), link, tera
        self.baseline = baseline or (None if name.startswith("base.") or tera or link else f"base.{layout}")

    def describe(self):
        text = " ".join(f for f in self.flags if f not in ERRORS) or "uncompressed"
        return f"{self.layout}: {text}" + (f" over {self.link} links" if self.link else "")


def c(spec):
    return ["--compress", spec]


ARMS = {}


def add(arm):
    assert arm.name not in ARMS, arm.name
    ARMS[arm.name] = arm


for lay in ("tp2pp2", "pp4", "dp4", "dp4zero", "pp2dp2", "pp4m16", "pp4long"):
    add(Arm(f"base.{lay}", lay))
# LoCo: 4- and 2-bit data-parallel gradients at scale blocks of 128, 1,024 and 65,536
# elements (the last about one weight matrix: the gradients travel as one flat buffer),
# uncompensated, with error feedback and with LoCo; ZeRO-1 at the default block.
LOCO_BLOCKS = (128, 1024, 65536)
for bits in (4, 2):
    for block in LOCO_BLOCKS:
        for fb, extra in (("none", ""), ("ef", ":feedback=ef"), ("loco", ":" + LOCO)):
            add(Arm(f"loco.int{bits}.b{block}.{fb}", "dp4", c(f"dp.grad=int{bits}:block={block}{extra}")))
for fb, extra in (("none", ""), ("ef", ":feedback=ef"), ("loco", ":" + LOCO)):
    add(Arm(f"loco.zero.{fb}", "dp4zero", c(f"dp.grad=int4{extra}")))
# LoCo's ingredients where it loses to error feedback (one scale per 65,536): without the
# reset, then also without the moving average (beta 0: error feedback whose error is kept
# at 8 bits), so each step from LoCo to error feedback is one comparison.
for bits in (4, 2):
    for name, extra in (("noreset", f"beta={LOCO_BETA}:reset=0"), ("beta0", "beta=0:reset=0")):
        add(Arm(f"loco.int{bits}.b65536.{name}", "dp4", c(f"dp.grad=int{bits}:block=65536:feedback=loco:{extra}")))
# Bian et al.: the row-parallel outputs (tp.fwd) of tp2 x pp2 at 8, 4 and 2 bits, scaled
# in blocks of 128 along a row or per channel (over the tokens, as their code); 2 bits
# with three levels (int2) and four (int2_midrise); sparsifiers at int2's bytes; the
# learned autoencoder; the layers compressed; pipeline activations.
# Their errors on the real tensors are sampled every 50 steps (codec_error records).
ERRORS = ["--codec-error-every", "50"]
for codec in ("int8", "int4", "int2", MIDRISE):
    add(Arm(f"bian.tp.{codec}", "tp2pp2", c(f"tp.fwd={codec}") + ERRORS))
    add(Arm(f"bian.tp.chan.{codec}", "tp2pp2", c(f"tp.fwd={codec}:scale=channel") + ERRORS))
# Equal bytes to int2 (2.25 bits per element): top-k keeps values and index gaps (about 5
# bytes each), random-k values only.
add(Arm("bian.tp.topk", "tp2pp2", c("tp.fwd=topk:keep=0.056") + ERRORS))
add(Arm("bian.tp.randk", "tp2pp2", c("tp.fwd=randk:keep=0.07") + ERRORS))
add(Arm("bian.tp.int2.later", "tp2pp2", c("tp.fwd=int2:layers=2-3")))
add(Arm("bian.tp.int2.earlier", "tp2pp2", c("tp.fwd=int2:layers=0-1")))
# The learned linear autoencoder: 8 of 128 channels, about int2's bytes.
add(Arm("bian.tp.ae", "tp2pp2", ["--autoencoder", "8"]))
for bits in (8, 4, 2):
    add(Arm(f"bian.pp.int{bits}", "pp4", c(f"pp.fwd=int{bits}")))
# 4-bit floats (MXFP4: e2m1 with a power-of-two scale per 32; NVFP4: e2m1 with an e4m3
# scale per 16 and a per-tensor one) against int4 (blocks of 128) at about the same bytes
# (4.25, 4.5 and 4.25 bits an element).
for fmt in ("mxfp4", "nvfp4"):
    for fb, extra in (("none", ""), ("ef", ":feedback=ef"), ("loco", ":" + LOCO)):
        add(Arm(f"fp4.{fmt}.{fb}", "dp4", c(f"dp.grad={fmt}{extra}")))
    add(Arm(f"fp4.tp.{fmt}", "tp2pp2", c(f"tp.fwd={fmt}") + ERRORS))
# Optimus-CC: PowerSGD on the pipeline's backward traffic at ranks 4-32, without and with
# lazy error propagation (error feedback); the warm start without error feedback;
# epilogue-only (the cool-down sends) at 16 micro-batches; selective-stage compression of
# data-parallel gradients at ranks 16 and 32 after an uncompressed tenth of the steps;
# the fused embedding synchronisation.
OPTIMUS_RANKS = (4, 8, 16, 32)
# With error feedback the trainer logs, every 50 steps, the energy PowerSGD captured and
# ||memory|| / ||G|| per boundary (codec_energy records).
for r in OPTIMUS_RANKS:
    add(Arm(f"optimus.bwd.r{r}.plain", "pp4", c(f"pp.bwd=powersgd:rank={r}")))
    add(Arm(f"optimus.bwd.r{r}.lep", "pp4", c(f"pp.bwd=powersgd:rank={r}:feedback=ef") + ERRORS))
add(Arm("optimus.bwd.r4.warm", "pp4", c("pp.bwd=powersgd:rank=4:warmstart=on")))
add(Arm("optimus.epi.lep", "pp4m16", c("pp.bwd=powersgd:rank=4:feedback=ef:phases=cooldown") + ERRORS))
add(Arm("optimus.epi.plain", "pp4m16", c("pp.bwd=powersgd:rank=4:phases=cooldown")))
for r in (16, 32):
    add(Arm(f"optimus.dp.stage0.r{r}", "pp2dp2", c(f"dp.grad=powersgd:rank={r}:feedback=ef:stages=0:warmup=WARMUP")))
add(Arm("optimus.dp.all.r16", "pp2dp2", c("dp.grad=powersgd:rank=16:feedback=ef:warmup=WARMUP")))
add(Arm("optimus.embfused", "pp2dp2", ["--fuse-emb-sync"]))
# Laskin et al.: local updates (chunked; overlapping) instead of backpropagation across
# stages, over the long horizon.
add(Arm("laskin.chunked", "pp4long", ["--schedule", "local"]))
add(Arm("laskin.overlap", "pp4long", ["--schedule", "local-overlap"]))
# TeraPipe at pp2: no slicing, 8 uniform slices, planned slices.
add(Arm("tera2.whole", "pp2", ["--slices", "1"], tera=True))
add(Arm("tera2.uniform", "pp2", ["--slices", "8"], tera=True))
add(Arm("tera2.plan", "pp2", ["--slices", "plan"], tera=True))
# Slow links: the uncompressed baseline against compressed gradients, data-parallel.
SLOW_CANDIDATES = ["dp.grad=int4:" + LOCO, "dp.grad=powersgd:rank=4:feedback=ef"]
for rate in ("100mbit", "1gbit"):
    add(Arm(f"slow.{rate}.base", "dp4", link=rate))
    for i, spec in enumerate(SLOW_CANDIDATES):
        add(Arm(f"slow.{rate}.c{i}", "dp4", c(spec), link=rate))

# The order arms are run in: a group at a time to the scale's seeds, most-cited first, so
# a sitting that stops early leaves whole groups decided.
GROUPS = [
    ("loco", ["base.dp4", "base.dp4zero", "loco."]),
    ("bian", ["base.tp2pp2", "base.pp4", "bian."]),
    ("optimus", ["optimus.", "base.pp4m16", "base.pp2dp2"]),
    ("fp4", ["fp4."]),
    ("tera", ["tera2."]),
    ("laskin", ["base.pp4long", "laskin."]),
    ("slow", ["slow."]),
]


def group_of(name):
    """An arm's group: a prefix ending in '.' takes every arm under it, others one arm."""
    for g, prefixes in GROUPS:
        if any(name == p or (p.endswith(".") and name.startswith(p)) for p in prefixes):
            return g
    raise KeyError(name)


def layout_value(layout, key, scale, default):
    v = LAYOUTS[layout].get(key, default)
    return v[scale] if isinstance(v, dict) else v


def command(arm, scale, seed, train, log):
    s = dict(SCALES[scale])
    lay = LAYOUTS[arm.layout]
    grid = list(lay["args"])
    model = list(s["model"])
    steps = layout_value(arm.layout, "steps", scale, s["steps"])
    batch, accum = s["batch"], None
    if "batch_div" in lay:
        batch, accum = max(1, s["batch"] // lay["batch_div"]), 4 * lay["batch_div"]
        grid += ["--accum", str(accum)]
    if "layers" in lay:
        model[model.index("--layers") + 1] = str(lay["layers"])
    seq, every, windows = s["seq"], s["val_every"], s["val_seqs"]
    if arm.tera:
        # Their measure is the step time: one small validation at the end.
        t = TERA[scale]
        seq, batch, steps, every, windows = t["seq"], 1, t["steps"], t["steps"], min(8, windows)
        model[model.index("--max-seq") + 1] = str(seq)
        grid += ["--schedule", "gpipe", "--slice-granularity", str(t["granularity"])]
    if arm.link:
        every = max(1, every // 2)  # time-to-loss rows validate twice as often
    flags = [f.replace("WARMUP", str(max(1, steps // 10))) for f in arm.flags]
    return [train, "--data", data_path(), *model, "--seq", str(seq), "--batch", str(batch), "--steps", str(steps),
            "--val-every", str(every), "--val-seqs", str(windows), "--lr", s["lr"], "--warmup",
            str(s["warmup"]), "--seed", str(seed), "--no-progress", *grid, *flags] + ([] if arm.link else ["--log", log])


def data_path():
    return os.environ["EXPERIMENTS_DATA"]


def can_shape_links():
    if os.geteuid() != 0:
        return False
    probe = f"cclexp-{os.getpid()}"
    ok = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ok


def load(log):
    out = {"steps": [], "vals": [], "summary": None, "codec_error": [], "codec_energy": []}
    if not os.path.exists(log):
        return out
    with open(log) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            kind = r["type"]
            if kind == "step":
                out["steps"].append(r)
            elif kind == "val":
                out["vals"].append(r)
            elif kind == "summary":
                out["summary"] = r
            elif kind in ("codec_error", "codec_energy"):
                out[kind].append(r)
    return out


def run_key(cmd, log):
    """What a run's result depends on: its command (the trainer's path and the log's aside),
    seed and link included, and the data file's size. A log is reused only under the same key."""
    argv = [a for a in cmd[1:] if a != log]
    data = os.environ.get("EXPERIMENTS_DATA", "")
    size = os.path.getsize(data) if data and os.path.exists(data) else 0
    return hashlib.sha1(json.dumps([os.path.basename(cmd[0]), argv, size]).encode()).hexdigest()


def run_name(arm, k, scale):
    """A run's file name: the arm and its seed, or for TeraPipe's timing rounds its round."""
    return f"{arm.name}.r{k}" if arm.tera else f"{arm.name}.s{SCALES[scale]['seeds'][k]}"


def cached(out, name, key):
    log, key_file = os.path.join(out, name + ".jsonl"), os.path.join(out, name + ".key")
    if not load(log)["summary"] or not os.path.exists(key_file):
        return None
    with open(key_file) as f:
        return load(log) if f.read().strip() == key else None


def plan_run(arm, k, scale, train, out):
    name = run_name(arm, k, scale)
    seed = SCALES[scale]["seeds"][0 if arm.tera else k]
    log = os.path.join(out, name + ".jsonl")
    if arm.link:
        cmd = [os.path.join(HERE, "slow_train.sh"), "4", arm.link, log] + command(arm, scale, seed, train, log)
        key = run_key([a for a in cmd if a != train], log)
    else:
        ranks = LAYOUTS[arm.layout].get("ranks", 4)
        cmd = command(arm, scale, seed, train, log) + ["--ranks", str(ranks)]
        key = run_key(cmd, log)
    return name, log, cmd, key


def execute(arm, k, scale, train, out, force):
    """Runs (or reuses) one run; None if it failed."""
    name, log, cmd, key = plan_run(arm, k, scale, train, out)
    if not force:
        hit = cached(out, name, key)
        if hit:
            return hit
    key_file = os.path.join(out, name + ".key")
    for stale in (log, key_file):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    print(f"run {name}: {' '.join(cmd[cmd.index('--seed'):] if not arm.link else cmd[:3])}", flush=True)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(out, name + ".out"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        print(f"run.py: {name} failed:\n{proc.stdout[-3000:]}", flush=True)
        return None
    with open(key_file, "w") as f:
        f.write(key + "\n")
    return load(log)


def schedule(scale, selected):
    """(arm, k) in the order they run: each group to `need` seeds (TeraPipe: its rounds),
    then every group's further seeds."""
    s = SCALES[scale]
    first, later = [], []
    for g, _ in GROUPS:
        arms = [a for a in selected if group_of(a.name) == g]
        for k in range(s["rounds"] if g == "tera" else len(s["seeds"])):
            for a in arms:
                (first if a.tera or k < s["need"] else later).append((a, k))
    return first + later


# ---- statistics ----

def metric(r):
    vals = r["vals"][-LAST_VALS:]
    return sum(v["val_loss"] for v in vals) / len(vals)


class Stat:
    """The mean of paired differences over n seeds and its 95 % interval's half-width."""

    def __init__(self, diffs):
        self.diffs = diffs
        self.n = len(diffs)
        self.mean = statistics.fmean(diffs) if diffs else float("nan")
        self.half = T95[self.n - 1] * statistics.stdev(diffs) / math.sqrt(self.n) if self.n >= 2 else float("inf")

    @property
    def lo(self):
        return self.mean - self.half

    @property
    def hi(self):
        return self.mean + self.half

    def text(self, digits=3):
        if self.n == 0:
            return "—"
        if self.n == 1:
            return f"{self.mean:+.{digits}f} (1 seed)"
        return f"{self.mean:+.{digits}f} ± {self.half:.{digits}f} ({self.n} seeds)"


def verdict(stat, need, margin=MARGIN):
    """'≈' when the interval lies within ±margin; else 'worse' or 'better' (a higher or lower
    loss than what it is compared with) when it excludes 0; else 'unresolved'."""
    if stat.n < need:
        return "incomplete"
    if -margin < stat.lo and stat.hi < margin:
        return "≈"
    if stat.lo > 0:
        return "worse"
    if stat.hi < 0:
        return "better"
    return "unresolved"


class Table:
    def __init__(self, results, scale):
        self.r = results  # arm -> {seed or round: log}
        self.scale = scale
        self.need = SCALES[scale]["need"]
        self.rows = []

    def seeds(self, arm):
        return self.r.get(arm, {})

    def paired(self, a, b, f=metric):
        ra, rb = self.seeds(a), self.seeds(b)
        return Stat([f(ra[s]) - f(rb[s]) for s in sorted(ra) if s in rb])

    def row(self, paper, claim, a, b, expect, sites, stat=None, verdict_text=None, evidence="", shown=None):
        """One comparison of arm a with arm b (b None: a reported alone). expect is the
        verdict the paper's finding predicts ('≈', 'worse', 'better'), or None to report."""
        stat = stat or (self.paired(a, b) if b else Stat([]))
        got = verdict_text or (verdict(stat, self.need) if b else "reported")
        n_min = min(len(self.seeds(a)), len(self.seeds(b)) if b else 99)
        if shown is not None:
            pass
        elif got == "incomplete":
            shown = f"incomplete ({n_min} of {self.need} seeds)"
        elif expect is None or got in ("reported", "untestable"):
            shown = got if got in ("reported", "untestable", "unresolved") else f"reported ({got})"
        else:
            shown = "yes" if got == expect else "unresolved" if got == "unresolved" else "no"
        versus = f"{ARMS[a].describe()}" + (f" vs {ARMS[b].describe() if b in ARMS else b}" if b else "")
        wires = self.wire_text(a, sites)
        errs = self.error_text(a)
        evidence = "; ".join(filter(None, (evidence, errs)))
        self.rows.append((paper, claim, versus, stat.text() if stat.n else "—", wires, got, shown, evidence))

    def errors(self, arm):
        """The arm's sampled codec errors (codec_error records: the error of each compressed
        allreduce's result against the exact one), per block, averaged over seeds:
        {layer: (relative L2 error, median per-element relative error)}."""
        by = {}
        for r in self.seeds(arm).values():
            for e in r["codec_error"]:
                by.setdefault(e["layer"], []).append((e["rel_l2"], e["median_rel"]))
        return {k: tuple(statistics.fmean(x[i] for x in v) for i in (0, 1)) for k, v in sorted(by.items())}

    def energy(self, arm):
        """PowerSGD's sampled captured energy and ||memory|| / ||G|| per sending stage
        (codec_energy records), averaged over seeds: {stage: (energy, memory ratio)}."""
        by = {}
        for r in self.seeds(arm).values():
            for e in r["codec_energy"]:
                by.setdefault(e["stage"], []).append((e["captured_energy"], e["memory_over_grad"]))
        return {k: tuple(statistics.fmean(x[i] for x in v) for i in (0, 1)) for k, v in sorted(by.items())}

    def error_text(self, arm):
        parts = []
        e = self.errors(arm)
        if e:
            l2 = statistics.fmean(v[0] for v in e.values())
            med = statistics.fmean(v[1] for v in e.values())
            parts.append(f"its results' error: {l2:.3f} relative L2, {med:.3f} median per element")
        g = self.energy(arm)
        if g:
            parts.append("per sending stage, captured energy / ‖memory‖÷‖G‖: " +
                         ", ".join(f"{s} {v[0]:.2f} / {v[1]:.2f}" for s, v in g.items()))
        return "; ".join(parts)

    def wire_text(self, arm, sites):
        runs = list(self.seeds(arm).values())
        if not runs or not runs[0]["summary"]:
            return ""
        parts = []
        for s in sites:
            site = runs[0]["summary"]["sites"].get(s)
            if site and site["raw_bytes"]:
                parts.append(f"{s} {site['wire_bytes'] / site['raw_bytes']:.3f}")
        return ", ".join(parts)


def time_to(r, target):
    """Seconds until a validation loss within 2 % of `target`, or None."""
    for v in r["vals"]:
        if v["val_loss"] <= target * 1.02:
            return v["elapsed_s"]
    return None


def build_rows(results, scale, have_links):
    t = Table(results, scale)
    B = "Bian et al."
    # ---- LoCo ----
    for bits in (4, 2):
        for block in LOCO_BLOCKS:
            p = f"loco.int{bits}.b{block}"
            where = f"int{bits}, blocks of {block}"
            t.row("LoCo", f"{where}: without compensation worse than uncompressed", f"{p}.none", "base.dp4", "worse",
                  ["dp.grad"])
            t.row("LoCo", f"{where}: error feedback better than none", f"{p}.ef", f"{p}.none", "better", ["dp.grad"])
            t.row("LoCo", f"{where}: LoCo ≈ uncompressed", f"{p}.loco", "base.dp4", "≈", ["dp.grad"])
            t.row("LoCo", f"{where}: LoCo better than error feedback", f"{p}.loco", f"{p}.ef", "better", ["dp.grad"])
    t.row("LoCo", "ZeRO-1, int4: without compensation worse", "loco.zero.none", "base.dp4zero", "worse", ["dp.grad"])
    t.row("LoCo", "ZeRO-1, int4: error feedback better than none", "loco.zero.ef", "loco.zero.none", "better",
          ["dp.grad"])
    t.row("LoCo", "ZeRO-1, int4: LoCo ≈ uncompressed", "loco.zero.loco", "base.dp4zero", "≈", ["dp.grad"])
    for bits in (4, 2):
        p = f"loco.int{bits}.b65536"
        where = f"int{bits}, blocks of 65536"
        t.row("LoCo", f"{where}: LoCo without its reset against with it (every {LOCO_RESET} steps)", f"{p}.noreset",
              f"{p}.loco", None, ["dp.grad"])
        t.row("LoCo", f"{where}: without the reset, the moving average (β {LOCO_BETA}) against none (β 0)",
              f"{p}.noreset", f"{p}.beta0", None, ["dp.grad"])
        t.row("LoCo", f"{where}: β 0 without reset (error feedback, its error kept at 8 bits) ≈ error feedback",
              f"{p}.beta0", f"{p}.ef", None, ["dp.grad"])
    # ---- Bian et al. ----
    tp = "base.tp2pp2"
    t.row(B, "TP activations at 8 bits ≈ uncompressed", "bian.tp.int8", tp, "≈", ["tp.fwd"])
    t.row(B, "4 bits worse than 8", "bian.tp.int4", "bian.tp.int8", "worse", ["tp.fwd"])
    t.row(B, "2 bits worse than 4", "bian.tp.int2", "bian.tp.int4", "worse", ["tp.fwd"])
    t.row(B, "2 bits with four levels (theirs) against three", f"bian.tp.{MIDRISE}", "bian.tp.int2", None, ["tp.fwd"])
    for codec in ("int8", "int4", "int2", MIDRISE):
        t.row(B, f"{codec}: per-channel scales (over the tokens) against blocks of 128 along a row",
              f"bian.tp.chan.{codec}", f"bian.tp.{codec}", None, ["tp.fwd"])
    t.row(B, "top-k worse than quantisation at equal bytes", "bian.tp.topk", "bian.tp.int2", "worse", ["tp.fwd"])
    t.row(B, "random-k worse than quantisation at equal bytes", "bian.tp.randk", "bian.tp.int2", "worse", ["tp.fwd"])
    t.row(B, "compressing the later layers hurts less than all", "bian.tp.int2.later", "bian.tp.int2", "better",
          ["tp.fwd"])
    t.row(B, "compressing the later layers hurts less than the earlier ones", "bian.tp.int2.later",
          "bian.tp.int2.earlier", "better", ["tp.fwd"])
    t.row(B, "the learned autoencoder (8 of 128 channels, about int2's bytes) against int2", "bian.tp.ae",
          "bian.tp.int2", None, ["tp.fwd"])
    t.row(B, "pipeline activations at 8 bits ≈ uncompressed", "bian.pp.int8", "base.pp4", "≈", ["pp.fwd"])
    for bits in (4, 2):
        t.row(B, f"pipeline activations at {bits} bits", f"bian.pp.int{bits}", "base.pp4", None, ["pp.fwd"])
    # ---- Optimus-CC ----
    O = "Optimus-CC"
    for r in OPTIMUS_RANKS:
        t.row(O, f"PowerSGD rank {r} on backward pipeline sends, no error feedback: worse than uncompressed",
              f"optimus.bwd.r{r}.plain", "base.pp4", "worse" if r == 4 else None, ["pp.bwd"])
        t.row(O, f"rank {r}: lazy error propagation better than none", f"optimus.bwd.r{r}.lep",
              f"optimus.bwd.r{r}.plain", "better", ["pp.bwd"])
        t.row(O, f"rank {r}: with lazy error propagation ≈ uncompressed", f"optimus.bwd.r{r}.lep", "base.pp4", "≈",
              ["pp.bwd"])
    t.row(O, "rank 4: the warm start alone (no error feedback) against neither", "optimus.bwd.r4.warm",
          "optimus.bwd.r4.plain", None, ["pp.bwd"])
    t.row(O, "rank 4: error feedback on top of the warm start (what LEP adds)", "optimus.bwd.r4.lep",
          "optimus.bwd.r4.warm", "better", ["pp.bwd"])
    t.row(O, "epilogue-only (cool-down sends, 16 micro-batches) with LEP ≈ uncompressed", "optimus.epi.lep",
          "base.pp4m16", "≈", ["pp.bwd"])
    t.row(O, "epilogue-only without LEP", "optimus.epi.plain", "base.pp4m16", None, ["pp.bwd"])
    for r in (16, 32):
        t.row(O, f"selective stage: DP gradients of stage 0 only at rank {r}, after an uncompressed tenth ≈ "
              "uncompressed", f"optimus.dp.stage0.r{r}", "base.pp2dp2", "≈", ["dp.grad"])
    t.row(O, "every stage's DP gradients at rank 16 (reported)", "optimus.dp.all.r16", "base.pp2dp2", None,
          ["dp.grad"])
    emb = t.paired("optimus.embfused", "base.pp2dp2", f=lambda r: r["summary"]["val_loss"])
    exact = emb.n >= t.need and max(abs(d) for d in emb.diffs) < 1e-4
    t.row(O, "fused embedding synchronisation: the same training, wte summed in one collective", "optimus.embfused",
          "base.pp2dp2", None, ["emb.sync"], stat=emb,
          verdict_text="incomplete" if emb.n < t.need else "same" if exact else "differs",
          shown=None if emb.n < t.need else "yes" if exact else "no",
          evidence="every seed's final loss within 1e-4 of the baseline's")
    # ---- 4-bit floats ----
    for fmt in ("mxfp4", "nvfp4"):
        for fb, label in (("none", "plain"), ("ef", "error feedback"), ("loco", "LoCo")):
            t.row("4-bit floats", f"{fmt} DP gradients ({label}) ≈ int4 ({label}) at about the same bytes",
                  f"fp4.{fmt}.{fb}", f"loco.int4.b128.{fb}", "≈", ["dp.grad"])
        t.row("4-bit floats", f"{fmt} TP activations ≈ int4 at about the same bytes", f"fp4.tp.{fmt}", "bian.tp.int4",
              "≈", ["tp.fwd"])
    # ---- Laskin et al. ----
    L = "Laskin et al."
    runs = t.seeds("laskin.chunked")
    bwd = [r["summary"]["sites"]["pp.bwd"]["calls"] for r in runs.values()]
    t.row(L, "chunked local updates send no activation gradient between stages", "laskin.chunked", None, None,
          ["pp.fwd"], verdict_text="incomplete" if len(bwd) < t.need else "none sent" if not any(bwd) else "sent",
          shown=None if len(bwd) < t.need else "yes" if not any(bwd) else "no",
          evidence=f"pp.bwd calls per seed: {bwd}")
    t.row(L, "local updates (chunked) worse than backpropagation over 1,000 steps, 8 blocks over 4 stages",
          "laskin.chunked", "base.pp4long", "worse", ["pp.fwd", "pp.bwd"])
    t.row(L, "overlapping local updates", "laskin.overlap", "base.pp4long", None, ["pp.fwd", "pp.bwd"])
    # ---- TeraPipe ----
    tera_rows(t)
    # ---- slow links ----
    if have_links:
        slow_rows(t)
    return t.rows


def step_seconds(r, tokens):
    """A run's median step time, its first two steps (warm-up, planning) left out."""
    steps = r["steps"][2:] or r["steps"]
    times = sorted(tokens / s["tokens_per_s"] for s in steps)
    return times[len(times) // 2]


def quartiles(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) >= 2 else [xs[0]] * 3
    return q[0], q[1], q[2]


def tera_rows(t):
    T = "TeraPipe"
    seq = TERA[t.scale]["seq"]
    rounds = SCALES[t.scale]["rounds"]
    runs = {k: t.seeds(f"tera2.{k}") for k in ("whole", "uniform", "plan")}
    n = min(len(v) for v in runs.values())
    gaps = [max(abs(x["loss"] - y["loss"]) for x, y in zip(runs[k][i]["steps"], runs["whole"][i]["steps"]))
            for k in ("uniform", "plan") for i in runs[k] if i in runs["whole"]]
    gap = max(gaps) if gaps else float("nan")
    t.row(T, "token slicing leaves training unchanged", "tera2.plan", "tera2.whole", None, ["pp.fwd"], stat=Stat([]),
          verdict_text="incomplete" if not gaps else "same" if gap <= 1e-4 else "differs",
          shown=None if not gaps else "yes" if gap <= 1e-4 else "no",
          evidence=f"largest difference of a step's loss from unsliced training, any round: {gap:.1e} (1e-4 allowed)")
    # Step times: a comparison is decided when the interquartile ranges over the rounds do
    # not overlap.
    q = {k: quartiles([step_seconds(r, seq) for r in v.values()]) for k, v in runs.items() if v}
    for other, claim in (("whole", "planned slices beat no slicing in step time"),
                         ("uniform", "planned slices beat uniform slices in step time")):
        claim += f" (pp2, one sequence of {seq} tokens per step, {rounds} interleaved rounds)"
        if n < rounds:
            t.row(T, claim, "tera2.plan", f"tera2.{other}", "better", ["pp.fwd"], stat=Stat([]),
                  verdict_text="incomplete", shown=f"incomplete ({n} of {rounds} rounds)")
            continue
        verdict_text = ("better" if q["plan"][2] < q[other][0] else "worse" if q["plan"][0] > q[other][2] else
                        "unresolved")
        cuts = next(iter(runs["plan"].values()))["summary"].get("slices", [])
        ev = "; ".join(f"{k} {q[k][1] * 1e3:.0f} ms [{q[k][0] * 1e3:.0f}, {q[k][2] * 1e3:.0f}]" for k in ("plan", other))
        t.row(T, claim, "tera2.plan", f"tera2.{other}", "better", ["pp.fwd"], stat=Stat([]), verdict_text=verdict_text,
              evidence=f"median step [interquartile range over the rounds]: {ev}; decided when the ranges do not "
              f"overlap; planned cuts {cuts}")
    if n >= rounds:
        predicted = statistics.median(r["summary"].get("predicted_slice_s", 0.0) for r in runs["plan"].values())
        t.row(T, "the planner's predicted step against the measured one (pp2)", "tera2.plan", None, None, ["pp.fwd"],
              stat=Stat([]), evidence=f"predicted {predicted * 1e3:.0f} ms of computation per step (m Σt + (p−1) max t, "
              f"from slice times measured at the start), measured {q['plan'][1] * 1e3:.0f} ms (ratio "
              f"{q['plan'][1] / predicted if predicted else 0:.2f})")
    t.rows.append((T, "the same at pp4", "pp4 on this machine", "—", "", "untestable", "untestable",
                   "4 stages on 2 cores cannot run at once, so slicing cannot overlap them: any difference would "
                   "measure the scheduler, not the pipeline"))


def slow_rows(t):
    """Time to the uncompressed run's final loss, as the ratio of seconds paired by seed; the
    interval is that of the geometric mean (a t interval of the log ratios)."""
    for rate, need in (("100mbit", 0.5), ("1gbit", None)):
        base = t.seeds(f"slow.{rate}.base")
        for i, spec in enumerate(SLOW_CANDIDATES):
            arm = f"slow.{rate}.c{i}"
            logs, finals, secs = [], [], []
            for s, r in t.seeds(arm).items():
                if s in base:
                    tb, tc = time_to(base[s], metric(base[s])), time_to(r, metric(base[s]))
                    logs.append(math.log(tc / tb) if tb and tc else math.inf)
                    finals.append(metric(r) / metric(base[s]))
                    secs += [(tb, tc)] if tb and tc else []
            st = Stat([x for x in logs if math.isfinite(x)])
            missed = len(logs) - st.n
            if len(logs) < t.need:
                got = "incomplete"
            elif missed:
                got = "never reached"
            elif need is None:
                got = "reported"
            else:
                got = "≤ half" if st.hi < math.log(need) else "> half" if st.lo > math.log(need) else "unresolved"
            shown = None if got in ("incomplete", "reported") else {"≤ half": "yes", "unresolved": "unresolved"}.get(
                got, "no" if need else "reported")
            ev = [f"time ratio {math.exp(st.mean):.2f} [{math.exp(st.lo):.2f}, {math.exp(st.hi):.2f}] (paired by seed; "
                  "95 % interval of the geometric mean): "
                  f"{statistics.fmean(c for _, c in secs):.0f} s against {statistics.fmean(b for b, _ in secs):.0f} s"
                  ] if st.n >= 2 else []
            ratio = statistics.fmean(finals) if finals else 0
            ev += [f"{missed} seeds never reached it (its metric, mean over seeds, {ratio:.3f} times the "
                   "uncompressed run's)"] if missed else []
            t.row("slow links", f"over {rate} links, {spec} reaches the uncompressed run's final loss (±2 %)" +
                  (" in at most half its time" if need else " (time reported)"), arm, f"slow.{rate}.base", None,
                  ["dp.grad"], stat=Stat([]), verdict_text=got, shown=shown,
                  evidence="; ".join(ev))


def markdown(rows, scale):
    s = SCALES[scale]
    lines = [f"Scale `{scale}`: " + " ".join(s["model"]) + f", sequence {s['seq']}, micro-batches of {s['batch']}, "
             f"4 per step, {s['steps']} steps; metric: the mean validation loss (nats per byte, {s['val_seqs']} "
             f"windows) of the last {LAST_VALS} validations. Each row compares two arms paired by seed "
             f"({len(s['seeds'])} seeds planned, at least {s['need']} to decide): Δ is the mean difference (first "
             f"minus second) with its 95 % Student-t interval. Verdict: ≈ when the interval lies within ±{MARGIN}; "
             "worse or better when it excludes 0; otherwise unresolved. Reproduced: whether the verdict is the "
             "paper's.", "",
             "| paper | claim | comparison (4 ranks) | Δ validation loss | wire / raw | verdict | reproduced | notes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in r) + " |")
    return "\n".join(lines)


# ---- plots ----

CURVES = {
    "loco": ["base.dp4"] + [f"loco.int{b}.b65536.{k}" for b in (4, 2) for k in ("none", "ef", "loco")],
    "bian_tp": ["base.tp2pp2", "bian.tp.int8", "bian.tp.int4", "bian.tp.int2", f"bian.tp.{MIDRISE}",
                f"bian.tp.chan.{MIDRISE}", "bian.tp.topk", "bian.tp.randk", "bian.tp.int2.later",
                "bian.tp.int2.earlier", "bian.tp.ae"],
    "optimus": ["base.pp4", "optimus.bwd.r4.plain", "optimus.bwd.r4.warm", "optimus.bwd.r4.lep", "base.pp4m16",
                "optimus.epi.lep", "optimus.epi.plain", "base.pp2dp2", "optimus.dp.stage0.r16",
                "optimus.dp.all.r16"],
    "laskin": ["base.pp4long", "laskin.chunked", "laskin.overlap"],
    "slow_links": [n for n in ARMS if n.startswith("slow.")],
}


def plots(t, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []

    def save(fig, name):
        path = os.path.join(out, f"{name}.png")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)

    # Validation curves of the first seed, and each arm's bytes per site.
    for group, names in CURVES.items():
        names = [n for n in names if t.seeds(n)]
        if not names:
            continue
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 5))
        timed = group == "slow_links"
        for n in names:
            r = t.seeds(n)[min(t.seeds(n))]
            xs = [v["elapsed_s"] if timed else v["step"] + 1 for v in r["vals"]]
            ax.plot(xs, [v["val_loss"] for v in r["vals"]], marker="o", markersize=3, label=n)
        ax.set(xlabel="seconds" if timed else "step", ylabel="validation loss (nats/byte)",
               title=f"{group}: validation loss (first seed)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        sites = ["tp.fwd", "tp.bwd", "pp.fwd", "pp.bwd", "dp.grad", "emb.sync"]
        width = 0.8 / len(names)
        for i, n in enumerate(names):
            s = next(iter(t.seeds(n).values()))["summary"]["sites"]
            bx.bar([k + i * width for k in range(len(sites))], [s[x]["wire_bytes"] / 1e6 for x in sites], width,
                   label=n)
        bx.set_xticks([k + 0.4 - width / 2 for k in range(len(sites))], sites)
        bx.set(ylabel="MB on the wire, all ranks", title=f"{group}: bytes per site")
        bx.legend(fontsize=7)
        save(fig, group)

    # Dose sweeps: Δ against the layout's baseline with its 95 % interval.
    def dose(ax, xs, arms, base, label):
        pts = [(x, t.paired(a, base)) for x, a in zip(xs, arms)]
        pts = [(x, s) for x, s in pts if s.n >= 2]
        if pts:
            ax.errorbar([x for x, _ in pts], [s.mean for _, s in pts], yerr=[s.half for _, s in pts], marker="o",
                        capsize=3, label=label)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, bits in zip(axes, (4, 2)):
        for fb in ("none", "ef", "loco"):
            dose(ax, LOCO_BLOCKS, [f"loco.int{bits}.b{b}.{fb}" for b in LOCO_BLOCKS], "base.dp4", fb)
        ax.axhspan(-MARGIN, MARGIN, color="grey", alpha=0.15)
        ax.set(xscale="log", xlabel="elements per scale", title=f"LoCo dose: int{bits} DP gradients",
               ylabel="Δ validation loss vs uncompressed")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save(fig, "dose_loco")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    codecs = ["int8", "int4", "int2", MIDRISE]
    for prefix, label in (("bian.tp.", "blocks of 128 along a row"), ("bian.tp.chan.", "per channel")):
        dose(ax, range(len(codecs)), [prefix + x for x in codecs], "base.tp2pp2", label)
    ax.axhspan(-MARGIN, MARGIN, color="grey", alpha=0.15)
    ax.set_xticks(range(len(codecs)), ["int8", "int4", "int2 (3 levels)", "int2 (4 levels)"])
    ax.set(ylabel="Δ validation loss vs uncompressed", title="Bian et al. dose: tp.fwd codec and scaling")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, "dose_bian")

    # The codecs' errors on the real tp.fwd results, per block.
    arms = [n for n in ARMS if t.errors(n)]
    if arms:
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 4.5))
        width = 0.8 / len(arms)
        for i, n in enumerate(arms):
            e = t.errors(n)
            for axis, k in ((ax, 0), (bx, 1)):
                axis.bar([layer + i * width for layer in e], [v[k] for v in e.values()], width, label=n[len("bian."):]
                         if n.startswith("bian.") else n)
        for axis, what in ((ax, "||y' - y|| / ||y||"), (bx, "median |y'_i - y_i| / |y_i|")):
            axis.set(xlabel="block", ylabel=what, yscale="log", title=f"tp.fwd results against exact: {what}")
            axis.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=6, ncol=2)
        save(fig, "codec_errors")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for kind, label in (("plain", "no error feedback"), ("lep", "lazy error propagation")):
        dose(ax, OPTIMUS_RANKS, [f"optimus.bwd.r{r}.{kind}" for r in OPTIMUS_RANKS], "base.pp4", label)
    ax.axhspan(-MARGIN, MARGIN, color="grey", alpha=0.15)
    ax.set(xscale="log", xlabel="PowerSGD rank", ylabel="Δ validation loss vs uncompressed",
           title="Optimus-CC dose: PowerSGD on pp.bwd")
    ax.set_xticks(OPTIMUS_RANKS, [str(r) for r in OPTIMUS_RANKS])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, "dose_optimus")
    return written


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
