// SPDX-License-Identifier: BSD-3-Clause
// What a communicator is given at init besides its peers, seen from inside the library: the
// host identity (the host's hash, CCL_HOST_ID, config->hostId; checked text) and the codec of
// the steps inside a node (config->intraCompression, CCL_CODEC_INTRA).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "api/comm.h"
#include "api/compression.h"
#include "api/tuning.h"
#include "common/error.h"
#include "common/host_id.h"
#include "rank_threads.h"
#include "scoped_env.h"

namespace ccl {
namespace {

using ccltest::ScopedEnv;

// The message of the Error that fn throws ("" if it throws none, or another exception).
template <class F>
std::string errorOf(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

TEST(HostIdentity, TextIsHashedWithFnv1a) {
  EXPECT_EQ(host::hashText(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(host::hashText("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(host::hashText("node-1"), host::hashText("node-2"));
}

TEST(HostIdentity, TheHostsOwnIsStableAndDefault) {
  ScopedEnv unset("CCL_HOST_ID", nullptr);
  EXPECT_EQ(host::hostHash(), host::hostHash());
  const host::Identity id = host::resolve(nullptr);
  EXPECT_EQ(id.id, host::hostHash());
  EXPECT_EQ(id.source, "host name and boot id");
}

TEST(HostIdentity, ConfigThenEnvironment) {
  ScopedEnv env("CCL_HOST_ID", "netns-2");
  EXPECT_EQ(host::resolve(nullptr).id, host::hashText("netns-2"));
  EXPECT_EQ(host::resolve(nullptr).source, "CCL_HOST_ID");
  EXPECT_EQ(host::resolve("rack-7").id, host::hashText("rack-7"));
  EXPECT_EQ(host::resolve("rack-7").source, "config->hostId");
}

TEST(HostIdentity, OnlyPrintableTextOfAtMost255Characters) {
  EXPECT_EQ(errorOf([] { host::checkIdText(std::string(host::kMaxIdChars, 'x'), "id"); }), "");
  EXPECT_EQ(errorOf([] { host::checkIdText("h\xc3\xa9te", "id"); }), "") << "UTF-8 host names are text";
  EXPECT_NE(errorOf([] { host::checkIdText("", "id"); }).find("id is empty"), std::string::npos);
  EXPECT_NE(errorOf([] { host::checkIdText(std::string(host::kMaxIdChars + 1, 'x'), "id"); }).find("256 characters"),
            std::string::npos);
  for (const char* bad : {"a\nb", "a\rb", "\tab", "ab\x1b", "ab\x7f"})
    EXPECT_NE(errorOf([&] { host::checkIdText(bad, "id"); }).find("control character"), std::string::npos) << bad;
  ScopedEnv env("CCL_HOST_ID", "a b\x01");
  EXPECT_NE(
      errorOf([] { host::resolve(nullptr); }).find("CCL_HOST_ID holds a control character (code 1) at position 3"),
      std::string::npos);
}

TEST(IntraCodec, FromTheEnvironmentOrTheConfig) {
  {
    ScopedEnv unset("CCL_CODEC_INTRA", nullptr);
    EXPECT_EQ(api::intraCodecFromEnv(nullptr).codec, cclCodecNone) << "lossy compression is opt-in";
  }
  ScopedEnv env("CCL_CODEC_INTRA", "INT8");
  ScopedEnv block("CCL_CODEC_BLOCK", "64");
  const codec::Params p = api::intraCodecFromEnv(nullptr);
  EXPECT_EQ(p.codec, cclCodecInt8);
  EXPECT_EQ(p.blockSize, 64u) << "the CCL_CODEC_* parameters apply to it too";
  cclCompression_t given = CCL_COMPRESSION_INITIALIZER;
  given.codec = cclCodecFp8E4m3;
  EXPECT_EQ(api::intraCodecFromEnv(&given).codec, cclCodecFp8E4m3);
  given.blockSize = 7;
  EXPECT_NE(errorOf([&] { api::intraCodecFromEnv(&given); }), "");
  ScopedEnv bad("CCL_CODEC_INTRA", "zip");
  EXPECT_NE(errorOf([] { api::intraCodecFromEnv(nullptr); }).find("CCL_CODEC_INTRA='zip'"), std::string::npos);
}

// A one-rank communicator keeps what its config gave, and none of the caller's pointers.
TEST(IntraCodec, KeptOnTheCommunicatorWithItsHostIdentity) {
  cclUniqueId id{};
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  cclCompression_t intra = CCL_COMPRESSION_INITIALIZER;
  intra.codec = cclCodecInt4;
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.hostId = "box-3";
  config.intraCompression = &intra;
  cclComm_t comm = nullptr;
  ASSERT_EQ(cclCommInitRankConfig(&comm, 1, id, 0, &config), cclSuccess) << cclGetLastError(nullptr);
  EXPECT_EQ(comm->compression.intraCodec.codec, cclCodecInt4);
  EXPECT_EQ(comm->compression.policy.codec.codec, cclCodecNone) << "the default codec is another setting";
  EXPECT_EQ(comm->placement.hostId, host::hashText("box-3"));
  EXPECT_EQ(comm->config.hostId, nullptr);
  EXPECT_EQ(comm->config.intraCompression, nullptr);
  ASSERT_NE(comm->placement.topology, nullptr);
  EXPECT_EQ(comm->placement.topology->nodes(), 1);
  EXPECT_EQ(cclCommDestroy(comm), cclSuccess);

  ScopedEnv bad("CCL_CODEC_INTRA", "zip");
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  EXPECT_EQ(cclCommInitRank(&comm, 1, id, 0), cclInvalidArgument);
  EXPECT_NE(std::string(cclGetLastError(nullptr)).find("CCL_CODEC_INTRA"), std::string::npos)
      << cclGetLastError(nullptr);
}

// CCL_CODEC=auto probes each level's links once per pair of hosts in a process: a later
// communicator over the same hosts takes the figures the first one measured (the same bits,
// which two probes never give), and hosts not seen before are probed.
TEST(LinkCache, ALaterCommunicatorTakesTheLinksAnEarlierOneMeasured) {
  ScopedEnv codec("CCL_CODEC", "auto:int8");
  ScopedEnv link("CCL_LINK_MODEL", nullptr);
  auto models = [](const char* prefix) {
    cclUniqueId id{};
    EXPECT_EQ(cclGetUniqueId(&id), cclSuccess);
    std::vector<coll::CostModel> got(4);
    ccltest::expectNoneThrew(ccltest::runRanks(4, [&](int r) {
      const std::string host = std::string(prefix) + std::to_string(r / 2);
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      config.hostId = host.c_str();
      cclComm_t comm = nullptr;
      ASSERT_EQ(cclCommInitRankConfig(&comm, 4, id, r, &config), cclSuccess) << cclGetLastError(nullptr);
      ASSERT_NE(comm->tuning.costModel, nullptr);
      got[static_cast<size_t>(r)] = *comm->tuning.costModel;
      EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
    }));
    return got[0];
  };
  const coll::CostModel first = models("linkcache-a-");
  EXPECT_GT(first.inside.alpha, 0.0);
  EXPECT_GT(first.across.beta, 0.0);
  const coll::CostModel again = models("linkcache-a-");
  EXPECT_EQ(again.inside.alpha, first.inside.alpha);
  EXPECT_EQ(again.inside.beta, first.inside.beta);
  EXPECT_EQ(again.across.alpha, first.across.alpha);
  EXPECT_EQ(again.across.beta, first.across.beta);
  const coll::CostModel other = models("linkcache-b-");
  EXPECT_FALSE(other.inside.alpha == first.inside.alpha && other.across.alpha == first.across.alpha &&
               other.inside.beta == first.inside.beta && other.across.beta == first.across.beta)
      << "new hosts are probed";
}

// Calls far from the model's predictions, kDriftCalls in a row, take the links they were
// priced on out of the process's cache: the next communicator over those hosts probes again.
// Fewer, or a run broken by one call near its prediction, leave them there.
TEST(LinkCache, CallsFarFromTheirPredictionsSendTheLinksToBeMeasuredAgain) {
  ScopedEnv codec("CCL_CODEC", "auto:int8");
  ScopedEnv link("CCL_LINK_MODEL", nullptr);
  // A communicator over hosts linkcache-c-0 and -1; rank 0's calls then take `far` times
  // 10x their prediction, with one near it after the first `breakAfter` of them.
  auto models = [](int far, int breakAfter) {
    cclUniqueId id{};
    EXPECT_EQ(cclGetUniqueId(&id), cclSuccess);
    coll::CostModel got;
    ccltest::expectNoneThrew(ccltest::runRanks(4, [&](int r) {
      const std::string host = "linkcache-c-" + std::to_string(r / 2);
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      config.hostId = host.c_str();
      cclComm_t comm = nullptr;
      ASSERT_EQ(cclCommInitRankConfig(&comm, 4, id, r, &config), cclSuccess) << cclGetLastError(nullptr);
      std::vector<float> v(1024, 1.0f);
      for (int i = 0; i < 3; ++i)
        ASSERT_EQ(cclAllReduce(v.data(), v.data(), v.size(), cclFloat32, cclSum, comm, nullptr), cclSuccess);
      EXPECT_EQ(comm->tuning.timedCalls, 3u) << "every call the model chose is timed against its prediction";
      if (r == 0) {
        got = *comm->tuning.costModel;
        api::noteCallTime(*comm, 1e-3, 1e-3);  // the real calls' run, whatever it was, ends
        for (int i = 0; i < far; ++i) {
          if (i == breakAfter) api::noteCallTime(*comm, 1e-3, 1e-3);
          api::noteCallTime(*comm, 1e-2, 1e-3);
        }
      }
      EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
    }));
    return got;
  };
  auto same = [](const coll::CostModel& a, const coll::CostModel& b) {
    return a.inside.alpha == b.inside.alpha && a.inside.beta == b.inside.beta && a.across.alpha == b.across.alpha &&
           a.across.beta == b.across.beta;
  };
  const coll::CostModel first = models(api::kDriftCalls - 1, -1);
  const coll::CostModel second = models(2 * api::kDriftCalls - 2, api::kDriftCalls - 1);
  EXPECT_TRUE(same(second, first)) << "fewer than kDriftCalls far calls in a row keep the links";
  const coll::CostModel third = models(api::kDriftCalls, -1);
  EXPECT_TRUE(same(third, first));
  const coll::CostModel fourth = models(0, -1);
  EXPECT_FALSE(same(fourth, first)) << "the links were measured again";
}

}  // namespace
}  // namespace ccl
