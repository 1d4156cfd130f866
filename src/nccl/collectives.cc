// SPDX-License-Identifier: BSD-3-Clause
// Collectives and point-to-point calls of the NCCL face. Host buffers go to ccl, whose
// communicator compresses what its policy (CCL_CODEC, ...) selects. Device buffers go to
// ccl's communicator when it would compress them (its device link is then the real NCCL
// communicator), else to the real NCCL communicator as they are, and where there is none (no
// NVIDIA library, or it could not make one: ranks sharing a GPU) to ccl's own device path on
// the caller's stream.
// A CUDA stream given with host buffers is not used: ccl completes host calls before it
// returns (or at the end of the group), so there is nothing to order on the stream.
#include <limits>
#include <string>

#include "api/call.h"
#include "api/group.h"
#include "collectives/exec/device.h"
#include "common/cuda_abi.h"
#include "common/cuda_probe.h"
#include "common/error.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/group.h"
#include "nccl/policy.h"
#include "nccl/real_nccl.h"

namespace ccl::nccl {
namespace {

cclDataType_t cclType(ncclDataType_t t) { return static_cast<cclDataType_t>(t); }

// Elements of the send buffer a PreMulSum must scale.
size_t reductionInputCount(const CollCall& call, int nranks) {
  return call.kind == Coll::kReduceScatter ? call.count * static_cast<size_t>(nranks) : call.count;
}

// The stream a device call of the face reaches ccl on. NCCL orders a call given stream 0 on
// the legacy default stream (PyTorch's current stream unless it set one); ccl's API reads
// NULL as no stream, which device buffers may not have, so stream 0 goes as CUDA's explicit
// handle of the legacy stream (cudaStreamLegacy).
cclStream_t deviceStream(cudaStream_t s) {
  return s ? reinterpret_cast<cclStream_t>(s) : reinterpret_cast<cclStream_t>(cuda::abi::kStreamLegacy);
}

// Runs `call` on ccl's communicator: host buffers (stream NULL: complete on return), or device
// buffers where no real NCCL communicator exists (ordered on the caller's `stream` by ccl's
// own device path).
void runCcl(ncclComm& c, const CollCall& call, cclStream_t stream) {
  const cclDataType_t t = cclType(call.dtype);
  // An nccl*Config call's codec, as an *Ex call's compression; NULL: the policy's.
  const cclCompression_t* z = call.hasCodec ? &call.codec : nullptr;
  if (stream && static_cast<int>(call.op) >= static_cast<int>(ncclNumOps) && coll::collInfo(call.kind).reduction)
    throw Error(cclInvalidUsage,
                "a PreMulSum reduction of device buffers needs NVIDIA's NCCL, which this "
                "communicator has not: " +
                    c.realWhy);
  if (coll::collInfo(call.kind).reduction) {
    const size_t esize = elementSize(call.dtype);
    CCL_CHECK(esize == 0 || call.count <= std::numeric_limits<size_t>::max() / esize / static_cast<size_t>(c.nranks),
              cclInvalidArgument, "count " + std::to_string(call.count) + " overflows the buffer size");
    ReductionInput in = prepareReduction(c.ops, call.op, call.dtype, call.send, reductionInputCount(call, c.nranks));
    group::keep(in.scratch);
    if (in.scale) group::whenRun(&c, std::move(in.scale));  // inside a group: at its end
    group::noteHostOp();
    switch (call.kind) {
      case Coll::kAllReduce:
        return cclCheck(cclAllReduceEx(in.send, call.recv, call.count, t, in.op, c.ccl, stream, z, nullptr),
                        "cclAllReduce");
      case Coll::kReduce:
        return cclCheck(cclReduce(in.send, call.recv, call.count, t, in.op, call.root, c.ccl, stream), "cclReduce");
      default:
        return cclCheck(cclReduceScatterEx(in.send, call.recv, call.count, t, in.op, c.ccl, stream, z, nullptr),
                        "cclReduceScatter");
    }
  }
  group::noteHostOp();
  switch (call.kind) {
    case Coll::kBroadcast:
      return cclCheck(cclBroadcastEx(call.send, call.recv, call.count, t, call.root, c.ccl, stream, z), "cclBroadcast");
    case Coll::kAllGather:
      return cclCheck(cclAllGatherEx(call.send, call.recv, call.count, t, c.ccl, stream, z, nullptr), "cclAllGather");
    case Coll::kAlltoAll:
      return cclCheck(cclAlltoAllEx(call.send, call.recv, call.count, t, c.ccl, stream, z), "cclAlltoAll");
    case Coll::kGather:
      return cclCheck(cclGather(call.send, call.recv, call.count, t, call.root, c.ccl, stream), "cclGather");
    case Coll::kScatter:
      return cclCheck(cclScatter(call.send, call.recv, call.count, t, call.root, c.ccl, stream), "cclScatter");
    default:
      throw Error(cclInternalError, "unknown collective");
  }
}

// The call as ccl's api takes it: NCCL's types are ccl's, value for value.
api::Call cclCall(ncclComm& c, const CollCall& k, cclStream_t stream) {
  return api::Call{k.kind,
                   k.fn,
                   k.send,
                   k.recv,
                   k.count,
                   cclType(k.dtype),
                   static_cast<cclRedOp_t>(k.op),
                   k.root,
                   c.ccl,
                   stream,
                   k.hasCodec,
                   k.hasCodec ? &k.codec : nullptr};
}

void checkReal(ncclResult_t r, const char* fn) { real::checkResult(r, std::string("p") + fn); }

ncclComm_t realComm(ncclComm& c) {
  CCL_CHECK(c.real, cclInternalError, "no real NCCL communicator: " + c.realWhy);
  group::enterReal();
  return c.real;
}

// The real NCCL's twin of a PreMulSum op, made on first use with the same scalar.
ncclRedOp_t realOp(ncclComm& c, ncclRedOp_t op) {
  if (static_cast<int>(op) < static_cast<int>(ncclNumOps)) return op;
  PreMulSumOp pm = c.ops.get(op);
  if (pm.hasRealOp) return pm.realOp;
  void* scalar = pm.residence == ncclScalarHostImmediate ? pm.value : const_cast<void*>(pm.pointer);
  ncclRedOp_t made;
  checkReal(CCL_REAL(ncclRedOpCreatePreMulSum)(&made, scalar, pm.dtype, pm.residence, c.real),
            "ncclRedOpCreatePreMulSum");
  c.ops.setRealOp(op, made);
  return made;
}

// The real library's symbols of each collective: the plain call and its nccl*Config twin.
struct RealSymbols {
  const char* plain;
  const char* config;
};
RealSymbols realSymbols(Coll kind) {
  switch (kind) {
    case Coll::kAllReduce:
      return {"pncclAllReduce", "pncclAllReduceConfig"};
    case Coll::kReduce:
      return {"pncclReduce", "pncclReduceConfig"};
    case Coll::kReduceScatter:
      return {"pncclReduceScatter", "pncclReduceScatterConfig"};
    case Coll::kBroadcast:
      return {"pncclBroadcast", "pncclBroadcastConfig"};
    case Coll::kAllGather:
      return {"pncclAllGather", "pncclAllGatherConfig"};
    case Coll::kAlltoAll:
      return {"pncclAlltoAll", "pncclAlltoAllConfig"};
    case Coll::kGather:
      return {"pncclGather", "pncclGatherConfig"};
    case Coll::kScatter:
      return {"pncclScatter", "pncclScatterConfig"};
    default:
      throw Error(cclInternalError, "unknown collective");
  }
}

void runDeviceConfigured(ncclComm& c, const CollCall& k, ncclComm_t r) {
  const ncclCollConfig_t* cf = k.config;
  switch (k.kind) {
    case Coll::kAllReduce:
      return checkReal(
          CCL_REAL(ncclAllReduceConfig)(k.send, k.recv, k.count, k.dtype, realOp(c, k.op), r, k.stream, cf), k.fn);
    case Coll::kReduce:
      return checkReal(
          CCL_REAL(ncclReduceConfig)(k.send, k.recv, k.count, k.dtype, realOp(c, k.op), k.root, r, k.stream, cf), k.fn);
    case Coll::kReduceScatter:
      return checkReal(
          CCL_REAL(ncclReduceScatterConfig)(k.send, k.recv, k.count, k.dtype, realOp(c, k.op), r, k.stream, cf), k.fn);
    case Coll::kBroadcast:
      return checkReal(CCL_REAL(ncclBroadcastConfig)(k.send, k.recv, k.count, k.dtype, k.root, r, k.stream, cf), k.fn);
    case Coll::kAllGather:
      return checkReal(CCL_REAL(ncclAllGatherConfig)(k.send, k.recv, k.count, k.dtype, r, k.stream, cf), k.fn);
    case Coll::kAlltoAll:
      return checkReal(CCL_REAL(ncclAlltoAllConfig)(k.send, k.recv, k.count, k.dtype, r, k.stream, cf), k.fn);
    case Coll::kGather:
      return checkReal(CCL_REAL(ncclGatherConfig)(k.send, k.recv, k.count, k.dtype, k.root, r, k.stream, cf), k.fn);
    case Coll::kScatter:
      return checkReal(CCL_REAL(ncclScatterConfig)(k.send, k.recv, k.count, k.dtype, k.root, r, k.stream, cf), k.fn);
    default:
      throw Error(cclInternalError, "unknown collective");
  }
}

void runDevice(ncclComm& c, const CollCall& k) {
  // No real library, or one older than the collective (ncclAlltoAll, ncclGather and
  // ncclScatter arrived in 2.28): ccl runs it, over the real library's sends and receives
  // where it has them.
  if (!c.real || !real::has(realSymbols(k.kind).plain)) return runCcl(c, k, deviceStream(k.stream));
  ncclComm_t r = realComm(c);
  // An nccl*Config call goes to the real library's (2.31+) with its configuration; an older
  // library gets the plain call (the configuration only tunes NVIDIA's kernels).
  if (k.config && real::has(realSymbols(k.kind).config)) return runDeviceConfigured(c, k, r);
  switch (k.kind) {
    case Coll::kAllReduce:
      return checkReal(CCL_REAL(ncclAllReduce)(k.send, k.recv, k.count, k.dtype, realOp(c, k.op), r, k.stream), k.fn);
    case Coll::kReduce:
      return checkReal(CCL_REAL(ncclReduce)(k.send, k.recv, k.count, k.dtype, realOp(c, k.op), k.root, r, k.stream),
                       k.fn);
    case Coll::kReduceScatter:
      return checkReal(CCL_REAL(ncclReduceScatter)(k.send, k.recv, k.count, k.dtype, realOp(c, k.op), r, k.stream),
                       k.fn);
    case Coll::kBroadcast:
      return checkReal(CCL_REAL(ncclBroadcast)(k.send, k.recv, k.count, k.dtype, k.root, r, k.stream), k.fn);
    case Coll::kAllGather:
      return checkReal(CCL_REAL(ncclAllGather)(k.send, k.recv, k.count, k.dtype, r, k.stream), k.fn);
    case Coll::kAlltoAll:
      return checkReal(CCL_REAL(ncclAlltoAll)(k.send, k.recv, k.count, k.dtype, r, k.stream), k.fn);
    case Coll::kGather:
      return checkReal(CCL_REAL(ncclGather)(k.send, k.recv, k.count, k.dtype, k.root, r, k.stream), k.fn);
    case Coll::kScatter:
      return checkReal(CCL_REAL(ncclScatter)(k.send, k.recv, k.count, k.dtype, k.root, r, k.stream), k.fn);
    default:
      throw Error(cclInternalError, "unknown collective");
  }
}

// A driver older than ccl's CUDA runtime: ccl can use no device and cannot tell device
// memory from host memory, so every call goes to NVIDIA's NCCL as it is (which runs on the
// driver it was built for), never to ccl.
bool forwardEverything(const ncclComm& c) { return c.real && cuda::driverTooOld(); }

// Device memory as CUDA's runtime sees it, or as ccl's device driver does (which also knows
// the simulated device of the tests).
bool deviceMemory(const void* p) {
  if (cuda::isDevicePointer(p)) return true;
  coll::DeviceDriver* driver = coll::deviceDriver();
  return p && driver && driver->deviceOf(p) >= 0;
}

// Counts (for the statistics) a call on device buffers that goes to NVIDIA's NCCL as it is.
void sentAsIs(ncclComm& c, int why) {
  if (why >= 0) api::noteUncompressed(c.ccl, static_cast<cclUncompressedReason_t>(why));
}

// A call on device buffers where NVIDIA's NCCL is present: on ccl's communicator (whose
// device link is the real communicator) when ccl would compress it, else on NVIDIA's NCCL
// as it is. Inside a group, ccl's part runs at the outermost end, after the real group: its
// waves are NCCL groups of their own, which nested in the user's open group would launch
// only at its end, after the kernels that wait for them.
void runOnDevice(ncclComm& c, const CollCall& call) {
  coll::DeviceDriver* driver = coll::deviceDriver();
  if (!driver || !api::hasDevice(c.ccl)) return runDevice(c, call);  // a build without CUDA
  const bool premulsum = static_cast<int>(call.op) >= static_cast<int>(ncclNumOps);
  const bool hasDefault = api::hasDefaultCodec(c.ccl);
  if (premulsum && coll::collInfo(call.kind).reduction) {
    if (hasDefault) sentAsIs(c, cclUncompressedOp);
    return runDevice(c, call);
  }
  // Under capture NVIDIA's NCCL serves the call: it captures correctly, where ccl's calls
  // keep per-call state (seeds, residual bookkeeping, ordering events) a replay would not renew.
  if (driver->capturing(call.stream)) {
    if (hasDefault) sentAsIs(c, cclUncompressedCapture);
    return runDevice(c, call);
  }
  // The legacy default stream (PyTorch's current stream unless it set one), which NVIDIA's
  // NCCL orders calls on and ccl's device path does not.
  if (!call.stream) {
    if (hasDefault) sentAsIs(c, cclUncompressedStream);
    return runDevice(c, call);
  }
  const api::Call k = cclCall(c, call, reinterpret_cast<cclStream_t>(call.stream));
  const api::DeviceOffer offer = api::offerDevice(k);
  if (!offer.compressed) {
    sentAsIs(c, offer.why);
    return runDevice(c, call);
  }
  auto run = [&c, call] {
    const Inside inside(c);
    runCcl(c, call, reinterpret_cast<cclStream_t>(call.stream));
  };
  if (!group::defer(call.comm, run)) run();
}

// A call that fails inside a group fails the group (NCCL cancels it whole), whether the face
// or ccl's communicator refused it.
ncclResult_t failingTheGroup(ncclResult_t r) {
  if (r != ncclSuccess) group::fail(r);
  return r;
}

ncclResult_t run(CollCall call) {
  return failingTheGroup(faceGuard(call.fn, [&] {
    // Before anything reads them as enums (the caller may have passed any int).
    call.dtype = checkedDataType(call.dtype);
    if (coll::collInfo(call.kind).reduction) call.op = checkedRedOp(call.op);
    readCollConfig(call);
    CCL_CHECK(!call.hasCodec || call.codec.codec == cclCodecNone || coll::collInfo(call.kind).compressible,
              cclInvalidArgument,
              std::string(call.fn) + ": ccl's codec option names " + cclCodecName(call.codec.codec) + ", but " +
                  coll::collInfo(call.kind).name + " is never compressed");
    ncclComm& c = usable(call.comm);
    checkNotSuspended(c);
    if (forwardEverything(c)) return runDevice(c, call);
    if (deviceMemory(call.send) || deviceMemory(call.recv)) {
      if (c.real) return runOnDevice(c, call);
      return runCcl(c, call, deviceStream(call.stream));  // ccl's own device path
    }
    runCcl(c, call, nullptr);  // ccl's communicator applies its compression policy itself
  }));
}

ncclResult_t p2p(const char* fn, bool send, void* buff, size_t count, ncclDataType_t datatype, int peer,
                 ncclComm_t comm, cudaStream_t stream) {
  return failingTheGroup(faceGuard(fn, [&] {
    const ncclDataType_t dt = checkedDataType(datatype);  // any int may come: read as one first
    ncclComm& c = usable(comm);
    checkNotSuspended(c);
    if (deviceMemory(buff) && !c.real) {
      const cclStream_t s = deviceStream(stream);
      if (send) return cclCheck(cclSend(buff, count, cclType(dt), peer, c.ccl, s), "cclSend");
      return cclCheck(cclRecv(buff, count, cclType(dt), peer, c.ccl, s), "cclRecv");
    }
    if (forwardEverything(c) || deviceMemory(buff)) {
      ncclComm_t r = realComm(c);
      return checkReal(send ? CCL_REAL(ncclSend)(buff, count, dt, peer, r, stream)
                            : CCL_REAL(ncclRecv)(buff, count, dt, peer, r, stream),
                       fn);
    }
    group::noteHostOp();
    if (send) return cclCheck(cclSend(buff, count, cclType(dt), peer, c.ccl, nullptr), "cclSend");
    cclCheck(cclRecv(buff, count, cclType(dt), peer, c.ccl, nullptr), "cclRecv");
  }));
}

}  // namespace
}  // namespace ccl::nccl

using namespace ccl::nccl;

extern "C" {

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream) {
  return run({Coll::kAllReduce, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm, stream});
}

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  return run({Coll::kReduce, "ncclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream});
}

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return run({Coll::kReduceScatter, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream});
}

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream);
  return run({Coll::kBroadcast, "ncclBroadcast", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
}

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return run({Coll::kBroadcast, "ncclBcast", buff, buff, count, datatype, ncclSum, root, comm, stream});
}

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  return run({Coll::kAllGather, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream});
}

ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) {
  return run({Coll::kAlltoAll, "ncclAlltoAll", sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream});
}

ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return run({Coll::kGather, "ncclGather", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
}

ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return run({Coll::kScatter, "ncclScatter", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
}

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return p2p("ncclSend", true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream);
}

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return p2p("ncclRecv", false, recvbuff, count, datatype, peer, comm, stream);
}

// NCCL 2.31's per-collective configuration: the plain calls with `config` (NULL: none).
ncclResult_t pncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                  const ncclCollConfig_t* config) {
  return run(
      {Coll::kAllReduce, "ncclAllReduceConfig", sendbuff, recvbuff, count, datatype, op, 0, comm, stream, config});
}

ncclResult_t pncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                               const ncclCollConfig_t* config) {
  return run({Coll::kReduce, "ncclReduceConfig", sendbuff, recvbuff, count, datatype, op, root, comm, stream, config});
}

ncclResult_t pncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                      const ncclCollConfig_t* config) {
  return run({Coll::kReduceScatter, "ncclReduceScatterConfig", sendbuff, recvbuff, recvcount, datatype, op, 0, comm,
              stream, config});
}

ncclResult_t pncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return run({Coll::kBroadcast, "ncclBroadcastConfig", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream,
              config});
}

ncclResult_t pncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return run({Coll::kAllGather, "ncclAllGatherConfig", sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm,
              stream, config});
}

ncclResult_t pncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return run(
      {Coll::kAlltoAll, "ncclAlltoAllConfig", sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream, config});
}

ncclResult_t pncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return run(
      {Coll::kGather, "ncclGatherConfig", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, config});
}

ncclResult_t pncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return run(
      {Coll::kScatter, "ncclScatterConfig", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, config});
}

}  // extern "C"

CCL_NCCL_ALIAS(ncclAllReduceConfig)
CCL_NCCL_ALIAS(ncclReduceConfig)
CCL_NCCL_ALIAS(ncclReduceScatterConfig)
CCL_NCCL_ALIAS(ncclBroadcastConfig)
CCL_NCCL_ALIAS(ncclAllGatherConfig)
CCL_NCCL_ALIAS(ncclAlltoAllConfig)
CCL_NCCL_ALIAS(ncclGatherConfig)
CCL_NCCL_ALIAS(ncclScatterConfig)
CCL_NCCL_ALIAS(ncclAllReduce)
CCL_NCCL_ALIAS(ncclReduce)
CCL_NCCL_ALIAS(ncclReduceScatter)
CCL_NCCL_ALIAS(ncclBroadcast)
CCL_NCCL_ALIAS(ncclBcast)
CCL_NCCL_ALIAS(ncclAllGather)
CCL_NCCL_ALIAS(ncclAlltoAll)
CCL_NCCL_ALIAS(ncclGather)
CCL_NCCL_ALIAS(ncclScatter)
CCL_NCCL_ALIAS(ncclSend)
CCL_NCCL_ALIAS(ncclRecv)
