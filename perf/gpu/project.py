#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Projected allreduce time on the GPU path: ccl's two-shot compressed allreduce (stream
executor over NCCL, codec kernels on the GPU) against NCCL's uncompressed ring, for link
speeds of 25-400 Gbit/s. A model, not a measurement: the link term is bytes / bandwidth
(NCCL's ring moves 2(n-1)/n of the buffer per rank; two-shot moves the same share of
encoded bytes), the codec term is bytes / kernel throughput, added (a wave's codec steps do
not overlap its transfers). The kernel throughputs are inputs: pass what perf/codecs
measured on the device (`codecs_bench -d device`), or keep the defaults stated below."""
import argparse

# Wire bits per element of each codec's stream at large sizes (perf/codecs README, 64 MiB).
BITS = {"int8": 8.25, "int4": 4.25, "fp8_e4m3": 8.25, "int2": 2.25}


def times(size, n, gbit, codec, enc, dec):
    link = gbit / 8.0 * 1e9  # bytes/s
    share = 2.0 * (n - 1) / n
    t_nccl = share * size / link
    ratio = BITS[codec] / 32.0
    t_wire = share * size * ratio / link
    # two-shot: encode all (1), decode-add n-1 pieces of 1/n (~1), encode the owned sum (1/n),
    # decode the gathered result (1), all in units of the fp32 buffer
    t_codec = size * (1.0 / enc + 1.0 / dec + 1.0 / (n * enc) + 1.0 / dec)
    return t_nccl, t_wire + t_codec, t_codec


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", type=float, default=256e6, help="bytes of fp32 per rank (default 256 MB)")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--encode-gbs", type=float, default=500.0, help="encode throughput, GB/s of fp32 input")
    p.add_argument("--decode-gbs", type=float, default=500.0, help="decode(-add) throughput, GB/s of fp32 output")
    a = p.parse_args()
    enc, dec = a.encode_gbs * 1e9, a.decode_gbs * 1e9
    print(f"| link (Gbit/s) | NCCL ring (ms) | " + " | ".join(f"{c} two-shot (ms, x NCCL)" for c in BITS) + " |")
    print("|---|---|" + "---|" * len(BITS))
    for gbit in (25, 50, 100, 200, 400):
        row = []
        for c in BITS:
            t_nccl, t_ccl, _ = times(a.size, a.ranks, gbit, c, enc, dec)
            row.append(f"{t_ccl * 1e3:.1f} ({t_nccl / t_ccl:.1f}x)")
        t_nccl = times(a.size, a.ranks, gbit, "int8", enc, dec)[0]
        print(f"| {gbit} | {t_nccl * 1e3:.1f} | " + " | ".join(row) + " |")
    t_codec = times(a.size, a.ranks, 25, "int8", enc, dec)[2]
    print(f"\ncodec time per call: {t_codec * 1e3:.2f} ms "
          f"(size {a.size / 1e6:.0f} MB, {a.ranks} ranks, encode {a.encode_gbs:.0f} GB/s, decode {a.decode_gbs:.0f} GB/s)")


if __name__ == "__main__":
    main()
