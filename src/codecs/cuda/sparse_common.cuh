// SPDX-License-Identifier: BSD-3-Clause
// Index math of the sparsifiers on the device. codecs/topk_select.h defines the same two
// functions for the host only (magnitudeKey is a plain inline, randomKIndex is out of
// line); these must stay identical to them, and the GPU test checks that they do.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "codecs/math/rng.h"

namespace ccl::codec::cuda {

// Ordering key of |x|: larger key, larger magnitude; NaN ranks above infinity.
__host__ __device__ inline uint32_t devMagnitudeKey(uint32_t bits) { return bits & 0x7fffffffu; }

// Position of stratum j of randk: one index drawn uniformly in [j*n/k, (j+1)*n/k).
__host__ __device__ inline uint32_t devRandomKIndex(math::RngKey key, uint64_t n, uint64_t k, uint64_t j) {
  const uint64_t lo = j * n / k;
  const uint64_t hi = (j + 1) * n / k;
  const uint32_t r = math::rngBits(key, j);
  return static_cast<uint32_t>(lo + ((static_cast<uint64_t>(r) * (hi - lo)) >> 32));
}

}  // namespace ccl::codec::cuda
