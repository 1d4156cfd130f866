# SPDX-License-Identifier: BSD-3-Clause
"""The plots of the trainer's README: loss curves per group and the dose-response figures."""

import os

from arms import ARMS, LOCO_BLOCKS, MARGIN, MIDRISE, OPTIMUS_RANKS


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
