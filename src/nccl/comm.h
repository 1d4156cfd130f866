// SPDX-License-Identifier: BSD-3-Clause
// The communicator handed to NCCL callers: a ccl communicator for host buffers and, when a
// CUDA device and NVIDIA's NCCL are present, a real NCCL communicator for device buffers.
// Creation runs on a thread of its own so that non-blocking configs and inits inside a group
// (one thread creating several ranks) behave as in NCCL.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "nccl/config_compat.h"
#include "nccl/nccl_abi.h"
#include "nccl/premulsum.h"

struct ncclComm {
  static constexpr uint64_t kMagic = 0x63636c6e63636c31ull;  // "cclnccl1"
  uint64_t magic = kMagic;
  int rank = 0;
  int nranks = 0;
  ccl::nccl::FaceConfig config;

  cclComm_t ccl = nullptr;    // host buffers
  ncclComm_t real = nullptr;  // device buffers; NULL without a device or real NCCL
  std::string realWhy;        // why `real` is NULL

  // Creation: the thread, whether it finished, and its outcome. `creatorMutex` serialises
  // joining, since several threads may wait for the same communicator.
  std::mutex creatorMutex;
  std::thread creator;
  std::atomic<bool> created{false};
  // An abort before creation ended gives the communicator up at once (NCCL's abort ends a
  // hanging non-blocking init; ccl's init is not interrupted): the creator thread, which
  // holds a reference (refs), aborts what it made when creation ends, and frees it.
  // `abandoned` and the end of creation are decided under `stateMutex`.
  std::mutex stateMutex;
  bool abandoned = false;
  ncclResult_t createResult = ncclSuccess;
  std::string createError;

  std::atomic<bool> revoked{false};
  std::atomic<bool> finalized{false};  // ncclCommFinalize ran (a second one is refused)
  // ncclCommSuspend: operations are refused until ncclCommResume.
  std::atomic<bool> suspended{false};
  // An id from ncclCommGetUniqueId that no ncclCommGrow has consumed yet (NCCL allows one).
  std::atomic<bool> growIdPending{false};
  ccl::nccl::PreMulSumTable ops;

  // Calls inside the face now that run on ccl's communicator after a group's end or on the
  // caller's stream (collectives.cc): destroy and abort wait for them to leave before
  // freeing what they use (an abort comes from another thread).
  std::atomic<int> callsInside{0};

  // The caller's handle, the creator thread's until creation ends, plus one per entry of an
  // open group that names the communicator (its creation, a compressed device call kept for
  // the end), whatever the thread: the last to go frees the wrapper (hold's deleter), so a
  // destroy or abort from another thread never frees what that thread's group end reads.
  std::atomic<int> refs{2};
  // The caller's handle is gone (destroy or abort): a group's entries of it are dropped at its
  // end. Set before destroy waits for callsInside, and read by a group's end after it counts
  // itself in there, so one of the two always sees the other.
  std::atomic<bool> released{false};

  std::mutex regMutex;  // registrations and windows
  std::vector<std::unique_ptr<struct ccl_nccl_Registration>> registrations;
};

// A buffer registration or window: remembered so deregistration can validate the handle.
// A window is also listed process-wide under its handle while it lives, since some window
// functions take no communicator.
struct ccl_nccl_Registration {
  void* buff = nullptr;
  size_t size = 0;
  void* realHandle = nullptr;  // the real NCCL's handle for device memory
  bool window = false;
  ~ccl_nccl_Registration();
};

namespace ccl::nccl {

// A reference to a communicator held by an open group (ncclComm::refs).
using Held = std::shared_ptr<ncclComm>;
Held hold(ncclComm_t comm);

// Counts a call inside the face while it runs on ccl (ncclComm::callsInside).
struct Inside {
  explicit Inside(ncclComm& c) : comm(c) { comm.callsInside.fetch_add(1); }
  ~Inside() { comm.callsInside.fetch_sub(1); }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;
  ncclComm& comm;
};

// Creates the wrapper and starts `make` (which fills comm->ccl) on the creator thread; the
// real NCCL communicator is added there too when possible, on `device` (-1: the caller's
// current device). `nranks` and `rank` may be 0 when only `make` knows them. Returns at once.
ncclComm_t startComm(int nranks, int rank, const FaceConfig& config, std::function<cclComm_t()> make, int device = -1);

// Waits for the creator thread to end (any thread may call it, any number of times).
void waitCreated(ncclComm& comm);

// Waits for creation; returns its result (recording its message as the last error).
ncclResult_t finishCreation(ncclComm_t comm, const char* fn);

// Validates the handle (not NULL, ours). Throws Error(cclInvalidArgument) otherwise.
ncclComm& handle(ncclComm_t comm);

// A communicator created successfully, with ranks here: what a revoked one still is, which
// may be queried, split, shrunk or destroyed (nccl.h on ncclCommRevoke).
ncclComm& created(ncclComm_t comm);

// A communicator that may take new operations: created, and not revoked.
ncclComm& usable(ncclComm_t comm);

// Frees the wrapper and both communicators; `abort` aborts instead of destroying. A destroy
// that this thread's open group still needs (an operation of it queued, or its creation) is
// refused with cclInvalidUsage before anything is freed: the handle stays valid. An abort
// drops what the group holds of it. What another thread's open group holds of it is dropped
// at that group's end, which frees the wrapper then. An abort while creation still runs
// returns at once: the creator thread aborts what it makes when creation ends.
void destroy(ncclComm_t comm, bool abort);

// Converts between the two 128-byte ids.
cclUniqueId toCcl(const ncclUniqueId& id);

// A live window of any communicator, found by the handle the caller holds.
struct WindowInfo {
  bool device = false;  // registered with the real NCCL (the handle is the real one)
  void* buff = nullptr;
};
// Throws Error(cclInvalidArgument) when `handle` is NULL or not a live window of this library.
WindowInfo findWindow(const void* handle);

// Throws Error(cclInvalidUsage) while `comm` is suspended: it takes no operations then.
void checkNotSuspended(const ncclComm& comm);

}  // namespace ccl::nccl
