#include "transport/ucx/ucx_context.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

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

static ucp_context_h createContext() {
  ucp_config_t* config = nullptr;
  // UCX_* variables (UCX_TLS, ...) are honoured here; they belong to UCX, not to ccl's registry.
  checkStatus(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 1;
  params.name = "ccl";
  ucp_context_h context = nullptr;
  ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  checkStatus(status, "ucp_init");
  CCL_INFO("UCX %s context created", ucp_get_version_string());
  return context;
}

// UCX has no query for the transports it selected, so read its resource table
// ("resource 3 : md 2 dev 3 flags -- sysv/memory").
static bool detectSharedMemory(ucp_context_h context) {
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (!stream) return false;
  ucp_context_print_info(context, stream);
  std::fclose(stream);
  std::string info(text, size);
  std::free(text);
  return info.find(" posix/") != std::string::npos || info.find(" sysv/") != std::string::npos;
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
    context = createContext();
    owner = getpid();
    sharedMemory = detectSharedMemory(context);
  }
  return context;
}

bool hasSharedMemory() {
  processContext();
  std::lock_guard<std::mutex> lock(contextMutex);
  return sharedMemory;
}

}  // namespace ccl::transport::ucx
