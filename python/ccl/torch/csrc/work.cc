// SPDX-License-Identifier: BSD-3-Clause
// Python.h first, as Python asks (it sets feature macros the system headers read).
#include <Python.h>

#include "work.h"

#include <c10/util/Exception.h>
#include <pthread.h>

namespace ccl::torch {
namespace {

thread_local bool tlsCompleter = false;
thread_local bool tlsWorker = false;

// The Parked lists Python's main thread is to release, and whether it has been asked to (one
// pending call for them all: the interpreter's queue of pending calls is short). No thread
// waits for the GIL while holding `mutex` (Py_AddPendingCall takes no GIL), so the pending call
// and the atexit hook, which hold the GIL, can take it.
struct MainThreadRelease {
  std::mutex mutex;
  std::vector<std::weak_ptr<Parked>> lists;
  bool asked = false;
  bool exiting = false;  // atexit ran: the interpreter is finalizing, ask for nothing more
};
MainThreadRelease& mainThreadRelease() {
  static auto* r = new MainThreadRelease;  // never destroyed: worker threads may outlive statics
  return *r;
}

// Runs on Python's main thread, under the GIL.
int releaseParkedLists(void*) {
  std::vector<std::weak_ptr<Parked>> lists;
  {
    MainThreadRelease& r = mainThreadRelease();
    std::lock_guard<std::mutex> lock(r.mutex);
    lists.swap(r.lists);
    r.asked = false;
  }
  for (const std::weak_ptr<Parked>& l : lists)
    if (std::shared_ptr<Parked> parked = l.lock()) parked->release();
  return 0;
}

}  // namespace

void Parked::park(std::function<void()> item) {
  std::lock_guard<std::mutex> lock(mutex_);
  items_.push_back(std::move(item));
}

void Parked::release() {
  std::vector<std::function<void()>> items;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items.swap(items_);
  }
}  // `items` is released here, outside the lock (a tensor's release may take the GIL)

void Parked::releaseOnPythonMainThread(const std::shared_ptr<Parked>& parked) {
  MainThreadRelease& r = mainThreadRelease();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.exiting || !Py_IsInitialized()) return;
  r.lists.push_back(parked);
  if (r.asked) return;
  // -1: the interpreter's queue is full; what is parked then waits for a caller's thread.
  r.asked = Py_AddPendingCall(&releaseParkedLists, nullptr) == 0;
  if (!r.asked) r.lists.clear();
}

void Parked::pythonExiting() {
  MainThreadRelease& r = mainThreadRelease();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.exiting = true;
}

bool Worker::onCompleter() { return tlsCompleter; }
bool Worker::onWorkerThread() { return tlsCompleter || tlsWorker; }

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
    parked_->park(std::move(completion));
    parked();  // after the park: a release that finds the call settled takes the completion too
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
  tlsWorker = true;
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

Work::~Work() {
  Settlement& s = *settlement_;
  std::shared_ptr<Parked> parked;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    parked = s.parked;
  }
  if (Worker::onWorkerThread()) {
    // The worker dropped the last reference as it completed the call (the caller had dropped
    // its own): what this Work holds is parked before the Work counts as dropped, so that the
    // release the completion then asks for takes it too.
    if (parked) parked->park([outputs = std::move(outputs_), future = std::move(future_)] {});
    bool settled = false;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      settled = s.settled;
      s.dropped = true;
    }
    if (settled && parked) Parked::releaseOnPythonMainThread(parked);
    return;
  }
  bool settled = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    settled = s.settled;
    s.dropped = true;
  }
  // A caller's thread: once the completion is parked, nothing of the worker's is still in use
  // by the call, and what it held is released here (its outputs with this Work's). Before, the
  // completion sees `dropped` and has it released once parked.
  if (settled && parked) parked->release();
}

bool Work::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!completed_ || !future_->completed()) return false;
  }
  // Outside a Future callback, once the completion is parked too (wait()'s condition), so that
  // the Work dropped then releases what the call held.
  if (Worker::onCompleter()) return true;
  std::lock_guard<std::mutex> lock(settlement_->mutex);
  return settlement_->settled;
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
  // What the call held was parked before it completed; its completion, holding the Future and
  // the outputs, is parked once it has run. Inside a Future callback that completion may be
  // the one running this very callback: waiting for it there would never end.
  const bool release = !Worker::onCompleter();
  std::shared_ptr<Parked> parked;
  if (release) {
    std::unique_lock<std::mutex> settling(settlement_->mutex);
    settlement_->cv.wait(settling, [this] { return settlement_->settled; });
    parked = settlement_->parked;
  }
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
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->done_ = std::chrono::steady_clock::now();
  }
  {
    std::lock_guard<std::mutex> lock(self->settlement_->mutex);
    self->settlement_->parked = worker.parked();
  }
  // The Work first, then the Future: a Future callback may look at the Work.
  self->finish(error);
  // Neither holds the Work: a caller that drops it once the call completed is the last to
  // hold it, and its ~Work, on the caller's thread, releases what the call held.
  worker.settle(
      [future = self->future_, outputs = self->outputs_, error] {
        if (error)
          future->setError(error);
        else
          future->markCompleted(c10::IValue(outputs));
      },
      [settlement = self->settlement_] {
        bool dropped = false;
        {
          std::lock_guard<std::mutex> lock(settlement->mutex);
          settlement->settled = true;
          dropped = settlement->dropped;
        }
        settlement->cv.notify_all();
        // The Work went before: no caller's thread will release what the call held.
        if (dropped) Parked::releaseOnPythonMainThread(settlement->parked);
      });
}  // `self`: on the worker, the last reference when the caller dropped the Work (~Work parks)

}  // namespace ccl::torch
