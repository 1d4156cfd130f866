// SPDX-License-Identifier: BSD-3-Clause
// Received streams on the GPU: a corrupted or unexpected stream must be refused exactly when
// the CPU decoder refuses it, leaving the output untouched; an accepted one must decode as
// on the CPU. The host-side argument checks are tested too; they run without a device.
#include <random>
#include <string>
#include <vector>

#include "codecs/cuda/codec_kernels.h"
#include "common/error.h"
#include "gpu_test_util.h"

namespace ccl::codec::gputest {
namespace {

struct Case {
  const char* name;
  cclCodec_t codec;
  double keepRatio;
  Input input;
};

const Case kCases[] = {
    {"int4_raw_blocks", cclCodecInt4, 0, Input::kSpecials}, {"e4m3_mixed", cclCodecFp8E4m3, 0, Input::kMixedScales},
    {"mxfp8", cclCodecMxfp8E4m3, 0, Input::kSpecials},      {"topk_gaps", cclCodecTopK, 0.01, Input::kNormal},
    {"topk_bitmap", cclCodecTopK, 0.5, Input::kNormal},     {"threshold", cclCodecThreshold, 0, Input::kNormal},
    {"randk", cclCodecRandK, 0.05, Input::kNormal},         {"none", cclCodecNone, 0, Input::kNormal},
};

bool cpuAccepts(const std::vector<uint8_t>& s, const Expect& e, std::vector<uint8_t>& y) {
  try {
    decode(s.data(), s.size(), e, y.data(), cclFloat32);
    return true;
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), cclInvalidUsage);
    return false;
  }
}

TEST(GpuStreamValidation, CorruptionsAreRefusedExactlyWhenTheCpuRefusesThem) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 rng(11);
  for (const Case& c : kCases) {
    Params p = defaultParams(c.codec);
    if (c.keepRatio > 0) p.keepRatio = c.keepRatio;
    p.threshold = 1.5f;
    const size_t n = 3001;
    const std::vector<float> x = makeInput(c.input, n, 5, p.blockSize);
    std::vector<uint8_t> good(maxEncodedBytes(p, n));
    good.resize(encode(p, x.data(), cclFloat32, n, good.data(), good.size()));
    const Expect e{n, c.codec};
    for (int trial = 0; trial < 120; ++trial) {
      std::vector<uint8_t> s = good;
      if (trial % 10 == 9) {
        s.resize(rng() % s.size());  // truncated
      } else {
        // Mostly the header and the first sections, where a flip changes the structure.
        const size_t at = rng() % (trial % 2 ? s.size() : std::min<size_t>(s.size(), 64));
        s[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      std::vector<uint8_t> want(n * 4, 0x7b);
      const bool ok = cpuAccepts(s, e, want);
      uint32_t status = 99;
      const std::vector<uint8_t> got = gpuDecode(s, e, n, cclFloat32, status);
      ASSERT_EQ(status == 0, ok) << c.name << " trial " << trial << " status " << status;
      ASSERT_EQ(got, want) << c.name << " trial " << trial << (ok ? ": decoded differently" : ": output touched");
      const std::vector<float> acc(n, 1.0f);
      const std::vector<float> sum = gpuAccumulate(s, e, acc, status);
      ASSERT_EQ(status == 0, ok) << c.name << " trial " << trial;
      if (!ok) {
        ASSERT_EQ(bytesOf(sum), bytesOf(acc)) << c.name << " trial " << trial << ": accumulator touched";
      }
    }
  }
}

TEST(GpuStreamValidation, UnexpectedCodecOrCountIsABadHeader) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  const Params p = defaultParams(cclCodecInt8);
  const std::vector<float> x = makeInput(Input::kNormal, 1000, 3, p.blockSize);
  std::vector<uint8_t> s(maxEncodedBytes(p, x.size()));
  s.resize(encode(p, x.data(), cclFloat32, x.size(), s.data(), s.size()));
  uint32_t status = 0;
  gpuDecode(s, Expect{999, cclCodecInt8}, 999, cclFloat32, status);
  EXPECT_EQ(status, cuda::kStatusBadHeader);
  gpuDecode(s, Expect{1000, cclCodecInt4}, 1000, cclFloat32, status);
  EXPECT_EQ(status, cuda::kStatusBadHeader);
  EXPECT_THROW(cuda::throwIfInvalid(status), Error);
}

// Everything below is decided on the host before any CUDA call, so it runs without a GPU.
TEST(GpuCodecArguments, StatusWordsMapToInvalidUsageOrARemoteError) {
  EXPECT_NO_THROW(cuda::throwIfInvalid(0));
  for (uint32_t bits : {1u, 2u, 4u, 8u, 6u, 16u | 1u}) {
    try {
      cuda::throwIfInvalid(bits);
      ADD_FAILURE() << "status " << bits << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidUsage);
    }
  }
  // A failed sender's stream alone is the sender's failure: a remote error, named.
  try {
    cuda::throwIfInvalid(cuda::kStatusFailedSender);
    ADD_FAILURE() << "a failed sender's status did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError);
    EXPECT_NE(std::string(e.what()).find("whose call had already failed"), std::string::npos) << e.what();
  }
}

TEST(GpuCodecArguments, BadCallsThrowBeforeAnythingIsEnqueued) {
  cuda::Workspace ws;
  const Params p = defaultParams(cclCodecInt8);
  float dummy[4] = {};
  auto code = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return cclSuccess;
  };
  // Output smaller than maxEncodedBytes.
  EXPECT_EQ(code([&] { cuda::encode(p, dummy, cclFloat32, 100, dummy, 16, nullptr, nullptr, ws, nullptr); }),
            cclInvalidArgument);
  // Element type a codec does not take.
  EXPECT_EQ(code([&] { cuda::encode(p, dummy, cclInt32, 1, dummy, 1 << 20, nullptr, nullptr, ws, nullptr); }),
            cclInvalidArgument);
  // Bad parameters.
  Params bad = p;
  bad.blockSize = 12;
  EXPECT_EQ(code([&] { cuda::encode(bad, dummy, cclFloat32, 1, dummy, 1 << 20, nullptr, nullptr, ws, nullptr); }),
            cclInvalidArgument);
  uint32_t status = 0;
  // The GPU decoder needs the codec named, a status word and a type it can write.
  EXPECT_EQ(code([&] { cuda::decode(dummy, 16, Expect{1}, dummy, cclFloat32, &status, ws, nullptr); }),
            cclInvalidArgument);
  EXPECT_EQ(code([&] {
              cuda::decode(dummy, 16, Expect{1, cclCodecInt8}, dummy, cclFloat32, nullptr, ws, nullptr);
            }),
            cclInvalidArgument);
  EXPECT_EQ(code([&] {
              cuda::decode(dummy, 16, Expect{1, cclCodecInt8}, dummy, cclInt8, &status, ws, nullptr);
            }),
            cclInvalidArgument);
  EXPECT_EQ(code([&] {
              cuda::decode(dummy, 16, Expect{1, cclCodecInt8}, nullptr, cclFloat32, &status, ws, nullptr);
            }),
            cclInvalidArgument);
}

}  // namespace
}  // namespace ccl::codec::gputest
