// SPDX-License-Identifier: BSD-3-Clause
// Device memory allocation, buffer/window registration and the window queries. ncclMemAlloc/
// Free belong to the real NCCL (they allocate device memory NVIDIA's kernels may map); without
// one that has them (none loaded, ranks sharing a GPU, one before 2.19) the CUDA runtime's
// cudaMalloc serves, so that a program that allocates its buffers so (nccl-tests 2.19 does)
// runs on ccl's device path. Registration is an optimisation hint: host buffers get a handle
// of ccl's own (ccl needs no registration), device buffers are also registered with the real
// communicator. Pointers into the windows of other ranks exist only for device memory, where
// NVIDIA's NCCL maps them.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "common/cuda_probe.h"
#include "common/error.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/real_nccl.h"

namespace ccl::nccl {
namespace {

// Every live window by the handle its owner holds. Never destroyed: communicators (and their
// windows) may be freed by exit handlers that run after static destructors.
struct WindowList {
  std::mutex mutex;
  std::unordered_map<const void*, const ccl_nccl_Registration*> byHandle;
};
WindowList& windows() {
  static WindowList* list = new WindowList;
  return *list;
}

// What ncclMemAlloc took from the CUDA runtime itself: ncclMemFree gives it back there.
struct OwnMemory {
  std::mutex mutex;
  std::unordered_set<void*> ptrs;
};
OwnMemory& ownMemory() {
  static OwnMemory* m = new OwnMemory;
  return *m;
}

const void* windowHandle(const ccl_nccl_Registration& reg) { return reg.realHandle ? reg.realHandle : &reg; }

void checkReal(ncclResult_t r, const char* what) {
  CCL_CHECK(r == ncclSuccess, static_cast<cclResult_t>(r),
            std::string("the real NCCL's ") + what + " failed: " + CCL_REAL(ncclGetLastError)(nullptr));
}

// The handle handed out: the real NCCL's own for device memory (device code uses windows
// directly), else ccl's record.
void* addRegistration(ncclComm& c, void* buff, size_t size, bool window, int winFlags) {
  auto reg = std::make_unique<ccl_nccl_Registration>();
  reg->buff = buff;
  reg->size = size;
  reg->window = window;
  if (c.real && cuda::isDevicePointer(buff)) {
    if (window)
      checkReal(CCL_REAL(ncclCommWindowRegister)(c.real, buff, size, reinterpret_cast<ncclWindow_t*>(&reg->realHandle),
                                                 winFlags),
                "ncclCommWindowRegister");
    else
      checkReal(CCL_REAL(ncclCommRegister)(c.real, buff, size, &reg->realHandle), "ncclCommRegister");
  }
  void* out = reg->realHandle ? reg->realHandle : reg.get();
  if (window) {
    std::lock_guard<std::mutex> lock(windows().mutex);
    windows().byHandle[out] = reg.get();
  }
  std::lock_guard<std::mutex> lock(c.regMutex);
  c.registrations.push_back(std::move(reg));
  return out;
}

// The record of `handle` among the communicator's registrations (NULL if there is none).
// Valid while the caller does not deregister it.
const ccl_nccl_Registration* findRegistration(ncclComm& c, const void* handle, bool window) {
  std::lock_guard<std::mutex> lock(c.regMutex);
  auto it = std::find_if(c.registrations.begin(), c.registrations.end(), [&](const auto& r) {
    return (r.get() == handle || (r->realHandle && r->realHandle == handle)) && r->window == window;
  });
  return it == c.registrations.end() ? nullptr : it->get();
}

// Multimem and peer pointers are mappings NVIDIA's NCCL makes for device memory only.
void requireDeviceWindow(const void* handle, const char* what) {
  WindowInfo w = findWindow(handle);
  CCL_CHECK(w.device, cclInvalidUsage,
            std::string(what) +
                " exist only for windows on device memory (served by NVIDIA's NCCL); "
                "this window registers host memory");
}

void removeRegistration(ncclComm& c, const void* handle, bool window) {
  std::unique_ptr<ccl_nccl_Registration> reg;
  {
    std::lock_guard<std::mutex> lock(c.regMutex);
    auto it = std::find_if(c.registrations.begin(), c.registrations.end(), [&](const auto& r) {
      return (r.get() == handle || (r->realHandle && r->realHandle == handle)) && r->window == window;
    });
    CCL_CHECK(it != c.registrations.end(), cclInvalidArgument,
              std::string(window ? "window" : "handle") + " was not registered with this communicator");
    reg = std::move(*it);
    c.registrations.erase(it);
  }
  if (!reg->realHandle) return;
  if (window)
    checkReal(CCL_REAL(ncclCommWindowDeregister)(c.real, static_cast<ncclWindow_t>(reg->realHandle)),
              "ncclCommWindowDeregister");
  else
    checkReal(CCL_REAL(ncclCommDeregister)(c.real, reg->realHandle), "ncclCommDeregister");
}

}  // namespace

WindowInfo findWindow(const void* handle) {
  CCL_CHECK(handle, cclInvalidArgument, "the window is NULL");
  std::lock_guard<std::mutex> lock(windows().mutex);
  auto it = windows().byHandle.find(handle);
  CCL_CHECK(it != windows().byHandle.end(), cclInvalidArgument,
            "the window is not a live window of this library (never registered, or deregistered)");
  return WindowInfo{it->second->realHandle != nullptr, it->second->buff};
}

}  // namespace ccl::nccl

ccl_nccl_Registration::~ccl_nccl_Registration() {
  if (!window) return;
  using ccl::nccl::windows;
  std::lock_guard<std::mutex> lock(windows().mutex);
  auto it = windows().byHandle.find(ccl::nccl::windowHandle(*this));
  if (it != windows().byHandle.end() && it->second == this) windows().byHandle.erase(it);
}

using namespace ccl;
using namespace ccl::nccl;

extern "C" {

ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclMemAlloc, ptr, size);
  return faceGuard("ncclMemAlloc", [&] {
    CCL_CHECK(ptr, cclInvalidArgument, "ptr is NULL");
    if (real::has("pncclMemAlloc")) return checkReal(CCL_REAL(ncclMemAlloc)(ptr, size), "ncclMemAlloc");
    CCL_CHECK(cuda::deviceAvailable(), cclInvalidUsage,
              "ncclMemAlloc needs NVIDIA's NCCL or a CUDA device, and neither is here (NVIDIA's NCCL: " +
                  real::describe() + ")");
    *ptr = cuda::deviceAlloc(size);
    OwnMemory& m = ownMemory();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.ptrs.insert(*ptr);
  });
}

ncclResult_t pncclMemFree(void* ptr) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclMemFree, ptr);
  return faceGuard("ncclMemFree", [&] {
    if (!ptr) return;
    bool own = false;
    {
      OwnMemory& m = ownMemory();
      std::lock_guard<std::mutex> lock(m.mutex);
      own = m.ptrs.erase(ptr) > 0;
    }
    if (own) return cuda::deviceFree(ptr);
    checkReal(CCL_REAL(ncclMemFree)(ptr), "ncclMemFree");
  });
}

ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommRegister, comm, buff, size, handle);
  return faceGuard("ncclCommRegister", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK(handle, cclInvalidArgument, "handle is NULL");
    CCL_CHECK(buff || size == 0, cclInvalidArgument, "buff is NULL");
    *handle = addRegistration(c, buff, size, false, 0);
  });
}

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommDeregister, comm, handle);
  return faceGuard("ncclCommDeregister", [&] { removeRegistration(ccl::nccl::handle(comm), handle, false); });
}

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  return faceGuard("ncclCommWindowRegister", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK(win, cclInvalidArgument, "win is NULL");
    CCL_CHECK(buff || size == 0, cclInvalidArgument, "buff is NULL");
    CCL_CHECK((winFlags & ~NCCL_WIN_COLL_SYMMETRIC) == 0, cclInvalidArgument,
              "unknown winFlags " + std::to_string(winFlags));
    *win = reinterpret_cast<ncclWindow_t>(addRegistration(c, buff, size, true, winFlags));
  });
}

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommWindowDeregister, comm, win);
  return faceGuard("ncclCommWindowDeregister", [&] { removeRegistration(handle(comm), win, true); });
}

// The buffer a window was registered with: ccl's record knows it for host windows; the
// real NCCL answers for its own.
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclWinGetUserPtr, comm, win, outUserPtr);
  return faceGuard("ncclWinGetUserPtr", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK(win, cclInvalidArgument, "win is NULL");
    CCL_CHECK(outUserPtr, cclInvalidArgument, "outUserPtr is NULL");
    const ccl_nccl_Registration* reg = findRegistration(c, win, true);
    CCL_CHECK(reg, cclInvalidArgument, "win was not registered with this communicator");
    if (!reg->realHandle) {
      *outUserPtr = reg->buff;
      return;
    }
    checkReal(CCL_REAL(ncclWinGetUserPtr)(c.real, win, outUserPtr), "ncclWinGetUserPtr");
  });
}

ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclGetLsaMultimemDevicePointer, window, offset, outPtr);
  return faceGuard("ncclGetLsaMultimemDevicePointer", [&] {
    CCL_CHECK(outPtr, cclInvalidArgument, "outPtr is NULL");
    requireDeviceWindow(window, "multimem pointers");
    checkReal(CCL_REAL(ncclGetLsaMultimemDevicePointer)(window, offset, outPtr), "ncclGetLsaMultimemDevicePointer");
  });
}

ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclGetPeerDevicePointer, window, offset, peer, outPtr);
  return faceGuard("ncclGetPeerDevicePointer", [&] {
    CCL_CHECK(outPtr, cclInvalidArgument, "outPtr is NULL");
    requireDeviceWindow(window, "peer device pointers");
    checkReal(CCL_REAL(ncclGetPeerDevicePointer)(window, offset, peer, outPtr), "ncclGetPeerDevicePointer");
  });
}

}  // extern "C"

CCL_NCCL_ALIAS(ncclMemAlloc)
CCL_NCCL_ALIAS(ncclMemFree)
CCL_NCCL_ALIAS(ncclCommRegister)
CCL_NCCL_ALIAS(ncclCommDeregister)
CCL_NCCL_ALIAS(ncclCommWindowRegister)
CCL_NCCL_ALIAS(ncclCommWindowDeregister)
CCL_NCCL_ALIAS(ncclWinGetUserPtr)
CCL_NCCL_ALIAS(ncclGetLsaMultimemDevicePointer)
CCL_NCCL_ALIAS(ncclGetPeerDevicePointer)
