# SPDX-License-Identifier: BSD-3-Clause
# DDP on CPU tensors over ccl, gradients all-reduced in int4 with error feedback per bucket.
#   torchrun --nproc-per-node 4 python/examples/ddp.py
import torch, torch.distributed as dist, torch.nn as nn
from ccl.torch import hooks

dist.init_process_group("cclz")  # ccl's backend (found through its entry point)
torch.manual_seed(0)  # the same initial weights on every rank
model = nn.Sequential(nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10))
ddp = nn.parallel.DistributedDataParallel(model)
state = hooks.CompressionState(compression="int4", feedback="residual")
ddp.register_comm_hook(state, hooks.compressed_allreduce_hook)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(100):
    x = torch.randn(32, 1024)
    loss = nn.functional.mse_loss(ddp(x), x[:, :10].tanh())
    opt.zero_grad(), loss.backward(), opt.step()
s = state.stats().allreduce
if dist.get_rank() == 0:
    print(f"loss {loss.item():.4f}  allreduce: raw {s.raw_bytes / 1e6:.1f} MB, wire {s.wire_bytes / 1e6:.1f} MB")
state.close()
dist.destroy_process_group()
