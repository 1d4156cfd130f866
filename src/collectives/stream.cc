// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/stream.h"

#include "common/error.h"

namespace ccl::coll {

HostStream::HostStream() : thread_([this] { loop(); }) {}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HostStream::enqueue(Step step) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(step));
    ++enqueued_;
  }
  cv_.notify_all();
}

Event HostStream::record() {
  std::lock_guard<std::mutex> lock(mutex_);
  return Event{this, enqueued_};
}

void HostStream::wait(const Event& event) {
  if (!event.stream || event.stream == this) return;  // this stream's own order already holds
  enqueue([event] { event.stream->block(event); });
}

void HostStream::block(const Event& event) {
  CCL_CHECK(event.stream == this, cclInternalError, "an event blocked on a stream that did not record it");
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_ >= event.ticket; });
}

bool HostStream::reached(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ >= event.ticket;
}

cclResult_t HostStream::takeError(std::string* message) {
  std::lock_guard<std::mutex> lock(mutex_);
  const cclResult_t e = error_;
  if (message) *message = message_;
  error_ = cclSuccess;
  message_.clear();
  return e;
}

void HostStream::loop() {
  for (;;) {
    Step step;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      step = std::move(queue_.front());
      queue_.pop_front();
    }
    cclResult_t code = cclSuccess;
    std::string what;
    try {
      step();
    } catch (const Error& e) {
      code = e.code();
      what = e.what();
    } catch (const std::exception& e) {
      code = cclInternalError;
      what = e.what();
    } catch (...) {
      code = cclInternalError;
      what = "unknown exception";
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++done_;
      if (code != cclSuccess && error_ == cclSuccess) {
        error_ = code;
        message_ = std::move(what);
      }
    }
    cv_.notify_all();
  }
}

}  // namespace ccl::coll
