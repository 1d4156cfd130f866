// SPDX-License-Identifier: BSD-3-Clause
#include "sim_device.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "collectives/stream_executor.h"
#include "common/error.h"

namespace ccltest {

using ccl::Error;
using ccl::coll::Event;
using ccl::coll::Stream;

thread_local int SimDriver::currentDevice = 0;

namespace {

// A stream the test made, as the device path sees a caller's CUDA stream: not owned.
class Borrowed final : public Stream {
 public:
  explicit Borrowed(Stream& s) : s_(s) {}
  void enqueue(Step step) override { s_.enqueue(std::move(step)); }
  Event record() override { return s_.record(); }
  void wait(const Event& e) override { s_.wait(e); }
  void block(const Event& e) override { s_.block(e); }
  bool reached(const Event& e) override { return s_.reached(e); }
  cclResult_t takeError(std::string* m) override { return s_.takeError(m); }
  void copy(void* dst, const void* src, size_t bytes) override { s_.copy(dst, src, bytes); }

 private:
  Stream& s_;
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
    return std::make_unique<Borrowed>(driver_.streamOf(static_cast<cclStream_t>(stream)));
  }
  std::unique_ptr<Stream> newStream() override { return std::make_unique<ccl::coll::HostStream>(); }
  std::unique_ptr<ccl::coll::StreamKernels> newKernels() override { return std::make_unique<ccl::coll::HostKernels>(); }
  ccl::coll::StagingMemory staging() override {
    ccl::coll::StagingMemory m;
    m.alloc = [](size_t bytes) { return std::malloc(bytes); };
    m.free = [](void* p) { std::free(p); };
    return m;
  }
  void* allocZeroed(size_t bytes, Stream&) override { return driver_.alloc(bytes, ordinal_); }
  void free(void* p, Stream& stream) override {
    stream.enqueue([this, p] { driver_.release(p); });
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

std::unique_ptr<ccl::coll::Device> SimDriver::open(int ordinal) {
  CCL_CHECK(ordinal >= 0 && ordinal < kDevices, cclInvalidUsage, "no simulated device " + std::to_string(ordinal));
  return std::make_unique<SimDevice>(*this, ordinal);
}

void* SimDriver::alloc(size_t bytes, int device) {
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (!p) throw std::bad_alloc();
  std::lock_guard<std::mutex> lock(mutex_);
  memory_[reinterpret_cast<uintptr_t>(p)] = Block{bytes ? bytes : 1, device};
  return p;
}

void SimDriver::release(void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
}

cclStream_t SimDriver::newStream(int device) {
  auto s = std::make_unique<ccl::coll::HostStream>();
  auto handle = reinterpret_cast<cclStream_t>(s.get());
  std::lock_guard<std::mutex> lock(mutex_);
  streams_[handle] = StreamEntry{std::move(s), device};
  return handle;
}

void SimDriver::destroyStream(cclStream_t s) {
  std::unique_ptr<Stream> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(s);
    if (it == streams_.end()) return;
    gone = std::move(it->second.stream);
    streams_.erase(it);
  }
}

Stream& SimDriver::streamOf(cclStream_t s) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(s);
  CCL_CHECK(it != streams_.end(), cclInvalidUsage, "not a stream of a simulated device");
  return *it->second.stream;
}

int SimDriver::deviceOfStream(cclStream_t s) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(s);
  CCL_CHECK(it != streams_.end(), cclInvalidUsage, "not a stream of a simulated device");
  return it->second.device;
}

SimDriver& simDriver() {
  static SimDriver* d = new SimDriver;
  return *d;
}

}  // namespace ccltest
