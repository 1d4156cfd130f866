// SPDX-License-Identifier: BSD-3-Clause
// The real NVIDIA NCCL library, for what ccl does not serve itself (device buffers,
// device memory allocation, the device API). It is found either as the next library
// after ccl (interposer mode: LD_PRELOAD=libccl_nccl.so, NCCL linked by the program) or by
// dlopen of CCL_NCCL_LIBRARY with RTLD_LOCAL (drop-in mode: ccl loaded as libnccl.so.2).
// A symbol that resolves into a copy of ccl's face is refused, so a call never loops back.
#pragma once

#include <string>

namespace ccl::nccl::real {

enum class Mode { kInterposer, kDropIn, kUnavailable };

// How the real library was found (resolved once per process).
Mode mode();
// Where it was found, or why not.
const std::string& describe();

// True when the real library is loaded and not ccl itself.
bool available();

// The address of `name` ("pncclAllReduce", ...) in the real library. Throws
// Error(cclInvalidUsage) naming the reason when the library or the symbol is missing.
void* symbol(const char* name);

// True when the real library is loaded and exports `name` (a function of a later NCCL than
// the oldest the face runs over: ncclAllReduceConfig arrived in 2.31).
bool has(const char* name);

// True when `addr` lies inside a copy of ccl's NCCL face: this library or another file built
// from the same objects (libccl_nccl.so and the drop-in libnccl.so.2 are two files, so a
// program may load both). Each copy carries an ELF note that marks it.
bool isCclFace(const void* addr);

// True when `returnAddress` lies inside NVIDIA's library (once it has been resolved). NVIDIA's
// libnccl calls some of its own public functions through the PLT (ncclBroadcast,
// ncclCommGetAsyncError, ncclGetUniqueId, ...); under LD_PRELOAD those calls land here, with
// NVIDIA's communicators, and must go back to NVIDIA's implementation.
bool calledFromReal(const void* returnAddress);

// Throws Error(the same code) naming `what` ("pncclAllReduce", "ncclCommSuspend", ...) and
// the real library's last error, unless `result` is ncclSuccess or ncclInProgress.
void checkResult(int result, const std::string& what);

}  // namespace ccl::nccl::real

// Calls the real library's `pncclXxx` with the given arguments: CCL_REAL(ncclAllReduce)(...).
#define CCL_REAL(fn) (reinterpret_cast<decltype(&p##fn)>(::ccl::nccl::real::symbol("p" #fn)))

// First statement of an exported function NVIDIA's library calls itself: such calls are
// handed back to NVIDIA's implementation with the same arguments.
#define CCL_RETURN_IF_CALLED_FROM_REAL(fn, ...) \
  if (::ccl::nccl::real::calledFromReal(__builtin_return_address(0))) return CCL_REAL(fn)(__VA_ARGS__)
