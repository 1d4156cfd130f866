// SPDX-License-Identifier: BSD-3-Clause
// Communicator lifecycle: init, init-all, split, finalize, destroy, abort, revoke, shrink and
// queries. The cost model it agrees at init is tuning.cc's, the device calls' link device_link.cc's.
#include "api/comm.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/device_calls.h"
#include "api/device_link.h"
#include "api/group.h"
#include "api/tuning.h"
#include "api/watch.h"
#include "collectives/exec/device.h"
#include "common/config.h"
#include "common/hash.h"
#include "common/host_id.h"
#include "common/log.h"
#include "common/tags.h"
#include "transport/factory.h"

namespace ccl::api {

namespace {

// Copies what the caller passed (only `size` bytes of it) over the defaults, then fills
// every field still undefined from the environment registry.
cclConfig_t resolveConfig(const cclConfig_t* user) {
  cclConfig_t c = CCL_CONFIG_INITIALIZER;
  if (user) {
    CCL_CHECK(user->magic == CCL_CONFIG_MAGIC, cclInvalidArgument,
              "config->magic is not CCL_CONFIG_MAGIC: initialise the config with CCL_CONFIG_INITIALIZER");
    CCL_CHECK(user->size >= offsetof(cclConfig_t, blocking), cclInvalidArgument, "config->size is too small");
    std::memcpy(&c, user, std::min(user->size, sizeof(c)));
    c.size = sizeof(c);
  }
  if (c.blocking == CCL_CONFIG_UNDEF_INT) c.blocking = 1;
  if (c.timeoutMs == CCL_CONFIG_UNDEF_INT) {
    const int64_t seconds = config::timeout();
    CCL_CHECK(seconds > 0 && seconds <= config::kMaxTimeoutSeconds, cclInvalidArgument,
              "CCL_TIMEOUT=" + std::to_string(seconds) + " must be between 1 and " +
                  std::to_string(config::kMaxTimeoutSeconds) + " seconds");
    c.timeoutMs = static_cast<int>(seconds * 1000);
  }
  // CCL_TIMEOUT was checked above: only the caller's field can be left wrong here.
  CCL_CHECK(c.timeoutMs > 0, cclInvalidArgument,
            "config->timeoutMs=" + std::to_string(c.timeoutMs) + " must be positive (or CCL_CONFIG_UNDEF_INT)");
  CCL_CHECK(c.blocking == 0 || c.blocking == 1, cclInvalidArgument, "config->blocking must be 0 or 1");
  return c;
}

// Over shared memory a message moves at memory speed, and encoding and decoding it costs
// about as much as moving it uncompressed (perf/README.md has the measurement).
bool allPeersOverSharedMemory(const transport::Transport& t) {
  if (t.size() < 2) return false;
  for (int peer = 0; peer < t.size(); ++peer)
    if (peer != t.rank() && !t.sharedMemoryLink(peer)) return false;
  return true;
}

bool codecOnSharedMemory() {
  const std::string mode = config::codecShm();
  CCL_CHECK(mode == "auto" || mode == "on", cclInvalidArgument, "CCL_CODEC_SHM='" + mode + "' must be auto or on");
  return mode == "on";
}

// This rank's host identity. A split's child keeps its parent's, so that its nodes are the
// parent's restricted to its ranks; a config that names another is a contradiction.
host::Identity hostIdentity(const char* configured, const uint64_t* parentHostId) {
  if (!parentHostId) return host::resolve(configured);
  if (configured) {
    host::checkIdText(configured, "config->hostId");
    CCL_CHECK(host::hashText(configured) == *parentHostId, cclInvalidArgument,
              std::string("config->hostId '") + configured +
                  "' differs from this rank's identity in the parent communicator; a split keeps each rank's "
                  "host identity (leave hostId NULL)");
  }
  return {*parentHostId, "the parent communicator"};
}

// Every rank's host identity over the bootstrap, and the nodes they make. Every rank gets
// the same identities, in rank order, and so derives the same topology.
std::shared_ptr<const coll::Topology> exchangeTopology(cclComm& comm, const host::Identity& me) {
  std::vector<uint64_t> ids(static_cast<size_t>(comm.nranks), 0);
  ids[static_cast<size_t>(comm.rank)] = me.id;
  comm.links.bootstrap->allGather(ids.data(), sizeof(uint64_t));
  comm.placement.hostIds = ids;
  auto topo = std::make_shared<const coll::Topology>(coll::Topology::fromHostIds(ids));
  const void* self = &comm;
  if (comm.rank == 0) CCL_INFO("comm %p: %s", self, topo->describe().c_str());
  const int node = topo->nodeOf[static_cast<size_t>(comm.rank)];
  CCL_INFO("comm %p: rank %d is node %d of %d, local rank %d of %d (host identity %016llx from %s)", self, comm.rank,
           node, topo->nodes(), topo->localRank[static_cast<size_t>(comm.rank)], topo->nodeSize(node),
           static_cast<unsigned long long>(me.id), me.source.c_str());
  return topo;
}

}  // namespace

cclComm_t createComm(const cclUniqueId& id, int nranks, int rank, const cclConfig_t* config, int device,
                     const uint64_t* parentHostId, const bootstrap::Derivation& derivation,
                     const cclComm* inheritFrom) {
  CCL_CHECK(nranks > 0, cclInvalidArgument, "nranks " + std::to_string(nranks) + " must be positive");
  CCL_CHECK(nranks <= tags::kMaxRanks, cclInvalidArgument,
            "nranks " + std::to_string(nranks) + " exceeds the " + std::to_string(tags::kMaxRanks) +
                " ranks a communicator's message tags can number (common/tags.h)");
  CCL_CHECK(rank >= 0 && rank < nranks, cclInvalidArgument,
            "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  auto comm = std::make_unique<cclComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->config = resolveConfig(config);
  if (comm->config.commName) comm->name = comm->config.commName;
  comm->config.commName = nullptr;  // the copy above is ours; do not keep the caller's pointer
  // The parent's config keeps no codec (cleared below once read): what it compresses with
  // lives in its policy.
  comm->compression.policy = inheritFrom ? inheritFrom->compression.policy : policyFromEnv(comm->config.compression);
  comm->config.compression = nullptr;
  comm->compression.intraCodec =
      inheritFrom ? inheritFrom->compression.intraCodec : intraCodecFromEnv(comm->config.intraCompression);
  comm->config.intraCompression = nullptr;
  const host::Identity me = hostIdentity(comm->config.hostId, parentHostId);
  comm->placement.hostId = me.id;
  comm->config.hostId = nullptr;  // hashed above; the caller's text is not kept
  comm->settings.timeout = std::chrono::milliseconds(comm->config.timeoutMs);
  comm->settings.algo = coll::parseAlgo(config::algo());
  comm->settings.chunkBytes = static_cast<size_t>(std::max<int64_t>(config::chunkBytes(), 64));
  comm->settings.treeMaxBytes = static_cast<size_t>(std::max<int64_t>(config::treeMaxBytes(), 0));
  comm->settings.directMaxBytes = static_cast<size_t>(std::max<int64_t>(config::directMaxBytes(), 0));
  comm->settings.yieldWhenIdle = config::progressYield();
  if (coll::DeviceDriver* driver = coll::deviceDriver())
    comm->device.ordinal = device == kCurrentDevice ? driver->current() : device;
  comm->seq.sends.assign(nranks, 0);
  comm->seq.recvs.assign(nranks, 0);
  log::RankScope scope(rank);
  comm->links.bootstrap = bootstrap::Bootstrap::connect(id, rank, nranks, comm->settings.timeout, derivation);
  // Pulsed from here (a rank stopped during the rest of the init is named), watched from the end.
  pulseWhileStarting(comm->links.bootstrap.get());
  struct Starting {
    bootstrap::Bootstrap* b;
    ~Starting() { stopPulsing(b); }
  } starting{comm->links.bootstrap.get()};
  comm->placement.topology = exchangeTopology(*comm, me);
  comm->links.transport = transport::createTransport(config::transport(), *comm->links.bootstrap, me.id);
  comm->device.link = config::deviceTransport();
  comm->device.nccl = deviceNccl(*comm);
  comm->compression.defaultCodecOff = allPeersOverSharedMemory(*comm->links.transport) && !codecOnSharedMemory();
  comm->compression.deviceCodecOff = comm->placement.topology->nodes() == 1 && nranks > 1 && !codecOnSharedMemory();
  // The cost model chooses under CCL_CODEC=auto, and wherever CCL_LINK_MODEL is set.
  if (comm->compression.policy.autoChoice || !config::linkModel().empty())
    comm->tuning.costModel = agreeCostModel(*comm);
  if (comm->tuning.costModel && comm->device.ordinal >= 0)
    comm->tuning.deviceCostModel = deviceModel(*comm->tuning.costModel, comm->device.link);
  if (comm->compression.policy.codec.codec != cclCodecNone)
    CCL_INFO("comm %p: default codec %s for messages of at least %zu bytes%s", static_cast<void*>(comm.get()),
             cclCodecName(comm->compression.policy.codec.codec), comm->compression.policy.minBytes,
             comm->compression.defaultCodecOff
                 ? ", not applied: every peer is reached through shared memory (CCL_CODEC_SHM=auto)"
                 : "");
  CCL_INFO("comm %p%s%s rank %d nranks %d transport %s ready", static_cast<void*>(comm.get()),
           comm->name.empty() ? "" : " ", comm->name.c_str(), rank, nranks, comm->links.transport->name());
  enterComm(comm.get());
  watch(comm.get());
  return comm.release();
}

void destroyComm(cclComm_t comm) {
  unwatch(comm);
  comm->magic = 0;
  comm->device.calls.reset();  // its link uses the transport, or the NCCL communicator
  comm->device.nccl.reset();
  comm->links.transport.reset();
  comm->links.bootstrap.reset();
  eraseComm(comm);
  delete comm;
}

void retainComm(cclComm_t comm) { comm->life.refs.fetch_add(1); }

void releaseComm(cclComm_t comm) {
  if (comm->life.refs.fetch_sub(1) == 1) destroyComm(comm);
}

// The caller's handle goes (destroy or abort): it is refused from now on, and the
// communicator is freed now or, when an open group of another thread still holds operations
// of it, at that group's end. Once only: a destroy and an abort that overlap in two threads
// (a watchdog's abort while the owner's destroy waits for its host streams) release it once.
static void releaseHandle(cclComm_t comm) {
  if (comm->life.released.exchange(true)) return;
  comm->magic = 0;
  releaseComm(comm);
}

// A destroy or abort in progress holds the communicator: one in another thread that releases
// the handle meanwhile does not free it under this one.
struct Holding {
  explicit Holding(cclComm_t c) : comm(c) { retainComm(c); }
  ~Holding() { releaseComm(comm); }
  Holding(const Holding&) = delete;
  Holding& operator=(const Holding&) = delete;
  cclComm_t comm;
};

void checkUsable(cclComm_t comm, bool afterRevoke) {
  CCL_CHECK(comm, cclInvalidArgument, "comm is NULL");
  CCL_CHECK(comm->magic == cclComm::kMagic, cclInvalidArgument, "comm is not a valid communicator");
  CCL_CHECK(!comm->life.aborted.load(), cclInvalidUsage, "the communicator has been aborted");
  CCL_CHECK(!comm->life.finalized, cclInvalidUsage, "the communicator has been finalized");
  if (afterRevoke && comm->life.revoked.load()) return;
  CCL_CHECK(!comm->life.revoked.load(), cclInvalidUsage,
            "the communicator was revoked (cclCommRevoke): shrink it to the ranks that go on (cclCommShrink), split "
            "it, or destroy it");
  const int lost = comm->life.lostRank.load();
  if (comm->life.asyncError != cclSuccess) comm->life.callMet = true;
  CCL_CHECK(comm->life.asyncError == cclSuccess, comm->life.asyncError,
            std::string("the communicator failed earlier (") + cclGetErrorString(comm->life.asyncError) +
                (lost >= 0 ? ": rank " + std::to_string(lost) + " is gone" : std::string()) +
                "); shrink it to the ranks that go on (cclCommShrink), or destroy or abort it");
}

static void checkHandle(cclComm_t comm) {
  CCL_CHECK(comm, cclInvalidArgument, "comm is NULL");
  CCL_CHECK(comm->magic == cclComm::kMagic, cclInvalidArgument, "comm is not a valid communicator");
}

}  // namespace ccl::api

using namespace ccl;
using ccl::api::guard;

extern "C" {

CCL_API cclResult_t cclGetUniqueId(cclUniqueId* uniqueId) {
  return guard(nullptr, "cclGetUniqueId", [&] {
    CCL_CHECK(uniqueId, cclInvalidArgument, "uniqueId is NULL");
    bootstrap::createUniqueId(uniqueId);
  });
}

CCL_API cclResult_t cclCommInitRankConfig(cclComm_t* comm, int nranks, cclUniqueId commId, int rank,
                                          cclConfig_t* config) {
  // NULL on failure, as cclCommShrink's and NVIDIA's NCCL's: never a stale handle the caller
  // might destroy twice.
  if (comm) *comm = nullptr;
  return guard(nullptr, "cclCommInitRank", [&] {
    CCL_CHECK(comm, cclInvalidArgument, "comm is NULL");
    *comm = api::createComm(commId, nranks, rank, config);
  });
}

CCL_API cclResult_t cclCommInitRank(cclComm_t* comm, int nranks, cclUniqueId commId, int rank) {
  return cclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

CCL_API cclResult_t cclCommInitAll(cclComm_t* comms, int ndev, const int* devlist) {
  if (comms && ndev > 0) std::fill(comms, comms + ndev, nullptr);  // as cclCommInitRankConfig
  return guard(nullptr, "cclCommInitAll", [&] {
    CCL_CHECK(comms, cclInvalidArgument, "comms is NULL");
    CCL_CHECK(ndev > 0, cclInvalidArgument, "ndev " + std::to_string(ndev) + " must be positive");
    cclUniqueId id;
    bootstrap::createUniqueId(&id);
    std::vector<cclComm_t> made(ndev, nullptr);
    std::vector<std::string> errors(ndev);
    std::vector<cclResult_t> codes(ndev, cclSuccess);
    std::vector<std::thread> threads;
    // Rank r on device devlist[r] (or r), as NCCL places them; none without devices.
    const bool devices = coll::deviceDriver() && coll::deviceDriver()->current() >= 0;
    for (int r = 0; r < ndev; ++r)
      threads.emplace_back([&, r] {
        try {
          made[r] = api::createComm(id, ndev, r, nullptr, devices ? (devlist ? devlist[r] : r) : -1);
        } catch (const Error& e) {
          codes[r] = e.code();
          errors[r] = e.what();
        } catch (const std::exception& e) {
          codes[r] = cclSystemError;
          errors[r] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (codes[r] == cclSuccess) continue;
      for (cclComm_t c : made)
        if (c) api::destroyComm(c);
      throw Error(codes[r], "rank " + std::to_string(r) + ": " + errors[r]);
    }
    std::copy(made.begin(), made.end(), comms);
  });
}

CCL_API cclResult_t cclCommSplit(cclComm_t comm, int color, int key, cclComm_t* newcomm, cclConfig_t* config) {
  if (newcomm) *newcomm = nullptr;  // as cclCommInitRankConfig
  return guard(comm, "cclCommSplit", [&] {
    api::checkUsable(comm, true);
    CCL_CHECK(newcomm, cclInvalidArgument, "newcomm is NULL");
    CCL_CHECK(color >= 0 || color == CCL_SPLIT_NOCOLOR, cclInvalidArgument,
              "color " + std::to_string(color) + " must be >= 0 or CCL_SPLIT_NOCOLOR");
    CCL_CHECK(!api::groupActive(), cclInvalidUsage, "cclCommSplit cannot be called inside a group");
    struct Entry {
      int color, key, rank;
    };
    std::vector<Entry> all(comm->nranks);
    all[comm->rank] = {color, key, comm->rank};
    comm->links.bootstrap->allGather(all.data(), sizeof(Entry));
    std::vector<Entry> mine;
    for (const Entry& e : all)
      if (color != CCL_SPLIT_NOCOLOR && e.color == color) mine.push_back(e);
    std::stable_sort(mine.begin(), mine.end(),
                     [](const Entry& a, const Entry& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });
    // The first rank of each new communicator makes its id; one more all-gather hands it out.
    std::vector<cclUniqueId> ids(comm->nranks);
    std::memset(ids.data(), 0, ids.size() * sizeof(cclUniqueId));
    if (!mine.empty() && mine.front().rank == comm->rank) bootstrap::createUniqueId(&ids[comm->rank]);
    comm->links.bootstrap->allGather(ids.data(), sizeof(cclUniqueId));
    if (color == CCL_SPLIT_NOCOLOR) {
      *newcomm = nullptr;
      return;
    }
    int newRank = 0;
    while (mine[newRank].rank != comm->rank) ++newRank;
    cclConfig_t inherited = comm->config;
    inherited.commName = comm->name.empty() ? nullptr : comm->name.c_str();
    // NCCL's split keeps the parent's device, whichever is current on the calling thread.
    *newcomm =
        api::createComm(ids[mine.front().rank], static_cast<int>(mine.size()), newRank, config ? config : &inherited,
                        comm->device.ordinal, &comm->placement.hostId, {}, config ? nullptr : comm);
  });
}

CCL_API cclResult_t cclCommFinalize(cclComm_t comm) {
  return guard(comm, "cclCommFinalize", [&] {
    api::checkUsable(comm);
    CCL_CHECK(!api::groupHasComm(comm), cclInvalidUsage, "the communicator has operations queued in an open group");
    api::drainAsync(comm, nullptr);
    comm->life.finalized = true;
  });
}

CCL_API cclResult_t cclCommDestroy(cclComm_t comm) {
  return guard(comm, "cclCommDestroy", [&] {
    if (!comm) return;  // as free(NULL)
    api::checkHandle(comm);
    const api::Holding holding(comm);
    CCL_CHECK(!api::groupHasComm(comm), cclInvalidUsage, "the communicator has operations queued in an open group");
    api::drainAsync(comm, nullptr);  // operations queued on host streams run first
    api::releaseHandle(comm);
  });
}

CCL_API cclResult_t cclCommAbort(cclComm_t comm) {
  return guard(comm, "cclCommAbort", [&] {
    if (!comm) return;
    api::checkHandle(comm);
    const api::Holding holding(comm);
    comm->life.aborted.store(true);
    comm->links.transport->abort();
    comm->links.bootstrap->abort();
    if (comm->device.nccl) comm->device.nccl->abort();  // device calls waiting for peers return
    // Operations running in other threads notice the flag within one progress pass; those
    // still queued on host streams fail as soon as they start.
    while (comm->life.active.load() > 0) sched_yield();
    api::drainAsync(comm, nullptr);
    api::groupForget(comm);
    api::releaseHandle(comm);
  });
}

namespace ccl::api {

// cclCommRevoke's work, once the handle is checked.
static void revoke(cclComm_t comm) {
  if (comm->life.revoked.exchange(true)) return;  // revoked already (here or by another thread)
  // The transport's abort fails every request of this rank and reaches the peers', whatever
  // call each is in. The bootstrap stays: a split among the ranks that go on uses it.
  comm->links.transport->abort();
  if (comm->device.nccl) comm->device.nccl->abort();
  // Operations running in other threads notice within one progress pass; those queued on
  // host streams fail as soon as they start.
  while (comm->life.active.load() > 0) sched_yield();
  api::drainAsync(comm, nullptr);
  // A transport may tell its peers from its progress (UCX sends its notices there): with no
  // operation left to drive it, this thread does, once (new ones are refused).
  comm->links.transport->progress();
}

// How long CCL_SHRINK_ALIVE waits for a rank's rendezvous listener: a live process's kernel
// accepts at once and a dead one's refuses, so only a silent host takes this long.
constexpr std::chrono::milliseconds kShrinkProbe{1000};

// The ranks of `comm` that go on in a shrink: those outside the caller's list, or those whose
// process answers (CCL_SHRINK_ALIVE).
static std::vector<int> shrinkSurvivors(cclComm_t comm, const int* exclude, int excludeCount, int flags) {
  if (flags & CCL_SHRINK_ALIVE) {
    CCL_CHECK(
        !exclude && excludeCount == 0, cclInvalidArgument,
        "with CCL_SHRINK_ALIVE the survivors are found, not listed: excludeRanks must be NULL and excludeCount 0");
    std::vector<int> alive = comm->links.bootstrap->reachable(kShrinkProbe);
    // A rank the watcher found lost is gone, whether or not its listener has closed yet.
    const int lost = comm->life.lostRank.load();
    alive.erase(std::remove(alive.begin(), alive.end(), lost), alive.end());
    return alive;
  }
  CCL_CHECK(excludeCount >= 0 && (excludeCount == 0 || exclude), cclInvalidArgument,
            "excludeRanks is NULL with a count of " + std::to_string(excludeCount));
  std::vector<bool> gone(comm->nranks, false);
  for (int i = 0; i < excludeCount; ++i) {
    CCL_CHECK(exclude[i] >= 0 && exclude[i] < comm->nranks, cclInvalidArgument,
              "excludeRanks holds rank " + std::to_string(exclude[i]) + ", outside the communicator's " +
                  std::to_string(comm->nranks));
    CCL_CHECK(!gone[exclude[i]], cclInvalidArgument,
              "excludeRanks holds rank " + std::to_string(exclude[i]) + " twice");
    gone[exclude[i]] = true;
  }
  CCL_CHECK(!gone[comm->rank], cclInvalidArgument,
            "this rank (" + std::to_string(comm->rank) + ") is in excludeRanks; only the ranks that go on shrink");
  std::vector<int> out;
  for (int r = 0; r < comm->nranks; ++r)
    if (!gone[r]) out.push_back(r);
  return out;
}

}  // namespace ccl::api

CCL_API cclResult_t cclCommRevoke(cclComm_t comm, int flags) {
  return guard(comm, "cclCommRevoke", [&] {
    api::checkHandle(comm);
    CCL_CHECK(flags == 0, cclInvalidArgument, "flags must be 0");
    CCL_CHECK(!comm->life.aborted.load(), cclInvalidUsage, "the communicator has been aborted");
    api::revoke(comm);
  });
}

CCL_API cclResult_t cclCommShrink(cclComm_t comm, const int* excludeRanks, int excludeCount, cclComm_t* newcomm,
                                  cclConfig_t* config, int flags) {
  if (newcomm) *newcomm = nullptr;
  return guard(comm, "cclCommShrink", [&] {
    api::checkHandle(comm);
    CCL_CHECK(newcomm, cclInvalidArgument, "newcomm is NULL");
    CCL_CHECK((flags & ~(CCL_SHRINK_ABORT | CCL_SHRINK_ALIVE)) == 0, cclInvalidArgument,
              "flags " + std::to_string(flags) + ": only CCL_SHRINK_ABORT and CCL_SHRINK_ALIVE are defined");
    CCL_CHECK(!comm->life.aborted.load(), cclInvalidUsage, "the communicator has been aborted");
    CCL_CHECK(!comm->life.finalized, cclInvalidUsage, "the communicator has been finalized");
    CCL_CHECK(!api::groupActive(), cclInvalidUsage, "cclCommShrink cannot be called inside a group");
    const std::vector<int> keep = api::shrinkSurvivors(comm, excludeRanks, excludeCount, flags);
    if (flags & CCL_SHRINK_ABORT) api::revoke(comm);
    // What the survivors must agree on: who goes on, and which shrink of this communicator
    // this is (each rank counts its own; survivors shrink a communicator in the same order).
    bootstrap::Derivation derivation;
    derivation.number = ++comm->life.shrinks;
    derivation.agreement = fnv1a({0x73687269'6e6b3031ull, derivation.number, keep.size()});
    for (int r : keep) derivation.agreement = fnv1a({uint64_t(r)}, derivation.agreement);
    const cclUniqueId id = comm->links.bootstrap->derivedId(keep, derivation);
    const int newRank = static_cast<int>(std::lower_bound(keep.begin(), keep.end(), comm->rank) - keep.begin());
    cclConfig_t inherited = comm->config;
    inherited.commName = comm->name.empty() ? nullptr : comm->name.c_str();
    cclComm_t made =
        api::createComm(id, static_cast<int>(keep.size()), newRank, config ? config : &inherited, comm->device.ordinal,
                        &comm->placement.hostId, derivation, config ? nullptr : comm);
    // The implicit error-feedback state of the tensors that go on: a survivor's residual is
    // what its own compression lost, whoever else is gone.
    made->compression.autoFeedback = std::move(comm->compression.autoFeedback);
    comm->compression.autoFeedback = api::AutoFeedback{};
    *newcomm = made;
  });
}

CCL_API cclResult_t cclCommSetCompression(cclComm_t comm, const cclCompression_t* compression) {
  return guard(comm, "cclCommSetCompression", [&] {
    api::checkUsable(comm);
    comm->compression.policy.codec = codec::resolveParams(compression);
    // A codec set here replaces CCL_CODEC=auto's choice; the model still chooses algorithms
    // for codecs it timed at init (others keep the size rules).
    comm->compression.policy.autoChoice = false;
    comm->tuning.choices.clear();
    comm->tuning.deviceChoices.clear();
    comm->links.plans.clear();
  });
}

CCL_API cclResult_t cclCommGetStats(cclComm_t comm, cclStats_t* stats) {
  return guard(comm, "cclCommGetStats", [&] {
    api::checkHandle(comm);
    CCL_CHECK(stats, cclInvalidArgument, "stats is NULL");
    CCL_CHECK(stats->magic == CCL_STATS_MAGIC, cclInvalidArgument,
              "stats->magic: initialise with CCL_STATS_INITIALIZER");
    CCL_CHECK(stats->size >= offsetof(cclStats_t, op), cclInvalidArgument, "stats->size is too small");
    cclStats_t full = CCL_STATS_INITIALIZER;
    {
      std::lock_guard<std::mutex> lock(comm->counters.mutex);
      std::copy(std::begin(comm->counters.stats), std::end(comm->counters.stats), full.op);
      std::copy(std::begin(comm->counters.autoChosen), std::end(comm->counters.autoChosen), full.autoChosen);
      std::copy(std::begin(comm->counters.autoCompressed), std::end(comm->counters.autoCompressed),
                full.autoCompressed);
      std::copy(std::begin(comm->counters.uncompressed), std::end(comm->counters.uncompressed), full.uncompressed);
      full.acrossRawBytes = comm->counters.acrossRawBytes;
      full.acrossWireBytes = comm->counters.acrossWireBytes;
    }
    const api::DeviceCounts device = api::deviceCounts(comm);
    full.deviceCommands = device.commands;
    full.deviceHostFunctions = device.hostFunctions;
    size_t size = std::min(stats->size, sizeof(full));
    full.size = stats->size;
    std::memcpy(stats, &full, size);
  });
}

CCL_API cclResult_t cclCommGetAsyncError(cclComm_t comm, cclResult_t* asyncError) {
  return guard(comm, "cclCommGetAsyncError", [&] {
    api::checkHandle(comm);
    CCL_CHECK(asyncError, cclInvalidArgument, "asyncError is NULL");
    *asyncError = comm->life.asyncError;
  });
}

CCL_API cclResult_t cclCommCount(const cclComm_t comm, int* count) {
  return guard(comm, "cclCommCount", [&] {
    api::checkHandle(comm);
    CCL_CHECK(count, cclInvalidArgument, "count is NULL");
    *count = comm->nranks;
  });
}

CCL_API cclResult_t cclCommCuDevice(const cclComm_t comm, int* device) {
  return guard(comm, "cclCommCuDevice", [&] {
    api::checkHandle(comm);
    CCL_CHECK(device, cclInvalidArgument, "device is NULL");
    *device = comm->device.ordinal;
  });
}

CCL_API cclResult_t cclCommUserRank(const cclComm_t comm, int* rank) {
  return guard(comm, "cclCommUserRank", [&] {
    api::checkHandle(comm);
    CCL_CHECK(rank, cclInvalidArgument, "rank is NULL");
    *rank = comm->rank;
  });
}

CCL_API cclResult_t cclCommTopology(const cclComm_t comm, int* node, int* nnodes, int* localRank, int* localRanks) {
  return guard(comm, "cclCommTopology", [&] {
    api::checkHandle(comm);
    const coll::Topology& t = *comm->placement.topology;
    const int mine = t.nodeOf[static_cast<size_t>(comm->rank)];
    if (node) *node = mine;
    if (nnodes) *nnodes = t.nodes();
    if (localRank) *localRank = t.localRank[static_cast<size_t>(comm->rank)];
    if (localRanks) *localRanks = t.nodeSize(mine);
  });
}

}  // extern "C"
