// SPDX-License-Identifier: BSD-3-Clause
// Run-time dispatch to the hand-written x86 loops of the codecs (quantizer_x86.h,
// select_x86.h): they are compiled for AVX2, F16C and POPCNT whatever the build's target, and
// called only when CPUID reports all three. Every such loop has a portable twin that the tests
// compare it with bit for bit.
#pragma once

#include <atomic>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define CCL_CODECS_X86 1
#define CCL_X86_TARGET __attribute__((target("avx2,f16c,popcnt")))
#else
#define CCL_CODECS_X86 0
#define CCL_X86_TARGET
#endif

namespace ccl::codec::detail::x86 {

// Whether the CPU has what the x86 loops need.
#if CCL_CODECS_X86
inline bool cpuHasThem() {
  static const bool has = [] {
    // Not every compiler's __builtin_cpu_supports knows "f16c": ask CPUID (leaf 1, ECX).
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C) != 0;
  }();
  return has;
}
#else
inline bool cpuHasThem() { return false; }
#endif

// Whether the x86 loops may run where the CPU has them. The tests switch them off to check
// the portable loops on the same CPU (tests/unit/codecs: PortableLoopsOnly); nothing else does.
inline std::atomic<bool> allowed{true};

// Whether the codecs use the x86 loops now.
inline bool available() { return cpuHasThem() && allowed.load(std::memory_order_relaxed); }

}  // namespace ccl::codec::detail::x86
