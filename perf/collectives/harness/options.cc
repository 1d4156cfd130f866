#include "harness/options.h"

#include <getopt.h>

#include <array>
#include <cstdlib>

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
                               {"help", no_argument, nullptr, 'h'},
                               {nullptr, 0, nullptr, 0}};

void applyOption(Options& o, int c, const char* arg) {
  switch (c) {
    case 't':
      o.nthreads = parseNonNegative("-t", arg);
      break;
    case 'g':
      o.ngpus = parseNonNegative("-g", arg);
      break;
    case 'b':
      o.min_bytes = parseSize(arg);
      break;
    case 'e':
      o.max_bytes = parseSize(arg);
      break;
    case 'i':
      o.step_bytes = parseSize(arg);
      break;
    case 'f':
      o.step_factor = size_t(parseNonNegative("-f", arg));
      break;
    case 'n':
      o.iters = parseNonNegative("-n", arg);
      break;
    case 'm':
      o.agg_iters = parseNonNegative("-m", arg);
      break;
    case 'w':
      o.warmup_iters = parseNonNegative("-w", arg);
      break;
    case 'p':
      o.parallel_init = parseNonNegative("-p", arg);
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
      o.stream_null = parseNonNegative("-y", arg);
      break;
    case 'T':
      o.timeout_s = parseNonNegative("-T", arg);
      break;
    case 'G':
      o.graph_launches = parseNonNegative("-G", arg);
      break;
    case 'C':
      o.report_cputime = parseNonNegative("-C", arg);
      break;
    case 'a': {
      const int a = parseNonNegative("-a", arg);
      if (a > 3) throw UsageError("-a must be 0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
      o.average = TimeAverage(a);
      break;
    }
    case 'h':
      o.help = true;
      break;
    default:
      throw UsageError("invalid option");
  }
}

void validate(const Options& o) {
  if (o.nthreads < 1) throw UsageError("-t must be at least 1");
  if (o.ngpus != 1) throw UsageError("-g must be 1: ranks run on the host (use -t for more ranks per process)");
  if (o.min_bytes > o.max_bytes) throw UsageError("minbytes is larger than maxbytes");
  if (o.step_factor <= 1 && o.step_bytes == 0) throw UsageError("-i must be positive when -f is 1");
  if (o.iters < 1 || o.agg_iters < 1) throw UsageError("-n and -m must be at least 1");
  if (o.root < -1) throw UsageError("-r must be a rank or 'all'");
}

}  // namespace

size_t parseSize(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || value < 0) throw UsageError("invalid size '" + text + "'");
  double unit = 1;
  const std::string suffix(end);
  if (suffix == "K" || suffix == "k") {
    unit = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    unit = 1024.0 * 1024.0;
  } else if (suffix == "G" || suffix == "g") {
    unit = 1024.0 * 1024.0 * 1024.0;
  } else if (!suffix.empty()) {
    throw UsageError("invalid size '" + text + "'");
  }
  return size_t(value * unit);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  optind = 1;
  opterr = 0;
  for (;;) {
    const int c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:G:C:a:h", kLongOptions, nullptr);
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
         "\n\t[-t,--nthreads <ranks as threads of this process>]"
         "\n\t[-g,--ngpus <must be 1 on the host>]"
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
         "\n\t[-h,--help]\n";
}

const char* opName(cclRedOp_t op) {
  for (const auto& entry : kOps) {
    if (entry.op == op) return entry.name;
  }
  return "none";
}

}  // namespace cclperf
