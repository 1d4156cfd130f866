// SPDX-License-Identifier: BSD-3-Clause
// The exported collectives and point-to-point calls: argument checks, then a plan for this
// rank, run now or at the end of the open group.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "api/call.h"
#include "api/call_policy.h"
#include "api/device_calls.h"
#include "api/group.h"
#include "api/streams.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/misaligned.h"
#include "common/cuda_probe.h"
#include "common/dtype.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/tags.h"

namespace ccl::api {
namespace {

using coll::codecDigest;
using coll::codecKey;
using coll::Coll;
using coll::collInfo;

// A device call runs now, or at the end of the open group (`seq`: the counter its tag's
// number came from, given back if the group is dropped).
void submitDevice(DeviceCall&& d, uint32_t* seq) {
  if (!groupActive()) return runOnDevice(d);
  Op op;
  op.comm = d.comm;
  op.seq = seq;
  op.feedbackTaken = d.feedbackTaken;
  op.device = std::make_shared<const DeviceCall>(std::move(d));
  submit(std::move(op));
}

// A device call's feedback: its residual lives in device memory; LoCo's 8-bit state is kept
// on the host only.
cclFeedback* deviceFeedback(cclFeedback* fb) {
  CCL_CHECK(!fb || fb->kind() == cclFeedbackResidual, cclInvalidUsage,
            "LoCo error feedback keeps its state on the host: calls on device buffers take residual feedback");
  if (fb) fb->onDevice = true;
  return fb;
}

void checkCommon(cclComm_t comm, cclDataType_t dtype, size_t count) {
  checkUsable(comm);
  CCL_CHECK(validDataType(dtype), cclInvalidArgument, "invalid datatype " + std::to_string(static_cast<int>(dtype)));
  CCL_CHECK(count <= std::numeric_limits<size_t>::max() / dataTypeSize(dtype) / static_cast<size_t>(comm->nranks),
            cclInvalidArgument, "count " + std::to_string(count) + " overflows the buffer size");
}

// Where a call runs: on the communicator's device (its buffers are device memory), on a
// host stream, or now (host stream nullptr).
struct Where {
  bool device = false;
  coll::Stream* hostStream = nullptr;
};

Where whereToRun(cclComm_t comm, std::initializer_list<NamedBuffer> buffers, cclStream_t stream) {
  Where w;
  w.device = onDevice(comm, buffers, stream);
  if (w.device || !stream) return w;
  // A call that moves nothing (count 0) has no memory to tell where it runs: on a
  // communicator with a device it is done now, whatever stream it names (NCCL programs pass
  // their CUDA stream); elsewhere a stream that is not a host stream is still refused.
  if (comm->device.ordinal >= 0 &&
      std::all_of(buffers.begin(), buffers.end(), [](const NamedBuffer& b) { return !b.ptr; }))
    return w;
  w.hostStream = findHostStream(stream);
  CCL_CHECK(w.hostStream, cclInvalidUsage,
            "a CUDA stream was given for host buffers (" + describeBuffers(buffers) +
                "): pass NULL or a host stream (cclHostStreamCreate); CUDA streams order calls on device buffers");
  return w;
}

// Buffers that share bytes must be in the collective's in-place layout: any other overlap
// would have the algorithm read what it already overwrote, a wrong result and no error.
void checkOverlap(const Call& c, const coll::BufferCounts& counts, int rank) {
  if (!counts.send || !counts.recv) return;
  const size_t es = dataTypeSize(c.dtype);
  const auto s = reinterpret_cast<uintptr_t>(c.send), d = reinterpret_cast<uintptr_t>(c.recv);
  const bool overlap = s < d + counts.recv * es && d < s + counts.send * es;
  if (!overlap || coll::isInPlace(c.kind, c.send, c.recv, c.count * es, rank, rank == c.root)) return;
  const char* layout = "";
  switch (collInfo(c.kind).inPlace) {
    case coll::InPlace::kSame:
      layout = "sendbuff == recvbuff";
      break;
    case coll::InPlace::kSendInRecv:
      layout = "sendbuff == recvbuff + rank * count";
      break;
    case coll::InPlace::kRecvInSend:
      layout = "recvbuff == sendbuff + rank * count";
      break;
    case coll::InPlace::kNone:
      layout = "none";
      break;
  }
  throw Error(cclInvalidArgument,
              "sendbuff and recvbuff overlap but are not in the in-place layout (" + std::string(layout) + ")");
}

Where checkCall(const Call& c) {
  checkCommon(c.comm, c.dtype, c.count);
  const int n = c.comm->nranks, r = c.comm->rank;
  const coll::CollInfo info = collInfo(c.kind);
  if (info.reduction)
    CCL_CHECK(validRedOp(c.op), cclInvalidArgument, "invalid reduction op " + std::to_string(static_cast<int>(c.op)));
  if (info.rooted)
    CCL_CHECK(c.root >= 0 && c.root < n, cclInvalidArgument,
              "root " + std::to_string(c.root) + " is outside [0, " + std::to_string(n) + ")");
  const coll::BufferCounts counts = coll::bufferCounts(c.kind, c.count, static_cast<size_t>(n), r == c.root);
  CCL_CHECK(counts.send == 0 || c.send, cclInvalidArgument,
            "sendbuff is NULL with a count of " + std::to_string(c.count));
  CCL_CHECK(counts.recv == 0 || c.recv, cclInvalidArgument,
            "recvbuff is NULL with a count of " + std::to_string(c.count));
  checkOverlap(c, counts, r);
  return whereToRun(
      c.comm, {{"sendbuff", counts.send ? c.send : nullptr}, {"recvbuff", counts.recv ? c.recv : nullptr}}, c.stream);
}

// The cached plan for `key`, built by `build` on first use.
template <class Build>
std::shared_ptr<const coll::Plan> cachedPlan(cclComm_t comm, const PlanKey& key, Build&& build) {
  return comm->links.plans.get(key, [&] { return std::make_shared<const coll::Plan>(build()); });
}

// Marks the open group failed when a call inside it fails, as NCCL does.
cclResult_t inGroup(cclResult_t r) {
  if (r != cclSuccess) groupFail(r);
  return r;
}

// A collective as every path runs it: where, with which arguments, codec and algorithm.
struct Prepared {
  Where where;
  coll::CollArgs a;
  int opKind = 0;
  bool chosenByCost = false;
  double predicted = 0;  // seconds, when the cost model chose
  int why = -1;          // cclUncompressedReason_t when the default codec was not applied
};

Prepared prepare(const Call& c) {
  Prepared p;
  p.where = checkCall(c);
  cclComm_t comm = c.comm;
  coll::CollArgs& a = p.a;
  a.rank = comm->rank;
  a.nranks = comm->nranks;
  a.count = c.count;
  a.dtype = c.dtype;
  a.op = c.op;
  a.root = c.root;
  a.inPlace =
      coll::isInPlace(c.kind, c.send, c.recv, c.count * dataTypeSize(c.dtype), comm->rank, comm->rank == c.root);
  a.misaligned = coll::misalignment(c.send, c.recv, c.dtype);
  a.chunkBytes = comm->settings.chunkBytes;
  a.algo = comm->settings.algo;
  a.treeMaxBytes = comm->settings.treeMaxBytes;
  a.directMaxBytes = comm->settings.directMaxBytes;
  a.topo = comm->placement.topology.get();
  a.intraCodec = comm->compression.intraCodec;
  const bool device = p.where.device;
  a.readInPlace = !device;  // host plans run on the host executor, which reads in place
  const int opKind = p.opKind = collInfo(c.kind).op;
  a.codec = codecFor(comm, c.kind, c.ex, c.compression, c.count, c.dtype, device, &p.why);
  if (a.codec.codec != cclCodecNone && !coll::compressible(a)) {
    if (!(c.ex && c.compression)) p.why = notCompressible(a);
    a.codec = codec::Params{};
  }
  // Device calls choose no codec by cost (CCL_CODEC=auto leaves them uncompressed); their
  // algorithm is priced with the device's kernels, not this CPU's.
  const bool codecByCost = comm->tuning.costModel && comm->compression.policy.autoChoice && !device &&
                           !(c.ex && c.compression) && (comm->compression.policy.enabled >> opKind) & 1;
  const coll::CostModel* model = device ? comm->tuning.deviceCostModel.get() : comm->tuning.costModel.get();
  p.chosenByCost = codecByCost || coll::modelChooses(a, model);
  p.predicted = p.chosenByCost ? chooseByCost(comm, c, opKind, codecByCost, device, a) : 0.0;
  // The intra-node codec is that of compressed calls' steps inside a node: a call the policy
  // leaves uncompressed (CCL_COMPRESS, CCL_CODEC_MIN_BYTES, an Ex call's cclCodecNone) is
  // exact inside the nodes too.
  if (a.codec.codec == cclCodecNone) a.intraCodec = codec::Params{};
  if (codecByCost) p.why = a.codec.codec != cclCodecNone ? -1 : p.why >= 0 ? p.why : cclUncompressedAuto;
  return p;
}

// The device call of a prepared collective, but its tag (taken when it is submitted).
// `peek`: for a question about the call (offerDevice), not its run: the feedback state is not
// taken (a step's position would advance), only whether the call would have one.
DeviceCall deviceCall(const Call& c, Prepared& p, bool peek = false) {
  DeviceCall d{c.kind, c.fn, c.comm, p.a};
  d.send = c.send;
  d.recv = c.recv;
  d.stream = c.stream;
  d.opKind = p.opKind;
  if (p.a.codec.codec != cclCodecNone && peek) {
    d.args.feedback =
        collInfo(c.kind).feedback && (c.feedback ? c.feedback->kind() == cclFeedbackResidual
                                                 : c.comm->compression.policy.autoFeedback == cclFeedbackResidual);
  } else if (p.a.codec.codec != cclCodecNone) {
    const AutoFeedback::Slot fb = feedbackFor(c, p.opKind, p.a.codec);
    TakenPosition position;
    position.hold(c.comm, fb.taken);
    d.feedback = deviceFeedback(fb.state);
    d.feedbackGeneration = fb.generation;
    d.feedbackTaken = fb.taken;
    d.args.feedback = d.feedback != nullptr;
    d.feedbackFloats = coll::feedbackFloats(c.kind, d.args);
    position.keep();
  }
  d.key = PlanKey::of(p.opKind, d.args);
  return d;
}

// The digest of a call's shape that every rank's must match (the executor's signature
// exchange), or 0 where the call goes without: the digest costs one extra message per call,
// a visible share of the smallest calls' time (perf/README.md, 'Call digest'), so the
// smallest uncompressed calls skip it: their one-round exchange reaches every rank, whose
// size checks already report a different count to all of them.
uint64_t callSignature(const Call& c, const Prepared& p) {
  const coll::CollInfo info = collInfo(c.kind);
  const bool compressed = p.a.codec.codec != cclCodecNone;
  if (!compressed && c.count * dataTypeSize(c.dtype) <= c.comm->settings.directMaxBytes) return 0;
  return fnv1a({uint64_t(p.opKind), c.count, uint64_t(c.dtype), info.reduction ? uint64_t(c.op) : 0,
                info.rooted ? uint64_t(c.root) : 0, codecDigest(p.a.codec), codecDigest(p.a.intraCodec),
                c.comm->placement.topology->digest()}) |
         1;
}

// The host executor's operation of a prepared collective, but its tag (taken when it is
// submitted): its feedback state, its plan (from the cache) and its digest.
Op hostOp(const Call& c, Prepared& p) {
  cclComm_t comm = c.comm;
  coll::CollArgs& a = p.a;
  Op op;
  op.comm = comm;
  op.stream = p.where.hostStream;
  op.opKind = p.opKind;
  op.compressed = a.codec.codec != cclCodecNone;
  op.chosenByCost = p.chosenByCost;
  op.predicted = p.predicted;
  TakenPosition position;  // until the plan is made
  if (op.compressed) {
    const AutoFeedback::Slot fb = feedbackFor(c, p.opKind, a.codec);
    position.hold(comm, fb.taken);
    op.feedback = fb.state;
    op.feedbackGeneration = fb.generation;
    op.feedbackTaken = fb.taken;
    a.feedback = op.feedback != nullptr;
    op.feedbackFloats = coll::feedbackFloats(c.kind, a);
    op.feedbackErrorFloats = codec::isLowRank(a.codec.codec) ? a.count : op.feedbackFloats;
  }
  op.plan = cachedPlan(comm, PlanKey::of(p.opKind, a), [&] {
    CCL_INFO("%s count %zu %s: codec %s, algorithm %s", c.fn, c.count, dataTypeName(c.dtype),
             cclCodecName(a.codec.codec), coll::algoName(coll::chooseAlgorithm(c.kind, a).algo));
    return coll::planCollective(c.kind, a);
  });
  op.send = c.send;
  op.recv = c.recv;
  op.seq = &comm->seq.collectives;
  op.signature = callSignature(c, p);
  CCL_TRACE("%s count %zu %s %s root %d inplace %d steps %zu", c.fn, c.count, dataTypeName(c.dtype), redOpName(c.op),
            c.root, a.inPlace, op.plan->steps.size());
  position.keep();
  return op;
}

// A collective in three moves: prepared (where it runs, its arguments, the codec and the
// algorithm chosen), then routed to the device path or the host executor, which take the
// call's tag in submission order.
void runCollective(const Call& c) {
  Prepared p = prepare(c);
  cclComm_t comm = c.comm;
  log::RankScope scope(comm->rank);
  if (p.why >= 0) noteUncompressed(comm, static_cast<cclUncompressedReason_t>(p.why));
  if (p.where.device) {
    DeviceCall d = deviceCall(c, p);
    d.chosenByCost = p.chosenByCost;
    d.tagBase = tags::collectiveBase(comm->seq.collectives++);
    return submitDevice(std::move(d), &comm->seq.collectives);
  }
  Op op = hostOp(c, p);
  op.tagBase = tags::collectiveBase(comm->seq.collectives++);
  submit(std::move(op));
}

cclResult_t collective(const Call& c) {
  return inGroup(guard(c.comm, c.fn, [&] { runCollective(c); }));
}

cclResult_t pointToPoint(const char* fn, bool isSend, const void* send, void* recv, size_t count, cclDataType_t dtype,
                         int peer, cclComm_t comm, cclStream_t stream, bool ex = false,
                         const cclCompression_t* compression = nullptr, cclFeedback_t feedback = nullptr) {
  return inGroup(guard(comm, fn, [&] {
    checkCommon(comm, dtype, count);
    CCL_CHECK(peer >= 0 && peer < comm->nranks, cclInvalidArgument,
              "peer " + std::to_string(peer) + " is outside [0, " + std::to_string(comm->nranks) + ")");
    CCL_CHECK(count == 0 || (isSend ? send != nullptr : recv != nullptr), cclInvalidArgument,
              std::string(isSend ? "sendbuff" : "recvbuff") + " is NULL with a count of " + std::to_string(count));
    const char* name = isSend ? "sendbuff" : "recvbuff";
    const Where where = whereToRun(comm, {{name, count ? (isSend ? send : recv) : nullptr}}, stream);
    coll::Stream* queue = where.hostStream;
    // A device send to the calling rank itself runs with its receive, as one job: they meet
    // in a group (NCCL's rule too); alone, neither could complete.
    CCL_CHECK(!where.device || peer != comm->rank || groupActive(), cclInvalidUsage,
              "a send or receive of device buffers to the calling rank itself must be in a group with its "
              "counterpart (cclGroupStart/cclGroupEnd)");
    const size_t bytes = count * dataTypeSize(dtype);
    Op op;
    op.comm = comm;
    // The pair's counter; a number is taken only once the call is accepted: a call refused
    // below (its codec parameters, its feedback, its plan) must leave the pair matched.
    uint32_t& seq = isSend ? comm->seq.sends[peer] : comm->seq.recvs[peer];
    const Coll kind = isSend ? Coll::kSend : Coll::kRecv;
    op.opKind = collInfo(kind).op;
    coll::CollArgs a;
    a.rank = comm->rank;
    a.nranks = comm->nranks;
    a.count = count;
    a.dtype = dtype;
    a.chunkBytes = comm->settings.chunkBytes;
    int why = -1;
    a.codec = codecFor(comm, kind, ex, compression, count, dtype, where.device, &why);
    if (a.codec.codec != cclCodecNone && !coll::compressible(a)) {
      if (!(ex && compression)) why = notCompressible(a);
      a.codec = codec::Params{};
    }
    if (why >= 0) noteUncompressed(comm, static_cast<cclUncompressedReason_t>(why));
    a.misaligned = coll::misalignment(isSend ? send : nullptr, isSend ? nullptr : recv, dtype);
    op.compressed = a.codec.codec != cclCodecNone;
    op.stream = queue;
    TakenPosition position;  // until the call is accepted
    if (op.compressed && isSend) {
      Call c{kind, fn, send, recv, count, dtype, cclSum, peer, comm, stream, ex, compression, feedback};
      const AutoFeedback::Slot fb = feedbackFor(c, op.opKind, a.codec);
      position.hold(comm, fb.taken);
      op.feedback = where.device ? deviceFeedback(fb.state) : fb.state;
      op.feedbackGeneration = fb.generation;
      op.feedbackTaken = fb.taken;
      a.feedback = op.feedback != nullptr;
      op.feedbackFloats = coll::feedbackFloats(Coll::kSend, a);
      op.feedbackErrorFloats = codec::isLowRank(a.codec.codec) ? a.count : op.feedbackFloats;
    }
    PlanKey key{op.opKind, bytes, dtype, 0, peer, false, codecKey(a), op.compressed ? a.misaligned : uint8_t{0}};
    if (where.device) {
      DeviceCall d{kind, fn, comm, a};
      d.peer = peer;
      d.send = send;
      d.recv = recv;
      d.stream = stream;
      d.feedback = op.feedback;
      d.feedbackGeneration = op.feedbackGeneration;
      d.feedbackTaken = op.feedbackTaken;
      d.feedbackFloats = op.feedbackFloats;
      d.opKind = op.opKind;
      d.key = key;
      d.tagBase = tags::pointToPointBase(seq++);
      position.keep();
      return submitDevice(std::move(d), &seq);
    }
    op.plan = cachedPlan(comm, key, [&] {
      if (op.compressed) return isSend ? coll::planCompressedSend(a, peer, 0) : coll::planCompressedRecv(a, peer, 0);
      return isSend ? coll::planSend(peer, 0, bytes) : coll::planRecv(peer, 0, bytes);
    });
    op.send = send;
    op.recv = recv;
    op.seq = &seq;
    op.tagBase = tags::pointToPointBase(seq++);
    position.keep();
    submit(std::move(op));
  }));
}

}  // namespace

bool hasDevice(cclComm_t comm) { return comm->device.ordinal >= 0; }

bool hasDefaultCodec(cclComm_t comm) {
  return comm->compression.policy.codec.codec != cclCodecNone || comm->compression.policy.autoChoice;
}

DeviceOffer offerDevice(const Call& c) {
  DeviceOffer o;
  Prepared p = prepare(c);
  if (!p.where.device) return o;  // nothing to move (count 0): nothing to compress
  o.why = p.why;
  if (p.a.codec.codec == cclCodecNone) return o;
  // LoCo keeps its 8-bit state on the host: the api refuses it for device buffers.
  if (!c.feedback && c.comm->compression.policy.autoFeedback == cclFeedbackLoco && collInfo(c.kind).feedback) {
    o.why = cclUncompressedFeedback;
    return o;
  }
  if (declinedOnDevice(deviceCall(c, p, true))) {
    o.why = cclUncompressedBound;
    return o;
  }
  o.compressed = true;
  return o;
}

}  // namespace ccl::api

using ccl::api::Call;
using ccl::coll::Coll;

extern "C" {

CCL_API cclResult_t cclAllReduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                 cclRedOp_t op, cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kAllReduce, "cclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm, stream});
}

CCL_API cclResult_t cclBroadcast(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                                 cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kBroadcast, "cclBroadcast", sendbuff, recvbuff, count, datatype, cclSum, root, comm, stream});
}

CCL_API cclResult_t cclBcast(void* buff, size_t count, cclDataType_t datatype, int root, cclComm_t comm,
                             cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kBroadcast, "cclBcast", buff, buff, count, datatype, cclSum, root, comm, stream});
}

CCL_API cclResult_t cclReduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, cclRedOp_t op,
                              int root, cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kReduce, "cclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream});
}

CCL_API cclResult_t cclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, cclDataType_t datatype,
                                 cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kAllGather, "cclAllGather", sendbuff, recvbuff, sendcount, datatype, cclSum, 0, comm, stream});
}

CCL_API cclResult_t cclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, cclDataType_t datatype,
                                     cclRedOp_t op, cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kReduceScatter, "cclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream});
}

CCL_API cclResult_t cclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kAlltoAll, "cclAlltoAll", sendbuff, recvbuff, count, datatype, cclSum, 0, comm, stream});
}

CCL_API cclResult_t cclGather(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                              cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kGather, "cclGather", sendbuff, recvbuff, count, datatype, cclSum, root, comm, stream});
}

CCL_API cclResult_t cclScatter(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                               cclComm_t comm, cclStream_t stream) {
  return ccl::api::collective(
      Call{Coll::kScatter, "cclScatter", sendbuff, recvbuff, count, datatype, cclSum, root, comm, stream});
}

CCL_API cclResult_t cclSend(const void* sendbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                            cclStream_t stream) {
  return ccl::api::pointToPoint("cclSend", true, sendbuff, nullptr, count, datatype, peer, comm, stream);
}

CCL_API cclResult_t cclRecv(void* recvbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                            cclStream_t stream) {
  return ccl::api::pointToPoint("cclRecv", false, nullptr, recvbuff, count, datatype, peer, comm, stream);
}

CCL_API cclResult_t cclAllReduceEx(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                   cclRedOp_t op, cclComm_t comm, cclStream_t stream,
                                   const cclCompression_t* compression, cclFeedback_t feedback) {
  return ccl::api::collective(Call{Coll::kAllReduce, "cclAllReduceEx", sendbuff, recvbuff, count, datatype, op, 0, comm,
                                   stream, true, compression, feedback});
}

CCL_API cclResult_t cclReduceScatterEx(const void* sendbuff, void* recvbuff, size_t recvcount, cclDataType_t datatype,
                                       cclRedOp_t op, cclComm_t comm, cclStream_t stream,
                                       const cclCompression_t* compression, cclFeedback_t feedback) {
  return ccl::api::collective(Call{Coll::kReduceScatter, "cclReduceScatterEx", sendbuff, recvbuff, recvcount, datatype,
                                   op, 0, comm, stream, true, compression, feedback});
}

CCL_API cclResult_t cclAllGatherEx(const void* sendbuff, void* recvbuff, size_t sendcount, cclDataType_t datatype,
                                   cclComm_t comm, cclStream_t stream, const cclCompression_t* compression,
                                   cclFeedback_t feedback) {
  return ccl::api::collective(Call{Coll::kAllGather, "cclAllGatherEx", sendbuff, recvbuff, sendcount, datatype, cclSum,
                                   0, comm, stream, true, compression, feedback});
}

CCL_API cclResult_t cclAlltoAllEx(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                  cclComm_t comm, cclStream_t stream, const cclCompression_t* compression) {
  return ccl::api::collective(Call{Coll::kAlltoAll, "cclAlltoAllEx", sendbuff, recvbuff, count, datatype, cclSum, 0,
                                   comm, stream, true, compression, nullptr});
}

CCL_API cclResult_t cclBroadcastEx(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                                   cclComm_t comm, cclStream_t stream, const cclCompression_t* compression) {
  return ccl::api::collective(Call{Coll::kBroadcast, "cclBroadcastEx", sendbuff, recvbuff, count, datatype, cclSum,
                                   root, comm, stream, true, compression, nullptr});
}

CCL_API cclResult_t cclSendEx(const void* sendbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                              cclStream_t stream, const cclCompression_t* compression, cclFeedback_t feedback) {
  return ccl::api::pointToPoint("cclSendEx", true, sendbuff, nullptr, count, datatype, peer, comm, stream, true,
                                compression, feedback);
}

CCL_API cclResult_t cclRecvEx(void* recvbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                              cclStream_t stream, const cclCompression_t* compression) {
  return ccl::api::pointToPoint("cclRecvEx", false, nullptr, recvbuff, count, datatype, peer, comm, stream, true,
                                compression);
}

}  // extern "C"
