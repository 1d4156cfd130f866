// SPDX-License-Identifier: BSD-3-Clause
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/kernel_preload.h"
#include "collectives/compute_steps.h"
#include "collectives/cuda/device_kernels.h"
#include "collectives/element_ops.h"
#include "common/activity.h"
#include "common/error.h"

namespace ccl::coll {
namespace {

using namespace elem;

constexpr unsigned kThreads = 256;
constexpr size_t kStatusWords = 4096;

void cudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(cclUnhandledCudaError, std::string(what) + " failed: " + cudaGetErrorString(e));
}

unsigned blocksFor(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(b, 1, 8192));
}

template <class Tr, class Op>
__global__ void __launch_bounds__(kThreads)
    reduceKernel(typename Tr::Storage* d, const typename Tr::Storage* a, const typename Tr::Storage* b, uint64_t n) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    d[i] = reduceOne<Tr, Op>(a[i], b[i]);
}

template <class Tr>
__global__ void __launch_bounds__(kThreads)
    divideKernel(typename Tr::Storage* d, uint64_t n, typename Tr::Compute divisor) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    d[i] = divideOne<Tr>(d[i], divisor);
}

template <class Tr>
__global__ void __launch_bounds__(kThreads) widenKernel(float* d, const typename Tr::Storage* s, uint64_t n) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) d[i] = widenOne<Tr>(s[i]);
}

template <class Tr>
__global__ void __launch_bounds__(kThreads)
    narrowKernel(typename Tr::Storage* d, const float* s, uint64_t n, float divisor, bool divide) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    d[i] = narrowOne<Tr>(s[i], divisor, divide);
}

__global__ void __launch_bounds__(kThreads) divideFloatKernel(float* d, uint64_t n, float divisor) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) d[i] /= divisor;
}

// Loaded with the rest of this file's kernels before any flag kernel runs (kernel_preload.h).
const ::ccl::codec::cuda::KernelLibrary kKernels(&divideFloatKernel);

size_t launched(const char* kernel) {
  cudaOk(cudaGetLastError(), kernel);
  return 1;
}

}  // namespace

namespace {

// Status rings kernels objects gave back, for the next ones: freeing pinned memory
// (cudaFreeHost) waits for the whole device, where another communicator's work may wait for
// its peers, so a communicator's destroy or abort never frees one.
std::mutex& ringsMutex() {
  static std::mutex m;
  return m;
}
std::vector<uint32_t*>& spareRings() {
  static auto* r = new std::vector<uint32_t*>;  // never destroyed: the rings stay reachable
  return *r;
}

}  // namespace

CudaKernels::CudaKernels() {
  {
    std::lock_guard<std::mutex> lock(ringsMutex());
    if (!spareRings().empty()) {
      status_ = spareRings().back();
      spareRings().pop_back();
    }
  }
  if (!status_) {
    void* p = nullptr;
    cudaOk(cudaHostAlloc(&p, kStatusWords * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
           "cudaHostAlloc (decode status)");
    status_ = static_cast<uint32_t*>(p);
  }
  std::fill(status_, status_ + kStatusWords, 0u);
  void* d = nullptr;
  cudaOk(cudaHostGetDevicePointer(&d, status_, 0), "cudaHostGetDevicePointer");
  statusDevice_ = static_cast<uint32_t*>(d);
}

CudaKernels::~CudaKernels() {
  if (!status_) return;
  std::lock_guard<std::mutex> lock(ringsMutex());
  spareRings().push_back(status_);
}

uint32_t* CudaKernels::nextStatus() { return statusDevice_ + (nextStatus_++ % kStatusWords); }

void CudaKernels::enqueue(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, Stream& stream) {
  auto* cs = static_cast<cudaStream_t>(stream.native());
  CCL_CHECK(cs != nullptr, cclInternalError, "device kernels on a stream without a CUDA handle");
  if (steps.empty()) return;
  const Plan& plan = *run->plan;
  if (plan.steps[steps[0]].kind == StepKind::kCopy) {
    std::vector<Stream::Copy> copies;
    for (StepId id : steps) {
      const Step& s = plan.steps[id];
      copies.push_back({bufferAt(run->buffers, s.dst), bufferAt(run->buffers, s.src), s.bytes});
    }
    stream.copyBatch(copies);  // counted by the stream
    return;
  }
  const uint64_t before = codec::cuda::commandsEnqueued;
  size_t commands = 0;
  for (StepId id : steps) commands += enqueueOne(run, id, cs);
  stream.noteCommands(commands + (codec::cuda::commandsEnqueued - before));
}

size_t CudaKernels::enqueueOne(const std::shared_ptr<StreamRun>& run, StepId id, cudaStream_t cs) {
  const Plan& plan = *run->plan;
  const Step& s = plan.steps[id];
  const Buffers& b = run->buffers;
  const uint64_t n = s.count;
  switch (s.kind) {
    case StepKind::kSend:
    case StepKind::kRecv:
      throw Error(cclInternalError, "a transfer step was enqueued as a kernel");
    case StepKind::kCopy:
      if (!s.bytes || bufferAt(b, s.dst) == bufferAt(b, s.src)) return 0;
      cudaOk(cudaMemcpyAsync(bufferAt(b, s.dst), bufferAt(b, s.src), s.bytes, cudaMemcpyDeviceToDevice, cs),
             "cudaMemcpyAsync");
      return 1;
    case StepKind::kReduce:
      if (!n) return 0;
      dispatchType(plan.dtype, [&](auto tr) {
        using Tr = decltype(tr);
        using S = typename Tr::Storage;
        dispatchOp(plan.op, [&](auto op) {
          reduceKernel<Tr, decltype(op)><<<blocksFor(n), kThreads, 0, cs>>>(
              reinterpret_cast<S*>(bufferAt(b, s.dst)), reinterpret_cast<const S*>(bufferAt(b, s.src)),
              reinterpret_cast<const S*>(bufferAt(b, s.src2)), n);
        });
      });
      return launched("reduce kernel");
    case StepKind::kDivide:
      if (!n) return 0;
      dispatchType(plan.dtype, [&](auto tr) {
        using Tr = decltype(tr);
        divideKernel<Tr><<<blocksFor(n), kThreads, 0, cs>>>(reinterpret_cast<typename Tr::Storage*>(bufferAt(b, s.dst)),
                                                            n, static_cast<typename Tr::Compute>(plan.nranks));
      });
      return launched("divide kernel");
    case StepKind::kWiden:
    case StepKind::kNarrow:
      if (!n) return 0;
      dispatchType(plan.dtype, [&](auto tr) {
        using Tr = decltype(tr);
        using S = typename Tr::Storage;
        if constexpr (kFloating<Tr>) {
          if (s.kind == StepKind::kWiden)
            widenKernel<Tr><<<blocksFor(n), kThreads, 0, cs>>>(reinterpret_cast<float*>(bufferAt(b, s.dst)),
                                                               reinterpret_cast<const S*>(bufferAt(b, s.src)), n);
          else
            narrowKernel<Tr><<<blocksFor(n), kThreads, 0, cs>>>(
                reinterpret_cast<S*>(bufferAt(b, s.dst)), reinterpret_cast<const float*>(bufferAt(b, s.src)), n,
                static_cast<float>(s.divide ? plan.nranks : 1), s.divide && plan.nranks != 1);
        } else {
          throw Error(cclInvalidArgument, "widen/narrow of an integer type");
        }
      });
      return launched("widen/narrow kernel");
    case StepKind::kDivideFloat:
      if (!n) return 0;
      divideFloatKernel<<<blocksFor(n), kThreads, 0, cs>>>(reinterpret_cast<float*>(bufferAt(b, s.dst)), n,
                                                           static_cast<float>(plan.nranks));
      return launched("divide kernel");
    case StepKind::kEncode: {
      ActivityScope busy("enqueuing an encode (kernels, cudaMemsetAsync, CUB scan)");
      codec::Params p = plan.codecOf(s);
      p.seed = encodeSeed(plan, s, run->callSeed);
      codec::cuda::encode(p, bufferAt(b, s.src), s.type, n, bufferAt(b, s.dst), s.bytes,
                          s.withFeedback ? reinterpret_cast<float*>(bufferAt(b, s.src2)) : nullptr, nullptr, workspace_,
                          cs);
      return 0;  // codec::cuda counts its commands
    }
    case StepKind::kLowRankStart:
    case StepKind::kLowRankMiddle:
    case StepKind::kLowRankFinish:
      // The api refuses powersgd on device memory before planning.
      throw Error(cclInvalidUsage, "the PowerSGD allreduce runs on host memory only");
    case StepKind::kDecode:
    case StepKind::kDecodeAdd: {
      ActivityScope busy("enqueuing a decode (kernels)");
      codec::Expect e;
      e.count = n;
      e.codec = plan.codecOf(s).codec;
      // One status word per call: its first decode stores (so a replayed graph starts from
      // its own decode), the others OR in, and the call's last host step reads it once
      // (StreamRun::lastCheck), where a host function per decode was the most of a call's.
      const bool first = run->decodeStatus == nullptr;
      if (first) {
        run->decodeStatus = nextStatus();
        const uint32_t* host = status_ + (run->decodeStatus - statusDevice_);  // mapped: read once the stream ran
        run->lastCheck = [host, r = run.get()] {
          const uint32_t v = *const_cast<const volatile uint32_t*>(host);
          if (v == 0) return;
          r->failed.store(true, std::memory_order_release);
          codec::cuda::throwIfInvalid(v);
        };
      }
      uint32_t* status = run->decodeStatus;
      workspace_.orStatus = !first;
      const size_t inBytes = run->slotBytes[s.slot];
      if (s.kind == StepKind::kDecode)
        codec::cuda::decode(bufferAt(b, s.src), inBytes, e, bufferAt(b, s.dst), s.type, status, workspace_, cs);
      else
        codec::cuda::decodeAccumulate(bufferAt(b, s.src), inBytes, e, reinterpret_cast<float*>(bufferAt(b, s.dst)),
                                      status, workspace_, cs);
      workspace_.orStatus = false;
      return 0;  // codec::cuda counts its commands
    }
  }
  return 0;
}

}  // namespace ccl::coll
