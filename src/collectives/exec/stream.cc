// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/stream.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/error.h"

namespace ccl::coll {

void Stream::copy(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void Stream::copyBatch(std::span<const Copy> copies) {
  if (copies.empty()) return;
  enqueue([copies = std::vector<Copy>(copies.begin(), copies.end())] {
    for (const Copy& c : copies)
      if (c.bytes && c.dst != c.src) std::memcpy(c.dst, c.src, c.bytes);
  });
}

void CountedStream::enqueue(Step step) {
  noteCommands(1);
  counts_.hostFunctions.fetch_add(1, std::memory_order_relaxed);
  inner_->enqueue(std::move(step));
}

Event CountedStream::record() {
  noteCommands(1);
  return inner_->record();
}

void CountedStream::wait(const Event& event) {
  if (event.stream && event.ticket && &event.stream->underlying() != &underlying()) noteCommands(1);
  inner_->wait(event);
}

void CountedStream::copy(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) noteCommands(1);
  inner_->copy(dst, src, bytes);
}

void CountedStream::copyBatch(std::span<const Copy> copies) {
  if (!copies.empty()) noteCommands(1);
  inner_->copyBatch(copies);
}

void CountedStream::waitFlag(const std::atomic<uint64_t>* flag, uint64_t value) {
  noteCommands(1);
  inner_->waitFlag(flag, value);
}

void CountedStream::setFlag(std::atomic<uint64_t>* flag, uint64_t value) {
  noteCommands(1);
  inner_->setFlag(flag, value);
}

void Stream::waitFlag(const std::atomic<uint64_t>* flag, uint64_t value) {
  enqueue([flag, value] {
    for (int spins = 0; flag->load(std::memory_order_acquire) < value; ++spins) {
      if (spins < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
}

void Stream::setFlag(std::atomic<uint64_t>* flag, uint64_t value) {
  enqueue([flag, value] { flag->store(value, std::memory_order_release); });
}

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

cclResult_t HostStream::takeError(std::string* message) { return failure_.take(message); }

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
    failure_.run(step);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++done_;
    }
    cv_.notify_all();
  }
}

void FirstFailure::run(const std::function<void()>& step) {
  try {
    step();
  } catch (const Error& e) {
    record(e.code(), e.what());
  } catch (const std::exception& e) {
    record(cclInternalError, e.what());
  } catch (...) {
    record(cclInternalError, "unknown exception");
  }
}

void FirstFailure::record(cclResult_t code, std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (code_ != cclSuccess) return;
  code_ = code;
  message_ = std::move(message);
}

cclResult_t FirstFailure::peek(std::string* message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (message) *message = message_;
  return code_;
}

cclResult_t FirstFailure::take(std::string* message) {
  std::lock_guard<std::mutex> lock(mutex_);
  const cclResult_t c = code_;
  if (message) *message = message_;
  code_ = cclSuccess;
  message_.clear();
  return c;
}

}  // namespace ccl::coll
