// SPDX-License-Identifier: BSD-3-Clause
// A call the library refuses has no effect: after one rank's send or receive is refused (for
// its codec parameters, checked after the peer and the buffers), or its group is dropped at
// cclGroupEnd, the communicator still matches that rank's next calls with its peers'. Were a
// refused call to keep the sequence number it took, on the refusing rank only, every later
// message between the ranks would carry a tag the peer does not expect and wait until
// CCL_TIMEOUT, on a communicator that reports no error. Refusals also say why
// (cclGetLastError), as every function's must.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

// Two ranks as threads on a fresh communicator; fn(rank, comm) runs on each.
void runTwoRanks(const std::function<void(int, cclComm_t)>& fn) {
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  cclComm_t comms[2] = {};
  cclResult_t init[2] = {cclInternalError, cclInternalError};
  {
    std::vector<std::thread> t;
    for (int r = 0; r < 2; ++r) t.emplace_back([&, r] { init[r] = cclCommInitRank(&comms[r], 2, id, r); });
    for (auto& th : t) th.join();
  }
  ASSERT_EQ(init[0], cclSuccess);
  ASSERT_EQ(init[1], cclSuccess);
  {
    std::vector<std::thread> t;
    for (int r = 0; r < 2; ++r) t.emplace_back([&, r] { fn(r, comms[r]); });
    for (auto& th : t) th.join();
  }
  for (cclComm_t c : comms) EXPECT_EQ(cclCommDestroy(c), cclSuccess);
}

// Rank 0's `refused` call fails; then both ranks exchange 64 floats and must get them.
void expectPairStillMatched(const std::function<cclResult_t(cclComm_t, float*)>& refused) {
  runTwoRanks([&](int rank, cclComm_t comm) {
    std::vector<float> out(64), in(64, -1.f);
    for (int i = 0; i < 64; ++i) out[i] = static_cast<float>(rank * 100 + i);
    if (rank == 0) {
      const cclResult_t rc = refused(comm, out.data());
      EXPECT_EQ(rc, cclInvalidArgument) << cclGetLastError(nullptr);
    }
    const int peer = 1 - rank;
    ASSERT_EQ(cclGroupStart(), cclSuccess);
    ASSERT_EQ(cclSend(out.data(), 64, cclFloat32, peer, comm, nullptr), cclSuccess);
    ASSERT_EQ(cclRecv(in.data(), 64, cclFloat32, peer, comm, nullptr), cclSuccess);
    const cclResult_t rc = cclGroupEnd();
    ASSERT_EQ(rc, cclSuccess) << "rank " << rank << ": " << cclGetLastError(nullptr);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(in[i], static_cast<float>(peer * 100 + i)) << "rank " << rank;
  });
}

cclCompression_t badMagic() {
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  c.magic = 0;
  return c;
}

TEST(RefusedCall, SendExWithInvalidCodecLeavesThePairMatched) {
  expectPairStillMatched([](cclComm_t comm, float* buf) {
    const cclCompression_t c = badMagic();
    return cclSendEx(buf, 64, cclFloat32, 1, comm, nullptr, &c, nullptr);
  });
}

TEST(RefusedCall, RecvExWithInvalidCodecLeavesThePairMatched) {
  expectPairStillMatched([](cclComm_t comm, float* buf) {
    cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
    c.codec = cclCodecTopK;
    c.keepRatio = 2.0;
    return cclRecvEx(buf, 64, cclFloat32, 1, comm, nullptr, &c);
  });
}

TEST(RefusedCall, SendExOfAShapeTheCodecRefusesLeavesThePairMatched) {
  // powersgd's rows x cols must be the element count; checked when the plan is built, for a
  // call large enough to be compressed (CCL_CODEC_MIN_BYTES).
  expectPairStillMatched([](cclComm_t comm, float*) {
    std::vector<float> big(1 << 15, 1.f);
    cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
    c.codec = cclCodecPowerSgd;
    c.rows = 3;
    c.cols = 5;
    return cclSendEx(big.data(), big.size(), cclFloat32, 1, comm, nullptr, &c, nullptr);
  });
}

// A group refused at cclGroupEnd is dropped whole: the calls it had accepted leave no trace.
TEST(RefusedCall, DroppedGroupOfASendLeavesThePairMatched) {
  expectPairStillMatched([](cclComm_t comm, float* buf) {
    cclGroupStart();
    cclSend(buf, 64, cclFloat32, 1, comm, nullptr);      // accepted, queued
    cclRecv(nullptr, 64, cclFloat32, 1, comm, nullptr);  // refused: the group fails
    return cclGroupEnd();
  });
}

TEST(RefusedCall, DroppedGroupOfACollectiveLeavesTheCommunicatorMatched) {
  runTwoRanks([&](int rank, cclComm_t comm) {
    std::vector<int32_t> in(1000, rank + 1), out(1000, 0);
    if (rank == 0) {
      ASSERT_EQ(cclGroupStart(), cclSuccess);
      EXPECT_EQ(cclAllReduce(in.data(), out.data(), 1000, cclInt32, cclSum, comm, nullptr), cclSuccess);
      EXPECT_EQ(cclAllReduce(in.data(), out.data(), 1000, static_cast<cclDataType_t>(99), cclSum, comm, nullptr),
                cclInvalidArgument);
      EXPECT_EQ(cclGroupEnd(), cclInvalidArgument);
    }
    const cclResult_t rc = cclAllReduce(in.data(), out.data(), 1000, cclInt32, cclSum, comm, nullptr);
    ASSERT_EQ(rc, cclSuccess) << "rank " << rank << ": " << cclGetLastError(nullptr);
    for (int32_t v : out) ASSERT_EQ(v, 3);
  });
}

// Every refusal says why in cclGetLastError, on a thread that had no error before (its
// message would otherwise be empty) and after another failure (it would be stale).
TEST(RefusedCall, CodecFromNameSaysWhy) {
  std::string fresh, stale;
  std::thread([&] {
    cclCodec_t c = cclCodecNone;
    EXPECT_EQ(cclCodecFromName("no-such-codec", &c), cclInvalidArgument);
    fresh = cclGetLastError(nullptr);
    EXPECT_EQ(cclGetVersion(nullptr), cclInvalidArgument);
    EXPECT_EQ(cclCodecFromName(nullptr, &c), cclInvalidArgument);
    stale = cclGetLastError(nullptr);
    EXPECT_EQ(c, cclCodecNone) << "a refused name wrote *codec";
  }).join();
  EXPECT_NE(fresh.find("cclCodecFromName"), std::string::npos) << "'" << fresh << "'";
  EXPECT_NE(fresh.find("no-such-codec"), std::string::npos) << "'" << fresh << "'";
  EXPECT_NE(stale.find("cclCodecFromName"), std::string::npos) << "'" << stale << "'";
  cclCodec_t c = cclCodecNone;
  EXPECT_EQ(cclCodecFromName("INT4", &c), cclSuccess);
  EXPECT_EQ(c, cclCodecInt4);
}

}  // namespace

int main(int argc, char** argv) {
  // A mismatched pair waits for CCL_TIMEOUT: keep it short so the failure shows quickly.
  setenv("CCL_TIMEOUT", "5", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
