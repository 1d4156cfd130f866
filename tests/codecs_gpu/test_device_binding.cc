// The parts of the CUDA codecs that restate host-only CPU code (wire layout and header
// checks, scale choice and element binding of each quantiser kind, sparsifier index math)
// are __host__ __device__, so they are compared here with the CPU functions on the host.
// These tests need no GPU; they fail as soon as the two sides drift apart.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "codecs/codec.h"
#include "codecs/cuda/device_kinds.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/sparse_common.cuh"
#include "codecs/quantizer_kinds.h"
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
        if (variant) p.fp16Scales = c >= cclCodecInt8 && c <= cclCodecInt2, p.fp16Values = isSparsifier(p.codec);
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
    const Header h = readHeaderBytes(s.data());
    uint8_t again[kHeaderBytes];
    writeHeaderBytes(h, again);
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
    const Header g = readHeaderBytes(good.data());
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
        const bool dev =
            inBytes >= kHeaderBytes && headerValid(readHeaderBytes(s.data()), inBytes, g.count, expectCodec);
        ASSERT_EQ(dev, cpu) << "trial " << trial << " codec " << int(g.codec);
        if (cpu) {
          const Layout a = layoutOf(h), b = devLayout(h);
          ASSERT_TRUE(a.scales == b.scales && a.codes == b.codes && a.raw == b.raw && a.total == b.total);
        }
        (cpu ? accepted : refused) += 1;
      }
    }
  }
  // Both outcomes must have been exercised for the comparison to mean anything.
  EXPECT_GT(accepted, 100u);
  EXPECT_GT(refused, 100u);
}

// absmax values around every boundary of the scale formats, plus random magnitudes.
std::vector<float> absmaxSamples() {
  std::vector<float> v = {0.0f,           FLT_TRUE_MIN, 1e-39f,       FLT_MIN,        1e-30f,
                          1.0f,           448.0f,       57344.0f,     65504.0f,       65504.0f * 7,
                          65504.0f * 127, 0x1p-14f,     0x1p-14f * 7, 0x1p-14f * 127, FLT_MAX};
  for (float base : {FLT_MIN * 1.0f, FLT_MIN * 127.0f, FLT_MIN * 448.0f, FLT_MIN * 57344.0f, 0x1p-14f * 127.0f,
                     65504.0f * 127.0f, 0x1p-14f * 7.0f, 65504.0f * 7.0f, 0x1p-14f, 65504.0f}) {
    float f = base;
    for (int k = 0; k < 4; ++k) f = std::nextafter(f, 0.0f), v.push_back(f);
    f = base;
    for (int k = 0; k < 4; ++k) f = std::nextafter(f, INFINITY), v.push_back(f);
  }
  std::mt19937 rng(1);
  for (int k = 0; k < 20000; ++k)
    v.push_back(std::ldexp(static_cast<float>(rng() % 1000000 + 1) * 1e-6f, static_cast<int>(rng() % 270) - 150));
  return v;
}

// Bits a stored scale has: one byte for MX (e8m0), else fp32 (fp16 is masked separately).
template <class K>
constexpr uint32_t kStoredMask = std::is_same_v<K, MxKind> ? 0xffu : 0xffffffffu;

template <class CpuK, class DevK>
void compareKind(bool fp16) {
  std::mt19937 rng(2);
  for (float m : absmaxSamples()) {
    const BlockScale a = CpuK::chooseScale(m, fp16);
    const DevScale b = DevK::chooseScale(m, fp16);
    ASSERT_EQ(a.raw, b.raw) << m;
    if (a.raw) continue;
    ASSERT_EQ(a.stored, b.stored) << m;
    ASSERT_EQ(fp::floatBits(a.inv), fp::floatBits(b.inv)) << m;
    ASSERT_EQ(fp::floatBits(a.scale), fp::floatBits(b.scale)) << m;
    float sa = 0, sb = 0;
    ASSERT_TRUE(CpuK::readScale(a.stored, fp16, sa));
    ASSERT_EQ(DevK::readScale(b.stored, fp16, sb), ScaleRead::kOk);
    ASSERT_EQ(fp::floatBits(sa), fp::floatBits(sb));
    for (int k = 0; k < 8; ++k) {
      const float v = m * (static_cast<float>(rng() % 2001) / 1000.0f - 1.0f);
      const uint32_t r = static_cast<uint32_t>(rng());
      ASSERT_EQ(CpuK::quant(v, a.inv), DevK::quant(v, b.inv)) << v;
      ASSERT_EQ(CpuK::quantStochastic(v, a.inv, r), DevK::quantStochastic(v, b.inv, r)) << v;
      const uint32_t code = static_cast<uint32_t>(rng()) & ((1u << CpuK::kBits) - 1);
      ASSERT_EQ(fp::floatBits(CpuK::dequant(code, a.scale)), fp::floatBits(DevK::dequant(code, b.scale)));
    }
  }
  // Stored scales as a corrupt stream may carry them: raw marker, valid, or refused alike.
  for (int k = 0; k < 20000; ++k) {
    const uint32_t stored = static_cast<uint32_t>(rng()) & (fp16 ? 0xffffu : kStoredMask<CpuK>);
    float sa = 0, sb = 0;
    ScaleRead cpu;
    try {
      cpu = CpuK::readScale(stored, fp16, sa) ? ScaleRead::kOk : ScaleRead::kRaw;
    } catch (const Error&) {
      cpu = ScaleRead::kInvalid;
    }
    ASSERT_EQ(DevK::readScale(stored, fp16, sb), cpu) << stored;
  }
}

TEST(DeviceKinds, MatchTheCpuKinds) {
  compareKind<Fp8Kind<fp::E4M3>, DevFp8Kind<fp::E4M3>>(false);
  compareKind<Fp8Kind<fp::E5M2>, DevFp8Kind<fp::E5M2>>(false);
  compareKind<MxKind, DevMxKind>(false);
  for (bool fp16 : {false, true}) {
    compareKind<IntKind<8>, DevIntKind<8>>(fp16);
    compareKind<IntKind<4>, DevIntKind<4>>(fp16);
    compareKind<IntKind<2>, DevIntKind<2>>(fp16);
  }
}

TEST(DeviceKinds, RawMarkersAreTheCpuMarkers) {
  EXPECT_EQ(rawMarkerOf(cclCodecMxfp8E4m3, false), math::kMxRawMarker);
  EXPECT_EQ(rawMarkerOf(cclCodecInt8, true), kF16RawMarker);
  EXPECT_EQ(rawMarkerOf(cclCodecFp8E4m3, false), kF32RawMarker);
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
