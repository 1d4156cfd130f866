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
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ccl::torch {

// What the worker's threads have run (tasks, completions, and what they held: tensors, Works,
// thread-local state), kept until a caller's thread releases it (see Worker).
class Parked {
 public:
  // Keeps `item`.
  void park(std::function<void()> item);
  // Releases what is parked, on the calling thread.
  void release();
  // Has Python's main thread release `parked` soon (a pending call, run between two bytecodes
  // under the GIL), for what no caller's thread will release: the Work of a call that was
  // dropped before the call completed. A thread of the worker's may ask it: nothing here takes
  // the GIL. Once Python exits (pythonExiting) it asks nothing: what is parked waits for a
  // caller's thread, as before.
  static void releaseOnPythonMainThread(const std::shared_ptr<Parked>& parked);
  // Python's atexit: from now on no pending call is asked for (the interpreter is finalizing).
  static void pythonExiting();

 private:
  std::mutex mutex_;
  std::vector<std::function<void()>> items_;
};

// What a Work shares with the threads that complete its call, which never hold the Work itself
// once it completed: the Work then goes on the thread that drops it last.
struct Settlement {
  std::mutex mutex;
  std::condition_variable cv;
  bool settled = false;            // the Future's completion ran and is parked
  bool dropped = false;            // the Work went before that
  std::shared_ptr<Parked> parked;  // the worker's (Work::complete)
};

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
// which aborts the process (std::terminate, SIGABRT). What has run is parked (parked()) and
// released on a caller's thread: by the next post(), by the destructor, and by Work::wait(),
// which waits until what its call held is parked, so that a call that was waited for holds
// nothing of the caller's once the caller drops its Work (a large tensor the caller frees
// after a synchronous call is freed then, not at the next call). A Work dropped without wait()
// releases it too, when it goes after its call completed; dropped before, Python's main thread
// releases it once the call has completed (Parked::releaseOnPythonMainThread).
class Worker {
 public:
  explicit Worker(std::string name);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void post(std::function<void()> task);

  // Runs `completion` (a Future's) on a completer thread, then parks it and runs `parked`.
  void settle(std::function<void()> completion, std::function<void()> parked);

  const std::shared_ptr<Parked>& parked() const { return parked_; }

  // Whether the calling thread is a completer thread (of any Worker): a Future callback.
  static bool onCompleter();
  // Whether it is a worker or completer thread (of any Worker): one that must free no tensor.
  static bool onWorkerThread();

  static constexpr size_t kMaxCompleters = 16;

 private:
  void loop();
  void completerLoop();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  const std::shared_ptr<Parked> parked_ = std::make_shared<Parked>();  // Works hold it too
  bool stop_ = false;
  std::condition_variable settleCv_;
  std::deque<std::pair<std::function<void()>, std::function<void()>>> settling_;  // settle()'s
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
  // On a caller's thread, after its call completed, releases what the worker parked (the
  // call's tensors among them); before, leaves that to the completion (Settlement::dropped).
  // On a thread of the worker's (which dropped the last reference when it completed the call),
  // parks what this Work holds instead of freeing it there.
  ~Work() override;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Once the call ran and its Future's completion (callbacks included) is done; inside a Future
  // callback, once the Future holds the result.
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  // Waits at most `timeout` (or, when none is given, the call's or the group's timeout);
  // past it raises DistBackendError. A failed call rethrows its error. Then waits for the
  // Future's completion, its callbacks included (as gloo's, whose Work completes after them),
  // and releases what the worker parked (Worker), its call's tensors among them. Inside a
  // Future callback, which may be this Work's own completion, it waits only for the Future to
  // hold the result, and releases nothing.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  float getDuration() const override;
  std::chrono::milliseconds getTimeout() const override { return timeout_; }

  // Called once, on the worker, when the call has run (error: what it threw) and what it held
  // is parked: the Work completes now, its Future on one of `worker`'s completer threads. That
  // completion holds the Future and the outputs, not the Work, and is parked in turn; the
  // worker's reference, `self`, goes when this returns: the caller's are then the Work's last.
  static void complete(c10::intrusive_ptr<Work> self, std::exception_ptr error, Worker& worker);

 private:
  const std::string what_;
  std::vector<at::Tensor> outputs_;  // moved to the parked ones by a worker's ~Work
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point posted_;
  std::chrono::steady_clock::time_point done_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const std::shared_ptr<Settlement> settlement_ = std::make_shared<Settlement>();
};

}  // namespace ccl::torch
