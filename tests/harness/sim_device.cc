// SPDX-License-Identifier: BSD-3-Clause
#include "sim_device.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "collectives/exec/compute_steps.h"
#include "collectives/exec/stream_executor.h"
#include "common/error.h"

namespace ccltest {

using ccl::Error;
using ccl::coll::Event;
using ccl::coll::Stream;

thread_local int SimDriver::currentDevice = 0;

namespace {

thread_local SimDriver::Commands threadEnqueued;

// The process's "GPU": one queue per stream, a callback thread that runs host functions and a
// device thread that runs device work, each taking the first runnable item at the head of a
// stream. A wait at a stream's head is resolved by whichever thread looks, without blocking.
class Engine {
 public:
  struct Item {
    enum Kind { kHost, kDevice, kWaitEvent, kWaitFlag } kind;
    Stream::Step step;
    const void* eventStream = nullptr;  // kWaitEvent: an engine stream's queue
    uint64_t ticket = 0;                // kWaitEvent: its ticket; kWaitFlag: the flag's value
    const std::atomic<uint64_t>* flag = nullptr;
  };
  struct Queue {
    std::deque<Item> items;
    uint64_t enqueued = 0, done = 0;
    bool busy = false;  // its head item is running
    ccl::coll::FirstFailure failure;
  };

  Engine() : host_([this] { loop(true); }), device_([this] { loop(false); }) {}

  Queue* add() {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_.push_back(std::make_unique<Queue>());
    return queues_.back().get();
  }
  void push(Queue* q, Item item) {
    (item.kind == Item::kHost     ? threadEnqueued.hostFunctions
     : item.kind == Item::kDevice ? threadEnqueued.device
                                  : threadEnqueued.waits)++;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      q->items.push_back(std::move(item));
      ++q->enqueued;
    }
    cv_.notify_all();
  }
  uint64_t enqueued(Queue* q) {
    std::lock_guard<std::mutex> lock(mutex_);
    return q->enqueued;
  }
  bool reached(Queue* q, uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    return q->done >= ticket;
  }
  void block(Queue* q, uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return q->done >= ticket; });
  }

 private:
  // Pops satisfied waits at the heads; returns a runnable item of the thread's kind.
  Queue* next(bool host) {
    for (auto& q : queues_) {
      while (!q->busy && !q->items.empty()) {
        Item& it = q->items.front();
        if (it.kind == Item::kWaitEvent) {
          const auto* other = static_cast<const Queue*>(it.eventStream);
          if (other->done < it.ticket) break;
        } else if (it.kind == Item::kWaitFlag) {
          if (it.flag->load(std::memory_order_acquire) < it.ticket) break;
        } else {
          if ((it.kind == Item::kHost) == host) {
            q->busy = true;
            return q.get();
          }
          break;
        }
        q->items.pop_front();
        ++q->done;
        cv_.notify_all();
      }
    }
    return nullptr;
  }

  void loop(bool host) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      Queue* q = next(host);
      if (!q) {
        // Flags change without a notification: look again soon.
        cv_.wait_for(lock, std::chrono::microseconds(50));
        continue;
      }
      Stream::Step step = std::move(q->items.front().step);
      lock.unlock();
      q->failure.run(step);
      lock.lock();
      q->items.pop_front();
      q->busy = false;
      ++q->done;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Queue>> queues_;  // never removed: the engine lives as long as the process
  std::thread host_, device_;
};

Engine& engine() {
  static Engine* e = new Engine;  // its threads run until the process exits
  return *e;
}

// A stream of the simulated device.
class EngineStream final : public Stream {
 public:
  EngineStream() : q_(engine().add()) {}
  ~EngineStream() override { synchronize(); }

  void enqueue(Step step) override { engine().push(q_, {Engine::Item::kHost, std::move(step)}); }
  // Device work: a kernel or a copy.
  void launch(Step step) { engine().push(q_, {Engine::Item::kDevice, std::move(step)}); }
  Event record() override {
    ++threadEnqueued.records;
    return Event{this, engine().enqueued(q_)};
  }
  void wait(const Event& e) override {
    if (!e.stream || e.ticket == 0) return;  // the beginning of a stream: reached
    auto* other = dynamic_cast<EngineStream*>(e.stream);
    CCL_CHECK(other, cclInternalError,
              std::string("a simulated device stream waits for an event of another kind: ") + typeid(*e.stream).name());
    if (other == this) return;
    Engine::Item it{Engine::Item::kWaitEvent, nullptr};
    it.eventStream = other->q_;
    it.ticket = e.ticket;
    engine().push(q_, std::move(it));
  }
  void block(const Event& e) override {
    CCL_CHECK(e.stream == this, cclInternalError, "an event blocked on a stream that did not record it");
    simDriver().noteBlocking();
    engine().block(q_, e.ticket);
  }
  bool reached(const Event& e) override { return engine().reached(q_, e.ticket); }
  cclResult_t takeError(std::string* m) override { return q_->failure.take(m); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes && dst != src) launch([dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }
  void copyBatch(std::span<const Copy> copies) override {
    if (copies.empty()) return;
    launch([copies = std::vector<Copy>(copies.begin(), copies.end())] {
      for (const Copy& c : copies)
        if (c.bytes && c.dst != c.src) std::memcpy(c.dst, c.src, c.bytes);
    });
  }
  void setFlag(std::atomic<uint64_t>* flag, uint64_t value) override {
    launch([flag, value] { flag->store(value, std::memory_order_release); });
  }
  void waitFlag(const std::atomic<uint64_t>* flag, uint64_t value) override {
    Engine::Item it{Engine::Item::kWaitFlag, nullptr};
    it.flag = flag;
    it.ticket = value;
    engine().push(q_, std::move(it));
  }

 private:
  Engine::Queue* q_;
};

// An engine stream as another Stream, not owned: a caller's CUDA stream as the device path
// sees it, or (asDevice) the same stream with every step launched as device work, as CUDA's
// kernels are.
class Borrowed final : public Stream {
 public:
  Borrowed(EngineStream& s, bool asDevice = false) : s_(s), asDevice_(asDevice) {}
  EngineStream& engineStream() { return s_; }
  void enqueue(Step step) override {
    if (asDevice_)
      s_.launch(std::move(step));
    else
      s_.enqueue(std::move(step));
  }
  Event record() override { return s_.record(); }
  void wait(const Event& e) override { s_.wait(e); }
  void block(const Event& e) override { s_.block(e); }
  bool reached(const Event& e) override { return s_.reached(e); }
  cclResult_t takeError(std::string* m) override { return s_.takeError(m); }
  void copy(void* dst, const void* src, size_t bytes) override { s_.copy(dst, src, bytes); }
  void copyBatch(std::span<const Copy> copies) override { s_.copyBatch(copies); }
  void waitFlag(const std::atomic<uint64_t>* flag, uint64_t value) override { s_.waitFlag(flag, value); }
  void setFlag(std::atomic<uint64_t>* flag, uint64_t value) override { s_.setFlag(flag, value); }

 private:
  EngineStream& s_;
  bool asDevice_;
};

EngineStream& engineStreamOf(Stream& stream) {
  Stream& s = stream.underlying();
  if (auto* b = dynamic_cast<Borrowed*>(&s)) return b->engineStream();
  auto* e = dynamic_cast<EngineStream*>(&s);
  CCL_CHECK(e, cclInternalError, "simulated kernels given a stream of another kind");
  return *e;
}

// The host kernels as device work (CUDA's kernels take no host thread).
class SimKernels final : public ccl::coll::StreamKernels {
 public:
  SimKernels(SimDriver& driver, int ordinal) : driver_(driver), ordinal_(ordinal) {}
  void enqueue(const std::shared_ptr<ccl::coll::StreamRun>& run, std::span<const ccl::coll::StepId> steps,
               Stream& stream) override {
    Borrowed device(engineStreamOf(stream), /*asDevice=*/true);
    int armed = ordinal_;
    if (driver_.failComputeOn.compare_exchange_strong(armed, -1)) {
      // The test's injected failure: this batch's kernel fails, and the call's later steps
      // do nothing (as a failed step makes them).
      device.enqueue([run] {
        run->failed.store(true, std::memory_order_release);
        throw ccl::Error(cclInternalError, "injected failure of a compute batch");
      });
    } else {
      int refuse = ordinal_;
      // A batch is of one kind (StreamKernels).
      if (!steps.empty() && ccl::coll::decodesStream(run->plan->steps[steps[0]].kind) &&
          driver_.refuseDecodeOn.compare_exchange_strong(refuse, -1))
        device.enqueue([run, ids = std::vector<ccl::coll::StepId>(steps.begin(), steps.end())] {
          for (ccl::coll::StepId id : ids) {
            const ccl::coll::Step& s = run->plan->steps[id];
            const bool hop = s.kind == ccl::coll::StepKind::kDecodeAddEncode;
            if (run->lengths[hop ? s.inSlot : s.slot] > 0) *bufferAt(run->buffers, hop ? s.in : s.src) ^= 0x5a;
          }
        });
      host_.enqueue(run, steps, device);
    }
    stream.noteCommands(1);  // one kernel, as a table-driven one on a GPU
  }

 private:
  SimDriver& driver_;
  int ordinal_;
  ccl::coll::HostKernels host_;
};

class SimDevice final : public ccl::coll::Device {
 public:
  SimDevice(SimDriver& d, int ordinal) : driver_(d), ordinal_(ordinal) {}
  int ordinal() const override { return ordinal_; }
  std::unique_ptr<Stream> wrap(void* stream) override {
    const int device = driver_.deviceOfStream(static_cast<cclStream_t>(stream));
    CCL_CHECK(device == ordinal_, cclInvalidUsage,
              "the stream belongs to device " + std::to_string(device) + ", but the communicator's device is " +
                  std::to_string(ordinal_) + " (cclCommCuDevice)");
    return std::make_unique<Borrowed>(static_cast<EngineStream&>(driver_.streamOf(static_cast<cclStream_t>(stream))));
  }
  std::unique_ptr<Stream> newStream() override { return std::make_unique<EngineStream>(); }
  std::unique_ptr<ccl::coll::StreamKernels> newKernels() override {
    return std::make_unique<SimKernels>(driver_, ordinal_);
  }
  ccl::coll::StagingMemory staging() override {
    // The driver, not this device: staging a link leaves behind is freed by the last link of
    // the device (links/staging_cache.h), possibly after this object went.
    ccl::coll::StagingMemory m;
    SimDriver* d = &driver_;
    m.alloc = [d](size_t bytes) { return d->allocStaging(bytes); };
    m.free = [d](void* p) { d->freeStaging(p); };
    m.allocOn = [d](size_t bytes, Stream&) { return d->allocStaging(bytes, /*ordered=*/true); };
    m.freeOn = [d](void* p, Stream* s) {
      if (s)
        engineStreamOf(*s).launch([d, p] { d->freeStaging(p, /*ordered=*/true); });
      else
        d->freeStaging(p, /*ordered=*/true);
    };
    return m;
  }
  void* allocZeroed(size_t bytes, Stream&) override { return driver_.alloc(bytes, ordinal_); }
  void free(void* p, Stream& stream) override {
    engineStreamOf(stream).launch([this, p] { driver_.release(p); });
  }
  int makeCurrent() override {
    const int previous = SimDriver::currentDevice;
    SimDriver::currentDevice = ordinal_;
    return previous;
  }
  void restore(int previous) override { SimDriver::currentDevice = previous; }

 private:
  SimDriver& driver_;
  int ordinal_;
};

}  // namespace

int SimDriver::deviceOf(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = memory_.upper_bound(a);
  if (it == memory_.begin()) return -1;
  --it;
  return a < it->first + it->second.bytes ? it->second.device : -1;
}

bool SimDriver::capturing(void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = capturing_.find(stream);
  return it != capturing_.end() && it->second;
}

void SimDriver::setCapturing(cclStream_t s, bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_[s] = on;
}

std::unique_ptr<ccl::coll::Device> SimDriver::open(int ordinal) {
  CCL_CHECK(ordinal >= 0 && ordinal < kDevices, cclInvalidUsage, "no simulated device " + std::to_string(ordinal));
  return std::make_unique<SimDevice>(*this, ordinal);
}

SimDriver::Commands SimDriver::threadCommands() { return threadEnqueued; }

SimDriver::Counts SimDriver::counts() {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void SimDriver::resetStagingPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.stagingPeak = counts_.stagingLive;
  counts_.stagingPeakBytes = counts_.stagingLiveBytes;
}

void SimDriver::noteBlocking() {
  ++threadEnqueued.blocking;
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.blockingCalls;
}

void* SimDriver::allocStaging(size_t bytes, bool ordered) {
  if (!ordered) noteBlocking();
  void* p = std::malloc(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  staging_[p] = bytes;
  counts_.stagingLiveBytes += bytes;
  counts_.stagingPeakBytes = std::max(counts_.stagingPeakBytes, counts_.stagingLiveBytes);
  ++counts_.stagingAllocs;
  if (!ordered) ++counts_.stagingSyncCalls;
  counts_.stagingPeak = std::max(counts_.stagingPeak, ++counts_.stagingLive);
  return p;
}

void SimDriver::freeStaging(void* p, bool ordered) {
  if (!ordered) noteBlocking();
  std::free(p);
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.stagingLiveBytes -= staging_[p];
  staging_.erase(p);
  if (!ordered) ++counts_.stagingSyncCalls;
  --counts_.stagingLive;
}

void* SimDriver::alloc(size_t bytes, int device) {
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (!p) throw std::bad_alloc();
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.deviceAllocs;
  memory_[reinterpret_cast<uintptr_t>(p)] = Block{bytes ? bytes : 1, device};
  return p;
}

void SimDriver::release(void* p) {
  if (!p) return;
  if (releaseHook) releaseHook(p);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
}

cclStream_t SimDriver::newStream(int device) {
  auto s = std::make_unique<EngineStream>();
  auto handle = reinterpret_cast<cclStream_t>(s.get());
  std::lock_guard<std::mutex> lock(mutex_);
  streams_[handle] = StreamEntry{std::move(s), device};
  return handle;
}

void SimDriver::destroyStream(cclStream_t s) {
  // As CUDA keeps what an event recorded on a destroyed stream refers to, the stream object
  // is kept (retired): a communicator may still hold an event of it.
  std::unique_ptr<Stream> stream;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(s);
    if (it == streams_.end()) return;
    stream = std::move(it->second.stream);
    streams_.erase(it);
  }
  stream->synchronize();  // unlocked: its steps may free memory here
  std::lock_guard<std::mutex> lock(mutex_);
  retired_.push_back(std::move(stream));
}

SimDriver::StreamEntry& SimDriver::entryOf(cclStream_t s) {
  // CUDA's explicit handle of the legacy default stream (cudaStreamLegacy) names the calling
  // thread's current device's; it is made at its first use and lives as long as the driver.
  if (s == legacyStream()) {
    StreamEntry& legacy = legacy_[static_cast<size_t>(currentDevice)];
    if (!legacy.stream) legacy = StreamEntry{std::make_unique<EngineStream>(), currentDevice};
    return legacy;
  }
  auto it = streams_.find(s);
  CCL_CHECK(it != streams_.end(), cclInvalidUsage, "not a stream of a simulated device");
  return it->second;
}

Stream& SimDriver::streamOf(cclStream_t s) {
  std::lock_guard<std::mutex> lock(mutex_);
  return *entryOf(s).stream;
}

int SimDriver::deviceOfStream(cclStream_t s) {
  std::lock_guard<std::mutex> lock(mutex_);
  return entryOf(s).device;
}

SimDriver& simDriver() {
  static SimDriver* d = new SimDriver;
  return *d;
}

}  // namespace ccltest
