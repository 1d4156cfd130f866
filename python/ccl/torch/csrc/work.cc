// SPDX-License-Identifier: BSD-3-Clause
#include "work.h"

#include <c10/util/Exception.h>
#include <pthread.h>

namespace ccl::torch {

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
}

void Worker::settle(std::function<void()> completion) {
  std::lock_guard<std::mutex> lock(mutex_);
  settling_.push_back(std::move(completion));
  if (idleCompleters_ < settling_.size() && completers_.size() < kMaxCompleters)
    completers_.emplace_back([this] { completerLoop(); });
  settleCv_.notify_one();
}

void Worker::completerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idleCompleters_;
    settleCv_.wait(lock, [this] { return stopSettling_ || !settling_.empty(); });
    --idleCompleters_;
    if (settling_.empty()) return;  // stopping and drained
    std::function<void()> completion = std::move(settling_.front());
    settling_.pop_front();
    lock.unlock();
    completion();
    lock.lock();
    finished_.push_back(std::move(completion));
  }
}

void Worker::post(std::function<void()> task) {
  std::vector<std::function<void()>> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    finished.swap(finished_);
  }
  cv_.notify_one();
}  // `finished` is released here, on the caller's thread

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
    std::lock_guard<std::mutex> lock(mutex_);
    finished_.push_back(std::move(task));
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
  lock.unlock();
  // The Future completes on a completer thread just after: once wait() returns, the Future
  // holds the result too (its completed flag is set before its callbacks run).
  future_->wait();
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> Work::getFuture() { return future_; }

float Work::getDuration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(completed_, "ccl: getDuration of a call that has not completed");
  return std::chrono::duration<float, std::milli>(done_ - posted_).count();
}

void Work::complete(std::exception_ptr error, Worker& worker) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = std::chrono::steady_clock::now();
  }
  // The Work first, then the Future: a Future callback may look at the Work.
  finish(error);
  worker.settle([self = c10::intrusive_ptr<Work>::reclaim_copy(this), error] {
    if (error)
      self->future_->setError(error);
    else
      self->future_->markCompleted(c10::IValue(self->outputs_));
  });
}

}  // namespace ccl::torch
