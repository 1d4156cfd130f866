// SPDX-License-Identifier: BSD-3-Clause
// The world of ranks: persistent threads that run one job at a time, and the communicators
// they are given (random valid configurations, three ways of making them).
#include <algorithm>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "api_fuzz.h"

namespace apifuzz {

World::World(int n) : n_(n) {
  for (int r = 0; r < n; ++r) threads_.emplace_back([this, r] { loop(r); });
}

World::~World() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void World::run(const std::function<void(int)>& fn) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &fn;
  pending_ = n_;
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void World::loop(int r) {
  fuzz::bindSlot(r);
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(r);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_.notify_all();
  }
}

void randomValidConfig(Rng& g, int rank, int hostGroups, ConfigHolder* h) {
  cclConfig_t& c = h->config;
  static const size_t sizes[] = {sizeof(cclConfig_t),
                                 offsetof(cclConfig_t, intraCompression),
                                 offsetof(cclConfig_t, hostId),
                                 offsetof(cclConfig_t, compression),
                                 offsetof(cclConfig_t, timeoutMs),
                                 offsetof(cclConfig_t, commName)};
  c.size = sizes[g.below(6)];
  if (g.chance(0.5)) c.blocking = 1;
  if (g.chance(0.5)) {
    static const char* names[] = {"fuzz", "%s%n%s%p", "a name with spaces and \"quotes\"", ""};
    h->name = names[g.below(4)];
    c.commName = h->name.c_str();
  }
  if (g.chance(0.5)) c.timeoutMs = 1000 * fuzz::cclTimeoutSeconds();
  if (hostGroups > 0) {
    h->host = "fuzz-host-" + std::to_string(rank % hostGroups);
    c.hostId = h->host.c_str();
  }
  if (g.chance(0.3)) c.intraCompression = &h->intra;  // codec none: intra-node steps stay exact
}

bool initWorld(World& w, Rng& g) {
  const int n = w.size();
  const int how = static_cast<int>(g.below(3));
  std::vector<cclResult_t> rcs(n, cclSuccess);
  std::vector<std::string> why(n);
  if (how == 2) {
    fuzz::bindSlot(kMainSlot);
    cclComm_t made[kMaxRanks] = {};
    const cclResult_t rc = call("cclCommInitAll", [&] { return cclCommInitAll(made, n, nullptr); });
    if (rc != cclSuccess) {
      problem("cclCommInitAll of " + std::to_string(n) + " ranks failed: " + lastError());
      return false;
    }
    std::copy(made, made + n, w.comm);
  } else {
    cclUniqueId id;
    fuzz::bindSlot(kMainSlot);
    if (call("cclGetUniqueId", [&] { return cclGetUniqueId(&id); }) != cclSuccess) {
      problem("cclGetUniqueId failed: " + lastError());
      return false;
    }
    const int hostGroups = g.chance(0.5) ? static_cast<int>(g.range(1, 2)) : 0;
    const uint64_t configSeed = g.next();
    w.run([&](int r) {
      ConfigHolder h;
      Rng cg(configSeed);  // the same draws on every rank: one configuration
      randomValidConfig(cg, r, hostGroups, &h);
      rcs[r] = how == 0 ? call("cclCommInitRank", [&] { return cclCommInitRank(&w.comm[r], n, id, r); })
                        : call("cclCommInitRankConfig",
                               [&] { return cclCommInitRankConfig(&w.comm[r], n, id, r, &h.config); });
      if (rcs[r] != cclSuccess) why[r] = lastError();
    });
  }
  bool ok = true;
  for (int r = 0; r < n; ++r)
    if (rcs[r] != cclSuccess) {
      problem("a valid init of " + std::to_string(n) + " ranks failed on rank " + std::to_string(r) + ": " + why[r]);
      ok = false;
    }
  if (!ok) {
    w.run([&](int r) {
      if (w.comm[r]) call("cclCommDestroy", [&] { return cclCommDestroy(w.comm[r]); });
      w.comm[r] = nullptr;
    });
    return false;
  }
  const uint64_t fbSeed = g.next();
  w.run([&](int r) {
    int count = -1, rank = -1;
    call("cclCommCount", [&] { return cclCommCount(w.comm[r], &count); });
    call("cclCommUserRank", [&] { return cclCommUserRank(w.comm[r], &rank); });
    if (count != n || rank != r)
      problem("a new communicator says rank " + std::to_string(rank) + " of " + std::to_string(count) + ", expected " +
              std::to_string(r) + " of " + std::to_string(n));
    call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&w.stream[r]); });
    Rng fg(fbSeed);
    for (auto& fb : w.feedback[r]) {
      const auto kind = static_cast<cclFeedbackKind_t>(fg.below(3));
      call("cclFeedbackCreate", [&] { return cclFeedbackCreate(&fb, kind, 0.5f, static_cast<int>(fg.below(3))); });
    }
  });
  return true;
}

void destroyWorld(World& w) {
  w.run([&](int r) {
    call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(w.stream[r]); });
    for (auto& fb : w.feedback[r]) call("cclFeedbackDestroy", [&] { return cclFeedbackDestroy(fb); });
    call("cclCommDestroy", [&] { return cclCommDestroy(w.comm[r]); });
  });
  w.keepAlive.clear();
}

}  // namespace apifuzz
