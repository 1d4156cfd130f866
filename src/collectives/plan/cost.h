// SPDX-License-Identifier: BSD-3-Clause
// The cost model: what a call's plans take on a model of its links and its compute. One
// function (simulate) prices every plan; the algorithm and codec choice, the projection to
// large clusters and the perf reports all call it, so they agree.
//
// The plans run in virtual time over the graph of every rank's steps (plan_graph.h; one
// block's under shifts): a step starts when the steps it waits for have finished and its
// resource is free, in order of readiness. A message costs alpha + bytes / beta of the link
// between its ranks' nodes (inside or across), and holds the ports for overhead + bytes / beta:
// its sender's port sends its messages one after another, and its receiver's port takes what
// arrives one after another (a fan-out queues at the sender, an incast at the receiver);
// alpha overlaps other messages, the overhead bounds the rate of small ones. A compute step holds its rank's one
// compute lane for its input bytes over the kernel's throughput. Encoded streams cross at the codec's fixed-length size
// (quantizers) or its bound (sparsifiers, whose keep ratio sets it), or at the bound for links that send every stream
// at it (NCCL's).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "ccl/ccl.h"
#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/plan.h"
#include "collectives/plan/topology.h"

namespace ccl::coll {

struct LinkCost {
  double alpha = 0;     // seconds a message takes to arrive, overlapping other messages
  double beta = 0;      // bytes per second of a rank's port
  double overhead = 0;  // seconds a message holds its ports besides its bytes (LogGP's o)
  double seconds(double bytes) const { return alpha + overhead + bytes / beta; }
};

// Kernel throughputs, in bytes per second of the elements they read (fp32 for the codecs'
// input): copy and widen/narrow, reduce and divide; per codec encode, decode,
// decode-accumulate and the fused hop (decode-add-encode: a device's one kernel, from its
// measured figures; untimed, as on the CPU, it prices as its decode-accumulate and its
// encode one after another); a codec's reduction stages (PowerSGD's matrix steps); a
// receive reduced as it arrives (kRecvReduce: the reduce reading its peer's bytes where a
// shared-memory channel holds them, in its pieces; untimed, it prices as a reduce). 0 means
// free (a model of communication alone).
struct ComputeCost {
  double copy = 0;
  double reduce = 0;
  double reduceFrom = 0;
  std::array<double, cclNumCodecs> encode{}, decode{}, decodeAdd{}, fused{};
  double codecStage = 0;
  double seconds(const Plan& plan, const Step& s) const;
  // Whether the kernels of codec p were timed (none's always are); an untimed one prices free.
  bool timed(const codec::Params& p) const;
};

struct CostModel {
  LinkCost inside;  // between ranks of one node
  LinkCost across;  // between nodes; every message when there is no topology
  ComputeCost compute;
  bool streamsAtBound = false;  // every encoded stream crosses at its bound (NCCL's link)
};

struct Prediction {
  double seconds = 0;      // from the first step of any rank to the last one's end
  double linkSeconds = 0;  // of that, the longest time a rank's sending port was busy
  size_t messages = 0;     // messages of the ranks simulated (one block's under shifts)
};

// The call whose plan at rank r is planOf(r), its ranks' nodes `topo` (nullptr: one level),
// simulated from the plans of `rank`'s block under `shifts` where the links are the same
// under them too (a ring's rotations by whole nodes of consecutive ranks; else every rank's
// plans are read). Throws cclInternalError when the plans do not pair up or wait on each
// other in a cycle.
Prediction simulate(const std::function<Plan(int)>& planOf, const Shifts& shifts, int rank, const Topology* topo,
                    const CostModel& m);

// Collective c with `a` (a.rank's block; a.topo its nodes), as planCollective plans it.
Prediction predict(Coll c, const CollArgs& a, const CostModel& m);

// A way to run a call, and what the model predicts for it.
struct Choice {
  codec::Params codec;  // codec none: uncompressed
  Algo algo = Algo::kAuto;
  double seconds = 0;       // predicted
  double uncompressed = 0;  // the best uncompressed way's prediction
};
// The cheapest algorithm for collective c with a's codec on model m: every row of the table
// that applies (only a.algo when it names one), priced from rank 0's block so that ranks
// choose alike. seconds is 0 when the call cannot be carried on a.codec's streams.
Choice cheapestAlgorithm(Coll c, const CollArgs& a, const CostModel& m);

// "auto" for the algorithm, decided in this one place: the model's cheapest row
// (cheapestAlgorithm) where there is a model (m not null), the call names no algorithm and
// the model timed the kernels of the call's codec (modelChooses); else, and where the call
// cannot be carried on its codec's streams, the algorithm table's rules (chooseAlgorithm:
// CCL_ALGO's row, or the first row that applies and is preferred). seconds is 0 when the
// table chose.
bool modelChooses(const CollArgs& a, const CostModel* m);
Choice chooseAlgo(Coll c, const CollArgs& a, const CostModel* m);

// The cheapest way to run collective c with `a` on model m: codec none or one of `allowed`
// (the lossy codecs the user allowed; those the call cannot carry are skipped), each with
// every algorithm of the table that applies (only a.algo when it names one). A codec is taken
// only when predicted faster than the best uncompressed way by more than `margin` (0.1: 10 %),
// so near a tie the call stays exact. Depends on its arguments alone, a.rank excepted (the
// call is priced from rank 0's block): ranks that pass the same model, call and allowed
// codecs choose alike.
Choice chooseCheapest(Coll c, const CollArgs& a, std::span<const codec::Params> allowed, const CostModel& m,
                      double margin = 0.1);

// The links of CCL_LINK_MODEL: "ALPHA_US:GBYTES_PER_S[:OVERHEAD_US]" for both levels, or
// "across=...,inside=..." (a level not given takes the other's). Throws cclInvalidArgument
// naming what is wrong.
void parseLinkModel(const std::string& text, CostModel* m);

// One model from every rank's (measured ones differ a little): the slowest of each input
// (largest latency and overhead, smallest bandwidth and throughput). Any order of the same
// models gives the same result, so ranks that exchange theirs agree.
CostModel slowestOf(std::span<const CostModel> models);

// The device's kernels as the device kit measured them on an NVIDIA H200 (perf/codecs/
// README.md, "Measured: NVIDIA H200", run 18, 1 GiB: the encode of a fixed-length stream, what
// a device call posts; decode, decode-accumulate and the fused hop, GB/s of fp32 input, of
// every block quantizer; the copy; a reduce at two thirds of the copy, two reads and a write
// per element). What device calls are priced with (CCL_LINK_MODEL's links), and perf/scale's
// projection: this machine's CPU says nothing of a GPU's kernels. nvfp4 has no fused hop (a
// decode-add and an encode); codecs the kit did not time price as untimed
// (ComputeCost::timed).
ComputeCost measuredDeviceCompute();

}  // namespace ccl::coll
