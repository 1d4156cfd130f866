// SPDX-License-Identifier: BSD-3-Clause
// A stand-in for NVIDIA's NCCL, for the device kit only (test code, not a product): ranks
// that are threads of one process on one GPU, which NVIDIA's NCCL refuses. It has what ccl's
// NCCL transport and link use (unique ids, communicators, groups of sends and receives,
// errors) and nothing else. A send records an event on the sender's stream; the receive
// waits for it on the receiver's stream and copies device to device; the sender's stream
// then waits for the receiver's copy (an event the receiver recorded) before it may reuse
// the buffer. Every event is recorded before anyone waits for it, so no GPU work waits for a
// host thread: the host threads meet in ncclGroupEnd instead (every send of the group is
// posted before any receive waits), within a minute, or the call fails.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

// ncclResult_t's values.
constexpr int kSuccess = 0, kUnhandledCuda = 1, kSystem = 2, kInvalidArgument = 4, kInvalidUsage = 5, kRemote = 6;

struct UniqueId {
  char bytes[128];
};

// A send waiting for its receive, and a receive's copy, once enqueued, for its sender.
struct Posted {
  const void* buf;
  size_t bytes;
  cudaEvent_t ready;
};

struct Clique {
  explicit Clique(int n) : nranks(n) {}
  const int nranks;
  int joined = 0;
  bool aborted = false;
  std::mutex mutex;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<Posted>> sends;        // by (from, to), in order
  std::map<std::pair<int, int>, std::deque<cudaEvent_t>> copied;  // by (from, to): the receiver's copies
};

struct Comm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  std::atomic<int> error{kSuccess};
};

std::mutex gMutex;
std::map<std::string, std::shared_ptr<Clique>> gCliques;  // by id; kept for the process's life

struct Op {
  bool send;
  void* buf;
  size_t bytes;
  int peer;
  Comm* comm;
  cudaStream_t stream;
};
thread_local int tDepth = 0;
thread_local std::vector<Op> tOps;

size_t typeBytes(int type) {
  static const size_t bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};  // ncclDataType_t's order
  return type >= 0 && type < 12 ? bytes[type] : 0;
}

// Waits (the clique's lock held) until `ready`, the clique is aborted, or a minute passed.
template <class Pred>
int await(Clique& c, std::unique_lock<std::mutex>& lock, Pred ready) {
  if (!c.cv.wait_for(lock, std::chrono::seconds(60), [&] { return c.aborted || ready(); })) return kSystem;
  return c.aborted ? kRemote : kSuccess;
}

int cudaResult(cudaError_t e) { return e == cudaSuccess ? kSuccess : kUnhandledCuda; }

int run(const std::vector<Op>& ops) {
  // Every send first, so that two ranks receiving from each other both find the other's.
  for (const Op& op : ops) {
    if (!op.send) continue;
    Clique& c = *op.comm->clique;
    cudaEvent_t e = nullptr;
    if (int r = cudaResult(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); r) return r;
    if (int r = cudaResult(cudaEventRecord(e, op.stream)); r) return r;
    std::lock_guard<std::mutex> lock(c.mutex);
    c.sends[{op.comm->rank, op.peer}].push_back(Posted{op.buf, op.bytes, e});
    c.cv.notify_all();
  }
  for (const Op& op : ops) {
    if (op.send) continue;
    Clique& c = *op.comm->clique;
    Posted s{};
    {
      std::unique_lock<std::mutex> lock(c.mutex);
      auto& q = c.sends[{op.peer, op.comm->rank}];
      if (int r = await(c, lock, [&] { return !q.empty(); }); r) return r;
      s = q.front();
      q.pop_front();
    }
    if (s.bytes != op.bytes) op.comm->error = kInvalidUsage;  // NCCL's rule: equal sizes
    cudaEvent_t done = nullptr;
    if (int r = cudaResult(cudaStreamWaitEvent(op.stream, s.ready, 0)); r) return r;
    if (int r = cudaResult(
            cudaMemcpyAsync(op.buf, s.buf, std::min(s.bytes, op.bytes), cudaMemcpyDeviceToDevice, op.stream));
        r)
      return r;
    if (int r = cudaResult(cudaEventCreateWithFlags(&done, cudaEventDisableTiming)); r) return r;
    if (int r = cudaResult(cudaEventRecord(done, op.stream)); r) return r;
    cudaEventDestroy(s.ready);  // the wait enqueued above keeps what it waits for
    std::lock_guard<std::mutex> lock(c.mutex);
    c.copied[{op.peer, op.comm->rank}].push_back(done);
    c.cv.notify_all();
  }
  // A send's buffer is the sender's again once its receiver's copy has run.
  for (const Op& op : ops) {
    if (!op.send) continue;
    Clique& c = *op.comm->clique;
    cudaEvent_t done = nullptr;
    {
      std::unique_lock<std::mutex> lock(c.mutex);
      auto& q = c.copied[{op.comm->rank, op.peer}];
      if (int r = await(c, lock, [&] { return !q.empty(); }); r) return r;
      done = q.front();
      q.pop_front();
    }
    if (int r = cudaResult(cudaStreamWaitEvent(op.stream, done, 0)); r) return r;
    cudaEventDestroy(done);
  }
  return kSuccess;
}

int post(bool send, const void* buf, size_t count, int type, int peer, void* comm, cudaStream_t stream) {
  auto* c = static_cast<Comm*>(comm);
  if (!c || peer < 0 || peer >= c->clique->nranks || typeBytes(type) == 0 || (count && !buf)) return kInvalidArgument;
  tOps.push_back(Op{send, const_cast<void*>(buf), count * typeBytes(type), peer, c, stream});
  if (tDepth > 0) return kSuccess;
  std::vector<Op> ops;
  ops.swap(tOps);
  return run(ops);
}

}  // namespace

// Each function under NCCL's name and its profiling name (what ccl resolves).
#define STANDIN(ret, name, params, args)                                                     \
  extern "C" __attribute__((visibility("default"))) ret p##name params;                      \
  extern "C" __attribute__((visibility("default"))) ret name params { return p##name args; } \
  extern "C" ret p##name params

STANDIN(int, ncclGetVersion, (int* version), (version)) {
  if (!version) return kInvalidArgument;
  *version = 22800;  // the NCCL whose interface it has
  return kSuccess;
}

STANDIN(int, ncclGetUniqueId, (UniqueId * id), (id)) {
  if (!id) return kInvalidArgument;
  std::random_device rd;
  for (char& b : id->bytes) b = static_cast<char>(rd());
  return kSuccess;
}

STANDIN(int, ncclCommInitRank, (void** comm, int nranks, UniqueId id, int rank), (comm, nranks, id, rank)) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return kInvalidArgument;
  std::shared_ptr<Clique> c;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto& slot = gCliques[std::string(id.bytes, sizeof(id.bytes))];
    if (!slot) slot = std::make_shared<Clique>(nranks);
    c = slot;
  }
  if (c->nranks != nranks) return kInvalidUsage;
  std::unique_lock<std::mutex> lock(c->mutex);
  ++c->joined;
  c->cv.notify_all();
  if (int r = await(*c, lock, [&] { return c->joined >= c->nranks; }); r) return r;
  auto* out = new Comm;
  out->clique = c;
  out->rank = rank;
  *comm = out;
  return kSuccess;
}

STANDIN(int, ncclCommDestroy, (void* comm), (comm)) {
  delete static_cast<Comm*>(comm);
  return kSuccess;
}

STANDIN(int, ncclCommAbort, (void* comm), (comm)) {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return kSuccess;
  {
    std::lock_guard<std::mutex> lock(c->clique->mutex);
    c->clique->aborted = true;
    c->clique->cv.notify_all();
  }
  delete c;
  return kSuccess;
}

STANDIN(int, ncclCommGetAsyncError, (void* comm, int* result), (comm, result)) {
  auto* c = static_cast<Comm*>(comm);
  if (!c || !result) return kInvalidArgument;
  std::lock_guard<std::mutex> lock(c->clique->mutex);
  *result = c->clique->aborted ? kRemote : c->error.load();
  return kSuccess;
}

STANDIN(int, ncclGroupStart, (), ()) {
  ++tDepth;
  return kSuccess;
}

STANDIN(int, ncclGroupEnd, (), ()) {
  if (tDepth == 0) return kInvalidUsage;
  if (--tDepth > 0) return kSuccess;
  std::vector<Op> ops;
  ops.swap(tOps);
  return run(ops);
}

STANDIN(int, ncclSend, (const void* buf, size_t count, int type, int peer, void* comm, cudaStream_t stream),
        (buf, count, type, peer, comm, stream)) {
  return post(true, buf, count, type, peer, comm, stream);
}

STANDIN(int, ncclRecv, (void* buf, size_t count, int type, int peer, void* comm, cudaStream_t stream),
        (buf, count, type, peer, comm, stream)) {
  return post(false, buf, count, type, peer, comm, stream);
}

STANDIN(const char*, ncclGetErrorString, (int result), (result)) {
  switch (result) {
    case kSuccess:
      return "no error (stand-in)";
    case kUnhandledCuda:
      return "unhandled cuda error (stand-in)";
    case kSystem:
      return "a peer did not come within a minute (stand-in)";
    case kInvalidArgument:
      return "invalid argument (stand-in)";
    case kInvalidUsage:
      return "invalid usage: sizes of a send and its receive differ (stand-in)";
    case kRemote:
      return "the communicator was aborted (stand-in)";
    default:
      return "unknown result (stand-in)";
  }
}

STANDIN(const char*, ncclGetLastError, (void* comm), (comm)) {
  (void)comm;
  return "";
}
