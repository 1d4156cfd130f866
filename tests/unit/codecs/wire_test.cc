// SPDX-License-Identifier: BSD-3-Clause
// Wire format and interface: names, parameter checks, codec none round trip, header
// validation, mismatch detection, and corrupted streams refused without touching memory
// outside the buffers (ASan builds check the latter).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec_test_util.h"
#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::codec::test {
namespace {

TEST(CodecNames, RoundTripEveryCodec) {
  for (int c = 0; c < cclNumCodecs; ++c) {
    cclCodec_t parsed = cclNumCodecs;
    ASSERT_TRUE(codecFromName(cclCodecName(static_cast<cclCodec_t>(c)), &parsed));
    EXPECT_EQ(parsed, c);
  }
  cclCodec_t parsed = cclCodecInt8;
  EXPECT_TRUE(codecFromName("INT4", &parsed));
  EXPECT_EQ(parsed, cclCodecInt4);
  EXPECT_FALSE(codecFromName("int3", &parsed));
  EXPECT_EQ(parsed, cclCodecInt4) << "output untouched on failure";
  EXPECT_FALSE(codecFromName(nullptr, &parsed));
  EXPECT_STREQ(cclCodecName(static_cast<cclCodec_t>(77)), "invalid");
  EXPECT_STREQ(cclCodecName(cclCodecMxfp8E4m3), "mxfp8_e4m3");
}

TEST(CodecParams, ResolveDefaultsAndRefuseBadFields) {
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  c.codec = cclCodecMxfp8E4m3;
  EXPECT_EQ(resolveParams(&c).blockSize, 32u);
  c.codec = cclCodecInt4;
  c.blockSize = 32;
  c.scaleBits = 16;
  Params p = resolveParams(&c);
  EXPECT_EQ(p.blockSize, 32u);
  EXPECT_TRUE(p.fp16Scales);
  c.blockSize = 30;
  EXPECT_THROW(resolveParams(&c), Error);
  c.blockSize = 0;
  c.bits = 8;
  EXPECT_THROW(resolveParams(&c), Error);
  c = CCL_COMPRESSION_INITIALIZER;
  c.codec = cclCodecTopK;
  c.keepRatio = 1.5;
  EXPECT_THROW(resolveParams(&c), Error);
  c.magic = 0;
  EXPECT_THROW(resolveParams(&c), Error);
  // A caller built against a shorter struct: fields past its size take defaults.
  cclCompression_t shortStruct = CCL_COMPRESSION_INITIALIZER;
  shortStruct.codec = cclCodecTopK;
  shortStruct.keepRatio = 5.0;  // beyond the size it reports, so ignored
  shortStruct.size = offsetof(cclCompression_t, keepRatio);
  EXPECT_DOUBLE_EQ(resolveParams(&shortStruct).keepRatio, 0.01);
  EXPECT_EQ(resolveParams(nullptr).codec, cclCodecNone);
}

TEST(CodecNone, RoundTripsBitExactlyForEveryLength) {
  const Params p = params(cclCodecNone);
  for (size_t n = 0; n <= 1000; ++n) {
    const auto x = makeInput(allPatterns()[n % allPatterns().size()], n, static_cast<uint32_t>(n));
    const auto y = decodeVec(encodeVec(p, x), n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_TRUE(fp::floatBits(x[i]) == fp::floatBits(y[i]) || (std::isnan(x[i]) && std::isnan(y[i])));
  }
}

TEST(Wire, MismatchedCountOrCodecIsInvalidUsage) {
  const auto s = encodeVec(params(cclCodecInt8), makeInput(Pattern::kRandom, 100, 1));
  std::vector<float> y(101);
  try {
    decode(s.data(), s.size(), Expect{101}, y.data(), cclFloat32);
    FAIL() << "count mismatch accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
  }
  try {
    decodeAccumulate(s.data(), s.size(), Expect{100, cclCodecInt4}, y.data());
    FAIL() << "codec mismatch accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
  }
  EXPECT_THROW(decode(s.data(), s.size() - 1, Expect{100}, y.data(), cclFloat32), Error) << "truncated";
  EXPECT_THROW(decode(s.data(), 3, Expect{100}, y.data(), cclFloat32), Error);
}

// A failed sender's stream (what a rank whose call failed writes where it would encode) is
// refused by every decoder as the sender's failure, a remote error, whatever the codec
// expected; a buffer without room for a header gets none.
TEST(Wire, AFailedSendersStreamIsARemoteError) {
  std::vector<uint8_t> s(64, 0x5a);
  ASSERT_EQ(writeFailedSender(s.data(), s.size()), kHeaderBytes);
  EXPECT_EQ(s[kHeaderBytes], 0x5a) << "wrote past the header";
  EXPECT_STREQ(headerProblem(loadHeader(s.data()), s.size()), "sent by a rank whose call had already failed");
  std::vector<float> y(100, 7.0f);
  for (const cclCodec_t c : {cclCodecNone, cclCodecInt8, cclCodecTopK, cclCodecPowerSgd}) {
    try {
      decodeAccumulate(s.data(), kHeaderBytes, Expect{100, c}, y.data());
      ADD_FAILURE() << cclCodecName(c) << ": a failed sender's stream was decoded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclRemoteError) << e.what();
      EXPECT_NE(std::string(e.what()).find("whose call had already failed"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(y, std::vector<float>(100, 7.0f)) << "a refused stream was added";
  EXPECT_THROW(streamBytes(s.data(), kHeaderBytes), Error) << "a failed sender's stream has no length of its own";
  // Only the mark makes one: the same byte in a header of another magic is a bad magic.
  s[0] ^= 1;
  EXPECT_STREQ(headerProblem(loadHeader(s.data()), s.size()), "bad magic");
  EXPECT_EQ(writeFailedSender(s.data(), kHeaderBytes - 1), 0u);
  EXPECT_EQ(writeFailedSender(nullptr, 64), 0u);
}

TEST(Wire, EncodeRefusesSmallOutputAndBadType) {
  const Params p = params(cclCodecInt8);
  const auto x = makeInput(Pattern::kRandom, 100, 1);
  std::vector<uint8_t> out(maxEncodedBytes(p, x.size()));
  EXPECT_THROW(encode(p, x.data(), cclFloat32, x.size(), out.data(), out.size() - 1), Error);
  EXPECT_THROW(encode(p, x.data(), cclInt32, x.size(), out.data(), out.size()), Error);
}

// Random corruptions of valid streams: each either decodes (values may be anything) or is
// refused with cclInvalidUsage; an accumulate that is refused leaves acc untouched.
TEST(Wire, CorruptedStreamsAreRefusedOrDecodedWithinBuffers) {
  std::mt19937 rng(77);
  for (int c = 0; c < cclNumCodecs; ++c) {
    Params p = params(static_cast<cclCodec_t>(c));
    p.keepRatio = 0.1;
    p.threshold = 1.0f;
    auto x = makeInput(Pattern::kNonFinite, 300, static_cast<uint32_t>(c));
    const auto good = encodeVec(p, x);
    for (int trial = 0; trial < 2000; ++trial) {
      auto s = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) s[rng() % s.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      if (rng() % 8 == 0) s.resize(rng() % (s.size() + 1));
      std::vector<float> acc(x.size(), 1.0f);
      try {
        decodeAccumulate(s.data(), s.size(), Expect{x.size()}, acc.data());
      } catch (const Error& e) {
        ASSERT_EQ(e.code(), cclInvalidUsage);
        ASSERT_EQ(acc, std::vector<float>(x.size(), 1.0f));
      }
    }
  }
}

}  // namespace
}  // namespace ccl::codec::test
