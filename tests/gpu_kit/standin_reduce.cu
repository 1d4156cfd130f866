// SPDX-License-Identifier: BSD-3-Clause
// The stand-in NCCL's one kernel (standin_nccl.cc): element i of the output is the reduction
// of element i of every source, in rank order, as NVIDIA's ncclRedOp_t defines it. The
// sources are other thread ranks' buffers on the same device. Test code, not a product: it
// only has to be right, not fast.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "standin_reduce.h"

namespace standin {
namespace {

struct Sources {
  const void* p[kMaxRanks];
};

// ncclRedOp_t's builtin values.
enum : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

// Integers and fp32/fp64 combine in their own type (integers wrap, as NCCL's do); the
// 16-bit and 8-bit floats through fp32, rounded once at the end.
template <class T>
struct Math {
  using Acc = T;
  __device__ static Acc load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  __device__ static T store(Acc v) { return v; }
};
template <>
struct Math<__half> {
  using Acc = float;
  __device__ static Acc load(const void* p, size_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
  __device__ static __half store(Acc v) { return __float2half_rn(v); }
};
template <>
struct Math<__nv_bfloat16> {
  using Acc = float;
  __device__ static Acc load(const void* p, size_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
  __device__ static __nv_bfloat16 store(Acc v) { return __float2bfloat16_rn(v); }
};
template <>
struct Math<__nv_fp8_e4m3> {
  using Acc = float;
  __device__ static Acc load(const void* p, size_t i) {
    return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(p)[i]);
  }
  __device__ static __nv_fp8_e4m3 store(Acc v) { return __nv_fp8_e4m3(v); }
};
template <>
struct Math<__nv_fp8_e5m2> {
  using Acc = float;
  __device__ static Acc load(const void* p, size_t i) {
    return static_cast<float>(static_cast<const __nv_fp8_e5m2*>(p)[i]);
  }
  __device__ static __nv_fp8_e5m2 store(Acc v) { return __nv_fp8_e5m2(v); }
};

template <class A>
__device__ A combine(A a, A b, int op) {
  switch (op) {
    case kProd:
      return a * b;
    case kMax:
      return b > a ? b : a;
    case kMin:
      return b < a ? b : a;
    default:  // sum, and avg's sum
      return a + b;
  }
}

template <class T>
__global__ void reduceKernel(Sources s, int n, T* out, size_t count, int op) {
  using M = Math<T>;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    typename M::Acc acc = M::load(s.p[0], i);
    for (int j = 1; j < n; ++j) acc = combine(acc, M::load(s.p[j], i), op);
    if (op == kAvg) acc = acc / static_cast<typename M::Acc>(n);
    out[i] = M::store(acc);
  }
}

template <class T>
cudaError_t launch(const Sources& s, int n, void* out, size_t count, int op, cudaStream_t stream) {
  const unsigned threads = 256;
  const size_t wanted = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  reduceKernel<T><<<blocks, threads, 0, stream>>>(s, n, static_cast<T*>(out), count, op);
  return cudaGetLastError();
}

}  // namespace

cudaError_t reduce(const void* const* sources, int n, void* out, size_t count, int type, int op, cudaStream_t stream) {
  if (n < 1 || n > kMaxRanks || op < kSum || op > kAvg) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  Sources s{};
  for (int j = 0; j < n; ++j) s.p[j] = sources[j];
  switch (type) {  // ncclDataType_t's order
    case 0:
      return launch<int8_t>(s, n, out, count, op, stream);
    case 1:
      return launch<uint8_t>(s, n, out, count, op, stream);
    case 2:
      return launch<int32_t>(s, n, out, count, op, stream);
    case 3:
      return launch<uint32_t>(s, n, out, count, op, stream);
    case 4:
      return launch<int64_t>(s, n, out, count, op, stream);
    case 5:
      return launch<uint64_t>(s, n, out, count, op, stream);
    case 6:
      return launch<__half>(s, n, out, count, op, stream);
    case 7:
      return launch<float>(s, n, out, count, op, stream);
    case 8:
      return launch<double>(s, n, out, count, op, stream);
    case 9:
      return launch<__nv_bfloat16>(s, n, out, count, op, stream);
    case 10:
      return launch<__nv_fp8_e4m3>(s, n, out, count, op, stream);
    case 11:
      return launch<__nv_fp8_e5m2>(s, n, out, count, op, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace standin
