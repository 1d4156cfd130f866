// SPDX-License-Identifier: BSD-3-Clause
#include "harness/sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "harness/codec_bound.h"
#include "harness/report.h"

namespace cclperf {
namespace {

using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<char, FreeDeleter>;

HostBuffer allocateZeroed(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  HostBuffer buf(static_cast<char*>(std::aligned_alloc(kAlign, rounded)));
  if (!buf) throw std::runtime_error("out of host memory allocating " + std::to_string(rounded) + " bytes");
  std::memset(buf.get(), 0, rounded);  // touch every page before timing
  return buf;
}

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
      : coll_(c), opt_(o), comm_(comm), team_(team), thread_(thread), me_(me), prints_(prints) {
    send_ = allocateZeroed(o.maxBytes);
    recv_ = allocateZeroed(o.maxBytes);
    if (o.check) expected_ = allocateZeroed(o.maxBytes);
  }

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

  CallArgs callArgs(const BufferLayout& l, const Case& k, bool inPlace) const {
    char* recv = recv_.get();
    const size_t rank = size_t(me_.rank);
    const char* send = inPlace ? recv + l.sendInPlaceOffset * rank * k.typeSize : send_.get();
    if (inPlace) recv += l.recvInPlaceOffset * rank * k.typeSize;
    return CallArgs{send, recv, l.paramCount, k.type, k.op, k.root};
  }

  void launch(const BufferLayout& l, const Case& k, bool inPlace) {
    coll_.run(comm_, callArgs(l, k, inPlace));
    if (opt_.blocking) team_.barrier(thread_);
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
      if (opt_.codec.active()) {
        const CodecColumns columns = combineRow();
        if (prints_) printRowEnd(&columns);
      } else if (prints_) {
        printRowEnd();
      }
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
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    return elapsed.count() / (double(opt_.iters) * opt_.aggIters);
  }

  PlacementResult benchTime(const BufferLayout& l, const Case& k, bool inPlace) {
    if (opt_.check) initData(l, k, inPlace, 0);
    launch(l, k, inPlace);  // the untimed call nccl-tests makes before timing
    team_.barrier(thread_);
    double raw0 = 0, wire0 = 0, raw1 = 0, wire1 = 0;
    const bool counted = opt_.codec.active() && comm_.wireCounters(&raw0, &wire0);
    const double mySeconds = timedLoop(l, k, inPlace);
    if (counted && comm_.wireCounters(&raw1, &wire1)) {
      row_.raw += raw1 - raw0;
      row_.wire += wire1 - wire0;
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
    const CallArgs a = callArgs(l, k, inPlace);
    poison(TypedBuffer{recv_.get(), recvExtent(l), k.type});
    coll_.fillInput(model, me_, k.root, TypedBuffer{const_cast<void*>(a.send), l.sendCount, k.type});
    return coll_.fillExpected(model, me_, k.root, TypedBuffer{expected_.get(), l.recvCount, k.type});
  }

  // In place, the result sits at an offset inside the receive buffer.
  size_t recvExtent(const BufferLayout& l) const {
    const size_t rank = size_t(me_.rank);
    return std::max(l.recvCount + l.recvInPlaceOffset * rank, l.sendCount + l.sendInPlaceOffset * rank);
  }

  // Without a codec every element must be exact; with one, within the codec's bound.
  long long countWrong(const BufferLayout& l, const Case& k, bool inPlace) {
    const CallArgs a = callArgs(l, k, inPlace);
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

  // What one row accumulates on this rank for the compression columns.
  struct RowCodec {
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
  HostBuffer send_, recv_, expected_;
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
