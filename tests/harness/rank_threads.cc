// SPDX-License-Identifier: BSD-3-Clause
#include "rank_threads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ccltest {

struct RankThreads::State {
  explicit State(int n) : size(n), finished(n, 0), errors(n) {}

  const int size;
  std::vector<std::thread> threads;

  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;  // bumped for every job
  // The running job; run() waits for every rank (or ends the process), so it outlives its use.
  const RankBody* job = nullptr;
  int done = 0;
  std::vector<char> finished;
  std::vector<std::exception_ptr> errors;
  bool stop = false;
};

namespace {

void rankLoop(const std::shared_ptr<RankThreads::State>& sp, int rank) {
  RankThreads::State& s = *sp;
  uint64_t seen = 0;
  for (;;) {
    const RankBody* job;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return s.stop || s.generation != seen; });
      if (s.stop) return;
      seen = s.generation;
      job = s.job;
    }
    std::exception_ptr error;
    try {
      (*job)(rank);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(s.mu);
      // Moved, not copied: this thread keeps no reference, so the exception is freed by the
      // thread that read it (a reference count inside the uninstrumented libstdc++ would
      // hide that order from TSan).
      s.errors[rank] = std::move(error);
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

}  // namespace

RankThreads::RankThreads(int n) : state_(std::make_shared<State>(n)) {
  for (int r = 0; r < n; ++r) state_->threads.emplace_back(rankLoop, state_, r);
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  for (std::thread& t : state_->threads) t.join();
}

int RankThreads::size() const { return state_->size; }

std::vector<std::exception_ptr> RankThreads::run(const RankBody& fn, std::chrono::seconds deadline, const char* what) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.job = &fn;
  s.done = 0;
  std::fill(s.finished.begin(), s.finished.end(), 0);
  std::fill(s.errors.begin(), s.errors.end(), nullptr);
  ++s.generation;
  s.cv.notify_all();
  if (s.cv.wait_for(lock, deadline, [&] { return s.done == s.size; })) {
    s.job = nullptr;
    std::vector<std::exception_ptr> errors(s.size);
    errors.swap(s.errors);
    return errors;
  }
  std::string message;
  if (what) {
    message = what;
  } else {
    message = "ranks";
    for (int r = 0; r < s.size; ++r) {
      if (s.finished[r]) continue;
      message += ' ';
      message += std::to_string(r);
    }
    message += " of ";
    message += std::to_string(s.size);
  }
  message += " did not return within ";
  message += std::to_string(deadline.count());
  message += " s; exiting because a stuck thread may still write to this test's buffers";
  exitStuck(message);
}

std::vector<std::exception_ptr> runRanks(int n, const RankBody& fn, std::chrono::seconds deadline) {
  RankThreads threads(n);
  return threads.run(fn, deadline);
}

void runWithDeadline(const std::function<void()>& fn, const char* what, std::chrono::seconds deadline) {
  RankThreads thread(1);
  const std::exception_ptr error = thread.run([&](int) { fn(); }, deadline, what)[0];
  if (error) ADD_FAILURE() << what << " threw: " << describeException(error);
}

std::string describeException(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

void expectNoneThrew(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    if (errors[r]) ADD_FAILURE() << "rank " << r << " threw: " << describeException(errors[r]);
}

std::vector<int> runRankProcesses(int n, const std::function<int(int rank)>& body, std::chrono::seconds deadline) {
  int gate[2];
  if (pipe(gate) != 0) return std::vector<int>(static_cast<size_t>(n), -1);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(gate[1]);
      char c;
      while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      const int code = body(rank);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);  // every child reads end-of-file: they start together
  const auto end = std::chrono::steady_clock::now() + deadline;
  std::vector<int> codes(static_cast<size_t>(n), -1);
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (pids[r] > 0 && waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pids[r] = 0;
        --left;
      } else if (pids[r] < 0) {  // fork failed
        pids[r] = 0;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > end) {
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL), waitpid(p, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

}  // namespace ccltest
