#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""One rank of a DDP step-time measurement (started by run.sh with torchrun-style env).

A multilayer perceptron of about 25 M parameters trained on a small batch, so that the
gradient allreduce dominates the step. Configurations:
  gloo        torch's gloo backend, DDP's own allreduce
  cclz        ccl's c10d backend, DDP's own allreduce (uncompressed)
  cclz-int8   ccl's backend + ccl's DDP hook: int8 with residual error feedback per bucket
  cclz-int4   the same with int4
Every configuration starts from the same weights and sees the same data, so their losses
compare directly. Rank 0 prints one JSON line: median and mean step time over the timed
steps, the final loss averaged over ranks, the parameters' checksum, raw and wire bytes.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def model_of(width: int, layers: int) -> nn.Module:
    torch.manual_seed(1234)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.GELU()]
    mods.append(nn.Linear(width, 16))
    return nn.Sequential(*mods)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, choices=["gloo", "cclz", "cclz-int8", "cclz-int4"])
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--bucket-mb", type=int, default=25)
    a = ap.parse_args()

    t_start = time.perf_counter()

    def phase(what: str) -> None:  # start-up phases on stderr, to see where set-up time goes
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"# {a.config}: {what} at {time.perf_counter() - t_start:.1f} s", file=sys.stderr, flush=True)

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    backend = "gloo" if a.config == "gloo" else "cclz"
    if backend == "cclz":
        import ccl.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(backend)
    phase("process group ready")
    rank, size = dist.get_rank(), dist.get_world_size()

    model = model_of(a.width, a.layers)
    params = sum(p.numel() for p in model.parameters())
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    state = None
    if a.config in ("cclz-int8", "cclz-int4"):
        from ccl.torch import hooks

        state = hooks.CompressionState(compression=a.config.split("-")[1], feedback="residual")
        ddp.register_comm_hook(state, hooks.compressed_allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr)
    phase("DDP ready")

    # A fixed regression task: a random teacher, inputs drawn per rank and step.
    teacher = torch.Generator().manual_seed(99)
    target = torch.randn(a.width, 16, generator=teacher) / a.width**0.5
    data = torch.Generator().manual_seed(1000 + rank)

    times, loss = [], None
    for step in range(a.warmup + a.steps):
        x = torch.randn(a.batch, a.width, generator=data)
        y = x @ target
        dist.barrier()
        t0 = time.perf_counter()
        out = ddp(x)
        loss = nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        t1 = time.perf_counter()
        if step >= a.warmup:
            times.append(t1 - t0)

    phase("steps done")
    final = loss.detach().clone()
    dist.all_reduce(final)
    checksum = float(sum(p.detach().double().abs().sum() for p in model.parameters()))
    if state is not None:
        s = state.stats().allreduce
        raw, wire = s.raw_bytes, s.wire_bytes
    elif backend == "cclz":
        s = ccl.torch.stats()["allreduce"]
        raw, wire = int(s["raw_bytes"]), int(s["wire_bytes"])
    else:
        raw = wire = None  # gloo keeps no counters
    if rank == 0:
        print(json.dumps({
            "config": a.config, "ranks": size, "params": params, "batch": a.batch, "steps": a.steps,
            "step_median_s": statistics.median(times), "step_mean_s": statistics.fmean(times),
            "loss": final.item() / size, "param_abs_sum": checksum, "raw_bytes": raw, "wire_bytes": wire,
        }), flush=True)
    if state is not None:
        state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
