// SPDX-License-Identifier: BSD-3-Clause
#include "work.h"

#include <c10/util/Exception.h>
#include <pthread.h>

namespace ccl::torch {
namespace {

thread_local bool tlsCompleter = false;

}  // namespace

void Parked::park(std::function<void()> item, const std::function<void()>& then) {
  std::lock_guard<std::mutex> lock(mutex_);
  items_.push_back(std::move(item));
  if (then) then();
}

void Parked::release() {
  std::vector<std::function<void()>> items;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items.swap(items_);
  }
}  // `items` is released here, outside the lock (a tensor's release may take the GIL)

bool Worker::onCompleter() { return tlsCompleter; }

Worker::Worker(std::string name) : name_(std::move(name)), thread_([this] { loop(); }) {
  // Linux caps thread names at 15 characters; the name helps in gdb and top -H.
  pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopSettling_ = true;
  }
  settleCv_.notify_all();
  for (std::thread& t : completers_) t.join();  // each leaves once nothing is left to settle
  parked_->release();
}

void Worker::settle(std::function<void()> completion, std::function<void()> parked) {
  std::lock_guard<std::mutex> lock(mutex_);
  settling_.emplace_back(std::move(completion), std::move(parked));
  if (idleCompleters_ < settling_.size() && completers_.size() < kMaxCompleters)
    completers_.emplace_back([this] { completerLoop(); });
  settleCv_.notify_one();
}

void Worker::completerLoop() {
  tlsCompleter = true;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idleCompleters_;
    settleCv_.wait(lock, [this] { return stopSettling_ || !settling_.empty(); });
    --idleCompleters_;
    if (settling_.empty()) return;  // stopping and drained
    auto [completion, parked] = std::move(settling_.front());
    settling_.pop_front();
    lock.unlock();
    completion();
    parked_->park(std::move(completion), parked);
    lock.lock();
  }
}

void Worker::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  parked_->release();  // on the caller's thread
}

void Worker::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // tasks catch their own errors (see Backend::post)
    parked_->park(std::move(task));
  }
}

Work::Work(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
           std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      posted_(std::chrono::steady_clock::now()),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool Work::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && future_->completed();
}

bool Work::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> Work::result() { return outputs_; }

bool Work::wait(std::chrono::milliseconds timeout) {
  const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, limit, [this] { return completed_; }))
    C10_THROW_ERROR(DistBackendError, "ccl: " + what_ + " did not complete within " + std::to_string(limit.count()) +
                                          " ms (rank " + std::to_string(rank_) +
                                          "; a peer that never made the same call, or a dead one)");
  // What the call held was parked before it completed; its completion, holding this Work, is
  // parked once it has run. Inside a Future callback that completion may be the one running
  // this very callback: waiting for it there would never end.
  const bool release = !Worker::onCompleter();
  if (release) cv_.wait(lock, [this] { return settled_; });
  const std::shared_ptr<Parked> parked = parked_;
  lock.unlock();
  // The Future completes on a completer thread just after the Work: once wait() returns, the
  // Future holds the result too (its completed flag is set before its callbacks run).
  future_->wait();
  // Nothing of the worker's holds the call's tensors now: the caller's are freed when it
  // drops them and this Work, on its own thread.
  if (release && parked) parked->release();
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> Work::getFuture() { return future_; }

float Work::getDuration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(completed_, "ccl: getDuration of a call that has not completed");
  return std::chrono::duration<float, std::milli>(done_ - posted_).count();
}

void Work::complete(c10::intrusive_ptr<Work> self, std::exception_ptr error, Worker& worker) {
  Work* const work = self.get();
  {
    std::lock_guard<std::mutex> lock(work->mutex_);
    work->done_ = std::chrono::steady_clock::now();
    work->parked_ = worker.parked();
  }
  // The Work first, then the Future: a Future callback may look at the Work.
  work->finish(error);
  // `work` is alive when `parked` runs: the parked completion holds `self`.
  worker.settle(
      [self = std::move(self), error] {
        if (error)
          self->future_->setError(error);
        else
          self->future_->markCompleted(c10::IValue(self->outputs_));
      },
      [work] {
        std::lock_guard<std::mutex> lock(work->mutex_);
        work->settled_ = true;
        work->cv_.notify_all();
      });
}

}  // namespace ccl::torch
