// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/device_runner.h"

#include "codecs/codec.h"
#include "common/activity.h"

namespace ccl::coll {

DeviceRunner::DeviceRunner(std::unique_ptr<Device> device, const MakeLink& makeLink) : device_(std::move(device)) {
  CurrentDevice current(*device_);
  comm_ = std::make_unique<CountedStream>(device_->newStream(), counts_);
  kernels_ = device_->newKernels();
  link_ = makeLink(*device_);
}

DeviceRunner::~DeviceRunner() {
  CurrentDevice current(*device_);
  // The last call's kernels read scratch and residuals on its caller's stream, and it ran
  // after every earlier call (begin()): the frees wait for it, not only for this stream.
  if (last_) comm_->wait(lastDone_);
  if (scratch_) device_->free(scratch_, *comm_);
  for (auto& [key, r] : residuals_) device_->free(r.memory, *comm_);
  comm_->synchronize();
  // The members go while the device is current (CUDA frees events, streams and memory of
  // the current device's context), in the order they depend on each other.
  link_.reset();
  kernels_.reset();
  callers_.clear();
  comm_.reset();
}

DeviceRunner::Planned DeviceRunner::plan(Coll coll, const CollArgs& args, const PlanOf& planOf, int rank,
                                         int nranks) const {
  const bool atBound = link_->sendsAtBound();
  // Quantizers write fixed-length streams on every device link: the host cannot see a
  // stream's length, so a staged link copies each at its bound too, and a variable-length
  // stream's bound (every block raw) is about the data's size.
  CollArgs a = args;
  a.codec = codec::fixLength(a.codec);
  Planned p;
  p.compressed = a.codec.codec != cclCodecNone;
  p.plan = std::make_shared<const Plan>(planOf(a, rank));
  const Shifts shifts = collInfo(coll).pointToPoint ? Shifts::none(nranks) : planShifts(coll, a);
  p.schedule = std::make_shared<const Schedule>(scheduleWaves([&](int r) { return planOf(a, r); }, shifts, rank));
  if (p.compressed && atBound) {
    p.moved = postedBytes(*p.plan, *p.schedule);
    p.declined = p.moved.posted >= p.moved.raw;
  }
  return p;
}

Stream& DeviceRunner::caller(void* handle) {
  auto& s = callers_[handle];
  if (!s) s = std::make_unique<CountedStream>(device_->wrap(handle), counts_);
  return *s;
}

char* DeviceRunner::begin(Stream& caller, size_t scratchBytes) {
  if (last_ && last_ != &caller) caller.wait(lastDone_);
  if (scratchBytes > scratchBytes_) {
    ActivityScope busy("growing the scratch");
    if (scratch_) device_->free(scratch_, caller);
    scratch_ = nullptr;
    scratchBytes_ = 0;
    scratch_ = device_->allocZeroed(scratchBytes, caller);
    scratchBytes_ = scratchBytes;
  }
  return static_cast<char*>(scratch_);
}

float* DeviceRunner::residual(ResidualKey key, size_t floats, int kind, Stream& caller) {
  Residual& r = residuals_[key];
  if (r.memory && (r.floats != floats || r.kind != kind)) {
    device_->free(r.memory, caller);
    r = {};
  }
  if (!r.memory) {
    ActivityScope busy("allocating feedback");
    r.memory = static_cast<float*>(device_->allocZeroed(floats * sizeof(float), caller));
    r.floats = floats;
    r.kind = kind;
  }
  return r.memory;
}

void DeviceRunner::run(std::span<const StreamJob> jobs, Stream& caller) {
  ActivityScope busy("enqueuing a device call");
  try {
    executeOnStream(jobs, *link_, *kernels_, caller, *comm_);
  } catch (...) {
    // Part of the call may be enqueued (an abort while it waited for staging): what the
    // runner frees later waits for that part too.
    last_ = &caller;
    lastDone_ = caller.record();
    throw;
  }
  last_ = &caller;
  lastDone_ = caller.record();
}

}  // namespace ccl::coll
