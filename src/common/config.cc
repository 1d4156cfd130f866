#include "common/config.h"

#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace ccl::config {

const std::vector<Var>& all() {
  static const std::vector<Var> vars = {
      {"CCL_DEBUG", "WARN", "Log level on stderr: NONE, WARN, INFO or TRACE."},
      {"CCL_DEBUG_SUBSYS", "ALL", "Comma-separated subsystems to log (INIT, TRANSPORT, COLL, ALL)."},
      {"CCL_TIMEOUT", "300", "Seconds any blocking wait may last before it fails with cclSystemError."},
      {"CCL_SOCKET_IFNAME", "", "Network interface for the bootstrap (default: first up non-loopback, else lo)."},
      {"CCL_SOCKET_FAMILY", "AF_INET", "Address family for the bootstrap: AF_INET or AF_INET6."},
      {"CCL_TRANSPORT", "ucx", "Transport between ranks on host memory."},
      {"CCL_UCX_ERR_MODE", "auto", "UCX peer-failure handling: auto (peer on other hosts, none on this host so shared memory is used; ccl watches local peers itself), peer, none."},
      {"CCL_ALGO", "auto", "Force an algorithm: auto, ring, tree (recursive doubling), direct (one round to every rank), twoshot, sparse."},
      {"CCL_CHUNK_BYTES", "1M", "Pipeline chunk size of ring, chain and compressed algorithms."},
      {"CCL_TREE_MAX_BYTES", "64K", "Allreduce messages up to this size use recursive doubling (auto mode)."},
      {"CCL_DIRECT_MAX_BYTES", "1K", "Allreduce messages up to this size go from every rank to every rank in one round (auto mode)."},
      {"CCL_PROGRESS_YIELD", "1", "Yield the CPU when a progress loop finds nothing to do (for oversubscribed nodes)."},
      {"CCL_NCCL_LIBRARY", "/usr/local/cuda/lib64/libnccl.so.2", "Real NCCL library the NCCL face forwards device-memory calls to in drop-in mode (loaded with RTLD_LOCAL)."},
      {"CCL_CODEC", "none", "Default codec of communicators (none, fp8_e4m3, fp8_e5m2, mxfp8_e4m3, int8, int4, int2, topk, randk, threshold), applied to the collectives CCL_COMPRESS enables."},
      {"CCL_CODEC_MIN_BYTES", "64K", "Messages smaller than this many bytes are never compressed."},
      {"CCL_COMPRESS", "allreduce,reducescatter,allgather", "Comma-separated collectives a communicator's default codec applies to (allreduce, reducescatter, allgather, broadcast, alltoall, sendrecv, all, none)."},
      {"CCL_CODEC_SHM", "auto", "auto: a communicator whose peers are all reached through shared memory does not apply its default codec (compression costs more there than it saves; codecs passed to *Ex calls still apply). on: apply it anyway."},
      {"CCL_FEEDBACK", "none", "Error feedback kept per buffer for compressed calls made without a feedback handle: none, ef (residual) or loco."},
      {"CCL_CODEC_BLOCK", "0", "Quantiser block size (elements per scale); 0: the codec's default (128, mxfp8 32)."},
      {"CCL_CODEC_SCALE_BITS", "32", "Scale width of int codecs: 32 (fp32) or 16 (fp16)."},
      {"CCL_CODEC_VALUE_BITS", "32", "Value width of sparsifiers: 32 (fp32) or 16 (fp16)."},
      {"CCL_CODEC_KEEP", "0.01", "Fraction of elements top-k and random-k keep."},
      {"CCL_CODEC_THRESHOLD", "0", "Threshold sparsifier: keep elements with |x| >= this."},
      {"CCL_CODEC_STOCHASTIC", "0", "Quantisers round stochastically (1) or to nearest even (0)."},
      {"CCL_CODEC_SEED", "0", "Seed of stochastic rounding and random-k (combined with the call number)."},
      {"CCL_LOCO_BETA", "0.5", "LoCo error feedback: weight of the previous error in the moving average."},
      {"CCL_LOCO_RESET", "0", "LoCo error feedback: clear the error every this many calls (0: never)."},
  };
  return vars;
}

static const Var& find(const char* name) {
  for (const Var& v : all())
    if (std::strcmp(v.name, name) == 0) return v;
  throw Error(cclInternalError, std::string("undeclared configuration variable ") + name);
}

std::string getString(const char* name) {
  const Var& v = find(name);
  const char* env = std::getenv(name);
  return (env && *env) ? std::string(env) : std::string(v.defaultValue);
}

int64_t getInt(const char* name) {
  std::string s = getString(name);
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(s.c_str(), &end, 0);
  CCL_CHECK(end != s.c_str() && errno == 0, cclInvalidArgument, std::string(name) + "='" + s + "' is not an integer");
  int64_t mult = 1;
  if (*end) {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K':
        mult = int64_t{1} << 10;
        break;
      case 'M':
        mult = int64_t{1} << 20;
        break;
      case 'G':
        mult = int64_t{1} << 30;
        break;
      default:
        mult = 0;
    }
    if (mult != 0 && end[1] != '\0') mult = 0;
  }
  CCL_CHECK(mult != 0, cclInvalidArgument, name + std::string("='") + s + "' is not an integer");
  return value * mult;
}

double getDouble(const char* name) {
  std::string s = getString(name);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  CCL_CHECK(end != s.c_str() && *end == '\0' && errno == 0, cclInvalidArgument,
            std::string(name) + "='" + s + "' is not a number");
  return value;
}

bool getBool(const char* name) {
  std::string s = getString(name);
  for (const char* t : {"1", "true", "yes", "on"})
    if (strcasecmp(s.c_str(), t) == 0) return true;
  return false;
}

}  // namespace ccl::config
