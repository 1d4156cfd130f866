// SPDX-License-Identifier: BSD-3-Clause
// The facts of every collective in one table: its name, its cclOpKind_t, whether it is
// rooted, reduces, is point-to-point or may be carried compressed, how many elements each
// rank's buffers hold and where the in-place form puts the send buffer. The api layer, the
// NCCL face, the compression policy, the tests and the perf binaries all read it; it needs
// nothing but ccl.h, so code outside the library can include it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ccl/ccl.h"

namespace ccl::coll {

// One value per cclOpKind_t, in its order (checked below).
enum class Coll : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
};
inline constexpr int kNumColls = cclNumOpKinds;

// Elements of one rank's buffer for a call with count `count`: none, count, or count per rank.
enum class Extent : uint8_t { kNone, kCount, kPerRank };

// Where the in-place form of a call puts its buffers.
enum class InPlace : uint8_t {
  kNone,        // no in-place form (point to point)
  kSame,        // sendbuff == recvbuff
  kSendInRecv,  // sendbuff == recvbuff + rank * count (allgather, gather)
  kRecvInSend,  // recvbuff == sendbuff + rank * count (reduce-scatter, scatter)
};

struct CollInfo {
  const char* name;  // as CCL_COMPRESS spells it: "allreduce", "reducescatter", ...
  cclOpKind_t op;
  bool rooted;        // takes a root
  bool reduction;     // takes an op and reduces
  bool pointToPoint;  // one peer, matched per pair instead of per communicator
  bool compressible;  // has a compressed plan and an *Ex call
  bool feedback;      // its *Ex call takes an error-feedback handle
  Extent send, recv;  // elements per rank of each buffer
  bool sendRootOnly;  // the send buffer is read on the root only
  bool recvRootOnly;  // the receive buffer is written on the root only
  InPlace inPlace;
};

// clang-format off
inline constexpr CollInfo kCollTable[kNumColls] = {
      // name          op                  rooted reduce p2p    compr  fb     send          recv          sRoot  rRoot  in place
      {"allreduce",     cclOpAllReduce,     false, true,  false, true,  true,  Extent::kCount,    Extent::kCount,    false, false, InPlace::kSame},
      {"broadcast",     cclOpBroadcast,     true,  false, false, true,  false, Extent::kCount,    Extent::kCount,    true,  false, InPlace::kSame},
      {"reduce",        cclOpReduce,        true,  true,  false, false, false, Extent::kCount,    Extent::kCount,    false, true,  InPlace::kSame},
      {"allgather",     cclOpAllGather,     false, false, false, true,  true,  Extent::kCount,    Extent::kPerRank,  false, false, InPlace::kSendInRecv},
      {"reducescatter", cclOpReduceScatter, false, true,  false, true,  true,  Extent::kPerRank,  Extent::kCount,    false, false, InPlace::kRecvInSend},
      {"alltoall",      cclOpAlltoAll,      false, false, false, true,  false, Extent::kPerRank,  Extent::kPerRank,  false, false, InPlace::kSame},
      {"gather",        cclOpGather,        true,  false, false, false, false, Extent::kCount,    Extent::kPerRank,  false, true,  InPlace::kSendInRecv},
      {"scatter",       cclOpScatter,       true,  false, false, false, false, Extent::kPerRank,  Extent::kCount,    true,  false, InPlace::kRecvInSend},
      {"send",          cclOpSend,          false, false, true,  true,  true,  Extent::kCount,    Extent::kNone,     false, false, InPlace::kNone},
      {"recv",          cclOpRecv,          false, false, true,  true,  false, Extent::kNone,     Extent::kCount,    false, false, InPlace::kNone},
};
// clang-format on

constexpr const CollInfo& collInfo(Coll c) { return kCollTable[static_cast<int>(c)]; }

constexpr bool kCollTableMatchesOpKinds = [] {
  for (int c = 0; c < kNumColls; ++c)
    if (collInfo(static_cast<Coll>(c)).op != c) return false;
  return true;
}();
static_assert(kCollTableMatchesOpKinds, "Coll and the table follow cclOpKind_t");

constexpr Coll collOf(cclOpKind_t op) { return static_cast<Coll>(op); }

// The collective named `name` (as collInfo spells it, any case); false if there is none.
constexpr bool collFromName(std::string_view name, Coll* out) {
  for (int c = 0; c < kNumColls; ++c) {
    const std::string_view want = collInfo(static_cast<Coll>(c)).name;
    if (want.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < want.size() && same; ++i) {
      const char ch = name[i] >= 'A' && name[i] <= 'Z' ? static_cast<char>(name[i] - 'A' + 'a') : name[i];
      same = ch == want[i];
    }
    if (same) {
      *out = static_cast<Coll>(c);
      return true;
    }
  }
  return false;
}

// How many codec round trips bound the error of a value of collective c compressed among
// `ranks` ranks: cclCodecErrorBound's `quantizations`, the composition ccl.h documents. An
// allreduce n (the ring re-encodes n - 1 partial sums and the sum; two-shot and the sparse
// exchange quantize n contributions and a sum whose errors add up to no more), a
// reduce-scatter n - 1, the others 1 (each value is encoded once). A hierarchical plan
// compresses only across nodes: pass the number of nodes. 0 for what is never compressed.
constexpr int codecRoundTrips(Coll c, int ranks) {
  const CollInfo i = collInfo(c);
  if (!i.compressible) return 0;
  if (i.op == cclOpAllReduce) return ranks;
  if (i.op == cclOpReduceScatter) return ranks > 1 ? ranks - 1 : 1;
  return 1;
}

constexpr size_t elementsOf(Extent e, size_t count, size_t nranks) {
  return e == Extent::kNone ? 0 : e == Extent::kCount ? count : count * nranks;
}

// Elements of the send and receive buffers of a rank (the root or not), as NCCL defines
// each collective for a call with count `count`.
struct BufferCounts {
  size_t send;
  size_t recv;
};
constexpr BufferCounts bufferCounts(Coll c, size_t count, size_t nranks, bool isRoot) {
  const CollInfo i = collInfo(c);
  return {i.sendRootOnly && !isRoot ? 0 : elementsOf(i.send, count, nranks),
          i.recvRootOnly && !isRoot ? 0 : elementsOf(i.recv, count, nranks)};
}

// Whether send and recv (rank `rank`'s buffers, `blockBytes` = count * element size) sit
// where the in-place form of the collective puts them. Rooted collectives whose buffers
// differ in size have an in-place form on the root only.
inline bool isInPlace(Coll c, const void* send, const void* recv, size_t blockBytes, int rank, bool isRoot) {
  const auto* s = static_cast<const char*>(send);
  const auto* d = static_cast<const char*>(recv);
  if (!s || !d) return false;
  const CollInfo i = collInfo(c);
  const bool rootOnly = i.rooted && i.send != i.recv;
  if (rootOnly && !isRoot) return false;
  switch (i.inPlace) {
    case InPlace::kSame:
      return s == d;
    case InPlace::kSendInRecv:
      return s == d + static_cast<size_t>(rank) * blockBytes;
    case InPlace::kRecvInSend:
      return d == s + static_cast<size_t>(rank) * blockBytes;
    case InPlace::kNone:
      break;
  }
  return false;
}

}  // namespace ccl::coll
