// SPDX-License-Identifier: BSD-3-Clause
// The element math of reductions, written once for host and device (CCL_HD): how each
// cclDataType_t is widened for arithmetic and rounded back, and the four reduction ops. The
// host loops (reduce_kernels.cc) and the CUDA kernels (collectives/cuda) call these, so a CPU
// test of a reduction checks the arithmetic the GPU does.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "ccl/ccl.h"
#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::coll::elem {

// How a storage type is widened for arithmetic and narrowed back.
template <class T>
struct Native {
  using Storage = T;
  using Compute = T;
  static CCL_HD T load(T v) { return v; }
  static CCL_HD T store(T v) { return v; }
};
struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static CCL_HD float load(uint16_t v) { return fp::halfToFloat(v); }
  static CCL_HD uint16_t store(float v) { return fp::floatToHalf(v); }
};
struct Bf16 {
  using Storage = uint16_t;
  using Compute = float;
  static CCL_HD float load(uint16_t v) { return fp::bf16ToFloat(v); }
  static CCL_HD uint16_t store(float v) { return fp::floatToBf16(v); }
};
struct E4m3 {
  using Storage = uint8_t;
  using Compute = float;
  static CCL_HD float load(uint8_t v) { return fp::e4m3ToFloat(v); }
  static CCL_HD uint8_t store(float v) { return fp::floatToE4m3(v, false); }
};
struct E5m2 {
  using Storage = uint8_t;
  using Compute = float;
  static CCL_HD float load(uint8_t v) { return fp::e5m2ToFloat(v); }
  static CCL_HD uint8_t store(float v) { return fp::floatToE5m2(v, false); }
};

// Integer sums and products wrap (computed unsigned, so no signed overflow).
template <class T>
CCL_HD T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class T>
CCL_HD T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Promote to at least unsigned int so that narrow types do not multiply as signed int.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

struct SumOp {
  template <class T>
  CCL_HD T operator()(T a, T b) const {
    return add(a, b);
  }
};
struct ProdOp {
  template <class T>
  CCL_HD T operator()(T a, T b) const {
    return mul(a, b);
  }
};
// Max and min of floating values are commutative, so ranks that combine the same inputs in
// different orders (a tree's, a ring's, a root's) agree to the bit. A NaN on either side
// gives fp32's quiet NaN: a NaN on any rank reaches every rank, as torch.max propagates it
// (`a > b ? a : b` keeps it on one side only), and a fixed NaN leaves no payload to depend on
// the order. Of two zeros, max takes +0 and min -0 (each as a sum, which IEEE rounds so).
// Integers compare as they always did.
template <class T>
CCL_HD T quietNan() {
  return static_cast<T>(fp::bitsFloat(0x7fc00000u));
}
struct MaxOp {
  template <class T>
  CCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return quietNan<T>();
      if (a == b) return a == T(0) ? a + b : a;  // +0 + -0 is +0
    }
    return a > b ? a : b;
  }
};
struct MinOp {
  template <class T>
  CCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return quietNan<T>();
      if (a == b) return a == T(0) ? -(-a - b) : a;  // -0 when either zero is -0
    }
    return a < b ? a : b;
  }
};

// One element of a reduction, a division and the conversions to and from fp32.
template <class Tr, class Op>
CCL_HD typename Tr::Storage reduceOne(typename Tr::Storage a, typename Tr::Storage b) {
  return Tr::store(Op{}(Tr::load(a), Tr::load(b)));
}
// One element of a sum kept in fp32 whatever the type (kReduce's `wide`): acc op b, in fp32.
template <class Tr, class Op>
CCL_HD float accumulateOne(float acc, typename Tr::Storage b) {
  return Op{}(acc, static_cast<float>(Tr::load(b)));
}
template <class Tr>
CCL_HD typename Tr::Storage divideOne(typename Tr::Storage v, typename Tr::Compute divisor) {
  return Tr::store(static_cast<typename Tr::Compute>(Tr::load(v) / divisor));
}
template <class Tr>
CCL_HD float widenOne(typename Tr::Storage v) {
  return static_cast<float>(Tr::load(v));
}
// `divisor` 1 leaves the value as it is (no division, which could round differently).
template <class Tr>
CCL_HD typename Tr::Storage narrowOne(float v, float divisor, bool divide) {
  return Tr::store(static_cast<typename Tr::Compute>(divide ? v / divisor : v));
}

template <class Tr>
constexpr bool kFloating = std::is_floating_point_v<typename Tr::Compute>;

// Calls f with the traits of `dtype` (host side: it picks the kernel).
template <class F>
void dispatchType(cclDataType_t dtype, F&& f) {
  switch (dtype) {
    case cclInt8:
      return f(Native<int8_t>{});
    case cclUint8:
      return f(Native<uint8_t>{});
    case cclInt32:
      return f(Native<int32_t>{});
    case cclUint32:
      return f(Native<uint32_t>{});
    case cclInt64:
      return f(Native<int64_t>{});
    case cclUint64:
      return f(Native<uint64_t>{});
    case cclFloat16:
      return f(Half{});
    case cclFloat32:
      return f(Native<float>{});
    case cclFloat64:
      return f(Native<double>{});
    case cclBfloat16:
      return f(Bf16{});
    case cclFloat8e4m3:
      return f(E4m3{});
    case cclFloat8e5m2:
      return f(E5m2{});
    default:
      throw Error(cclInvalidArgument, "invalid data type " + std::to_string(dtype));
  }
}

// Calls f with the op functor of `op` (cclAvg reduces as cclSum).
template <class F>
void dispatchOp(cclRedOp_t op, F&& f) {
  switch (op) {
    case cclSum:
    case cclAvg:
      return f(SumOp{});
    case cclProd:
      return f(ProdOp{});
    case cclMax:
      return f(MaxOp{});
    case cclMin:
      return f(MinOp{});
    default:
      throw Error(cclInvalidArgument, "invalid reduction op " + std::to_string(op));
  }
}

}  // namespace ccl::coll::elem
