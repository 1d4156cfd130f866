// SPDX-License-Identifier: BSD-3-Clause
// Streams and events of collectives/exec/stream.h on a CUDA device: a cudaStream_t (the caller's,
// or one made here) and cudaEvent_t events. Host steps (the stream executor's bookkeeping)
// run as cudaLaunchHostFunc callbacks, in stream order; they must not call CUDA, and a step
// that throws records the stream's first failure, as on a host stream. Kernel faults stay
// CUDA's: sticky, reported by the next CUDA call (cudaStreamSynchronize) of the caller.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/exec/links/transport_link.h"
#include "collectives/exec/stream.h"
#include "collectives/exec/stream_executor.h"

namespace ccl::coll {

class CudaStream final : public Stream {
 public:
  // Wraps `stream` (not owned), or with nullptr makes a non-blocking stream on the current
  // device and owns it. Throws Error(cclUnhandledCudaError) when CUDA fails.
  explicit CudaStream(cudaStream_t stream = nullptr);
  // Wraps `stream` whatever it is, the legacy default stream (0) included; not owned.
  struct Wrap {};
  CudaStream(Wrap, cudaStream_t stream);
  // Waits for the stream (a caller's: for what was enqueued through this object, without
  // touching a handle that may be gone), then frees its events (and the stream if owned).
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void enqueue(Step step) override;
  Event record() override;
  void wait(const Event& event) override;  // an event of any CudaStream (of one device)
  void block(const Event& event) override;
  bool reached(const Event& event) override;
  cclResult_t takeError(std::string* message) override;
  void* native() override { return stream_; }
  void copy(void* dst, const void* src, size_t bytes) override;  // cudaMemcpyAsync, kind inferred
  void copyBatch(std::span<const Copy> copies) override;         // cudaMemcpyBatchAsync
  // A stream memory operation (cuStreamWaitValue64, >= `value`) on the flag (pinned host
  // memory, seen through its device address): no SM held, no kernel to load. Where the
  // device has no 64-bit memory operations (or CCL_DEVICE_FLAGS=kernel), a one-thread
  // kernel that polls it.
  void waitFlag(const std::atomic<uint64_t>* flag, uint64_t value) override;
  // cuStreamWriteValue64 with its default barrier: the stream's earlier writes (copies to
  // host memory included) are visible before the flag; else a one-thread kernel that
  // stores `value` between system-wide fences.
  void setFlag(std::atomic<uint64_t>* flag, uint64_t value) override;

  // The CUDA event of one of this stream's events.
  cudaEvent_t eventOf(const Event& event) const;
  int device() const { return device_; }

 private:
  static void CUDART_CB runStep(void* data);

  cudaStream_t stream_ = nullptr;
  bool owned_ = false;
  int device_ = 0;
  // Events in a ring: ticket t is events_[(t - 1) % size]. A ticket older than the ring
  // waits for a later point of the same stream, never an earlier one.
  std::vector<cudaEvent_t> events_;
  uint64_t tickets_ = 0;
  FirstFailure failure_;         // of host steps (written by CUDA's callback thread)
  std::atomic<int> pending_{0};  // host steps enqueued that have not finished
};

// Pinned host memory (cudaHostAlloc, mapped: kernels poll and set the flags in it) for a
// TransportLink of device `device` that stages device buffers through a host transport.
// Blocks outgrown are kept until the link ends, never cudaFreeHost'd while calls run
// (StagingMemory says why).
StagingMemory pinnedStaging(int device);

}  // namespace ccl::coll
