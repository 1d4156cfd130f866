# SPDX-License-Identifier: BSD-3-Clause
"""The table: every row compares two arms paired by seed and decides by the mean paired
difference of the final validation loss and its 95 % interval."""

import math
import statistics

from arms import (ARMS, LAST_VALS, LOCO_BETA, LOCO_BLOCKS, LOCO_RESET, MARGIN, MIDRISE, OPTIMUS_RANKS, SCALES,
    SLOW_CANDIDATES, T95, TERA)


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
