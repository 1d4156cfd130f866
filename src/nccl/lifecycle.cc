// SPDX-License-Identifier: BSD-3-Clause
// Communicator lifecycle of the NCCL face: ids, init (blocking, non-blocking, inside a
// group), split, shrink, grow, finalize, destroy, abort, revoke and queries.
#include <algorithm>
#include <cstring>
#include <vector>

#include "api/comm.h"
#include "api/group.h"
#include "common/error.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/group.h"
#include "nccl/real_nccl.h"

namespace ccl::nccl {
namespace {

// The ccl config of a face communicator; it points into `fc`, which must outlive its use.
cclConfig_t cclConfigFor(const FaceConfig& fc) {
  cclConfig_t cfg = CCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;  // the face runs creation on its own thread
  cfg.commName = fc.commName.empty() ? nullptr : fc.commName.c_str();
  return cfg;
}

// Joins `id` as `rank`; the name is copied into the lambda so it outlives the caller's config.
std::function<cclComm_t()> joinId(int nranks, cclUniqueId id, int rank, const FaceConfig& fc) {
  return [=] {
    cclConfig_t cfg = cclConfigFor(fc);
    cclComm_t out = nullptr;
    cclCheck(cclCommInitRankConfig(&out, nranks, id, rank, &cfg), "cclCommInitRankConfig");
    return out;
  };
}

// A call that makes a communicator first sets the caller's handle to NULL, as NVIDIA's NCCL
// does on a failure: a handle is written only where one is delivered, so a caller that
// destroys or aborts what it holds after a failure passes NULL (which does nothing), never a
// stale handle of an earlier communicator (a double destroy) nor a wrapper the failed call
// freed (a blocking init whose creation failed aborts what it made).
void clearHandle(ncclComm_t* out) {
  if (out) *out = nullptr;
}

// Hands a started communicator to the caller: at once inside a group (awaited at its end;
// a creation that fails there leaves a handle the caller must destroy or abort) and in
// non-blocking mode (ncclInProgress until ncclCommGetAsyncError says otherwise; the same);
// otherwise after creation, and only if it succeeded (*out stays NULL then).
ncclResult_t deliver(const char* fn, ncclComm_t c, ncclComm_t* out) {
  if (group::active()) {
    group::addCreation(c);
    *out = c;
    return ncclSuccess;
  }
  if (!c->config.blocking) {
    *out = c;
    return c->created.load() && c->createResult == ncclSuccess ? ncclSuccess : ncclInProgress;
  }
  ncclResult_t r = finishCreation(c, fn);
  if (r != ncclSuccess) {
    destroy(c, true);
    return r;
  }
  *out = c;
  return ncclSuccess;
}

ncclResult_t initRank(const char* fn, ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank,
                      const ncclConfig_t* config) {
  clearHandle(comm);
  ncclComm_t c = nullptr;
  ncclResult_t r = faceGuard(fn, [&] {
    CCL_CHECK(comm, cclInvalidArgument, "comm is NULL");
    CCL_CHECK(nranks > 0, cclInvalidArgument, "nranks " + std::to_string(nranks) + " must be positive");
    CCL_CHECK(rank >= 0 && rank < nranks, cclInvalidArgument,
              "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
    FaceConfig fc = readConfig(config);
    c = startComm(nranks, rank, fc, joinId(nranks, toCcl(id), rank, fc));
  });
  return r == ncclSuccess ? deliver(fn, c, comm) : r;
}

// The survivors make their communicator with ccl's shrink, which needs no message over the
// parent (a lost rank may have broken it).
cclComm_t shrinkJoin(cclComm_t parent, std::vector<int> exclude, int flags, FaceConfig fc) {
  cclConfig_t cfg = cclConfigFor(fc);
  cclComm_t out = nullptr;
  cclCheck(cclCommShrink(parent, exclude.data(), static_cast<int>(exclude.size()), &out, &cfg, flags), "cclCommShrink");
  return out;
}

// What an existing rank brings to a grow: the id, if it is the root.
struct GrowOffer {
  char hasId;
  cclUniqueId id;
};

// The existing ranks learn the id from the root over the parent: every one offers what it
// holds (an all-gather, so no rank needs to know which is the root), and all take the same
// decision. Then they join the new communicator with the ranks they have, and the new ranks
// with theirs.
cclComm_t growJoin(cclComm_t parent, int parentRanks, int myRank, GrowOffer mine, int nRanks, FaceConfig fc) {
  std::vector<GrowOffer> all(parentRanks);
  cclCheck(cclAllGather(&mine, all.data(), sizeof(GrowOffer), cclUint8, parent, nullptr),
           "exchanging the grown communicator's id");
  const GrowOffer* root = nullptr;
  for (const GrowOffer& o : all) {
    if (!o.hasId) continue;
    if (!root) root = &o;
    CCL_CHECK(std::memcmp(&root->id, &o.id, sizeof(o.id)) == 0, cclInvalidArgument,
              "existing ranks passed different ids; only the root passes the id");
  }
  CCL_CHECK(root, cclInvalidArgument,
            "no existing rank passed the id: the root (the rank that called ncclCommGetUniqueId) passes it");
  return joinId(nRanks, root->id, myRank, fc)();
}

}  // namespace
}  // namespace ccl::nccl

using namespace ccl;
using namespace ccl::nccl;

extern "C" {

ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclGetUniqueId, uniqueId);
  return faceGuard("ncclGetUniqueId", [&] {
    CCL_CHECK(uniqueId, cclInvalidArgument, "uniqueId is NULL");
    cclUniqueId id;
    cclCheck(cclGetUniqueId(&id), "cclGetUniqueId");
    std::memcpy(uniqueId, &id, sizeof(id));
  });
}

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  return initRank("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

// Every rank holds all nId ids; ccl's bootstrap needs one rendezvous, so the first serves.
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config) {
  clearHandle(newcomm);
  if (nId < 1 || nId > nranks || !commIds)
    return recordError(
        "ncclCommInitRankScalable", cclInvalidArgument,
        "nId " + std::to_string(nId) + ": commIds must hold between 1 and nranks (" + std::to_string(nranks) + ") ids");
  return initRank("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config);
}

ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  std::vector<ncclComm_t> made;
  ncclResult_t r = faceGuard("ncclCommInitAll", [&] {
    CCL_CHECK(comms, cclInvalidArgument, "comms is NULL");
    CCL_CHECK(ndev > 0, cclInvalidArgument, "ndev " + std::to_string(ndev) + " must be positive");
    cclUniqueId id;
    cclCheck(cclGetUniqueId(&id), "cclGetUniqueId");
    FaceConfig fc;
    for (int rank = 0; rank < ndev; ++rank)
      made.push_back(startComm(ndev, rank, fc, joinId(ndev, id, rank, fc), devlist ? devlist[rank] : -1));
  });
  for (ncclComm_t c : made) {
    ncclResult_t cr = finishCreation(c, "ncclCommInitAll");
    if (r == ncclSuccess) r = cr;
  }
  if (r != ncclSuccess) {
    for (ncclComm_t c : made) faceGuard("ncclCommInitAll", [&] { destroy(c, true); });
    if (comms && ndev > 0) std::fill(comms, comms + ndev, nullptr);  // as clearHandle
    return r;
  }
  std::copy(made.begin(), made.end(), comms);
  return ncclSuccess;
}

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  clearHandle(newcomm);
  ncclComm_t c = nullptr;
  ncclResult_t r = faceGuard("ncclCommSplit", [&] {
    ncclComm& parent = created(comm);  // a revoked communicator may be split (nccl.h)
    CCL_CHECK(newcomm, cclInvalidArgument, "newcomm is NULL");
    CCL_CHECK(color >= 0 || color == NCCL_SPLIT_NOCOLOR, cclInvalidArgument,
              "color " + std::to_string(color) + " must be >= 0 or NCCL_SPLIT_NOCOLOR");
    FaceConfig fc = config ? readConfig(config) : parent.config;
    cclComm_t parentCcl = parent.ccl;
    c = startComm(0, 0, fc, [=] {
      cclConfig_t cfg = cclConfigFor(fc);
      cclComm_t out = nullptr;
      cclCheck(cclCommSplit(parentCcl, color, key, &out, &cfg), "cclCommSplit");
      return out;
    });
  });
  if (r != ncclSuccess) return r;
  if (color != NCCL_SPLIT_NOCOLOR) return deliver("ncclCommSplit", c, newcomm);
  // A rank outside every new communicator takes part in the split but gets NULL; it waits,
  // whatever the mode, since it keeps no handle to poll: at the group's end inside a group
  // (where one thread may drive the other ranks' splits after this one), else here.
  if (group::active()) {
    group::addDiscarded(c);
    return ncclSuccess;
  }
  r = finishCreation(c, "ncclCommSplit");
  faceGuard("ncclCommSplit", [&] { destroy(c, false); });
  return r;
}

ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags) {
  clearHandle(newcomm);
  ncclComm_t c = nullptr;
  ncclResult_t r = faceGuard("ncclCommShrink", [&] {
    ncclComm& parent = handle(comm);
    waitCreated(parent);
    CCL_CHECK(parent.ccl && parent.createResult == ncclSuccess, cclInvalidUsage,
              "the communicator failed to initialise");
    CCL_CHECK(newcomm, cclInvalidArgument, "newcomm is NULL");
    CCL_CHECK(excludeRanksCount >= 0 && (excludeRanksCount == 0 || excludeRanksList), cclInvalidArgument,
              "excludeRanksList is NULL with a count of " + std::to_string(excludeRanksCount));
    CCL_CHECK(shrinkFlags == NCCL_SHRINK_DEFAULT || shrinkFlags == NCCL_SHRINK_ABORT, cclInvalidArgument,
              "shrinkFlags must be NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT");
    static_assert(NCCL_SHRINK_ABORT == CCL_SHRINK_ABORT && NCCL_SHRINK_DEFAULT == CCL_SHRINK_DEFAULT);
    CCL_CHECK(excludeRanksCount < parent.nranks, cclInvalidArgument,
              "excludeRanksCount " + std::to_string(excludeRanksCount) + " leaves none of the " +
                  std::to_string(parent.nranks) + " ranks");
    // ccl checks the list; the count of ranks that remain is what the new handle starts with.
    std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    FaceConfig fc = config ? readConfig(config) : parent.config;
    cclComm_t parentCcl = parent.ccl;
    c = startComm(parent.nranks - excludeRanksCount, 0, fc,
                  [=] { return shrinkJoin(parentCcl, exclude, shrinkFlags, fc); });
  });
  return r == ncclSuccess ? deliver("ncclCommShrink", c, newcomm) : r;
}

// A fresh ccl id for a grow of `comm`. As in NCCL, a communicator holds one such id at a
// time: the next ncclCommGrow that passes an id on this rank consumes it.
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommGetUniqueId, comm, uniqueId);
  return faceGuard("ncclCommGetUniqueId", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK(uniqueId, cclInvalidArgument, "uniqueId is NULL");
    CCL_CHECK(!c.growIdPending.exchange(true), cclInvalidUsage,
              "this communicator's previous id has not been consumed by ncclCommGrow yet");
    cclUniqueId id;
    cclResult_t r = cclGetUniqueId(&id);
    if (r != cclSuccess) c.growIdPending.store(false);
    cclCheck(r, "cclGetUniqueId");
    std::memcpy(uniqueId, &id, sizeof(id));
  });
}

// A new communicator of nRanks: the existing ranks (comm != NULL, rank -1) keep their ranks,
// the new ones (comm NULL) take the rank they pass. `comm` stays valid.
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommGrow, comm, nRanks, uniqueId, rank, newcomm, config);
  clearHandle(newcomm);
  ncclComm_t c = nullptr;
  ncclResult_t r = faceGuard("ncclCommGrow", [&] {
    CCL_CHECK(newcomm, cclInvalidArgument, "newcomm is NULL");
    if (!comm) {
      CCL_CHECK(uniqueId, cclInvalidArgument, "a new rank (comm NULL) must pass the id");
      CCL_CHECK(rank >= 0 && rank < nRanks, cclInvalidArgument,
                "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nRanks) + ")");
      FaceConfig fc = readConfig(config);
      c = startComm(nRanks, rank, fc, joinId(nRanks, toCcl(*uniqueId), rank, fc));
      return;
    }
    ncclComm& parent = usable(comm);
    CCL_CHECK(nRanks > parent.nranks, cclInvalidArgument,
              "nRanks " + std::to_string(nRanks) + " must exceed the communicator's " + std::to_string(parent.nranks));
    CCL_CHECK(rank == -1 || rank == parent.rank, cclInvalidArgument,
              "an existing rank passes rank -1 (it keeps rank " + std::to_string(parent.rank) + "), not " +
                  std::to_string(rank));
    FaceConfig fc = config ? readConfig(config) : parent.config;
    GrowOffer mine{};
    if (uniqueId) {
      mine.hasId = 1;
      mine.id = toCcl(*uniqueId);
      parent.growIdPending.store(false);
    }
    cclComm_t parentCcl = parent.ccl;
    const int parentRanks = parent.nranks;
    const int myRank = parent.rank;
    c = startComm(nRanks, myRank, fc, [=] { return growJoin(parentCcl, parentRanks, myRank, mine, nRanks, fc); });
  });
  return r == ncclSuccess ? deliver("ncclCommGrow", c, newcomm) : r;
}

ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return faceGuard("ncclCommFinalize", [&] {
    ncclComm& c = usable(comm);
    // Refused before anything is finalized, so that the finalize after the group's end works.
    CCL_CHECK(
        !group::holds(comm) && !api::groupHasComm(c.ccl), cclInvalidUsage,
        "the communicator has operations or its creation queued in this thread's open group; end the group first");
    // A second finalize is ncclInvalidArgument, as NVIDIA's NCCL answers it, whether or not a
    // real communicator is behind (ccl's communicator would say cclInvalidUsage).
    CCL_CHECK(!c.finalized.exchange(true), cclInvalidArgument, "the communicator was already finalized");
    if (c.real) {
      ncclResult_t r = CCL_REAL(ncclCommFinalize)(c.real);
      CCL_CHECK(r == ncclSuccess || r == ncclInProgress, static_cast<cclResult_t>(r),
                "the real NCCL communicator failed to finalize");
    }
    cclCheck(cclCommFinalize(c.ccl), "cclCommFinalize");
  });
}

ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  return faceGuard("ncclCommDestroy", [&] {
    if (!comm) return;
    handle(comm);
    destroy(comm, false);
  });
}

ncclResult_t pncclCommAbort(ncclComm_t comm) {
  return faceGuard("ncclCommAbort", [&] {
    if (!comm) return;
    handle(comm);
    destroy(comm, true);
  });
}

// Revoking fails the operations running and queued on every rank (cclCommRevoke); the
// communicator can still be queried, split, shrunk, aborted or destroyed, not finalized
// (nccl.h on ncclCommRevoke).
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return faceGuard("ncclCommRevoke", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK(revokeFlags == NCCL_REVOKE_DEFAULT, cclInvalidArgument, "revokeFlags must be NCCL_REVOKE_DEFAULT");
    if (c.real) {
      ncclResult_t r = CCL_REAL(ncclCommRevoke)(c.real, revokeFlags);
      CCL_CHECK(r == ncclSuccess || r == ncclInProgress, static_cast<cclResult_t>(r),
                "the real NCCL communicator refused ncclCommRevoke");
    }
    c.revoked.store(true);
    cclCheck(cclCommRevoke(c.ccl, 0), "cclCommRevoke");
  });
}

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommGetAsyncError, comm, asyncError);
  return faceGuard("ncclCommGetAsyncError", [&] {
    ncclComm& c = handle(comm);
    CCL_CHECK(asyncError, cclInvalidArgument, "asyncError is NULL");
    if (!c.created.load()) {
      *asyncError = ncclInProgress;
      return;
    }
    waitCreated(c);
    if (c.createResult != ncclSuccess) {
      *asyncError = c.createResult;
      return;
    }
    // Calls ccl ran (host buffers, compressed device calls) and device calls NVIDIA's NCCL
    // runs: the first failure of either, else in progress when the real one says so.
    cclResult_t e = cclSuccess;
    if (c.ccl) cclCheck(cclCommGetAsyncError(c.ccl, &e), "cclCommGetAsyncError");
    // ccl's watcher turns the async error to cclRemoteError as soon as it finds a rank gone,
    // even on an idle communicator (ccl.h). NVIDIA's NCCL reports a dead peer through a call
    // that meets it, and PyTorch's watchdog tears the process down on any async error, where
    // the survivors of an idle loss would shrink the communicator and go on: the loss shows
    // here once a call has failed or been refused for it.
    if (e == cclRemoteError && !c.ccl->life.callMet.load()) e = cclSuccess;
    ncclResult_t result = static_cast<ncclResult_t>(e);
    if (result == ncclSuccess && c.real && real::available()) {
      ncclResult_t realError = ncclSuccess;
      const ncclResult_t r = CCL_REAL(ncclCommGetAsyncError)(c.real, &realError);
      result = r != ncclSuccess ? r : realError;
    }
    *asyncError = result;
  });
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return faceGuard("ncclCommCount", [&] {
    ncclComm& c = created(comm);
    CCL_CHECK(count, cclInvalidArgument, "count is NULL");
    *count = c.nranks;
  });
}

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return faceGuard("ncclCommCuDevice", [&] {
    ncclComm& c = created(comm);
    CCL_CHECK(device, cclInvalidArgument, "device is NULL");
    int d = -1;  // a host-only communicator has no device
    if (c.real) {
      ncclResult_t r = CCL_REAL(ncclCommCuDevice)(c.real, &d);
      CCL_CHECK(r == ncclSuccess, static_cast<cclResult_t>(r), "the real NCCL communicator has no device");
    }
    *device = d;
  });
}

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return faceGuard("ncclCommUserRank", [&] {
    ncclComm& c = created(comm);
    CCL_CHECK(rank, cclInvalidArgument, "rank is NULL");
    *rank = c.rank;
  });
}

}  // extern "C"

CCL_NCCL_ALIAS(ncclGetUniqueId)
CCL_NCCL_ALIAS(ncclCommInitRank)
CCL_NCCL_ALIAS(ncclCommInitRankConfig)
CCL_NCCL_ALIAS(ncclCommInitRankScalable)
CCL_NCCL_ALIAS(ncclCommInitAll)
CCL_NCCL_ALIAS(ncclCommSplit)
CCL_NCCL_ALIAS(ncclCommShrink)
CCL_NCCL_ALIAS(ncclCommGetUniqueId)
CCL_NCCL_ALIAS(ncclCommGrow)
CCL_NCCL_ALIAS(ncclCommFinalize)
CCL_NCCL_ALIAS(ncclCommDestroy)
CCL_NCCL_ALIAS(ncclCommAbort)
CCL_NCCL_ALIAS(ncclCommRevoke)
CCL_NCCL_ALIAS(ncclCommGetAsyncError)
CCL_NCCL_ALIAS(ncclCommCount)
CCL_NCCL_ALIAS(ncclCommCuDevice)
CCL_NCCL_ALIAS(ncclCommUserRank)
