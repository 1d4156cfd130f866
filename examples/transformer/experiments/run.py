#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Reproduces, at small scale, what the research behind ccl found about compressing
model-parallel and data-parallel traffic: every run trains the same model on the same data
with the same seed and token budget on 4 ranks, each row compares runs against the
uncompressed baseline of the same layout and says whether the finding reproduced. Writes
the JSONL logs and PNG plots into OUT and the table into the trainer's README.

Usage: run.py [--scale full|tiny] [--out DIR] [--only PREFIX...] [--force] [--readme PATH]
              [--no-readme] [--train GPT_TRAIN] [--data TEXT]
With the README written, the plots go to images/experiments/ beside it; else into OUT.
  full  the README's table (about an hour on a 2-core machine);
  tiny  seconds per row, for CI: checks that every row runs and produces its numbers, not
        that it reproduces.
Runs already in OUT are reused unless --force: a log with its summary, made by the same
configuration (trainer arguments, seed, link, data size: the key in <name>.key), so a run
interrupted, or whose row changed, runs again and nothing else does. The slow-link rows
need root (network namespaces, tc); without it they say so and are left out."""
import argparse
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
README = os.path.join(HERE, "..", "README.md")
BEGIN, END = "<!-- experiments-table -->", "<!-- /experiments-table -->"

# The model, data and budget of every run. The global batch is 4 micro-batches per step
# in every layout (accum follows from the data-parallel ranks).
SCALES = {
    "full": dict(model=["--layers", "4", "--channels", "128", "--heads", "4", "--max-seq", "128"],
                 seq=128, batch=4, steps=300, val_every=50, val_seqs=64, lr="2e-3", warmup=30),
    "tiny": dict(model=["--layers", "4", "--channels", "32", "--heads", "4", "--max-seq", "16"],
                 seq=16, batch=2, steps=6, val_every=3, val_seqs=4, lr="3e-3", warmup=1),
}
LAYOUTS = {
    "tp2pp2": ["--tp", "2", "--pp", "2", "--accum", "4"],
    "pp4": ["--pp", "4", "--accum", "4"],
    "dp4": ["--dp", "4", "--accum", "1"],
    "dp4zero": ["--dp", "4", "--accum", "1", "--zero"],
    "pp2dp2": ["--pp", "2", "--dp", "2", "--accum", "2"],
    "pp2": ["--pp", "2", "--accum", "4"],  # 2 ranks: TeraPipe with one core per stage
}
RANKS = {"pp2": 2}  # ranks of a layout (others: 4)
SEED, SEED2 = 1337, 7
TERA_SEQ = [0]  # the scale's TeraPipe sequence length, set in main


# TeraPipe's rows: long sequences, one per micro-batch, a GPipe pipeline over 4 stages; the
# same 4 micro-batches per step, fewer steps (their measure is the step time).
TERA = {"full": dict(seq=512, steps=60, granularity=32), "tiny": dict(seq=64, steps=4, granularity=8)}


class Run:
    def __init__(self, name, layout, flags=(), seed=SEED, link=None, tera=False):
        self.name, self.layout, self.flags, self.seed, self.link = name, layout, list(flags), seed, link
        self.tera = tera
        # The uncompressed run a row compares with: its layout's, or unsliced TeraPipe's.
        self.baseline = ("tera2.whole" if layout == "pp2" else "tera.whole") if tera else f"base.{layout}"

    def describe(self):
        text = " ".join(self.flags) or "uncompressed"
        return f"{self.layout}: {text}" + (f" over {self.link} links" if self.link else "")


def c(spec):
    return ["--compress", spec]


# Every run of the table, by name; baselines are base.<layout> (and base2.<layout>, another
# seed, for the noise).
RUNS = {}


def add(run):
    RUNS[run.name] = run


for lay in LAYOUTS:
    add(Run(f"base.{lay}", lay))
    add(Run(f"base2.{lay}", lay, seed=SEED2))
# Bian et al.: the row-parallel outputs (tp.fwd) of tp2 x pp2, and pipeline activations.
for bits in (8, 4, 2):
    add(Run(f"bian.tp.int{bits}", "tp2pp2", c(f"tp.fwd=int{bits}")))
# Equal bytes to int2 (2.25 bits per element): top-k keeps values and index gaps (about 5
# bytes each), random-k values only.
add(Run("bian.tp.topk", "tp2pp2", c("tp.fwd=topk:keep=0.056")))
add(Run("bian.tp.randk", "tp2pp2", c("tp.fwd=randk:keep=0.07")))
add(Run("bian.tp.int2.later", "tp2pp2", c("tp.fwd=int2:layers=2-3")))
# The learned linear autoencoder: 8 of 128 channels, about int2's bytes.
add(Run("bian.tp.ae", "tp2pp2", ["--autoencoder", "8"]))
add(Run("bian.tp.int2.earlier", "tp2pp2", c("tp.fwd=int2:layers=0-1")))
for bits in (8, 4, 2):
    add(Run(f"bian.pp.int{bits}", "pp4", c(f"pp.fwd=int{bits}")))
# LoCo: 4-bit data-parallel gradients, plain and ZeRO-1.
for lay in ("dp4", "dp4zero"):
    add(Run(f"loco.{lay}.none", lay, c("dp.grad=int4")))
    add(Run(f"loco.{lay}.ef", lay, c("dp.grad=int4:feedback=ef")))
    add(Run(f"loco.{lay}.loco", lay, c("dp.grad=int4:feedback=loco:beta=0.8:reset=1024")))
# The same at 2 bits, where losing the compression error costs more.
add(Run("loco2.dp4.none", "dp4", c("dp.grad=int2")))
add(Run("loco2.dp4.ef", "dp4", c("dp.grad=int2:feedback=ef")))
add(Run("loco2.dp4.loco", "dp4", c("dp.grad=int2:feedback=loco:beta=0.8:reset=1024")))
# 4-bit floats (MXFP4: e2m1 with a power-of-two scale per 32; NVFP4: e2m1 with an e4m3
# scale per 16 and a per-tensor one) against int4 at about the same bytes (4.25, 4.5 and
# 4.25 bits an element): gradients plain, with error feedback and LoCo; TP activations.
for fmt in ("mxfp4", "nvfp4"):
    add(Run(f"fp4.dp4.{fmt}.none", "dp4", c(f"dp.grad={fmt}")))
    add(Run(f"fp4.dp4.{fmt}.ef", "dp4", c(f"dp.grad={fmt}:feedback=ef")))
    add(Run(f"fp4.dp4.{fmt}.loco", "dp4", c(f"dp.grad={fmt}:feedback=loco:beta=0.8:reset=1024")))
    add(Run(f"fp4.tp.{fmt}", "tp2pp2", c(f"tp.fwd={fmt}")))
# Optimus-CC: PowerSGD on the pipeline's backward traffic, lazy error propagation,
# epilogue-only, selective-stage data-parallel compression, fused embedding sync.
add(Run("optimus.bwd.plain", "pp4", c("pp.bwd=powersgd:rank=4")))
add(Run("optimus.bwd.lep", "pp4", c("pp.bwd=powersgd:rank=4:feedback=ef")))
add(Run("optimus.bwd.epilogue", "pp4", c("pp.bwd=powersgd:rank=4:feedback=ef:phases=cooldown")))
add(Run("optimus.dp.all", "pp2dp2", c("dp.grad=powersgd:rank=4:feedback=ef")))
add(Run("optimus.dp.stage0", "pp2dp2", c("dp.grad=powersgd:rank=4:feedback=ef:stages=0")))
add(Run("optimus.embfused", "pp2dp2", ["--fuse-emb-sync"]))
# Laskin et al.: local updates (chunked; overlapping) instead of backpropagation across stages.
add(Run("laskin.chunked", "pp4", ["--schedule", "local"]))
add(Run("laskin.overlap", "pp4", ["--schedule", "local-overlap"]))
# TeraPipe: token slices at pp4 with long sequences, none, uniform (8 slices) or planned.
add(Run("tera.whole", "pp4", ["--slices", "1"], tera=True))
add(Run("tera.uniform", "pp4", ["--slices", "8"], tera=True))
add(Run("tera.plan", "pp4", ["--slices", "plan"], tera=True))
# The same with 2 stages on this machine's 2 cores: pipelining can overlap stages only when
# each has a core.
add(Run("tera2.whole", "pp2", ["--slices", "1"], tera=True))
add(Run("tera2.uniform", "pp2", ["--slices", "8"], tera=True))
add(Run("tera2.plan", "pp2", ["--slices", "plan"], tera=True))
# Slow links: the uncompressed baseline against compressed gradients, data-parallel.
SLOW_CANDIDATES = ["dp.grad=int4:feedback=loco:beta=0.8:reset=1024", "dp.grad=powersgd:rank=4:feedback=ef"]
for rate in ("100mbit", "1gbit"):
    add(Run(f"slow.{rate}.base", "dp4", link=rate))
    for i, spec in enumerate(SLOW_CANDIDATES):
        add(Run(f"slow.{rate}.c{i}", "dp4", c(spec), link=rate))


def command(run, scale, train, log):
    s = dict(SCALES[scale])
    layout = list(LAYOUTS[run.layout])
    if run.tera:
        t = TERA[scale]
        s.update(seq=t["seq"], batch=1, steps=t["steps"], val_every=t["steps"])
        s["model"] = s["model"][:-1] + [str(t["seq"])]  # --max-seq
        layout += ["--schedule", "gpipe", "--slice-granularity", str(t["granularity"])]
    # Time-to-loss rows validate twice as often, to place the moment a loss is reached.
    every = max(1, s["val_every"] // 2) if run.link else s["val_every"]
    return [train, "--data", data_path(), *s["model"], "--seq", str(s["seq"]), "--batch", str(s["batch"]),
            "--steps", str(s["steps"]), "--val-every", str(every), "--val-seqs", str(s["val_seqs"]),
            "--lr", s["lr"], "--warmup", str(s["warmup"]), "--seed", str(run.seed), "--no-progress",
            *layout, *run.flags] + ([] if run.link else ["--log", log])


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
    out = {"steps": [], "vals": [], "summary": None}
    if not os.path.exists(log):
        return out
    with open(log) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if r["type"] == "step":
                out["steps"].append(r)
            elif r["type"] == "val":
                out["vals"].append(r)
            elif r["type"] == "summary":
                out["summary"] = r
    return out


def run_key(cmd, log):
    """What a run's result depends on: its command (the trainer's path and the log's aside),
    seed and link included, and the data file's size. A log is reused only under the same key."""
    argv = [a for a in cmd[1:] if a != log]
    data = os.environ.get("EXPERIMENTS_DATA", "")
    size = os.path.getsize(data) if data and os.path.exists(data) else 0
    return hashlib.sha1(json.dumps([os.path.basename(cmd[0]), argv, size]).encode()).hexdigest()


def execute(run, scale, train, out, force):
    log = os.path.join(out, run.name + ".jsonl")
    if run.link:
        cmd = [os.path.join(HERE, "slow_train.sh"), "4", run.link, log] + command(run, scale, train, log)
    else:
        cmd = command(run, scale, train, log) + ["--ranks", str(RANKS.get(run.layout, 4))]
    # Resuming: a finished run whose configuration is unchanged is not run again (its key in
    # <name>.key); one whose flags, seed, scale or data changed is.
    key_file = os.path.join(out, run.name + ".key")
    key = run_key([a for a in cmd if a != train] if run.link else cmd, log)
    if not force and load(log)["summary"] and os.path.exists(key_file):
        with open(key_file) as f:
            if f.read().strip() == key:
                return load(log)
    for stale in (log, key_file):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    print(f"run {run.name}: {' '.join(cmd[cmd.index('--seed'):] if not run.link else cmd[:3])}", flush=True)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(out, run.name + ".out"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        sys.exit(f"run.py: {run.name} failed:\n{proc.stdout[-3000:]}")
    with open(key_file, "w") as f:
        f.write(key + "\n")
    return load(log)


# ---- the rows ----

def val(r):
    return r["summary"]["val_loss"]


def wire_ratio(r, site):
    s = r["summary"]["sites"][site]
    return s["wire_bytes"] / s["raw_bytes"] if s["raw_bytes"] else None


def sites_text(r, sites):
    parts = []
    for s in sites:
        q = wire_ratio(r, s)
        if q is not None:
            parts.append(f"{s} {q:.3f}")
    return ", ".join(parts)


def time_to(r, target):
    """Seconds until a validation loss within 2 % of `target`, or None."""
    for v in r["vals"]:
        if v["val_loss"] <= target * 1.02:
            return v["elapsed_s"]
    return None


class Table:
    def __init__(self, results):
        self.r = results
        self.rows = []

    def noise(self, layout):
        return abs(val(self.r[f"base.{layout}"]) - val(self.r[f"base2.{layout}"]))

    def tol(self, layout):
        return max(0.01, 2 * self.noise(layout))

    def delta(self, name, layout=None):
        return val(self.r[name]) - val(self.r[RUNS[name].baseline])

    def row(self, paper, claim, runs, sites, verdict, evidence):
        cfg = "; ".join(RUNS[n].describe() for n in runs)
        losses = ", ".join(f"{val(self.r[n]):.3f} ({self.delta(n):+.3f})" for n in runs)
        wires = "; ".join(sites_text(self.r[n], sites) for n in runs)
        shown = "reported" if verdict is None else "yes" if verdict else "no"
        self.rows.append((paper, claim, cfg, losses, wires, shown, evidence))


def fp4_rows(t, results):
    """4-bit floats against int4 at about the same bytes: a format trains as well as int4
    when its loss is within the tolerance of int4's in the same setting."""
    for fmt in ("mxfp4", "nvfp4"):
        for k, label in (("none", "plain"), ("ef", "error feedback"), ("loco", "LoCo")):
            a, b = f"fp4.dp4.{fmt}.{k}", f"loco.dp4.{k}"
            gap = abs(val(results[a]) - val(results[b]))
            t.row("4-bit floats", f"{fmt} DP gradients ({label}) ≈ int4 ({label}) at about the same bytes", [a, b],
                  ["dp.grad"], gap <= t.tol("dp4"), f"|{fmt} − int4| = {gap:.3f} ≤ {t.tol('dp4'):.3f}")
        a = f"fp4.tp.{fmt}"
        gap = abs(val(results[a]) - val(results["bian.tp.int4"]))
        t.row("4-bit floats", f"{fmt} TP activations ≈ int4 at about the same bytes", [a, "bian.tp.int4"], ["tp.fwd"],
              gap <= t.tol("tp2pp2"), f"|{fmt} − int4| = {gap:.3f} ≤ {t.tol('tp2pp2'):.3f}")


def build_rows(results, have_links):
    t = Table(results)
    tol = t.tol
    d = t.delta
    tp = "tp2pp2"
    # Bian et al.
    t.row("Bian et al.", "TP activations at 8 bits train as well as uncompressed", ["bian.tp.int8"], ["tp.fwd"],
          d("bian.tp.int8", tp) <= tol(tp), f"Δ ≤ {tol(tp):.3f} (twice the two-seed difference, at least 0.01)")
    l8, l4, l2 = (val(results[f"bian.tp.int{b}"]) for b in (8, 4, 2))
    t.row("Bian et al.", "4 and 2 bits progressively worse", ["bian.tp.int4", "bian.tp.int2"], ["tp.fwd"],
          l2 > l4 > l8 and l2 - l8 > tol(tp), "int2 > int4 > int8 and int2 − int8 beyond the tolerance")
    t.row("Bian et al.", "top-k and random-k worse than quantisation at equal bytes",
          ["bian.tp.topk", "bian.tp.randk", "bian.tp.int2"], ["tp.fwd"],
          min(val(results["bian.tp.topk"]), val(results["bian.tp.randk"])) > l2 + tol(tp),
          "both sparsifiers above int2 (about the same wire bytes) by more than the tolerance")
    later, earlier = val(results["bian.tp.int2.later"]), val(results["bian.tp.int2.earlier"])
    t.row("Bian et al.", "compressing only the later layers hurts less than all or the earlier ones",
          ["bian.tp.int2.later", "bian.tp.int2.earlier", "bian.tp.int2"], ["tp.fwd"],
          later < earlier and later < l2, "int2 on blocks 2-3 below int2 on blocks 0-1 and on all")
    t.row("Bian et al.", "the learned autoencoder (codes of 8 channels; at 128 channels about int2's bytes): its loss "
          "and bytes",
          ["bian.tp.ae", "bian.tp.int2"], ["tp.fwd"], None,
          f"reported beside int2: {val(results['bian.tp.ae']) - l2:+.3f} nats against it")
    t.row("Bian et al.", "pipeline activations at 8 bits ≈ baseline (4 and 2 bits reported)",
          ["bian.pp.int8", "bian.pp.int4", "bian.pp.int2"], ["pp.fwd"],
          d("bian.pp.int8", "pp4") <= tol("pp4"), f"Δ int8 ≤ {tol('pp4'):.3f}")
    # LoCo
    for lay, label in (("dp4", "plain DP"), ("dp4zero", "ZeRO-1")):
        none, ef, loco = (f"loco.{lay}.{k}" for k in ("none", "ef", "loco"))
        t.row("LoCo", f"4-bit gradients, {label}: without compensation worse", [none], ["dp.grad"],
              d(none, lay) > tol(lay), f"Δ > {tol(lay):.3f}")
        t.row("LoCo", f"4-bit gradients, {label}: error feedback better than none", [ef], ["dp.grad"],
              val(results[ef]) < val(results[none]), "below the uncompensated run")
        t.row("LoCo", f"4-bit gradients, {label}: LoCo ≈ baseline", [loco], ["dp.grad"],
              d(loco, lay) <= tol(lay), f"Δ ≤ {tol(lay):.3f}")
    none, ef, loco = (f"loco2.dp4.{k}" for k in ("none", "ef", "loco"))
    t.row("LoCo", "the same at 2 bits, plain DP: none worse, error feedback better, LoCo ≈ baseline", [none, ef, loco],
          ["dp.grad"], d(none, "dp4") > tol("dp4") and val(results[ef]) < val(results[none]) and
          d(loco, "dp4") <= tol("dp4"), f"Δ none > {tol('dp4'):.3f}, ef below none, Δ LoCo ≤ {tol('dp4'):.3f}")
    fp4_rows(t, results)
    # Optimus-CC
    t.row("Optimus-CC", "PowerSGD on the backward pipeline traffic without lazy error propagation: worse",
          ["optimus.bwd.plain"], ["pp.bwd"], d("optimus.bwd.plain", "pp4") > tol("pp4"), f"Δ > {tol('pp4'):.3f}")
    t.row("Optimus-CC", "with lazy error propagation ≈ baseline", ["optimus.bwd.lep"], ["pp.bwd"],
          d("optimus.bwd.lep", "pp4") <= tol("pp4"), f"Δ ≤ {tol('pp4'):.3f}")
    t.row("Optimus-CC", "epilogue-only ≈ baseline, compressing only the cool-down sends", ["optimus.bwd.epilogue"],
          ["pp.bwd"], d("optimus.bwd.epilogue", "pp4") <= tol("pp4"), f"Δ ≤ {tol('pp4'):.3f}")
    t.row("Optimus-CC", "selective stage compression of DP gradients (stage 0 only) ≈ baseline, all stages reported",
          ["optimus.dp.stage0", "optimus.dp.all"], ["dp.grad"],
          d("optimus.dp.stage0", "pp2dp2") <= tol("pp2dp2"), f"Δ stage 0 ≤ {tol('pp2dp2'):.3f}")
    def raw(name, site):
        return results[name]["summary"]["sites"][site]["raw_bytes"] / 1e6

    t.row("Optimus-CC", "fused embedding synchronisation: the same training, wte summed in one collective",
          ["optimus.embfused"], ["emb.sync"], abs(d("optimus.embfused", "pp2dp2")) < 1e-4,
          f"same loss (within 1e-4); MB sent by dp.grad + emb.sync: {raw('optimus.embfused', 'dp.grad'):.1f} + "
          f"{raw('optimus.embfused', 'emb.sync'):.1f} fused, {raw('base.pp2dp2', 'dp.grad'):.1f} + "
          f"{raw('base.pp2dp2', 'emb.sync'):.1f} apart")
    # Laskin et al.
    bwd = results["laskin.chunked"]["summary"]["sites"]["pp.bwd"]["calls"]
    t.row("Laskin et al.", "chunked local updates send no activation gradient between stages", ["laskin.chunked"],
          ["pp.fwd"], bwd == 0, f"pp.bwd calls: {bwd}")
    t.row("Laskin et al.", "local updates cost some final loss against full backpropagation (overlapping reported)",
          ["laskin.chunked", "laskin.overlap"], ["pp.fwd", "pp.bwd"], d("laskin.chunked", "pp4") > tol("pp4"),
          f"chunked Δ > {tol('pp4'):.3f}")
    # TeraPipe
    def step_seconds(name):
        steps = results[name]["steps"][2:] or results[name]["steps"]
        tokens = 4 * TERA_SEQ[0]
        times = sorted(tokens / r["tokens_per_s"] for r in steps)
        return times[len(times) // 2]

    def loss_gap(a, b):
        return max(abs(x["loss"] - y["loss"]) for x, y in zip(results[a]["steps"], results[b]["steps"]))

    gap = max(loss_gap("tera.uniform", "tera.whole"), loss_gap("tera.plan", "tera.whole"))
    t.row("TeraPipe", "token slicing leaves training unchanged", ["tera.uniform", "tera.plan"], ["pp.fwd", "pp.bwd"],
          gap <= 1e-4, f"largest difference of a step's loss from unsliced training: {gap:.1e} (tolerance 1e-4)")
    for prefix, stages, note in (("tera", 4, "4 ranks on 2 cores"), ("tera2", 2, "one core per stage")):
        whole, uniform, plan = (step_seconds(f"{prefix}.{k}") for k in ("whole", "uniform", "plan"))
        cuts = results[f"{prefix}.plan"]["summary"].get("slices", [])
        t.row("TeraPipe", f"planned slices beat uniform slices and no slicing in step time (pp{stages}, {note}, "
              f"sequence {TERA_SEQ[0]})", [f"{prefix}.whole", f"{prefix}.uniform", f"{prefix}.plan"], ["pp.fwd"],
              plan < uniform and plan < whole,
              f"median step {plan * 1e3:.0f} ms planned ({len(cuts) - 1} slices: {cuts}), {uniform * 1e3:.0f} ms "
              f"uniform, {whole * 1e3:.0f} ms unsliced")
        predicted = results[f"{prefix}.plan"]["summary"].get("predicted_slice_s", 0.0)
        t.row("TeraPipe", f"the planner's predicted time against the measured one (pp{stages})", [f"{prefix}.plan"],
              ["pp.fwd"], None,
              f"predicted {predicted * 1e3:.0f} ms of computation per step (m Σt + (p−1) max t, from slice times "
              f"measured at the start), measured {plan * 1e3:.0f} ms per step "
              f"(ratio {plan / predicted if predicted else 0:.2f})")
    # Slow links
    if have_links and all(n in results for n in RUNS if n.startswith("slow.")):
        for rate, need in (("100mbit", 0.5), ("1gbit", None)):
            base = results[f"slow.{rate}.base"]
            target = val(base)
            t_base = time_to(base, target)
            best, best_t = None, None
            for i in range(len(SLOW_CANDIDATES)):
                tt = time_to(results[f"slow.{rate}.c{i}"], target)
                if tt is not None and (best_t is None or tt < best_t):
                    best, best_t = f"slow.{rate}.c{i}", tt
            names = [f"slow.{rate}.c{i}" for i in range(len(SLOW_CANDIDATES))]
            if best_t is None:
                ev = f"no compressed run came within 2 % of {target:.3f}; uncompressed took {t_base:.1f} s"
                ok = False
            else:
                ratio = best_t / t_base
                ev = (f"{best}: {best_t:.1f} s to within 2 % of {target:.3f}, uncompressed {t_base:.1f} s "
                      f"(ratio {ratio:.2f})")
                ok = ratio <= need if need else True
            claim = (f"over {rate} links the best compressed run reaches the baseline's final loss (±2 %)" +
                     (" in at most half the time" if need else " (time reported)"))
            t.row("slow links", claim, names, ["dp.grad"], ok, ev)
    return t.rows


def markdown(rows, scale):
    lines = [f"Scale `{scale}`: " + " ".join(SCALES[scale]["model"]) +
             f", sequence {SCALES[scale]['seq']}, micro-batches of {SCALES[scale]['batch']}, 4 per step, "
             f"{SCALES[scale]['steps']} steps, validation loss over {SCALES[scale]['val_seqs']} windows.", "",
             "| paper | claim | configuration (4 ranks) | validation loss (Δ vs baseline) | wire / raw | "
             "reproduced | decided by |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    return "\n".join(lines)


def plots(results, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = {
        "bian_tp": ["base.tp2pp2", "bian.tp.int8", "bian.tp.int4", "bian.tp.int2", "bian.tp.topk", "bian.tp.randk",
                    "bian.tp.int2.later", "bian.tp.int2.earlier", "bian.tp.ae"],
        "bian_pp": ["base.pp4", "bian.pp.int8", "bian.pp.int4", "bian.pp.int2"],
        "loco": ["base.dp4", "loco.dp4.none", "loco.dp4.ef", "loco.dp4.loco", "base.dp4zero", "loco.dp4zero.none",
                 "loco.dp4zero.ef", "loco.dp4zero.loco", "loco2.dp4.none", "loco2.dp4.ef", "loco2.dp4.loco"],
        "optimus": ["base.pp4", "optimus.bwd.plain", "optimus.bwd.lep", "optimus.bwd.epilogue", "base.pp2dp2",
                    "optimus.dp.all", "optimus.dp.stage0", "optimus.embfused"],
        "laskin": ["base.pp4", "laskin.chunked", "laskin.overlap"],
        "terapipe": ["tera.whole", "tera.uniform", "tera.plan", "tera2.whole", "tera2.uniform", "tera2.plan"],
        "slow_links": [n for n in RUNS if n.startswith("slow.")],
    }
    written = []
    for group, names in groups.items():
        names = [n for n in names if n in results and results[n]["vals"]]
        if not names:
            continue
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 5))
        timed = group == "slow_links"
        for n in names:
            xs = [v["elapsed_s"] if timed else v["step"] + 1 for v in results[n]["vals"]]
            ax.plot(xs, [v["val_loss"] for v in results[n]["vals"]], marker="o", markersize=3, label=n)
        ax.set(xlabel="seconds" if timed else "step", ylabel="validation loss (nats/byte)",
               title=f"{group}: validation loss")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        sites = ["tp.fwd", "tp.bwd", "pp.fwd", "pp.bwd", "dp.grad", "emb.sync"]
        width = 0.8 / len(names)
        for i, n in enumerate(names):
            s = results[n]["summary"]["sites"]
            bx.bar([k + i * width for k in range(len(sites))], [s[x]["wire_bytes"] / 1e6 for x in sites], width,
                   label=n)
        bx.set_xticks([k + 0.4 - width / 2 for k in range(len(sites))], sites)
        bx.set(ylabel="MB on the wire, all ranks", title=f"{group}: bytes per site")
        bx.legend(fontsize=7)
        path = os.path.join(out, f"{group}.png")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="full")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", nargs="*", default=None, help="run names starting with these prefixes")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--readme", default=README)
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--train", default=os.path.join(ROOT, "build", "examples", "transformer", "gpt_train"))
    ap.add_argument("--data", default=None, help="text file (default: the King James Bible, as scripts/main.sh)")
    a = ap.parse_args()
    TERA_SEQ[0] = TERA[a.scale]["seq"]
    out = a.out or os.path.join(ROOT, "build", f"experiments-{a.scale}")
    os.makedirs(out, exist_ok=True)
    if not os.access(a.train, os.X_OK):
        sys.exit(f"run.py: {a.train} is not built")
    data = a.data or os.path.join(out, "kjv.txt")
    if not a.data and not os.path.exists(data):
        with open(data, "w") as f:
            subprocess.run(["bible", "-f", "gen1:1-rev22:21"], stdout=f, check=True)
    os.environ["EXPERIMENTS_DATA"] = os.path.abspath(data)
    have_links = can_shape_links()
    if not have_links:
        print("run.py: no root or no network namespaces here: the slow-link rows are left out", flush=True)
    results = {}
    for name, run in RUNS.items():
        if run.link and not have_links:
            continue
        if a.only is not None and not any(name.startswith(p) for p in a.only):
            if load(os.path.join(out, name + ".jsonl"))["summary"]:
                results[name] = load(os.path.join(out, name + ".jsonl"))
            continue
        results[name] = execute(run, a.scale, a.train, out, a.force)
    try:
        rows = build_rows(results, have_links)
    except KeyError as e:
        sys.exit(f"run.py: run {e} has no results in {out} (run without --only first)")
    text = markdown(rows, a.scale)
    print(text)
    # The README's plots live beside it; other runs keep theirs with their logs.
    plot_dir = out if a.no_readme else os.path.join(HERE, "..", "images", "experiments")
    os.makedirs(plot_dir, exist_ok=True)
    written = plots(results, plot_dir)
    for p in written:
        print(f"plot: {p}")
    if not a.no_readme:
        rel = os.path.relpath(plot_dir, os.path.dirname(os.path.abspath(a.readme)))
        text += "\n\n" + " ".join(f"![{os.path.basename(p)[:-4]}]({rel}/{os.path.basename(p)})" for p in written)
    if not a.no_readme:
        with open(a.readme) as f:
            readme = f.read()
        if BEGIN not in readme or END not in readme:
            sys.exit(f"run.py: {a.readme} has no {BEGIN} ... {END} section")
        head, rest = readme.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(a.readme, "w") as f:
            f.write(head + BEGIN + "\n" + text + "\n" + END + tail)
        print(f"run.py: wrote the table into {a.readme}")


if __name__ == "__main__":
    main()
