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
      {"CCL_ALGO", "auto", "Force an algorithm: auto, ring, tree (recursive doubling), direct."},
      {"CCL_CHUNK_BYTES", "256K", "Pipeline chunk size of ring and broadcast/reduce algorithms."},
      {"CCL_TREE_MAX_BYTES", "64K", "Allreduce messages up to this size use recursive doubling (auto mode)."},
      {"CCL_PROGRESS_YIELD", "1", "Yield the CPU when a progress loop finds nothing to do (for oversubscribed nodes)."},
      {"CCL_NCCL_LIBRARY", "/usr/local/cuda/lib64/libnccl.so.2", "Real NCCL library the NCCL face forwards device-memory calls to in drop-in mode (loaded with RTLD_LOCAL)."},
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

bool getBool(const char* name) {
  std::string s = getString(name);
  for (const char* t : {"1", "true", "yes", "on"})
    if (strcasecmp(s.c_str(), t) == 0) return true;
  return false;
}

}  // namespace ccl::config
