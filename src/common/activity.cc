// SPDX-License-Identifier: BSD-3-Clause
#include "common/activity.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>

#include "common/log.h"

namespace ccl {
namespace {

constexpr int kDepth = 4;  // nesting kept per thread; deeper scopes are counted, not named

// One thread's scopes. Written by its thread only, read by any thread that reports: atomics.
struct Record {
  std::atomic<bool> inUse{false};
  std::atomic<int> depth{0};
  std::atomic<const char*> what[kDepth] = {};
  std::atomic<int64_t> since[kDepth] = {};
  std::atomic<int> rank[kDepth] = {};
};

std::mutex recordsMutex;
std::deque<Record>& records() {
  static auto* r = new std::deque<Record>;  // stable addresses; outlives every thread
  return *r;
}

// The thread's record, taken at its first scope and given back when the thread ends.
struct Holder {
  Record* record = nullptr;
  ~Holder() {
    if (record) record->inUse.store(false, std::memory_order_release);
  }
};
thread_local Holder holder;

Record& mine() {
  if (holder.record) return *holder.record;
  std::lock_guard<std::mutex> lock(recordsMutex);
  for (Record& r : records()) {
    bool expected = false;
    if (r.inUse.compare_exchange_strong(expected, true)) return *(holder.record = &r);
  }
  Record& r = records().emplace_back();
  r.inUse.store(true);
  return *(holder.record = &r);
}

int64_t nowMillis() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ActivityScope::ActivityScope(const char* what, int rank) {
  Record& r = mine();
  slot_ = r.depth.load(std::memory_order_relaxed);
  if (slot_ < kDepth) {
    r.what[slot_].store(what, std::memory_order_relaxed);
    r.since[slot_].store(nowMillis(), std::memory_order_relaxed);
    r.rank[slot_].store(rank >= 0 ? rank : log::currentRank(), std::memory_order_relaxed);
  }
  r.depth.store(slot_ + 1, std::memory_order_release);
}

ActivityScope::~ActivityScope() { holder.record->depth.store(slot_, std::memory_order_release); }

std::string activitiesLongerThan(long minMillis) {
  const int64_t now = nowMillis();
  std::string out;
  std::lock_guard<std::mutex> lock(recordsMutex);
  for (const Record& r : records()) {
    if (!r.inUse.load(std::memory_order_acquire)) continue;
    const int depth = r.depth.load(std::memory_order_acquire);
    if (depth == 0) continue;
    const int shown = depth < kDepth ? depth : kDepth;
    const int64_t since = r.since[shown - 1].load(std::memory_order_relaxed);
    if (now - since < minMillis) continue;
    std::string line = "rank " + std::to_string(r.rank[0].load(std::memory_order_relaxed)) + ": ";
    for (int i = 0; i < shown; ++i) {
      const char* w = r.what[i].load(std::memory_order_relaxed);
      line += (i ? " > " : "") + std::string(w ? w : "?");
    }
    if (depth > kDepth) line += " > ...";
    char secs[32];
    std::snprintf(secs, sizeof(secs), " for %.1f s", double(now - since) / 1000.0);
    out += (out.empty() ? "" : "; ") + line + secs;
  }
  return out;
}

}  // namespace ccl
