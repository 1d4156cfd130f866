// SPDX-License-Identifier: BSD-3-Clause
// Typed element access on the device: the device twins of codecs/elements.h (whose load and
// store are host-only), plus loads and stores of eight elements at once, 128-bit wide when
// the address allows it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"
#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::codec::cuda {

constexpr int kGroup = 8;  // elements per thread step; a multiple of every code packing

struct DevF32 {
  using Storage = float;
  static constexpr bool kIsF32 = true;
  __device__ static float load(const float* p, size_t i) { return p[i]; }
  __device__ static void store(float* p, size_t i, float v) { p[i] = v; }
  // p[0, 8) with two 128-bit loads; p is 16-byte aligned.
  __device__ static void load8(const float* p, float v[kGroup]) {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
  __device__ static void store8(float* p, const float v[kGroup]) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
};

struct Bf16Conv {
  __device__ static float toFloat(uint16_t h) { return fp::bf16ToFloat(h); }
  __device__ static uint16_t fromFloat(float f) { return fp::floatToBf16(f); }
};
struct HalfConv {
  __device__ static float toFloat(uint16_t h) { return fp::halfToFloat(h); }
  __device__ static uint16_t fromFloat(float f) { return fp::floatToHalf(f); }
};

// 16-bit formats: eight elements are one 128-bit word.
template <class C>
struct Dev16 {
  using Storage = uint16_t;
  static constexpr bool kIsF32 = false;
  __device__ static float load(const uint16_t* p, size_t i) { return C::toFloat(p[i]); }
  __device__ static void store(uint16_t* p, size_t i, float v) { p[i] = C::fromFloat(v); }
  __device__ static void load8(const uint16_t* p, float v[kGroup]) {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = C::toFloat(static_cast<uint16_t>(words[k]));
      v[2 * k + 1] = C::toFloat(static_cast<uint16_t>(words[k] >> 16));
    }
  }
  __device__ static void store8(uint16_t* p, const float v[kGroup]) {
    uint32_t words[4];
    for (int k = 0; k < 4; ++k)
      words[k] = C::fromFloat(v[2 * k]) | (static_cast<uint32_t>(C::fromFloat(v[2 * k + 1])) << 16);
    *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
  }
};

using DevBf16 = Dev16<Bf16Conv>;
using DevF16 = Dev16<HalfConv>;

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Elements [i, i + cnt) of x as fp32 (cnt <= 8; the rest of v is 0). `vec`: x is 16-byte
// aligned, so a full group at a multiple of 8 can be loaded as 128-bit words.
template <class T>
__device__ void loadGroup(const typename T::Storage* x, size_t i, uint32_t cnt, bool vec, float v[kGroup]) {
  if (vec && cnt == kGroup) {
    T::load8(x + i, v);
    return;
  }
  for (uint32_t t = 0; t < kGroup; ++t) v[t] = t < cnt ? T::load(x, i + t) : 0.0f;
}

template <class T>
__device__ void storeGroup(typename T::Storage* y, size_t i, uint32_t cnt, bool vec, const float v[kGroup]) {
  if (vec && cnt == kGroup) {
    T::store8(y + i, v);
    return;
  }
  for (uint32_t t = 0; t < cnt; ++t) T::store(y, i + t, v[t]);
}

// Calls fn(Tag{}) for the device tag matching `type`; throws for a type codecs do not take.
template <class Fn>
decltype(auto) withDeviceType(cclDataType_t type, Fn&& fn) {
  switch (type) {
    case cclFloat32:
      return fn(DevF32{});
    case cclBfloat16:
      return fn(DevBf16{});
    case cclFloat16:
      return fn(DevF16{});
    default:
      throw Error(cclInvalidArgument, "codecs take float32, bfloat16 or float16 data");
  }
}

}  // namespace ccl::codec::cuda
