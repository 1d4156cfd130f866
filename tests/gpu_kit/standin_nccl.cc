// SPDX-License-Identifier: BSD-3-Clause
// A stand-in for NVIDIA's NCCL, for the device kit only (test code, not a product): ranks
// that are threads of one process on one GPU, which NVIDIA's NCCL refuses. It has what ccl's
// NCCL transport and link use (unique ids, communicators, groups of sends and receives,
// errors), and the collectives, so that the face's uncompressed calls and nccl-tests with
// thread ranks have a real library to go to. A send records an event on the sender's
// stream; the receive waits for it on the receiver's stream and copies device to device; the
// sender's stream then waits for the receiver's copy (an event the receiver recorded) before
// it may reuse the buffer. A collective is a round of the clique: each rank posts its input
// (and an event after it), computes its own output into scratch from every rank's input
// (standin_reduce.cu), posts an event after that, and copies the scratch to its output once
// every rank has read (so in-place calls are right). Every event is recorded before anyone
// waits for it, so no GPU work waits for a host thread: the host threads meet in
// ncclGroupEnd instead (every send and input of the group is posted before anything waits),
// within a minute, or the call fails.
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

#include "standin_reduce.h"

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

// One collective of the clique: every rank's input and the event after it, then the event
// after each rank's read of them.
struct Round {
  explicit Round(int n) : input(static_cast<size_t>(n)), ready(static_cast<size_t>(n)), read(static_cast<size_t>(n)) {}
  std::vector<const void*> input;
  std::vector<cudaEvent_t> ready, read;
  int posted = 0, readBy = 0, finished = 0;
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
  std::map<uint64_t, Round> rounds;                               // by the collective's number
};

struct Comm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  std::atomic<int> error{kSuccess};
  uint64_t collectives = 0;  // numbers this rank's collectives, in call order (NCCL's rule)
};

// The collectives, as NCCL defines their buffers (count per rank, as each call takes it).
enum Coll { kNone, kAllReduce, kReduce, kReduceScatter, kBroadcast, kAllGather, kAlltoAll, kGather, kScatter };

std::mutex gMutex;
std::map<std::string, std::shared_ptr<Clique>> gCliques;  // by id; kept for the process's life

// A send or receive (coll == kNone: buf, bytes, peer), or a collective (coll: buf is its
// input, out its output, bytes its count in bytes, peer its root).
struct Op {
  bool send;
  void* buf;
  size_t bytes;
  int peer;
  Comm* comm;
  cudaStream_t stream;
  Coll coll = kNone;
  void* out = nullptr;
  int type = 0, redop = 0;
  uint64_t round = 0;
  void* scratch = nullptr;
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

// A new event recorded on `stream` into *e.
int recordEvent(cudaStream_t stream, cudaEvent_t* e) {
  if (int r = cudaResult(cudaEventCreateWithFlags(e, cudaEventDisableTiming)); r) return r;
  return cudaResult(cudaEventRecord(*e, stream));
}

// Sends and receives.
int exchange(const std::vector<Op>& ops) {
  // Every send first, so that two ranks receiving from each other both find the other's.
  for (const Op& op : ops) {
    if (op.coll != kNone || !op.send) continue;
    Clique& c = *op.comm->clique;
    cudaEvent_t e = nullptr;
    if (int r = recordEvent(op.stream, &e); r) return r;
    std::lock_guard<std::mutex> lock(c.mutex);
    c.sends[{op.comm->rank, op.peer}].push_back(Posted{op.buf, op.bytes, e});
    c.cv.notify_all();
  }
  for (const Op& op : ops) {
    if (op.coll != kNone || op.send) continue;
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
    if (int r = recordEvent(op.stream, &done); r) return r;
    cudaEventDestroy(s.ready);  // the wait enqueued above keeps what it waits for
    std::lock_guard<std::mutex> lock(c.mutex);
    c.copied[{op.peer, op.comm->rank}].push_back(done);
    c.cv.notify_all();
  }
  // A send's buffer is the sender's again once its receiver's copy has run.
  for (const Op& op : ops) {
    if (op.coll != kNone || !op.send) continue;
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

// Bytes of rank r's output of `op` (none at a non-root of reduce and gather).
size_t outputBytes(const Op& op, int n, int r) {
  switch (op.coll) {
    case kReduce:
      return r == op.peer ? op.bytes : 0;
    case kGather:
      return r == op.peer ? op.bytes * static_cast<size_t>(n) : 0;
    case kAllGather:
    case kAlltoAll:
      return op.bytes * static_cast<size_t>(n);
    default:
      return op.bytes;
  }
}

// Rank `r`'s output of round `rd` into op.scratch, on op.stream, once every input is there:
// one reduction of every input at an offset, or copies of whole inputs or their chunks.
int compute(const Op& op, const Round& rd, int n, int r) {
  const size_t es = typeBytes(op.type), count = op.bytes / es;
  auto at = [&](int j, size_t offset) { return static_cast<const char*>(rd.input[static_cast<size_t>(j)]) + offset; };
  auto copy = [&](size_t outOffset, const char* from) {
    return cudaResult(cudaMemcpyAsync(static_cast<char*>(op.scratch) + outOffset, from, op.bytes,
                                      cudaMemcpyDeviceToDevice, op.stream));
  };
  switch (op.coll) {
    case kAllReduce:
    case kReduce:
    case kReduceScatter: {
      const size_t offset = op.coll == kReduceScatter ? static_cast<size_t>(r) * op.bytes : 0;
      std::vector<const void*> sources(static_cast<size_t>(n));
      for (int j = 0; j < n; ++j) sources[static_cast<size_t>(j)] = at(j, offset);
      return cudaResult(standin::reduce(sources.data(), n, op.scratch, count, op.type, op.redop, op.stream));
    }
    case kBroadcast:
      return copy(0, at(op.peer, 0));
    case kScatter:
      return copy(0, at(op.peer, static_cast<size_t>(r) * op.bytes));
    case kAllGather:
    case kGather:
      for (int j = 0; j < n; ++j)
        if (int e = copy(static_cast<size_t>(j) * op.bytes, at(j, 0)); e) return e;
      return kSuccess;
    case kAlltoAll:
      for (int j = 0; j < n; ++j)
        if (int e = copy(static_cast<size_t>(j) * op.bytes, at(j, static_cast<size_t>(r) * op.bytes)); e) return e;
      return kSuccess;
    default:
      return kInvalidArgument;
  }
}

// Waits (on the host) until every rank has reached `done` in op's round, then makes op's
// stream wait for every rank's event of `events`; the round in *round.
int awaitRound(const Op& op, int Round::*done, std::vector<cudaEvent_t> Round::*events, Round** round) {
  Clique& c = *op.comm->clique;
  {
    std::unique_lock<std::mutex> lock(c.mutex);
    *round = &c.rounds.at(op.round);  // a std::map's elements stay where they are
    if (int r = await(c, lock, [&] { return (*round)->*done == c.nranks; }); r) return r;
  }
  for (cudaEvent_t e : (*round)->*events)
    if (int r = cudaResult(cudaStreamWaitEvent(op.stream, e, 0)); r) return r;
  return kSuccess;
}

// Collectives, in three passes over the group (each rank's input posted before anyone
// waits, so one thread may drive several ranks): post the inputs; compute each output into
// scratch once every input is posted; copy the scratch out once every rank has read.
int collectives(std::vector<Op>& ops) {
  for (Op& op : ops) {
    if (op.coll == kNone) continue;
    Clique& c = *op.comm->clique;
    cudaEvent_t e = nullptr;
    if (int r = recordEvent(op.stream, &e); r) return r;
    op.round = op.comm->collectives++;
    std::lock_guard<std::mutex> lock(c.mutex);
    Round& rd = c.rounds.try_emplace(op.round, c.nranks).first->second;
    rd.input[static_cast<size_t>(op.comm->rank)] = op.buf;
    rd.ready[static_cast<size_t>(op.comm->rank)] = e;
    ++rd.posted;
    c.cv.notify_all();
  }
  for (Op& op : ops) {
    if (op.coll == kNone) continue;
    Clique& c = *op.comm->clique;
    const int n = c.nranks, me = op.comm->rank;
    Round* rd = nullptr;
    if (int r = awaitRound(op, &Round::posted, &Round::ready, &rd); r) return r;
    const size_t bytes = outputBytes(op, n, me);
    if (bytes > 0) {
      if (int r = cudaResult(cudaMallocAsync(&op.scratch, bytes, op.stream)); r) return r;
      if (int r = compute(op, *rd, n, me); r) return r;
    }
    cudaEvent_t e = nullptr;
    if (int r = recordEvent(op.stream, &e); r) return r;
    std::lock_guard<std::mutex> lock(c.mutex);
    rd->read[static_cast<size_t>(me)] = e;
    ++rd->readBy;
    c.cv.notify_all();
  }
  for (Op& op : ops) {
    if (op.coll == kNone) continue;
    Clique& c = *op.comm->clique;
    const int n = c.nranks, me = op.comm->rank;
    Round* rd = nullptr;
    if (int r = awaitRound(op, &Round::readBy, &Round::read, &rd); r) return r;
    if (op.scratch) {
      if (int r = cudaResult(
              cudaMemcpyAsync(op.out, op.scratch, outputBytes(op, n, me), cudaMemcpyDeviceToDevice, op.stream));
          r)
        return r;
      if (int r = cudaResult(cudaFreeAsync(op.scratch, op.stream)); r) return r;
    }
    // The last rank through has seen every wait enqueued: the events may go (a wait already
    // enqueued keeps what it waits for).
    std::lock_guard<std::mutex> lock(c.mutex);
    if (++rd->finished == n) {
      for (cudaEvent_t e : rd->ready) cudaEventDestroy(e);
      for (cudaEvent_t e : rd->read) cudaEventDestroy(e);
      c.rounds.erase(op.round);
    }
  }
  return kSuccess;
}

int run(std::vector<Op>& ops) {
  if (int r = exchange(ops); r) return r;
  return collectives(ops);
}

// Queues `op` in the open group, or runs it alone.
int enqueue(const Op& op) {
  tOps.push_back(op);
  if (tDepth > 0) return kSuccess;
  std::vector<Op> ops;
  ops.swap(tOps);
  return run(ops);
}

int post(bool send, const void* buf, size_t count, int type, int peer, void* comm, cudaStream_t stream) {
  auto* c = static_cast<Comm*>(comm);
  if (!c || peer < 0 || peer >= c->clique->nranks || typeBytes(type) == 0 || (count && !buf)) return kInvalidArgument;
  return enqueue(Op{send, const_cast<void*>(buf), count * typeBytes(type), peer, c, stream});
}

// A collective of `count` elements per rank (its input's or its output's, as NCCL counts it).
int collective(Coll kind, const void* in, void* out, size_t count, int type, int redop, int root, void* comm,
               cudaStream_t stream) {
  auto* c = static_cast<Comm*>(comm);
  if (!c || typeBytes(type) == 0 || root < 0 || root >= c->clique->nranks || redop < 0 || redop > 4)
    return kInvalidArgument;
  if (c->clique->nranks > standin::kMaxRanks) return kInvalidUsage;
  if (count == 0) return kSuccess;  // as NCCL: nothing to do, no round
  Op op{false, const_cast<void*>(in), count * typeBytes(type), root, c, stream};
  op.coll = kind;
  op.out = out;
  op.type = type;
  op.redop = redop;
  return enqueue(op);
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

STANDIN(int, ncclAllReduce,
        (const void* in, void* out, size_t count, int type, int op, void* comm, cudaStream_t stream),
        (in, out, count, type, op, comm, stream)) {
  return collective(kAllReduce, in, out, count, type, op, 0, comm, stream);
}

STANDIN(int, ncclReduce,
        (const void* in, void* out, size_t count, int type, int op, int root, void* comm, cudaStream_t stream),
        (in, out, count, type, op, root, comm, stream)) {
  return collective(kReduce, in, out, count, type, op, root, comm, stream);
}

STANDIN(int, ncclReduceScatter,
        (const void* in, void* out, size_t recvCount, int type, int op, void* comm, cudaStream_t stream),
        (in, out, recvCount, type, op, comm, stream)) {
  return collective(kReduceScatter, in, out, recvCount, type, op, 0, comm, stream);
}

STANDIN(int, ncclBroadcast,
        (const void* in, void* out, size_t count, int type, int root, void* comm, cudaStream_t stream),
        (in, out, count, type, root, comm, stream)) {
  return collective(kBroadcast, in, out, count, type, 0, root, comm, stream);
}

STANDIN(int, ncclAllGather, (const void* in, void* out, size_t sendCount, int type, void* comm, cudaStream_t stream),
        (in, out, sendCount, type, comm, stream)) {
  return collective(kAllGather, in, out, sendCount, type, 0, 0, comm, stream);
}

STANDIN(int, ncclAlltoAll, (const void* in, void* out, size_t count, int type, void* comm, cudaStream_t stream),
        (in, out, count, type, comm, stream)) {
  return collective(kAlltoAll, in, out, count, type, 0, 0, comm, stream);
}

STANDIN(int, ncclGather,
        (const void* in, void* out, size_t sendCount, int type, int root, void* comm, cudaStream_t stream),
        (in, out, sendCount, type, root, comm, stream)) {
  return collective(kGather, in, out, sendCount, type, 0, root, comm, stream);
}

STANDIN(int, ncclScatter,
        (const void* in, void* out, size_t recvCount, int type, int root, void* comm, cudaStream_t stream),
        (in, out, recvCount, type, root, comm, stream)) {
  return collective(kScatter, in, out, recvCount, type, 0, root, comm, stream);
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
