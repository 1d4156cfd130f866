// SPDX-License-Identifier: BSD-3-Clause
// The command line of the perf binaries: sizes parse as nccl-tests spells them, and what is
// no size (nan, inf, 2^63 bytes or more, which converted to 0 and ran an empty sweep) is a
// usage error; -Z's list of codecs is the library's.
#include "harness/options.h"

#include <gtest/gtest.h>

#include <string>

namespace cclperf {
namespace {

TEST(ParseSize, BinaryUnits) {
  EXPECT_EQ(parseSize("8"), 8u);
  EXPECT_EQ(parseSize("1K"), 1024u);
  EXPECT_EQ(parseSize("64M"), 64u << 20);
  EXPECT_EQ(parseSize("1G"), 1u << 30);
  EXPECT_EQ(parseSize("0.5K"), 512u);
  EXPECT_EQ(parseSize("8388607G"), (size_t(1) << 53) - (size_t(1) << 30));
}

TEST(ParseSize, WhatIsNoSizeIsAUsageError) {
  for (const char* text :
       {"nan", "NAN", "inf", "-inf", "infinity", "1e30", "8589934592G", "9223372036854775808", "-1", "", "1X", "K"})
    EXPECT_THROW(parseSize(text), UsageError) << text;
}

TEST(CodecNames, EveryCodecOfTheLibrary) {
  const std::string names = std::string(" ").append(codecNames()).append(" ");
  for (int c = 0; c < cclCodecCount(); ++c)
    EXPECT_NE(names.find(std::string(" ") + cclCodecName(cclCodec_t(c)) + " "), std::string::npos) << c;
  for (const char* late : {"powersgd", "mxfp4", "nvfp4", "int2_midrise"})
    EXPECT_NE(names.find(std::string(" ") + late + " "), std::string::npos) << late;
}

}  // namespace
}  // namespace cclperf
