// SPDX-License-Identifier: BSD-3-Clause
#include "harness/report.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "harness/codec_bound.h"

namespace cclperf {

void printRunHeader(const Options& o, const std::string& backendLine) {
  const bool byFactor = o.stepFactor > 1;
  if (!backendLine.empty()) std::printf("# %s\n", backendLine.c_str());
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d\n",
      o.nthreads, o.ngpus, o.minBytes, o.maxBytes, byFactor ? o.stepFactor : o.stepBytes, byFactor ? "factor" : "bytes",
      o.warmupIters, o.iters, o.aggIters, o.check, o.graphLaunches);
  if (o.blocking) std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.parallelInit) std::printf("# Parallel Init Enabled: threads call into cclCommInitRank concurrently \n");
  std::printf("#\n");
}

void printCodecHeader(const Options& o) {
  const CodecOptions& z = o.codec;
  const char* feedback = z.feedback == cclFeedbackResidual ? "ef" : z.feedback == cclFeedbackLoco ? "loco" : "none";
  std::printf(
      "# Codec %s (per call, *Ex): block %d scale_bits %d value_bits %d keep %g threshold %g stochastic %d seed %llu "
      "feedback %s\n",
      z.name.c_str(), z.blockSize, z.scaleBits, z.valueBits, z.keepRatio, double(z.threshold), z.stochastic, z.seed,
      feedback);
  std::printf(
      "# wire/raw: bytes sent / the same bytes counted uncompressed (cclCommGetStats over the timed calls of both "
      "placements, summed over all ranks)\n"
      "# maxrel = max|got-exact| / max|exact|, rmsrel = sqrt(mean (got-exact)^2) / max|exact|, over every checked "
      "element of both placements on every rank (-c 1)\n"
      "%s; busbw counts uncompressed bytes\n#\n",
      hasElementBound(z) ? "# #wrong counts elements outside the codec's documented bound composed over the algorithm"
                         : "# #wrong counts non-finite elements only: the codec has no element-wise bound "
                           "(cclCodecErrorBound is +inf); maxrel and rmsrel show its error");
}

std::string deviceLines(int firstRank, int nthreads, const std::string& device) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  std::string out;
  for (int t = 0; t < nthreads; ++t) {
    char line[512];
    std::snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %s\n", firstRank + t, 0,
                  int(getpid()), host, device.c_str());
    out += line;
  }
  return out;
}

void printDevices(const std::vector<std::string>& perProcessLines) {
  std::printf("# Using devices\n");
  for (const auto& lines : perProcessLines) std::printf("%s", lines.c_str());
  std::printf("#\n");
}

void printTableHeader(bool cputime, bool codec, bool device) {
  const char* time = cputime ? "cputime" : "time";
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
              "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size", "count", "type", "redop",
              "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong");
  if (codec) std::printf("  %8s  %9s  %9s", "wire/raw", "maxrel", "rmsrel");
  if (device) std::printf("  %8s  %8s", "commands", "hostfn");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (codec) std::printf("  %8s  %9s  %9s", "", "", "");
  if (device) std::printf("  %8s  %8s", "(/call)", "(/call)");
  std::printf("\n");
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

void printRowEnd(const CodecColumns* codec, const DeviceColumns* device) {
  if (codec) {
    if (codec->rawBytes > 0) {
      std::printf("  %8.4f", codec->wireBytes / codec->rawBytes);
    } else {
      std::printf("  %8s", "N/A");  // nothing crossed a wire (one rank)
    }
    if (codec->checked && codec->count > 0) {
      const double scale = codec->maxExact > 0 ? codec->maxExact : 1.0;
      std::printf("  %9.3e  %9.3e", codec->maxErr / scale, std::sqrt(codec->sumSq / codec->count) / scale);
    } else {
      std::printf("  %9s  %9s", "N/A", "N/A");
    }
  }
  if (device) {
    if (device->commands >= 0)
      std::printf("  %8.1f  %8.2f", device->commands, device->hostFunctions);
    else
      std::printf("  %8s  %8s", "N/A", "N/A");
  }
  std::printf("\n");
  std::fflush(stdout);
}

void printSummary(long long wrong, double avgBusbw) {
  std::printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n", avgBusbw);
  std::printf("#\n");
  std::fflush(stdout);
}

}  // namespace cclperf
