// SPDX-License-Identifier: BSD-3-Clause
// The cost model's projection (collectives/plan/cost.h) of an fp32 allreduce on GPU clusters of 8
// GPUs a node: flat ring, tree (recursive doubling), two-shot and hierarchical, uncompressed
// and with int8, int4 and fp8_e4m3, for 8 to 65,536 ranks and inter-node links of 25, 100 and
// 400 Gbit/s per GPU, each against the best uncompressed way at that scale (the cost-based
// choice among the algorithm table's rows). A prediction, not a measurement: every input is
// printed with it.
//
//   scale_project [--ranks 8,64,...] [--mib 256] [--gbits 25,100,400] [--csv out.csv]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/cost.h"
#include "collectives/plan/topology.h"

using namespace ccl::coll;

namespace {

std::vector<double> listOf(const char* s) {
  std::vector<double> out;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    out.push_back(std::strtod(p, &end));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return out;
}

// The device inputs: an H200's kernels as the device kit measured them
// (coll::measuredDeviceCompute), NVLink inside a node, one NIC per GPU across nodes.
CostModel gpuModel(double gbits) {
  CostModel m;
  m.inside = {3e-6, 450e9, 0.5e-6};          // NVLink 4: 900 GB/s both ways, 450 GB/s each way
  m.across = {8e-6, gbits / 8 * 1e9, 1e-6};  // one NIC per GPU, 1 us of it per message
  m.compute = ccl::coll::measuredDeviceCompute();
  m.streamsAtBound = true;  // over NCCL every stream goes at its bound (fixed-length quantizers)
  return m;
}

struct Variant {
  const char* name;
  Algo algo;
  cclCodec_t codec;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<double> ranks{8, 64, 512, 4096, 32768, 65536}, gbits{25, 100, 400};
  double mib = 256;
  const char* csv = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--ranks"))
      ranks = listOf(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gbits"))
      gbits = listOf(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--mib"))
      mib = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--csv"))
      csv = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--ranks 8,64] [--mib 256] [--gbits 25,100,400] [--csv file]\n", argv[0]);
      return 2;
    }
  }
  const Variant variants[] = {
      {"hier", Algo::kHier, cclCodecNone},
      {"ring", Algo::kRing, cclCodecNone},
      {"tree", Algo::kTree, cclCodecNone},
      {"ring int8", Algo::kRing, cclCodecInt8},
      {"twoshot int8", Algo::kTwoShot, cclCodecInt8},
      {"hier int8", Algo::kHier, cclCodecInt8},
      {"twoshot int4", Algo::kTwoShot, cclCodecInt4},
      {"hier int4", Algo::kHier, cclCodecInt4},
      {"twoshot fp8", Algo::kTwoShot, cclCodecFp8E4m3},
      {"hier fp8", Algo::kHier, cclCodecFp8E4m3},
  };
  FILE* out = csv ? std::fopen(csv, "w") : nullptr;
  if (out) std::fprintf(out, "gbits,ranks,variant,seconds,link_seconds\n");
  const size_t count = static_cast<size_t>(mib * (1 << 20) / sizeof(float));
  std::printf(
      "fp32 allreduce of %.0f MiB per rank, 8 GPUs a node; milliseconds predicted (x the best uncompressed way at "
      "that scale)\n",
      mib);
  std::printf(
      "inputs: NVLink 450 GB/s each way, alpha 3 us, 0.5 us a message; between nodes alpha 8 us, 1 us a message; "
      "H200 codec kernels as measured\n");
  for (double g : gbits) {
    std::printf("\n%.0f Gbit/s per GPU between nodes\n| ranks | best uncompressed |", g);
    for (const Variant& v : variants) std::printf(" %s |", v.name);
    std::printf("\n|---|---|");
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); ++i) std::printf("---|");
    std::printf("\n");
    const CostModel m = gpuModel(g);
    for (double rn : ranks) {
      const int n = static_cast<int>(rn);
      const std::vector<int> sizes(static_cast<size_t>(n / 8), 8);
      const Topology t = Topology::blocks(sizes);
      // The baseline: the cheapest uncompressed way among the algorithm table's rows, as the
      // cost-based choice (CCL_ALGO=auto with a link model) picks it at this scale: not one
      // algorithm everywhere (a ring across thousands of nodes pays 2(N-1) latencies).
      CollArgs plain;
      plain.nranks = n;
      plain.count = count;
      plain.topo = &t;
      const Choice best = cheapestAlgorithm(Coll::kAllReduce, plain, m);
      const double base = best.seconds;
      std::printf("| %d | %.3g ms (%s) |", n, base * 1e3, algoName(best.algo));
      std::fflush(stdout);
      if (out) std::fprintf(out, "%.0f,%d,best uncompressed,%.6g,%.6g\n", g, n, base, 0.0);
      for (const Variant& v : variants) {
        CollArgs a;
        a.nranks = n;
        a.count = count;
        a.algo = v.algo;
        // Over NCCL quantizers write fixed-length streams, which go at that length.
        a.codec = ccl::codec::fixLength(ccl::codec::defaultParams(v.codec));
        a.topo = &t;
        const auto begun = std::chrono::steady_clock::now();
        const Prediction p = predict(Coll::kAllReduce, a, m);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
        std::printf(" %.3g (%.2fx) |", p.seconds * 1e3, base / p.seconds);
        std::fflush(stdout);
        if (out) std::fprintf(out, "%.0f,%d,%s,%.6g,%.6g\n", g, n, v.name, p.seconds, p.linkSeconds);
        if (took > 30) std::fprintf(stderr, "(%s at %d ranks took %.0f s to price)\n", v.name, n, took);
      }
      std::printf("\n");
    }
  }
  if (out) std::fclose(out);
  return 0;
}
