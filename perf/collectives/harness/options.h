// SPDX-License-Identifier: BSD-3-Clause
// Command-line flags of the perf binaries, spelled and defaulted as in nccl-tests.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace cclperf {

// How the per-rank time is combined across ranks (-a), as nccl-tests numbers it.
enum class TimeAverage { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

// -Z and its parameters. `name` is resolved to `codec` by the backend (ccl's own parser).
struct CodecOptions {
  std::string name = "none";
  cclCodec_t codec = cclCodecNone;
  int blockSize = 0;     // 0: the codec's default
  int valueBits = 0;     // sparsifiers: 32 or 16; 0: default
  int scaleBits = 0;     // int codecs: 32 or 16; 0: default
  double keepRatio = 0;  // topk, randk; 0: default
  float threshold = 0;
  int stochastic = 0;
  unsigned long long seed = 0;
  cclFeedbackKind_t feedback = cclFeedbackNone;
  float locoBeta = 0.5f;
  int locoReset = 0;

  // Whether -Z named a codec other than none (before the backend resolves it).
  bool requested() const;
  bool active() const { return codec != cclCodecNone; }
};

struct Options {
  int nthreads = 1;
  int ngpus = 1;
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  size_t stepFactor = 1;
  int iters = 20;
  int aggIters = 1;
  int warmupIters = 5;
  int parallelInit = 0;
  int check = 1;
  std::vector<cclDataType_t> types{cclFloat32};
  std::vector<cclRedOp_t> ops{cclSum};
  int root = 0;  // -1: every root in turn
  int blocking = 0;
  int streamNull = 0;
  int timeoutSeconds = 0;
  int graphLaunches = 0;
  int reportCputime = 0;
  TimeAverage average = TimeAverage::kMean;
  int stallDumpSeconds = 0;
  size_t misalign = 0;  // --misalign: buffers start this many bytes past an aligned address  // --stall_dump: print
                        // every thread's stack after this long without progress
  bool deviceMemory = false;  // -M device: buffers in CUDA device memory, calls on a CUDA stream
  CodecOptions codec;
  bool help = false;
};

// Thrown for a bad command line; main prints the message and the usage.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Options parseOptions(int argc, char** argv);
// The codec of -Z as the library takes it (CCL_COMPRESSION_INITIALIZER, then the flags).
cclCompression_t compressionFrom(const CodecOptions& z);
// Checks that need the codec resolved by the backend (o.codec.codec).
void validateResolvedCodec(const Options& o);
std::string usage(const char* program);

// Parses "8", "1K", "64M", "1G" (binary units, as nccl-tests); a UsageError for anything
// else, nan, inf and sizes of 2^63 bytes or more.
size_t parseSize(const std::string& text);

// Every codec name of the library loaded, as cclCodecName prints them, space-separated.
std::string codecNames();

const char* opName(cclRedOp_t op);

}  // namespace cclperf
