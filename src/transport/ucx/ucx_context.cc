// SPDX-License-Identifier: BSD-3-Clause
#include "transport/ucx/ucx_context.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"

namespace ccl::transport::ucx {

void checkStatus(ucs_status_t status, const std::string& what) {
  if (status != UCS_OK) throw Error(cclSystemError, what + ": " + ucs_status_string(status));
}

cclResult_t resultOf(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_MESSAGE_TRUNCATED:
      return cclInvalidUsage;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_CANCELED:
    case UCS_ERR_IO_ERROR:
      return cclRemoteError;
    default:
      return cclSystemError;
  }
}

// Largest message sent eagerly when every resource of the context is TCP (see
// processContext). A larger message keeps the rendezvous, so a receive posted late never
// has UCX buffer more than this much of one message.
constexpr const char* kTcpEagerMax = "4M";

// rndvThresh, when not null, overrides UCX's eager/rendezvous switch (UCX_RNDV_THRESH).
static ucp_context_h createContext(const char* rndvThresh) {
  ucp_config_t* config = nullptr;
  // UCX_* variables (UCX_TLS, ...) are honoured here; they belong to UCX, not to ccl's registry.
  checkStatus(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucs_status_t status = rndvThresh ? ucp_config_modify(config, "RNDV_THRESH", rndvThresh) : UCS_OK;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 1;
  params.name = "ccl";
  ucp_context_h context = nullptr;
  if (status == UCS_OK) status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  checkStatus(status, "ucp_init");
  CCL_INFO("UCX %s context created%s%s", ucp_get_version_string(), rndvThresh ? ", eager up to " : "",
           rndvThresh ? rndvThresh : "");
  return context;
}

// UCX has no query for the transports it selected, so read its resource table, one line
// per resource (like "resource 3 : md 2 dev 3 flags -- sysv/memory"), and return the
// transport names ("sysv", ...).
static std::vector<std::string> transportNames(ucp_context_h context) {
  std::vector<std::string> names;
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (!stream) return names;
  ucp_context_print_info(context, stream);
  std::fclose(stream);
  std::istringstream lines(std::string(text, size));
  std::free(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t flags = line.find("flags -- ");
    if (line.find("resource") == std::string::npos || flags == std::string::npos) continue;
    const size_t start = flags + 9;
    names.push_back(line.substr(start, line.find('/', start) - start));
  }
  return names;
}

static std::mutex contextMutex;
static ucp_context_h context = nullptr;
static bool sharedMemory = false;

ucp_context_h processContext() {
  // Never destroyed: workers of communicators that outlive static destruction may still
  // refer to it, and the OS reclaims it at exit.
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(contextMutex);
  // UCX's progress thread does not survive fork(), so a child of a process that already
  // used UCX would hang on connection set-up; refuse it clearly instead.
  CCL_CHECK(!context || owner == getpid(), cclSystemError,
            "UCX was initialised before this process was forked; a forked child cannot use it (fork before "
            "creating communicators, or exec)");
  if (!context) {
    context = createContext(nullptr);
    owner = getpid();
    const std::vector<std::string> tls = transportNames(context);
    sharedMemory =
        std::any_of(tls.begin(), tls.end(), [](const std::string& t) { return t == "posix" || t == "sysv"; });
    // Over TCP, UCX's rendezvous (above 8 KiB) holds each message until the receiver's
    // process has run and its reply has crossed a loaded link; sent eagerly, messages are
    // paced by the kernel's flow control instead, which was faster on a slow link
    // (perf/slowlink/README.md, 'Against the targets', 'Eager sends over TCP'). Only when every
    // resource is TCP: over shared memory eager sends were slower (same section), RDMA moves
    // large messages best by rendezvous, and UCX 1.13 has one threshold per context.
    const bool tcpOnly =
        std::all_of(tls.begin(), tls.end(), [](const std::string& t) { return t == "tcp" || t == "self"; });
    if (tcpOnly && !tls.empty() && !std::getenv("UCX_RNDV_THRESH")) {
      ucp_cleanup(context);
      context = createContext(kTcpEagerMax);
    }
  }
  return context;
}

bool hasSharedMemory() {
  processContext();
  std::lock_guard<std::mutex> lock(contextMutex);
  return sharedMemory;
}

}  // namespace ccl::transport::ucx
