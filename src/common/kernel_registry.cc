// SPDX-License-Identifier: BSD-3-Clause
#include "common/kernel_registry.h"

#include <mutex>

namespace ccl {
namespace {

// Function-local: files of kernels register during static initialisation, in any order.
std::mutex& mutex() {
  static std::mutex m;
  return m;
}

std::vector<const void*>& registered() {
  static std::vector<const void*> v;
  return v;
}

}  // namespace

void registerKernelLibrary(const void* kernel) {
  std::lock_guard<std::mutex> lock(mutex());
  registered().push_back(kernel);
}

std::vector<const void*> registeredKernelLibraries() {
  std::lock_guard<std::mutex> lock(mutex());
  return registered();
}

}  // namespace ccl
