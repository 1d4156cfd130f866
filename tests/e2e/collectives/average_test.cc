// SPDX-License-Identifier: BSD-3-Clause
// cclAvg of fp16 and fp8 scales each rank's input by 1/nranks before the sum, as NCCL does
// (ccl.h): averages of values near the type's largest stay finite, where a sum divided at the
// end leaves the range in its partial sums (inf for fp16, NaN for e4m3). Every reducing
// collective, every algorithm CCL_ALGO can force on it, in and out of place, flat and on two
// nodes. The inputs are chosen so that every scaled value and every partial sum is exact:
// the result must be the average to the bit, and the caller's send buffer untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "dtype_ref.h"
#include "rank_threads.h"
#include "reference.h"
#include "scoped_env.h"
#include "world.h"

namespace ccltest {
namespace {

constexpr int kRanks = 4;
constexpr size_t kCount = 3000;  // elements of the result per rank: several chunks of a ring

// Per type, values k whose multiples by kRanks are representable inputs, and any sum of
// kRanks of which is exact: multiples of the unit in the last place at the top of the range.
struct Grid {
  cclDataType_t type;
  std::vector<double> k;
};
const std::vector<Grid>& grids() {
  static const std::vector<Grid> g = {
      {cclFloat16, {8192, 10240, 12288, 14336, 16352}},  // inputs 32768 .. 65408, sums to 65408
      {cclFloat8e4m3, {32, 64, 96}},                     // inputs 128 .. 384 (largest: 448)
      {cclFloat8e5m2, {8192}},                           // inputs 32768 (largest: 57344)
  };
  return g;
}

uint64_t pickK(const Grid& g, int rank, size_t i) {
  return static_cast<uint64_t>(mixBits(0x5ca1ed, static_cast<uint64_t>(rank), i) % g.k.size());
}

// Rank r's input element i, and the average of element i over the ranks.
double input(const Grid& g, int r, size_t i) { return kRanks * g.k[pickK(g, r, i)]; }
double average(const Grid& g, size_t i) {
  double s = 0;
  for (int r = 0; r < kRanks; ++r) s += g.k[pickK(g, r, i)];
  return s;
}

struct Call {
  cclOpKind_t kind;  // cclOpAllReduce, cclOpReduce or cclOpReduceScatter
  bool inPlace;
};

// One call of every rank; checks the result (the root's, for a reduce) bit for bit.
void runAverage(cclComm_t comm, int r, const Grid& g, Call c, const std::string& where) {
  const size_t es = dtypeInfo(g.type).size;
  const bool scatter = c.kind == cclOpReduceScatter;
  const size_t sendCount = scatter ? kCount * kRanks : kCount;
  std::vector<uint64_t> sendBits(sendCount);
  std::vector<char> send(sendCount * es), recv(sendCount * es, 0x55);
  for (size_t i = 0; i < sendCount; ++i) {
    sendBits[i] = encodeFloat(g.type, input(g, r, i));
    std::memcpy(send.data() + i * es, &sendBits[i], es);
  }
  if (c.inPlace) recv = send;
  const void* sb = c.inPlace ? recv.data() : send.data();
  // In place, a reduce-scatter's result is rank r's block of its send buffer.
  void* rb = c.inPlace && scatter ? recv.data() + r * kCount * es : recv.data();
  cclResult_t res = cclSuccess;
  if (c.kind == cclOpAllReduce) res = cclAllReduce(sb, rb, kCount, g.type, cclAvg, comm, nullptr);
  if (c.kind == cclOpReduce) res = cclReduce(sb, rb, kCount, g.type, cclAvg, 0, comm, nullptr);
  if (scatter) res = cclReduceScatter(sb, rb, kCount, g.type, cclAvg, comm, nullptr);
  ASSERT_EQ(res, cclSuccess) << where << ": " << describeResult(res);
  if (c.kind == cclOpReduce && r != 0) return;
  size_t wrong = 0, first = 0;
  double firstGot = 0, firstExpected = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const size_t at = scatter ? r * kCount + i : i;  // the element of the inputs it averages
    uint64_t got = 0;
    std::memcpy(&got, static_cast<char*>(rb) + i * es, es);
    const double expected = average(g, at), value = decodeFloat(g.type, got);
    if (value != expected && wrong++ == 0) std::tie(first, firstGot, firstExpected) = std::tie(i, value, expected);
  }
  EXPECT_EQ(wrong, 0u) << where << ": " << wrong << " wrong, first [" << first << "] " << firstGot << ", expected "
                       << firstExpected;
  if (!c.inPlace)
    for (size_t i = 0; i < sendCount; ++i) {
      uint64_t bits = 0;
      std::memcpy(&bits, send.data() + i * es, es);
      ASSERT_EQ(bits, sendBits[i]) << where << ": the send buffer was written at " << i;
    }
}

void everyCall(const char* algo, const std::vector<const char*>& hosts) {
  ScopedEnv forced("CCL_ALGO", algo);
  ScopedEnv codec("CCL_CODEC", "none");
  cclUniqueId id{};
  ASSERT_CCL_OK(cclGetUniqueId(&id));
  expectNoneThrew(runRanks(kRanks, [&](int r) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.hostId = hosts[static_cast<size_t>(r)];
    cclComm_t comm = nullptr;
    ASSERT_CCL_OK(cclCommInitRankConfig(&comm, kRanks, id, r, &config));
    for (const Grid& g : grids())
      for (cclOpKind_t kind : {cclOpAllReduce, cclOpReduce, cclOpReduceScatter})
        for (bool inPlace : {false, true}) {
          const std::string where = std::string("CCL_ALGO=") + algo + " " + dtypeInfo(g.type).name + " op kind " +
                                    std::to_string(kind) + (inPlace ? " in place" : " out of place") + " rank " +
                                    std::to_string(r);
          runAverage(comm, r, g, {kind, inPlace}, where);
        }
    EXPECT_CCL_OK(cclCommDestroy(comm));
  }));
}

TEST(ScaledAverage, NearTheLargestValueStaysFiniteAndExactOnOneNode) {
  for (const char* algo : {"auto", "ring", "tree", "direct"}) everyCall(algo, {"n0", "n0", "n0", "n0"});
}

TEST(ScaledAverage, NearTheLargestValueStaysFiniteAndExactOnTwoNodes) {
  for (const char* algo : {"hier", "ring"}) everyCall(algo, {"n0", "n0", "n1", "n1"});
}

}  // namespace
}  // namespace ccltest
