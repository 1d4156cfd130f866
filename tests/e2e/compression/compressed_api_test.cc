// SPDX-License-Identifier: BSD-3-Clause
// Every compressed collective through the public API: results agree on all ranks and stay
// within the codec's bound composed over the algorithm; lossless sparsifier settings are
// exact; counters show fewer bytes on the wire; mismatched codecs are cclInvalidUsage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ccl/ccl.h"
#include "codecs/codec_table.h"
#include "scoped_env.h"
#include "world.h"

namespace {

using Vec = std::vector<float>;
using ccltest::World;

// Compress every size in this binary, before any communicator reads its policy.
const int kCompressAllSizes = setenv("CCL_CODEC_MIN_BYTES", "0", 1);

Vec input(int rank, size_t count, uint32_t salt = 0) {
  std::mt19937 rng(1000u * rank + salt + static_cast<uint32_t>(count));
  std::normal_distribution<float> d(0.0f, 1.0f);
  Vec v(count);
  for (auto& x : v) x = d(rng);
  return v;
}

float maxAbs(const Vec& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

cclCompression_t codecOf(cclCodec_t c) {
  cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
  z.codec = c;
  return z;
}

// Bound of one quantization of values of magnitude at most m: the library's own bound.
double quantBound(cclCodec_t c, double m) {
  const cclCompression_t z = codecOf(c);
  double bound = -1;
  EXPECT_CCL_OK(cclCodecErrorBound(&z, m, m, 1, &bound));
  return bound;
}

struct Case {
  cclCodec_t codec;
  int n;
  size_t count;
  bool inPlace;
};

class Codecs : public ::testing::TestWithParam<Case> {};

TEST_P(Codecs, EveryCollectiveWithinBound) {
  const Case c = GetParam();
  const int n = c.n;
  const size_t count = c.count;
  cclCompression_t z = codecOf(c.codec);
  std::vector<Vec> in(n);
  float m = 0;
  for (int r = 0; r < n; ++r) {
    in[r] = input(r, count * n);
    m = std::max(m, maxAbs(in[r]));
  }
  const double one = quantBound(c.codec, m) + 1e-6;
  std::vector<Vec> out(n, Vec(count * n));

  // Allreduce (two-shot: peers' shards once, the sum once).
  World::get(n).run([&](int r, cclComm_t comm) {
    Vec& o = out[r];
    std::copy(in[r].begin(), in[r].begin() + count, o.begin());
    const void* src = c.inPlace ? static_cast<const void*>(o.data()) : in[r].data();
    ASSERT_CCL_OK(cclAllReduceEx(src, o.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
  });
  // The sum is quantized with its block's scale: bound it by the largest sum anywhere.
  Vec want(count, 0.0f);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) want[i] += in[r][i];
  const double bound = (n - 1) * one + quantBound(c.codec, maxAbs(want) + (n - 1) * one) + 1e-5;
  for (size_t i = 0; i < count; ++i) {
    for (int r = 0; r < n; ++r) ASSERT_EQ(out[r][i], out[0][i]) << "ranks disagree at " << i;
    ASSERT_LE(std::fabs(out[0][i] - want[i]), n == 1 ? one : bound) << "allreduce element " << i;
  }

  // Allgather, broadcast, all-to-all: one quantization.
  World::get(n).run([&](int r, cclComm_t comm) {
    Vec& o = out[r];
    std::copy(in[r].begin(), in[r].begin() + count, o.begin() + r * count);
    const void* src = c.inPlace ? static_cast<const void*>(o.data() + r * count) : in[r].data();
    ASSERT_CCL_OK(cclAllGatherEx(src, o.data(), count, cclFloat, comm, nullptr, &z, nullptr));
  });
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < n; ++k)
      for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[r][k * count + i], in[k][i], one) << "allgather";

  const int root = n / 2;
  World::get(n).run([&](int r, cclComm_t comm) {
    Vec& o = out[r];
    if (r == root) std::copy(in[r].begin(), in[r].begin() + count, o.begin());
    const void* src = c.inPlace ? static_cast<const void*>(o.data()) : in[r].data();
    ASSERT_CCL_OK(cclBroadcastEx(src, o.data(), count, cclFloat, root, comm, nullptr, &z));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[r][i], in[root][i], one) << "broadcast";

  World::get(n).run([&](int r, cclComm_t comm) {
    Vec& o = out[r];
    o = in[r];
    const void* src = c.inPlace ? static_cast<const void*>(o.data()) : in[r].data();
    ASSERT_CCL_OK(cclAlltoAllEx(src, o.data(), count, cclFloat, comm, nullptr, &z));
  });
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < n; ++k)
      for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[r][k * count + i], in[k][r * count + i], one) << "alltoall";

  // Reduce-scatter: the n-1 peers' blocks are quantized once.
  World::get(n).run([&](int r, cclComm_t comm) {
    Vec& o = out[r];
    o = in[r];
    const void* src = in[r].data();
    void* dst = c.inPlace ? static_cast<void*>(o.data() + r * count) : o.data();
    if (c.inPlace) src = o.data();
    ASSERT_CCL_OK(cclReduceScatterEx(src, dst, count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int k = 0; k < n; ++k) want += in[k][r * count + i];
      const float got = c.inPlace ? out[r][r * count + i] : out[r][i];
      ASSERT_NEAR(got, want, (n - 1) * one + 1e-5) << "reduce-scatter";
    }

  // Send/recv around the ring, inside a group.
  World::get(n).run([&](int r, cclComm_t comm) {
    ASSERT_CCL_OK(cclGroupStart());
    EXPECT_CCL_OK(cclSendEx(in[r].data(), count, cclFloat, (r + 1) % n, comm, nullptr, &z, nullptr));
    EXPECT_CCL_OK(cclRecvEx(out[r].data(), count, cclFloat, (r + n - 1) % n, comm, nullptr, &z));
    ASSERT_CCL_OK(cclGroupEnd());
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_NEAR(out[r][i], in[(r + n - 1) % n][i], one) << "send/recv";
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // Every quantizer of the codec table.
  for (int code = 0; code < cclNumCodecs; ++code)
    if (const auto codec = static_cast<cclCodec_t>(code); ccl::codec::isQuantizer(code))
      for (int n : {1, 2, 3, 4, 8}) v.push_back({codec, n, n == 3 ? size_t{100003} : size_t{4099}, n % 2 == 0});
  for (int n = 1; n <= 8; ++n)
    for (size_t count : {size_t{1}, size_t{7}, size_t{1001}}) v.push_back({cclCodecInt8, n, count, count == 7});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Codecs, Codecs, ::testing::ValuesIn(cases()), [](const auto& info) {
  const Case& c = info.param;
  return std::string(cclCodecName(c.codec)) + "_n" + std::to_string(c.n) + "_count" + std::to_string(c.count) +
         (c.inPlace ? "_inplace" : "");
});

// Keeping everything makes a sparsifier lossless: the allreduce equals the rank-order sum.
TEST(Sparse, LosslessSettingsAreExact) {
  for (cclCodec_t codec : {cclCodecTopK, cclCodecThreshold})
    for (int n : {1, 3, 4}) {
      const size_t count = 5003;
      cclCompression_t z = codecOf(codec);
      z.keepRatio = 1.0;
      std::vector<Vec> out(n, Vec(count));
      World::get(n).run([&](int r, cclComm_t comm) {
        Vec x = input(r, count, 7);
        ASSERT_CCL_OK(cclAllReduceEx(x.data(), out[r].data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
      });
      Vec want(count, 0.0f);
      for (int r = 0; r < n; ++r) {
        Vec x = input(r, count, 7);
        for (size_t i = 0; i < count; ++i) want[i] += x[i];
      }
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[0][i], want[i]) << cclCodecName(codec) << " n=" << n;
        for (int r = 1; r < n; ++r) ASSERT_EQ(out[r][i], out[0][i]);
      }
    }
}

// Two calls alike but for a threshold that differs below 1e-9: each keeps what its own
// threshold keeps (the plan cache told them apart by threshold * 1e9, so the second call ran
// the first one's plan, and ranks passing such thresholds were not caught as mismatched).
TEST(Sparse, ThresholdsCloseTogetherAreDifferentCalls) {
  const size_t count = 1000;
  const int n = 2;
  for (float threshold : {2e-10f, 8e-10f}) {
    cclCompression_t z = codecOf(cclCodecThreshold);
    z.threshold = threshold;
    std::vector<Vec> out(n, Vec(count, -1.f));
    World::get(n).run([&](int r, cclComm_t comm) {
      const Vec x(count, r == 0 ? 5e-10f : 0.f);
      ASSERT_CCL_OK(cclAllReduceEx(x.data(), out[r].data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
    });
    const float want = 5e-10f > threshold ? 5e-10f : 0.f;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[r][i], want) << "threshold " << threshold << ", rank " << r << ", element " << i;
  }
}

// A large compressed call with a tiny CCL_CHUNK_BYTES: its pieces grow so that a message tag
// numbers them all (the plan failed with cclInternalError, "plan step tag out of range").
TEST(Chunks, ATinyChunkSizeOnALargeCompressedCall) {
  ccltest::ScopedEnv chunk("CCL_CHUNK_BYTES", "1");
  const size_t count = 3'000'000;
  const int n = 2;
  World w(n);
  ASSERT_TRUE(w.ready());
  std::vector<Vec> out(n, Vec(count));
  w.run([&](int r, cclComm_t comm) {
    const cclCompression_t z = codecOf(cclCodecInt8);
    const Vec x = input(r, count, 11);
    ASSERT_CCL_OK(cclAllReduceEx(x.data(), out[r].data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
  });
  const Vec x0 = input(0, count, 11), x1 = input(1, count, 11);
  const double bound = 2 * quantBound(cclCodecInt8, std::max(maxAbs(x0), maxAbs(x1)) * 2) + 1e-5;
  for (size_t i = 0; i < count; ++i) {
    ASSERT_NEAR(out[0][i], x0[i] + x1[i], bound) << "element " << i;
    ASSERT_EQ(out[1][i], out[0][i]) << "element " << i;
  }
}

// Counters: a compressed call sends fewer bytes than it carries.
TEST(Stats, WireBytesBelowRawBytes) {
  const int n = 4;
  const size_t count = 1 << 16;
  World::get(n).run([&](int r, cclComm_t comm) {
    cclStats_t before = CCL_STATS_INITIALIZER, after = CCL_STATS_INITIALIZER;
    ASSERT_CCL_OK(cclCommGetStats(comm, &before));
    cclCompression_t z = codecOf(cclCodecInt4);
    Vec x = input(r, count), y(count);
    ASSERT_CCL_OK(cclAllReduceEx(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
    ASSERT_CCL_OK(cclCommGetStats(comm, &after));
    const cclOpStats_t& a = after.op[cclOpAllReduce];
    const cclOpStats_t& b = before.op[cclOpAllReduce];
    EXPECT_EQ(a.calls - b.calls, 1u);
    EXPECT_EQ(a.compressedCalls - b.compressedCalls, 1u);
    const double raw = double(a.rawBytes - b.rawBytes), wire = double(a.wireBytes - b.wireBytes);
    EXPECT_GT(raw, 0);
    EXPECT_LT(wire, raw * 0.2) << "int4 should send about 4.25/32 of the raw bytes";
  });
}

// Compressed allreduces of one call each: the default codec's, then an explicit one.
struct Counted {
  unsigned long long viaDefault = 0;
  unsigned long long viaExplicit = 0;
};

Counted compressedAllReduces(const cclConfig_t* config) {
  const int n = 2;
  const size_t count = 1 << 16;
  World w(n, config);
  EXPECT_TRUE(w.ready());
  std::vector<Counted> got(n);
  w.run([&](int r, cclComm_t comm) {
    Vec x = input(r, count), y(count);
    cclStats_t s0 = CCL_STATS_INITIALIZER, s1 = CCL_STATS_INITIALIZER, s2 = CCL_STATS_INITIALIZER;
    ASSERT_CCL_OK(cclCommGetStats(comm, &s0));
    ASSERT_CCL_OK(cclAllReduce(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr));
    ASSERT_CCL_OK(cclCommGetStats(comm, &s1));
    cclCompression_t z = codecOf(cclCodecInt8);
    ASSERT_CCL_OK(cclAllReduceEx(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
    ASSERT_CCL_OK(cclCommGetStats(comm, &s2));
    got[r].viaDefault = s1.op[cclOpAllReduce].compressedCalls - s0.op[cclOpAllReduce].compressedCalls;
    got[r].viaExplicit = s2.op[cclOpAllReduce].compressedCalls - s1.op[cclOpAllReduce].compressedCalls;
  });
  EXPECT_EQ(got[0].viaDefault, got[1].viaDefault) << "ranks disagree on compressing";
  return got[0];
}

// Over shared memory the communicator's default codec is not applied unless
// CCL_CODEC_SHM=on; a codec passed to an *Ex call always is. CCL_TEST_LINK (set by the
// ctest entry, with UCX_TLS to match) says which link the ranks have.
TEST(SharedMemory, DefaultCodecFollowsTheLink) {
  const char* link = std::getenv("CCL_TEST_LINK");
  if (!link) GTEST_SKIP() << "CCL_TEST_LINK (shm or tcp) not set: run through ctest";
  const bool shm = std::string(link) == "shm";
  cclCompression_t z = codecOf(cclCodecInt8);
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.compression = &z;
  {
    ccltest::ScopedEnv mode("CCL_CODEC_SHM", "auto");
    const Counted c = compressedAllReduces(&config);
    EXPECT_EQ(c.viaDefault, shm ? 0u : 1u) << "CCL_CODEC_SHM=auto over " << link;
    EXPECT_EQ(c.viaExplicit, 1u);
  }
  {
    ccltest::ScopedEnv mode("CCL_CODEC_SHM", "on");
    const Counted c = compressedAllReduces(&config);
    EXPECT_EQ(c.viaDefault, 1u) << "CCL_CODEC_SHM=on over " << link;
    EXPECT_EQ(c.viaExplicit, 1u);
  }
}

// A split or shrink that passes no config keeps the parent's compression as it is: the codec
// of its config, and one cclCommSetCompression set later (ccl.h: "config NULL inherits the
// parent's configuration"). The children used to take CCL_CODEC's (none here) instead.
TEST(Inherit, SplitAndShrinkWithoutAConfigKeepTheParentsCodec) {
  const int n = 2;
  const size_t count = 1 << 16;
  ccltest::ScopedEnv mode("CCL_CODEC_SHM", "on"), env("CCL_CODEC", nullptr);
  cclCompression_t z = codecOf(cclCodecInt8);
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.compression = &z;
  World w(n, &config);
  ASSERT_TRUE(w.ready());
  auto compressedCall = [&](int r, cclComm_t comm) {
    cclStats_t s0 = CCL_STATS_INITIALIZER, s1 = CCL_STATS_INITIALIZER;
    Vec x = input(r, count), y(count);
    EXPECT_CCL_OK(cclCommGetStats(comm, &s0));
    EXPECT_CCL_OK(cclAllReduce(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr));
    EXPECT_CCL_OK(cclCommGetStats(comm, &s1));
    return s1.op[cclOpAllReduce].compressedCalls - s0.op[cclOpAllReduce].compressedCalls == 1;
  };
  w.run([&](int r, cclComm_t comm) {
    EXPECT_TRUE(compressedCall(r, comm)) << "the parent";
    cclComm_t split = nullptr, shrunk = nullptr, later = nullptr;
    ASSERT_CCL_OK(cclCommSplit(comm, 0, r, &split, nullptr));
    EXPECT_TRUE(compressedCall(r, split)) << "a split of it";
    ASSERT_CCL_OK(cclCommShrink(comm, nullptr, 0, &shrunk, nullptr, CCL_SHRINK_DEFAULT));
    EXPECT_TRUE(compressedCall(r, shrunk)) << "a shrink of it";
    cclCompression_t none = codecOf(cclCodecNone);
    ASSERT_CCL_OK(cclCommSetCompression(split, &none));
    ASSERT_CCL_OK(cclCommSplit(split, 0, r, &later, nullptr));
    EXPECT_FALSE(compressedCall(r, later)) << "a split of a communicator set to none";
    for (cclComm_t c : {split, shrunk, later}) EXPECT_CCL_OK(cclCommDestroy(c));
  });
}

// Ranks using different codecs are told so, instead of misreading each other's bytes.
TEST(Mismatch, DifferentCodecsAreInvalidUsageEverywhere) {
  const int n = 2;
  World w(n);
  ASSERT_TRUE(w.ready());
  std::vector<cclResult_t> res(n);
  w.run([&](int r, cclComm_t comm) {
    cclCompression_t z = codecOf(r == 0 ? cclCodecInt8 : cclCodecFp8E4m3);
    Vec x = input(r, 4096), y(4096);
    res[r] = cclAllReduceEx(x.data(), y.data(), 4096, cclFloat, cclSum, comm, nullptr, &z, nullptr);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(res[r], cclInvalidUsage) << "rank " << r;
}

// One rank of three or five calls with another top-k ratio: its ring neighbours see it in
// the call's digest, and the ranks further round must fail too, not return a sum that mixed
// the two calls (each rank used to compare the digest with its previous rank's only).
TEST(Mismatch, OneRankWithAnotherKeepRatioFailsOnEveryRank) {
  ccltest::ScopedEnv timeout("CCL_TIMEOUT", "20");
  const size_t count = 1 << 16;
  for (int n : {3, 5}) {
    for (int trial = 0; trial < 3; ++trial) {
      World w(n);
      ASSERT_TRUE(w.ready());
      std::vector<cclResult_t> res(static_cast<size_t>(n));
      w.run([&](int r, cclComm_t comm) {
        cclCompression_t z = codecOf(cclCodecTopK);
        z.keepRatio = r == 1 ? 0.5 : 0.25;
        Vec x = input(r, count), y(count);
        res[static_cast<size_t>(r)] =
            cclAllReduceEx(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr);
      });
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(res[static_cast<size_t>(r)], cclInvalidUsage) << n << " ranks, trial " << trial << ", rank " << r;
    }
  }
}

// One rank compresses and the other does not: both are told, neither waits for the timeout.
TEST(Mismatch, CompressedAgainstUncompressedIsInvalidUsageEverywhere) {
  const int n = 2;
  ccltest::ScopedEnv timeout("CCL_TIMEOUT", "20");
  for (size_t count : {size_t{4096}, size_t{1} << 20}) {
    World w(n);
    ASSERT_TRUE(w.ready());
    std::vector<cclResult_t> res(n);
    w.run([&](int r, cclComm_t comm) {
      cclCompression_t z = codecOf(cclCodecInt8);
      Vec x = input(r, count), y(count);
      res[r] =
          cclAllReduceEx(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr, r == 0 ? &z : nullptr, nullptr);
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(res[r], cclInvalidUsage) << "rank " << r << " count " << count;
  }
}

// A send with a codec and a receive without one (and the other way round): the receive fails
// (the send may have completed before the receiver looked), its message names codecs among
// what the two calls may disagree on, and the communicator is aborted on both ranks.
TEST(Mismatch, ASendAndItsReceiveWithACodecOnOneSideOnly) {
  const int n = 2, count = 4096;
  ccltest::ScopedEnv timeout("CCL_TIMEOUT", "20");
  for (int compressedRank : {0, 1}) {
    World w(n);
    ASSERT_TRUE(w.ready());
    std::vector<cclResult_t> res(n), afterwards(n);
    std::string received;
    w.run([&](int r, cclComm_t comm) {
      cclCompression_t z = codecOf(cclCodecInt8);
      const cclCompression_t* codec = r == compressedRank ? &z : nullptr;
      Vec x = input(r, count), y(count);
      if (r == 0) {
        res[r] = cclSendEx(x.data(), count, cclFloat, 1, comm, nullptr, codec, nullptr);
      } else {
        res[r] = cclRecvEx(y.data(), count, cclFloat, 0, comm, nullptr, codec);
        received = cclGetLastError(comm);
      }
      afterwards[r] = cclAllReduce(x.data(), y.data(), count, cclFloat, cclSum, comm, nullptr);
    });
    EXPECT_EQ(res[1], cclInvalidUsage) << "the receive, the codec on rank " << compressedRank;
    for (int r = 0; r < n; ++r)
      EXPECT_NE(afterwards[r], cclSuccess) << "rank " << r << "'s next call, the codec on rank " << compressedRank;
    if (compressedRank == 0) {
      EXPECT_NE(received.find("codecs"), std::string::npos) << received;
    }
  }
}

// With a feedback handle, a constant input allreduced repeatedly with int4 averages out to
// the exact sum.
TEST(Feedback, ResidualAndLocoConverge) {
  const int n = 4;
  const size_t count = 8192;
  std::vector<Vec> x(n);
  Vec want(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    x[r] = input(r, count, 3);
    for (size_t i = 0; i < count; ++i) want[i] += x[r][i];
  }
  for (cclFeedbackKind_t kind : {cclFeedbackResidual, cclFeedbackLoco}) {
    std::vector<Vec> mean(n, Vec(count, 0.0f));
    std::vector<double> first(n);
    const int T = 40;
    World::get(n).run([&](int r, cclComm_t comm) {
      cclFeedback_t fb = nullptr;
      ASSERT_CCL_OK(cclFeedbackCreate(&fb, kind, 0.5f, 0));
      cclCompression_t z = codecOf(cclCodecInt4);
      Vec y(count);
      for (int t = 0; t < T; ++t) {
        ASSERT_CCL_OK(cclAllReduceEx(x[r].data(), y.data(), count, cclFloat, cclSum, comm, nullptr, &z, fb));
        for (size_t i = 0; i < count; ++i) mean[r][i] += y[i] / T;
      }
      cclFeedbackDestroy(fb);
    });
    double errMean = 0, errOne = 0, norm = 0;
    for (size_t i = 0; i < count; ++i) {
      errMean += (mean[0][i] - want[i]) * double(mean[0][i] - want[i]);
      norm += want[i] * double(want[i]);
    }
    // One call without feedback, for scale.
    std::vector<Vec> once(n, Vec(count));
    World::get(n).run([&](int r, cclComm_t comm) {
      cclCompression_t z = codecOf(cclCodecInt4);
      ASSERT_CCL_OK(cclAllReduceEx(x[r].data(), once[r].data(), count, cclFloat, cclSum, comm, nullptr, &z, nullptr));
    });
    for (size_t i = 0; i < count; ++i) errOne += (once[0][i] - want[i]) * double(once[0][i] - want[i]);
    std::printf("feedback %d: one call rel RMS %.5f, mean of %d calls %.5f\n", kind, std::sqrt(errOne / norm), T,
                std::sqrt(errMean / norm));
    EXPECT_LT(errMean, errOne / 25) << "kind " << kind;  // RMS at least 5x smaller
  }
}

// A sender's feedback handle: the mean of what arrives over many int4 sends of one buffer
// approaches the buffer itself, as it does for an allreduce.
TEST(Feedback, SendKeepsTheSendersResidual) {
  const size_t count = 4096;
  const Vec x = input(0, count, 5);
  const int T = 40;
  Vec mean(count, 0.0f), once(count);
  World::get(2).run([&](int r, cclComm_t comm) {
    cclFeedback_t fb = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&fb, cclFeedbackResidual, 0.0f, 0));
    const cclCompression_t z = codecOf(cclCodecInt4);
    Vec y(count);
    for (int t = 0; t <= T; ++t) {
      if (r == 0) {
        ASSERT_CCL_OK(cclSendEx(x.data(), count, cclFloat, 1, comm, nullptr, &z, t == 0 ? nullptr : fb));
      } else {
        ASSERT_CCL_OK(cclRecvEx(y.data(), count, cclFloat, 0, comm, nullptr, &z));
        for (size_t i = 0; i < count; ++i) (t == 0 ? once[i] : mean[i]) += t == 0 ? y[i] : y[i] / T;
      }
    }
    cclFeedbackDestroy(fb);
  });
  double errMean = 0, errOne = 0;
  for (size_t i = 0; i < count; ++i) {
    errMean += (mean[i] - x[i]) * double(mean[i] - x[i]);
    errOne += (once[i] - x[i]) * double(once[i] - x[i]);
  }
  EXPECT_GT(errOne, 0.0) << "int4 loses something";
  EXPECT_LT(errMean, errOne / 25);
}

}  // namespace

// cclCodecErrorBound: the documented terms, composition, and refusals of bad arguments.
TEST(Bound, PublicFunctionGivesTheDocumentedBound) {
  double b = -1;
  ASSERT_CCL_OK(cclCodecErrorBound(nullptr, 3.0, 5.0, 4, &b));
  EXPECT_EQ(b, 0.0) << "no codec: exact";
  cclCompression_t z = codecOf(cclCodecTopK);
  ASSERT_CCL_OK(cclCodecErrorBound(&z, 3.0, 5.0, 4, &b));
  EXPECT_EQ(b, 3.0) << "a sparsifier drops at most the value";
  // One round trip in a block whose scale unit is 1: the table's terms (plus the codecs'
  // fp32 slack), to nearest and stochastically.
  for (cclCodec_t c : {cclCodecInt8, cclCodecFp8E4m3}) {
    const ccl::codec::CodecInfo info = ccl::codec::codecInfo(c);
    z = codecOf(c);
    for (int stochastic : {0, 1}) {
      z.stochasticRounding = stochastic;
      const ccl::codec::RoundTripBound t = stochastic ? info.stochastic : info.nearest;
      ASSERT_CCL_OK(cclCodecErrorBound(&z, 1.0, info.scaleDivisor, 1, &b));
      EXPECT_NEAR(b, t.rel + t.abs, 1e-5) << info.name << " stochastic " << stochastic;
      double two = 0;
      ASSERT_CCL_OK(cclCodecErrorBound(&z, 1.0, info.scaleDivisor, 2, &two));
      EXPECT_GT(two, 2 * b) << "the second round trip starts from the first one's error";
    }
  }
  z = codecOf(cclCodecFp8E4m3);

  for (auto [value, max, k] : {std::tuple{-1.0, 1.0, 1}, std::tuple{2.0, 1.0, 1}, std::tuple{0.0, 1.0, -1},
                               std::tuple{0.0, double(INFINITY), 1}, std::tuple{double(NAN), 1.0, 1}}) {
    EXPECT_EQ(cclCodecErrorBound(&z, value, max, k, &b), cclInvalidArgument) << value << " " << max << " " << k;
    EXPECT_NE(std::string(cclGetLastError(nullptr)).find("cclCodecErrorBound"), std::string::npos);
  }
  EXPECT_EQ(cclCodecErrorBound(&z, 0.0, 1.0, 1, nullptr), cclInvalidArgument);
  z.blockSize = 3;
  EXPECT_EQ(cclCodecErrorBound(&z, 0.0, 1.0, 1, &b), cclInvalidArgument) << "parameters a call would refuse";
}
