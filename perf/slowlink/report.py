#!/usr/bin/env python3
"""Prints run.sh's table from its RESULT lines.

Per run: time = the slowest rank's mean time per call; busbw = 2(n-1)/n * bytes / time
(bytes uncompressed, as nccl-tests); ratios against the best Open MPI and the best Gloo
variant at the same link rate. "wire MB" is what ccl reports it sent per rank and call;
"tc MB" is what the tbf qdiscs of the bridge passed per rank and call (all calls of the
run, warm-up, barriers and setup included, divided by warm-up + timed calls); "codec ms"
is ccl's encode + decode time per call on its busiest rank.
"""
import sys
from collections import OrderedDict


def parse(path):
    runs = OrderedDict()
    with open(path) as f:
        for line in f:
            fields = dict(kv.split("=", 1) for kv in line.split()[1:])
            key = (fields["rate"], fields["impl"], fields["variant"])
            runs.setdefault(key, []).append(fields)
    return runs


def summarize(key, rows, calls):
    if any(r.get("failed") for r in rows):
        return {"key": key, "failed": True}
    n = int(rows[0]["nranks"])
    size = int(rows[0]["bytes"])
    seconds = max(float(r["seconds"]) for r in rows)
    rank0 = next(r for r in rows if r["rank"] == "0")
    wire = float(rank0["wire_bytes"])
    return {
        "key": key,
        "failed": False,
        "n": n,
        "bytes": size,
        "seconds": seconds,
        "busbw": 2.0 * (n - 1) / n * size / seconds / 1e9,
        "wire_mb": wire / 1e6 if wire >= 0 else None,
        "tc_mb": int(rank0["tc_down"]) / n / calls / 1e6,
        "relerr": float(rank0["relerr"]),
        "codec_ms": max(float(r.get("codec_seconds", -1)) for r in rows) * 1e3,
    }


def best(stats, rate, impl):
    values = [s["busbw"] for s in stats if not s["failed"] and s["key"][0] == rate and s["key"][1] == impl]
    return max(values) if values else None


def ratio(value, base):
    return f"{value / base:6.2f}x" if base else "      -"


def main():
    path, calls = sys.argv[1], int(sys.argv[2])
    stats = [summarize(k, rows, calls) for k, rows in parse(path).items()]
    header = (f"{'link':>7} {'impl':>5} {'variant':>12} {'time ms':>9} {'busbw GB/s':>10} {'Gbit/s':>7}"
              f" {'wire MB':>8} {'tc MB':>8} {'codec ms':>8} {'rel.err':>9} {'vs MPI':>7} {'vs Gloo':>7}")
    print(header)
    print("-" * len(header))
    for s in stats:
        rate, impl, variant = s["key"]
        if s["failed"]:
            print(f"{rate:>7} {impl:>5} {variant:>12}   FAILED")
            continue
        wire = f"{s['wire_mb']:8.2f}" if s["wire_mb"] is not None else f"{'-':>8}"
        codec = f"{s['codec_ms']:8.1f}" if s["codec_ms"] >= 0 else f"{'-':>8}"
        print(f"{rate:>7} {impl:>5} {variant:>12} {s['seconds'] * 1e3:9.1f} {s['busbw']:10.3f} {s['busbw'] * 8:7.2f}"
              f" {wire} {s['tc_mb']:8.2f} {codec} {s['relerr']:9.2e} {ratio(s['busbw'], best(stats, rate, 'mpi'))}"
              f" {ratio(s['busbw'], best(stats, rate, 'gloo'))}")


if __name__ == "__main__":
    main()
