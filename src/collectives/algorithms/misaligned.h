// SPDX-License-Identifier: BSD-3-Clause
// Buffers that do not start at a multiple of their element size (a float at an odd address):
// NCCL accepts them, and so does ccl, by construction. Element steps (reductions, codecs,
// conversions) read and write whole aligned elements, on the CPU and on a GPU, so a plan
// whose element steps would touch such a buffer gets a staged twin: the buffer is copied
// to aligned scratch first (bytes: defined for any address, on every executor), the steps
// work there, and the result is copied back. Plans that only move bytes (sends, receives,
// copies) use the caller's buffers as they are.
#pragma once

#include <cstdint>
#include <functional>

#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/collective_info.h"
#include "collectives/plan/plan.h"

namespace ccl::coll {

// Which of a call's buffers are off their element alignment (CollArgs::misaligned).
enum Misaligned : uint8_t { kAlignedBuffers = 0, kSendMisaligned = 1, kRecvMisaligned = 2 };

// The bits for a call's buffers (null buffers are aligned).
uint8_t misalignment(const void* send, const void* recv, cclDataType_t dtype);

// `p` (the plan of collective c with `a`) with the caller's buffers that a.misaligned names
// staged through aligned scratch where element steps touch them; `p` itself when none do.
// In place, the send and receive buffers share bytes, so one staged region holds both.
Plan stageMisaligned(const Plan& p, Coll c, const CollArgs& a);

// Which of the caller's buffers a plan works on through scratch instead (stageBuffers).
struct Staging {
  bool send = false;
  bool recv = false;
  // The send buffer's elements enter scratch divided by nranks (kDivide) instead of copied:
  // a cclAvg that scales its inputs first (scaled_average.h). The caller's buffer is never
  // written; an element step reads it, so it must be aligned (stageMisaligned after this).
  bool scale = false;
};
// Appends p's steps to q, numbered after q's steps so far (a prologue: `prologue` the ones
// p's first steps wait for), each buffer reference passed through `move`; a step of p that
// waits for none waits for the prologue, the others for it through their dependencies.
void appendAfter(Plan& q, const Plan& p, const Deps& prologue, const std::function<Ref(Ref)>& move);

// `p` with the buffers `how` names staged: copied (or scaled) into scratch before the first
// step, the receive buffer copied back after the last. In place one region holds both.
Plan stageBuffers(const Plan& p, Coll c, const CollArgs& a, Staging how);

}  // namespace ccl::coll
