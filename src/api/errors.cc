// SPDX-License-Identifier: BSD-3-Clause
// Version, error strings, the last-error message of each thread, and the asynchronous
// failures' of each communicator (by its handle's value).
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "api/comm.h"
#include "common/log.h"

namespace ccl::api {

static thread_local std::string tlsLastError;
static thread_local uint64_t tlsLastSerial = 0;

// `comm` is not read: after cclCommAbort from another thread it may already be freed when
// the operation it interrupted reports its error here.
cclResult_t recordError(cclComm_t /*comm*/, const char* fn, cclResult_t code, const std::string& message) {
  tlsLastError = std::string(fn) + ": " + message;
  tlsLastSerial = nextErrorSerial();
  CCL_WARN("%s (%s)", tlsLastError.c_str(), cclGetErrorString(code));
  return code;
}

namespace {

struct AsyncMessage {
  std::string message;
  uint64_t serial = 0;  // 0: none yet
};

struct AsyncMessages {
  std::mutex mutex;
  std::unordered_map<const void*, std::shared_ptr<AsyncMessage>> byKey;  // an alias shares its entry
};

AsyncMessages& asyncMessages() {
  static auto* table = new AsyncMessages;  // never destroyed: comms may go after static destruction
  return *table;
}

}  // namespace

void enterComm(const void* handle) {
  AsyncMessages& t = asyncMessages();
  std::lock_guard lock(t.mutex);
  t.byKey[handle] = std::make_shared<AsyncMessage>();
}

void aliasComm(const void* alias, const void* handle) {
  AsyncMessages& t = asyncMessages();
  std::lock_guard lock(t.mutex);
  const auto it = t.byKey.find(handle);
  if (it != t.byKey.end()) t.byKey[alias] = it->second;
}

void eraseComm(const void* key) {
  AsyncMessages& t = asyncMessages();
  std::lock_guard lock(t.mutex);
  t.byKey.erase(key);
}

void recordAsyncMessage(cclComm_t comm, const std::string& message) {
  AsyncMessages& t = asyncMessages();
  std::lock_guard lock(t.mutex);
  const auto it = t.byKey.find(comm);
  if (it == t.byKey.end() || it->second->serial != 0) return;
  it->second->message = message;
  it->second->serial = nextErrorSerial();
}

const char* newerError(const void* key, uint64_t threadSerial, const std::string& threadMessage) {
  static thread_local std::string copy;  // the entry's message, as this thread read it
  if (key) {
    AsyncMessages& t = asyncMessages();
    std::lock_guard lock(t.mutex);
    const auto it = t.byKey.find(key);
    if (it != t.byKey.end() && it->second->serial > threadSerial) {
      copy = it->second->message;
      return copy.c_str();
    }
  }
  return threadMessage.c_str();
}

}  // namespace ccl::api

extern "C" {

CCL_API cclResult_t cclGetVersion(int* version) {
  return ccl::api::guard(nullptr, "cclGetVersion", [&] {
    CCL_CHECK(version, cclInvalidArgument, "version is NULL");
    *version = CCL_VERSION_CODE;
  });
}

CCL_API const char* cclGetErrorString(cclResult_t result) {
  switch (result) {
    case cclSuccess:
      return "no error";
    case cclUnhandledCudaError:
      return "unhandled cuda error (run with CCL_DEBUG=INFO for details)";
    case cclSystemError:
      return "unhandled system error (run with CCL_DEBUG=INFO for details)";
    case cclInternalError:
      return "internal error - please report this issue to the ccl developers";
    case cclInvalidArgument:
      return "invalid argument (run with CCL_DEBUG=WARN for details)";
    case cclInvalidUsage:
      return "invalid usage (run with CCL_DEBUG=WARN for details)";
    case cclRemoteError:
      return "remote process exited or there was a network error";
    case cclInProgress:
      return "operation in progress";
    default:
      return "unknown result code";
  }
}

CCL_API const char* cclGetLastError(cclComm_t comm) {
  return ccl::api::newerError(comm, ccl::api::tlsLastSerial, ccl::api::tlsLastError);
}

}  // extern "C"
