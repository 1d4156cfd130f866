// SPDX-License-Identifier: BSD-3-Clause
// The PowerSGD allreduce (codec powersgd, Vogels et al. 2019), as a plan: each rank projects
// its matrix M_i onto the shared Q (P_i = M_i Q), the ranks sum P with an uncompressed fp32
// ring, every rank orthonormalises the same P and projects back (Q_i = M_i^T P), a second
// ring sums Q, and the result is P Q^T (divided by the rank count for cclAvg). With error
// feedback each rank keeps M_i - P Q_i^T and the summed Q warm-starts the next call, so the
// ranks' Q stay identical. The matrix work is the codec's three stages (kCodecStage steps,
// codec::runStage); what crosses the wire is P and Q, rows x r and cols x r floats instead
// of rows x cols elements.
#include "codecs/lowrank.h"
#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "common/dtype.h"
#include "common/tags.h"

namespace ccl::coll::detail {
namespace {

// The fp32 sum of one factor, in place, among all ranks.
CollArgs factorSum(const CollArgs& a, size_t floats) {
  CollArgs f;
  f.rank = a.rank;
  f.nranks = a.nranks;
  f.count = floats;
  f.dtype = cclFloat32;
  f.op = cclSum;
  f.inPlace = true;
  f.chunkBytes = a.chunkBytes;
  return f;
}

}  // namespace

Plan powerSgdAllReduce(const CollArgs& a) {
  Plan p = emptyPlan(a);
  // The rings below sum the fp32 factors, and a ring's reductions read the plan's type; the
  // stages, which read and write the call's data, carry the call's type themselves.
  p.dtype = cclFloat32;
  p.codec = a.codec;
  if (a.count == 0) return p;
  const codec::LowRankShape s = codec::lowRankShape(a.codec, a.count);
  const Ref work = p.scratch(codec::lowrank::workFloats(s) * sizeof(float));
  const Ref q = work + s.rows * s.cols * sizeof(float), pf = q + s.cols * s.rank * sizeof(float);
  const Ref in = a.inPlace ? Ref{Buf::kRecv, 0} : Ref{Buf::kSend, 0}, state{Buf::kFeedback, 0};
  const StepId start = p.add({.kind = StepKind::kCodecStage,
                              .dst = work,
                              .src = in,
                              .src2 = state,
                              .count = a.count,
                              .type = a.dtype,
                              .withFeedback = a.feedback,
                              .stage = 0});
  // Every step of a ring: its sends read the factor that the next local step overwrites.
  auto ring = [&](size_t floats, Ref at, StepId after, uint32_t tagOffset) {
    const size_t first = p.steps.size();
    detail::ringAllReduceInPlace(p, factorSum(a, floats), at, {after}, tagOffset);
    Deps all{after};
    for (size_t i = first; i < p.steps.size(); ++i) all.push_back(static_cast<StepId>(i));
    return all;
  };
  const size_t firstSend = p.steps.size();
  const StepId middle = p.add({.kind = StepKind::kCodecStage,
                               .dst = work,
                               .src2 = state,
                               .count = a.count,
                               .type = a.dtype,
                               .withFeedback = a.feedback,
                               .stage = 1},
                              ring(s.rows * s.rank, pf, start, 0));
  const Deps summed = ring(s.cols * s.rank, q, middle, tags::stageOffset(1, a.nranks));
  p.add({.kind = StepKind::kCodecStage,
         .dst = {Buf::kRecv, 0},
         .src = work,
         .src2 = state,
         .count = a.count,
         .type = a.dtype,
         .withFeedback = a.feedback,
         .divide = a.op == cclAvg,
         .stage = 2},
        summed);
  // Statistics: each factor value sent stands for count / (P + Q values) elements.
  const double dense =
      static_cast<double>(a.count * dataTypeSize(a.dtype)) / static_cast<double>((s.rows + s.cols) * s.rank * 4);
  for (size_t i = firstSend; i < p.steps.size(); ++i)
    if (p.steps[i].kind == StepKind::kSend) p.steps[i].rawBytes = static_cast<size_t>(p.steps[i].bytes * dense);
  return p;
}

bool powerSgdSymmetric(const CollArgs& a) {
  const codec::LowRankShape s = codec::lowRankShape(a.codec, a.count);
  return evenRingChunks(a, s.rows * s.rank, sizeof(float)) && evenRingChunks(a, s.cols * s.rank, sizeof(float));
}

}  // namespace ccl::coll::detail
