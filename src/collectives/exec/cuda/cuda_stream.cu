// SPDX-License-Identifier: BSD-3-Clause
#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/exec/cuda/cuda_stream.h"
#include "common/activity.h"
#include "common/config.h"
#include "common/error.h"
#include "common/kernel_registry.h"
#include "common/log.h"

namespace ccl::coll {
namespace {

constexpr size_t kEventRing = 256;

void cudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(cclUnhandledCudaError, std::string(what) + " failed: " + cudaGetErrorString(e));
}

// Polls a flag the host sets; sleeps between reads so the SM it occupies stays mostly idle.
__global__ void waitFlagKernel(const volatile unsigned long long* flag, unsigned long long value) {
  while (*flag < value) __nanosleep(2000);
}

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&waitFlagKernel);

// Stores a flag the host polls, after everything before it on the stream.
__global__ void setFlagKernel(volatile unsigned long long* flag, unsigned long long value) {
  __threadfence_system();
  *flag = value;
  __threadfence_system();
}

// The device address of a flag in pinned host memory.
unsigned long long* deviceFlag(const std::atomic<uint64_t>* flag) {
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(unsigned long long));
  void* device = nullptr;
  cudaOk(cudaHostGetDevicePointer(&device, const_cast<std::atomic<uint64_t>*>(flag), 0),
         "cudaHostGetDevicePointer (a flag outside pinned memory)");
  return static_cast<unsigned long long*>(device);
}

// Stream memory operations (CUDA's driver API, reached through the runtime so nothing links
// libcuda): a wait or a write the GPU's front end executes in stream order, holding no SM
// and loading no kernel. The write's default flag fences the stream's earlier writes
// (copies included) before the value lands, so a host thread that reads the flag sees the
// bytes the stream wrote before it (CUDA's documented order for stream memory operations).
struct MemOps {
  using Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);  // both take these
  Fn wait = nullptr;
  Fn write = nullptr;
};

template <typename Fn>
Fn driverEntry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(fn);
}

// The memory operations of `device`, or none (kernels then poll and store the flags):
// CCL_DEVICE_FLAGS, and whether the device supports 64-bit memory operations. Asked once per
// device; a map, so the entries stay where they are as devices are added.
const MemOps* memOpsOf(int device) {
  static std::mutex mutex;
  static std::map<int, MemOps> byDevice;  // wait and write null: polling kernels
  std::lock_guard<std::mutex> lock(mutex);
  auto it = byDevice.find(device);
  if (it == byDevice.end()) {
    const std::string mode = config::deviceFlags();
    CCL_CHECK(mode == "auto" || mode == "memop" || mode == "kernel", cclInvalidArgument,
              "CCL_DEVICE_FLAGS=" + mode + ": expected auto, memop or kernel");
    MemOps ops;
    if (mode != "kernel") {
      using AttrFn = CUresult (*)(int*, CUdevice_attribute, CUdevice);
      const auto attr = driverEntry<AttrFn>("cuDeviceGetAttribute");
      int has = 0;
      if (attr && attr(&has, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device) != CUDA_SUCCESS) has = 0;
      ops.wait = driverEntry<MemOps::Fn>("cuStreamWaitValue64");
      ops.write = driverEntry<MemOps::Fn>("cuStreamWriteValue64");
      if (!has || !ops.wait || !ops.write) ops = MemOps{};
      CCL_CHECK(ops.wait || mode == "auto", cclInvalidArgument,
                "CCL_DEVICE_FLAGS=memop: device " + std::to_string(device) +
                    " has no 64-bit stream memory operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)");
    }
    it = byDevice.emplace(device, ops).first;
    CCL_INFO("device %d: stream flags by %s", device, ops.wait ? "stream memory operations" : "polling kernels");
  }
  return it->second.wait ? &it->second : nullptr;
}

struct HostStep {
  CudaStream* stream;
  Stream::Step step;
};

}  // namespace

CudaStream::CudaStream(cudaStream_t stream) : CudaStream(Wrap{}, stream) {
  if (!stream_) {
    cudaOk(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    owned_ = true;
  }
}

CudaStream::CudaStream(Wrap, cudaStream_t stream) : stream_(stream) {
  cudaOk(cudaGetDevice(&device_), "cudaGetDevice");
  events_.resize(kEventRing, nullptr);
  for (cudaEvent_t& e : events_) cudaOk(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
}

CudaStream::~CudaStream() {
  ActivityScope busy("waiting for a stream that goes");
  // Errors cannot leave a destructor: what the stream failed with stays CUDA's sticky error.
  if (owned_) {
    cudaStreamSynchronize(stream_);
  } else {
    // A caller's stream may be destroyed already (its work still runs): wait for the last
    // point recorded here and for the host steps enqueued here, never for the handle.
    if (tickets_) cudaEventSynchronize(events_[(tickets_ - 1) % events_.size()]);
    while (pending_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  }
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
  if (owned_) cudaStreamDestroy(stream_);
}

void CUDART_CB CudaStream::runStep(void* data) {
  std::unique_ptr<HostStep> s(static_cast<HostStep*>(data));
  s->stream->failure_.run(s->step);
  s->stream->pending_.fetch_sub(1, std::memory_order_acq_rel);  // last: the stream may go now
}

void CudaStream::enqueue(Step step) {
  auto* s = new HostStep{this, std::move(step)};
  pending_.fetch_add(1, std::memory_order_acq_rel);
  const cudaError_t e = cudaLaunchHostFunc(stream_, &CudaStream::runStep, s);
  if (e != cudaSuccess) {
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    delete s;
    cudaOk(e, "cudaLaunchHostFunc");
  }
}

void CudaStream::copy(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) cudaOk(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync");
}

void CudaStream::copyBatch(std::span<const Copy> copies) {
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (const Copy& c : copies)
    if (c.bytes && c.dst != c.src) {
      dsts.push_back(c.dst);
      srcs.push_back(c.src);
      sizes.push_back(c.bytes);
    }
  if (dsts.empty()) return;
  if (dsts.size() > 1) {
    // One command for the lot, the sources read in stream order. The legacy default stream
    // takes no batch: copied one by one there.
    cudaMemcpyAttributes attrs{};
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t first = 0;
    const cudaError_t e =
        cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attrs, &first, 1, stream_);
    if (e == cudaSuccess) return;
    cudaGetLastError();
  }
  for (size_t i = 0; i < dsts.size(); ++i) copy(dsts[i], srcs[i], sizes[i]);
}

namespace {

// A stream memory operation on a flag in pinned host memory, checked.
void memop(MemOps::Fn fn, const char* name, cudaStream_t stream, const std::atomic<uint64_t>* flag, uint64_t value,
           unsigned flags) {
  const CUresult r =
      fn(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(deviceFlag(flag)), value, flags);
  CCL_CHECK(r == CUDA_SUCCESS, cclUnhandledCudaError,
            std::string(name) + " failed (CUresult " + std::to_string(r) + ")");
}

}  // namespace

void CudaStream::waitFlag(const std::atomic<uint64_t>* flag, uint64_t value) {
  if (const MemOps* ops = memOpsOf(device_))
    return memop(ops->wait, "cuStreamWaitValue64", stream_, flag, value, CU_STREAM_WAIT_VALUE_GEQ);
  waitFlagKernel<<<1, 1, 0, stream_>>>(deviceFlag(flag), value);
  cudaOk(cudaGetLastError(), "launching the flag wait");
}

void CudaStream::setFlag(std::atomic<uint64_t>* flag, uint64_t value) {
  if (const MemOps* ops = memOpsOf(device_))
    return memop(ops->write, "cuStreamWriteValue64", stream_, flag, value, CU_STREAM_WRITE_VALUE_DEFAULT);
  setFlagKernel<<<1, 1, 0, stream_>>>(deviceFlag(flag), value);
  cudaOk(cudaGetLastError(), "launching the flag store");
}

namespace {

// Pinned blocks outgrown, freed when the link's StagingMemory goes: freeing one earlier would
// be cudaFreeHost, which waits for the whole device.
struct Retired {
  std::mutex mutex;
  std::vector<void*> blocks;
  ~Retired() {
    for (void* p : blocks) cudaFreeHost(p);
  }
};

}  // namespace

StagingMemory pinnedStaging(int device) {
  StagingMemory m;
  m.alloc = [](size_t bytes) -> void* {
    void* p = nullptr;
    return cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped) == cudaSuccess ? p : nullptr;
  };
  m.free = [](void* p) { cudaFreeHost(p); };
  // Blocks: cudaHostAlloc'd as they are needed (a new largest wave), freed only with the link.
  auto retired = std::make_shared<Retired>();
  m.allocOn = [alloc = m.alloc](size_t bytes, Stream&) {
    ActivityScope busy("cudaHostAlloc (staging blocks)");
    return alloc(bytes);
  };
  m.freeOn = [retired](void* p, Stream*) {
    std::lock_guard<std::mutex> lock(retired->mutex);
    retired->blocks.push_back(p);
  };
  CCL_INFO("device %d: staging blocks from cudaHostAlloc, outgrown ones kept until the link ends", device);
  return m;
}

Event CudaStream::record() {
  const uint64_t ticket = ++tickets_;
  cudaOk(cudaEventRecord(events_[(ticket - 1) % events_.size()], stream_), "cudaEventRecord");
  return Event{this, ticket};
}

cudaEvent_t CudaStream::eventOf(const Event& event) const {
  CCL_CHECK(event.stream == this && event.ticket > 0, cclInternalError, "an event of another stream");
  return events_[(event.ticket - 1) % events_.size()];
}

void CudaStream::wait(const Event& event) {
  if (!event.stream || event.stream == this || event.ticket == 0) return;
  auto* other = dynamic_cast<CudaStream*>(event.stream);
  CCL_CHECK(other, cclInvalidUsage, "a CUDA stream cannot wait for a host stream's event");
  CCL_CHECK(other->device_ == device_, cclInvalidUsage,
            "a stream of device " + std::to_string(device_) + " cannot wait for an event of device " +
                std::to_string(other->device_));
  cudaOk(cudaStreamWaitEvent(stream_, other->eventOf(event), 0), "cudaStreamWaitEvent");
}

void CudaStream::block(const Event& event) {
  if (event.ticket == 0) return;
  ActivityScope busy("cudaEventSynchronize");
  cudaOk(cudaEventSynchronize(eventOf(event)), "cudaEventSynchronize");
}

bool CudaStream::reached(const Event& event) {
  if (event.ticket == 0) return true;
  const cudaError_t e = cudaEventQuery(eventOf(event));
  if (e == cudaErrorNotReady) return false;
  cudaOk(e, "cudaEventQuery");
  return true;
}

cclResult_t CudaStream::takeError(std::string* message) {
  return failure_.take(message);  // no CUDA call: host steps of this very stream ask it
}

}  // namespace ccl::coll
