// SPDX-License-Identifier: BSD-3-Clause
#include "progress.h"

#include <unistd.h>

#include <algorithm>
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

JsonLog::JsonLog(const std::string& path, bool append) {
  if (path.empty()) return;
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_) throw std::runtime_error("cannot write the log " + path);
}

JsonLog::~JsonLog() {
  if (f_) std::fclose(f_);
}

GridCounters gatherCounters(Comm& comm, const std::vector<int>& stageOf) {
  GridCounters g;
  g.ranks = comm.size(Group::kWorld);
  g.layers = comm.layers();
  g.stageOf = stageOf;
  const std::vector<SiteStats>& mine = comm.counters();
  const bool root = comm.rank(Group::kWorld) == 0;
  std::vector<SiteStats> all(root ? mine.size() * static_cast<size_t>(g.ranks) : mine.size());
  comm.gatherToRoot(Site::kStat, mine.data(), all.data(), mine.size() * sizeof(SiteStats));
  if (root) g.values = std::move(all);
  return g;
}

namespace {

struct Sum {
  SiteStats s;
  int users = 0;  // ranks that used the site
  void add(SiteStats now, const SiteStats* before) {
    if (before) {
      now.calls -= before->calls;
      now.rawBytes -= before->rawBytes;
      now.wireBytes -= before->wireBytes;
      now.seconds -= before->seconds;
      now.codecSeconds -= before->codecSeconds;
    }
    if (now.calls == 0) return;
    ++users;
    s.calls += now.calls;
    s.rawBytes += now.rawBytes;
    s.wireBytes += now.wireBytes;
    s.seconds += now.seconds;
    s.codecSeconds += now.codecSeconds;
  }
  SiteStats mean() const {
    SiteStats out = s;
    if (users > 0) out.seconds /= users, out.codecSeconds /= users;
    return out;
  }
};

// Site s summed over the ranks `rank` accepts and the counter slots `slot` accepts.
template <class RankOk, class SlotOk>
Sum sumOf(const GridCounters& now, const GridCounters* since, int s, RankOk rankOk, SlotOk slotOk) {
  Sum total;
  for (int r = 0; r < now.ranks; ++r) {
    if (!rankOk(r)) continue;
    Sum one;  // a rank's slots first, so that a rank counts once in the mean
    for (int k = 0; k <= now.layers; ++k)
      if (slotOk(k)) one.add(now.at(r, s, k), since ? &since->at(r, s, k) : nullptr);
    if (one.users > 0) total.add(one.s, nullptr);
  }
  return total;
}

std::string statsJson(const SiteStats& st) {
  char buf[220];
  std::snprintf(buf, sizeof(buf),
                "{\"calls\":%llu,\"raw_bytes\":%llu,\"wire_bytes\":%llu,\"seconds\":%.6f,\"codec_seconds\":%.6f}",
                st.calls, st.rawBytes, st.wireBytes, st.seconds, st.codecSeconds);
  return buf;
}

const auto kAny = [](int) { return true; };

}  // namespace

std::vector<SiteStats> siteTotals(const GridCounters& now, const GridCounters* since) {
  std::vector<SiteStats> out;
  for (int s = 0; s < static_cast<int>(Site::kCount); ++s) out.push_back(sumOf(now, since, s, kAny, kAny).mean());
  return out;
}

std::string JsonLog::sites(const GridCounters& now, const GridCounters* since) const {
  const std::vector<SiteStats> totals = siteTotals(now, since);
  std::string out = "\"sites\":{";
  for (int s = 0; s < static_cast<int>(Site::kCount); ++s)
    out += std::string(s ? "," : "") + "\"" + kSites[s].name + "\":" + statsJson(totals[static_cast<size_t>(s)]);
  out += "},\"stages\":[";
  const int stages = now.stageOf.empty() ? 1 : *std::max_element(now.stageOf.begin(), now.stageOf.end()) + 1;
  for (int p = 0; p < stages; ++p) {
    out += std::string(p ? "," : "") + "{\"stage\":" + std::to_string(p) + ",\"sites\":{";
    bool first = true;
    for (int s = 0; s < static_cast<int>(Site::kCount); ++s) {
      const Sum sum = sumOf(
          now, since, s, [&](int r) { return now.stageOf[static_cast<size_t>(r)] == p; }, kAny);
      if (sum.users == 0) continue;
      out += std::string(first ? "" : ",") + "\"" + kSites[s].name + "\":" + statsJson(sum.mean());
      first = false;
    }
    out += "}}";
  }
  out += "],\"layers\":{";
  bool firstSite = true;
  for (Site site : {Site::kTpFwd, Site::kTpBwd}) {
    const int s = static_cast<int>(site);
    std::string rows;
    for (int l = 0; l < now.layers; ++l) {
      const Sum sum = sumOf(now, since, s, kAny, [&](int k) { return k == l + 1; });
      if (sum.users == 0) continue;
      std::string one = statsJson(sum.mean());
      rows += std::string(rows.empty() ? "" : ",") + "{\"layer\":" + std::to_string(l) + "," + one.substr(1);
    }
    if (rows.empty()) continue;
    out += std::string(firstSite ? "" : ",") + "\"" + kSites[s].name + "\":[" + rows + "]";
    firstSite = false;
  }
  return out + "}";
}

void JsonLog::step(int step, double loss, double lr, double gradNorm, double tokensPerSecond, double computeSeconds,
                   double commSeconds, const GridCounters& counters) {
  if (!f_) return;
  std::fprintf(f_,
               "{\"type\":\"step\",\"step\":%d,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.6g,\"tokens_per_s\":%.1f,"
               "\"compute_s\":%.6f,\"comm_s\":%.6f,%s}\n",
               step, loss, lr, gradNorm, tokensPerSecond, computeSeconds, commSeconds,
               sites(counters, last_.ranks ? &last_ : nullptr).c_str());
  std::fflush(f_);
  last_ = counters;
}

void JsonLog::validation(int step, double loss, double elapsed) {
  if (!f_) return;
  std::fprintf(f_, "{\"type\":\"val\",\"step\":%d,\"val_loss\":%.6f,\"elapsed_s\":%.3f}\n", step, loss, elapsed);
  std::fflush(f_);
}

void JsonLog::codecErrors(const std::vector<double>& sums, int layers) {
  if (!f_) return;
  const size_t perSite = static_cast<size_t>(layers + 1) * Comm::kErrorFields;
  for (size_t at = 0; at + Comm::kErrorFields <= sums.size(); at += Comm::kErrorFields) {
    const double* f = &sums[at];
    const auto site = static_cast<Site>(at / perSite);
    const int slot = static_cast<int>((at % perSite) / Comm::kErrorFields) - 1;
    if (const double calls = f[Comm::kCalls]; calls > 0)
      std::fprintf(f_,
                   "{\"type\":\"codec_error\",\"site\":\"%s\",\"layer\":%d,\"samples\":%.0f,\"rel_l2\":%.6g,"
                   "\"median_rel\":%.6g}\n",
                   siteName(site), slot, calls, f[Comm::kRelL2] / calls, f[Comm::kMedianRel] / calls);
    if (const double sends = f[Comm::kSends]; sends > 0) {
      const double total = f[Comm::kReceived2] + f[Comm::kMemory2];
      std::fprintf(f_,
                   "{\"type\":\"codec_energy\",\"site\":\"%s\",\"stage\":%d,\"samples\":%.0f,"
                   "\"captured_energy\":%.6g,\"memory_over_grad\":%.6g}\n",
                   siteName(site), slot, sends, total > 0 ? f[Comm::kReceived2] / total : 0.0,
                   f[Comm::kMemoryOverGrad] / sends);
    }
  }
  std::fflush(f_);
}

void JsonLog::summary(const TrainResult& r, const std::string& layout, double computeSeconds, double commSeconds,
                      double elapsed, const GridCounters& counters) {
  if (!f_) return;
  std::fprintf(f_,
               "{\"type\":\"summary\",\"steps\":%d,\"ranks\":%d,\"layout\":\"%s\",\"compression\":\"%s\","
               "\"train_loss\":%.6f,"
               "\"val_loss\":%.6f,\"unigram_entropy\":%.6f,\"tokens_per_s\":%.1f,\"compute_s\":%.3f,\"comm_s\":%.3f,"
               "\"elapsed_s\":%.3f,\"peak_rss_bytes\":%ld,%s,\"op_seconds\":{",
               r.stepsRun, counters.ranks, layout.c_str(), r.compression.c_str(), r.finalTrainLoss, r.finalValLoss,
               r.unigramEntropy, r.tokensPerSecond, computeSeconds, commSeconds, elapsed, r.peakRssBytes,
               sites(counters, nullptr).c_str());
  for (size_t k = 0; k < r.opSeconds.size(); ++k)
    std::fprintf(f_, "%s\"%s\":%.4f", k ? "," : "", r.opSeconds[k].first.c_str(), r.opSeconds[k].second);
  std::fprintf(f_, "},\"bubbles\":[");
  for (size_t k = 0; k < r.bubbles.size(); ++k) {
    const BubbleReport& b = r.bubbles[k];
    std::fprintf(f_,
                 "%s{\"step\":%d,\"stages\":%d,\"microbatches\":%d,\"theory\":%.4f,\"replayed\":%.4f,"
                 "\"measured\":%.4f,\"section_s\":%.6f}",
                 k ? "," : "", b.step, b.stages, b.microbatches, b.theory, b.replayed, b.measured, b.sectionSeconds);
  }
  std::fprintf(f_, "],\"slices\":[");
  for (size_t k = 0; k < r.sliceBounds.size(); ++k) std::fprintf(f_, "%s%d", k ? "," : "", r.sliceBounds[k]);
  std::fprintf(f_, "],\"predicted_slice_s\":%.6f}\n", r.predictedSliceSeconds);
  std::fflush(f_);
}

}  // namespace gpt
