// SPDX-License-Identifier: BSD-3-Clause
#include "progress.h"

#include <unistd.h>

#include <cinttypes>
#include <stdexcept>

#include "train.h"

namespace gpt {

Progress::Progress(bool enabled, int totalSteps)
    : enabled_(enabled),
      tty_(isatty(STDOUT_FILENO) != 0),
      total_(totalSteps),
      start_(std::chrono::steady_clock::now()),
      lastLine_(start_) {}

void Progress::step(int step, double loss, double tokensPerSecond) {
  if (!enabled_) return;
  ++shown_;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int left = total_ - step - 1;
  const double eta = shown_ > 0 ? elapsed / shown_ * left : 0;
  char line[160];
  std::snprintf(line, sizeof(line), "step %d/%d  loss %.4f  %.0f tok/s  ETA %dm%02ds", step + 1, total_, loss,
                tokensPerSecond, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  if (tty_) {
    std::printf("\r%-78s", line);
    std::fflush(stdout);
    open_ = true;
  } else if (std::chrono::duration<double>(now - lastLine_).count() >= 10.0 || left == 0 || shown_ == 1) {
    std::printf("%s\n", line);
    std::fflush(stdout);
    lastLine_ = now;
  }
}

void Progress::note(const std::string& line) {
  if (!enabled_) return;
  if (open_) std::printf("\n");
  open_ = false;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Progress::finish() {
  if (enabled_ && open_) std::printf("\n");
  open_ = false;
}

JsonLog::JsonLog(const std::string& path) {
  if (path.empty()) return;
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw std::runtime_error("cannot write the log " + path);
}

JsonLog::~JsonLog() {
  if (f_) std::fclose(f_);
}

std::string JsonLog::sites(const Comm& comm, const SiteStats* since) const {
  std::string s = "{";
  for (int i = 0; i < static_cast<int>(Site::kCount); ++i) {
    SiteStats st = comm.stats(static_cast<Site>(i));
    if (since) {
      st.calls -= since[i].calls;
      st.rawBytes -= since[i].rawBytes;
      st.wireBytes -= since[i].wireBytes;
      st.seconds -= since[i].seconds;
    }
    char buf[200];
    std::snprintf(buf, sizeof(buf), "%s\"%s\":{\"calls\":%llu,\"raw_bytes\":%llu,\"wire_bytes\":%llu,\"seconds\":%.6f}",
                  i ? "," : "", siteName(static_cast<Site>(i)), st.calls, st.rawBytes, st.wireBytes, st.seconds);
    s += buf;
  }
  return s + "}";
}

void JsonLog::step(int step, double loss, double lr, double gradNorm, double tokensPerSecond, double computeSeconds,
                   double commSeconds, const Comm& comm) {
  if (!f_) return;
  std::fprintf(f_,
               "{\"type\":\"step\",\"step\":%d,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.6g,\"tokens_per_s\":%.1f,"
               "\"compute_s\":%.6f,\"comm_s\":%.6f,\"sites\":%s}\n",
               step, loss, lr, gradNorm, tokensPerSecond, computeSeconds, commSeconds, sites(comm, last_).c_str());
  std::fflush(f_);
  for (int i = 0; i < static_cast<int>(Site::kCount); ++i) last_[i] = comm.stats(static_cast<Site>(i));
}

void JsonLog::validation(int step, double loss) {
  if (!f_) return;
  std::fprintf(f_, "{\"type\":\"val\",\"step\":%d,\"val_loss\":%.6f}\n", step, loss);
  std::fflush(f_);
}

void JsonLog::summary(const TrainResult& r, double computeSeconds, double commSeconds, double elapsed,
                      const Comm& comm) {
  if (!f_) return;
  std::fprintf(f_,
               "{\"type\":\"summary\",\"steps\":%d,\"ranks\":%d,\"train_loss\":%.6f,\"val_loss\":%.6f,"
               "\"unigram_entropy\":%.6f,\"tokens_per_s\":%.1f,\"compute_s\":%.3f,\"comm_s\":%.3f,\"elapsed_s\":%.3f,"
               "\"peak_rss_bytes\":%ld,\"sites\":%s,\"op_seconds\":{",
               r.stepsRun, comm.size(), r.finalTrainLoss, r.finalValLoss, r.unigramEntropy, r.tokensPerSecond,
               computeSeconds, commSeconds, elapsed, r.peakRssBytes, sites(comm, nullptr).c_str());
  for (size_t k = 0; k < r.opSeconds.size(); ++k)
    std::fprintf(f_, "%s\"%s\":%.4f", k ? "," : "", r.opSeconds[k].first.c_str(), r.opSeconds[k].second);
  std::fprintf(f_, "}}\n");
  std::fflush(f_);
}

}  // namespace gpt
