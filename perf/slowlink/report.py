#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Prints run.sh's table from its RESULT lines.

Per run: time = the slowest rank's mean time per call; with several runs (REPEATS) the
median of those. busbw = 2(n-1)/n * bytes / time (bytes uncompressed, as nccl-tests);
ratios against the best Open MPI and the best Gloo variant at the same link rate.
"wire MB" is what ccl reports it sent per rank and call; "tc MB" is what the tbf qdiscs of
the bridge passed per rank and call (all calls of the runs, warm-up, barriers and setup
included, divided by the number of warm-up + timed calls); "codec ms" is ccl's encode +
decode time per call on its busiest rank. In run.sh's two-level layout (NODES) "lo MB" is
what went through the nodes' loopback interfaces, per rank and call in the same way: traffic
between the ranks of a node that took TCP instead of shared memory. A run that failed marks
its row FAILED.
"""
import statistics
import sys
from collections import OrderedDict


def parse(path):
    """(rate, impl, variant) -> repeat -> rows of that run (one per rank)."""
    runs = OrderedDict()
    with open(path) as f:
        for line in f:
            fields = dict(kv.split("=", 1) for kv in line.split()[1:])
            key = (fields["rate"], fields["impl"], fields["variant"])
            runs.setdefault(key, OrderedDict()).setdefault(fields["repeat"], []).append(fields)
    return runs


def summarize(key, repeats, calls):
    if any(r.get("failed") for rows in repeats.values() for r in rows):
        return {"key": key, "failed": True}
    first = next(iter(repeats.values()))
    n, size = int(first[0]["nranks"]), int(first[0]["bytes"])
    seconds = statistics.median(max(float(r["seconds"]) for r in rows) for rows in repeats.values())
    rank0 = [next(r for r in rows if r["rank"] == "0") for rows in repeats.values()]
    wire = statistics.median(float(r["wire_bytes"]) for r in rank0)
    codec = statistics.median(max(float(r["codec_seconds"]) for r in rows) for rows in repeats.values())
    return {
        "key": key,
        "failed": False,
        "runs": len(repeats),
        "seconds": seconds,
        "busbw": 2.0 * (n - 1) / n * size / seconds / 1e9,
        "wire_mb": wire / 1e6 if wire >= 0 else None,
        "tc_mb": sum(int(r["tc_down"]) for r in rank0) / n / (calls * len(rank0)) / 1e6,
        "lo_mb": sum(int(r["lo"]) for r in rank0) / n / (calls * len(rank0)) / 1e6 if "lo" in rank0[0] else None,
        "codec_ms": codec * 1e3 if codec >= 0 else None,
        "relerr": max(float(r["relerr"]) for r in rank0),
    }


def best(stats, rate, impl):
    values = [s["busbw"] for s in stats if not s["failed"] and s["key"][0] == rate and s["key"][1] == impl]
    return max(values) if values else None


def ratio(value, base):
    return f"{value / base:6.2f}x" if base else f"{'-':>7}"


def optional(value, fmt):
    return format(value, fmt) if value is not None else format("-", ">" + fmt.split(".")[0])


def main():
    path, calls = sys.argv[1], int(sys.argv[2])
    stats = [summarize(k, repeats, calls) for k, repeats in parse(path).items()]
    loopback = any(not s["failed"] and s["lo_mb"] is not None for s in stats)
    lo_header = f" {'lo MB':>8}" if loopback else ""
    header = (f"{'link':>7} {'impl':>5} {'variant':>16} {'time ms':>9} {'busbw GB/s':>10} {'Gbit/s':>7}"
              f" {'wire MB':>8} {'tc MB':>8}{lo_header} {'codec ms':>8} {'rel.err':>9} {'vs MPI':>7} {'vs Gloo':>7}")
    print(header)
    print("-" * len(header))
    for s in stats:
        rate, impl, variant = s["key"]
        if s["failed"]:
            print(f"{rate:>7} {impl:>5} {variant:>16}   FAILED")
            continue
        lo = f" {optional(s['lo_mb'], '8.2f')}" if loopback else ""
        print(f"{rate:>7} {impl:>5} {variant:>16} {s['seconds'] * 1e3:9.1f} {s['busbw']:10.3f} {s['busbw'] * 8:7.2f}"
              f" {optional(s['wire_mb'], '8.2f')} {s['tc_mb']:8.2f}{lo} {optional(s['codec_ms'], '8.1f')}"
              f" {s['relerr']:9.2e} {ratio(s['busbw'], best(stats, rate, 'mpi'))}"
              f" {ratio(s['busbw'], best(stats, rate, 'gloo'))}")


if __name__ == "__main__":
    main()
