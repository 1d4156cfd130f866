// SPDX-License-Identifier: BSD-3-Clause
// One communicator's calls on device buffers, as the api's device path and the NCCL face's
// compressed runner both run them: the device with the communicator's stream, kernels and
// link; the callers' streams, each wrapped once; plans made for the link; scratch, grown
// stream-ordered as plans need it; error-feedback residuals by the caller's key; and the
// order of the calls, which share all of these, across the callers' streams. On the
// simulated device of the tests it runs exactly what it runs on a GPU.
//
// Not thread-safe: the owner holds a lock per communicator around every use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <utility>

#include "collectives/exec/device.h"
#include "collectives/exec/stream_executor.h"
#include "collectives/plan/call_args.h"
#include "collectives/plan/call_key.h"
#include "collectives/plan/collective_info.h"
#include "collectives/plan/plan.h"

namespace ccl::coll {

class DeviceRunner {
 public:
  // Makes the communicator's stream and kernels on `device`, and the link that moves the
  // bytes with makeLink(device) (a staged link takes the device's staging memory).
  using MakeLink = std::function<std::unique_ptr<StreamLink>(Device&)>;
  DeviceRunner(std::unique_ptr<Device> device, const MakeLink& makeLink);
  // Frees scratch and residuals once the communicator's stream has run what it holds; every
  // call must have been drained (or aborted) before.
  ~DeviceRunner();
  DeviceRunner(const DeviceRunner&) = delete;
  DeviceRunner& operator=(const DeviceRunner&) = delete;

  Device& device() { return *device_; }
  // What the communicator's calls enqueued on its streams and its callers' so far.
  const StreamCounts& counts() const { return counts_; }
  StreamLink& link() { return *link_; }
  Stream& commStream() { return *comm_; }

  // A rank's plan for a call and the wave schedule of every rank's. Quantizers write
  // fixed-length streams (codec::fixLength): a device link moves every stream at its bound
  // (the staged link's copies, NCCL's transfers). On a link that sends at the bound, a call
  // whose streams at the bound are still not smaller than its data is `declined`:
  // compression would put more on the wire than the data. Every rank decides alike.
  struct Planned {
    std::shared_ptr<const Plan> plan;
    std::shared_ptr<const Schedule> schedule;
    bool compressed = false;  // a codec other than none
    bool declined = false;
    PostedBytes moved;  // when declined: what the streams would have posted, and the data
  };
  // planOf(args, r): rank r's plan of the call with `args` (whose rank field it sets), a call
  // of collective `coll` (the schedule reads one node's or one rank's plans when the
  // collective's plans are shifts of each other: planShifts) or of a point-to-point op.
  using PlanOf = std::function<Plan(const CollArgs& args, int rank)>;
  Planned plan(Coll coll, const CollArgs& args, const PlanOf& planOf, int rank, int nranks) const;
  // The plan of the call shaped `key`, made by `make` (which plans, and may decline to a plan
  // without compression) at its first call: the one plan cache of a communicator's device
  // calls, bounded (PlanCache). A call keeps a copy: a later call may empty the cache.
  const Planned& planned(const CallKey& key, const std::function<Planned()>& make) { return plans_.get(key, make); }

  // The caller's stream handle (cudaStream_t) as a Stream, wrapped at its first use.
  Stream& caller(void* handle);

  // Before enqueuing calls on `caller`: orders them after this communicator's previous
  // calls, whatever their stream, and grows scratch to `scratchBytes` (zero-filled when new).
  // Returns the scratch.
  char* begin(Stream& caller, size_t scratchBytes);
  // The residual kept for `holder` (the caller's: a feedback handle's serial): `floats` fp32 in
  // device memory, zeroed when new or when its size, `kind` (the operation it serves) or
  // `generation` (the holder's word that it now serves another tensor) changed since the last
  // call. One per holder: a new generation reuses (or replaces) the holder's memory.
  float* residual(uint64_t holder, uint64_t generation, size_t floats, int kind, Stream& caller);
  // Enqueues `jobs` (their buffers in this runner's scratch and residuals) on `caller` and
  // notes where they end, for begin()'s ordering. What would wait for staging goes to the
  // runner's launcher thread (stream_executor.h, Launcher): the caller never does.
  void run(std::span<const StreamJob> jobs, Stream& caller);

 private:
  struct Residual {
    float* memory = nullptr;
    size_t floats = 0;
    int kind = -1;
    uint64_t generation = 0;
  };
  class CallLauncher;
  StreamCounts counts_;  // before the streams that count into it
  std::unique_ptr<Device> device_;
  std::unique_ptr<CallLauncher> launcher_;
  std::unique_ptr<Stream> comm_;
  std::unique_ptr<StreamKernels> kernels_;
  std::unique_ptr<StreamLink> link_;
  std::map<void*, std::unique_ptr<Stream>> callers_;
  void* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  std::map<uint64_t, Residual> residuals_;
  PlanCache<Planned> plans_;
  Stream* last_ = nullptr;  // the stream of the previous calls, and their end
  Event lastDone_;
};

}  // namespace ccl::coll
