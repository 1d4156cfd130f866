// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/comm.h"

#include <cstring>
#include <thread>

#include "api/comm.h"
#include "api/group.h"
#include "common/cuda_probe.h"
#include "common/error.h"
#include "common/log.h"
#include "nccl/face_error.h"
#include "nccl/group.h"
#include "nccl/policy.h"
#include "nccl/real_nccl.h"
#include "nccl/stats_summary.h"

namespace ccl::nccl {
namespace {

// The real library's functions, for ccl's communicator to borrow the real one with. No abort:
// the face aborts the real communicator itself, before ccl's (destroy below).
transport::nccl::Functions realFunctions() {
  transport::nccl::Functions f;
  f.library = real::describe();
  f.commGetAsyncError = reinterpret_cast<decltype(f.commGetAsyncError)>(real::symbol("pncclCommGetAsyncError"));
  f.groupStart = reinterpret_cast<decltype(f.groupStart)>(real::symbol("pncclGroupStart"));
  f.groupEnd = reinterpret_cast<decltype(f.groupEnd)>(real::symbol("pncclGroupEnd"));
  f.send = reinterpret_cast<decltype(f.send)>(real::symbol("pncclSend"));
  f.recv = reinterpret_cast<decltype(f.recv)>(real::symbol("pncclRecv"));
  f.getErrorString = reinterpret_cast<decltype(f.getErrorString)>(real::symbol("pncclGetErrorString"));
  return f;
}

// Rank 0 decides whether a real NCCL communicator is made and hands out its id over the
// ccl communicator, so every rank takes the same decision.
struct RealIdMessage {
  char make;
  ncclUniqueId id;
};

// Makes the real communicator on `device`. One that cannot be made (two ranks on one GPU,
// which NVIDIA's NCCL refuses; a library that fails its init) is not fatal: every rank learns
// whether all ranks made theirs, and if one did not, all go on without, as the face does
// where NVIDIA's library is absent (device buffers then go to ccl's own device path).
void makeRealComm(ncclComm& c, int device) {
  RealIdMessage msg{};
  if (c.rank == 0) {
    if (!cuda::deviceAvailable())
      c.realWhy = "no CUDA device";
    else if (!real::available())
      c.realWhy = real::describe();
    else
      msg.make = CCL_REAL(ncclGetUniqueId)(&msg.id) == ncclSuccess;
  }
  cclCheck(cclBroadcast(&msg, &msg, sizeof(msg), cclUint8, 0, c.ccl, nullptr), "exchanging the real NCCL id");
  if (!msg.make) {
    if (c.realWhy.empty()) c.realWhy = "rank 0 made no real NCCL communicator";
    return;
  }
  cuda::setDevice(device);
  // The caller's config goes to the real communicator: what NCCL does with it is NCCL's. A
  // library without ncclCommInitRankConfig (before 2.14) gets the plain init: the config
  // tunes only NVIDIA's kernels.
  std::vector<unsigned char> config = realConfig(c.config);
  if (!real::has("pncclCommInitRankConfig")) config.clear();
  const ncclResult_t r = config.empty()
                             ? CCL_REAL(ncclCommInitRank)(&c.real, c.nranks, msg.id, c.rank)
                             : CCL_REAL(ncclCommInitRankConfig)(&c.real, c.nranks, msg.id, c.rank,
                                                                reinterpret_cast<ncclConfig_t*>(config.data()));
  std::string why;
  if (r != ncclSuccess) {
    const char* last = CCL_REAL(ncclGetLastError)(nullptr);
    why = std::string("NVIDIA's ncclCommInitRank failed (") + CCL_REAL(ncclGetErrorString)(r) + ")" +
          (last && *last ? std::string(": ") + last : std::string());
    c.real = nullptr;
  }
  int made = r == ncclSuccess ? 1 : 0;
  cclCheck(cclAllReduce(&made, &made, 1, cclInt32, cclMin, c.ccl, nullptr), "agreeing on the real NCCL communicator");
  if (made) {
    // ccl's communicator moves its device calls' bytes over the real one: one communicator
    // of NVIDIA's per NCCL communicator, whatever ccl runs on it.
    api::borrowDeviceNccl(c.ccl,
                          std::make_unique<transport::nccl::Transport>(realFunctions(), c.real, c.rank, c.nranks));
    return;
  }
  if (c.real) {
    CCL_REAL(ncclCommDestroy)(c.real);
    c.real = nullptr;
  }
  c.realWhy = why.empty() ? "another rank could not make its real NCCL communicator" : why;
  // One WARN per communicator (rank 0's), each rank's own reason at INFO.
  if (c.rank == 0)
    CCL_WARN(
        "NCCL face: the communicator goes on without NVIDIA's NCCL (rank 0: %s); device buffers go to ccl's "
        "device path",
        c.realWhy.c_str());
  else
    CCL_INFO("NCCL face: rank %d goes on without NVIDIA's NCCL: %s", c.rank, c.realWhy.c_str());
}

// Drops one reference (ncclComm::refs); the last frees the wrapper.
void release(ncclComm* comm) {
  if (comm->refs.fetch_sub(1) != 1) return;
  api::eraseComm(comm);
  delete comm;
}

// Closes both communicators of a created wrapper (destroy, or an abort that came while it
// was made); returns ccl's result.
cclResult_t teardown(ncclComm& comm, bool abort) {
  const bool closeReal = comm.real && real::available();
  // A call of another thread still running on ccl leaves first. Destroy: ccl's communicator
  // drains its device calls (cclCommDestroy) before the real one they move bytes over goes.
  // Abort: the real communicator is aborted first, so kernels waiting for peers return.
  if (abort && closeReal) {
    const ncclResult_t r = CCL_REAL(ncclCommAbort)(comm.real);
    if (r != ncclSuccess) CCL_WARN("the real NCCL communicator did not abort cleanly (%d)", static_cast<int>(r));
  }
  while (comm.callsInside.load() > 0) std::this_thread::yield();
  // Read before the ccl communicator goes; the wrapper is freed after, so once per comm.
  logStatsSummary(comm.ccl, comm.rank, comm.nranks);
  cclResult_t r = cclSuccess;
  if (comm.ccl) r = abort ? cclCommAbort(comm.ccl) : cclCommDestroy(comm.ccl);
  if (!abort && closeReal) {
    const ncclResult_t d = CCL_REAL(ncclCommDestroy)(comm.real);
    if (d != ncclSuccess) CCL_WARN("the real NCCL communicator did not close cleanly (%d)", static_cast<int>(d));
  }
  return r;
}

void create(ncclComm* c, const std::function<cclComm_t()>& make, int device) {
  try {
    // This thread is new: its current device is 0 until set. ccl's communicator takes the
    // current one as its own, as NVIDIA's takes the caller's.
    cuda::setDevice(device);
    c->ccl = make();
    if (c->ccl) {
      api::aliasComm(c, c->ccl);  // ncclGetLastError(c) finds ccl's asynchronous messages
      cclCheck(cclCommUserRank(c->ccl, &c->rank), "cclCommUserRank");
      cclCheck(cclCommCount(c->ccl, &c->nranks), "cclCommCount");
      makeRealComm(*c, device);
    }
  } catch (const Error& e) {
    c->createResult = static_cast<ncclResult_t>(e.code());
    c->createError = e.what();
  } catch (const std::exception& e) {
    c->createResult = ncclInternalError;
    c->createError = e.what();
  }
}

}  // namespace

ncclComm_t startComm(int nranks, int rank, const FaceConfig& config, std::function<cclComm_t()> make, int device) {
  announcePolicy();  // parse (and log) the policy once, before the first communicator exists
  auto c = std::make_unique<ncclComm>();
  c->nranks = nranks;
  c->rank = rank;
  c->config = config;
  if (device < 0) device = cuda::currentDevice();
  ncclComm* raw = c.get();
  c->creator = std::thread([raw, make = std::move(make), device] {
    create(raw, make, device);
    bool abandoned = false;
    {
      std::lock_guard<std::mutex> lock(raw->stateMutex);
      raw->created.store(true);
      abandoned = raw->abandoned;
    }
    if (abandoned) teardown(*raw, true);  // aborted while it was made: nobody else will
    release(raw);                         // the creator's reference
  });
  return c.release();
}

void waitCreated(ncclComm& comm) {
  std::lock_guard<std::mutex> lock(comm.creatorMutex);
  if (comm.creator.joinable()) comm.creator.join();
}

ncclResult_t finishCreation(ncclComm_t comm, const char* fn) {
  waitCreated(*comm);
  if (comm->createResult != ncclSuccess)
    return recordError(fn, static_cast<cclResult_t>(comm->createResult), comm->createError, false);
  return ncclSuccess;
}

Held hold(ncclComm_t comm) {
  comm->refs.fetch_add(1);
  return Held(comm, release);
}

ncclComm& handle(ncclComm_t comm) {
  CCL_CHECK(comm, cclInvalidArgument, "comm is NULL");
  CCL_CHECK(comm->magic == ncclComm::kMagic, cclInvalidArgument, "comm is not a communicator of this library");
  return *comm;
}

ncclComm& created(ncclComm_t comm) {
  ncclComm& c = handle(comm);
  waitCreated(c);
  CCL_CHECK(c.createResult == ncclSuccess, static_cast<cclResult_t>(c.createResult),
            "the communicator failed to initialise: " + c.createError);
  CCL_CHECK(c.ccl, cclInvalidUsage, "the communicator has no ranks here");
  return c;
}

ncclComm& usable(ncclComm_t comm) {
  ncclComm& c = created(comm);
  CCL_CHECK(!c.revoked.load(), cclInvalidUsage, "the communicator was revoked");
  return c;
}

void destroy(ncclComm_t comm, bool abort) {
  // Before waiting for the creation, which may be the group's own (one thread creating several
  // ranks: only the group's end lets it finish).
  if (abort) {
    group::forget(comm);
    std::unique_lock<std::mutex> state(comm->stateMutex);
    if (!comm->created.load()) {  // given up now; the creator thread finishes the abort
      comm->abandoned = true;
      state.unlock();
      {
        std::lock_guard<std::mutex> lock(comm->creatorMutex);
        if (comm->creator.joinable()) comm->creator.detach();
      }
      comm->magic = 0;
      comm->released.store(true);
      release(comm);
      return;
    }
  } else {
    CCL_CHECK(
        !group::holds(comm), cclInvalidUsage,
        "the communicator has operations or its creation queued in this thread's open group; end the group first");
  }
  waitCreated(*comm);
  if (!abort && comm->ccl)
    CCL_CHECK(!api::groupHasComm(comm->ccl), cclInvalidUsage,
              "the communicator has operations queued in this thread's open group; end the group first");
  comm->magic = 0;
  comm->released.store(true);
  const cclResult_t r = teardown(*comm, abort);
  release(comm);  // the caller's reference: an open group of another thread may hold more
  cclCheck(r, abort ? "cclCommAbort" : "cclCommDestroy");
}

void checkNotSuspended(const ncclComm& comm) {
  CCL_CHECK(!comm.suspended.load(), cclInvalidUsage, "the communicator is suspended; call ncclCommResume first");
}

cclUniqueId toCcl(const ncclUniqueId& id) {
  static_assert(sizeof(cclUniqueId) == sizeof(ncclUniqueId));
  cclUniqueId out;
  std::memcpy(&out, &id, sizeof(out));
  return out;
}

}  // namespace ccl::nccl
