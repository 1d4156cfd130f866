#include "world.h"

#include <gtest/gtest.h>

#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ccltest {

struct World::State {
  explicit State(int n) : size(n), comms(n, nullptr), finished(n, 0) {}

  const int size;
  std::vector<cclComm_t> comms;
  std::vector<std::thread> threads;

  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;  // bumped for every job
  RankFn job;
  int done = 0;
  std::vector<char> finished;
  bool stop = false;
};

namespace {

void rankLoop(const std::shared_ptr<World::State>& sp, int rank) {
  World::State& s = *sp;
  uint64_t seen = 0;
  for (;;) {
    RankFn job;
    cclComm_t comm;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return s.stop || s.generation != seen; });
      if (s.stop) return;
      seen = s.generation;
      job = s.job;
      comm = s.comms[rank];
    }
    try {
      job(rank, comm);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank << " threw: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "rank " << rank << " threw a non-standard exception";
    }
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.finished[rank] = 1;
      ++s.done;
    }
    s.cv.notify_all();
  }
}

// Records the failure (also on stderr, which survives when stdout is buffered elsewhere)
// and ends the process: whatever is stuck may still use memory of the running test.
[[noreturn]] void exitStuck(const std::string& message) {
  ADD_FAILURE() << message;
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(3);
}

// Runs fn on every rank; on a missed deadline the test fails and the process exits.
void dispatch(World::State& s, const RankFn& fn, std::chrono::seconds deadline) {
  std::unique_lock<std::mutex> lock(s.mu);
  s.job = fn;
  s.done = 0;
  std::fill(s.finished.begin(), s.finished.end(), 0);
  ++s.generation;
  s.cv.notify_all();
  if (s.cv.wait_for(lock, deadline, [&] { return s.done == s.size; })) {
    s.job = nullptr;
    return;
  }
  std::string stuck;
  for (int r = 0; r < s.size; ++r)
    if (!s.finished[r]) stuck += std::string(" ") + std::to_string(r);
  exitStuck("ranks" + stuck + " of " + std::to_string(s.size) + " did not return within " +
            std::to_string(deadline.count()) +
            " s; exiting because a stuck rank may still write to this test's buffers");
}

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

World::World(int n, const cclConfig_t* config) : state_(std::make_shared<State>(n)) {
  for (int r = 0; r < n; ++r) state_->threads.emplace_back(rankLoop, state_, r);
  cclUniqueId id{};
  const cclResult_t got = cclGetUniqueId(&id);
  if (got != cclSuccess) {
    ADD_FAILURE() << "cclGetUniqueId -> " << describeResult(got);
    return;
  }
  std::vector<cclComm_t> created(n, nullptr);
  dispatch(
      *state_,
      [&](int rank, cclComm_t) {
        // The library reads the config; a copy per rank keeps ranks from sharing one object.
        cclConfig_t local = config ? *config : cclConfig_t{};
        const cclResult_t r = config ? cclCommInitRankConfig(&created[rank], n, id, rank, &local)
                                     : cclCommInitRank(&created[rank], n, id, rank);
        EXPECT_EQ(r, cclSuccess) << "rank " << rank << " of " << n << ": cclCommInitRank -> " << describeResult(r);
        if (r != cclSuccess) created[rank] = nullptr;
      },
      kRunDeadline);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->comms = created;
}

World::~World() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (cclComm_t& c : state_->comms) {
      if (!c) continue;
      const cclResult_t r = cclCommDestroy(c);
      EXPECT_EQ(r, cclSuccess) << "cclCommDestroy -> " << describeResult(r);
      c = nullptr;
    }
    state_->stop = true;
  }
  state_->cv.notify_all();
  for (std::thread& t : state_->threads) t.join();
}

int World::size() const { return state_->size; }

bool World::ready() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (cclComm_t c : state_->comms)
    if (!c) return false;
  return true;
}

cclComm_t World::comm(int rank) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->comms.at(rank);
}

void World::run(const RankFn& fn, std::chrono::seconds deadline) {
  if (!ready()) {
    ADD_FAILURE() << "the world of " << size() << " ranks has no communicators";
    tainted_ = true;
    return;
  }
  dispatch(*state_, fn, deadline);
  if (::testing::Test::HasFailure()) tainted_ = true;
}

void World::forgetComm(int rank) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->comms.at(rank) = nullptr;
}

void runWithDeadline(const std::function<void()>& fn, const char* what, std::chrono::seconds deadline) {
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<Done>();
  std::thread worker([state, &fn] {
    try {
      fn();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
    std::lock_guard<std::mutex> lock(state->mu);
    state->done = true;
    state->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(state->mu);
  if (!state->cv.wait_for(lock, deadline, [&] { return state->done; })) {
    exitStuck(std::string(what) + " did not return within " + std::to_string(deadline.count()) + " s; exiting");
  }
  lock.unlock();
  worker.join();
}

std::string describeResult(cclResult_t r, cclComm_t comm) {
  return std::string(cclGetErrorString(r)) + " (" + std::to_string(static_cast<int>(r)) + "): '" +
         cclGetLastError(comm) + "'";
}

}  // namespace ccltest
