// SPDX-License-Identifier: BSD-3-Clause
#include "harness/sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "harness/codec_bound.h"
#include "harness/memory.h"
#include "harness/report.h"
#include "harness/stall_watch.h"

namespace cclperf {
namespace {

using Clock = std::chrono::steady_clock;

// A buffer of the run's memory (-M), freed with it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Memory& m, size_t bytes) : m_(&m), p_(static_cast<char*>(m.allocZeroed(bytes))) {}
  ~Buffer() {
    if (p_) m_->release(p_);
  }
  Buffer(Buffer&& o) noexcept : m_(o.m_), p_(o.p_) { o.p_ = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(m_, o.m_);
    std::swap(p_, o.p_);
    return *this;
  }
  char* get() const { return p_; }

 private:
  Memory* m_ = nullptr;
  char* p_ = nullptr;
};

// One (type, op, root) combination: the current size and its buffers' layout.
struct Case {
  cclDataType_t type;
  size_t typeSize;
  const char* typeName;
  cclRedOp_t op;
  const char* opName;
  int root;
};

class RankSweep {
 public:
  RankSweep(const PerfCollective& c, const Options& o, RankComm& comm, Team& team, int thread, RankInfo me, bool prints)
      : coll_(c),
        opt_(o),
        comm_(comm),
        team_(team),
        thread_(thread),
        me_(me),
        prints_(prints),
        mem_(memoryFor(o.deviceMemory)) {
    mem_.bind(deviceOfThread(mem_, (me.rank - thread) / o.nthreads, o.nthreads, thread));
    stream_ = mem_.newStream();
    send_ = Buffer(mem_, o.maxBytes + o.misalign);
    recv_ = Buffer(mem_, o.maxBytes + o.misalign);
    Memory& host = memoryFor(false);
    if (o.check) expected_ = Buffer(host, o.maxBytes);
    if (o.check && mem_.onDevice()) {  // where inputs are written and results read
      sendHost_ = Buffer(host, o.maxBytes);
      recvHost_ = Buffer(host, o.maxBytes);
    }
  }
  ~RankSweep() { mem_.destroyStream(stream_); }
  RankSweep(const RankSweep&) = delete;
  RankSweep& operator=(const RankSweep&) = delete;

  SweepTotals runAll() {
    for (cclDataType_t type : opt_.types) {
      const auto& info = dataTypeInfo(type);
      const std::vector<cclRedOp_t> ops = coll_.usesOp() ? opt_.ops : std::vector<cclRedOp_t>{cclSum};
      for (cclRedOp_t op : ops) {
        for (int root : roots()) {
          timeTest(Case{type, info.size, info.name, op, coll_.usesOp() ? opName(op) : "none", root});
        }
      }
    }
    return totals_;
  }

 private:
  std::vector<int> roots() const {
    if (!coll_.usesRoot()) return {-1};
    if (opt_.root >= me_.nranks) throw std::runtime_error("root " + std::to_string(opt_.root) + " is not a rank");
    if (opt_.root >= 0) return {opt_.root};
    std::vector<int> all(size_t(me_.nranks));
    for (int r = 0; r < me_.nranks; ++r) all[size_t(r)] = r;
    return all;
  }

  BufferLayout layoutFor(size_t bytes, const Case& k) const { return coll_.layout(bytes / k.typeSize, me_.nranks); }

  // The call's arguments on the run's buffers, or (onHost) on their host mirrors, where a
  // device run writes inputs and reads results.
  CallArgs callArgs(const BufferLayout& l, const Case& k, bool inPlace, bool onHost = false) const {
    const bool mirror = onHost && mem_.onDevice();
    char* recv = mirror ? recvHost_.get() : recv_.get() + opt_.misalign;
    char* sendBase = mirror ? sendHost_.get() : send_.get() + opt_.misalign;
    const size_t rank = size_t(me_.rank);
    const char* send = inPlace ? recv + l.sendInPlaceOffset * rank * k.typeSize : sendBase;
    if (inPlace) recv += l.recvInPlaceOffset * rank * k.typeSize;
    return CallArgs{send, recv, l.paramCount, k.type, k.op, k.root, stream_};
  }

  void launch(const BufferLayout& l, const Case& k, bool inPlace) {
    coll_.run(comm_, callArgs(l, k, inPlace));
    noteProgress();
    if (opt_.blocking) {
      synchronize();
      team_.barrier(thread_);
    }
  }

  void synchronize() {
    mem_.synchronize(stream_);
    noteProgress();
  }

  void timeTest(const Case& k) {
    team_.barrier(thread_);
    for (size_t bytes : {opt_.maxBytes, opt_.minBytes}) {
      const BufferLayout l = layoutFor(bytes, k);
      for (int i = 0; i < opt_.warmupIters; ++i) launch(l, k, false);
    }
    for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes;) {
      const BufferLayout l = layoutFor(bytes, k);
      if (prints_) {
        printRowStart(std::max(l.sendCount, l.recvCount) * k.typeSize, l.paramCount, k.typeName, k.opName, k.root);
      }
      row_ = RowCodec{};
      for (bool inPlace : {false, true}) {
        const PlacementResult r = benchTime(l, k, inPlace);
        if (prints_) printPlacement(r);
      }
      // Every rank takes part in the reductions, printing or not.
      const CodecColumns columns = opt_.codec.active() ? combineRow() : CodecColumns{};
      const DeviceColumns device = opt_.deviceMemory ? combineCommands() : DeviceColumns{};
      if (prints_) printRowEnd(opt_.codec.active() ? &columns : nullptr, opt_.deviceMemory ? &device : nullptr);
      const size_t next = opt_.stepFactor > 1 ? bytes * opt_.stepFactor : bytes + opt_.stepBytes;
      if (next <= bytes) break;  // minBytes 0 with a factor would never grow
      bytes = next;
    }
  }

  double timedLoop(const BufferLayout& l, const Case& k, bool inPlace) {
    const auto start = Clock::now();
    for (int i = 0; i < opt_.iters; ++i) {
      if (opt_.aggIters > 1) comm_.groupStart();
      for (int a = 0; a < opt_.aggIters; ++a) launch(l, k, inPlace);
      if (opt_.aggIters > 1) comm_.groupEnd();
    }
    synchronize();  // device calls return once enqueued: the time is the stream's
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    return elapsed.count() / (double(opt_.iters) * opt_.aggIters);
  }

  PlacementResult benchTime(const BufferLayout& l, const Case& k, bool inPlace) {
    if (opt_.check) initData(l, k, inPlace, 0);
    launch(l, k, inPlace);  // the untimed call nccl-tests makes before timing
    synchronize();
    team_.barrier(thread_);
    double raw0 = 0, wire0 = 0, raw1 = 0, wire1 = 0, cmd0 = 0, host0 = 0, cmd1 = 0, host1 = 0;
    const bool counted = opt_.codec.active() && comm_.wireCounters(&raw0, &wire0);
    const bool commands = opt_.deviceMemory && comm_.commandCounters(&cmd0, &host0);
    const double mySeconds = timedLoop(l, k, inPlace);
    if (counted && comm_.wireCounters(&raw1, &wire1)) {
      row_.raw += raw1 - raw0;
      row_.wire += wire1 - wire0;
    }
    if (commands && comm_.commandCounters(&cmd1, &host1)) {
      row_.commands += cmd1 - cmd0;
      row_.hostFunctions += host1 - host0;
      row_.calls += double(opt_.iters) * opt_.aggIters;
    }
    const double seconds = team_.combineTime(thread_, mySeconds, opt_.average);
    const double algbw = seconds > 0 ? coll_.algbwBytes(l.paramCount, k.typeSize, me_.nranks) / 1e9 / seconds : 0;
    const double busbw = algbw * coll_.busbwFactor(me_.nranks);
    team_.barrier(thread_);

    long long wrong = -1;
    if (opt_.check && (!inPlace || coll_.checksInPlace())) {
      ++rep_;
      const bool hasExpected = initData(l, k, inPlace, rep_);
      launch(l, k, inPlace);
      synchronize();
      const long long mine = hasExpected ? countWrong(l, k, inPlace) : 0;
      wrong = team_.sum(thread_, mine);
      totals_.wrong += wrong;
    }
    totals_.busbwSum += busbw;
    ++totals_.rows;
    return PlacementResult{seconds, algbw, busbw, wrong};
  }

  // Poisons the receive side, writes this rank's input and the expected result.
  bool initData(const BufferLayout& l, const Case& k, bool inPlace, uint64_t seed) {
    const DataModel model(k.type, coll_.usesOp(), k.op, me_.nranks, seed);
    const CallArgs a = callArgs(l, k, inPlace, true);
    char* recvBase = mem_.onDevice() ? recvHost_.get() : recv_.get() + opt_.misalign;
    {
      const HostWork busy;
      poison(TypedBuffer{recvBase, recvExtent(l), k.type});
      coll_.fillInput(model, me_, k.root, TypedBuffer{const_cast<void*>(a.send), l.sendCount, k.type});
    }
    if (mem_.onDevice()) {  // in place, the input is inside the receive buffer's extent
      mem_.upload(recv_.get() + opt_.misalign, recvHost_.get(), recvExtent(l) * k.typeSize);
      if (!inPlace) mem_.upload(send_.get() + opt_.misalign, sendHost_.get(), l.sendCount * k.typeSize);
    }
    const HostWork busy;
    return coll_.fillExpected(model, me_, k.root, TypedBuffer{expected_.get(), l.recvCount, k.type});
  }

  // In place, the result sits at an offset inside the receive buffer.
  size_t recvExtent(const BufferLayout& l) const {
    const size_t rank = size_t(me_.rank);
    return std::max(l.recvCount + l.recvInPlaceOffset * rank, l.sendCount + l.sendInPlaceOffset * rank);
  }

  // Without a codec every element must be exact; with one, within the codec's bound.
  long long countWrong(const BufferLayout& l, const Case& k, bool inPlace) {
    if (mem_.onDevice()) mem_.download(recvHost_.get(), recv_.get() + opt_.misalign, recvExtent(l) * k.typeSize);
    const HostWork busy;
    const CallArgs a = callArgs(l, k, inPlace, true);
    if (opt_.codec.active()) {
      const AccuracyTally t = tallyAgainstBound(TypedBuffer{a.recv, l.recvCount, k.type},
                                                TypedBuffer{expected_.get(), l.recvCount, k.type}, boundFor(k));
      row_.tally.add(t);
      row_.checked = true;
      return t.wrong;
    }
    const size_t bytes = l.recvCount * k.typeSize;
    if (std::memcmp(a.recv, expected_.get(), bytes) == 0) return 0;
    const TypedBuffer got{a.recv, l.recvCount, k.type};
    const TypedBuffer want{expected_.get(), l.recvCount, k.type};
    long long wrong = 0;
    for (size_t i = 0; i < l.recvCount; ++i) {
      if (!(loadElement(got, i) == loadElement(want, i))) ++wrong;
    }
    return wrong;
  }

  ElementBound boundFor(const Case& k) const {
    const bool floatType = k.type == cclFloat32 || k.type == cclBfloat16 || k.type == cclFloat16;
    const bool opOk = !coll_.usesOp() || k.op == cclSum || k.op == cclAvg;
    return ElementBound(opt_.codec, k.type, floatType && opOk, coll_.compression(me_.nranks));
  }

  // The compression columns of the row, combined over every rank.
  CodecColumns combineRow() {
    CodecColumns c{};
    c.rawBytes = team_.reduce(thread_, row_.raw, Reduction::kSum);
    c.wireBytes = team_.reduce(thread_, row_.wire, Reduction::kSum);
    c.maxErr = team_.reduce(thread_, row_.tally.maxErr, Reduction::kMax);
    c.sumSq = team_.reduce(thread_, row_.tally.sumSq, Reduction::kSum);
    c.count = team_.reduce(thread_, row_.tally.count, Reduction::kSum);
    c.maxExact = team_.reduce(thread_, row_.tally.maxExact, Reduction::kMax);
    c.checked = row_.checked;
    return c;
  }

  // The commands columns of the row: per call, the most of any rank.
  DeviceColumns combineCommands() {
    DeviceColumns d;
    const double calls = team_.reduce(thread_, row_.calls, Reduction::kMax);
    const double commands = team_.reduce(thread_, row_.calls > 0 ? row_.commands / row_.calls : -1, Reduction::kMax);
    const double host = team_.reduce(thread_, row_.calls > 0 ? row_.hostFunctions / row_.calls : -1, Reduction::kMax);
    if (calls > 0) d = DeviceColumns{commands, host};
    return d;
  }

  // What one row accumulates on this rank for the compression and commands columns.
  struct RowCodec {
    double commands = 0;
    double hostFunctions = 0;
    double calls = 0;
    double raw = 0;
    double wire = 0;
    AccuracyTally tally;
    bool checked = false;
  };

  const PerfCollective& coll_;
  const Options& opt_;
  RankComm& comm_;
  Team& team_;
  int thread_;
  RankInfo me_;
  bool prints_;
  Memory& mem_;
  cclStream_t stream_ = nullptr;
  Buffer send_, recv_, expected_, sendHost_, recvHost_;
  uint64_t rep_ = 0;
  SweepTotals totals_;
  RowCodec row_;
};

}  // namespace

SweepTotals runRankSweep(const PerfCollective& collective, const Options& options, RankComm& comm, Team& team,
                         int thread, RankInfo me, bool prints) {
  RankSweep sweep(collective, options, comm, team, thread, me, prints);
  return sweep.runAll();
}

}  // namespace cclperf
