// SPDX-License-Identifier: BSD-3-Clause
// The communicator behind cclComm_t, and the guard that turns exceptions into result codes
// at the C boundary.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/compression.h"
#include "ccl/ccl.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/exec/scratch_pool.h"
#include "collectives/exec/stream.h"
#include "collectives/plan/call_key.h"
#include "collectives/plan/cost.h"
#include "collectives/plan/topology.h"
#include "common/error.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/nccl/nccl_transport.h"
#include "transport/transport.h"

namespace ccl::api {

struct DeviceComm;  // api/device_calls.h
struct DeviceCommDeleter {
  void operator()(DeviceComm* d) const;
};

// What a plan depends on besides the communicator's settings. Calls repeat (a training
// loop issues the same collectives every step), so plans are built once and reused.
using PlanKey = ccl::coll::CallKey;

// A measured link in the process's cache (api/comm.cc): per transport, level and pair of
// host identities (inside a node: the host with itself).
struct LinkKey {
  std::string transport;
  bool across;
  uint64_t lo, hi;
  auto operator<=>(const LinkKey&) const = default;
};

}  // namespace ccl::api

// The communicator's parts, one concern each: cclComm is made of one of each (below).
namespace ccl::api {

// The settings a call's plan is built under, resolved at init (config, then CCL_*).
struct CallSettings {
  std::chrono::milliseconds timeout{0};
  coll::Algo algo = coll::Algo::kAuto;
  size_t chunkBytes = 0;
  size_t treeMaxBytes = 0;
  size_t directMaxBytes = 0;
  bool yieldWhenIdle = true;
};

// What moves a call's bytes: the bootstrap ring, the transport, scratch memory and the plans
// built so far (calls repeat: a training loop issues the same collectives every step).
struct Links {
  std::unique_ptr<bootstrap::Bootstrap> bootstrap;
  std::unique_ptr<transport::Transport> transport;
  coll::ScratchPool scratch;
  coll::PlanCache<std::shared_ptr<const coll::Plan>> plans;
};

// Which ranks share a host: one host identity per rank, exchanged at init (cclCommTopology).
// Shared with what plans are built from; never changes after init.
struct Placement {
  std::shared_ptr<const coll::Topology> topology;
  uint64_t hostId = 0;            // this rank's identity, which a cclCommSplit child keeps
  std::vector<uint64_t> hostIds;  // every rank's, in rank order (exchangeTopology)
};

// What a call is compressed with when it names no codec.
struct CallPolicy {
  Policy policy;  // default compression
  // The codec of steps inside a node of hierarchical plans (config->intraCompression or
  // CCL_CODEC_INTRA); none: those steps go uncompressed. Steps across nodes use policy.codec,
  // and the rest of `policy` (sizes, collectives, feedback) applies to both.
  codec::Params intraCodec;
  bool defaultCodecOff = false;  // every peer over shared memory and CCL_CODEC_SHM=auto
  // Calls on device buffers leave the default codec off: every rank is on one node (NVLink
  // moves their bytes faster than a codec), unless CCL_CODEC_SHM=on.
  bool deviceCodecOff = false;
  AutoFeedback autoFeedback;  // feedback kept without a handle, by position in the step
};

// The cost model and what it chose (api/tuning.h).
struct Tuning {
  // CCL_CODEC=auto: the model calls are priced on (the ranks' slowest, agreed at init), and
  // each call shape's choice, made once (a function of the shape and the model, so alike on
  // every rank).
  std::shared_ptr<const coll::CostModel> costModel;
  coll::PlanCache<coll::Choice> choices;
  // Calls on device buffers (a communicator with a device and a cost model): the model's links
  // with the device kit's kernels (coll::measuredDeviceCompute), streams at their bound over
  // NCCL; and their choices.
  std::shared_ptr<const coll::CostModel> deviceCostModel;
  coll::PlanCache<coll::Choice> deviceChoices;
  // The cached links the model was priced on (none when CCL_LINK_MODEL gave them), and how
  // the chosen calls' times compare with the model's predictions (noteCallTime, under
  // Counters::mutex): a run of calls far from them marks those links for the next
  // communicator of the process to measure again.
  std::vector<std::pair<LinkKey, coll::LinkCost>> pricedLinks;
  unsigned long long timedCalls = 0;
  int driftRun = 0;
  bool driftMarked = false;
};

// What cclCommGetStats returns. Added to on a host stream's thread, read on the caller's:
// under `mutex`.
struct Counters {
  std::mutex mutex;
  cclOpStats_t stats[cclNumOpKinds] = {};
  unsigned long long autoChosen[cclNumOpKinds] = {};  // CCL_CODEC=auto's calls (cclStats_t)
  unsigned long long autoCompressed[cclNumOpKinds] = {};
  unsigned long long uncompressed[cclNumUncompressedReasons] = {};  // cclStats_t's, noteUncompressed
  unsigned long long acrossRawBytes = 0, acrossWireBytes = 0;       // cclStats_t's
};

// What matches one rank's calls with its peers': collectives by order, messages by order per
// peer.
struct Sequence {
  uint32_t collectives = 0;            // collectives issued
  std::vector<uint32_t> sends, recvs;  // point-to-point messages per peer
};

// Where the communicator is in its life: aborted, revoked, failed, operations running.
struct LifeState {
  std::atomic<bool> aborted{false};
  // cclCommRevoke: its calls failed and fail; the handle stays for destroy or split.
  std::atomic<bool> revoked{false};
  uint64_t shrinks = 0;        // cclCommShrink calls so far: part of what a shrink's ranks agree on
  std::atomic<int> active{0};  // operations running on this communicator
  // The caller's handle, plus one per operation queued in an open group of any thread: the
  // last to go frees the communicator (releaseComm), so a destroy or abort from another
  // thread never frees what that thread's group end will read.
  std::atomic<int> refs{1};
  // The caller's handle is gone (cclCommDestroy or cclCommAbort): a group still holding
  // operations of it drops them at its end.
  std::atomic<bool> released{false};
  bool finalized = false;
  std::atomic<cclResult_t> asyncError{cclSuccess};  // set by a failed operation, whatever its thread
  std::atomic<int> lostRank{-1};                    // a rank the watcher found gone (api/watch.h); -1: none
  // A call failed, or was refused for an earlier failure: the async error has met a caller,
  // not only the watcher's news of a lost rank (the NCCL face reports such a loss only then).
  std::atomic<bool> callMet{false};
};

// Operations enqueued on a host stream that have not run yet, and that stream. One
// communicator's operations run in the order they were issued, so a call on another stream
// (or on none) first waits for these (api/group.h, drainAsync).
struct AsyncQueue {
  std::mutex mutex;
  std::condition_variable done;
  int pending = 0;
  const void* stream = nullptr;  // a host stream, or the device state: what runs them
};

// The communicator's device (cclCommCuDevice) and what its calls on device buffers use.
struct DevicePart {
  // The calling thread's current device at init; -1 without one. Its calls' state is made at
  // the first device call.
  int ordinal = -1;
  std::string link;  // the link of its device calls (collectives/links: CCL_DEVICE_TRANSPORT, auto resolved)
  // CCL_DEVICE_TRANSPORT=nccl: the real NCCL communicator device calls move bytes over,
  // made at init (collectively); NULL: device calls are staged through host memory.
  std::unique_ptr<transport::nccl::Transport> nccl;
  std::unique_ptr<DeviceComm, DeviceCommDeleter> calls;
};

}  // namespace ccl::api

struct cclComm {
  static constexpr uint64_t kMagic = 0x63636c636f6d6d31ull;  // "cclcomm1"
  uint64_t magic = kMagic;
  int rank = 0;
  int nranks = 0;
  std::string name;
  cclConfig_t config{};  // resolved: every field defined
  ccl::api::CallSettings settings;
  ccl::api::Links links;
  ccl::api::Placement placement;
  ccl::api::CallPolicy compression;
  ccl::api::Tuning tuning;
  ccl::api::Counters counters;
  ccl::api::Sequence seq;
  ccl::api::LifeState life;
  ccl::api::AsyncQueue async;
  ccl::api::DevicePart device;
};

namespace ccl::api {

// Records `message` as the last error of this thread (and of `comm` when given), logs it
// once at WARN, and returns `code`.
cclResult_t recordError(cclComm_t comm, const char* fn, cclResult_t code, const std::string& message);

// The messages of failures recorded off the caller's thread (a device call's host function,
// the watcher, a host stream's operation), in one process-wide table keyed by the value of
// a communicator's handle, and never read through a handle: cclGetLastError(comm) may run
// while another thread's cclCommAbort frees that communicator.
//
// enterComm: a communicator's entry, made before its handle is returned. aliasComm: `alias`
// (the NCCL face's ncclComm_t) as a second key of `handle`'s entry. eraseComm: the key
// dropped, before the memory behind it is freed (an address may be reused).
void enterComm(const void* handle);
void aliasComm(const void* alias, const void* handle);
void eraseComm(const void* key);

// Keeps `message` as the asynchronous failure's of `comm`'s entry unless one is kept
// already, with its serial (nextErrorSerial).
void recordAsyncMessage(cclComm_t comm, const std::string& message);

// The newer of a thread's last failure (its message and serial) and the asynchronous one
// of the entry at `key` (none when key is null or has no entry): what cclGetLastError(comm)
// and the NCCL face's ncclGetLastError return. Valid until the next call of this function or
// failing call on this thread.
const char* newerError(const void* key, uint64_t threadSerial, const std::string& threadMessage);

// Runs f(); maps every exception to a result code and a recorded message. Never throws.
template <class F>
cclResult_t guard(cclComm_t comm, const char* fn, F&& f) noexcept {
  try {
    f();
    return cclSuccess;
  } catch (const Error& e) {
    return recordError(comm, fn, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return recordError(comm, fn, cclSystemError, "out of memory");
  } catch (const std::exception& e) {
    return recordError(comm, fn, cclInternalError, e.what());
  } catch (...) {
    return recordError(comm, fn, cclInternalError, "unknown exception");
  }
}

// Throws cclInvalidArgument/cclInvalidUsage unless `comm` is a live communicator that may
// take new operations.
// `afterRevoke`: also a revoked communicator (what cclCommSplit may still do), whose
// failed calls are then no reason to refuse.
void checkUsable(cclComm_t comm, bool afterRevoke = false);

// Joins `id` as rank `rank` of `nranks` with a resolved copy of `config` (may be NULL). The
// communicator's device is `device`, or with kCurrentDevice the calling thread's current one
// (none without a device driver); what is made on the device at init (CCL_DEVICE_TRANSPORT=
// nccl's communicator) is made with that device current, whatever thread creates it.
// `parentHostId` (a split's parent's identity; NULL for a new communicator) is this rank's
// host identity, which config->hostId may repeat but not change.
constexpr int kCurrentDevice = -2;
// `derivation`: the bootstrap's (Bootstrap::connect), a shrink's for its derived id.
// `inheritFrom`: the parent of a split or shrink whose caller passed no config; the new
// communicator takes its compression as it is now (its codec, cclCommSetCompression's too,
// the policy around it and the intra-node codec), not the environment's.
cclComm_t createComm(const cclUniqueId& id, int nranks, int rank, const cclConfig_t* config,
                     int device = kCurrentDevice, const uint64_t* parentHostId = nullptr,
                     const bootstrap::Derivation& derivation = {}, const cclComm* inheritFrom = nullptr);

// Called once by the NCCL face as it loads: its communicators get their device link from the
// face (borrowDeviceNccl), so CCL_DEVICE_TRANSPORT=auto makes no NCCL communicator of its own.
void deviceLinksAreLent();

// Gives `comm` (before its first call on device buffers) an NCCL communicator made
// elsewhere as the link of its device calls (the NCCL face's real one, which it borrows and
// never destroys): its device calls then move bytes over NVIDIA's NCCL. Nothing where the
// communicator has no device.
void borrowDeviceNccl(cclComm_t comm, std::unique_ptr<transport::nccl::Transport> link);

// Frees `comm` (transport first, then bootstrap).
void destroyComm(cclComm_t comm);

// Takes one more reference to `comm` (an operation queued in an open group).
void retainComm(cclComm_t comm);
// Drops one reference; the last frees the communicator (destroyComm).
void releaseComm(cclComm_t comm);

}  // namespace ccl::api
