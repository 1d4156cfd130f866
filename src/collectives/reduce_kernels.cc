// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/reduce_kernels.h"

#include <cstdint>
#include <type_traits>

#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::coll {
namespace {

// How a storage type is widened for arithmetic and narrowed back.
template <class T>
struct Native {
  using Storage = T;
  using Compute = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};
struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return fp::halfToFloat(v); }
  static uint16_t store(float v) { return fp::floatToHalf(v); }
};
struct Bf16 {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return fp::bf16ToFloat(v); }
  static uint16_t store(float v) { return fp::floatToBf16(v); }
};
struct E4m3 {
  using Storage = uint8_t;
  using Compute = float;
  static float load(uint8_t v) { return fp::e4m3ToFloat(v); }
  static uint8_t store(float v) { return fp::floatToE4m3(v, false); }
};
struct E5m2 {
  using Storage = uint8_t;
  using Compute = float;
  static float load(uint8_t v) { return fp::e5m2ToFloat(v); }
  static uint8_t store(float v) { return fp::floatToE5m2(v, false); }
};

// Integer sums and products wrap (computed unsigned, so no signed overflow).
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class T>
T mul(T a, T b) {
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
  T operator()(T a, T b) const {
    return add(a, b);
  }
};
struct ProdOp {
  template <class T>
  T operator()(T a, T b) const {
    return mul(a, b);
  }
};
struct MaxOp {
  template <class T>
  T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct MinOp {
  template <class T>
  T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};

template <class Tr, class Op>
void reduceLoop(void* dst, const void* a, const void* b, size_t n) {
  using S = typename Tr::Storage;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  Op op;
  for (size_t i = 0; i < n; ++i) d[i] = Tr::store(op(Tr::load(x[i]), Tr::load(y[i])));
}

template <class Tr>
void reduceType(void* dst, const void* a, const void* b, size_t n, cclRedOp_t op) {
  switch (op) {
    case cclSum:
    case cclAvg:
      return reduceLoop<Tr, SumOp>(dst, a, b, n);
    case cclProd:
      return reduceLoop<Tr, ProdOp>(dst, a, b, n);
    case cclMax:
      return reduceLoop<Tr, MaxOp>(dst, a, b, n);
    case cclMin:
      return reduceLoop<Tr, MinOp>(dst, a, b, n);
    default:
      throw Error(cclInvalidArgument, "invalid reduction op " + std::to_string(op));
  }
}

template <class Tr>
void divideType(void* dst, size_t n, int divisor) {
  using S = typename Tr::Storage;
  using C = typename Tr::Compute;
  S* d = static_cast<S*>(dst);
  const C div = static_cast<C>(divisor);
  for (size_t i = 0; i < n; ++i) d[i] = Tr::store(static_cast<C>(Tr::load(d[i]) / div));
}

// Calls f with the traits of `dtype`.
template <class F>
void dispatch(cclDataType_t dtype, F&& f) {
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

template <class Tr>
void widenType(float* dst, const void* src, size_t n) {
  const auto* s = static_cast<const typename Tr::Storage*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(Tr::load(s[i]));
}

template <class Tr>
void narrowType(void* dst, const float* src, size_t n, int divisor) {
  using C = typename Tr::Compute;
  auto* d = static_cast<typename Tr::Storage*>(dst);
  if (divisor == 1) {
    for (size_t i = 0; i < n; ++i) d[i] = Tr::store(static_cast<C>(src[i]));
  } else {
    const float div = static_cast<float>(divisor);
    for (size_t i = 0; i < n; ++i) d[i] = Tr::store(static_cast<C>(src[i] / div));
  }
}

}  // namespace

void widenToFloat(float* dst, const void* src, size_t count, cclDataType_t dtype) {
  dispatch(dtype, [&](auto tr) {
    if constexpr (std::is_floating_point_v<typename decltype(tr)::Compute>) {
      widenType<decltype(tr)>(dst, src, count);
    } else {
      throw Error(cclInvalidArgument, "widenToFloat: integer type");
    }
  });
}

void narrowFromFloat(void* dst, const float* src, size_t count, cclDataType_t dtype, int divisor) {
  dispatch(dtype, [&](auto tr) {
    if constexpr (std::is_floating_point_v<typename decltype(tr)::Compute>) {
      narrowType<decltype(tr)>(dst, src, count, divisor);
    } else {
      throw Error(cclInvalidArgument, "narrowFromFloat: integer type");
    }
  });
}

void reduce(void* dst, const void* a, const void* b, size_t count, cclDataType_t dtype, cclRedOp_t op) {
  dispatch(dtype, [&](auto tr) { reduceType<decltype(tr)>(dst, a, b, count, op); });
}

void divideInPlace(void* dst, size_t count, cclDataType_t dtype, int divisor) {
  dispatch(dtype, [&](auto tr) { divideType<decltype(tr)>(dst, count, divisor); });
}

}  // namespace ccl::coll
