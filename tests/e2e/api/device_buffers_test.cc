// SPDX-License-Identifier: BSD-3-Clause
// ccl's own API on device buffers, on a CUDA device: every collective and codec on device
// memory leaves the host path's bytes (two ranks as threads sharing device 0, staged through
// pinned host memory), bad input is refused with a message, cclCommCuDevice reports the
// device. Runs where a CUDA device exists; skipped, with the reason, elsewhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "device_match.h"
#include "gpu_test_util.h"

namespace {

using ccl::codec::gputest::cudaOk;

class CudaOps final : public ccltest::DeviceOps {
 public:
  void bindThread() override { cudaOk(cudaSetDevice(0), "cudaSetDevice"); }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    cudaOk(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void upload(void* d, const void* h, size_t bytes) override {
    cudaOk(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    // From pageable memory the copy may still be landing when cudaMemcpy returns, ordered
    // only before the legacy stream's later work; the calls run on non-blocking streams.
    cudaOk(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  void download(void* h, const void* d, size_t bytes) override {
    cudaOk(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  cclStream_t newStream() override {
    cudaStream_t s = nullptr;
    cudaOk(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return reinterpret_cast<cclStream_t>(s);
  }
  void destroyStream(cclStream_t s) override { cudaStreamDestroy(reinterpret_cast<cudaStream_t>(s)); }
  void synchronize(cclStream_t s) override {
    cudaOk(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
  }
};

TEST(ApiDeviceBuffers, EveryCollectiveAndCodecMatchesTheHostPath) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  CudaOps ops;
  for (int n : {1, 2}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    ccltest::expectDeviceMatchesHost(n, ops);
  }
}

// Device buffers inside a float (1 and 3 bytes past an aligned address): a kernel reading a
// misaligned float faults on a GPU; the library stages such buffers, so the bytes match.
TEST(ApiDeviceBuffers, MisalignedBuffersMatchTheHostPath) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  CudaOps ops;
  for (size_t at : {size_t{1}, size_t{3}}) {
    SCOPED_TRACE("buffers at +" + std::to_string(at));
    ccltest::expectDeviceMatchesHost(2, ops, at);
  }
}

TEST(ApiDeviceBuffers, BadInputIsRefusedWithAMessage) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  cudaOk(cudaSetDevice(0), "cudaSetDevice");
  cclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(cclCommInitAll(&comm, 1, &dev), cclSuccess) << cclGetLastError(nullptr);
  int reported = -1;
  ASSERT_EQ(cclCommCuDevice(comm, &reported), cclSuccess);
  EXPECT_EQ(reported, 0);
  ccl::codec::gputest::DeviceBuffer d(1024 * sizeof(float));
  std::vector<float> h(1024, 1.0f);
  cudaStream_t s = nullptr;
  cudaOk(cudaStreamCreate(&s), "cudaStreamCreate");
  auto stream = reinterpret_cast<cclStream_t>(s);
  EXPECT_EQ(cclAllReduce(h.data(), d.get(), 1024, cclFloat32, cclSum, comm, stream), cclInvalidUsage);  // mixed
  EXPECT_NE(std::string(cclGetLastError(comm)).find("host memory"), std::string::npos) << cclGetLastError(comm);
  EXPECT_EQ(cclAllReduce(d.get(), d.get(), 1024, cclFloat32, cclSum, comm, nullptr), cclInvalidUsage);  // NULL
  EXPECT_NE(std::string(cclGetLastError(comm)).find("stream is NULL"), std::string::npos) << cclGetLastError(comm);
  int devices = 0;
  cudaOk(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (devices > 1) {  // a stream of another device
    cudaOk(cudaSetDevice(1), "cudaSetDevice");
    cudaStream_t other = nullptr;
    cudaOk(cudaStreamCreate(&other), "cudaStreamCreate");
    cudaOk(cudaSetDevice(0), "cudaSetDevice");
    EXPECT_EQ(cclAllReduce(d.get(), d.get(), 1024, cclFloat32, cclSum, comm, reinterpret_cast<cclStream_t>(other)),
              cclInvalidUsage);
    EXPECT_NE(std::string(cclGetLastError(comm)).find("belongs to device 1"), std::string::npos)
        << cclGetLastError(comm);
    cudaStreamDestroy(other);
  }
  // Nothing ran: the communicator still works, on device and host buffers.
  EXPECT_EQ(cclAllReduce(d.get(), d.get(), 1024, cclFloat32, cclSum, comm, stream), cclSuccess)
      << cclGetLastError(comm);
  cudaOk(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  EXPECT_EQ(cclAllReduce(h.data(), h.data(), 1024, cclFloat32, cclSum, comm, nullptr), cclSuccess);
  EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  cudaStreamDestroy(s);
}

// A call under CUDA graph capture is refused before anything is enqueued: the capture ends
// cleanly with an empty graph, and the stream and the communicator go on working.
TEST(ApiDeviceBuffers, CaptureIsRefusedAndEverythingGoesOn) {
  CCL_SKIP_WITHOUT_CUDA_DEVICE();
  cudaOk(cudaSetDevice(0), "cudaSetDevice");
  cclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(cclCommInitAll(&comm, 1, &dev), cclSuccess) << cclGetLastError(nullptr);
  ccl::codec::gputest::DeviceBuffer d(4096 * sizeof(float));
  cudaStream_t s = nullptr;
  cudaOk(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  auto stream = reinterpret_cast<cclStream_t>(s);
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal}) {
    cudaOk(cudaStreamBeginCapture(s, mode), "cudaStreamBeginCapture");
    EXPECT_EQ(cclAllReduce(d.get(), d.get(), 4096, cclFloat32, cclSum, comm, stream), cclInvalidUsage);
    EXPECT_NE(std::string(cclGetLastError(comm)).find("captured"), std::string::npos) << cclGetLastError(comm);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess) << "the capture was invalidated";
    size_t nodes = 99;
    if (graph) {
      cudaOk(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
      cudaGraphDestroy(graph);
    }
    EXPECT_EQ(nodes, 0u) << "nothing was captured";
  }
  EXPECT_EQ(cclAllReduce(d.get(), d.get(), 4096, cclFloat32, cclSum, comm, stream), cclSuccess)
      << cclGetLastError(comm);
  cudaOk(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  cclResult_t async = cclInternalError;
  EXPECT_EQ(cclCommGetAsyncError(comm, &async), cclSuccess);
  EXPECT_EQ(async, cclSuccess);
  EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  cudaStreamDestroy(s);
}

}  // namespace
