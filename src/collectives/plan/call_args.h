// SPDX-License-Identifier: BSD-3-Clause
// A call's facts as plans are built from them (CollArgs) and the algorithms that can build
// them (Algo): what algorithms/ takes, and what the plan cache, the cost model and the
// executors' callers hold, without the builders (algorithms/algorithms.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ccl/ccl.h"
#include "codecs/codec.h"
#include "collectives/plan/topology.h"

namespace ccl::coll {

enum class Algo { kAuto, kRing, kTree, kDirect, kTwoShot, kSparse, kHier, kLowRank };
inline constexpr int kNumAlgos = static_cast<int>(Algo::kLowRank) + 1;  // cclAlgorithmCount

// Parses CCL_ALGO values ("auto", "ring", "tree", "direct"); throws cclInvalidArgument.
Algo parseAlgo(const std::string& name);
const char* algoName(Algo a);

struct CollArgs {
  int rank = 0;
  int nranks = 1;
  size_t count = 0;  // the count argument of the call, in elements
  cclDataType_t dtype = cclFloat32;
  cclRedOp_t op = cclSum;
  int root = 0;
  bool inPlace = false;  // the send buffer is the in-place position inside the receive buffer
  size_t chunkBytes = 1 << 20;
  Algo algo = Algo::kAuto;
  size_t treeMaxBytes = 64 << 10;  // auto: allreduce up to this size uses recursive doubling
  size_t directMaxBytes = 1024;    // auto: allreduce up to this size goes to every rank in one round
  // Compression: codec none means the uncompressed plans. With `feedback` the caller passes
  // a residual buffer of feedbackFloats(args) fp32 values (Buf::kFeedback).
  codec::Params codec;
  bool feedback = false;
  // The communicator's nodes (not owned); nullptr: one node. Hierarchical plans need it.
  const Topology* topo = nullptr;
  // The codec of a hierarchical plan's steps inside a node (none: uncompressed); a.codec is
  // the codec of the steps across nodes. Applied to float sums and averages only.
  codec::Params intraCodec;
  // The caller's buffers that are off their element alignment (misaligned.h's bits): the
  // plan stages them through aligned scratch where its element steps touch them.
  uint8_t misaligned = 0;
  // Receives reduced at once may be kRecvReduce steps (read where the transport holds them):
  // plans the host executor runs. Device plans leave it false.
  bool readInPlace = false;
};

}  // namespace ccl::coll
