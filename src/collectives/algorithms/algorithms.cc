// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/algorithms/algorithms.h"

#include <algorithm>

#include "codecs/codec.h"
#include "collectives/algorithms/misaligned.h"
#include "collectives/algorithms/scaled_average.h"
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
    {Algo::kLowRank, "lowrank", {"powersgd"}},
};
static_assert(std::size(kAlgoNames) == kNumAlgos, "every algorithm has a name, in Algo's order");

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

bool always(const CollArgs&) { return true; }
bool uniformNodes(const CollArgs& a) { return a.topo && a.topo->uniform(); }
size_t bytesOf(const CollArgs& a) { return a.count * dataTypeSize(a.dtype); }
bool fewBytes(const CollArgs& a) { return bytesOf(a) <= a.directMaxBytes; }
bool latencyBound(const CollArgs& a) { return bytesOf(a) <= a.treeMaxBytes; }
bool ringSymmetric(const CollArgs& a) { return detail::evenRingChunks(a, a.count, dataTypeSize(a.dtype)); }
// Recursive doubling over a power of two ranks: no rank folds in first (tree.cc).
bool powerOfTwoRanks(const CollArgs& a) { return a.nranks > 1 && (a.nranks & (a.nranks - 1)) == 0; }
// A chain needs a rank between its ends; auto takes it once the data spans chunks.
bool chainApplies(const CollArgs& a) { return a.nranks > 2; }
bool chained(const CollArgs& a) { return bytesOf(a) > a.chunkBytes; }
bool quantized(const CollArgs& a) { return codec::isQuantizer(a.codec.codec); }
// PowerSGD's factors are no per-element codec: its allreduce is its own, and the others
// (which add decoded streams) take it only when named (CCL_ALGO=sparse).
bool lowRank(const CollArgs& a) { return codec::isLowRank(a.codec.codec); }
bool perElement(const CollArgs& a) { return !lowRank(a); }
bool hierarchicalPerElement(const CollArgs& a) { return hierarchicalApplies(a) && perElement(a); }

// clang-format off
constexpr AlgoEntry kAlgoTable[] = {
    // algo          collective            compr  builder                               applies              preferred                         symmetric
    {Algo::kHier,    Coll::kAllReduce,     false, planHierarchicalAllReduce,            hierarchicalApplies, nullptr,                          hierarchicalAllReduceSymmetric},
    {Algo::kDirect,  Coll::kAllReduce,     false, detail::directAllReduce,              nullptr,             fewBytes,                         always},
    {Algo::kTree,    Coll::kAllReduce,     false, detail::recursiveDoublingAllReduce,   nullptr,             latencyBound,                     powerOfTwoRanks},
    {Algo::kRing,    Coll::kAllReduce,     false, detail::ringAllReduce,                nullptr,             nullptr,                          ringSymmetric},
    {Algo::kLowRank, Coll::kAllReduce,     true,  detail::powerSgdAllReduce,            lowRank,             nullptr,                          detail::powerSgdSymmetric},
    {Algo::kHier,    Coll::kAllReduce,     true,  planHierarchicalAllReduce,            hierarchicalPerElement, nullptr,                       hierarchicalAllReduceSymmetric},
    {Algo::kTwoShot, Coll::kAllReduce,     true,  detail::twoShotAllReduce,             perElement,          quantized,                        detail::twoShotSymmetric},
    {Algo::kRing,    Coll::kAllReduce,     true,  detail::compressedRingAllReduce,      perElement,          detail::compressedRingPreferred,  detail::compressedRingSymmetric},
    {Algo::kSparse,  Coll::kAllReduce,     true,  detail::sparseAllReduce,              nullptr,             nullptr,                          always},
    {Algo::kHier,    Coll::kBroadcast,     false, planHierarchicalBroadcast,            hierarchicalApplies, nullptr,                          nullptr},
    {Algo::kRing,    Coll::kBroadcast,     false, detail::chainBroadcast,               chainApplies,        chained,                          nullptr},
    {Algo::kDirect,  Coll::kBroadcast,     false, detail::directBroadcast,              nullptr,             nullptr,                          nullptr},
    {Algo::kHier,    Coll::kBroadcast,     true,  planHierarchicalBroadcast,            hierarchicalApplies, nullptr,                          nullptr},
    {Algo::kRing,    Coll::kBroadcast,     true,  detail::compressedChainBroadcast,     nullptr,             nullptr,                          nullptr},
    {Algo::kHier,    Coll::kReduce,        false, planHierarchicalReduce,               hierarchicalApplies, nullptr,                          nullptr},
    {Algo::kRing,    Coll::kReduce,        false, detail::chainReduce,                  chainApplies,        chained,                          nullptr},
    {Algo::kDirect,  Coll::kReduce,        false, detail::directReduce,                 nullptr,             nullptr,                          nullptr},
    {Algo::kHier,    Coll::kAllGather,     false, planHierarchicalAllGather,            hierarchicalApplies, nullptr,                          uniformNodes},
    {Algo::kRing,    Coll::kAllGather,     false, detail::ringAllGather,                nullptr,             nullptr,                          always},
    {Algo::kHier,    Coll::kAllGather,     true,  planHierarchicalAllGather,            hierarchicalApplies, nullptr,                          uniformNodes},
    {Algo::kDirect,  Coll::kAllGather,     true,  detail::compressedAllGather,          nullptr,             nullptr,                          always},
    {Algo::kHier,    Coll::kReduceScatter, false, planHierarchicalReduceScatter,        hierarchicalApplies, nullptr,                          uniformNodes},
    {Algo::kRing,    Coll::kReduceScatter, false, detail::ringReduceScatter,            nullptr,             nullptr,                          always},
    {Algo::kHier,    Coll::kReduceScatter, true,  planHierarchicalReduceScatter,        hierarchicalApplies, nullptr,                          uniformNodes},
    {Algo::kDirect,  Coll::kReduceScatter, true,  detail::compressedReduceScatter,      nullptr,             nullptr,                          always},
    {Algo::kHier,    Coll::kAlltoAll,      false, planHierarchicalAlltoAll,             hierarchicalApplies, nullptr,                          uniformNodes},
    {Algo::kDirect,  Coll::kAlltoAll,      false, detail::directAlltoAll,               nullptr,             nullptr,                          always},
    {Algo::kHier,    Coll::kAlltoAll,      true,  planHierarchicalAlltoAll,             hierarchicalApplies, nullptr,                          uniformNodes},
    {Algo::kDirect,  Coll::kAlltoAll,      true,  detail::compressedAlltoAll,           nullptr,             nullptr,                          always},
    {Algo::kDirect,  Coll::kGather,        false, detail::directGather,                 nullptr,             nullptr,                          nullptr},
    {Algo::kDirect,  Coll::kScatter,       false, detail::directScatter,                nullptr,             nullptr,                          nullptr},
};
// clang-format on

// Whether collective c's call with `a` goes on a codec's streams.
bool onStreams(Coll c, const CollArgs& a) { return a.codec.codec != cclCodecNone && collInfo(c).compressible; }

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

const AlgoEntry& chooseAlgorithm(Coll c, const CollArgs& a) {
  CCL_CHECK(!collInfo(c).pointToPoint, cclInternalError, "no plan for a point-to-point op");
  const bool compressed = onStreams(c, a);
  auto fits = [&](const AlgoEntry& e) {
    return e.coll == c && e.compressed == compressed && (!e.applies || e.applies(a));
  };
  if (a.algo != Algo::kAuto)
    for (const AlgoEntry& e : kAlgoTable)
      if (e.algo == a.algo && fits(e)) return e;
  for (const AlgoEntry& e : kAlgoTable)
    if (fits(e) && (!e.preferred || e.preferred(a))) return e;
  throw Error(cclInternalError, std::string("no algorithm for this ") + collInfo(c).name + " call");
}

Plan planCollective(Coll c, const CollArgs& a) {
  const AlgoEntry& e = chooseAlgorithm(c, a);
  Plan p = scalesInputs(e, c, a) ? planScaledAverage(e, c, a) : e.build(a);
  return a.misaligned ? stageMisaligned(p, c, a) : p;
}

Shifts planShifts(Coll c, const CollArgs& a) {
  const AlgoEntry& e = chooseAlgorithm(c, a);
  if (!e.symmetric || !e.symmetric(a)) return Shifts::none(a.nranks);
  Shifts s = e.algo == Algo::kHier ? Shifts::nodes(*a.topo) : Shifts::ranks(a.nranks);
  const Algo shifting = e.algo == Algo::kHier && c == Coll::kAllReduce ? hierarchicalAllReduceAcross(a) : e.algo;
  s.xorBlocks = shiftsByXor(shifting);
  return s;
}

bool compressible(const CollArgs& a) {
  return a.codec.codec != cclCodecNone && (a.dtype == cclFloat32 || a.dtype == cclBfloat16 || a.dtype == cclFloat16) &&
         (a.op == cclSum || a.op == cclAvg);
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

bool evenRingChunks(const CollArgs& a, size_t count, size_t elemSize) {
  const Split seg{count, static_cast<size_t>(a.nranks)};
  return chunks(seg.size(0), elemSize, a.chunkBytes).parts ==
         chunks(seg.size(static_cast<size_t>(a.nranks) - 1), elemSize, a.chunkBytes).parts;
}

std::optional<Plan> localAllReduce(const CollArgs& a) {
  if (a.count != 0 && a.nranks != 1) return std::nullopt;
  Plan p = detail::emptyPlan(a);
  if (a.count && !a.inPlace) p.copy({Buf::kRecv, 0}, {Buf::kSend, 0}, a.count * dataTypeSize(a.dtype));
  return p;
}

}  // namespace detail

}  // namespace ccl::coll
