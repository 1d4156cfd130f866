// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/reduce_kernels.h"

#include "collectives/exec/element_ops.h"

namespace ccl::coll {
namespace {

using namespace elem;

template <class Tr, class Op>
void reduceLoop(void* dst, const void* a, const void* b, size_t n) {
  using S = typename Tr::Storage;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = reduceOne<Tr, Op>(x[i], y[i]);
}

template <class Tr, class Op>
void reduceWideLoop(float* dst, const float* a, const void* b, size_t n) {
  const auto* y = static_cast<const typename Tr::Storage*>(b);
  for (size_t i = 0; i < n; ++i) dst[i] = accumulateOne<Tr, Op>(a[i], y[i]);
}

template <class Tr>
void divideType(void* dst, const void* src, size_t n, int divisor) {
  using S = typename Tr::Storage;
  using C = typename Tr::Compute;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(src);
  const C div = static_cast<C>(divisor);
  for (size_t i = 0; i < n; ++i) d[i] = divideOne<Tr>(x[i], div);
}

}  // namespace

void widenToFloat(float* dst, const void* src, size_t count, cclDataType_t dtype) {
  dispatchType(dtype, [&](auto tr) {
    using Tr = decltype(tr);
    if constexpr (kFloating<Tr>) {
      const auto* s = static_cast<const typename Tr::Storage*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = widenOne<Tr>(s[i]);
    } else {
      throw Error(cclInvalidArgument, "widenToFloat: integer type");
    }
  });
}

void narrowFromFloat(void* dst, const float* src, size_t count, cclDataType_t dtype, int divisor) {
  dispatchType(dtype, [&](auto tr) {
    using Tr = decltype(tr);
    if constexpr (kFloating<Tr>) {
      auto* d = static_cast<typename Tr::Storage*>(dst);
      const float div = static_cast<float>(divisor);
      const bool divide = divisor != 1;
      for (size_t i = 0; i < count; ++i) d[i] = narrowOne<Tr>(src[i], div, divide);
    } else {
      throw Error(cclInvalidArgument, "narrowFromFloat: integer type");
    }
  });
}

void reduce(void* dst, const void* a, const void* b, size_t count, cclDataType_t dtype, cclRedOp_t op) {
  dispatchType(dtype, [&](auto tr) {
    dispatchOp(op, [&](auto o) { reduceLoop<decltype(tr), decltype(o)>(dst, a, b, count); });
  });
}

void reduceWide(float* dst, const float* a, const void* b, size_t count, cclDataType_t dtype, cclRedOp_t op) {
  dispatchType(dtype, [&](auto tr) {
    using Tr = decltype(tr);
    if constexpr (kFloating<Tr>) {
      dispatchOp(op, [&](auto o) { reduceWideLoop<Tr, decltype(o)>(dst, a, b, count); });
    } else {
      throw Error(cclInvalidArgument, "reduceWide: integer type");
    }
  });
}

void divide(void* dst, const void* src, size_t count, cclDataType_t dtype, int divisor) {
  dispatchType(dtype, [&](auto tr) { divideType<decltype(tr)>(dst, src, count, divisor); });
}

}  // namespace ccl::coll
