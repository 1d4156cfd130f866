// SPDX-License-Identifier: BSD-3-Clause
#include "harness/options.h"

#include <getopt.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "codecs/codec_table.h"
#include "harness/datatypes.h"

namespace cclperf {
namespace {

struct OpName {
  const char* name;
  cclRedOp_t op;
};
constexpr std::array<OpName, 5> kOps = {
    {{"sum", cclSum}, {"prod", cclProd}, {"max", cclMax}, {"min", cclMin}, {"avg", cclAvg}}};

long parseInt(const char* flag, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 0);
  if (end == text || *end != '\0') throw UsageError(std::string("invalid value '") + text + "' for " + flag);
  return v;
}

int parseNonNegative(const char* flag, const char* text) {
  const long v = parseInt(flag, text);
  if (v < 0 || v > 1000000000) throw UsageError(std::string("value out of range for ") + flag + ": " + text);
  return int(v);
}

std::vector<cclRedOp_t> parseOps(const std::string& text) {
  std::vector<cclRedOp_t> ops;
  for (const auto& entry : kOps) {
    if (text == "all" || text == entry.name) ops.push_back(entry.op);
  }
  if (ops.empty()) throw UsageError("unknown op '" + text + "' (sum prod min max avg all)");
  return ops;
}

double parseReal(const char* flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0') throw UsageError(std::string("invalid value '") + text + "' for " + flag);
  return v;
}

unsigned long long parseSeed(const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 0);
  if (end == text || *end != '\0' || text[0] == '-')
    throw UsageError(std::string("invalid value '") + text + "' for --seed");
  return v;
}

cclFeedbackKind_t parseFeedback(const std::string& text) {
  if (text == "none") return cclFeedbackNone;
  if (text == "ef" || text == "residual") return cclFeedbackResidual;
  if (text == "loco") return cclFeedbackLoco;
  throw UsageError("unknown feedback '" + text + "' (none ef loco)");
}

// Codec parameters have long names only: nccl-tests keeps adding one-letter flags.
enum CodecFlag : int {
  kBlock = 256,
  kScaleBits,
  kValueBits,
  kKeep,
  kThreshold,
  kStochastic,
  kSeed,
  kFeedback,
  kLocoBeta,
  kLocoReset,
  kStallDump,
  kMisalign,
};

const option kLongOptions[] = {{"nthreads", required_argument, nullptr, 't'},
                               {"ngpus", required_argument, nullptr, 'g'},
                               {"minbytes", required_argument, nullptr, 'b'},
                               {"maxbytes", required_argument, nullptr, 'e'},
                               {"stepbytes", required_argument, nullptr, 'i'},
                               {"stepfactor", required_argument, nullptr, 'f'},
                               {"iters", required_argument, nullptr, 'n'},
                               {"agg_iters", required_argument, nullptr, 'm'},
                               {"warmup_iters", required_argument, nullptr, 'w'},
                               {"parallel_init", required_argument, nullptr, 'p'},
                               {"check", required_argument, nullptr, 'c'},
                               {"op", required_argument, nullptr, 'o'},
                               {"datatype", required_argument, nullptr, 'd'},
                               {"root", required_argument, nullptr, 'r'},
                               {"blocking", required_argument, nullptr, 'z'},
                               {"stream_null", required_argument, nullptr, 'y'},
                               {"timeout", required_argument, nullptr, 'T'},
                               {"cudagraph", required_argument, nullptr, 'G'},
                               {"report_cputime", required_argument, nullptr, 'C'},
                               {"average", required_argument, nullptr, 'a'},
                               {"codec", required_argument, nullptr, 'Z'},
                               {"memory", required_argument, nullptr, 'M'},
                               {"block", required_argument, nullptr, kBlock},
                               {"scale_bits", required_argument, nullptr, kScaleBits},
                               {"value_bits", required_argument, nullptr, kValueBits},
                               {"keep", required_argument, nullptr, kKeep},
                               {"threshold", required_argument, nullptr, kThreshold},
                               {"stochastic", required_argument, nullptr, kStochastic},
                               {"seed", required_argument, nullptr, kSeed},
                               {"feedback", required_argument, nullptr, kFeedback},
                               {"loco_beta", required_argument, nullptr, kLocoBeta},
                               {"loco_reset", required_argument, nullptr, kLocoReset},
                               {"stall_dump", required_argument, nullptr, kStallDump},
                               {"misalign", required_argument, nullptr, kMisalign},
                               {"help", no_argument, nullptr, 'h'},
                               {nullptr, 0, nullptr, 0}};

// Range checks of the codec parameters are left to the library, which names the bad field.
bool applyCodecOption(CodecOptions& z, int c, const char* arg) {
  switch (c) {
    case 'Z':
      z.name = arg;
      return true;
    case kBlock:
      z.blockSize = parseNonNegative("--block", arg);
      return true;
    case kScaleBits:
      z.scaleBits = parseNonNegative("--scale_bits", arg);
      return true;
    case kValueBits:
      z.valueBits = parseNonNegative("--value_bits", arg);
      return true;
    case kKeep:
      z.keepRatio = parseReal("--keep", arg);
      return true;
    case kThreshold:
      z.threshold = float(parseReal("--threshold", arg));
      return true;
    case kStochastic:
      z.stochastic = parseNonNegative("--stochastic", arg);
      return true;
    case kSeed:
      z.seed = parseSeed(arg);
      return true;
    case kFeedback:
      z.feedback = parseFeedback(arg);
      return true;
    case kLocoBeta:
      z.locoBeta = float(parseReal("--loco_beta", arg));
      return true;
    case kLocoReset:
      z.locoReset = parseNonNegative("--loco_reset", arg);
      return true;
    default:
      return false;
  }
}

void applyOption(Options& o, int c, const char* arg) {
  if (applyCodecOption(o.codec, c, arg)) return;
  switch (c) {
    case 't':
      o.nthreads = parseNonNegative("-t", arg);
      break;
    case 'g':
      o.ngpus = parseNonNegative("-g", arg);
      break;
    case 'b':
      o.minBytes = parseSize(arg);
      break;
    case 'e':
      o.maxBytes = parseSize(arg);
      break;
    case 'i':
      o.stepBytes = parseSize(arg);
      break;
    case 'f':
      o.stepFactor = size_t(parseNonNegative("-f", arg));
      break;
    case 'n':
      o.iters = parseNonNegative("-n", arg);
      break;
    case 'm':
      o.aggIters = parseNonNegative("-m", arg);
      break;
    case 'w':
      o.warmupIters = parseNonNegative("-w", arg);
      break;
    case 'p':
      o.parallelInit = parseNonNegative("-p", arg);
      break;
    case 'c':
      o.check = parseNonNegative("-c", arg);
      break;
    case 'o':
      o.ops = parseOps(arg);
      break;
    case 'd':
      try {
        o.types = parseDataTypes(arg);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
      break;
    case 'r':
      o.root = std::string(arg) == "all" ? -1 : int(parseInt("-r", arg));
      break;
    case 'z':
      o.blocking = parseNonNegative("-z", arg);
      break;
    case 'y':
      o.streamNull = parseNonNegative("-y", arg);
      break;
    case 'T':
      o.timeoutSeconds = parseNonNegative("-T", arg);
      break;
    case 'G':
      o.graphLaunches = parseNonNegative("-G", arg);
      break;
    case 'C':
      o.reportCputime = parseNonNegative("-C", arg);
      break;
    case 'a': {
      const int a = parseNonNegative("-a", arg);
      if (a > 3) throw UsageError("-a must be 0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
      o.average = TimeAverage(a);
      break;
    }
    case 'M': {
      const std::string m = arg;
      if (m != "host" && m != "device") throw UsageError("-M: '" + m + "' is not host or device");
      o.deviceMemory = m == "device";
      break;
    }
    case kStallDump:
      o.stallDumpSeconds = parseNonNegative("--stall_dump", arg);
      break;
    case kMisalign:
      o.misalign = static_cast<size_t>(parseNonNegative("--misalign", arg));
      if (o.misalign > 63) throw UsageError("--misalign: at most 63 bytes");
      break;
    case 'h':
      o.help = true;
      break;
    default:
      throw UsageError("invalid option");
  }
}

void validate(const Options& o) {
  if (o.nthreads < 1) throw UsageError("-t must be at least 1");
  if (o.ngpus != 1) throw UsageError("-g must be 1: one host or device per rank (use -t for more ranks per process)");
  if (o.minBytes > o.maxBytes) throw UsageError("minbytes is larger than maxbytes");
  if (o.stepFactor <= 1 && o.stepBytes == 0) throw UsageError("-i must be positive when -f is 1");
  if (o.iters < 1 || o.aggIters < 1) throw UsageError("-n and -m must be at least 1");
  if (o.root < -1) throw UsageError("-r must be a rank or 'all'");
}

}  // namespace

size_t parseSize(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  // strtod also reads nan and inf, which no size is (nan would pass a `value < 0` check).
  if (end == text.c_str() || !std::isfinite(value) || value < 0)
    throw UsageError("invalid size '" + text + "' (a number of bytes, K/M/G suffixes)");
  double unit = 1;
  const std::string suffix(end);
  if (suffix == "K" || suffix == "k") {
    unit = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    unit = 1024.0 * 1024.0;
  } else if (suffix == "G" || suffix == "g") {
    unit = 1024.0 * 1024.0 * 1024.0;
  } else if (!suffix.empty()) {
    throw UsageError("invalid size '" + text + "' (a number of bytes, K/M/G suffixes)");
  }
  // Converting a double of 2^64 or more to size_t is undefined (1e30 gave 0 bytes: an empty
  // sweep that reported OK); no buffer reaches 2^63 bytes (the largest ptrdiff_t) anyway.
  const double bytes = value * unit;
  if (!(bytes < 0x1p63)) throw UsageError("size '" + text + "' is too large: at most 2^63 - 1 bytes");
  return size_t(bytes);
}

std::string codecNames() {
  std::string names;
  for (int c = 0; c < cclCodecCount(); ++c) {
    if (!names.empty()) names += ' ';
    names += cclCodecName(cclCodec_t(c));
  }
  return names;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  optind = 1;
  opterr = 0;
  for (;;) {
    const int c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:G:C:a:Z:M:h", kLongOptions, nullptr);
    if (c == -1) break;
    if (c == '?' || c == ':') {
      throw UsageError(std::string("invalid or incomplete option '") +
                       (optopt ? std::string(1, char(optopt)) : argv[optind - 1]) + "'");
    }
    applyOption(o, c, optarg);
  }
  if (optind < argc) throw UsageError(std::string("unexpected argument '") + argv[optind] + "'");
  if (!o.help) validate(o);
  return o;
}

std::string usage(const char* program) {
  return std::string("USAGE: ") + program +
         "\n\t[-np,--nprocs <ranks as processes this program forks (no MPI needed)>]"
         "\n\t[-t,--nthreads <ranks as threads of this process>]"
         "\n\t[-g,--ngpus <must be 1>]"
         "\n\t[-M,--memory <host/device: buffers in host memory (default) or on CUDA devices, a stream per rank>]"
         "\n\t[-b,--minbytes <min size in bytes, K/M/G suffixes>]"
         "\n\t[-e,--maxbytes <max size in bytes>]"
         "\n\t[-i,--stepbytes <increment size>]"
         "\n\t[-f,--stepfactor <increment factor>]"
         "\n\t[-n,--iters <iteration count>]"
         "\n\t[-m,--agg_iters <calls aggregated in one group>]"
         "\n\t[-w,--warmup_iters <warmup iteration count>]"
         "\n\t[-p,--parallel_init <0/1: each thread joins with cclCommInitRank>]"
         "\n\t[-c,--check <0/1: validate every element>]"
         "\n\t[-o,--op <sum/prod/min/max/avg/all>]"
         "\n\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/f8e4m3/f8e5m2/all>]"
         "\n\t[-r,--root <root rank or 'all'>]"
         "\n\t[-z,--blocking <0/1: barrier after each call>]"
         "\n\t[-y,--stream_null <accepted; host calls use a NULL stream>]"
         "\n\t[-T,--timeout <seconds, passed to the communicator config>]"
         "\n\t[-G,--cudagraph <accepted, no effect on the host>]"
         "\n\t[-C,--report_cputime <0/1>]"
         "\n\t[-a,--average <0/1/2/3: time of rank 0 / mean / min / max over ranks>]"
         "\n\t[-Z,--codec <" +
         codecNames() +
         ">: passed per call"
         "\n\t    through the *Ex calls; adds the columns wire/raw, maxrel, rmsrel]"
         "\n\t[--block <quantizer elements per scale, multiple of 8; 0: codec default>]"
         "\n\t[--scale_bits <int codecs: 32 or 16 (fp16 scales)>]"
         "\n\t[--value_bits <sparsifiers: 32 or 16 (fp16 values)>]"
         "\n\t[--keep <topk/randk: fraction of elements kept, (0,1]; 0: default 0.01>]"
         "\n\t[--threshold <threshold: keep |x| >= this>]"
         "\n\t[--stochastic <0/1: quantizers round stochastically>]"
         "\n\t[--seed <stochastic rounding and randk seed>]"
         "\n\t[--feedback <none/ef/loco: error feedback, one handle per rank and per call of a -m group (allreduce, "
         "reduce_scatter, all_gather, sendrecv's sends; refused elsewhere)>]"
         "\n\t[--loco_beta <LoCo moving-average weight in [0,1), default 0.5>]"
         "\n\t[--loco_reset <LoCo reset period in calls, 0: never>]"
         "\n\t[--misalign <bytes past an aligned address where the buffers start, 0-63; 1-3: inside an element>]"
         "\n\t[--stall_dump <seconds without a call enqueued or finished before every thread's stack is printed; 0: "
         "never>]"
         "\n\t[-h,--help]\n";
}

void validateResolvedCodec(const Options& o) {
  const cclCodec_t c = o.codec.codec;
  const bool sparsifier = ccl::codec::isSparsifier(c);
  if (o.check && sparsifier && o.codec.feedback != cclFeedbackNone) {
    throw UsageError(
        "-c 1 cannot bound a sparsifier with --feedback: the carried residual grows with every call; "
        "use -c 0");
  }
}

cclCompression_t compressionFrom(const CodecOptions& z) {
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  c.codec = z.codec;
  c.blockSize = z.blockSize;
  c.bits = z.valueBits;
  c.scaleBits = z.scaleBits;
  c.keepRatio = z.keepRatio;
  c.threshold = z.threshold;
  c.stochasticRounding = z.stochastic;
  c.seed = z.seed;
  return c;
}

bool CodecOptions::requested() const {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return lower != "none";
}

const char* opName(cclRedOp_t op) {
  for (const auto& entry : kOps) {
    if (entry.op == op) return entry.name;
  }
  return "none";
}

}  // namespace cclperf
