# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch's own kernels for the quantizations ccl's encoders do, timed on the same GPU in the
same kit run as codecs_gpu_bench, so the two compare side by side:
  - fp8 e4m3 with one per-tensor scale: x.abs().max(), scale, x.to(torch.float8_e4m3fn);
  - int8 symmetric per block of 128 as torch ops: reshape to blocks, amax, scale, round, to int8.
Each at 64 MiB (four buffers in rotation, so the 50-60 MB L2 does not serve them) and 1 GiB of
fp32 input, CUDA events around 20 calls after 3 warm-ups; GB/s of fp32 input read, as
codecs_gpu_bench's encode column, and the round trip's error (rms and max of |x - D(E(x))|
over max|x|). Prints one line per (kernel, size); exits 77 without a GPU."""
import sys

try:
    import torch
except ImportError:
    print("torch_codec_peer: no torch")
    sys.exit(77)

if not torch.cuda.is_available():
    print("torch_codec_peer: no CUDA device")
    sys.exit(77)


def fp8_tensor(x):
    amax = x.abs().max().clamp(min=1e-30)
    scale = 448.0 / amax
    return (x * scale).to(torch.float8_e4m3fn), scale


def fp8_tensor_back(q, scale):
    return q.to(torch.float32) / scale


def int8_block(x, block=128):
    xb = x.view(-1, block)
    amax = xb.abs().amax(dim=1, keepdim=True).clamp(min=1e-30)
    scale = 127.0 / amax
    return torch.round(xb * scale).clamp(-127, 127).to(torch.int8), scale


def int8_block_back(q, scale):
    return (q.to(torch.float32) / scale).view(-1)


def timed(fn, buffers, iters=20):
    for b in buffers[:3]:
        fn(b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(iters):
        fn(buffers[i % len(buffers)])
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters / 1e3


def main():
    torch.manual_seed(0)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"# {'kernel':<22} {'MiB':>6} {'GB/s in':>9} {'rms err':>10} {'max err':>10}")
    for mib, copies in ((64, 4), (1024, 1)):
        n = mib * 2**20 // 4
        buffers = [torch.randn(n, device="cuda") for _ in range(copies)]
        for name, enc, dec in (("fp8_e4m3 per tensor", fp8_tensor, fp8_tensor_back),
                               ("int8 per 128 (ops)", int8_block, int8_block_back)):
            seconds = timed(lambda b: enc(b), buffers)
            x = buffers[0]
            y = dec(*enc(x))
            ref = x.abs().max().item()
            err = (y - x).abs()
            print(f"  {name:<22} {mib:>6} {n * 4 / seconds / 1e9:>9.1f} "
                  f"{(err.pow(2).mean().sqrt() / ref).item():>10.3e} {(err.max() / ref).item():>10.3e}")
        del buffers
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
