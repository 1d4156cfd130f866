// SPDX-License-Identifier: BSD-3-Clause
// Error feedback kept without a handle (CCL_FEEDBACK=ef) follows the tensor's position in the
// step, not its address: two steps of buckets A and C, then a rebuild that lays out D and B,
// B at A's old address with A's count. B's residual starts from zero, and every call leaves
// the bytes the same calls with one feedback handle per tensor leave (a handle made new for
// each tensor of the rebuild). Keyed by address, B would receive A's residual.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "ccl/ccl.h"
#include "scoped_env.h"
#include "world.h"

namespace {

using ccltest::World;

struct Tensor {
  size_t at;  // offset in the rank's arena (floats): its address
  size_t count;
  uint32_t seed;  // 0: zeros
};

std::vector<float> values(const Tensor& t, int rank, int step) {
  std::vector<float> v(t.count, 0.0f);
  if (t.seed == 0) return v;
  std::mt19937 rng(t.seed * 100u + static_cast<uint32_t>(rank) * 10u + static_cast<uint32_t>(step));
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Feedback, AutoStateFollowsThePositionNotTheAddress) {
  const int n = 2;
  const Tensor A{0, 4096, 1}, C{8192, 1024, 2}, D{16384, 2048, 3}, B{0, 4096, 0};
  const std::vector<std::vector<Tensor>> steps = {{A, C}, {A, C}, {D, B}, {D, B}, {D, B}};
  ccltest::ScopedEnv codec("CCL_CODEC", "int4"), fb("CCL_FEEDBACK", "ef"), shm("CCL_CODEC_SHM", "on"),
      min("CCL_CODEC_MIN_BYTES", "0");
  World autoWorld(n), handleWorld(n);
  ASSERT_TRUE(autoWorld.ready() && handleWorld.ready());
  // got[world][rank][call]: every call's result.
  std::vector<std::vector<std::vector<std::vector<float>>>> got(2, std::vector<std::vector<std::vector<float>>>(n));
  for (int w = 0; w < 2; ++w) {
    (w == 0 ? autoWorld : handleWorld).run([&](int r, cclComm_t comm) {
      std::vector<float> arena(20000, 0.0f);
      cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
      z.codec = cclCodecInt4;
      cclFeedback_t hA = nullptr, hC = nullptr, hD = nullptr, hB = nullptr;
      for (cclFeedback_t* h : {&hA, &hC, &hD, &hB})
        ASSERT_EQ(cclFeedbackCreate(h, cclFeedbackResidual, 0, 0), cclSuccess);
      for (size_t s = 0; s < steps.size(); ++s)
        for (const Tensor& t : steps[s]) {
          const std::vector<float> v = values(t, r, static_cast<int>(s));
          float* p = arena.data() + t.at;
          std::memcpy(p, v.data(), t.count * sizeof(float));
          if (w == 0) {
            ASSERT_EQ(cclAllReduce(p, p, t.count, cclFloat32, cclSum, comm, nullptr), cclSuccess);
          } else {
            cclFeedback_t h = &t == &steps[s][0] ? (s < 2 ? hA : hD) : (s < 2 ? hC : hB);
            ASSERT_EQ(cclAllReduceEx(p, p, t.count, cclFloat32, cclSum, comm, nullptr, &z, h), cclSuccess);
          }
          got[w][r].emplace_back(p, p + t.count);
        }
      for (cclFeedback_t h : {hA, hC, hD, hB}) cclFeedbackDestroy(h);
    });
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[0][r].size(), got[1][r].size());
    for (size_t k = 0; k < got[0][r].size(); ++k)
      EXPECT_EQ(std::memcmp(got[0][r][k].data(), got[1][r][k].data(), got[0][r][k].size() * sizeof(float)), 0)
          << "rank " << r << " call " << k << ": the kept feedback differs from one handle per tensor";
    // B's first call sums zeros: a fresh residual leaves exact zeros, A's would not.
    for (float x : got[0][r][5]) ASSERT_EQ(x, 0.0f) << "rank " << r << ": B received another tensor's residual";
  }
}

// A group runs its calls together, so two of them cannot share one feedback state (each would
// resize and update it under the other). A caller's handle passed to two calls of one group is
// refused, and the communicator goes on. An automatic state that two calls of a group take (the
// step learned as one call long, then a group of two tensors) serves the first, and the second
// runs on a fresh state: the same bytes as a handle kept for the first tensor and a new one
// for the second.
TEST(Feedback, TwoCallsOfAGroupNeverShareAState) {
  const int n = 2;
  const size_t small = 20000, large = 200000;
  ccltest::ScopedEnv codec("CCL_CODEC", "int8"), fb("CCL_FEEDBACK", "ef"), shm("CCL_CODEC_SHM", "on"),
      min("CCL_CODEC_MIN_BYTES", "0");
  World autoWorld(n), handleWorld(n);
  ASSERT_TRUE(autoWorld.ready() && handleWorld.ready());
  std::vector<std::vector<std::vector<float>>> got(2, std::vector<std::vector<float>>(n));
  for (int w = 0; w < 2; ++w) {
    (w == 0 ? autoWorld : handleWorld).run([&](int r, cclComm_t comm) {
      std::vector<float> a = values({0, small, 7}, r, 0), b = values({0, large, 8}, r, 1);
      cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
      z.codec = cclCodecInt8;
      cclFeedback_t hA = nullptr, hB = nullptr;
      ASSERT_EQ(cclFeedbackCreate(&hA, cclFeedbackResidual, 0, 0), cclSuccess);
      ASSERT_EQ(cclFeedbackCreate(&hB, cclFeedbackResidual, 0, 0), cclSuccess);
      auto call = [&](std::vector<float>& v, cclFeedback_t h) {
        return w == 0 ? cclAllReduce(v.data(), v.data(), v.size(), cclFloat32, cclSum, comm, nullptr)
                      : cclAllReduceEx(v.data(), v.data(), v.size(), cclFloat32, cclSum, comm, nullptr, &z, h);
      };
      if (w == 1) {  // one handle for both calls of a group: refused, nothing runs
        std::vector<float> a2 = a, b2 = b;
        ASSERT_EQ(cclGroupStart(), cclSuccess);
        ASSERT_EQ(call(a2, hA), cclSuccess);
        ASSERT_EQ(call(b2, hA), cclSuccess);
        EXPECT_EQ(cclGroupEnd(), cclInvalidUsage);
        EXPECT_EQ(a2, a);
      }
      ASSERT_EQ(call(a, hA), cclSuccess);
      ASSERT_EQ(cclGroupStart(), cclSuccess);
      ASSERT_EQ(call(a, hA), cclSuccess);
      ASSERT_EQ(call(b, hB), cclSuccess);
      ASSERT_EQ(cclGroupEnd(), cclSuccess) << cclGetLastError(comm);
      got[w][r] = a;
      got[w][r].insert(got[w][r].end(), b.begin(), b.end());
      cclFeedbackDestroy(hA);
      cclFeedbackDestroy(hB);
    });
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[0][r].size(), small + large);
    EXPECT_EQ(got[0][r], got[1][r]) << "rank " << r;
  }
}

// Five steps, each a group of allreduces of A, C and E (CCL_FEEDBACK=`kind`, int4), on two
// worlds: on one, `refuse(step, comm, arena)` first issues calls that are refused before
// every step it is given; each call's result must be the bytes the other world gets without
// them. Refused calls run nothing and give back the step's positions they took: the calls
// after them take the positions, so the residuals, they would have had. Each refusal takes a
// count of positions that is not a multiple of the step's, so positions kept would put every
// later call on another tensor's position (a fresh residual, other bytes).
const Tensor kA{0, 4096, 1}, kC{8192, 1024, 2}, kE{12288, 2048, 3};
using Refusal = std::function<void(int step, cclComm_t comm, std::vector<float>& arena)>;

void expectRefusalsChangeNothing(const char* kind, const std::vector<int>& refusedBefore, const Refusal& refuse) {
  const int n = 2, steps = 5;
  const std::vector<Tensor> step = {kA, kC, kE};
  ccltest::ScopedEnv codec("CCL_CODEC", "int4"), fb("CCL_FEEDBACK", kind), shm("CCL_CODEC_SHM", "on"),
      min("CCL_CODEC_MIN_BYTES", "0");
  World refusedWorld(n), plainWorld(n);
  ASSERT_TRUE(refusedWorld.ready() && plainWorld.ready());
  // got[world][rank][call]: every call's result.
  std::vector<std::vector<std::vector<std::vector<float>>>> got(2, std::vector<std::vector<std::vector<float>>>(n));
  for (int w = 0; w < 2; ++w) {
    const bool refusals = w == 0;
    (refusals ? refusedWorld : plainWorld).run([&](int r, cclComm_t comm) {
      std::vector<float> arena(16384, 0.0f);
      for (int s = 0; s < steps; ++s) {
        if (refusals && std::find(refusedBefore.begin(), refusedBefore.end(), s) != refusedBefore.end()) {
          const std::vector<float> before = arena;
          refuse(s, comm, arena);
          ASSERT_EQ(arena, before) << "rank " << r << ": a refused call ran";
        }
        for (const Tensor& t : step) {
          const std::vector<float> v = values(t, r, s);
          std::memcpy(arena.data() + t.at, v.data(), t.count * sizeof(float));
        }
        ASSERT_CCL_OK(cclGroupStart());
        for (const Tensor& t : step) {
          float* p = arena.data() + t.at;
          ASSERT_CCL_OK(cclAllReduce(p, p, t.count, cclFloat32, cclSum, comm, nullptr));
        }
        ASSERT_CCL_OK(cclGroupEnd());
        for (const Tensor& t : step) got[w][r].emplace_back(arena.data() + t.at, arena.data() + t.at + t.count);
      }
    });
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[0][r].size(), got[1][r].size());
    for (size_t k = 0; k < got[0][r].size(); ++k)
      EXPECT_EQ(std::memcmp(got[0][r][k].data(), got[1][r][k].data(), got[0][r][k].size() * sizeof(float)), 0)
          << "rank " << r << " step " << k / step.size() << " call " << k % step.size()
          << ": refused calls moved the calls after them to other positions (residuals)";
  }
}

// A group refused at its end gives back the positions its calls took: one refused because a
// call of it failed (while the step's length is being learned), one because a caller's handle
// is passed to two of its calls (once learned).
TEST(Feedback, ARefusedGroupGivesBackItsPositions) {
  expectRefusalsChangeNothing("ef", {1, 3}, [](int s, cclComm_t comm, std::vector<float>& arena) {
    auto allReduce = [&](const Tensor& t, cclRedOp_t op) {
      float* p = arena.data() + t.at;
      return cclAllReduce(p, p, t.count, cclFloat32, op, comm, nullptr);
    };
    ASSERT_CCL_OK(cclGroupStart());
    if (s == 1) {  // A, then a call that fails: the group is dropped at its end
      ASSERT_CCL_OK(allReduce(kA, cclSum));
      EXPECT_EQ(allReduce(kC, static_cast<cclRedOp_t>(99)), cclInvalidArgument);
      EXPECT_EQ(cclGroupEnd(), cclInvalidArgument);
      return;
    }
    // A and C, then one handle passed to two calls: refused at the end
    cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
    z.codec = cclCodecInt4;
    cclFeedback_t h = nullptr;
    ASSERT_CCL_OK(cclFeedbackCreate(&h, cclFeedbackResidual, 0, 0));
    ASSERT_CCL_OK(allReduce(kA, cclSum));
    ASSERT_CCL_OK(allReduce(kC, cclSum));
    float* p = arena.data() + kE.at;
    EXPECT_CCL_OK(cclAllReduceEx(p, p, kE.count, cclFloat32, cclSum, comm, nullptr, &z, h));
    EXPECT_CCL_OK(cclAllReduceEx(p, p, kE.count, cclFloat32, cclSum, comm, nullptr, &z, h));
    EXPECT_EQ(cclGroupEnd(), cclInvalidUsage);
    cclFeedbackDestroy(h);
  });
}

// A call refused after it took its position (powersgd with automatic LoCo feedback: LoCo's
// 8-bit state would round its warm start) gives it back, alone or in a group (which is then
// refused, A's position given back too).
TEST(Feedback, ACallRefusedAfterTakingItsPositionGivesItBack) {
  expectRefusalsChangeNothing("loco", {1, 3}, [](int s, cclComm_t comm, std::vector<float>& arena) {
    cclCompression_t z = CCL_COMPRESSION_INITIALIZER;
    z.codec = cclCodecPowerSgd;
    float* c = arena.data() + kC.at;
    if (s == 1) {
      EXPECT_EQ(cclAllReduceEx(c, c, kC.count, cclFloat32, cclSum, comm, nullptr, &z, nullptr), cclInvalidArgument);
      return;
    }
    float* a = arena.data() + kA.at;
    ASSERT_CCL_OK(cclGroupStart());
    ASSERT_CCL_OK(cclAllReduce(a, a, kA.count, cclFloat32, cclSum, comm, nullptr));
    EXPECT_EQ(cclAllReduceEx(c, c, kC.count, cclFloat32, cclSum, comm, nullptr, &z, nullptr), cclInvalidArgument);
    EXPECT_EQ(cclGroupEnd(), cclInvalidArgument);
  });
}

}  // namespace
