// SPDX-License-Identifier: BSD-3-Clause
// Every bit of a message tag, in one place. A transport carries 64-bit tags:
//
//   63      transport control (abort notices)                    \  added by the transport,
//   44..62  source rank (19 bits)                                /  never by its callers
//   43      point-to-point message (cclSend/cclRecv)
//   32..42  collective: call sequence number (11 bits, wraps)
//   20..42  point-to-point: message number of the peer pair (23 bits, wraps)
//   20..31  collective: plan step = phase * nranks + step (12 bits)
//    0..19  chunk of a step (20 bits)
//
// A collective's step field holding all ones with every chunk bit set is the signature
// exchange (the per-call digest), so plans keep phase * nranks + step below that value:
// that bounds the ranks of a communicator (kMaxRanks). Matching is per (source, tag) in
// posting order, so sequence numbers that wrap stay correct as long as fewer than 2^11
// collectives (2^23 messages per pair) are in flight, which groups and blocking calls keep.
#pragma once

#include <cstdint>

#include "common/error.h"

namespace ccl::tags {

// What transports give their callers, and what they add above it.
constexpr int kCallerBits = 44;
constexpr uint64_t kCallerMask = (uint64_t{1} << kCallerBits) - 1;
constexpr int kSourceShift = kCallerBits;
constexpr int kSourceBits = 19;
constexpr uint64_t kControlBit = uint64_t{1} << 63;
static_assert(kSourceShift + kSourceBits == 63, "source rank between the caller's tag and the control bit");

// Within the caller's tag.
constexpr uint64_t kPointToPointBit = uint64_t{1} << 43;
constexpr int kSeqShift = 32;
constexpr int kSeqBits = 11;
constexpr int kPairSeqShift = 20;
constexpr int kPairSeqBits = 23;
constexpr int kStepShift = 20;
constexpr int kStepBits = 12;
constexpr int kChunkBits = 20;
static_assert(kSeqShift + kSeqBits == 43 && kPairSeqShift + kPairSeqBits == 43,
              "sequence fields end below the p2p bit");
static_assert(kStepShift + kStepBits == kSeqShift && kChunkBits == kStepShift, "step and chunk fill the low 32 bits");

constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;
constexpr uint64_t kPairSeqMask = (uint64_t{1} << kPairSeqBits) - 1;
constexpr uint32_t kStepLimit = uint32_t{1} << kStepBits;
constexpr uint64_t kChunkLimit = uint64_t{1} << kChunkBits;

// The step tag of the signature exchange: every step and chunk bit set.
constexpr uint32_t kSignatureTag = 0xffffffffu;

// Phases a plan numbers its steps in (reduce-scatter then allgather).
constexpr int kMaxPhases = 2;
// Largest communicator whose plans' step tags stay below the signature's step field, and
// whose ranks fit the transport's source field.
constexpr int kMaxRanks = static_cast<int>((kStepLimit - 1) / kMaxPhases);
static_assert(kMaxRanks < (1 << kSourceBits));

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

// What a transport puts on the wire for `tag` from `source`.
constexpr uint64_t wireTag(int source, uint64_t tag) { return (static_cast<uint64_t>(source) << kSourceShift) | tag; }
constexpr int sourceOf(uint64_t wire) {
  return static_cast<int>((wire >> kSourceShift) & ((uint64_t{1} << kSourceBits) - 1));
}

}  // namespace ccl::tags
