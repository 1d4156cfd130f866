// SPDX-License-Identifier: BSD-3-Clause
// A rank's timeline of chosen steps: compute spans (the forward or backward of a
// micro-batch, the optimiser update), communication spans (one per collective or group of
// sends and receives, named by site) and codec spans (the encode/decode time ccl reports
// for that call). Rank 0 gathers every rank's spans and writes a Chrome trace
// (chrome://tracing, ui.perfetto.dev): one process per rank, one thread row per kind.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

// kAsync: an asynchronous call, from its enqueue until the caller's wait for it returned.
enum class SpanKind : int32_t { kForward, kBackward, kUpdate, kComm, kCodec, kAsync, kCount };
const char* spanKindName(SpanKind k);

// Plain data, so that spans travel between ranks as bytes.
struct Span {
  double start = 0, end = 0;  // seconds on the steady clock (shared by the processes of a host)
  SpanKind kind = SpanKind::kForward;
  int32_t site = -1;        // the communication site (comm.h's Site), for kComm, kCodec and kAsync
  int32_t microbatch = -1;  // -1: not one micro-batch's
  int32_t layer = -1;       // a block, for tensor-parallel sites
  int32_t step = 0;
  int32_t phase = -1;  // the pipeline phase (schedule.h), -1: none
};

class Timeline {
 public:
  // Records steps [first, first + count); count 0: nothing.
  Timeline(int first = 0, int count = 0) : first_(first), count_(count) {}

  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  void beginStep(int step) { step_ = step; }
  bool recording() const { return step_ >= first_ && step_ < first_ + count_; }
  void add(Span s) {
    if (!recording()) return;
    s.step = step_;
    spans_.push_back(s);
  }
  const std::vector<Span>& spans() const { return spans_; }

 private:
  int first_, count_;
  int step_ = -1;
  std::vector<Span> spans_;
};

// Where each rank sits in the grid, for the trace's process names.
struct RankPlace {
  int rank, dp, pp, tp;
};

// Writes `spans` (every rank's) as a Chrome trace JSON; siteName names the sites. Times
// start at the earliest span. Throws std::runtime_error when the file cannot be written.
void writeChromeTrace(const std::string& path, const std::vector<std::vector<Span>>& spans,
                      const std::vector<RankPlace>& places, const char* (*siteName)(int));

}  // namespace gpt
