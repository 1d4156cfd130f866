// SPDX-License-Identifier: BSD-3-Clause
// What a person running the trainer sees: a one-line progress display (redrawn in place on a
// terminal, plain periodic lines otherwise) and the JSONL log, one record per step plus
// validation records and a run summary.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

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

class JsonLog {
 public:
  explicit JsonLog(const std::string& path);  // empty: no log
  ~JsonLog();
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;

  void step(int step, double loss, double lr, double gradNorm, double tokensPerSecond, double computeSeconds,
            double commSeconds, const Comm& comm);
  void validation(int step, double loss);
  void summary(const TrainResult& r, double computeSeconds, double commSeconds, double elapsed, const Comm& comm);

 private:
  // Per site: the counters since `since` (zero: totals).
  std::string sites(const Comm& comm, const SiteStats* since) const;
  std::FILE* f_ = nullptr;
  SiteStats last_[static_cast<size_t>(Site::kCount)] = {};  // totals at the previous step record
};

}  // namespace gpt
