#include "harness/report.h"

#include <unistd.h>

#include <cstdio>

namespace cclperf {

void printRunHeader(const Options& o, const std::string& backend_line) {
  const bool by_factor = o.step_factor > 1;
  if (!backend_line.empty()) std::printf("# %s\n", backend_line.c_str());
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d\n",
      o.nthreads, o.ngpus, o.min_bytes, o.max_bytes, by_factor ? o.step_factor : o.step_bytes,
      by_factor ? "factor" : "bytes", o.warmup_iters, o.iters, o.agg_iters, o.check, o.graph_launches);
  if (o.blocking) std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.parallel_init) std::printf("# Parallel Init Enabled: threads call into cclCommInitRank concurrently \n");
  std::printf("#\n");
}

std::string deviceLines(int first_rank, int nthreads, const std::string& device) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  std::string out;
  for (int t = 0; t < nthreads; ++t) {
    char line[512];
    std::snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %s\n", first_rank + t, 0,
                  int(getpid()), host, device.c_str());
    out += line;
  }
  return out;
}

void printDevices(const std::vector<std::string>& per_process_lines) {
  std::printf("# Using devices\n");
  for (const auto& lines : per_process_lines) std::printf("%s", lines.c_str());
  std::printf("#\n");
}

void printTableHeader(bool cputime) {
  const char* time = cputime ? "cputime" : "time";
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
              "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
              "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void printRowStart(size_t bytes, size_t count, const char* type, const char* op, int root) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, op, root);
}

std::string formatTime(double usec) {
  char buf[32];
  const char* format = usec >= 10000.0 ? "%7.0f" : usec >= 100.0 ? "%7.1f" : "%7.2f";
  std::snprintf(buf, sizeof(buf), format, usec);
  return buf;
}

void printPlacement(const PlacementResult& r) {
  const std::string wrong = r.wrong < 0 ? std::string("N/A") : std::to_string(r.wrong);
  std::printf("  %7s  %6.2f  %6.2f  %5s", formatTime(r.seconds * 1e6).c_str(), r.algbw, r.busbw, wrong.c_str());
}

void printRowEnd() {
  std::printf("\n");
  std::fflush(stdout);
}

void printSummary(long long wrong, double avg_busbw) {
  std::printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n", avg_busbw);
  std::printf("#\n");
  std::fflush(stdout);
}

}  // namespace cclperf
