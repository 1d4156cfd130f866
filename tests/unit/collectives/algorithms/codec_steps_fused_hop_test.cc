// SPDX-License-Identifier: BSD-3-Clause
// The fused hop (StepKind::kDecodeAddEncode): every plan that decodes a received stream into
// a sum and then encodes that sum makes it one step, and the step writes the bytes of the
// steps it stands for (widen, decode-accumulate, divide, encode), output and residual alike.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/topology.h"
#include "common/dtype.h"
#include "plan_runner.h"

namespace ccl::coll {
namespace {

bool sameRef(Ref a, Ref b) { return a.buf == b.buf && a.offset == b.offset; }

// reach[u][v]: step v waits for step u, directly or through others.
std::vector<std::vector<char>> reachability(const Plan& p) {
  const size_t n = p.steps.size();
  std::vector<std::vector<char>> reach(n, std::vector<char>(n, 0));
  // Steps only wait for earlier ones (Plan::add), so one pass in order closes the relation.
  for (size_t v = 0; v < n; ++v) {
    const Step& s = p.steps[v];
    for (uint32_t k = 0; k < s.numDeps; ++k) {
      const StepId u = p.deps[s.firstDep + k];
      reach[u][v] = 1;
      for (size_t w = 0; w < n; ++w)
        if (reach[w][u]) reach[w][v] = 1;
    }
  }
  return reach;
}

// Hops a plan leaves unfused: a decode-accumulate into an fp32 sum that an encode of the same
// elements then reads, with nothing else touching the sum in between or after but a
// division (what kDecodeAddEncode does in one step).
int unfusedHops(const Plan& p) {
  const auto reach = reachability(p);
  int found = 0;
  for (size_t d = 0; d < p.steps.size(); ++d) {
    const Step& add = p.steps[d];
    if (add.kind != StepKind::kDecodeAdd) continue;
    for (size_t e = d + 1; e < p.steps.size(); ++e) {
      const Step& enc = p.steps[e];
      if (enc.kind != StepKind::kEncode || !sameRef(enc.src, add.dst) || enc.count != add.count || !reach[d][e])
        continue;
      bool alone = true;
      for (size_t x = d + 1; x < p.steps.size() && alone; ++x) {
        const Step& o = p.steps[x];
        if (x == e || !reach[d][x]) continue;
        const bool touches = sameRef(o.src, add.dst) || sameRef(o.src2, add.dst) || sameRef(o.dst, add.dst);
        alone = !touches || (o.kind == StepKind::kDivideFloat && x < e);
      }
      found += alone ? 1 : 0;
    }
  }
  return found;
}

int fusedHops(const Plan& p) {
  int n = 0;
  for (const Step& s : p.steps) n += s.kind == StepKind::kDecodeAddEncode ? 1 : 0;
  return n;
}

// The plan with every fused hop spelled out as the steps it stands for, over a new fp32 sum in
// scratch: the reference the fused step must match byte for byte.
Plan unfuse(const Plan& p) {
  Plan q = p;
  q.steps.clear();
  q.deps.clear();
  std::vector<StepId> now(p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    Deps after;
    for (uint32_t k = 0; k < s.numDeps; ++k) after.push_back(now[p.deps[s.firstDep + k]]);
    if (s.kind != StepKind::kDecodeAddEncode) {
      now[i] = q.add(s, after);
      continue;
    }
    const Ref sum = q.scratch(s.count * sizeof(float));
    StepId last =
        s.type == p.dtype ? q.widen(sum, s.src, s.count, after) : q.copy(sum, s.src, s.count * sizeof(float), after);
    last = q.decodeAdd(sum, s.in, s.inSlot, s.count, {last});
    if (s.divide) last = q.divideFloat(sum, s.count, {last});
    const Ref residual = s.src2;
    last = q.encode(s.dst, s.bytes, s.slot, sum, cclFloat32, s.count, s.withFeedback ? &residual : nullptr, {last});
    q.steps[last].seedSalt = s.seedSalt;
    for (StepId k = last - (s.divide ? 3 : 2); k <= last; ++k) q.steps[k].intra = s.intra;
    now[i] = last;
  }
  return q;
}

struct Case {
  Coll coll;
  Algo algo;
  cclCodec_t codec;
  int ranks;
  bool feedback;
  cclRedOp_t op;
  cclDataType_t dtype;
};

std::string nameOf(const Case& c) {
  return std::string(collInfo(c.coll).name) + " " + algoName(c.algo) + " " + cclCodecName(c.codec) +
         " n=" + std::to_string(c.ranks) + (c.feedback ? " feedback" : "") + (c.op == cclAvg ? " avg" : "") + " " +
         dataTypeName(c.dtype);
}

CollArgs argsOf(const Case& c, int rank, size_t count, const Topology* topo = nullptr) {
  CollArgs a;
  a.rank = rank;
  a.nranks = c.ranks;
  a.count = count;
  a.dtype = c.dtype;
  a.op = c.op;
  a.chunkBytes = 4096;  // several chunks per shard
  a.algo = c.algo;
  a.codec = codec::defaultParams(c.codec);
  a.feedback = c.feedback;
  a.topo = topo;
  return a;
}

// Every compressed plan of the collectives that reduce, on every rank: no hop left unfused.
// Where the plan re-encodes a sum at all (the ring at every hop, the two-shot allreduce at the
// owner's), fused steps are there, and spelling them out brings the unfused hops back (so the
// search above finds what it looks for).
TEST(FusedHop, EveryPlanThatCouldFuseDoes) {
  std::vector<Case> cases;
  for (Algo algo : {Algo::kRing, Algo::kTwoShot, Algo::kSparse})
    for (cclCodec_t codec : {cclCodecInt8, cclCodecFp8E4m3, cclCodecInt4, cclCodecTopK, cclCodecRandK})
      for (int n : {1, 2, 3, 4, 7})
        for (cclRedOp_t op : {cclSum, cclAvg})
          cases.push_back({Coll::kAllReduce, algo, codec, n, n % 2 == 1, op, cclFloat32});
  for (int n : {2, 3, 5}) {
    cases.push_back({Coll::kReduceScatter, Algo::kAuto, cclCodecInt8, n, true, cclSum, cclBfloat16});
    cases.push_back({Coll::kAllGather, Algo::kAuto, cclCodecInt8, n, false, cclSum, cclFloat32});
    cases.push_back({Coll::kBroadcast, Algo::kAuto, cclCodecInt8, n, false, cclSum, cclFloat32});
    cases.push_back({Coll::kAlltoAll, Algo::kAuto, cclCodecInt8, n, false, cclSum, cclFloat32});
    cases.push_back({Coll::kAllReduce, Algo::kRing, cclCodecInt8, n, true, cclAvg, cclBfloat16});
    cases.push_back({Coll::kAllReduce, Algo::kTwoShot, cclCodecInt8, n, true, cclAvg, cclBfloat16});
  }
  int fusedPlans = 0;
  for (const Case& c : cases) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{5000}}) {
      SCOPED_TRACE(nameOf(c) + " count=" + std::to_string(count));
      // The row that plans it (a named algorithm that does not apply falls back to auto's).
      const Algo chosen = chooseAlgorithm(c.coll, argsOf(c, 0, count)).algo;
      const bool reencodes = c.coll == Coll::kAllReduce && c.ranks > 1 && count > 0 &&
                             (chosen == Algo::kTwoShot || (chosen == Algo::kRing && c.codec != cclCodecRandK));
      for (int r = 0; r < c.ranks; ++r) {
        const Plan p = planCollective(c.coll, argsOf(c, r, count));
        EXPECT_EQ(unfusedHops(p), 0) << "rank " << r;
        if (!reencodes) continue;
        EXPECT_GT(fusedHops(p), 0) << "rank " << r;
        // Spelled out, the hops are found (sums of no elements share a scratch offset, so
        // only where every shard has elements).
        if (count > 1) {
          EXPECT_GT(unfusedHops(unfuse(p)), 0) << "rank " << r;
        }
        ++fusedPlans;
      }
    }
  }
  EXPECT_GT(fusedPlans, 100);
}

// The allreduce across nodes of a hierarchical plan is a flat plan spliced in: its hops stay
// fused there.
TEST(FusedHop, TheStageAcrossNodesOfAHierarchicalPlanIsFused) {
  const int sizes[] = {2, 2, 2};
  const Topology t = Topology::blocks(sizes);
  const Case c{Coll::kAllReduce, Algo::kHier, cclCodecInt8, t.nranks(), true, cclSum, cclFloat32};
  for (int r = 0; r < t.nranks(); ++r) {
    const Plan p = planCollective(Coll::kAllReduce, argsOf(c, r, 6000, &t));
    EXPECT_EQ(unfusedHops(p), 0) << "rank " << r;
    EXPECT_GT(fusedHops(p), 0) << "rank " << r;  // an owner of a shard, on every rank here
  }
}

// Inputs of every rank, the same for the fused plans and their spelled-out twins.
std::vector<std::vector<float>> inputs(int n, size_t count) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> v(n, std::vector<float>(count));
  for (auto& x : v)
    for (auto& e : x) e = dist(rng);
  v[0][count / 2] = 3e4f;  // a block with an outlier
  return v;
}

struct Outcome {
  std::vector<std::vector<uint8_t>> out;
  std::vector<std::vector<float>> residual;
};

Outcome run(const Case& c, size_t count, bool fixedLength, bool stochastic, bool spelledOut) {
  const int n = c.ranks;
  const size_t es = dataTypeSize(c.dtype);
  const auto in = inputs(n, count);
  std::vector<std::vector<uint8_t>> send(n, std::vector<uint8_t>(count * es));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      if (c.dtype == cclFloat32) std::memcpy(&send[r][i * 4], &in[r][i], 4);
      if (c.dtype == cclBfloat16) {
        uint32_t bits;
        std::memcpy(&bits, &in[r][i], 4);
        const auto h = static_cast<uint16_t>(bits >> 16);
        std::memcpy(&send[r][i * 2], &h, 2);
      }
    }
  Outcome o;
  o.out.assign(n, std::vector<uint8_t>(count * es, 0xee));
  o.residual.assign(n, std::vector<float>(2 * count + 64, 0.25f));
  testing::runPlans(
      n,
      [&](int r) {
        CollArgs a = argsOf(c, r, count);
        a.codec.fixedLength = fixedLength;
        a.codec.stochastic = stochastic;
        Plan p = planCollective(c.coll, a);
        return spelledOut ? unfuse(p) : p;
      },
      [&](int r) {
        return testing::RankBuffers{send[r].data(), o.out[r].data(), c.feedback ? o.residual[r].data() : nullptr};
      },
      /*callSeed=*/11);
  return o;
}

// The fused step's output and residual are the bytes of the steps it stands for, on every
// rank, for the quantizers (fixed-length streams as NCCL's link posts them, stochastic
// rounding), the sparsifiers, sums and averages, fp32 and bf16 inputs.
TEST(FusedHop, WritesTheBytesOfTheStepsItStandsFor) {
  struct Codec {
    cclCodec_t codec;
    bool fixedLength, stochastic;
  };
  const Codec codecs[] = {{cclCodecInt8, false, false}, {cclCodecInt8, true, true},   {cclCodecFp8E4m3, true, false},
                          {cclCodecInt4, false, true},  {cclCodecMxfp4, true, false}, {cclCodecNvfp4, false, false},
                          {cclCodecTopK, false, false}};
  for (Algo algo : {Algo::kRing, Algo::kTwoShot})
    for (const Codec& k : codecs)
      for (int n : {2, 3, 5}) {
        const Case c{
            Coll::kAllReduce, algo, k.codec, n, n != 3, n == 5 ? cclAvg : cclSum, n == 3 ? cclBfloat16 : cclFloat32};
        const size_t count = 3001;
        SCOPED_TRACE(nameOf(c) + (k.fixedLength ? " fixed-length" : "") + (k.stochastic ? " stochastic" : ""));
        const Outcome fused = run(c, count, k.fixedLength, k.stochastic, false);
        const Outcome spelled = run(c, count, k.fixedLength, k.stochastic, true);
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(fused.out[r], spelled.out[r]) << "rank " << r;
          if (c.feedback) {
            EXPECT_EQ(0, std::memcmp(fused.residual[r].data(), spelled.residual[r].data(),
                                     fused.residual[r].size() * sizeof(float)))
                << "rank " << r;
          }
        }
      }
}

}  // namespace
}  // namespace ccl::coll
