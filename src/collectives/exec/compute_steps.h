// SPDX-License-Identifier: BSD-3-Clause
// The element math of a plan's compute steps (every step but send and receive) on host
// memory, in one place: the host executor runs it between transfers, and the stream
// executor's host kernels run it on a host stream. The CUDA kernels implement the same
// steps with the same element math (codecs/cuda, reduce kernels), so a test of one checks
// what the other runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/exec/executor.h"
#include "collectives/plan/plan.h"

namespace ccl::coll {

// The address of `r` in the job's buffers.
char* bufferAt(const Buffers& b, Ref r);

// The uncompressed bytes a send of `sent` bytes stands for, for the statistics.
size_t sendRawBytes(const Plan& plan, const Step& s, size_t sent);

// The codec seed of encode step `s` in a call with seed `callSeed`: the same on every rank
// for one call (random-k picks the same positions everywhere) and on host and device.
uint64_t encodeSeed(const Plan& plan, const Step& s, uint64_t callSeed);

// What a compute step needs besides the plan and the buffers.
struct ComputeContext {
  size_t* lengths = nullptr;   // the job's encoded-stream lengths, by slot
  uint64_t callSeed = 0;       // mixed into the codec seed: the same on every rank for one call
  ExecStats* stats = nullptr;  // codec time is added when set
};

// Runs compute step `s` of `plan`. An encode writes its stream's length into its slot; a
// decode reads the slot's length (at least the stream's length: a stream received at its
// bound decodes as well, its header tells its own length). Throws ccl::Error; a decode
// refusing a stream throws cclInvalidUsage (the peer called the operation otherwise).
void runCompute(const Plan& plan, const Step& s, const Buffers& b, const ComputeContext& ctx);

}  // namespace ccl::coll
