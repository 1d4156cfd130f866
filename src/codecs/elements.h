// SPDX-License-Identifier: BSD-3-Clause
// Typed element access for the CPU loops: the codecs take fp32, bf16 and fp16 and work in
// fp32 inside; these tags let one template serve all three.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"
#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::codec {

struct F32 {
  using Storage = float;
  static float load(const float* p, size_t i) { return p[i]; }
  static void store(float* p, size_t i, float v) { p[i] = v; }
};

struct Bf16 {
  using Storage = uint16_t;
  static float load(const uint16_t* p, size_t i) { return fp::bf16ToFloat(p[i]); }
  static void store(uint16_t* p, size_t i, float v) { p[i] = fp::floatToBf16(v); }
};

struct F16 {
  using Storage = uint16_t;
  static float load(const uint16_t* p, size_t i) { return fp::halfToFloat(p[i]); }
  static void store(uint16_t* p, size_t i, float v) { p[i] = fp::floatToHalf(v); }
};

// Calls fn(Tag{}) for the tag matching `type`; throws for a type codecs do not take.
template <class Fn>
decltype(auto) withElementType(cclDataType_t type, Fn&& fn) {
  switch (type) {
    case cclFloat32:
      return fn(F32{});
    case cclBfloat16:
      return fn(Bf16{});
    case cclFloat16:
      return fn(F16{});
    default:
      throw Error(cclInvalidArgument, "codecs take float32, bfloat16 or float16 data");
  }
}

}  // namespace ccl::codec
