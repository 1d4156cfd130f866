// SPDX-License-Identifier: BSD-3-Clause
// The stand-in NCCL's reduction (standin_reduce.cu), for its collectives (standin_nccl.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace standin {

// The most ranks a stand-in collective takes (the kernel's sources travel as its parameter).
constexpr int kMaxRanks = 64;

// Enqueues on `stream`: out[i] = sources[0][i] op ... op sources[n-1][i] for i < count, with
// `type` an ncclDataType_t and `op` a builtin ncclRedOp_t (sum, prod, max, min, avg).
// cudaErrorInvalidValue for anything else, before enqueuing.
cudaError_t reduce(const void* const* sources, int n, void* out, size_t count, int type, int op, cudaStream_t stream);

}  // namespace standin
