// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/algorithms.h"

#include <algorithm>

#include "common/dtype.h"
#include "common/error.h"
#include "common/tags.h"

namespace ccl::coll {

namespace {

// Every algorithm's name, in one place: CCL_ALGO, log lines and test names all read it.
struct AlgoName {
  Algo algo;
  const char* name;
  const char* aliases[2];  // other spellings CCL_ALGO accepts
};
constexpr AlgoName kAlgoNames[] = {
    {Algo::kAuto, "auto", {}},
    {Algo::kRing, "ring", {}},
    {Algo::kTree, "tree", {"rd", "recursive_doubling"}},
    {Algo::kDirect, "direct", {}},
    {Algo::kTwoShot, "twoshot", {"two_shot"}},
    {Algo::kSparse, "sparse", {}},
    {Algo::kHier, "hier", {"hierarchical"}},
};

}  // namespace

Algo parseAlgo(const std::string& name) {
  if (name.empty()) return Algo::kAuto;
  std::string names;
  for (const AlgoName& a : kAlgoNames) {
    if (name == a.name) return a.algo;
    for (const char* alias : a.aliases)
      if (alias && name == alias) return a.algo;
    names += std::string(names.empty() ? "" : ", ") + a.name;
  }
  throw Error(cclInvalidArgument, "unknown algorithm '" + name + "' (CCL_ALGO: " + names + ")");
}

const char* algoName(Algo a) {
  for (const AlgoName& n : kAlgoNames)
    if (n.algo == a) return n.name;
  return "?";
}

namespace {

bool layered(const CollArgs& a) { return a.topo && a.topo->layered(); }

// clang-format off
constexpr AlgoEntry kAlgoTable[] = {
    // algo          collective              compressed builder                            applies
    {Algo::kDirect,  Coll::kAllReduce,       false, detail::directAllReduce,              nullptr},
    {Algo::kTree,    Coll::kAllReduce,       false, detail::recursiveDoublingAllReduce,   nullptr},
    {Algo::kRing,    Coll::kAllReduce,       false, planRingAllReduce,                    nullptr},
    {Algo::kHier,    Coll::kAllReduce,       false, planHierarchicalAllReduce,            layered},
    {Algo::kTwoShot, Coll::kAllReduce,       true,  detail::twoShotAllReduce,             nullptr},
    {Algo::kRing,    Coll::kAllReduce,       true,  detail::compressedRingAllReduce,      nullptr},
    {Algo::kSparse,  Coll::kAllReduce,       true,  detail::sparseAllReduce,              nullptr},
    {Algo::kHier,    Coll::kAllReduce,       true,  planHierarchicalAllReduce,            layered},
    {Algo::kHier,    Coll::kReduceScatter,   false, planHierarchicalReduceScatter,        layered},
    {Algo::kHier,    Coll::kReduceScatter,   true,  planHierarchicalReduceScatter,        layered},
    {Algo::kHier,    Coll::kAllGather,       false, planHierarchicalAllGather,            layered},
    {Algo::kHier,    Coll::kAllGather,       true,  planHierarchicalAllGather,            layered},
    {Algo::kHier,    Coll::kBroadcast,       false, planHierarchicalBroadcast,            layered},
    {Algo::kHier,    Coll::kBroadcast,       true,  planHierarchicalBroadcast,            layered},
    {Algo::kHier,    Coll::kReduce,          false, planHierarchicalReduce,               layered},
    {Algo::kHier,    Coll::kAlltoAll,        false, planHierarchicalAlltoAll,             layered},
    {Algo::kHier,    Coll::kAlltoAll,        true,  planHierarchicalAlltoAll,             layered},
};
// clang-format on

}  // namespace

std::span<const AlgoEntry> algorithmTable() { return kAlgoTable; }

const AlgoEntry& algorithm(Coll c, bool compressed, Algo algo, const CollArgs& a) {
  for (const AlgoEntry& e : kAlgoTable)
    if (e.coll == c && e.compressed == compressed && e.algo == algo) {
      CCL_CHECK(!e.applies || e.applies(a), cclInvalidArgument,
                std::string("algorithm ") + algoName(algo) + " does not apply to this " + collInfo(c).name + " call");
      return e;
    }
  throw Error(cclInvalidArgument, std::string(collInfo(c).name) + " has no " + (compressed ? "compressed " : "") +
                                      "algorithm " + algoName(algo));
}

bool compressible(const CollArgs& a) {
  return a.codec.codec != cclCodecNone && (a.dtype == cclFloat32 || a.dtype == cclBfloat16 || a.dtype == cclFloat16) &&
         (a.op == cclSum || a.op == cclAvg);
}

Algo chooseAllReduce(const CollArgs& a) {
  if (hierarchicalApplies(a)) return Algo::kHier;
  if (a.algo == Algo::kRing || a.algo == Algo::kTree || a.algo == Algo::kDirect) return a.algo;
  const size_t bytes = a.count * dataTypeSize(a.dtype);
  if (bytes <= a.directMaxBytes) return Algo::kDirect;
  return bytes <= a.treeMaxBytes ? Algo::kTree : Algo::kRing;
}

namespace detail {

Plan emptyPlan(const CollArgs& a) {
  Plan p;
  p.dtype = a.dtype;
  p.op = a.op == cclAvg ? cclSum : a.op;
  p.nranks = a.nranks;
  return p;
}

Split chunks(size_t count, size_t elemSize, size_t chunkBytes) {
  size_t bytes = count * elemSize;
  size_t chunk = std::max<size_t>(chunkBytes, bytes / tags::kChunkLimit + 1);
  size_t n = std::max<size_t>(1, (bytes + chunk - 1) / chunk);
  return Split{count, std::min(n, std::max<size_t>(count, 1))};
}

uint32_t tag(int phase, int nranks, int step, size_t chunk) { return tags::stepTag(phase, nranks, step, chunk); }

}  // namespace detail

namespace {

// Plan builders per collective, in Coll order: uncompressed, compressed (null: none). A test
// (Tables.CompressedPlansExactlyForTheCompressibleCollectives) checks them against the table.
struct Builders {
  Plan (*plain)(const CollArgs&);
  Plan (*compressed)(const CollArgs&);
};
constexpr Builders kBuilders[] = {
    {planAllReduce, planCompressedAllReduce},
    {planBroadcast, planCompressedBroadcast},
    {planReduce, nullptr},
    {planAllGather, planCompressedAllGather},
    {planReduceScatter, planCompressedReduceScatter},
    {planAlltoAll, planCompressedAlltoAll},
    {planGather, nullptr},
    {planScatter, nullptr},
};

}  // namespace

Plan planCollective(Coll c, const CollArgs& a) {
  const auto i = static_cast<size_t>(c);
  if (i >= sizeof(kBuilders) / sizeof(kBuilders[0])) throw Error(cclInternalError, "no plan for a point-to-point op");
  const Builders& b = kBuilders[i];
  return a.codec.codec != cclCodecNone && b.compressed ? b.compressed(a) : b.plain(a);
}

Plan planSend(int peer, uint32_t tag, size_t bytes) {
  Plan p;
  p.send(peer, tag, {Buf::kSend, 0}, bytes);
  return p;
}

Plan planRecv(int peer, uint32_t tag, size_t bytes) {
  Plan p;
  p.recv(peer, tag, {Buf::kRecv, 0}, bytes);
  return p;
}

}  // namespace ccl::coll
