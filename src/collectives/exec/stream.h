// SPDX-License-Identifier: BSD-3-Clause
// Streams and events, as an interface: work enqueued on a stream runs in order, after the
// call that enqueued it has returned; an event marks a point in one stream's order that
// another stream (or the host) can wait for. The host implementation runs steps on a worker
// thread of its own; it makes host collectives asynchronous (cclHostStreamCreate) and is
// what tests of stream-ordered execution run on, without a GPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "ccl/ccl.h"

namespace ccl::coll {

class Stream;

// The first failure of a stream's steps, recorded by whichever thread ran them, taken by
// Stream::takeError. Shared by every Stream implementation.
class FirstFailure {
 public:
  // Runs `step`; an exception it throws becomes the failure, unless one is recorded already.
  void run(const std::function<void()>& step);
  void record(cclResult_t code, std::string message);
  cclResult_t take(std::string* message);
  // The failure, left in place (a failure that stays: every later reader sees it too).
  cclResult_t peek(std::string* message);

 private:
  std::mutex mutex_;
  cclResult_t code_ = cclSuccess;
  std::string message_;
};

// The point of `stream` after its `ticket` first steps (0: the beginning: reached at once).
struct Event {
  Stream* stream = nullptr;
  uint64_t ticket = 0;
};

class Stream {
 public:
  // A step may throw ccl::Error (or any exception): the stream records the first failure
  // and goes on with the next step, as a CUDA stream goes on after a failed kernel.
  using Step = std::function<void()>;

  virtual ~Stream() = default;
  virtual void enqueue(Step step) = 0;
  // An event reached once every step enqueued so far has run.
  virtual Event record() = 0;
  // Steps enqueued after this call run only once `event` is reached.
  virtual void wait(const Event& event) = 0;
  // Blocks the calling thread until `event` (an event of this stream) is reached.
  virtual void block(const Event& event) = 0;
  virtual bool reached(const Event& event) = 0;
  // Blocks until every step enqueued so far has run.
  void synchronize() { block(record()); }
  // The first failure of a step since the last call, and its message; cclSuccess if none.
  virtual cclResult_t takeError(std::string* message) = 0;
  // The device's handle of the stream (a cudaStream_t), for links and kernels that enqueue
  // device work on it; nullptr for a host stream.
  virtual void* native() { return nullptr; }
  // Enqueues a copy of `bytes` between two buffers the stream's work can reach (host memory
  // on a host stream; device, pinned or managed memory on a CUDA stream).
  virtual void copy(void* dst, const void* src, size_t bytes);
  // Enqueues every copy of `copies` as one command, in no particular order among them
  // (cudaMemcpyBatchAsync on CUDA; here one step that copies them all).
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  virtual void copyBatch(std::span<const Copy> copies);
  // Steps enqueued after this call run once *flag >= value; a host thread sets the flag.
  // The flag is in memory the stream's work reaches (pinned host memory for a CUDA stream).
  // On a device the wait is the device's own (a stream memory operation, or a kernel that
  // polls the flag), so no host function ever blocks CUDA's callback thread, which every
  // stream of the process shares: work that waits for the host this way cannot stall the
  // host functions the host is waiting for.
  virtual void waitFlag(const std::atomic<uint64_t>* flag, uint64_t value);
  // Sets *flag to `value` once the steps enqueued so far have run, for a host thread that
  // polls it: the other direction of waitFlag (a one-thread kernel on CUDA). Unlike an event,
  // the flag keeps its meaning however much is enqueued after it.
  virtual void setFlag(std::atomic<uint64_t>* flag, uint64_t value);
  // Notes `n` commands enqueued on native() behind this object (kernel launches), for a
  // stream that counts what is enqueued on it (CountedStream).
  virtual void noteCommands(size_t n) { (void)n; }
  // The stream this one forwards to, if it is a wrapper (CountedStream); else itself.
  virtual Stream& underlying() { return *this; }
};

// Commands enqueued on streams, as a device's queue holds them (kernels, copies, events
// recorded and waited for, flag waits and stores, host functions), and of those the host
// functions.
struct StreamCounts {
  std::atomic<uint64_t> commands{0};
  std::atomic<uint64_t> hostFunctions{0};
};

// A stream that forwards everything to another (owned) and counts what is enqueued through it
// in `counts`: how a communicator's device calls are measured, on a GPU and in the tests
// alike. Its events are the inner stream's.
class CountedStream final : public Stream {
 public:
  CountedStream(std::unique_ptr<Stream> inner, StreamCounts& counts) : inner_(std::move(inner)), counts_(counts) {}
  void enqueue(Step step) override;
  Event record() override;
  void wait(const Event& event) override;
  void block(const Event& event) override { inner_->block(event); }
  bool reached(const Event& event) override { return inner_->reached(event); }
  cclResult_t takeError(std::string* message) override { return inner_->takeError(message); }
  void* native() override { return inner_->native(); }
  void copy(void* dst, const void* src, size_t bytes) override;
  void copyBatch(std::span<const Copy> copies) override;
  void waitFlag(const std::atomic<uint64_t>* flag, uint64_t value) override;
  void setFlag(std::atomic<uint64_t>* flag, uint64_t value) override;
  void noteCommands(size_t n) override { counts_.commands.fetch_add(n, std::memory_order_relaxed); }
  Stream& underlying() override { return inner_->underlying(); }

 private:
  std::unique_ptr<Stream> inner_;
  StreamCounts& counts_;
};

class HostStream final : public Stream {
 public:
  HostStream();
  ~HostStream() override;  // runs what is queued, then stops
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void enqueue(Step step) override;
  Event record() override;
  void wait(const Event& event) override;
  void block(const Event& event) override;
  bool reached(const Event& event) override;
  cclResult_t takeError(std::string* message) override;

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;  // steps queued, steps done, stopping
  std::deque<Step> queue_;
  uint64_t enqueued_ = 0, done_ = 0;
  bool stop_ = false;
  FirstFailure failure_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace ccl::coll
