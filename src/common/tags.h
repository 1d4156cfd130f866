// SPDX-License-Identifier: BSD-3-Clause
// Every bit of a message tag, in one place. A transport carries 64-bit tags:
//
//   63      transport control (abort notices)                    \  added by the transport,
//   46..62  source rank (17 bits)                                /  never by its callers
//   45      point-to-point message (cclSend/cclRecv)
//   32..44  collective: call sequence number (13 bits, wraps)
//   13..44  point-to-point: message number of the peer pair (32 bits, wraps)
//   13..31  collective: plan step = phase * nranks + step (19 bits)
//    0..12  chunk of a step (13 bits); point-to-point: the chunk of the message
//
// A collective's step field holding all ones is the signature exchange (the per-call
// digest, its round in the chunk field), so plans keep phase * nranks + step below that value:
// that bounds the ranks of a communicator (kMaxRanks, checked at init). A flat plan numbers
// its steps in phases 0 and 1; a hierarchical plan runs up to three flat plans one after
// another (inside a node, across nodes, inside a node again), each in phases of its own
// (stageField), so kMaxPhases is 6. Chunks are made larger rather than more numerous than the
// chunk field holds (collectives/algorithms/algorithms.h). Matching is per (source, tag) in posting
// order, so sequence numbers that wrap stay correct as long as fewer than 2^13 collectives
// (2^32 messages per pair) are in flight, which groups and blocking calls keep.
#pragma once

#include <cstdint>

#include "common/error.h"

namespace ccl::tags {

// What transports give their callers, and what they add above it.
constexpr int kCallerBits = 46;
constexpr uint64_t kCallerMask = (uint64_t{1} << kCallerBits) - 1;
constexpr int kSourceShift = kCallerBits;
constexpr int kSourceBits = 17;
constexpr uint64_t kControlBit = uint64_t{1} << 63;
static_assert(kSourceShift + kSourceBits == 63, "source rank between the caller's tag and the control bit");

// Within the caller's tag.
constexpr uint64_t kPointToPointBit = uint64_t{1} << 45;
constexpr int kSeqShift = 32;
constexpr int kSeqBits = 13;
constexpr int kPairSeqShift = 13;
constexpr int kPairSeqBits = 32;
constexpr int kStepShift = 13;
constexpr int kStepBits = 19;
constexpr int kChunkBits = 13;
static_assert(kSeqShift + kSeqBits == 45 && kPairSeqShift + kPairSeqBits == 45,
              "sequence fields end below the p2p bit");
static_assert(kPointToPointBit << 1 == uint64_t{1} << kCallerBits, "the p2p bit is the caller's highest");
static_assert(kStepShift + kStepBits == kSeqShift && kChunkBits == kStepShift, "step and chunk fill the low 32 bits");

constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;
constexpr uint64_t kPairSeqMask = (uint64_t{1} << kPairSeqBits) - 1;
constexpr uint32_t kStepLimit = uint32_t{1} << kStepBits;
constexpr uint64_t kChunkLimit = uint64_t{1} << kChunkBits;

// The step tags of the signature exchange: every step bit set, the exchange's round (at most
// ceil(log2 of the ranks), collectives/exec/executor.cc) in the chunk field.
constexpr uint32_t kSignatureTag = ((uint32_t{1} << kStepBits) - 1) << kStepShift;
constexpr int kMaxSignatureRounds = kSourceBits;  // 2^17 > the most ranks (below)
constexpr uint32_t signatureTag(int round) { return kSignatureTag | static_cast<uint32_t>(round); }
static_assert(kMaxSignatureRounds < (1 << kChunkBits));

// Phases a plan numbers its steps in: reduce-scatter then allgather in each of the three
// stages of a hierarchical plan.
constexpr int kPhasesPerStage = 2;
constexpr int kMaxStages = 3;
constexpr int kMaxPhases = kPhasesPerStage * kMaxStages;
// Largest communicator whose plans' step tags stay below the signature's step field, and
// whose ranks fit the transport's source field.
constexpr int kMaxRanks = static_cast<int>((kStepLimit - 1) / kMaxPhases);
static_assert(kMaxRanks < (1 << kSourceBits) && kMaxRanks <= (1 << kMaxSignatureRounds));

// The tag of one collective call's step messages.
constexpr uint64_t collectiveBase(uint32_t seq) { return (uint64_t{seq} & kSeqMask) << kSeqShift; }

// The tag of one point-to-point message of a peer pair.
constexpr uint64_t pointToPointBase(uint32_t pairSeq) {
  return kPointToPointBit | ((uint64_t{pairSeq} & kPairSeqMask) << kPairSeqShift);
}

// A step tag unique within one plan for (phase, step, chunk). Throws Error(cclInternalError)
// when a field does not fit (a plan for more ranks than kMaxRanks, or too many chunks).
constexpr uint32_t stepTag(int phase, int nranks, int step, uint64_t chunk) {
  const int64_t field = int64_t{phase} * nranks + step;
  if (phase < 0 || phase >= kMaxPhases || step < 0 || field >= int64_t{kStepLimit} - 1 || chunk >= kChunkLimit)
    throw Error(cclInternalError, "plan step tag out of range");
  return (static_cast<uint32_t>(field) << kStepShift) | static_cast<uint32_t>(chunk);
}
static_assert(stepTag(kMaxPhases - 1, kMaxRanks, kMaxRanks - 1, kChunkLimit - 1) < kSignatureTag);
static_assert(kMaxRanks >= 65536, "communicators of 65,536 ranks");

// What to add to the step tags of a flat plan of at most `nranks` ranks (phases 0 and 1) that
// runs as stage `stage` of a hierarchical plan of a communicator of `nranks` ranks: its
// phases become 2 * stage and 2 * stage + 1, numbered over the communicator's ranks, so the
// stages' tags never meet.
constexpr uint32_t stageOffset(int stage, int nranks) {
  if (stage < 0 || stage >= kMaxStages || nranks < 1 || nranks > kMaxRanks)
    throw Error(cclInternalError, "plan stage out of range");
  return static_cast<uint32_t>(kPhasesPerStage * stage * nranks) << kStepShift;
}

// What a transport puts on the wire for `tag` from `source`.
constexpr uint64_t wireTag(int source, uint64_t tag) { return (static_cast<uint64_t>(source) << kSourceShift) | tag; }
constexpr int sourceOf(uint64_t wire) {
  return static_cast<int>((wire >> kSourceShift) & ((uint64_t{1} << kSourceBits) - 1));
}

}  // namespace ccl::tags
