// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/real_nccl.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "common/config.h"
#include "common/error.h"
#include "common/face_note.h"
#include "common/log.h"
#include "nccl/nccl_abi.h"

// The note that marks this copy of the face (common/face_note.h).
#define CCL_STR2(x) #x
#define CCL_STR(x) CCL_STR2(x)
asm(".pushsection .note.ccl.nccl-face, \"a\", @note\n"
    ".balign 4\n"
    ".long 4\n"
    ".long 0\n"
    ".long " CCL_STR(CCL_FACE_NOTE_TYPE) "\n"
    ".asciz \"ccl\"\n"
    ".balign 4\n"
    ".popsection\n");

namespace ccl::nccl::real {
namespace {

std::atomic<const void*> gRealBase{nullptr};  // load address of NVIDIA's library, once resolved

struct Library {
  Mode mode = Mode::kUnavailable;
  void* handle = nullptr;
  std::string where;
};

// RTLD_DEEPBIND keeps the real library's calls to its own public functions inside it, even
// though ccl exports the same names globally. The sanitizer runtimes refuse that flag.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kDeepBind = 0;
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif

std::string objectName(const void* addr) {
  Dl_info info{};
  if (dladdr(addr, &info) && info.dli_fname) return info.dli_fname;
  return "?";
}

Library openByPath() {
  Library lib;
  const std::string path = config::ncclLibrary();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kDeepBind);
  if (!h) {
    const char* why = dlerror();
    lib.where = "cannot load CCL_NCCL_LIBRARY=" + path + ": " + (why ? why : "unknown error");
    return lib;
  }
  void* probe = dlsym(h, "pncclGetVersion");
  if (!probe || isCclFace(probe)) {
    lib.where =
        "CCL_NCCL_LIBRARY=" + path + (probe ? " is ccl itself" : " has no pncclGetVersion") + ", not NVIDIA's NCCL";
    dlclose(h);
    return lib;
  }
  lib.mode = Mode::kDropIn;
  lib.handle = h;
  lib.where = objectName(probe);
  return lib;
}

Library resolve() {
  Library lib;
  void* next = dlsym(RTLD_NEXT, "pncclGetVersion");
  if (next && !isCclFace(next)) {
    lib.mode = Mode::kInterposer;
    lib.handle = RTLD_NEXT;
    lib.where = objectName(next);
  } else {
    lib = openByPath();
  }
  if (lib.mode != Mode::kUnavailable) {
    Dl_info info{};
    if (dladdr(dlsym(lib.handle, "pncclGetVersion"), &info)) gRealBase.store(info.dli_fbase);
  }
  if (lib.mode == Mode::kUnavailable)
    CCL_INFO("NCCL face: no real NCCL (%s); device buffers cannot be served", lib.where.c_str());
  else
    CCL_INFO("NCCL face: real NCCL for device buffers: %s (%s mode)", lib.where.c_str(),
             lib.mode == Mode::kInterposer ? "interposer" : "drop-in");
  return lib;
}

// The library stays loaded until exit: communicators may hold its objects until then.
const Library& library() {
  static const Library lib = resolve();
  return lib;
}

}  // namespace

bool isCclFace(const void* addr) { return insideCclFace(addr); }

void checkResult(int result, const std::string& what) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  using GetLastError = const char* (*)(ncclComm_t);
  const char* last = reinterpret_cast<GetLastError>(symbol("pncclGetLastError"))(nullptr);
  throw Error(static_cast<cclResult_t>(result), "the real NCCL's " + what + " failed: " + (last ? last : ""));
}

bool calledFromReal(const void* returnAddress) {
  const void* base = gRealBase.load(std::memory_order_relaxed);
  if (!base) return false;
  Dl_info info{};
  return dladdr(returnAddress, &info) && info.dli_fbase == base;
}

Mode mode() { return library().mode; }
const std::string& describe() { return library().where; }
bool available() { return library().mode != Mode::kUnavailable; }

bool has(const char* name) {
  const Library& lib = library();
  return lib.mode != Mode::kUnavailable && dlsym(lib.handle, name) != nullptr;
}

void* symbol(const char* name) {
  const Library& lib = library();
  CCL_CHECK(lib.mode != Mode::kUnavailable, cclInvalidUsage,
            "this needs NVIDIA's NCCL, which is unavailable: " + lib.where);
  void* p = dlsym(lib.handle, name);
  CCL_CHECK(p, cclInvalidUsage, std::string("the real NCCL (") + lib.where + ") has no " + name);
  // A symbol from the library checked at resolution is NVIDIA's; only one found elsewhere
  // (RTLD_NEXT searches every later library) needs the slower check.
  Dl_info info{};
  if (!dladdr(p, &info) || info.dli_fbase != gRealBase.load(std::memory_order_relaxed))
    CCL_CHECK(!isCclFace(p), cclInternalError, std::string(name) + " resolved to ccl itself");
  return p;
}

}  // namespace ccl::nccl::real
