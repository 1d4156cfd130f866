// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/device_runner.h"

#include <atomic>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "codecs/codec.h"
#include "common/activity.h"

namespace ccl::coll {

namespace {

// Launcher flags that runners gave back, for the next ones: freeing pinned memory
// (cudaFreeHost) waits for the whole device, where another communicator's work may wait for
// its peers, so a communicator's destroy or abort never frees one.
std::mutex& flagsMutex() {
  static std::mutex m;
  return m;
}
std::vector<std::atomic<uint64_t>*>& spareFlags() {
  static auto* f = new std::vector<std::atomic<uint64_t>*>;  // never destroyed: the flags stay reachable
  return *f;
}

}  // namespace

// The runner's launcher (stream_executor.h): a worker thread and a stream of the device,
// made at the first call handed to it, and the flag callers' streams wait for, taken with
// the runner (staging memory: pinned, mapped, portable; kept for later runners).
class DeviceRunner::CallLauncher final : public Launcher {
 public:
  CallLauncher(Device& device, StreamCounts& counts) : device_(device), counts_(counts) {
    {
      std::lock_guard<std::mutex> lock(flagsMutex());
      if (!spareFlags().empty()) {
        flag_ = spareFlags().back();
        spareFlags().pop_back();
      }
    }
    if (!flag_) {
      void* p = device.staging().alloc(64);
      CCL_CHECK(p, cclSystemError, "no pinned memory for the launcher's flag");
      flag_ = new (p) std::atomic<uint64_t>(0);
    }
    flag_->store(0, std::memory_order_release);  // no stream waits for it: its last runner drained
  }
  ~CallLauncher() override {
    drain();
    if (stream_) stream_->synchronize();
    stream_.reset();
    std::lock_guard<std::mutex> lock(flagsMutex());
    spareFlags().push_back(flag_);
  }
  void drain() {
    if (thread_) thread_->synchronize();
  }
  Stream& stream() override {
    if (!stream_) stream_ = std::make_unique<CountedStream>(device_.newStream(), counts_);
    return *stream_;
  }
  std::atomic<uint64_t>* flag() override { return flag_; }
  uint64_t nextTicket() override { return ++tickets_; }
  void post(std::function<void()> rest) override {
    if (!thread_) thread_ = std::make_unique<HostStream>();
    // A call records at most two events on its caller's stream before its part here waits
    // for one: far fewer than a CudaStream's ring of 256 while at most 64 calls wait here.
    while (pending_.load(std::memory_order_acquire) >= kMaxPending) std::this_thread::yield();
    pending_.fetch_add(1, std::memory_order_acq_rel);
    thread_->enqueue([this, rest = std::move(rest)] {
      struct Done {
        std::atomic<int>& pending;
        ~Done() { pending.fetch_sub(1, std::memory_order_acq_rel); }
      } done{pending_};
      CurrentDevice current(device_);  // CUDA enqueues on the current device's streams
      rest();
    });
  }
  bool busy() const override { return pending_.load(std::memory_order_acquire) > 0; }
  // Where the launcher's stream is now (nothing: it was never made).
  Event end() { return stream_ ? stream_->record() : Event{}; }

 private:
  static constexpr int kMaxPending = 64;
  Device& device_;
  StreamCounts& counts_;
  std::atomic<uint64_t>* flag_ = nullptr;
  uint64_t tickets_ = 0;
  std::unique_ptr<Stream> stream_;
  std::atomic<int> pending_{0};
  std::unique_ptr<HostStream> thread_;  // last: its steps use the members above
};

DeviceRunner::DeviceRunner(std::unique_ptr<Device> device, const MakeLink& makeLink) : device_(std::move(device)) {
  CurrentDevice current(*device_);
  comm_ = std::make_unique<CountedStream>(device_->newStream(), counts_);
  kernels_ = device_->newKernels();
  link_ = makeLink(*device_);
  launcher_ = std::make_unique<CallLauncher>(*device_, counts_);
}

DeviceRunner::~DeviceRunner() {
  CurrentDevice current(*device_);
  // Calls handed to the launcher are enqueued (or failed) before anything they use goes.
  launcher_->drain();
  // The last call's kernels read scratch and residuals on its caller's stream, and it ran
  // after every earlier call (begin()): the frees wait for it, not only for this stream.
  if (last_) comm_->wait(lastDone_);
  comm_->wait(launcher_->end());  // a call that failed on the launcher released its caller early
  if (scratch_) device_->free(scratch_, *comm_);
  for (auto& [key, r] : residuals_) device_->free(r.memory, *comm_);
  comm_->synchronize();
  // The members go while the device is current (CUDA frees events, streams and memory of
  // the current device's context), in the order they depend on each other.
  launcher_.reset();
  link_.reset();
  kernels_.reset();
  callers_.clear();
  comm_.reset();
}

DeviceRunner::Planned DeviceRunner::plan(Coll coll, const CollArgs& args, const PlanOf& planOf, int rank,
                                         int nranks) const {
  const bool atBound = link_->sendsAtBound();
  // Quantizers write fixed-length streams on every device link: the host cannot see a
  // stream's length, so a staged link copies each at its bound too, and a variable-length
  // stream's bound (every block raw) is about the data's size.
  CollArgs a = args;
  a.codec = codec::fixLength(a.codec);
  Planned p;
  p.compressed = a.codec.codec != cclCodecNone;
  p.plan = std::make_shared<const Plan>(planOf(a, rank));
  const Shifts shifts = collInfo(coll).pointToPoint ? Shifts::none(nranks) : planShifts(coll, a);
  p.schedule = std::make_shared<const Schedule>(scheduleWaves([&](int r) { return planOf(a, r); }, shifts, rank));
  if (p.compressed && atBound) {
    p.moved = postedBytes(*p.plan, *p.schedule);
    // A plan that sends nothing (one rank) is the host path's: its codec round trip stays.
    p.declined = p.moved.raw > 0 && p.moved.posted >= p.moved.raw;
  }
  return p;
}

Stream& DeviceRunner::caller(void* handle) {
  auto& s = callers_[handle];
  if (!s) s = std::make_unique<CountedStream>(device_->wrap(handle), counts_);
  return *s;
}

char* DeviceRunner::begin(Stream& caller, size_t scratchBytes) {
  if (last_ && last_ != &caller) caller.wait(lastDone_);
  if (scratchBytes > scratchBytes_) {
    ActivityScope busy("growing the scratch");
    if (scratch_) device_->free(scratch_, caller);
    scratch_ = nullptr;
    scratchBytes_ = 0;
    scratch_ = device_->allocZeroed(scratchBytes, caller);
    scratchBytes_ = scratchBytes;
  }
  return static_cast<char*>(scratch_);
}

float* DeviceRunner::residual(uint64_t holder, uint64_t generation, size_t floats, int kind, Stream& caller) {
  Residual& r = residuals_[holder];
  if (r.memory && (r.floats != floats || r.kind != kind || r.generation != generation)) {
    device_->free(r.memory, caller);
    r = {};
  }
  if (!r.memory) {
    ActivityScope busy("allocating feedback");
    r.memory = static_cast<float*>(device_->allocZeroed(floats * sizeof(float), caller));
    r.floats = floats;
    r.kind = kind;
    r.generation = generation;
  }
  return r.memory;
}

void DeviceRunner::run(std::span<const StreamJob> jobs, Stream& caller) {
  ActivityScope busy("enqueuing a device call");
  try {
    executeOnStream(jobs, *link_, *kernels_, caller, *comm_, launcher_.get());
  } catch (...) {
    // Part of the call may be enqueued (an abort while it waited for staging): what the
    // runner frees later waits for that part too.
    last_ = &caller;
    lastDone_ = caller.record();
    throw;
  }
  last_ = &caller;
  lastDone_ = caller.record();
}

}  // namespace ccl::coll
