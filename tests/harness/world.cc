// SPDX-License-Identifier: BSD-3-Clause
#include "world.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <stdexcept>

namespace ccltest {

namespace {

std::array<std::unique_ptr<World>, 9>& cache() {
  static std::array<std::unique_ptr<World>, 9> worlds;
  return worlds;
}

}  // namespace

World& World::get(int n) {
  if (n < 1 || n > 8) throw std::invalid_argument("cached worlds have 1..8 ranks");
  std::unique_ptr<World>& w = cache()[n];
  if (w && w->tainted_) w.reset();
  if (!w) w = std::make_unique<World>(n);
  return *w;
}

void World::destroyCached() {
  for (auto& w : cache()) w.reset();
}

World::World(int n, const cclConfig_t* config) : threads_(n), comms_(n, nullptr) {
  cclUniqueId id{};
  const cclResult_t got = cclGetUniqueId(&id);
  if (got != cclSuccess) {
    ADD_FAILURE() << "cclGetUniqueId -> " << describeResult(got);
    return;
  }
  std::vector<cclComm_t> created(n, nullptr);
  expectNoneThrew(threads_.run([&](int rank) {
    // The library reads the config; a copy per rank keeps ranks from sharing one object.
    cclConfig_t local = config ? *config : cclConfig_t{};
    const cclResult_t r = config ? cclCommInitRankConfig(&created[rank], n, id, rank, &local)
                                 : cclCommInitRank(&created[rank], n, id, rank);
    EXPECT_EQ(r, cclSuccess) << "rank " << rank << " of " << n << ": cclCommInitRank -> " << describeResult(r);
    if (r != cclSuccess) created[rank] = nullptr;
  }));
  std::lock_guard<std::mutex> lock(mu_);
  comms_ = created;
}

World::~World() {
  std::lock_guard<std::mutex> lock(mu_);
  for (cclComm_t& c : comms_) {
    if (!c) continue;
    const cclResult_t r = cclCommDestroy(c);
    EXPECT_EQ(r, cclSuccess) << "cclCommDestroy -> " << describeResult(r);
    c = nullptr;
  }
}

int World::size() const { return threads_.size(); }

bool World::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (cclComm_t c : comms_)
    if (!c) return false;
  return true;
}

cclComm_t World::comm(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return comms_.at(rank);
}

void World::run(const RankFn& fn, std::chrono::seconds deadline) {
  if (!ready()) {
    ADD_FAILURE() << "the world of " << size() << " ranks has no communicators";
    tainted_ = true;
    return;
  }
  expectNoneThrew(threads_.run([&](int rank) { fn(rank, comm(rank)); }, deadline));
  if (::testing::Test::HasFailure()) tainted_ = true;
}

void World::forgetComm(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  comms_.at(rank) = nullptr;
}

std::string describeResult(cclResult_t r, cclComm_t comm) {
  return std::string(cclGetErrorString(r)) + " (" + std::to_string(static_cast<int>(r)) + "): '" +
         cclGetLastError(comm) + "'";
}

}  // namespace ccltest
