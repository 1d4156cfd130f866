#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The table of run.sh's JSON lines: step time per configuration and link, the speed-up
over gloo on the same link, the loss against gloo's, raw and wire bytes."""
import json
import sys


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    gloo = {r["where"]: r for r in rows if r["config"] == "gloo"}
    print("| link | config | step (median) | vs gloo | loss | loss - gloo's | raw MB | wire MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        g = gloo.get(r["where"])
        speed = f"{g['step_median_s'] / r['step_median_s']:.2f}x" if g else "-"
        dloss = f"{r['loss'] - g['loss']:+.2e}" if g else "-"
        mb = lambda b: "-" if b is None else f"{b / 1e6:.0f}"  # noqa: E731
        print(f"| {r['where']} | {r['config']} | {r['step_median_s'] * 1e3:.0f} ms | {speed} | {r['loss']:.5f} | "
              f"{dloss} | {mb(r['raw_bytes'])} | {mb(r['wire_bytes'])} |")
    if rows:
        r = rows[0]
        print(f"\n{r['ranks']} processes, {r['params'] / 1e6:.1f} M parameters, batch {r['batch']} per rank, "
              f"{r['steps']} timed steps after warm-up")


if __name__ == "__main__":
    main(sys.argv[1])
