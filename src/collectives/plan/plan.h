// SPDX-License-Identifier: BSD-3-Clause
// A plan is one rank's share of a collective: a list of steps over byte ranges of three
// buffers (the caller's send and receive buffers and a scratch area), each step waiting
// for the steps it depends on. Plans are built from sizes alone, so the same plan can be
// run by the host executor, by a stream executor, or priced by a cost model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccl/ccl.h"
#include "codecs/codec.h"

namespace ccl::coll {

// kFeedback is the caller's error-feedback residual (fp32, one per element of the tensor).
enum class Buf : uint8_t { kSend, kRecv, kScratch, kFeedback };

// A byte offset into one of the plan's buffers.
struct Ref {
  Buf buf;
  size_t offset;
  Ref operator+(size_t bytes) const { return {buf, offset + bytes}; }
};

enum class StepKind : uint8_t {
  kSend,    // bytes from src to peer
  kRecv,    // bytes from peer into dst
  kCopy,    // bytes from src to dst
  kReduce,  // count elements: dst = src op src2 (dst may alias either); `wide`: dst and src fp32
  kDivide,  // count elements: dst = src / nranks (src may be dst): cclAvg's tail, or its inputs scaled
  // A receive reduced as it arrives: count elements (`bytes`) from peer, dst = src op them.
  // Over a transport that hands a message over where it lies (shared memory), the bytes are
  // read in place, without a copy into a buffer of this rank's first; elsewhere they land at
  // `in` (scratch the plan keeps) and are reduced from there. Host plans only
  // (CollArgs::readInPlace): the stream executor runs none.
  kRecvReduce,
  // Codec steps (plan.codec). Encoded streams have a data-dependent length, kept in the
  // job's length slot `slot`: an encode or a receive writes it, a send or a decode reads it.
  kEncode,       // count elements of `type` at src -> stream at dst (at most `bytes`), residual if withFeedback
  kDecode,       // stream at src -> count elements of `type` at dst
  kDecodeAdd,    // stream at src added into count fp32 elements at dst
  kWiden,        // count elements of plan.dtype at src -> fp32 at dst
  kNarrow,       // count fp32 elements at src -> plan.dtype at dst (divided by nranks first if `divide`)
  kDivideFloat,  // count fp32 elements at dst /= nranks
  // The fused hop of a reduction (DESIGN §4): the stream received at `in` (length in
  // `inSlot`) decoded and added to count elements of `type` at src (fp32 sums), divided by
  // nranks if `divide`, and encoded into the stream at dst as kEncode would (residual at src2
  // if withFeedback, length in `slot`). The same bytes as kWiden (or fp32 src as is),
  // kDecodeAdd, kDivideFloat and kEncode one after another, without their fp32 sum in memory.
  kDecodeAddEncode,
  // Stage `stage` of plan.codec's reduction, for a codec that reduces in stages around sums
  // of fp32 factors (codec::runStage says what each stage reads at src and writes at dst):
  // count elements of `type`, the codec's feedback state at src2 if withFeedback, divided
  // by nranks if `divide`. What a stage computes is the codec's; the plan only orders it.
  kCodecStage,
};

// An encoded stream's length slot in a job. 32 bits: a two-shot allreduce of n ranks keeps
// about 2n streams, more than 16 bits number at 65,536 ranks.
using Slot = uint32_t;
constexpr Slot kNoSlot = 0xffffffffu;

struct Step {
  StepKind kind;
  int peer = -1;
  uint32_t tag = 0;  // send/recv: matches the peer's step with the same tag
  Ref dst{Buf::kRecv, 0};
  Ref src{Buf::kSend, 0};
  Ref src2{Buf::kRecv, 0};
  size_t bytes = 0;                 // send, recv, copy
  size_t count = 0;                 // reduce, divide, codec steps; a stream's send: its elements
  Slot slot = kNoSlot;              // send/recv/codec steps: length slot of an encoded stream
  cclDataType_t type = cclFloat32;  // encode/decode element type
  bool withFeedback = false;        // encode: apply and update the residual at `src2`
  bool divide = false;              // narrow: divide by nranks (cclAvg)
  bool wide = false;                // reduce: dst and src are fp32 (a narrow type's sum kept wide), src2 plan.dtype
  uint8_t stage = 0;                // kCodecStage: which stage of the codec's reduction
  uint32_t seedSalt = 0;            // encode: added to the call's seed (0 on every rank for randk)
  size_t rawBytes = 0;              // send: uncompressed bytes it stands for (statistics), 0: its own size
  bool intra = false;               // codec steps: of plan.intraCodec instead of plan.codec
  Ref in{Buf::kScratch, 0};         // kDecodeAddEncode: the received stream; kRecvReduce: its landing
  Slot inSlot = kNoSlot;            // kDecodeAddEncode: its length slot
  uint32_t firstDep = 0;
  uint32_t numDeps = 0;
};

// A step that takes a message from a peer (kRecv, kRecvReduce): matched with a send.
constexpr bool isReceive(StepKind k) { return k == StepKind::kRecv || k == StepKind::kRecvReduce; }
constexpr bool isTransfer(StepKind k) { return k == StepKind::kSend || k == StepKind::kRecv; }
// A step that writes an encoded stream into its dst (its length into its slot).
constexpr bool encodesStream(StepKind k) { return k == StepKind::kEncode || k == StepKind::kDecodeAddEncode; }
// A step that reads a received encoded stream (kDecodeAddEncode: from `in`).
constexpr bool decodesStream(StepKind k) {
  return k == StepKind::kDecode || k == StepKind::kDecodeAdd || k == StepKind::kDecodeAddEncode;
}

using StepId = uint32_t;
using Deps = std::vector<StepId>;

// Every buffer reference and every length slot of a step, for the rewrites that move a
// plan's steps into another (splice, merge, staging): one list, so a field cannot be missed.
template <class F>
void forEachRef(Step& s, F&& f) {
  f(s.dst);
  f(s.src);
  f(s.src2);
  f(s.in);
}
template <class F>
void forEachSlot(Step& s, F&& f) {
  if (s.slot != kNoSlot) f(s.slot);
  if (s.inSlot != kNoSlot) f(s.inSlot);
}

struct Plan {
  cclDataType_t dtype = cclFloat32;
  cclRedOp_t op = cclSum;  // of kReduce steps (cclAvg reduces as cclSum)
  int nranks = 1;          // divisor of kDivide steps
  size_t scratchBytes = 0;
  Slot lengthSlots = 0;      // encoded-stream lengths a job keeps
  codec::Params codec;       // of the codec steps
  codec::Params intraCodec;  // of the codec steps marked intra (a hierarchical plan's inside a node)
  std::vector<Step> steps;
  std::vector<StepId> deps;  // steps[i] waits for deps[firstDep .. firstDep+numDeps)

  StepId add(const Step& s, const Deps& after = {});
  const codec::Params& codecOf(const Step& s) const { return s.intra ? intraCodec : codec; }

  // Step helpers; each returns the new step's id.
  StepId send(int peer, uint32_t tag, Ref src, size_t bytes, const Deps& after = {});
  StepId recv(int peer, uint32_t tag, Ref dst, size_t bytes, const Deps& after = {});
  StepId copy(Ref dst, Ref src, size_t bytes, const Deps& after = {});
  StepId reduce(Ref dst, Ref a, Ref b, size_t count, const Deps& after = {});
  // kReduce into an fp32 sum: count fp32 at dst = count fp32 at a op count plan.dtype at b,
  // in fp32 (a sum of 16-bit inputs that must not round, or overflow, in their type).
  StepId reduceWide(Ref dst, Ref a, Ref b, size_t count, const Deps& after = {});
  // kRecvReduce: count elements from peer reduced into dst (dst = local op received), landing
  // at `landing` (count elements of scratch) where the transport cannot hand them over.
  StepId recvReduce(int peer, uint32_t tag, Ref dst, Ref local, Ref landing, size_t count, const Deps& after = {});
  StepId divide(Ref dst, size_t count, const Deps& after = {});  // in place
  StepId divide(Ref dst, Ref src, size_t count, const Deps& after = {});

  // Codec step helpers. encode returns the step; its stream length lands in `slot`.
  Slot newSlot() { return lengthSlots++; }
  StepId encode(Ref dst, size_t capacity, Slot slot, Ref src, cclDataType_t type, size_t count, const Ref* residual,
                const Deps& after = {});
  // `count`: the elements the stream carries (the raw bytes it stands for, in statistics).
  StepId sendStream(int peer, uint32_t tag, Ref src, Slot slot, size_t count, const Deps& after = {});
  StepId recvStream(int peer, uint32_t tag, Ref dst, size_t capacity, Slot slot, const Deps& after = {});
  StepId decode(Ref dst, cclDataType_t type, Ref src, Slot slot, size_t count, const Deps& after = {});
  StepId decodeAdd(Ref acc, Ref src, Slot slot, size_t count, const Deps& after = {});
  // The fused hop (kDecodeAddEncode): the stream at `in` (slot inSlot) added to count elements
  // of `type` at `local`, divided by nranks if `divideByRanks`, encoded into dst (at most
  // `capacity` bytes, length into `slot`).
  StepId decodeAddEncode(Ref dst, size_t capacity, Slot slot, Ref in, Slot inSlot, Ref local, cclDataType_t type,
                         size_t count, bool divideByRanks, const Ref* residual, const Deps& after = {});
  StepId widen(Ref dst, Ref src, size_t count, const Deps& after = {});
  StepId narrow(Ref dst, Ref src, size_t count, bool divideByRanks, const Deps& after = {});
  StepId divideFloat(Ref dst, size_t count, const Deps& after = {});

  // Reserves `bytes` of scratch (aligned to 64) and returns its start.
  Ref scratch(size_t bytes);
};

// The steps of `b` after those of `a`, as one plan: b's dependencies, scratch and length
// slots moved past a's. The two must agree on type, op, ranks and codec (a send to oneself
// and its receive, run as one job).
Plan mergePlans(const Plan& a, const Plan& b);

// Splits `count` elements into `parts` contiguous pieces whose sizes differ by at most one,
// the larger ones first. Every rank computes the same split from the same count.
struct Split {
  size_t count;
  size_t parts;
  size_t size(size_t i) const { return count / parts + (i < count % parts ? 1 : 0); }
  size_t offset(size_t i) const { return i * (count / parts) + (i < count % parts ? i : count % parts); }
};

}  // namespace ccl::coll
