# SPDX-License-Identifier: BSD-3-Clause
"""The experiments' arms: every layout and compression setting a run trains, the scales,
and the groups the table is laid out in."""

import os


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
