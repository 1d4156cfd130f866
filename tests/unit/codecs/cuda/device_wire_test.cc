// SPDX-License-Identifier: BSD-3-Clause
// The wire layout, header checks and quantizer kinds are one __host__ __device__ code for
// both sides (wire.h, quantizer_kinds.h). What the CUDA codecs still add of their own (the
// header's byte-wise access, the receiver's expectations, the sparsifier index math) is
// compared here with the CPU code on the host. These tests need no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codecs/codec.h"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/sparse_common.cuh"
#include "codecs/topk_select.h"
#include "codecs/wire.h"
#include "common/error.h"

namespace ccl::codec::cuda {
namespace {

// Headers of real streams of every codec, then mutated field by field.
std::vector<std::vector<uint8_t>> sampleStreams() {
  std::vector<std::vector<uint8_t>> out;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int c = 0; c < cclNumCodecs; ++c) {
    for (size_t n : {0ul, 5ul, 300ul, 5000ul}) {
      for (int variant = 0; variant < 2; ++variant) {
        Params p = defaultParams(static_cast<cclCodec_t>(c));
        if (variant) p.fp16Scales = codecInfo(c).fp16Scales, p.fp16Values = isSparsifier(p.codec);
        p.keepRatio = variant ? 0.5 : 0.01;
        p.threshold = variant ? 0.1f : 1.0f;
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = i % 97 == 3 ? NAN : normal(rng);
        std::vector<uint8_t> s(maxEncodedBytes(p, n));
        s.resize(encode(p, x.data(), cclFloat32, n, s.data(), s.size()));
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

bool cpuHeaderOk(const std::vector<uint8_t>& s, size_t inBytes, uint64_t count, int codec, Header& h) {
  try {
    h = readHeader(s.data(), inBytes);
  } catch (const Error&) {
    return false;
  }
  return h.codec == codec && h.count == count;
}

TEST(DeviceWire, HeaderBytesRoundTripAsTheCpuWritesThem) {
  for (const auto& s : sampleStreams()) {
    const Header h = loadHeader(s.data());
    uint8_t again[kHeaderBytes];
    storeHeader(h, again);
    EXPECT_EQ(std::memcmp(again, s.data(), kHeaderBytes), 0);
    Header viaCpu;
    std::memcpy(&viaCpu, s.data(), sizeof(viaCpu));
    EXPECT_EQ(std::memcmp(&viaCpu, &h, sizeof(h)), 0);
  }
}

TEST(DeviceWire, HeaderChecksAndLayoutAgreeWithReadHeader) {
  std::mt19937 rng(9);
  size_t accepted = 0, refused = 0;
  for (const auto& good : sampleStreams()) {
    const Header g = loadHeader(good.data());
    for (int trial = 0; trial < 400; ++trial) {
      std::vector<uint8_t> s = good;
      if (trial > 0) {
        const size_t at = rng() % kHeaderBytes;
        s[at] = trial % 3 ? static_cast<uint8_t>(s[at] ^ (1u << (rng() % 8))) : static_cast<uint8_t>(rng());
      }
      const size_t inBytes = trial % 5 == 4 ? rng() % (s.size() + 1) : s.size();
      for (int expectCodec : {static_cast<int>(g.codec), static_cast<int>((g.codec + 1) % cclNumCodecs)}) {
        Header h;
        const bool cpu = inBytes >= kHeaderBytes && cpuHeaderOk(s, inBytes, g.count, expectCodec, h);
        const bool dev = inBytes >= kHeaderBytes && headerValid(loadHeader(s.data()), inBytes, g.count, expectCodec);
        ASSERT_EQ(dev, cpu) << "trial " << trial << " codec " << int(g.codec);
        (cpu ? accepted : refused) += 1;
      }
    }
  }
  // Both outcomes must have been exercised for the comparison to mean anything.
  EXPECT_GT(accepted, 100u);
  EXPECT_GT(refused, 100u);
}

TEST(DeviceSparse, IndexMathMatchesTheCpu) {
  std::mt19937 rng(4);
  for (int k = 0; k < 100000; ++k) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    ASSERT_EQ(devMagnitudeKey(bits), magnitudeKey(bits));
  }
  for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{1000}, uint64_t{4294967295}}) {
    for (uint64_t kept : {uint64_t{1}, n / 3 + 1, n}) {
      const math::RngKey key = math::rngKey(rng());
      for (int t = 0; t < 200; ++t) {
        const uint64_t j = rng() % kept;
        ASSERT_EQ(devRandomKIndex(key, n, kept, j), randomKIndex(key, n, kept, j)) << n << " " << kept << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace ccl::codec::cuda
