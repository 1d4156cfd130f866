// SPDX-License-Identifier: BSD-3-Clause
// The asynchronous half of ccl's c10d backend: one FIFO worker thread per communicator runs
// the calls in the order the program issued them (the order every rank issues them, as a
// CUDA stream orders NCCL's), and each call's Work completes when its turn has run.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ccl::torch {

// Runs posted tasks one at a time, in order, on a thread of its own. The destructor runs
// what is queued, then joins: a Work handed out is always completed.
//
// Futures are completed off that thread (settle): a Future's callbacks run inside its
// completion, and one that issues a call on this group and waits for it (PyTorch's PowerSGD
// DDP hook does) would otherwise wait for the very thread it blocks. Each completion runs on
// an idle completer thread, or on a new one (at most kMaxCompleters), so a callback that
// blocks never holds up another call's completion.
//
// A task that has run is not destroyed on the worker thread: it may hold the last reference
// to a tensor whose Python object must then be freed under the GIL, and a thread that is not
// Python's and takes the GIL while the interpreter finalizes (a program that exits while a
// call runs or has just failed) is ended by pthread_exit inside that noexcept destructor,
// which aborts the process (std::terminate, SIGABRT). Tasks that have run are released by
// the next post() or by the destructor, on the caller's thread.
class Worker {
 public:
  explicit Worker(std::string name);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void post(std::function<void()> task);

  // Runs `completion` (a Future's) on a completer thread; released as tasks are.
  void settle(std::function<void()> completion);

  static constexpr size_t kMaxCompleters = 16;

 private:
  void loop();
  void completerLoop();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::function<void()>> finished_;  // tasks that have run, to release off this thread
  bool stop_ = false;
  std::condition_variable settleCv_;
  std::deque<std::function<void()>> settling_;
  std::vector<std::thread> completers_;
  size_t idleCompleters_ = 0;
  bool stopSettling_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// One call's completion. The outputs are what the Future carries (DDP's reducer reads the
// bucket from it); the tensors stay referenced until the call has run.
class Work : public c10d::Work {
 public:
  Work(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
       std::chrono::milliseconds timeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  // Waits at most `timeout` (or, when none is given, the call's or the group's timeout);
  // past it raises DistBackendError. A failed call rethrows its error.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  float getDuration() const override;
  std::chrono::milliseconds getTimeout() const override { return timeout_; }

  // Called once, on the worker, when the call has run (error: what it threw): the Work
  // completes now, its Future on one of `worker`'s completer threads. wait() returns once
  // both have (the Future's callbacks may still be running then).
  void complete(std::exception_ptr error, Worker& worker);

 private:
  const std::string what_;
  const std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point posted_;
  std::chrono::steady_clock::time_point done_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ccl::torch
