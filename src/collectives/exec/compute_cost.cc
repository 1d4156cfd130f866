// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/compute_cost.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "codecs/codec.h"
#include "collectives/exec/reduce_kernels.h"

namespace ccl::coll {

ComputeCost measureComputeCost(std::span<const codec::Params> codecs) {
  constexpr size_t n = 1 << 20;  // 4 MiB of fp32: past the L2 caches, where large calls run
  std::vector<float> x(n), y(n), acc(n, 0.0f);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 997.0f - 0.5f;
  // Best of three: the least disturbed run of each kernel, in bytes of fp32 input per second.
  auto rate = [&](auto&& run) {
    double best = 0;
    for (int k = 0; k < 3; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > 0) best = std::max(best, n * sizeof(float) / s);
    }
    return best;
  };
  ComputeCost c;
  c.copy = rate([&] { std::memcpy(y.data(), x.data(), n * sizeof(float)); });
  c.reduce = rate([&] { reduce(y.data(), x.data(), y.data(), n, cclFloat32, cclSum); });
  {
    // The peer's bytes come from a ring the size of the shared-memory channel's, which the
    // reduce reads lap after lap, as a receive in place does.
    constexpr size_t ring = (256 << 10) / sizeof(float), piece = (64 << 10) / sizeof(float);
    std::vector<float> z(x.begin(), x.begin() + ring);
    c.reduceFrom = rate([&] {
      for (size_t off = 0; off < n; off += piece)
        reduce(y.data() + off, x.data() + off, z.data() + off % ring, piece, cclFloat32, cclSum);
    });
  }
  for (const codec::Params& p : codecs) {
    if (p.codec == cclCodecNone || codec::isLowRank(p.codec)) continue;
    std::vector<uint8_t> stream(codec::maxEncodedBytes(p, n));
    size_t bytes = 0;
    const size_t k = static_cast<size_t>(p.codec);
    c.encode[k] = rate([&] { bytes = codec::encode(p, x.data(), cclFloat32, n, stream.data(), stream.size()); });
    codec::Expect e;
    e.count = n;
    e.codec = p.codec;
    c.decode[k] = rate([&] { codec::decode(stream.data(), bytes, e, y.data(), cclFloat32); });
    c.decodeAdd[k] = rate([&] { codec::decodeAccumulate(stream.data(), bytes, e, acc.data()); });
    // c.fused stays untimed: on the CPU the fused hop is a decode-accumulate and an encode
    // (codec::decodeAddEncode), which is how an untimed one prices.
  }
  return c;
}

}  // namespace ccl::coll
