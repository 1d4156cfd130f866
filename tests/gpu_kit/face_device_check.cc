// SPDX-License-Identifier: BSD-3-Clause
// An NCCL program on device memory, for the device kit (scripts/gpu_kit.sh): built against
// NVIDIA's nccl.h and libnccl.so.2, run under ccl's face (LD_PRELOAD of libccl_nccl.so, or the
// drop-in libnccl.so.2 first on the library path).
//   face_device_check probe          the device and driver; exit 77 without a device
//   face_device_check one            one rank: ncclAllReduce and ncclBroadcast of device memory
//   face_device_check threads N      N ranks as threads sharing device 0 (NVIDIA's NCCL refuses
//                                    ranks on one GPU: the face goes on without it)
//   face_device_check capture N      N ranks: each captures an ncclAllReduce into a CUDA graph
//                                    and launches it ten times, each launch the first's bits;
//                                    a refusal with an error is a pass, a wrong value, a
//                                    crash or a hang is not
// With CCL_CODEC set, values are checked within 2 % of the largest; else exactly. Prints one
// line per check and exits 0 when all passed, 1 when one failed, 77 without a device.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kCount = (size_t{1} << 20) + 37;  // not a multiple of any block or rank count
constexpr int kLaunches = 10;                      // launches of a captured graph

bool cudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

bool ncclOk(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return true;
  std::printf("FAIL %s: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(comm));
  return false;
}

float valueOf(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 13) - 6); }

// Rank r's result against `expect(i)`: exact without a codec, else within 2 % of the largest.
template <class Expect>
bool check(const char* what, int rank, const float* device, Expect expect) {
  std::vector<float> got(kCount);
  if (!cudaOk(cudaMemcpy(got.data(), device, kCount * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy"))
    return false;
  const bool lossy = std::getenv("CCL_CODEC") && std::strcmp(std::getenv("CCL_CODEC"), "none") != 0;
  double largest = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < kCount; ++i) largest = std::fmax(largest, std::fabs(expect(i)));
  for (size_t i = 0; i < kCount; ++i) {
    const double e = std::fabs(static_cast<double>(got[i]) - expect(i));
    if (!(e <= worst)) worst = e, at = i;  // NaN counts as worst
  }
  const bool ok = lossy ? worst <= 0.02 * largest : worst == 0;
  std::printf("%s rank %d %s: largest error %g at %zu (got %g, expected %g)\n", ok ? "ok  " : "FAIL", rank, what, worst,
              at, static_cast<double>(got[at]), expect(at));
  return ok;
}

struct Rank {
  int rank = 0, nranks = 1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  bool ok = true;
};

bool setUp(Rank& r, const ncclUniqueId& id) {
  if (!cudaOk(cudaSetDevice(0), "cudaSetDevice") ||
      !cudaOk(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !cudaOk(cudaMalloc(&r.send, kCount * sizeof(float)), "cudaMalloc") ||
      !cudaOk(cudaMalloc(&r.recv, kCount * sizeof(float)), "cudaMalloc"))
    return false;
  std::vector<float> x(kCount);
  for (size_t i = 0; i < kCount; ++i) x[i] = valueOf(r.rank, i);
  if (!cudaOk(cudaMemcpy(r.send, x.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy")) return false;
  // The upload from pageable memory may still be landing (ordered only before the legacy
  // stream's work); the collective runs on a non-blocking stream.
  if (!cudaOk(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize")) return false;
  return ncclOk(ncclCommInitRank(&r.comm, r.nranks, id, r.rank), "ncclCommInitRank");
}

void tearDown(Rank& r) {
  if (r.comm && ncclCommDestroy(r.comm) != ncclSuccess) r.ok = false;
  cudaFree(r.send);
  cudaFree(r.recv);
  if (r.stream) cudaStreamDestroy(r.stream);
}

double sumOf(int nranks, size_t i) {
  double s = 0;
  for (int q = 0; q < nranks; ++q) s += valueOf(q, i);
  return s;
}

// Three all-reduces (plans, scratch and residuals reused) and a broadcast from the last rank.
void collectives(Rank& r) {
  for (int k = 0; k < 3 && r.ok; ++k) {
    r.ok =
        ncclOk(ncclAllReduce(r.send, r.recv, kCount, ncclFloat, ncclSum, r.comm, r.stream), "ncclAllReduce", r.comm) &&
        cudaOk(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize") &&
        check("ncclAllReduce", r.rank, r.recv, [&](size_t i) { return sumOf(r.nranks, i); });
  }
  const int root = r.nranks - 1;
  r.ok = r.ok &&
         ncclOk(ncclBroadcast(r.send, r.recv, kCount, ncclFloat, root, r.comm, r.stream), "ncclBroadcast", r.comm) &&
         cudaOk(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize") &&
         check("ncclBroadcast", r.rank, r.recv, [&](size_t i) { return static_cast<double>(valueOf(root, i)); });
}

// Captures one all-reduce (thread-local mode, as PyTorch captures) and launches it twice.
void capture(Rank& r) {
  if (!cudaOk(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture")) {
    r.ok = false;
    return;
  }
  const ncclResult_t called = ncclAllReduce(r.send, r.recv, kCount, ncclFloat, ncclSum, r.comm, r.stream);
  const std::string why = called == ncclSuccess ? "" : ncclGetLastError(r.comm);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(r.stream, &graph);
  if (called != ncclSuccess) {
    // Refused: the capture must still end cleanly and the stream stay usable.
    std::printf("%s rank %d capture refused: %s\n", ended == cudaSuccess ? "ok  " : "FAIL", r.rank, why.c_str());
    r.ok = ended == cudaSuccess && cudaOk(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize after a refusal");
    if (graph) cudaGraphDestroy(graph);
    return;
  }
  cudaGraphExec_t exec = nullptr;
  r.ok = cudaOk(ended, "cudaStreamEndCapture") && cudaOk(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  // Ten launches of one graph: each within the bound, and each the first one's bits (a
  // replayed plan reads the same inputs and must not drift: residuals stay off under capture).
  std::vector<float> first(kCount), again(kCount);
  for (int k = 0; k < kLaunches && r.ok; ++k) {
    cudaMemsetAsync(r.recv, 0, kCount * sizeof(float), r.stream);
    const std::string what = "captured ncclAllReduce, launch " + std::to_string(k + 1);
    r.ok = cudaOk(cudaGraphLaunch(exec, r.stream), "cudaGraphLaunch") &&
           cudaOk(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize") &&
           check(what.c_str(), r.rank, r.recv, [&](size_t i) { return sumOf(r.nranks, i); }) &&
           cudaOk(cudaMemcpy((k ? again : first).data(), r.recv, kCount * sizeof(float), cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
    if (r.ok && k && std::memcmp(first.data(), again.data(), kCount * sizeof(float)) != 0) {
      std::printf("FAIL rank %d %s: not the first launch's bits\n", r.rank, what.c_str());
      r.ok = false;
    }
  }
  if (r.ok) std::printf("ok   rank %d %d launches, the same bits\n", r.rank, kLaunches);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
}

int runRanks(int nranks, void (*body)(Rank&)) {
  ncclUniqueId id;
  if (!ncclOk(ncclGetUniqueId(&id), "ncclGetUniqueId")) return 1;
  std::vector<Rank> ranks(nranks);
  std::vector<std::thread> threads;
  for (int q = 0; q < nranks; ++q)
    threads.emplace_back([&, q] {
      Rank& r = ranks[q];
      r.rank = q;
      r.nranks = nranks;
      r.ok = setUp(r, id);
      if (r.ok) body(r);
      tearDown(r);
    });
  for (auto& t : threads) t.join();
  bool ok = true;
  for (const Rank& r : ranks) ok = ok && r.ok;
  std::printf("%s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int n = argc > 2 ? std::atoi(argv[2]) : 1;
  if (mode.empty() || n < 1) {
    std::fprintf(stderr, "usage: face_device_check probe|one|threads N|capture N\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no device (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 77;
  }
  int version = 0, driver = 0, runtime = 0;
  ncclGetVersion(&version);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device 0: %s, sm_%d%d, %d SMs, %.1f GiB; CUDA driver %d, runtime %d; ncclGetVersion %d\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, driver, runtime,
              version);
  if (mode == "probe") return 0;
  if (mode == "one") return runRanks(1, collectives);
  if (mode == "threads") return runRanks(n, collectives);
  if (mode == "capture") return runRanks(n, capture);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
