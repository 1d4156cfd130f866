// SPDX-License-Identifier: BSD-3-Clause
#include "api/call_policy.h"

#include <string>

#include "api/compression.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/call_key.h"
#include "collectives/plan/cost.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::api {

using coll::Coll;
using coll::collInfo;

codec::Params codecFor(cclComm_t comm, Coll c, bool ex, const cclCompression_t* explicitCodec, size_t count,
                       cclDataType_t dtype, bool onDevice, int* why) {
  codec::Params none;
  const bool given = ex && explicitCodec;
  const bool hasDefault = hasDefaultCodec(comm);
  *why = -1;
  auto off = [&](cclUncompressedReason_t r) {
    if (!given && hasDefault) *why = r;
    return none;
  };
  if (!collInfo(c).compressible) return off(cclUncompressedCollective);
  const int opKind = collInfo(c).op;
  if (!given) {
    if (!hasDefault) return none;
    if (!((comm->compression.policy.enabled >> opKind) & 1)) return off(cclUncompressedNotListed);
    // Host calls: every peer over shared memory; device calls: every rank on one node.
    if (onDevice ? comm->compression.deviceCodecOff : comm->compression.defaultCodecOff)
      return off(cclUncompressedOneNode);
    if (comm->compression.policy.autoChoice && onDevice) return off(cclUncompressedAuto);
  }
  codec::Params p = given ? codec::resolveParams(explicitCodec) : comm->compression.policy.codec;
  if (codec::isLowRank(p.codec) && onDevice) {
    if (given) throw Error(cclInvalidArgument, std::string(cclCodecName(p.codec)) + " compresses host memory only");
    return off(cclUncompressedCollective);
  }
  if (codec::isLowRank(p.codec)) {
    const bool runs = c == Coll::kSend || c == Coll::kRecv || c == Coll::kAllReduce;
    if (!runs && given)
      throw Error(cclInvalidArgument, std::string(cclCodecName(p.codec)) + " compresses send, recv and allreduce");
    if (!runs) return off(cclUncompressedCollective);
    // A shape that is not the count's is the caller's error at every size, not only above
    // CCL_CODEC_MIN_BYTES (where the codec runs).
    if (given) codec::lowRankShape(p, count);
  }
  return count * dataTypeSize(dtype) < comm->compression.policy.minBytes ? off(cclUncompressedSmall) : p;
}

cclUncompressedReason_t notCompressible(coll::CollArgs a) {
  a.op = cclSum;
  return coll::compressible(a) ? cclUncompressedOp : cclUncompressedDataType;
}

double chooseByCost(cclComm_t comm, const Call& c, int opKind, bool codecToo, bool device, coll::CollArgs& a) {
  // Staging does not change the choice; a codec the model chooses is no call's own.
  PlanKey shape = PlanKey::of(opKind, a);
  shape.misaligned = 0;
  if (codecToo) shape.codec = coll::kAutoCodecKey;
  const coll::CostModel& model = device ? *comm->tuning.deviceCostModel : *comm->tuning.costModel;
  const coll::Choice& choice = (device ? comm->tuning.deviceChoices : comm->tuning.choices).get(shape, [&] {
    if (!codecToo) {
      const coll::Choice made = coll::chooseAlgo(c.kind, a, &model);
      CCL_INFO("%s count %zu %s: CCL_ALGO=auto chose %s for codec %s, %.3g us predicted%s", c.fn, c.count,
               dataTypeName(c.dtype), coll::algoName(made.algo), cclCodecName(a.codec.codec), made.seconds * 1e6,
               device ? " (device buffers: the device kit's kernels)" : "");
      return made;
    }
    const coll::Choice made =
        coll::chooseCheapest(c.kind, a, comm->compression.policy.allowed, *comm->tuning.costModel);
    CCL_INFO("%s count %zu %s: CCL_CODEC=auto chose %s with %s, %.3g us predicted (uncompressed: %.3g us)", c.fn,
             c.count, dataTypeName(c.dtype), cclCodecName(made.codec.codec), coll::algoName(made.algo),
             made.seconds * 1e6, made.uncompressed * 1e6);
    return made;
  });
  a.codec = choice.codec;
  a.algo = choice.algo;
  return choice.seconds;
}

AutoFeedback::Slot feedbackFor(const Call& c, int opKind, codec::Params& p) {
  if (!collInfo(c.kind).feedback) return {};
  AutoFeedback::Slot fb{c.feedback, 0};
  if (!fb.state && c.comm->compression.policy.autoFeedback != cclFeedbackNone)
    fb = c.comm->compression.autoFeedback.get(c.send, c.count, c.dtype, opKind, c.comm->compression.policy);
  if (fb.state && fb.state->kind() == cclFeedbackNone && codec::isLowRank(p.codec) && p.warmStart) {
    p.residualFeedback = false;
    return fb;
  }
  if (!fb.state || fb.state->kind() == cclFeedbackNone) return {};
  // LoCo keeps its state in 8 bits, which would round the low-rank codec's warm-start Q. The
  // refused call gives back the position it took.
  if (codec::isLowRank(p.codec) && fb.state->kind() == cclFeedbackLoco) {
    c.comm->compression.autoFeedback.giveBack(fb.taken);
    throw Error(cclInvalidArgument, std::string(cclCodecName(p.codec)) + " takes residual error feedback, not LoCo");
  }
  return fb;
}

}  // namespace ccl::api
