// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/reduce_kernels.h"

#include "collectives/exec/element_ops.h"
#include "collectives/exec/reduce_kernels_x86.h"

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

// How many leading elements of a 16-bit float loop the x86 loops of reduce_kernels_x86.h
// did (`run` calls one with the lanes of `dtype`), 0 where the CPU lacks them or for another
// type; the portable loop does the rest.
template <class F>
size_t lanesDone(cclDataType_t dtype, F&& run) {
  if (!codec::detail::x86::available()) return 0;
  if (dtype == cclFloat16) return run(x86::HalfLanes{});
  if (dtype == cclBfloat16) return run(x86::Bf16Lanes{});
  return 0;
}

}  // namespace

void widenToFloat(float* dst, const void* src, size_t count, cclDataType_t dtype) {
  dispatchType(dtype, [&](auto tr) {
    using Tr = decltype(tr);
    if constexpr (kFloating<Tr>) {
      const auto* s = static_cast<const typename Tr::Storage*>(src);
      const size_t done = lanesDone(dtype, [&](auto lanes) {
        return x86::widen<decltype(lanes)>(dst, reinterpret_cast<const uint16_t*>(s), count);
      });
      for (size_t i = done; i < count; ++i) dst[i] = widenOne<Tr>(s[i]);
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
      const size_t done = lanesDone(dtype, [&](auto lanes) {
        return x86::narrow<decltype(lanes)>(reinterpret_cast<uint16_t*>(d), src, count, div, divide);
      });
      for (size_t i = done; i < count; ++i) d[i] = narrowOne<Tr>(src[i], div, divide);
    } else {
      throw Error(cclInvalidArgument, "narrowFromFloat: integer type");
    }
  });
}

void reduce(void* dst, const void* a, const void* b, size_t count, cclDataType_t dtype, cclRedOp_t op) {
  const bool sum = op == cclSum || op == cclAvg;
  const size_t done = !sum ? 0 : lanesDone(dtype, [&](auto lanes) {
    return x86::sum<decltype(lanes)>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                     static_cast<const uint16_t*>(b), count);
  });
  const size_t at = done * sizeof(uint16_t);  // bytes done (only 16-bit loops do any)
  dispatchType(dtype, [&](auto tr) {
    dispatchOp(op, [&](auto o) {
      reduceLoop<decltype(tr), decltype(o)>(static_cast<char*>(dst) + at, static_cast<const char*>(a) + at,
                                            static_cast<const char*>(b) + at, count - done);
    });
  });
}

void reduceWide(float* dst, const float* a, const void* b, size_t count, cclDataType_t dtype, cclRedOp_t op) {
  dispatchType(dtype, [&](auto tr) {
    using Tr = decltype(tr);
    if constexpr (kFloating<Tr>) {
      const size_t done = op != cclSum && op != cclAvg ? 0 : lanesDone(dtype, [&](auto lanes) {
        return x86::sumWide<decltype(lanes)>(dst, a, static_cast<const uint16_t*>(b), count);
      });
      dispatchOp(op, [&](auto o) {
        reduceWideLoop<Tr, decltype(o)>(dst + done, a + done, static_cast<const char*>(b) + done * sizeof(uint16_t),
                                        count - done);
      });
    } else {
      throw Error(cclInvalidArgument, "reduceWide: integer type");
    }
  });
}

void divide(void* dst, const void* src, size_t count, cclDataType_t dtype, int divisor) {
  const size_t done = lanesDone(dtype, [&](auto lanes) {
    return x86::divide<decltype(lanes)>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count,
                                        static_cast<float>(divisor));
  });
  const size_t at = done * sizeof(uint16_t);
  dispatchType(dtype, [&](auto tr) {
    divideType<decltype(tr)>(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at, count - done, divisor);
  });
}

}  // namespace ccl::coll
