// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target for one codec's decoder (CCL_FUZZ_CODEC, a cclCodec_t value).
// First byte even: the rest is a stream with this codec's magic, version and codec forced
// into its header; it is inspected, decoded to fp32/bf16/fp16 and accumulated. A decoder
// may refuse it (ccl::Error) but must not crash, leak or touch memory outside the buffers
// (ASan). First byte odd: the rest is fp32 input, encoded with this codec (a quantizer's
// stream fixed-length for some sizes) and decoded back.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "codecs/codec.h"
#include "common/error.h"

namespace {

constexpr auto kCodec = static_cast<cclCodec_t>(CCL_FUZZ_CODEC);
// Streams claiming more elements are skipped: a few bytes can claim millions (a randk stream's
// indices follow from its seed), and decoding those four ways ran at 57 inputs a second,
// too slow for the campaign's 10^6 inputs a target. Every decoding path runs at this size.
constexpr uint64_t kMaxDecodedCount = 1u << 18;

void decodeStream(const uint8_t* data, size_t size) {
  std::vector<uint8_t> s(data, data + size);
  if (s.size() >= ccl::codec::kHeaderBytes) {
    std::memcpy(s.data(), &ccl::codec::kWireMagic, 4);
    s[4] = ccl::codec::kWireVersion;
    s[5] = static_cast<uint8_t>(kCodec);
  }
  // Exact-size heap copy so ASan sees any read past the end.
  std::vector<uint8_t> exact(s);
  ccl::codec::Header h;
  try {
    h = ccl::codec::inspect(exact.data(), exact.size());
  } catch (const ccl::Error&) {
    return;
  }
  if (h.count > kMaxDecodedCount) return;
  const ccl::codec::Expect expect{static_cast<size_t>(h.count), kCodec};
  try {
    std::vector<float> y(h.count);
    ccl::codec::decode(exact.data(), exact.size(), expect, y.data(), cclFloat32);
    std::vector<uint16_t> y16(h.count);
    ccl::codec::decode(exact.data(), exact.size(), expect, y16.data(), cclBfloat16);
    ccl::codec::decode(exact.data(), exact.size(), expect, y16.data(), cclFloat16);
    ccl::codec::decodeAccumulate(exact.data(), exact.size(), expect, y.data());
  } catch (const ccl::Error&) {
  }
}

void roundTrip(const uint8_t* data, size_t size) {
  std::vector<float> x(size / 4);
  if (!x.empty()) std::memcpy(x.data(), data, x.size() * 4);
  ccl::codec::Params p = ccl::codec::defaultParams(kCodec);
  p.keepRatio = 0.25;
  p.threshold = 1.0f;
  p.stochastic = size % 2 == 1;
  p.fixedLength = ccl::codec::isQuantizer(kCodec) && size % 8 >= 4;
  std::vector<uint8_t> s(ccl::codec::maxEncodedBytes(p, x.size()));
  const size_t bound = s.size();
  s.resize(ccl::codec::encode(p, x.data(), cclFloat32, x.size(), s.data(), s.size()));
  if (p.fixedLength && s.size() != bound) __builtin_trap();  // a fixed-length stream is its bound
  std::vector<float> y(x.size());
  ccl::codec::decode(s.data(), s.size(), ccl::codec::Expect{x.size(), kCodec}, y.data(), cclFloat32);
  if (kCodec == cclCodecNone && !x.empty() && std::memcmp(x.data(), y.data(), x.size() * 4) != 0) __builtin_trap();
}

}  // namespace

// Says which decoder this target fuzzes (targets are numbered by cclCodec_t value).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::fprintf(stderr, "fuzz_decode_%d: the %s decoder\n", CCL_FUZZ_CODEC, cclCodecName(kCodec));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    decodeStream(data + 1, size - 1);
  } else {
    roundTrip(data + 1, size - 1);
  }
  return 0;
}
