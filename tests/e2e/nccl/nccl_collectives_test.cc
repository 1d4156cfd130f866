// SPDX-License-Identifier: BSD-3-Clause
// Every NCCL collective and point-to-point call on host buffers, with 1..8 thread ranks,
// every data type and every built-in reduction op, checked exactly (ncclAvg of floats within
// the type's rounding, since NCCL itself does not define its rounding).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "nccl_test_util.h"
#include "rank_threads.h"

namespace nccl_test {
namespace {

// Small integers, so that every partial sum or product over 8 ranks is exact in its type
// (fp8 e5m2 holds the integers up to 8 only).
double reduceInput(ncclRedOp_t op, ncclDataType_t t, int rank, size_t i) {
  if (op == ncclProd) return (rank < 3 && (i + rank) % 2 == 0) ? 2 : 1;
  const bool fp8 = t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
  return static_cast<double>((rank * 7 + i * 3) % (fp8 ? 2 : 5));
}

// Distinct per rank and position, for collectives that only move data.
double moveInput(int rank, size_t i) { return static_cast<double>((rank * 31 + i * 7) % 97); }

double reference(ncclRedOp_t op, ncclDataType_t t, int n, size_t i, size_t offset = 0) {
  double acc = reduceInput(op, t, 0, offset + i);
  for (int r = 1; r < n; ++r) {
    const double v = reduceInput(op, t, r, offset + i);
    if (op == ncclSum || op == ncclAvg) acc += v;
    if (op == ncclProd) acc *= v;
    if (op == ncclMax) acc = std::max(acc, v);
    if (op == ncclMin) acc = std::min(acc, v);
  }
  if (op == ncclAvg) acc = isFloat(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

// Relative tolerance of ncclAvg on floats: the division rounds once per type.
double avgTolerance(ncclDataType_t t) {
  switch (t) {
    case ncclFloat8e4m3:
      return 0.07;
    case ncclFloat8e5m2:
      return 0.13;
    case ncclBfloat16:
      return 0.01;
    case ncclFloat16:
      return 0.002;
    case ncclFloat32:
      return 1e-6;
    default:
      return 1e-12;
  }
}

void expectReduced(ncclRedOp_t op, ncclDataType_t t, int n, const void* got, size_t count, size_t offset,
                   const std::string& what) {
  for (size_t i = 0; i < count; ++i) {
    const double want = reference(op, t, n, i, offset);
    const double have = get(t, got, i);
    if (op == ncclAvg && isFloat(t)) {
      ASSERT_NEAR(have, want, avgTolerance(t) * std::max(1.0, std::fabs(want))) << what << " i=" << i;
    } else {
      ASSERT_EQ(have, want) << what << " i=" << i;
    }
  }
}

const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

std::string label(const char* coll, ncclDataType_t t, ncclRedOp_t op, size_t count, int rank) {
  return std::string(coll) + " " + typeName(t) + " op " + std::to_string(op) + " count " + std::to_string(count) +
         " rank " + std::to_string(rank);
}

void allReduce(int rank, int n, ncclComm_t comm, ncclDataType_t t, ncclRedOp_t op, size_t count, bool inPlace) {
  auto send = filled(t, count, [&](size_t i) { return reduceInput(op, t, rank, i); });
  auto recv = filled(t, count, [](size_t) { return 0; });
  void* out = inPlace ? send.data() : recv.data();
  ASSERT_EQ(ncclAllReduce(send.data(), out, count, t, op, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
  expectReduced(op, t, n, out, count, 0, label("allreduce", t, op, count, rank));
}

void reduce(int rank, int n, ncclComm_t comm, ncclDataType_t t, ncclRedOp_t op, size_t count) {
  const int root = n - 1;
  auto send = filled(t, count, [&](size_t i) { return reduceInput(op, t, rank, i); });
  auto recv = filled(t, count, [](size_t) { return 0; });
  ASSERT_EQ(ncclReduce(send.data(), recv.data(), count, t, op, root, comm, nullptr), ncclSuccess);
  if (rank == root) expectReduced(op, t, n, recv.data(), count, 0, label("reduce", t, op, count, rank));
}

void reduceScatter(int rank, int n, ncclComm_t comm, ncclDataType_t t, ncclRedOp_t op, size_t count) {
  auto send = filled(t, count * n, [&](size_t i) { return reduceInput(op, t, rank, i); });
  auto recv = filled(t, count, [](size_t) { return 0; });
  ASSERT_EQ(ncclReduceScatter(send.data(), recv.data(), count, t, op, comm, nullptr), ncclSuccess);
  expectReduced(op, t, n, recv.data(), count, count * rank, label("reducescatter", t, op, count, rank));
}

void expectBytes(ncclDataType_t t, const std::vector<unsigned char>& got, size_t count,
                 const std::function<double(size_t)>& f, const std::string& what) {
  auto want = filled(t, count, f);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), count * typeSize(t)), 0) << what;
}

void dataMovement(int rank, int n, ncclComm_t comm, ncclDataType_t t, size_t count) {
  const int root = n / 2;
  const size_t nc = count * n;
  // broadcast, and ncclBcast in place
  auto b = filled(t, count, [&](size_t i) { return rank == root ? moveInput(root, i) : 0; });
  auto r = filled(t, count, [](size_t) { return 0; });
  ASSERT_EQ(ncclBroadcast(b.data(), r.data(), count, t, root, comm, nullptr), ncclSuccess);
  expectBytes(
      t, r, count, [&](size_t i) { return moveInput(root, i); }, label("broadcast", t, ncclSum, count, rank));
  ASSERT_EQ(ncclBcast(b.data(), count, t, root, comm, nullptr), ncclSuccess);
  expectBytes(
      t, b, count, [&](size_t i) { return moveInput(root, i); }, label("bcast", t, ncclSum, count, rank));
  // allgather
  auto s = filled(t, count, [&](size_t i) { return moveInput(rank, i); });
  auto g = filled(t, nc, [](size_t) { return 0; });
  ASSERT_EQ(ncclAllGather(s.data(), g.data(), count, t, comm, nullptr), ncclSuccess);
  expectBytes(
      t, g, nc, [&](size_t i) { return moveInput(static_cast<int>(i / count), i % count); },
      label("allgather", t, ncclSum, count, rank));
  // alltoall: block j of rank i lands as block i of rank j
  auto a = filled(t, nc, [&](size_t i) { return moveInput(rank * n + static_cast<int>(i / count), i % count); });
  auto ao = filled(t, nc, [](size_t) { return 0; });
  ASSERT_EQ(ncclAlltoAll(a.data(), ao.data(), count, t, comm, nullptr), ncclSuccess);
  expectBytes(
      t, ao, nc, [&](size_t i) { return moveInput(static_cast<int>(i / count) * n + rank, i % count); },
      label("alltoall", t, ncclSum, count, rank));
  // gather to root
  auto go = filled(t, nc, [](size_t) { return 0; });
  ASSERT_EQ(ncclGather(s.data(), go.data(), count, t, root, comm, nullptr), ncclSuccess);
  if (rank == root)
    expectBytes(
        t, go, nc, [&](size_t i) { return moveInput(static_cast<int>(i / count), i % count); },
        label("gather", t, ncclSum, count, rank));
  // scatter from root
  auto sc =
      filled(t, nc, [&](size_t i) { return rank == root ? moveInput(static_cast<int>(i / count), i % count) : 0; });
  auto so = filled(t, count, [](size_t) { return 0; });
  ASSERT_EQ(ncclScatter(sc.data(), so.data(), count, t, root, comm, nullptr), ncclSuccess);
  expectBytes(
      t, so, count, [&](size_t i) { return moveInput(rank, i); }, label("scatter", t, ncclSum, count, rank));
  // send/recv around the ring, in one group
  auto ro = filled(t, count, [](size_t) { return 0; });
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(s.data(), count, t, (rank + 1) % n, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclRecv(ro.data(), count, t, (rank + n - 1) % n, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
  expectBytes(
      t, ro, count, [&](size_t i) { return moveInput((rank + n - 1) % n, i); },
      label("sendrecv", t, ncclSum, count, rank));
}

class NcclCollectives : public ::testing::TestWithParam<int> {};

TEST_P(NcclCollectives, AllReduceEveryTypeAndOp) {
  const int n = GetParam();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    for (ncclDataType_t t : allTypes())
      for (ncclRedOp_t op : kOps) allReduce(rank, n, comm, t, op, 37, t == ncclFloat32);
    allReduce(rank, n, comm, ncclFloat32, ncclSum, 0, false);
    allReduce(rank, n, comm, ncclInt64, ncclMax, 1, true);
  });
}

TEST_P(NcclCollectives, ReduceAndReduceScatter) {
  const int n = GetParam();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    for (ncclDataType_t t : {ncclInt32, ncclUint8, ncclFloat16, ncclFloat32, ncclBfloat16, ncclFloat8e5m2})
      for (ncclRedOp_t op : kOps) {
        reduce(rank, n, comm, t, op, 13);
        reduceScatter(rank, n, comm, t, op, 11);
      }
    reduceScatter(rank, n, comm, ncclFloat64, ncclSum, 0);
  });
}

TEST_P(NcclCollectives, DataMovementEveryType) {
  const int n = GetParam();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    for (ncclDataType_t t : allTypes()) dataMovement(rank, n, comm, t, 19);
    dataMovement(rank, n, comm, ncclUint8, 0);
  });
}

// Ranks as processes: the parent makes the id (its rendezvous service serves the children)
// and forks; each child is one rank and reports through its exit code. The parent never
// waits past a deadline. Run in a process of its own (no UCX before the fork).
TEST(NcclProcesses, EveryCollectiveOnFourProcesses) {
  constexpr int kRanks = 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  const std::vector<int> codes = ccltest::runRankProcesses(
      kRanks,
      [&](int rank) {
        ncclComm_t comm = nullptr;
        if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) return 2;
        for (ncclDataType_t t : allTypes()) {
          for (ncclRedOp_t op : kOps) allReduce(rank, kRanks, comm, t, op, 29, false);
          dataMovement(rank, kRanks, comm, t, 17);
        }
        reduce(rank, kRanks, comm, ncclFloat32, ncclSum, 9);
        reduceScatter(rank, kRanks, comm, ncclInt32, ncclMax, 9);
        const bool failed = ::testing::Test::HasFailure();
        if (ncclCommDestroy(comm) != ncclSuccess) return 3;
        return failed ? 1 : 0;
      },
      std::chrono::seconds(120));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " (1: wrong data, 2: init, 3: destroy)";
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclCollectives, ::testing::Range(1, 9),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace nccl_test
