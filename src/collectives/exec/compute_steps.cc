// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/compute_steps.h"

#include <chrono>
#include <cstring>

#include "codecs/codec.h"
#include "collectives/exec/reduce_kernels.h"
#include "common/dtype.h"
#include "common/error.h"

namespace ccl::coll {
namespace {

// A stream must carry the elements and codec the receiver expects: a mismatch means the
// ranks called the operation differently.
codec::Expect expect(const Plan& plan, const Step& s) {
  codec::Expect e;
  e.count = s.count;
  e.codec = plan.codecOf(s).codec;
  return e;
}

// The error-feedback state a codec step reads and updates (at src2), or null.
float* feedbackOf(const Step& s, const Buffers& b) {
  return s.withFeedback ? reinterpret_cast<float*>(bufferAt(b, s.src2)) : nullptr;
}

// What a step that may divide (cclAvg) divides by.
float divisorOf(const Plan& plan, const Step& s) { return s.divide ? static_cast<float>(plan.nranks) : 1.0f; }

void runCodec(const Plan& plan, const Step& s, const Buffers& b, const ComputeContext& ctx) {
  if (encodesStream(s.kind)) {
    codec::Params p = plan.codecOf(s);
    p.seed = encodeSeed(plan, s, ctx.callSeed);
    float* residual = feedbackOf(s, b);
    ctx.lengths[s.slot] =
        s.kind == StepKind::kEncode
            ? codec::encode(p, bufferAt(b, s.src), s.type, s.count, bufferAt(b, s.dst), s.bytes, residual)
            : codec::decodeAddEncode(p, bufferAt(b, s.in), ctx.lengths[s.inSlot], expect(plan, s), bufferAt(b, s.src),
                                     s.type, s.count, divisorOf(plan, s), bufferAt(b, s.dst), s.bytes, residual);
  } else if (s.kind == StepKind::kCodecStage) {
    codec::runStage(plan.codecOf(s), s.stage, bufferAt(b, s.src), bufferAt(b, s.dst), s.type, s.count,
                    divisorOf(plan, s), feedbackOf(s, b));
  } else if (s.kind == StepKind::kDecode) {
    codec::decode(bufferAt(b, s.src), ctx.lengths[s.slot], expect(plan, s), bufferAt(b, s.dst), s.type);
  } else {
    codec::decodeAccumulate(bufferAt(b, s.src), ctx.lengths[s.slot], expect(plan, s),
                            reinterpret_cast<float*>(bufferAt(b, s.dst)));
  }
}

}  // namespace

char* bufferAt(const Buffers& b, Ref r) {
  char* base = nullptr;
  switch (r.buf) {
    case Buf::kSend:
      base = static_cast<char*>(const_cast<void*>(b.send));
      break;
    case Buf::kRecv:
      base = static_cast<char*>(b.recv);
      break;
    case Buf::kScratch:
      base = static_cast<char*>(b.scratch);
      break;
    case Buf::kFeedback:
      base = reinterpret_cast<char*>(b.feedback);
      break;
  }
  return base + r.offset;
}

uint64_t encodeSeed(const Plan& plan, const Step& s, uint64_t callSeed) {
  return plan.codecOf(s).seed + callSeed * 0x9e3779b97f4a7c15ull + s.seedSalt;
}

size_t sendRawBytes(const Plan& plan, const Step& s, size_t sent) {
  if (s.rawBytes) return s.rawBytes;
  return s.slot == kNoSlot ? sent : s.count * dataTypeSize(plan.dtype);
}

void runCompute(const Plan& plan, const Step& s, const Buffers& b, const ComputeContext& ctx) {
  switch (s.kind) {
    case StepKind::kSend:
    case StepKind::kRecv:
    case StepKind::kRecvReduce:
      throw Error(cclInternalError, "a transfer step was run as a compute step");
    case StepKind::kCopy:
      if (s.bytes && bufferAt(b, s.dst) != bufferAt(b, s.src))
        std::memcpy(bufferAt(b, s.dst), bufferAt(b, s.src), s.bytes);
      return;
    case StepKind::kReduce:
      if (s.wide)
        reduceWide(reinterpret_cast<float*>(bufferAt(b, s.dst)), reinterpret_cast<const float*>(bufferAt(b, s.src)),
                   bufferAt(b, s.src2), s.count, plan.dtype, plan.op);
      else
        reduce(bufferAt(b, s.dst), bufferAt(b, s.src), bufferAt(b, s.src2), s.count, plan.dtype, plan.op);
      return;
    case StepKind::kDivide:
      divide(bufferAt(b, s.dst), bufferAt(b, s.src), s.count, plan.dtype, plan.nranks);
      return;
    case StepKind::kEncode:
    case StepKind::kDecode:
    case StepKind::kDecodeAdd:
    case StepKind::kDecodeAddEncode:
    case StepKind::kCodecStage: {
      using Clock = std::chrono::steady_clock;
      const auto t0 = ctx.stats ? Clock::now() : Clock::time_point{};
      runCodec(plan, s, b, ctx);
      if (ctx.stats)
        ctx.stats->codecNs +=
            static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
      return;
    }
    case StepKind::kWiden:
      widenToFloat(reinterpret_cast<float*>(bufferAt(b, s.dst)), bufferAt(b, s.src), s.count, plan.dtype);
      return;
    case StepKind::kDivideFloat: {
      float* d = reinterpret_cast<float*>(bufferAt(b, s.dst));
      const float div = static_cast<float>(plan.nranks);
      for (size_t i = 0; i < s.count; ++i) d[i] /= div;
      return;
    }
    case StepKind::kNarrow:
      narrowFromFloat(bufferAt(b, s.dst), reinterpret_cast<const float*>(bufferAt(b, s.src)), s.count, plan.dtype,
                      s.divide ? plan.nranks : 1);
      return;
  }
}

}  // namespace ccl::coll
