// SPDX-License-Identifier: BSD-3-Clause
// The NCCL transport: device-memory bytes between the ranks of a ccl communicator, moved by
// a real NVIDIA NCCL communicator made under it. Its unique id travels over ccl's bootstrap;
// a group of sends and receives becomes ncclGroupStart, one ncclSend/ncclRecv each (bytes as
// ncclUint8), ncclGroupEnd, all on the caller's CUDA stream. NCCL matches the messages
// between one pair in the order they are posted and has no tags: the stream executor's wave
// schedule gives both ends the same order.
//
// The functions come from a table: loaded from CCL_NCCL_LIBRARY with RTLD_LOCAL (never
// ccl's own NCCL face, which carries a note that tells it apart), handed in by the NCCL face
// (the real library it already found), or recorded by a test's fake, so the call sequence
// is checked without a GPU. The handles are opaque here: this layer includes neither CUDA's
// nor NCCL's headers; the types below follow NCCL's ABI.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "transport/bootstrap/bootstrap.h"

namespace ccl::transport::nccl {

// NCCL's ABI, as far as this transport uses it.
struct UniqueId {
  char internal[128];
};
using Comm = void*;             // ncclComm_t
using Stream = void*;           // cudaStream_t
constexpr int kSuccess = 0;     // ncclSuccess
constexpr int kInProgress = 7;  // ncclInProgress
constexpr int kUint8 = 1;       // ncclUint8

// The real NCCL's functions the transport calls (their C signatures, handles opaque).
struct Functions {
  int (*getUniqueId)(UniqueId* id) = nullptr;
  int (*commInitRank)(Comm* comm, int nranks, UniqueId id, int rank) = nullptr;
  int (*commDestroy)(Comm comm) = nullptr;
  int (*commAbort)(Comm comm) = nullptr;
  int (*commGetAsyncError)(Comm comm, int* result) = nullptr;
  int (*groupStart)() = nullptr;
  int (*groupEnd)() = nullptr;
  int (*send)(const void* buf, size_t count, int type, int peer, Comm comm, Stream stream) = nullptr;
  int (*recv)(void* buf, size_t count, int type, int peer, Comm comm, Stream stream) = nullptr;
  const char* (*getErrorString)(int result) = nullptr;
  std::string library;  // where they came from, for messages
};

// Loads the functions from the library at `path` (dlopen, RTLD_LOCAL). Throws
// Error(cclSystemError) when it cannot be loaded or lacks one, and Error(cclInvalidUsage)
// when it is a copy of ccl's NCCL face (its calls would come back to ccl).
Functions load(const std::string& path);

// One send or receive of a group.
struct Op {
  bool send = false;
  int peer = -1;
  void* buf = nullptr;
  size_t bytes = 0;
};

class Transport {
 public:
  // Collective over the bootstrap's ranks: rank 0 makes the unique id, the bootstrap
  // broadcasts it, every rank makes its NCCL communicator. Throws ccl::Error naming NCCL's
  // error string when NCCL fails.
  Transport(const Functions& fn, bootstrap::Bootstrap& bs);
  // Borrows an NCCL communicator made elsewhere (the NCCL face's), which it never destroys.
  // Needs only the table's group, send, receive, error and abort functions.
  Transport(const Functions& fn, Comm existing, int rank, int size);
  ~Transport();  // destroys an NCCL communicator it made (aborts it after abort())
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Enqueues one group on `stream`: every op is posted together and completes together.
  // Ops with one peer match that peer's ops in order. Returns once enqueued (NCCL's
  // semantics; on a non-blocking communicator it waits out ncclInProgress, so the transfers
  // are on the stream before anything the caller records next); failures found while
  // enqueuing throw, later ones show in asyncError().
  void group(std::span<const Op> ops, Stream stream);

  // NCCL's asynchronous error of the communicator (cclSuccess while none), with its text.
  int asyncError(std::string* message) const;
  // Any thread: aborts the NCCL communicator, so kernels waiting on peers return.
  void abort();

 private:
  void check(int result, const char* what) const;
  // After ncclGroupEnd said ncclInProgress: polls the communicator until its transfers are
  // enqueued; throws for an asynchronous error or an abort.
  void awaitEnqueued() const;

  Functions fn_;
  Comm comm_ = nullptr;
  bool owned_ = true;
  int rank_ = 0, size_ = 1;
  std::atomic<bool> aborted_{false};
};

}  // namespace ccl::transport::nccl
