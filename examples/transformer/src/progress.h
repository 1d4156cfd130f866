// SPDX-License-Identifier: BSD-3-Clause
// What a person running the trainer sees: a one-line progress display (redrawn in place on a
// terminal, plain periodic lines otherwise) and the JSONL log, one record per step plus
// validation records and a run summary.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "comm.h"

namespace gpt {

struct TrainResult;

class Progress {
 public:
  Progress(bool enabled, int totalSteps);
  void step(int step, double loss, double tokensPerSecond);
  // A line of its own (validation results), keeping the progress line intact.
  void note(const std::string& line);
  void finish();

 private:
  bool enabled_, tty_;
  int total_;
  int shown_ = 0;
  std::chrono::steady_clock::time_point start_, lastLine_;
  bool open_ = false;  // a progress line is on screen without its newline
};

// Collective over the world: every rank's counters at world rank 0.
GridCounters gatherCounters(Comm& comm, const std::vector<int>& stageOf);

// Per site, summed over every rank of the grid: calls and bytes add up; seconds are the
// mean over the ranks that used the site. `since` (may be null) is subtracted first.
std::vector<SiteStats> siteTotals(const GridCounters& now, const GridCounters* since);

// The JSONL log. Sites appear three ways: "sites" summed over the grid (siteTotals),
// "stages" per pipeline stage (summed over its ranks), "layers" per block for the
// tensor-parallel sites.
class JsonLog {
 public:
  explicit JsonLog(const std::string& path, bool append = false);  // empty: no log
  ~JsonLog();
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;

  bool enabled() const { return f_ != nullptr; }
  void step(int step, double loss, double lr, double gradNorm, double tokensPerSecond, double computeSeconds,
            double commSeconds, const GridCounters& counters);
  // `elapsed`: seconds since the run started (the time-to-loss of a run, for comparisons).
  void validation(int step, double loss, double elapsed);
  // One "codec_error" record per (site, block) with sampled allreduces, one "codec_energy"
  // record per (pipeline site, sending stage) with sampled powersgd sends: Comm::codecErrors
  // summed over the ranks, as means per call (the captured energy as a ratio of sums).
  void codecErrors(const std::vector<double>& sums, int layers);
  void summary(const TrainResult& r, const std::string& layout, double computeSeconds, double commSeconds,
               double elapsed, const GridCounters& counters);

 private:
  std::string sites(const GridCounters& now, const GridCounters* since) const;
  std::FILE* f_ = nullptr;
  GridCounters last_;  // at the previous step record
};

}  // namespace gpt
