// SPDX-License-Identifier: BSD-3-Clause
// A plan's compute steps as CUDA kernels on a CudaStream, for the stream executor: copies as
// cudaMemcpyAsync, reductions, divisions, widening and narrowing as element-wise kernels over
// collectives/exec/element_ops.h (the host loops' math), codec steps as the CUDA codecs
// (codecs/cuda: the host codecs' bytes). The call's buffers are device memory.
//
// Decodes validate their streams on the GPU (an invalid stream writes nothing); each writes a
// status word into host-mapped memory, which a host step after it checks: a refused stream
// fails the call on the caller's stream (its first failure, as on a host stream). Kernels
// already enqueued behind it still run, on bytes the refused decode left as they were.
// Enqueuing allocates nothing but the codec workspace's growth (stream-ordered).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>

#include "codecs/cuda/codec_kernels.h"
#include "collectives/exec/stream_executor.h"

namespace ccl::coll {

class CudaKernels final : public StreamKernels {
 public:
  CudaKernels();
  ~CudaKernels() override;
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;

  // `stream` must be a CudaStream; every pointer of run->buffers device memory. A batch of
  // copies is one cudaMemcpyBatchAsync (Stream::copyBatch), of element-wise steps one
  // table-driven launch per 96 steps, of encodes and decodes codec::cuda's batches (one
  // launch per 160 fixed-length quantizer encodes, three per 240 quantizer decodes; other
  // codecs step by step). Every command is noted on the stream (Stream::noteCommands).
  void enqueue(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, Stream& stream) override;

 private:
  // A batch of element-wise steps (reduce, divide, widen, narrow) as table-driven launches;
  // returns the launches.
  size_t enqueueElementwise(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, cudaStream_t cs);
  // A batch of encodes: codec::cuda::encodeBatch per codec and input type (its commands
  // counted by codec::cuda's commandsEnqueued, as the decodes').
  void enqueueEncodes(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, cudaStream_t cs);
  // A batch of decodes (or decode-accumulates): codec::cuda::decodeBatch per codec and type.
  void enqueueDecodes(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, cudaStream_t cs);
  // A batch of fused hops (kDecodeAddEncode), per codec and local type: fixed-length
  // quantizer streams in one kernel per batch (codec::cuda::decodeAddEncodeBatch); other
  // codecs as the local values widened into fp32 sums (one table launch), the received
  // streams added in (decodeBatch), cclAvg's division (one launch) and the sums encoded
  // (encodeBatch), the kernels of the unfused steps. Returns the table launches (the
  // codecs count their own commands).
  size_t enqueueFused(const std::shared_ptr<StreamRun>& run, std::span<const StepId> steps, cudaStream_t cs);
  // The call's one decode status word (StreamRun::decodeStatus), made at its first decodes
  // (*first), with the check the call's host function runs.
  uint32_t* statusWord(const std::shared_ptr<StreamRun>& run, bool* first);
  uint32_t* nextStatus();

  codec::cuda::Workspace workspace_;
  codec::cuda::Workspace sums_;       // the fused hops' fp32 sums
  uint32_t* status_ = nullptr;        // host-mapped ring of decode status words
  uint32_t* statusDevice_ = nullptr;  // the same memory as the device sees it
  uint64_t nextStatus_ = 0;
};

}  // namespace ccl::coll
