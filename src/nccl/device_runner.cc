// SPDX-License-Identifier: BSD-3-Clause
// The compressed runner of the NCCL face (policy.h's setCompressedRunner), built with CUDA:
// a device-buffer collective that the policy compresses runs on ccl's stream executor, on the
// caller's CUDA stream, with the CUDA codec kernels and the real NCCL communicator behind the
// face as transport (grouped ncclSend/ncclRecv of encoded bytes). Per communicator it keeps
// a coll::DeviceRunner, as the api's device path does (the device's streams, scratch, the
// order of calls across streams, residuals of plain error feedback, keyed here by receive
// buffer and count as the face keys host feedback), and the plans with their wave schedules.
//
// Inside ncclGroupStart/End a call is planned at once and enqueued at the outermost group
// end, after the real NCCL group (group::defer): its waves are NCCL groups of their own on
// the real communicator, which nested in the user's open group would be launched only at its
// end, after the kernels that wait for them.
//
// It declines (the call then goes to NVIDIA's NCCL uncompressed) what it does not serve:
// calls under CUDA graph capture, mixed host and device buffers, collectives without a compressed plan (reduce, gather,
// scatter), PreMulSum ops, LoCo feedback, types the codecs do not take, and codecs whose
// streams at their bound would not be smaller than the data.
#include <memory>
#include <mutex>

#include "codecs/codec.h"
#include "collectives/algorithms.h"
#include "collectives/cuda/cuda_device.h"
#include "collectives/device_runner.h"
#include "collectives/links/factory.h"
#include "collectives/misaligned.h"
#include "collectives/stream_executor.h"
#include "common/cuda_probe.h"
#include "common/error.h"
#include "common/log.h"
#include "nccl/comm.h"
#include "nccl/group.h"
#include "nccl/policy.h"
#include "nccl/real_nccl.h"
#include "transport/nccl/nccl_transport.h"

namespace ccl::nccl {
namespace {

// The real library's functions, for the transport that borrows the face's communicator.
transport::nccl::Functions realFunctions() {
  transport::nccl::Functions f;
  f.library = real::describe();
  f.commGetAsyncError = reinterpret_cast<decltype(f.commGetAsyncError)>(real::symbol("pncclCommGetAsyncError"));
  f.commAbort = reinterpret_cast<decltype(f.commAbort)>(real::symbol("pncclCommAbort"));
  f.groupStart = reinterpret_cast<decltype(f.groupStart)>(real::symbol("pncclGroupStart"));
  f.groupEnd = reinterpret_cast<decltype(f.groupEnd)>(real::symbol("pncclGroupEnd"));
  f.send = reinterpret_cast<decltype(f.send)>(real::symbol("pncclSend"));
  f.recv = reinterpret_cast<decltype(f.recv)>(real::symbol("pncclRecv"));
  f.getErrorString = reinterpret_cast<decltype(f.getErrorString)>(real::symbol("pncclGetErrorString"));
  return f;
}

struct DeviceState {
  DeviceState(ncclComm& c, int ordinal)
      : transport(realFunctions(), c.real, c.rank, c.nranks),
        runner(coll::cudaDriver()->open(ordinal), [this](coll::Device& d) {
          return coll::makeLink("nccl", coll::LinkParts{nullptr, &transport}, d);
        }) {}

  std::mutex mutex;  // one call at a time per communicator, as NCCL requires of its callers
  transport::nccl::Transport transport;
  coll::DeviceRunner runner;  // destroyed first: its link uses the transport; holds the plan cache
  uint64_t calls = 0;         // the codec seed of each call: the same on every rank, new each call
};

// The state of `c`, made at its first compressed call on the device of `memory`.
DeviceState& stateOf(ncclComm& c, const void* memory) {
  if (!c.device) c.device = std::make_shared<DeviceState>(c, coll::cudaDriver()->deviceOf(memory));
  return *static_cast<DeviceState*>(c.device.get());
}

bool hasCompressedPlan(Coll k) {
  return k == Coll::kAllReduce || k == Coll::kReduceScatter || k == Coll::kAllGather || k == Coll::kBroadcast ||
         k == Coll::kAlltoAll;
}

// Enqueues a planned call on the caller's stream. Holds the state's mutex.
void enqueue(ncclComm& c, DeviceState& st, const CollCall& call, const coll::CollArgs& a,
             const coll::DeviceRunner::Planned& planned) {
  coll::DeviceRunner& runner = st.runner;
  coll::CurrentDevice current(runner.device());
  coll::Stream& caller = runner.caller(call.stream);
  // A failure an earlier call on this stream left behind is this call's to report.
  std::string earlier;
  if (const cclResult_t e = caller.takeError(&earlier); e != cclSuccess) throw Error(e, earlier);
  char* scratch = runner.begin(caller, planned.plan->scratchBytes);
  float* residual = nullptr;
  if (a.feedback)
    residual = runner.residual({reinterpret_cast<uintptr_t>(call.recv), call.count}, coll::feedbackFloats(call.kind, a),
                               static_cast<int>(call.kind), caller);
  coll::StreamJob job{planned.plan,
                      planned.schedule,
                      coll::Buffers{call.send, call.recv, scratch, residual},
                      0,
                      ++st.calls,
                      nullptr,
                      {}};
  // A failure found once the call has run is the communicator's asynchronous error.
  job.finished = [owner = &c](cclResult_t r, const std::string&) {
    int none = 0;
    if (r != cclSuccess) owner->deviceError.compare_exchange_strong(none, static_cast<int>(r));
  };
  runner.run(std::span<const coll::StreamJob>(&job, 1), caller);
}

// Counts a compressed call as inside the face while it enqueues (ncclComm::compressedCalls).
struct CallsInside {
  explicit CallsInside(ncclComm& c) : comm(c) { comm.compressedCalls.fetch_add(1); }
  ~CallsInside() { comm.compressedCalls.fetch_sub(1); }
  CallsInside(const CallsInside&) = delete;
  CallsInside& operator=(const CallsInside&) = delete;
  ncclComm& comm;
};

bool runCompressed(const CollCall& call, const Policy& policy) {
  if (!hasCompressedPlan(call.kind)) return false;
  if (policy.feedback == cclFeedbackLoco) return false;                     // LoCo's state is host-side only
  if (static_cast<int>(call.op) > static_cast<int>(ncclAvg)) return false;  // PreMulSum and other custom ops
  ncclComm& c = usable(call.comm);
  if (!c.real) return false;
  const CallsInside inside(c);
  // Under stream capture NVIDIA's NCCL serves the call uncompressed: it captures correctly,
  // while the runner's calls keep per-call state (seeds, residual bookkeeping, ordering
  // events) that a graph replaying one call would not renew.
  if (coll::cudaDriver()->capturing(call.stream)) {
    static std::once_flag said;
    std::call_once(said,
                   [] { CCL_INFO("NCCL face: calls under CUDA graph capture go to NVIDIA's NCCL uncompressed"); });
    return false;
  }
  const coll::CollInfo info = coll::collInfo(call.kind);
  const bool isRoot = call.root == c.rank;
  const coll::BufferCounts counts = coll::bufferCounts(call.kind, call.count, static_cast<size_t>(c.nranks), isRoot);
  if ((counts.send && !cuda::isDevicePointer(call.send)) || (counts.recv && !cuda::isDevicePointer(call.recv)))
    return false;

  coll::CollArgs a;
  a.rank = c.rank;
  a.nranks = c.nranks;
  a.count = call.count;
  a.dtype = static_cast<cclDataType_t>(call.dtype);
  a.op = info.reduction ? static_cast<cclRedOp_t>(call.op) : cclSum;
  a.root = info.rooted ? call.root : 0;
  const size_t esize = elementSize(call.dtype);
  a.inPlace = coll::isInPlace(call.kind, call.send, call.recv, call.count * esize, c.rank, isRoot);
  a.misaligned = coll::misalignment(counts.send ? call.send : nullptr, counts.recv ? call.recv : nullptr, a.dtype);
  a.codec = codec::defaultParams(policy.codec);  // fixed-length over NCCL: DeviceRunner::plan
  a.feedback = policy.feedback == cclFeedbackResidual && info.feedback;
  if (!coll::compressible(a) || codec::isLowRank(policy.codec)) return false;

  DeviceState& st = stateOf(c, counts.send ? call.send : call.recv);
  std::lock_guard<std::mutex> lock(st.mutex);
  const coll::CallKey key{static_cast<int>(call.kind), a.count,     a.dtype, a.op, a.root, a.inPlace,
                          coll::codecKey(a),           a.misaligned};
  const coll::DeviceRunner::Planned& entry = st.runner.planned(key, [&] {
    coll::DeviceRunner::Planned p = st.runner.plan(
        call.kind, a,
        [&](const coll::CollArgs& with, int r) {
          coll::CollArgs other = with;
          other.rank = r;
          return coll::planCollective(call.kind, other);
        },
        c.rank, c.nranks);
    // Declined: NVIDIA's uncompressed call moves fewer bytes. Decided (and said) once per plan.
    if (p.declined)
      CCL_INFO(
          "device %s of %zu elements: %s streams at their bound (%zu bytes) are not smaller than the data (%zu); "
          "sent uncompressed",
          info.name, call.count, cclCodecName(a.codec.codec), p.moved.posted, p.moved.raw);
    return p;
  });
  if (entry.declined) return false;
  const coll::DeviceRunner::Planned planned = entry;  // the cache may be cleared before a deferred call runs
  if (group::defer(call.comm, [&c, &st, call, a, planned] {
        const CallsInside inside(c);
        std::lock_guard<std::mutex> later(st.mutex);
        enqueue(c, st, call, a, planned);
      }))
    return true;
  enqueue(c, st, call, a, planned);
  return true;
}

// Installed when the face loads: from then on device calls the policy selects are compressed.
const bool kInstalled = [] {
  setCompressedRunner(&runCompressed);
  return true;
}();

}  // namespace
}  // namespace ccl::nccl
